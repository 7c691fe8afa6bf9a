#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Node kill during real DDP training: elastic-agent (etcd) and torchrun (c10d), side by side.

Both launchers run the same unmodified script, examples/pytorch/train_elastic.py (gloo on CPU,
checkpoint every epoch, resume on start), on 4 "nodes" of one worker each on this host:

  1. 4 nodes start (--nnodes 3:4); training runs;
  2. when the victim's worker begins epoch 3, the whole victim node is SIGKILLed at once
     (launcher and its worker processes: the machine is gone);
  3. we watch what the survivors do: when their workers fail or are stopped, when the
     launcher restarts them, when training resumes at world 3 (a worker begins an epoch);
  4. once an epoch has been saved at world 3 (or after --wait seconds without that), a new
     node joins; we watch for world 4 again;
  5. we wait for every node to exit (at most --wait seconds more) and report exit codes.

Every output line of every node is timestamped on arrival (monotonic clock, one event loop on
the pipes). Timelines are printed relative to the kill; full logs are kept in --out.

The torchrun under test is Debian's torch 1.13, run through bench/torchrun_launcher.py (fixes
its --redirects/--tee parsing under Python 3.11). torchrun's node 0 is started first and hosts
the c10d rendezvous store; the victim is never node 0 (killing the store host ends a torchrun
job outright, which would not be a fair comparison).
"""
import argparse
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"
TRAIN = os.path.join(ROOT, "examples/pytorch/train_elastic.py")

# lines worth a place in the timeline
EVENTS = [
    (re.compile(r"\] start: "), "worker start"),
    (re.compile(r"epoch \d+ begin"), "epoch begin"),
    (re.compile(r"checkpoint epoch \d+ saved"), "checkpoint"),
    (re.compile(r"\] done: "), "worker done"),
    (re.compile(r"RuntimeError|Connection closed|Connection reset|Traceback"), "worker error"),
    # elastic-agent
    (re.compile(r"INFO: round \d+ .*started"), "agent round"),
    (re.compile(r"ERROR: worker rank"), "agent worker failed"),
    (re.compile(r"INFO: stopping"), "agent stop"),
    (re.compile(r"spare:|waiting for nodes"), "agent wait"),
    (re.compile(r"succeeded|failed past|exits? \d"), "agent end"),
    # torchrun (LOGLEVEL=INFO)
    (re.compile(r"Rendezvous complete for workers|Rendezvous'? .*completed"), "torchrun rendezvous"),
    (re.compile(r"failed \(exitcode|Worker group FAILED|will restart worker group"),
     "torchrun failure"),
    (re.compile(r"Detected \d+ new nodes"), "torchrun restart"),
    (re.compile(r"Rendezvous'ing worker group|Starting worker group|Local worker group finished|"
                r"Done waiting for other agents"), "torchrun group"),
    (re.compile(r"RendezvousTimeoutError|RendezvousClosedError|ChildFailedError|exit barrier"),
     "torchrun error"),
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def descendants(pid):
    """pid and every process below it (from /proc), children first discovered breadth-first."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


class Node:
    def __init__(self, name, cmd, env, logdir, t0):
        self.name = name
        self.lines = []  # (t, text)
        self.t0 = t0
        self.log = open(os.path.join(logdir, f"{name}.log"), "w")
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.buf = b""
        self.rc = None
        self.killed_at = None

    def pump(self, now):
        try:
            data = os.read(self.proc.stdout.fileno(), 65536)
        except BlockingIOError:
            return True
        if not data:
            if self.buf:
                self._line(now, self.buf)
                self.buf = b""
            return False
        self.buf += data
        *done, self.buf = self.buf.split(b"\n")
        for ln in done:
            self._line(now, ln)
        return True

    def _line(self, now, raw):
        text = raw.decode(errors="replace")
        t = now - self.t0
        self.lines.append((t, text))
        self.log.write(f"{t:9.3f} {text}\n")
        self.log.flush()

    def kill_node(self):
        pids = descendants(self.proc.pid)
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids


class Scenario:
    def __init__(self, kind, args, outdir):
        self.kind, self.args = kind, args
        self.dir = os.path.join(outdir, kind)
        os.makedirs(self.dir, exist_ok=True)
        self.ckpt = os.path.join(self.dir, "ckpt")
        self.nodes = []
        self.sel = selectors.DefaultSelector()
        self.t0 = time.monotonic()
        self.marks = {}  # name -> t
        self.env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo",
                        LOGLEVEL="INFO", PYTHONUNBUFFERED="1")
        self.train = [TRAIN, "--ckpt-dir", self.ckpt, "--epochs", str(args.epochs),
                      "--step-time", str(args.step_time)]

    def now(self):
        return time.monotonic() - self.t0

    def mark(self, name):
        self.marks[name] = self.now()
        print(f"  {self.kind}: {name} at {self.marks[name]:.3f} s", flush=True)

    def command(self, i):
        a = self.args
        if self.kind == "elastic-agent":
            return [a.bin, "--rdzv-endpoint", a.endpoint, "--run-id", f"bench{os.getpid()}",
                    "--node-id", f"n{i}", "--nnodes", "3:4", "--settle", "1",
                    "--lease-ttl", str(a.lease_ttl), "--stop-timeout", "2", "--local-addr",
                    "127.0.0.1", "--tee", "--", PYTHON] + self.train
        return [PYTHON, os.path.join(HERE, "torchrun_launcher.py"), "--nnodes", "3:4",
                "--nproc_per_node", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint",
                f"127.0.0.1:{a.rdzv_port}", "--rdzv_id", f"bench{os.getpid()}",
                "--max_restarts", str(a.max_restarts), "--monitor_interval",
                str(a.monitor_interval), "--tee", "3",
                "--log_dir", os.path.join(self.dir, f"torchrun-logs-n{i}")] \
            + (["--rdzv_conf", a.rdzv_conf] if a.rdzv_conf else []) + self.train

    def start(self, i):
        n = Node(f"n{i}", self.command(i), self.env, self.dir, self.t0)
        self.nodes.append(n)
        self.sel.register(n.proc.stdout, selectors.EVENT_READ, n)
        return n

    def run_until(self, pred, timeout):
        """Pump output until pred() is true or timeout s pass; pred's value."""
        deadline = time.monotonic() + timeout
        while True:
            v = pred()
            if v:
                return v
            left = deadline - time.monotonic()
            if left <= 0:
                return v
            for key, _ in self.sel.select(min(left, 0.2)):
                node = key.data
                if not node.pump(time.monotonic()):
                    self.sel.unregister(key.fileobj)
            for n in self.nodes:
                if n.rc is None and n.proc.poll() is not None:
                    n.rc = n.proc.returncode
                    n.exited = self.now()

    def find(self, nodes, regex, after=0.0):
        r = re.compile(regex)
        best = None
        for n in nodes:
            for t, text in n.lines:
                if t >= after and r.search(text):
                    if best is None or t < best[0]:
                        best = (t, n.name, text)
                    break
        return best

    def run(self):
        a = self.args
        print(f"== {self.kind}", flush=True)
        self.start(0)
        if self.kind == "torchrun":  # node 0 hosts the c10d store: let it bind first
            def listening():
                try:
                    socket.create_connection(("127.0.0.1", a.rdzv_port), 0.2).close()
                    return True
                except OSError:
                    return False
            self.run_until(listening, 60)
        for i in range(1, 4):
            self.start(i)
        victim = self.nodes[a.victim]
        survivors = [n for n in self.nodes if n is not victim]

        ok = self.run_until(lambda: self.find([victim], r"/4\] epoch 3 begin"), 180)
        if not ok:
            print(f"  {self.kind}: the victim never began epoch 3", flush=True)
            return self.finish()
        pids = victim.kill_node()
        self.mark("kill")
        t_kill = self.marks["kill"]
        print(f"  {self.kind}: SIGKILLed node {victim.name}: pids {pids}", flush=True)

        resumed = self.run_until(lambda: self.find(survivors, r"/3\] epoch \d+ begin", t_kill),
                                 a.wait)
        if resumed:
            self.mark("training resumed at world 3")
            self.run_until(lambda: self.find(survivors, r"/3\] checkpoint epoch \d+ saved",
                                             t_kill), a.wait)
        else:
            print(f"  {self.kind}: training did not resume at world 3 within {a.wait} s",
                  flush=True)
        joiner = self.start(4)
        self.mark("new node started")
        t_join = self.marks["new node started"]
        live = survivors + [joiner]
        if self.run_until(lambda: self.find(live, r"/4\] epoch \d+ begin", t_join), a.wait):
            self.mark("training at world 4")
        else:
            print(f"  {self.kind}: no world-4 training within {a.wait} s of the join", flush=True)
        self.run_until(lambda: all(n.proc.poll() is not None for n in live), a.wait)
        return self.finish()

    def finish(self):
        for n in self.nodes:
            if n.proc.poll() is None:
                n.kill_node()
                n.proc.wait()
                n.killed_at = self.now()
            if n.rc is None:
                n.rc = n.proc.returncode
                n.exited = getattr(n, "exited", self.now())
        self.run_until(lambda: False, 0.5)  # drain
        for n in self.nodes:
            n.log.close()
        return self

    def timeline(self):
        t_kill = self.marks.get("kill", 0.0)
        rows = []
        for n in self.nodes:
            last_kind = None
            for t, text in n.lines:
                for r, kind in EVENTS:
                    if r.search(text):
                        # collapse tracebacks and repeated lines of one kind
                        if kind == "worker error" and last_kind == "worker error":
                            break
                        last_kind = kind
                        rows.append((t, n.name, text.strip()))
                        break
                else:
                    last_kind = None
        for name, t in self.marks.items():
            rows.append((t, "bench", f"*** {name}"))
        for n in self.nodes:
            how = "killed by the bench" if n.killed_at else f"exit {n.rc}"
            rows.append((getattr(n, "exited", self.now()), n.name, f"*** process ended: {how}"))
        rows.sort(key=lambda r: r[0])
        out = [f"{t - t_kill:+9.3f}  {name:5s}  {text[:150]}" for t, name, text in rows]
        return "\n".join(out)

    def summary(self):
        """Key delays: (seconds, node, line) relative to the kill, or to the join for world 4."""
        s, t_kill = {}, self.marks.get("kill")
        if t_kill is None:
            return {"error": "no kill"}

        def rel(found, base):
            return None if found is None else (found[0] - base,) + found[1:]

        victim = "n%d" % self.args.victim
        survivors = [n for n in self.nodes if n.name not in (victim, "n4")]
        s["kill -> first survivor reaction"] = rel(self.find(
            survivors, r"RuntimeError|Connection closed|ERROR: worker rank|failed \(exitcode|"
            r"INFO: stopping|Worker group FAILED", t_kill), t_kill)
        s["kill -> world-3 workers started"] = rel(self.find(survivors, r"/3\] start: ", t_kill),
                                                   t_kill)
        s["kill -> world-3 training (epoch begin)"] = rel(
            self.find(survivors, r"/3\] epoch \d+ begin", t_kill), t_kill)
        j = self.marks.get("new node started")
        if j is not None:
            live = survivors + [n for n in self.nodes if n.name == "n4"]
            s["join -> world-4 training (epoch begin)"] = rel(
                self.find(live, r"/4\] epoch \d+ begin", j), j)
        saved = [int(m.group(1)) for n in self.nodes for _, x in n.lines
                 for m in [re.search(r"checkpoint epoch (\d+) saved", x)] if m]
        s["checkpoints saved (epochs, in log order)"] = saved
        s["exit codes"] = {n.name: ("SIGKILLed (the victim)" if n.name == victim else
                                    "killed by the bench" if n.killed_at else n.rc)
                           for n in self.nodes}
        s["kill -> last process ended"] = max(getattr(n, "exited", 0) for n in self.nodes) - t_kill
        return s


def start_etcd(tmp):
    cport, pport = free_port(), free_port()
    d = os.path.join(tmp, "etcd")
    log = open(os.path.join(tmp, "etcd.log"), "w")
    p = subprocess.Popen(
        ["etcd", "--name", "bench", "--data-dir", d,
         "--listen-client-urls", f"http://127.0.0.1:{cport}",
         "--advertise-client-urls", f"http://127.0.0.1:{cport}",
         "--listen-peer-urls", f"http://127.0.0.1:{pport}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{pport}",
         "--initial-cluster", f"bench=http://127.0.0.1:{pport}"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    ep = f"127.0.0.1:{cport}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        r = subprocess.run(["etcdctl", "--endpoints", ep, "endpoint", "health"],
                           capture_output=True, text=True)
        if r.returncode == 0:
            return p, ep
        time.sleep(0.1)
    p.kill()
    sys.exit("pytorch_kill: etcd did not become healthy")


def fmt(v):
    if v is None:
        return "never (within --wait)"
    if isinstance(v, float):
        return f"{v:+.3f} s"
    if isinstance(v, tuple):
        return f"{v[0]:+.3f} s ({v[1]}: {v[2].strip()[:100]})"
    return str(v)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scenario", choices=["both", "elastic-agent", "torchrun"], default="both")
    p.add_argument("--bin", default=os.path.join(ROOT, "build/elastic-agent"))
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--step-time", type=float, default=0.03)
    p.add_argument("--victim", type=int, default=3, help="node index to kill (not 0)")
    p.add_argument("--wait", type=float, default=120, help="seconds to wait for each phase")
    p.add_argument("--lease-ttl", type=float, default=2, help="elastic-agent --lease-ttl")
    p.add_argument("--max-restarts", type=int, default=3, help="torchrun --max_restarts")
    p.add_argument("--monitor-interval", type=float, default=0.1,
                   help="torchrun --monitor_interval (torch 1.13's default is 5)")
    p.add_argument("--rdzv-conf", default="",
                   help="torchrun --rdzv_conf, e.g. last_call_timeout=1 (default: torch's)")
    p.add_argument("--out", help="keep logs here (default: a temp dir, removed)")
    args = p.parse_args()
    if args.victim == 0 or not 1 <= args.victim <= 3:
        sys.exit("--victim must be 1, 2 or 3")

    tmp = tempfile.mkdtemp(prefix="pytorch-kill-")
    outdir = args.out or tmp
    os.makedirs(outdir, exist_ok=True)
    etcd = None
    results = []
    try:
        kinds = ["elastic-agent", "torchrun"] if args.scenario == "both" else [args.scenario]
        for kind in kinds:
            if kind == "elastic-agent":
                etcd, args.endpoint = start_etcd(tmp)
            else:
                args.rdzv_port = free_port()
            sc = Scenario(kind, args, outdir).run()
            results.append(sc)
            if etcd:
                etcd.kill()
                etcd.wait()
                etcd = None
        for sc in results:
            print(f"\n===== {sc.kind}: timeline (seconds relative to the SIGKILL)")
            print(sc.timeline())
        for sc in results:
            print(f"\n===== {sc.kind}: summary (seconds relative to the SIGKILL)")
            for k, v in sc.summary().items():
                print(f"  {k:42s} {fmt(v)}")
        print(f"\nlogs: {outdir}" if args.out else "")
    finally:
        for sc in results:
            for n in sc.nodes:
                if n.proc.poll() is None:
                    n.kill_node()
        if etcd:
            etcd.kill()
        if not args.out:
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp != outdir:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
