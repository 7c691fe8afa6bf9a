#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Goodput under a node killed every 30 s and replaced 5 s later (issue 39's target), and the
checkpoint memory each agent holds (--memory).

bench/goodput_train.py (DDP or ZeRO-1, CPU, gloo, --step-time of simulated compute a step) on 4
"nodes" of one worker each on this host, three ways:

  store     elastic-agent --warm-workers --checkpoint-memory: every step saved into the agents'
            memory (replicated to the ring successor, fetched on resume)
  disk      elastic-agent --warm-workers, no store: torch.save to a shared directory every
            --every (20) steps, the newest whole one loaded on resume
  torchrun  torch.distributed.run (bench/torchrun_launcher.py, c10d), the same disk checkpoint

Each worker runs in a cgroup v1 cpu cgroup of its own (bench/lib/cpu_cap.sh: cpu.cfs_quota_us
/ cpu.cfs_period_us = --cpu cores), so a step costs the same however many workers share the
machine. Timeline: t0 = every rank of the first world-4 round logged its first step; at t0 +
30 k (k = 1, 2, ... before --seconds) a node is SIGKILLed (the launcher and its workers: the
machine is gone) and 5 s later a new node (a new node id) starts; at t0 + --seconds the run
ends. The victim is the oldest live node that is neither n0 (torchrun's c10d store host) nor
the node of rank 0. Measured from the lines as they reach us (monotonic clock):

  undisturbed step time  rank 0's steps between t0 + 3 s and the first kill (a linear fit)
  final step             the last step rank 0 logged before the end
  goodput                (final step - the step at t0) x undisturbed step time / --seconds

--memory samples every agent's RSS and the checkpoint bytes it holds (its /proc/PID/fd memfds,
by name: ckpt = own saves, ckpt-replica, ckpt-fetched) every 0.5 s in the store run of ZeRO-1.
"""
import argparse
import os
import re
import selectors
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pytorch_kill import Node, free_port, start_etcd  # noqa: E402

ROOT = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"
TRAIN = os.path.join(HERE, "goodput_train.py")
CAP = os.path.join(HERE, "lib", "cpu_cap.sh")
CGROOT = "/sys/fs/cgroup/cpu"
STEP = re.compile(r"\[gp rank 0/\d+\] step (\d+)$")


class CPUCap:
    """Every worker's cgroup v1 cpu cgroup is PREFIX-w<pid> (bench/lib/cpu_cap.sh makes it)."""

    def __init__(self, cores, prefix, period=100000):
        self.prefix_path = os.path.join(CGROOT, prefix)
        self.period, self.quota = period, int(cores * period)

    def prefix(self):
        return [CAP, self.prefix_path, str(self.quota), str(self.period)]

    def sweep(self):
        """Kill whatever is left in the workers' cgroups and remove them; how many there were."""
        n, base = 0, os.path.basename(self.prefix_path) + "-w"
        for name in os.listdir(CGROOT):
            d = os.path.join(CGROOT, name)
            if not name.startswith(base) or not os.path.isdir(d):
                continue
            for _ in range(100):
                with open(os.path.join(d, "cgroup.procs")) as f:
                    pids = [int(x) for x in f.read().split()]
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                try:
                    os.rmdir(d)
                    n += 1
                    break
                except OSError:
                    time.sleep(0.05)  # cleanup only: a killed task leaves the cgroup at its exit
        return n


def agent_memory(pid):
    """(VmRSS, RssAnon, RssShmem) in bytes and {memfd name: bytes} of the agent's open memfds."""
    st = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssShmem"):
                st[k] = int(v.split()[0]) * 1024
    held = {}
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
            if not target.startswith("/memfd:ckpt"):
                continue
            size = os.stat(os.path.join(fd_dir, fd)).st_size
        except OSError:
            continue
        name = target[len("/memfd:"):].split(" ")[0]
        held[name] = held.get(name, 0) + size
    return st.get("VmRSS", 0), st.get("RssAnon", 0), st.get("RssShmem", 0), held


class Run:
    def __init__(self, workload, kind, args, outdir, cap):
        self.workload, self.kind, self.args, self.cap = workload, kind, args, cap
        self.dir = os.path.join(outdir, f"{workload}-{kind}")
        os.makedirs(self.dir)
        self.ckdir = os.path.join(self.dir, "ckpt")
        self.t0 = time.monotonic()
        self.nodes, self.next_id = [], 0
        self.sel = selectors.DefaultSelector()
        self.env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", LOGLEVEL="INFO",
                        PYTHONUNBUFFERED="1", PYTHONPATH=os.path.join(ROOT, "python"))
        self.run_id = f"gp{os.getpid()}-{workload}-{kind}"
        self.events = []  # (t, what)
        self.samples = {}  # node -> [(t, rss, anon, shmem, held)]
        self.error = None
        self.etcd = None

    def now(self):
        return time.monotonic() - self.t0

    def worker(self):
        a = self.args
        ck = "store" if self.kind == "store" else "disk"
        cmd = self.cap.prefix() + [PYTHON, "-u", TRAIN, "--workload", self.workload, "--ckpt", ck,
                                   "--step-time", str(a.step_time), "--hidden", str(a.hidden)]
        if ck == "disk":
            cmd += ["--dir", self.ckdir, "--every", str(a.every)]
        return cmd

    def command(self, name):
        a = self.args
        if self.kind == "torchrun":
            return [PYTHON, os.path.join(HERE, "torchrun_launcher.py"), "--nnodes", "3:4",
                    "--nproc_per_node", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint",
                    f"127.0.0.1:{self.rdzv_port}", "--rdzv_id", self.run_id,
                    "--max_restarts", "1000", "--monitor_interval", "0.1", "--tee", "3",
                    "--log_dir", os.path.join(self.dir, f"torchrun-logs-{name}"), "--no_python"] \
                + (["--rdzv_conf", a.rdzv_conf] if a.rdzv_conf else []) + self.worker()
        cmd = [a.bin, "--rdzv-endpoint", self.endpoint, "--run-id", self.run_id, "--node-id", name,
               "--nnodes", "3:4", "--settle", "1", "--stop-timeout", "2", "--local-addr",
               "127.0.0.1", "--tee", "--max-restarts", "1000", "--warm-workers",
               "--log-level", "info"]
        if self.kind == "store":
            cmd += ["--checkpoint-memory", str(a.memory_mb)]
        return cmd + ["--"] + self.worker()

    def start(self):
        name = f"n{self.next_id}"
        self.next_id += 1
        n = Node(name, self.command(name), self.env, self.dir, self.t0)
        n.started = self.now()
        self.nodes.append(n)
        self.sel.register(n.proc.stdout, selectors.EVENT_READ, n)
        self.events.append((n.started, f"start {name}"))
        return n

    def kill(self, n):
        n.kill_node()
        n.killed_at = self.now()
        self.events.append((n.killed_at, f"kill {n.name}"))
        for key in list(self.sel.get_map().values()):
            if key.data is n:
                self.sel.unregister(key.fileobj)

    def pump_until(self, pred, until):
        """Pump output until pred() is true or the run's clock reaches until; pred's value."""
        while True:
            v = pred()
            if v:
                return v
            left = until - self.now()
            if left <= 0:
                return v
            for key, _ in self.sel.select(min(left, 0.1)):
                if not key.data.pump(time.monotonic()):
                    self.sel.unregister(key.fileobj)
            if self.args.memory and self.kind == "store" and self.workload == "zero":
                self.sample()

    def sample(self):
        t = self.now()
        if t - getattr(self, "last_sample", -1) < 0.5:
            return
        self.last_sample = t
        for n in self.nodes:
            if n.killed_at is None and n.proc.poll() is None:
                try:
                    self.samples.setdefault(n.name, []).append((t,) + agent_memory(n.proc.pid))
                except OSError:
                    pass

    def rank0_steps(self):
        """[(t, step, node)] of rank 0's step lines, in arrival order."""
        out = []
        for n in self.nodes:
            for t, text in n.lines:
                m = STEP.search(text)
                if m:
                    out.append((t, int(m.group(1)), n.name))
        out.sort()
        return out

    def rank0_node(self):
        s = self.rank0_steps()
        return s[-1][2] if s else None

    def all_first(self, world, after):
        """Every rank of a world-`world` round logged its first step after `after`: the time."""
        r = re.compile(r"\[gp rank (\d+)/%d\] first step: " % world)
        seen = {}
        for n in self.nodes:
            for t, text in n.lines:
                m = r.search(text)
                if t >= after and m:
                    r_ = int(m.group(1))
                    seen[r_] = min(seen.get(r_, t), t)
        return max(seen.values()) if len(seen) == world else None

    def run(self):
        a = self.args
        tmp = tempfile.mkdtemp(prefix="etcd-", dir=self.dir)
        if self.kind == "torchrun":
            self.rdzv_port = free_port()
            self.start()

            def listening():
                try:
                    socket.create_connection(("127.0.0.1", self.rdzv_port), 0.2).close()
                    return True
                except OSError:
                    return False
            self.pump_until(listening, 60)
        else:
            self.etcd, self.endpoint = start_etcd(tmp)
            self.start()
        for _ in range(3):
            self.start()
        t0 = self.pump_until(lambda: self.all_first(4, 0), a.wait)
        if not t0:
            return self.finish("world 4 never trained")
        self.t_train = t0
        self.events.append((t0, "every rank training at world 4"))
        end = t0 + a.seconds
        kills = [t0 + k * a.kill_every for k in range(1, 1000) if k * a.kill_every < a.seconds]
        self.kills = []
        for tk in kills:
            self.pump_until(lambda: False, tk)
            r0 = self.rank0_node()
            live = [n for n in self.nodes if n.killed_at is None]
            cands = [n for n in live if n.name not in ("n0", r0)]
            if not cands:
                return self.finish("no node to kill")
            victim = cands[0]
            self.kill(victim)
            self.kills.append(victim.killed_at)
            self.pump_until(lambda: False, min(victim.killed_at + a.replace_after, end))
            if self.now() < end:
                n = self.start()
                self.events.append((n.started, f"replacement {n.name}"))
        self.pump_until(lambda: False, end)
        self.t_end = self.now()
        return self.finish(None)

    def finish(self, error):
        self.error = error
        for n in self.nodes:
            if n.proc.poll() is None:
                n.kill_node()
            n.proc.wait()
        if self.etcd:
            self.etcd.kill()
            self.etcd.wait()
        for n in self.nodes:
            while n.pump(time.monotonic()):
                pass
            n.log.close()
        with open(os.path.join(self.dir, "events.txt"), "w") as f:
            for t, what in sorted(self.events):
                f.write(f"{t:9.3f} {what}\n")
        self.cgroups = self.cap.sweep()
        return self

    def result(self):
        a = self.args
        steps = [(t, s) for t, s, _ in self.rank0_steps()]
        t0, tk = self.t_train, self.kills[0] if self.kills else self.t_end
        fit = [(t, s) for t, s in steps if t0 + 3 <= t <= tk]
        # before the first kill, least squares: seconds per step
        mt, ms = statistics.fmean(t for t, _ in fit), statistics.fmean(s for _, s in fit)
        step_fit = (sum((t - mt) * (s - ms) for t, s in fit)
                    / sum((s - ms) ** 2 for _, s in fit))
        # the whole run: the median of 10-step windows of consecutive steps (a window across a
        # disruption is either broken, a step redone, or one outlier among hundreds)
        run = [(t, s) for t, s in steps if t0 <= t <= self.t_end]
        wins = [(run[i + 10][0] - run[i][0]) / 10 for i in range(len(run) - 10)
                if all(run[i + j + 1][1] == run[i + j][1] + 1 for j in range(10))]
        step_med = statistics.median(wins)
        before = [s for t, s in steps if t <= t0]
        at_t0 = before[-1] if before else steps[0][1] - 1  # its step 1 line may come after t0
        final = [s for t, s in steps if t <= self.t_end][-1]
        starts = sum(1 for n in self.nodes for _, text in n.lines
                     if re.search(r"\[gp rank 0/\d+\] start: ", text))
        return {"final": final, "at_t0": at_t0, "step_fit": step_fit, "step_med": step_med,
                "wall": a.seconds, "good_fit": (final - at_t0) * step_fit / a.seconds,
                "good_med": (final - at_t0) * step_med / a.seconds,
                "lost": a.seconds - (final - at_t0) * step_med,
                "kills": len(self.kills), "rounds": starts}

    @classmethod
    def load(cls, d, args):
        """A run's logs as finish() left them (bench/goodput.py --analyse)."""
        r = cls.__new__(cls)
        r.args, r.dir = args, d
        r.workload, r.kind = os.path.basename(d).split("-", 1)
        r.nodes, r.kills, r.samples, r.error, r.load = [], [], {}, None, None
        started, killed = {}, {}
        with open(os.path.join(d, "events.txt")) as f:
            for line in f:
                t, what = line.split(None, 1)
                what = what.strip()
                if what.startswith("start "):
                    started[what[6:]] = float(t)
                elif what.startswith("kill "):
                    killed[what[5:]] = float(t)
                    r.kills.append(float(t))
                elif what == "every rank training at world 4":
                    r.t_train = float(t)
                elif what.startswith("load "):
                    r.load = tuple(tuple(float(x) for x in v.split(",")) for v in what[5:].split())
        r.t_end = r.t_train + args.seconds
        for name in sorted(started, key=lambda k: started[k]):
            n = argparse.Namespace(name=name, started=started[name], killed_at=killed.get(name),
                                   lines=[])
            with open(os.path.join(d, f"{name}.log")) as f:
                for line in f:
                    t, _, text = line.strip("\n").lstrip().partition(" ")
                    n.lines.append((float(t), text))
            r.nodes.append(n)
        return r

    def disruptions(self):
        """Per kill and per replacement: the time until every rank of the next world trained;
        the pause (rank 0's last step of the old world to its first of the new one), the step
        it resumed from and the steps redone (the last step of the old world - that step)."""
        out = []
        steps = self.rank0_steps()
        marks = [(t, "kill", 3) for t in self.kills]
        marks += [(n.started, "join", 4) for n in self.nodes[4:]]
        for t, what, world in sorted(marks):
            back = self.all_first(world, t)
            first = None
            r = re.compile(r"\[gp rank 0/%d\] first step: (\d+)" % world)
            for n in self.nodes:
                for ts, text in n.lines:
                    m = r.search(text)
                    if ts >= t and m and (first is None or ts < first[0]):
                        first = (ts, int(m.group(1)) - 1)
                        break
            prev = [(ts, s) for ts, s, _ in steps if ts < (first[0] if first else t)]
            d = {"t": t - self.t_train, "what": what,
                 "back": None if back is None else back - t,
                 "step_before": prev[-1][1] if prev else None,
                 "resumed": first[1] if first else None, "pause": None, "redone": None}
            if first and prev:
                d["pause"] = first[0] - prev[-1][0]
                d["redone"] = prev[-1][1] - first[1]
            out.append(d)
        return out

    def memory(self):
        """Per node: steady (median before the first kill) and peak of RSS and the bytes held."""
        rows = []
        tk = self.kills[0] if self.kills else self.t_end
        own = {}
        for n in self.nodes:
            for _, text in n.lines:
                m = re.search(r"first step: \d+ \(shard (\d+) bytes\)", text)
                if m:
                    own[n.name] = max(own.get(n.name, 0), int(m.group(1)))
        for name, ss in self.samples.items():
            steady = [s for s in ss if self.t_train + 3 <= s[0] <= tk]

            def held(s, k=None):
                return sum(v for key, v in s[4].items() if k is None or key == k)
            row = {"node": name, "own_shard": own.get(name, 0), "samples": len(ss)}
            for label, sel in (("steady", steady), ("peak", ss)):
                if not sel:
                    continue
                f = statistics.median if label == "steady" else max
                row[label] = {"rss": f(s[1] for s in sel), "anon": f(s[2] for s in sel),
                              "own": f(held(s, "ckpt") for s in sel),
                              "replica": f(held(s, "ckpt-replica") for s in sel),
                              "fetched": f(held(s, "ckpt-fetched") for s in sel),
                              "held": f(held(s) for s in sel)}
            rows.append(row)
        return rows


def print_disruptions(r):
    for d in r.disruptions():
        back = "never" if d["back"] is None else f"{d['back']:.2f} s"
        pause = "" if d["pause"] is None else (
            f"; training paused {d['pause']:.2f} s, {d['redone']} step(s) redone")
        print(f"    t0+{d['t']:6.1f} {d['what']}: every rank of the next world training after "
              f"{back}; rank 0 was at step {d['step_before']}, resumed from {d['resumed']}"
              f"{pause}", flush=True)


def table(runs):
    print("\n| workload | config | final step (at t0) | undisturbed step time: run median "
          "(before the 1st kill) | wall | goodput (with the step time before the 1st kill) "
          "| time lost | kills | rounds | load before → after |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        ld = f"{r.load[0][0]:.1f} → {r.load[1][0]:.1f}" if r.load else "-"
        if r.error:
            print(f"| {r.workload} | {r.kind} | failed: {r.error} | | | | | | | {ld} |")
            continue
        x = r.result()
        print(f"| {r.workload} | {r.kind} | {x['final']} ({x['at_t0']}) | {x['step_med']:.4f} s "
              f"({x['step_fit']:.4f} s) | {x['wall']:.0f} s | **{100 * x['good_med']:.1f} %** "
              f"({100 * x['good_fit']:.1f} %) | {x['lost']:.1f} s | {x['kills']} | {x['rounds']} "
              f"| {ld} |")


def mb(x):
    return f"{x / 2**20:.2f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", choices=["ddp", "zero", "both"], default="both")
    p.add_argument("--configs", default="store,disk,torchrun",
                   help="comma-separated: store, disk, torchrun")
    p.add_argument("--seconds", type=float, default=150)
    p.add_argument("--kill-every", type=float, default=30)
    p.add_argument("--replace-after", type=float, default=5)
    p.add_argument("--step-time", type=float, default=0.05)
    p.add_argument("--every", type=int, default=20, help="disk checkpoint every N steps")
    p.add_argument("--hidden", type=int, default=128, help="the model's hidden width")
    p.add_argument("--cpu", type=float, default=0.5, help="each worker's CPU cap, in cores")
    p.add_argument("--memory-mb", type=int, default=64, help="--checkpoint-memory")
    p.add_argument("--memory", action="store_true",
                   help="sample the agents' memory (ZeRO-1, store) and print it")
    p.add_argument("--rdzv-conf", default="", help="torchrun --rdzv_conf")
    p.add_argument("--bin", default=os.path.join(ROOT, "build-release/elastic-agent"))
    p.add_argument("--wait", type=float, default=180, help="seconds for world 4 to train")
    p.add_argument("--out", help="keep the logs here (default: a temp dir, removed)")
    p.add_argument("--cgroup-prefix", help="workers' cgroups: /sys/fs/cgroup/cpu/PREFIX-w<pid>")
    p.add_argument("--analyse", metavar="DIR",
                   help="print the figures of the runs whose logs --out DIR kept; run nothing")
    args = p.parse_args()
    if args.analyse:
        runs = []
        for name in sorted(os.listdir(args.analyse)):
            d = os.path.join(args.analyse, name)
            if os.path.exists(os.path.join(d, "events.txt")):
                r = Run.load(d, args)
                runs.append(r)
                print(f"== {r.workload} {r.kind}")
                print_disruptions(r)
        table(runs)
        return
    if not os.path.exists(args.bin):
        args.bin = os.path.join(ROOT, "build/elastic-agent")
    workloads = ["ddp", "zero"] if args.workload == "both" else [args.workload]
    configs = args.configs.split(",")
    if args.memory:
        workloads, configs = ["zero"], ["store"]
    tmp = tempfile.mkdtemp(prefix="goodput-")
    outdir = args.out or tmp
    os.makedirs(outdir, exist_ok=True)
    cap = CPUCap(args.cpu, args.cgroup_prefix or "ea-goodput-%d" % os.getpid())
    print(f"goodput: {args.bin}, {args.seconds:.0f} s, a kill every {args.kill_every:.0f} s "
          f"replaced {args.replace_after:.0f} s later, step time {args.step_time} s + compute, "
          f"workers capped at {args.cpu} cores each ({cap.prefix_path}-w*), logs {outdir}", flush=True)
    runs, current = [], None
    try:
        for w in workloads:
            for c in configs:
                up0 = os.getloadavg()
                print(f"== {w} {c} (load {up0[0]:.2f} {up0[1]:.2f} {up0[2]:.2f})", flush=True)
                current = Run(w, c, args, outdir, cap)
                r = current.run()
                current = None
                r.load = (up0, os.getloadavg())
                with open(os.path.join(r.dir, "events.txt"), "a") as f:
                    f.write("%9.3f load %s\n" % (r.now(), " ".join(
                        ",".join("%.2f" % x for x in ld) for ld in r.load)))
                runs.append(r)
                if r.error:
                    print(f"  FAILED: {r.error} (logs {r.dir})", flush=True)
                    continue
                res = r.result()
                print(f"  final step {res['final']}, step time {res['step_med']:.4f} s "
                      f"(before the first kill {res['step_fit']:.4f} s), goodput "
                      f"{100 * res['good_med']:.1f} % ({100 * res['good_fit']:.1f} %), "
                      f"rounds {res['rounds']}, load after {r.load[1][0]:.2f}", flush=True)
                print_disruptions(r)
    finally:
        if current is not None:
            current.finish("interrupted")
        cap.sweep()
    table(runs)
    for r in runs:
        if args.memory and not r.error:
            print("\nmemory per agent (MB; steady = median before the first kill, peak = max "
                  "over the run):")
            print("| node | own shard | steady RSS (anon) | steady held: own + replica + fetched "
                  "| peak RSS (anon) | peak held: own + replica + fetched (all) |")
            print("|---|---|---|---|---|---|")
            for m in r.memory():
                s, k = m.get("steady"), m.get("peak")
                sc = (f"{mb(s['rss'])} ({mb(s['anon'])}) | {mb(s['own'])} + {mb(s['replica'])}"
                      f" + {mb(s['fetched'])}") if s else "- | -"
                print(f"| {m['node']} | {mb(m['own_shard'])} | {sc} | {mb(k['rss'])} "
                      f"({mb(k['anon'])}) | {mb(k['own'])} + {mb(k['replica'])} + "
                      f"{mb(k['fetched'])} ({mb(k['held'])}) |")
    if args.out:
        print(f"logs: {outdir}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    main()
