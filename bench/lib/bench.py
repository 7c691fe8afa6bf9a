#!/usr/bin/python3
"""Side-by-side benchmark of elastic-agent and torchrun (driven by bench/run.sh; see its header).

Every agent of both tools runs the same trivial worker (bench/lib/worker.c): it writes its start
time (CLOCK_REALTIME ns) to $BENCH_DIR/starts/ and sleeps. Every latency is computed from those
files: event time (taken right before launching or signalling) -> the last relevant worker start.
The polling here only decides when to look; it is not part of any figure.

Everything this program starts carries BENCH_TOKEN in its environment; clusters are stopped
after each measurement, and on exit (normal, exception, SIGTERM/SIGINT) every process that still
carries the token is killed. The program is a child subreaper, so orphaned workers come back to it
and are reaped.
"""
import argparse
import csv
import ctypes
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOKEN = os.environ.get("BENCH_TOKEN") or f"bench-{os.getpid()}-{time.time_ns()}"
PY = "/usr/bin/python3"
LAUNCHER = os.path.join(ROOT, "bench", "torchrun_launcher.py")

LABEL = {
    "ea-file": "elastic-agent file",
    "ea-etcd": "elastic-agent etcd (gRPC)",
    "ea-gateway": "elastic-agent etcd-gateway (HTTP)",
    "tr-c10d": "torchrun c10d",
    "tr-etcd-v2": "torchrun etcd-v2",
}


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def now_ns():
    return time.time_ns()


# ---------------------------------------------------------------- processes ----------------------

_popens = {}  # pid -> Popen, the processes we started directly (reaped by Popen itself)
_lock = threading.Lock()


def set_subreaper():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except OSError:
        pass


def reap_orphans():
    """Reap exited processes that are not ours through Popen (orphans re-parented to us)."""
    for _ in range(10000):
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None:
            return
        with _lock:
            p = _popens.get(info.si_pid)
        if p is not None:
            p.poll()
            if p.returncode is None:  # raced with Popen's own wait; leave it
                return
            with _lock:
                _popens.pop(info.si_pid, None)
            continue
        try:
            os.waitpid(info.si_pid, os.WNOHANG)
        except ChildProcessError:
            pass


def spawn(cmd, env, out_path):
    with open(out_path, "ab") as out:
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True)
    with _lock:
        _popens[p.pid] = p
    return p


def proc_env(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    env = {}
    for item in raw.split(b"\0"):
        k, _, v = item.partition(b"=")
        if k.startswith(b"BENCH_"):
            env[k.decode()] = v.decode(errors="replace")
    return env


def tagged_pids(**want):
    """pids of live processes whose environment has BENCH_TOKEN=TOKEN and every BENCH_<K>=<v>."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        env = proc_env(name)
        # only what this program started: agents, workers, guards (BENCH_CLUSTER), etcd and
        # watchers (BENCH_ROLE); never this program or the shell and `timeout` above it
        if not env or env.get("BENCH_TOKEN") != TOKEN or not (
                "BENCH_CLUSTER" in env or "BENCH_ROLE" in env):
            continue
        if all(env.get("BENCH_" + k.upper()) == str(v) for k, v in want.items()):
            out.append(int(name))
    return out


def state_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "X"


def kill_tagged(sig=signal.SIGKILL, **want):
    pids = [p for p in tagged_pids(**want) if state_of(p) != "Z"]
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass
    return pids


def sweep(**want):
    """SIGKILL every live process carrying the token (and the given tags); bounded retries."""
    for _ in range(50):
        left = kill_tagged(signal.SIGKILL, **want)
        reap_orphans()
        with _lock:
            ps = list(_popens.values())
        for p in ps:
            p.poll()
        if not left:
            return 0
        time.sleep(0.05)
    return len([p for p in tagged_pids(**want) if state_of(p) != "Z"])


def cpu_rss(pid):
    """(cpu seconds user+sys, VmHWM KiB, VmRSS KiB) of one process, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/status") as f:
            st = {l.split(":")[0]: l.split(":")[1].strip() for l in f if ":" in l}
    except OSError:
        return None
    tck = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / tck  # utime, stime (fields 14, 15)
    return cpu, int(st.get("VmHWM", "0 kB").split()[0]), int(st.get("VmRSS", "0 kB").split()[0])


def smaps(pid):
    """(Pss KiB, USS KiB = Private_Clean + Private_Dirty) from /proc/<pid>/smaps_rollup."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            d = {l.split(":")[0]: int(l.split()[1]) for l in f if l.split(":")[0] in
                 ("Pss", "Private_Clean", "Private_Dirty")}
    except (OSError, ValueError, IndexError):
        return None
    return d.get("Pss", 0), d.get("Private_Clean", 0) + d.get("Private_Dirty", 0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- etcd ---------------------------

class Etcd:
    def __init__(self, base, name):
        self.dir = os.path.join(base, "etcd-" + name)
        self.name = name
        self.proc = None

    def start(self):
        for attempt in range(5):
            shutil.rmtree(self.dir, ignore_errors=True)
            os.makedirs(self.dir)
            self.cport, self.pport, self.mport = free_port(), free_port(), free_port()
            if len({self.cport, self.pport, self.mport}) < 3:
                continue
            env = dict(os.environ, BENCH_TOKEN=TOKEN, BENCH_ROLE="etcd", ETCD_UNSUPPORTED_ARCH="")
            c, p, m = (f"http://127.0.0.1:{x}" for x in (self.cport, self.pport, self.mport))
            self.proc = spawn(["etcd", "--name", "bench", "--data-dir", self.dir + "/data",
                               "--enable-v2", "--listen-client-urls", c, "--advertise-client-urls", c,
                               "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
                               "--initial-cluster", "bench=" + p, "--listen-metrics-urls", m,
                               "--logger", "zap", "--log-outputs", "stderr"],
                              env, self.dir + ".log")
            deadline = time.time() + 15
            while time.time() < deadline and self.proc.poll() is None:
                try:
                    with urllib.request.urlopen(m + "/health", timeout=1) as r:
                        if b'"health":"true"' in r.read():
                            return self
                except OSError:
                    pass
                time.sleep(0.05)
            self.stop()
        raise RuntimeError("etcd did not start; see " + self.dir + ".log")

    @property
    def endpoint(self):
        return f"127.0.0.1:{self.cport}"

    def metrics(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.mport}/metrics", timeout=5) as r:
            text = r.read().decode()
        m = {}
        for line in text.splitlines():
            if not line or line[0] == "#":
                continue
            k, _, v = line.rpartition(" ")
            try:
                m[k] = float(v)
            except ValueError:
                pass
        return m

    def cpu(self):
        r = cpu_rss(self.proc.pid) if self.proc else None
        return r[0] if r else 0.0

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self.proc = None


def load_delta(m0, m1):
    """Store load between two /metrics snapshots: requests (gRPC messages received + v2 HTTP
    requests), key writes (v3 revisions + v2 store writes), raft proposals committed, by-method."""
    def d(k):
        return m1.get(k, 0) - m0.get(k, 0)
    methods = {}
    for k in m1:
        if k.startswith("grpc_server_msg_received_total{"):
            v = d(k)
            if v:
                name = k.split('grpc_method="')[1].split('"')[0]
                methods[name] = methods.get(name, 0) + v
        elif k.startswith("etcd_http_received_total{"):
            v = d(k)
            if v:
                name = "v2 " + k.split('method="')[1].split('"')[0]
                methods[name] = methods.get(name, 0) + v
    v2w = sum(d(k) for k in m1 if k.startswith("etcd_debugging_store_writes_total{"))
    return {
        "requests": sum(methods.values()),
        "writes": d("etcd_debugging_mvcc_current_revision") + v2w,
        "proposals": d("etcd_server_proposals_committed_total"),
        "methods": methods,
    }


# ---------------------------------------------------------------- clusters -----------------------

class Cluster:
    """N agents of one tool/backend on loopback, each in its own session, each with one worker."""
    seq = 0

    def __init__(self, cfg, n, nmin, base, etcd=None, monitor=None, bins=None, lease_ttl=None,
                 extra=None):
        Cluster.seq += 1
        self.id = f"c{Cluster.seq}"
        self.cfg, self.n, self.nmin, self.etcd, self.monitor = cfg, n, nmin, etcd, monitor
        self.bins, self.lease_ttl, self.extra = bins, lease_ttl, extra or []
        self.dir = os.path.join(base, f"{self.id}-{cfg}-n{n}")
        self.starts_dir = os.path.join(self.dir, "starts")
        os.makedirs(self.starts_dir)
        os.makedirs(os.path.join(self.dir, "tmp"))
        self.run_id = f"b{os.getpid()}{self.id}"
        self.agents = {}
        self.records = []
        self._seen = set()
        self.c10d_port = free_port() if cfg == "tr-c10d" else None

    def cmd(self, i):
        worker = self.bins["worker"]
        if self.cfg.startswith("ea-"):
            c = [self.bins["agent"], "--run-id", self.run_id, "--node-id", f"n{i}",
                 "--min", str(self.nmin), "--max", str(self.n), "--nproc-per-node", "1",
                 "--local-addr", "127.0.0.1", "--max-restarts", "1000"]
            if self.lease_ttl:
                c += ["--lease-ttl", str(self.lease_ttl)]
            c += self.extra
            if self.cfg == "ea-file":
                c += ["--state-dir", os.path.join(self.dir, "state")]
            elif self.cfg == "ea-etcd":
                c += ["--rdzv-endpoint", self.etcd.endpoint]
            else:
                c += ["--rdzv-endpoint", "http://" + self.etcd.endpoint]
            return c + ["--", worker]
        c = [PY, LAUNCHER, "--nnodes", f"{self.nmin}:{self.n}", "--nproc_per_node", "1",
             "--rdzv_id", self.run_id, "--max_restarts", "1000",
             "--monitor_interval", str(self.monitor), "--log_dir", os.path.join(self.dir, "tmp", f"log{i}")]
        if self.cfg == "tr-c10d":
            c += ["--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{self.c10d_port}",
                  "--rdzv_conf", f"is_host={'true' if i == 0 else 'false'}"]
        else:
            c += ["--rdzv_backend", "etcd-v2", "--rdzv_endpoint", self.etcd.endpoint]
        return c + ["--no_python", worker]

    def env(self, i):
        e = dict(os.environ)
        e.update(BENCH_TOKEN=TOKEN, BENCH_CLUSTER=self.id, BENCH_NODE=str(i), BENCH_DIR=self.dir,
                 TMPDIR=os.path.join(self.dir, "tmp"))
        return e

    def start(self):
        t0 = now_ns()
        for i in range(self.n):
            self.agents[i] = spawn(self.cmd(i), self.env(i), os.path.join(self.dir, f"agent{i}.log"))
        return t0

    def scan(self):
        for name in os.listdir(self.starts_dir):
            if name[0] == "." or name in self._seen:
                continue
            self._seen.add(name)
            try:
                with open(os.path.join(self.starts_dir, name)) as f:
                    ns, rank, ws, node, pid = f.read().split()
                self.records.append((int(ns), rank, ws, int(node), int(pid)))
            except (OSError, ValueError):
                self._seen.discard(name)
        return self.records

    def first_start_after(self, nodes, t):
        """{node: earliest worker start > t} for the given nodes (those seen so far)."""
        out = {}
        for ns, _, _, node, _ in self.scan():
            if node in nodes and ns > t and (node not in out or ns < out[node]):
                out[node] = ns
        return out

    def wait_starts(self, nodes, t, timeout):
        """Wait until every node in `nodes` has a worker start after t; returns (latency_s or
        None, {node: ns}). Bounded by `timeout` seconds."""
        nodes = set(nodes)
        deadline = time.time() + timeout
        while True:
            got = self.first_start_after(nodes, t)
            if len(got) == len(nodes):
                return (max(got.values()) - t) / 1e9, got
            if time.time() >= deadline:
                return None, got
            time.sleep(0.02)
            reap_orphans()

    def latest_worker(self, node):
        recs = [r for r in self.scan() if r[3] == node]
        return max(recs)[4] if recs else None

    def alive(self, i):
        p = self.agents.get(i)
        return p is not None and p.poll() is None

    def describe_agent(self, i, lines=8):
        try:
            with open(os.path.join(self.dir, f"agent{i}.log"), errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def stop(self, grace=8.0):
        for i, p in self.agents.items():
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.time() + grace
        while time.time() < deadline and any(p.poll() is None for p in self.agents.values()):
            time.sleep(0.02)
        sweep(cluster=self.id)
        for p in self.agents.values():
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
            with _lock:
                _popens.pop(p.pid, None)


# ---------------------------------------------------------------- statistics ---------------------

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt_s(x):
    if x is None:
        return "—"
    if x < 1:
        return f"{x * 1000:.0f} ms"
    return f"{x:.2f} s"


def fmt_ratio(a, b):
    if a is None or b is None or b <= 0:
        return "—"
    r = a / b
    return f"{r:.0f}×" if r >= 10 else f"{r:.1f}×"


# ---------------------------------------------------------------- the phases ---------------------

class Bench:
    def __init__(self, args):
        self.a = args
        self.base = args.workdir
        self.bins = {"agent": args.agent, "worker": args.worker}
        self.res = {"cold": {}, "cold_load": {}, "fail": {}, "term": {}, "kill": {},
                    "foot": {}, "steady_load": {}, "scale": {}, "notes": []}
        self.configs = ["ea-file", "ea-etcd", "ea-gateway", "tr-c10d", "tr-etcd-v2"]
        self.live = []

    def note(self, s):
        log("NOTE:", s)
        self.res["notes"].append(s)

    def cluster(self, *a, **kw):
        c = Cluster(*a, base=self.base, bins=self.bins, **kw)
        self.live.append(c)
        return c

    def done(self, c):
        c.stop()
        if c in self.live:
            self.live.remove(c)

    def etcd(self, name):
        e = Etcd(self.base, name).start()
        self.live.append(e)
        return e

    def etcd_done(self, e):
        e.stop()
        if e in self.live:
            self.live.remove(e)

    def needs_etcd(self, cfg):
        return cfg in ("ea-etcd", "ea-gateway", "tr-etcd-v2")

    def tr_monitor_default(self):
        return 5.0  # torch 1.13's --monitor_interval default

    # -- probe: does the etcd-gateway backend work in this build? ---------------------------------
    def probe_gateway(self):
        e = self.etcd("probe")
        c = self.cluster("ea-gateway", 2, 2, etcd=e)
        try:
            t0 = c.start()
            lat, _ = c.wait_starts(range(2), t0, 15)
            if lat is None:
                self.note("etcd-gateway backend did not start 2 workers within 15 s; left out. "
                          "Agent log: " + c.describe_agent(0).strip().replace("\n", " | "))
                self.configs.remove("ea-gateway")
        finally:
            self.done(c)
            self.etcd_done(e)

    # -- 1. cold rendezvous ------------------------------------------------------------------------
    def phase_cold(self):
        ns = self.a.cold_n
        for cfg in self.configs:
            e = self.etcd("cold-" + cfg) if self.needs_etcd(cfg) else None
            try:
                for n in ns:
                    reps = self.a.reps_ea if cfg.startswith("ea-") else (
                        self.a.reps_tr if n <= 8 else self.a.reps_tr_big)
                    lats, loads = [], []
                    for r in range(reps):
                        c = self.cluster(cfg, n, n, etcd=e, monitor=self.tr_monitor_default())
                        m0 = e.metrics() if e else None
                        t0 = c.start()
                        lat, got = c.wait_starts(range(n), t0, self.a.cold_timeout)
                        if e:
                            loads.append(load_delta(m0, e.metrics()))
                        if lat is None:
                            self.note(f"cold {cfg} N={n}: only {len(got)}/{n} workers within "
                                      f"{self.a.cold_timeout} s; agent 0 log: "
                                      + c.describe_agent(0, 4).strip().replace("\n", " | "))
                        lats.append(lat)
                        self.done(c)
                        log(f"cold {cfg:11s} N={n:3d} rep {r + 1}/{reps}: {fmt_s(lat)}")
                    self.res["cold"][(cfg, n)] = lats
                    if loads:
                        self.res["cold_load"][(cfg, n)] = loads
            finally:
                if e:
                    self.etcd_done(e)

    # -- 2-4. worker failure, SIGTERM, SIGKILL ------------------------------------------------------
    def fail_events(self, c, n, reps, key):
        """Inject `reps` worker failures (SIGUSR1 -> exit 1) on the last node; each measured from
        the signal to the last of the N nodes' replacement workers started."""
        victim = n - 1
        out = []
        for r in range(reps):
            pid = c.latest_worker(victim)
            if pid is None:
                break
            t = now_ns()
            os.kill(pid, signal.SIGUSR1)
            lat, got = c.wait_starts(range(n), t, self.a.event_timeout)
            out.append(lat)
            log(f"fail {key}: {fmt_s(lat)} ({len(got)}/{n} nodes restarted)")
            if lat is None:
                break
            time.sleep(self.a.settle_between)
        return out

    def lifecycle_ea(self, cfg, n, e, losses):
        c = self.cluster(cfg, n, 2, etcd=e)
        try:
            t0 = c.start()
            lat, got = c.wait_starts(range(n), t0, self.a.cold_timeout)
            if lat is None:
                self.note(f"lifecycle {cfg} N={n}: cold start incomplete ({len(got)}/{n})")
                return
            time.sleep(self.a.settle_between)
            self.res["fail"][(cfg, n, None)] = self.fail_events(c, n, self.a.fail_reps_ea, f"{cfg} N={n}")
            if not losses:
                return
            # SIGTERM the last node's agent: graceful leave
            victim = n - 1
            t = now_ns()
            os.kill(c.agents[victim].pid, signal.SIGTERM)
            lat, got = c.wait_starts(range(n - 1), t, self.a.loss_timeout)
            self.res["term"][(cfg, n, None)] = lat
            log(f"term {cfg} N={n}: {fmt_s(lat)}")
            time.sleep(self.a.settle_between)
            # SIGKILL the next node's agent and workers
            victim = n - 2
            t = now_ns()
            kill_tagged(signal.SIGKILL, cluster=c.id, node=victim)
            lat, got = c.wait_starts(range(n - 2), t, self.a.loss_timeout)
            self.res["kill"][(cfg, n, None)] = lat
            log(f"kill {cfg} N={n}: {fmt_s(lat)}")
        finally:
            self.done(c)

    def tr_cluster_up(self, cfg, n, mon, e):
        c = self.cluster(cfg, n, 2, etcd=e, monitor=mon)
        t0 = c.start()
        return c, t0

    def phase_events(self):
        # elastic-agent: one cluster per backend and N; failures, then SIGTERM, then SIGKILL
        for cfg in [c for c in self.configs if c.startswith("ea-")]:
            e = self.etcd("life-" + cfg) if self.needs_etcd(cfg) else None
            try:
                for n in self.a.fail_n:
                    self.lifecycle_ea(cfg, n, e, losses=n in self.a.loss_n)
            finally:
                if e:
                    self.etcd_done(e)
        # torchrun worker failure: one cluster per backend, N, monitor interval
        trs = [c for c in self.configs if c.startswith("tr-")]
        mons = [self.tr_monitor_default(), 0.1]
        for cfg in trs:
            e = self.etcd("life-" + cfg) if self.needs_etcd(cfg) else None
            try:
                for n in self.a.fail_n:
                    # --quick: the default interval only at the smallest N (its recovery time is
                    # the 5 s monitor period plus a rendezvous, whatever N; see a full run)
                    for mon in (mons if not self.a.quick or n == min(self.a.fail_n) else [0.1]):
                        c, t0 = self.tr_cluster_up(cfg, n, mon, e)
                        try:
                            lat, got = c.wait_starts(range(n), t0, self.a.cold_timeout)
                            if lat is None:
                                self.note(f"torchrun {cfg} N={n} monitor {mon}: cold start "
                                          f"incomplete ({len(got)}/{n})")
                                continue
                            time.sleep(self.a.settle_between)
                            self.res["fail"][(cfg, n, mon)] = self.fail_events(
                                c, n, self.a.fail_reps_tr, f"{cfg} N={n} mon={mon}")
                        finally:
                            self.done(c)
            finally:
                if e:
                    self.etcd_done(e)
        # torchrun SIGTERM / SIGKILL: survivors' workers are healthy, so it is mostly a wait for a
        # restart that never comes; the clusters wait side by side (each its own store).
        self.tr_losses(trs)

    def tr_losses(self, trs):
        mons = [0.1] + ([self.tr_monitor_default()] if not self.a.quick else [])
        jobs = []
        etcds = {}
        try:
            for cfg in trs:
                for mon in mons:
                    for ev in ("term", "kill"):
                        for n in self.a.loss_n:
                            e = None
                            if self.needs_etcd(cfg):
                                e = etcds.get(cfg) or self.etcd("loss-" + cfg)
                                etcds[cfg] = e
                            c, t0 = self.tr_cluster_up(cfg, n, mon, e)
                            jobs.append((cfg, mon, ev, n, c, t0))
            ready = []
            for cfg, mon, ev, n, c, t0 in jobs:
                lat, got = c.wait_starts(range(n), t0, self.a.cold_timeout * 2)
                if lat is None:
                    self.note(f"torchrun {cfg} N={n} monitor {mon} ({ev}): cold start "
                              f"incomplete ({len(got)}/{n})")
                    continue
                ready.append((cfg, mon, ev, n, c))
            time.sleep(self.a.settle_between)
            events = []
            for cfg, mon, ev, n, c in ready:
                victim = n - 1
                t = now_ns()
                if ev == "term":
                    os.kill(c.agents[victim].pid, signal.SIGTERM)
                else:
                    kill_tagged(signal.SIGKILL, cluster=c.id, node=victim)
                events.append((cfg, mon, ev, n, c, t))
            deadline = time.time() + self.a.loss_timeout
            pending = list(events)
            while pending and time.time() < deadline:
                for item in list(pending):
                    cfg, mon, ev, n, c, t = item
                    got = c.first_start_after(set(range(n - 1)), t)
                    if len(got) == n - 1:
                        lat = (max(got.values()) - t) / 1e9
                        self.res[ev][(cfg, n, mon)] = lat
                        log(f"{ev} {cfg} N={n} mon={mon}: {fmt_s(lat)}")
                        pending.remove(item)
                time.sleep(0.05)
                reap_orphans()
            for cfg, mon, ev, n, c, t in pending:
                self.res[ev][(cfg, n, mon)] = None
                alive = sum(1 for i in range(n - 1) if c.alive(i) and
                            state_of(c.latest_worker(i) or 0) not in ("X", "Z"))
                log(f"{ev} {cfg} N={n} mon={mon}: not within {self.a.loss_timeout:.0f} s "
                    f"({alive}/{n - 1} survivor agents still running their old workers)")
                self.res.setdefault("tr_loss_detail", {})[(cfg, n, mon, ev)] = alive
        finally:
            for _, _, _, _, c, *_ in jobs:
                self.done(c)
            for e in etcds.values():
                self.etcd_done(e)

    # -- 5-6. footprint and steady-state store load ------------------------------------------------
    def phase_steady(self):
        n = self.a.steady_n
        runs = []  # (key, cluster, etcd)
        try:
            for cfg in self.configs:
                mons = [None] if cfg.startswith("ea-") else [self.tr_monitor_default(), 0.1]
                for mon in mons:
                    e = self.etcd(f"steady-{cfg}-{mon}") if self.needs_etcd(cfg) else None
                    c = self.cluster(cfg, n, n, etcd=e, monitor=mon)
                    t0 = c.start()
                    runs.append(((cfg, mon), c, e, t0))
            for key, c, e, t0 in runs:
                lat, got = c.wait_starts(range(n), t0, self.a.cold_timeout * 2)
                if lat is None:
                    self.note(f"steady {key}: only {len(got)}/{n} workers started")
            time.sleep(2.0)
            before = {}
            for key, c, e, _ in runs:
                before[key] = ({i: cpu_rss(p.pid) for i, p in c.agents.items()},
                               e.metrics() if e else None, e.cpu() if e else None)
            t_start = time.time()
            log(f"steady: {len(runs)} clusters of {n} agents, measuring {self.a.steady_s:.0f} s")
            while time.time() - t_start < self.a.steady_s:
                time.sleep(0.5)
                reap_orphans()
            span = time.time() - t_start
            for key, c, e, _ in runs:
                cpu0, m0, ecpu0 = before[key]
                per = []
                guards = []
                for i, p in c.agents.items():
                    r1 = cpu_rss(p.pid)
                    if r1 is None or cpu0.get(i) is None:
                        continue
                    sm = smaps(p.pid) or (0, 0)
                    per.append((r1[0] - cpu0[i][0], r1[1], r1[2], sm[0], sm[1]))
                    for g in tagged_pids(cluster=c.id, node=i):
                        if g == p.pid:
                            continue
                        try:
                            exe = os.readlink(f"/proc/{g}/exe")
                        except OSError:
                            continue
                        if os.path.basename(exe) == "elastic-agent":
                            rg = cpu_rss(g)
                            sg = smaps(g) or (0, 0)
                            if rg:
                                guards.append((rg[0], rg[1], rg[2], sg[0], sg[1]))
                self.res["foot"][key] = {
                    "cpu_s": [x[0] for x in per], "hwm_kib": [x[1] for x in per],
                    "rss_kib": [x[2] for x in per], "pss_kib": [x[3] for x in per],
                    "uss_kib": [x[4] for x in per], "span": span,
                    "guard_rss_kib": [g[2] for g in guards], "guard_pss_kib": [g[3] for g in guards],
                    "guard_uss_kib": [g[4] for g in guards], "n": len(per)}
                if e:
                    dl = load_delta(m0, e.metrics())
                    dl["etcd_cpu_s"] = e.cpu() - ecpu0
                    dl["span"] = span
                    dl["n"] = n
                    self.res["steady_load"][key] = dl
                log(f"steady {key}: {self.res['foot'][key]}")
        finally:
            for _, c, e, _ in runs:
                self.done(c)
                if e:
                    self.etcd_done(e)

    # -- 7. scale: many elastic-agent nodes on one etcd ---------------------------------------------
    def phase_scale(self):
        for n in self.a.scale_n:
            if not self.scale_one(n):
                break

    def scale_one(self, n):
        e = self.etcd(f"scale-{n}")
        c = None
        watch = None
        try:
            watch = StateWatch(e, f"/elastic/")
            # --min N-1 --max N, and --settle/--last-call long enough that the round commits when
            # the N-th node arrives (however slowly N processes start here); N-1 is still enough
            c = Cluster("ea-etcd", n, n - 1, self.base, etcd=e, bins=self.bins,
                        lease_ttl=self.a.scale_lease_ttl,
                        extra=["--settle", "300", "--last-call", "300"])
            self.live.append(c)
            c.run_id = f"scale{n}"
            watch.start()
            m0 = e.metrics()
            t0 = now_ns()
            t_launched = None
            for i in range(n):
                c.agents[i] = spawn(c.cmd(i), c.env(i), os.path.join(c.dir, f"agent{i}.log"))
                if i % 50 == 49:
                    reap_orphans()
            t_launched = now_ns()
            log(f"scale N={n}: {n} agents launched in {(t_launched - t0) / 1e9:.1f} s")
            lat, got = c.wait_starts(range(n), t0, self.a.scale_timeout)
            m1 = e.metrics()
            commit = watch.first_commit_ns(0)
            res = {"n": n, "launch_s": (t_launched - t0) / 1e9, "started": len(got),
                   "load": load_delta(m0, m1)}
            if got:
                res["last_start_after_launch_s"] = (max(got.values()) - t_launched) / 1e9
            if commit:
                res["commit_after_last_launch_s"] = (commit - t_launched) / 1e9
                res["last_start_after_commit_s"] = (max(got.values()) - commit) / 1e9 if got else None
            arrivals = watch.node_puts()
            arrivals = [t for t in arrivals if commit and t <= commit]
            if arrivals and commit:
                res["commit_after_last_arrival_s"] = (commit - max(arrivals)) / 1e9
            mem = 0
            for pid in tagged_pids(cluster=c.id):  # agents, exec-guards, workers
                sm = smaps(pid)
                mem += sm[0] if sm else 0
            res["agents_rss_total_mib"] = mem / 1024
            res["lease_lost_events"] = count_in_logs(c, "lease lost")
            res["rejoins"] = count_in_logs(c, "rejoined run")
            ac = [cpu_rss(p.pid) for p in c.agents.values()]
            res["agent_cpu_s_total"] = sum(x[0] for x in ac if x)
            self.res["scale"][n] = res
            log(f"scale N={n}: {json.dumps(res)[:400]}")
            if lat is None:
                self.note(f"scale N={n}: only {len(got)}/{n} workers started within "
                          f"{self.a.scale_timeout:.0f} s of the launch; the agents logged "
                          f"{res['lease_lost_events']} 'lease lost' events and {res['rejoins']} rejoins; "
                          f"etcd: {json.dumps(res['load']['methods'])}")
                return False
            # N -> N-1: SIGKILL one node (agent and worker); its lease expires; next round
            time.sleep(2.0)
            victim = n - 1
            m2 = e.metrics()
            r0 = watch.last_round()
            t = now_ns()
            kill_tagged(signal.SIGKILL, cluster=c.id, node=victim)
            lat2, got2 = c.wait_starts(range(n - 1), t, self.a.loss_timeout)
            commit2 = watch.first_commit_ns(r0, t)
            res["round_before_loss"] = r0
            res["loss_restart_s"] = lat2
            res["loss_commit_s"] = (commit2 - t) / 1e9 if commit2 else None
            res["loss_load"] = load_delta(m2, e.metrics())
            log(f"scale N={n} -> {n - 1}: restarted {fmt_s(lat2)}, commit {res['loss_commit_s']}")
            return True
        finally:
            if watch:
                watch.stop()
            if c:
                self.done(c)
            self.etcd_done(e)

    # -- driver --------------------------------------------------------------------------------------
    def torch_import_cost(self):
        """Wall time of `python3 -c 'import torch.distributed.run'` (best of 3): the part of
        torchrun's cold start that is interpreter and import, before any rendezvous."""
        ts = []
        for _ in range(3):
            t = time.time()
            subprocess.run([PY, "-c", "import torch.distributed.run"], check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
            ts.append(time.time() - t)
        self.note(f"`{PY} -c 'import torch.distributed.run'` alone takes {min(ts):.2f} s here (best of 3): "
                  "that much of torchrun's cold start is the interpreter and the import.")

    def run(self):
        phases = self.a.phases.split(",")
        if "cold" in phases and any(c.startswith("tr-") for c in self.configs):
            self.torch_import_cost()
        if "ea-gateway" in self.configs:
            self.probe_gateway()
        if "cold" in phases:
            self.phase_cold()
        if "events" in phases:
            self.phase_events()
        if "steady" in phases:
            self.phase_steady()
        if "scale" in phases and self.a.scale_n:
            self.phase_scale()

    def cleanup(self):
        for x in list(self.live):
            try:
                x.stop()
            except Exception as ex:  # keep going: everything must stop
                log("cleanup:", ex)
        self.live.clear()
        left = sweep()
        if left:
            log(f"cleanup: {left} processes carrying the token would not die")


def count_in_logs(c, needle):
    n = 0
    for i in c.agents:
        try:
            with open(os.path.join(c.dir, f"agent{i}.log"), errors="replace") as f:
                n += sum(1 for line in f if needle in line)
        except OSError:
            pass
    return n


class StateWatch:
    """Watches the key prefix through etcd's JSON gateway (/v3/watch) with curl, recording the
    local arrival time of every event: the `state` commits (round numbers) and `nodes/` puts."""

    def __init__(self, etcd, prefix):
        self.etcd, self.prefix = etcd, prefix
        self.events = []
        self.proc = None
        self.thread = None

    def start(self):
        import base64
        key = base64.b64encode(self.prefix.encode()).decode()
        end = base64.b64encode((self.prefix[:-1] + chr(ord(self.prefix[-1]) + 1)).encode()).decode()
        body = json.dumps({"create_request": {"key": key, "range_end": end}})
        env = dict(os.environ, BENCH_TOKEN=TOKEN, BENCH_ROLE="watch")
        self.proc = subprocess.Popen(["curl", "-sN", "-X", "POST", "--max-time", "900",
                                      f"http://{self.etcd.endpoint}/v3/watch", "-d", body],
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        with _lock:
            _popens[self.proc.pid] = self.proc
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        time.sleep(0.3)

    def _read(self):
        import base64
        dec = json.JSONDecoder()
        buf = ""
        for raw in iter(self.proc.stdout.readline, b""):
            t = now_ns()
            buf += raw.decode(errors="replace")
            while buf.strip():
                try:
                    obj, idx = dec.raw_decode(buf.lstrip())
                except ValueError:
                    break
                buf = buf.lstrip()[idx:]
                for ev in obj.get("result", {}).get("events", []) or []:
                    kv = ev.get("kv", {})
                    k = base64.b64decode(kv.get("key", "")).decode(errors="replace")
                    v = base64.b64decode(kv.get("value", "") or "").decode(errors="replace")
                    self.events.append((t, ev.get("type", "PUT"), k, v))

    def states(self):
        out = []
        for t, typ, k, v in list(self.events):
            if k.endswith("/state") and typ == "PUT":
                try:
                    out.append((t, json.loads(v)))
                except ValueError:
                    pass
        return out

    def last_round(self):
        rs = [st.get("round", 0) for _, st in self.states()]
        return max(rs) if rs else 0

    def first_commit_ns(self, above_round=0, after_ns=0, timeout=5.0):
        """Arrival time of the first `state` put that commits a running round > above_round,
        arriving after after_ns."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            for t, st in self.states():
                if t > after_ns and st.get("round", 0) > above_round and st.get("status") == "running":
                    return t
            time.sleep(0.05)
        return None

    def node_puts(self):
        return [t for t, typ, k, v in list(self.events) if "/nodes/" in k and typ == "PUT"]

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


# ---------------------------------------------------------------- reporting ----------------------

def write_outputs(b, outdir, tag, cmdline, started, machine):
    a, res = b.a, b.res
    os.makedirs(outdir, exist_ok=True)
    ea = [c for c in b.configs if c.startswith("ea-")]
    tr = [c for c in b.configs if c.startswith("tr-")]
    md = []
    w = md.append
    w(f"Command: `{cmdline}`  ")
    w(f"Started {started}; {machine}.  ")
    w(f"Worker: `bench/lib/worker.c` (writes its start time, sleeps) under both tools; torchrun as "
      f"`{PY} bench/torchrun_launcher.py … --no_python worker`.")
    w("")

    # 1. cold
    cold_csv = os.path.join(outdir, f"cold-{tag}.csv")
    with open(cold_csv, "w", newline="") as f:
        cw = csv.writer(f, lineterminator="\n")
        cw.writerow(["N"] + [f"{c}_median_s" for c in b.configs] + [f"{c}_min_s" for c in b.configs]
                    + [f"{c}_max_s" for c in b.configs])
        for n in a.cold_n:
            row = [n]
            for agg in (med, lambda xs: min([x for x in xs if x is not None], default=None),
                        lambda xs: max([x for x in xs if x is not None], default=None)):
                for cfg in b.configs:
                    v = agg(res["cold"].get((cfg, n), []))
                    row.append("" if v is None else f"{v:.4f}")
            cw.writerow(row)
    w("### 1. Cold rendezvous: launch of N agents → last worker started (median of the repetitions)")
    w("")
    hdr = ["N"] + [LABEL[c] for c in b.configs] + ["c10d ÷ ea etcd", "etcd-v2 ÷ ea etcd", "c10d ÷ ea file"]
    w("| " + " | ".join(hdr) + " |")
    w("|" + "---|" * len(hdr))
    for n in a.cold_n:
        row = [str(n)]
        for cfg in b.configs:
            xs = res["cold"].get((cfg, n), [])
            m = med(xs)
            ok = len([x for x in xs if x is not None])
            row.append(fmt_s(m) + (f" ({ok}/{len(xs)})" if ok < len(xs) else ""))
        m = {cfg: med(res["cold"].get((cfg, n), [])) for cfg in b.configs}
        row.append(fmt_ratio(m.get("tr-c10d"), m.get("ea-etcd")))
        row.append(fmt_ratio(m.get("tr-etcd-v2"), m.get("ea-etcd")))
        row.append(fmt_ratio(m.get("tr-c10d"), m.get("ea-file")))
        w("| " + " | ".join(row) + " |")
    reps = f"{a.reps_ea} runs per point for elastic-agent, {a.reps_tr} for torchrun (N ≤ 8) and {a.reps_tr_big} (N > 8)"
    w("")
    w(f"{reps}; min = max = N for both tools, so each commits as soon as the N-th node is there. "
      f"CSV: `bench/plots/cold-{tag}.csv`.")
    w("")

    # 2. failure
    rec_csv = os.path.join(outdir, f"recovery-{tag}.csv")
    rows = []
    w("### 2. One worker fails (exit 1) → every node's replacement worker started")
    w("")
    cols = [LABEL[c] for c in ea] + [f"{LABEL[c]} (monitor {m:g} s)" for c in tr
                                     for m in (b.tr_monitor_default(), 0.1)]
    w("| N | " + " | ".join(cols) + " | best torchrun ÷ ea etcd |")
    w("|" + "---|" * (2 + len(cols)))
    for n in a.fail_n:
        row = [str(n)]
        vals = {}
        for c in ea:
            xs = res["fail"].get((c, n, None), [])
            vals[(c, None)] = med(xs)
            row.append(fmt_s(med(xs)) + f" ({len([x for x in xs if x is not None])})")
        for c in tr:
            for m in (b.tr_monitor_default(), 0.1):
                xs = res["fail"].get((c, n, m), [])
                vals[(c, m)] = med(xs)
                row.append(fmt_s(med(xs)) + f" ({len([x for x in xs if x is not None])})")
        trv = [v for (c, m), v in vals.items() if c.startswith("tr-") and v is not None]
        row.append(fmt_ratio(min(trv) if trv else None, vals.get(("ea-etcd", None))))
        w("| " + " | ".join(row) + " |")
        rows.append([n] + [("" if v is None else f"{v:.4f}") for v in vals.values()])
    with open(rec_csv, "w", newline="") as f:
        cw = csv.writer(f, lineterminator="\n")
        cw.writerow(["N"] + [f"{c}" if m is None else f"{c}@{m:g}s" for c in ea for m in [None]]
                    + [f"{c}@{m:g}s" for c in tr for m in (b.tr_monitor_default(), 0.1)])
        cw.writerows(rows)
    w("")
    w(f"Median (number of measured failures) of {a.fail_reps_ea} injected failures per cluster for "
      f"elastic-agent, {a.fail_reps_tr} for torchrun; the failing worker is on the last node. "
      f"`--max-restarts 1000` / `--max_restarts 1000`, `--nnodes 2:N` (min 2)."
      + (" In --quick, torchrun at its default monitor interval runs at the smallest N only." if a.quick else "")
      + f" CSV: `bench/plots/recovery-{tag}.csv`.")
    w("")

    # 3-4. term / kill
    for ev, title in (("kill", "3. SIGKILL one node's agent and its workers (the others healthy) → every survivor's worker restarted"),
                      ("term", "4. SIGTERM one agent → every survivor's worker restarted")):
        w(f"### {title}")
        w("")
        w("| N | tool, backend | setting | time |")
        w("|---|---|---|---|")
        for (cfg, n, mon), v in sorted(res[ev].items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2] or 0)):
            setting = "lease TTL 10 s (default)" if cfg.startswith("ea-") else f"--monitor_interval {mon:g}"
            if v is None:
                alive = res.get("tr_loss_detail", {}).get((cfg, n, mon, ev))
                extra = f" ({alive}/{n - 1} survivors still running their old workers)" if alive is not None else ""
                tv = f"**not within {a.loss_timeout:.0f} s**{extra}"
            else:
                tv = fmt_s(v)
            w(f"| {n} | {LABEL[cfg]} | {setting} | {tv} |")
        w("")
    w(f"elastic-agent: in the same cluster as §2, after the failures: SIGTERM node N-1's agent, then "
      f"SIGKILL node N-2's agent and worker (`--nnodes 2:N`). torchrun: a fresh cluster per event "
      f"(the clusters wait side by side); the victim is the last node, never the c10d store host.")
    w("")

    # 5. footprint
    foot_csv = os.path.join(outdir, f"footprint-{tag}.csv")
    w(f"### 5. Footprint: per agent, {a.steady_n} agents per cluster, {a.steady_s:.0f} s of steady running")
    w("")
    w("| tool, backend | setting | agent max RSS (VmHWM) | agent PSS / USS at the end | agent CPU s per minute | exec-guard per worker: RSS / PSS / USS |")
    w("|---|---|---|---|---|---|")
    with open(foot_csv, "w", newline="") as f:
        cw = csv.writer(f, lineterminator="\n")
        cw.writerow(["config", "monitor_s", "agents", "window_s", "max_hwm_kib", "median_hwm_kib",
                     "median_pss_kib", "median_uss_kib", "cpu_s_per_agent_per_min_median",
                     "cpu_s_per_agent_per_min_max", "guard_rss_kib_median", "guard_pss_kib_median",
                     "guard_uss_kib_median"])
        for (cfg, mon), d in res["foot"].items():
            if not d["n"]:
                continue
            per_min = [x * 60.0 / d["span"] for x in d["cpu_s"]]
            g, gp, gu = med(d["guard_rss_kib"]), med(d["guard_pss_kib"]), med(d["guard_uss_kib"])
            cw.writerow([cfg, mon or "", d["n"], f"{d['span']:.1f}", max(d["hwm_kib"]), med(d["hwm_kib"]),
                         med(d["pss_kib"]), med(d["uss_kib"]),
                         f"{med(per_min):.4f}", f"{max(per_min):.4f}", g or "", gp or "", gu or ""])
            setting = "" if mon is None else f"--monitor_interval {mon:g}"
            mib = lambda k: f"{k / 1024:.1f}"
            w(f"| {LABEL[cfg]} | {setting} | {mib(max(d['hwm_kib']))} MiB (median {mib(med(d['hwm_kib']))}) "
              f"| {mib(med(d['pss_kib']))} / {mib(med(d['uss_kib']))} MiB "
              f"| {med(per_min):.3f} (max {max(per_min):.3f}) "
              f"| {(mib(g) + ' / ' + mib(gp) + ' / ' + mib(gu) + ' MiB') if g else '—'} |")
    ea_h = [max(d["hwm_kib"]) for (c, m), d in res["foot"].items() if c.startswith("ea-") and d["n"]]
    tr_h = [min(d["hwm_kib"]) for (c, m), d in res["foot"].items() if c.startswith("tr-") and d["n"]]
    if ea_h and tr_h:
        w("")
        w(f"Ratio of max RSS, smallest torchrun agent ÷ largest elastic-agent: "
          f"{fmt_ratio(min(tr_h), max(ea_h))}.")
    w("")
    w("The agent process alone (torchrun: the Python process; elastic-agent: the agent, and "
      "separately the `exec-guard` middleman each worker runs under, which torchrun does not have). "
      "RSS counts shared library pages in full; PSS shares them out among the processes mapping "
      "them, USS is what the process alone holds (from /proc/<pid>/smaps_rollup). "
      "CPU is utime+stime from /proc over the window (10 ms ticks), scaled to one minute. "
      f"CSV: `bench/plots/footprint-{tag}.csv`.")
    w("")

    # 6. store load
    load_csv = os.path.join(outdir, f"store-{tag}.csv")
    w("### 6. Store load (etcd /metrics)")
    w("")
    w("| tool, backend | N | requests / agent / rendezvous | writes / agent / rendezvous | raft proposals / agent / rendezvous | requests / agent / min (steady) | writes / agent / min (steady) | proposals / agent / min (steady) | etcd CPU s / min (steady) |")
    w("|---|---|---|---|---|---|---|---|---|")
    with open(load_csv, "w", newline="") as f:
        cw = csv.writer(f, lineterminator="\n")
        cw.writerow(["config", "N", "req_per_agent_rdzv", "writes_per_agent_rdzv", "proposals_per_agent_rdzv",
                     "monitor_s", "req_per_agent_min", "writes_per_agent_min", "proposals_per_agent_min",
                     "etcd_cpu_s_per_min"])
        for cfg in b.configs:
            if not b.needs_etcd(cfg):
                continue
            steady = [(m, d) for (c, m), d in res["steady_load"].items() if c == cfg]
            for n in a.cold_n:
                loads = res["cold_load"].get((cfg, n))
                if not loads:
                    continue
                r = med([x["requests"] for x in loads]) / n
                wr = med([x["writes"] for x in loads]) / n
                pr = med([x["proposals"] for x in loads]) / n
                sline = ["", "", "", ""]
                if n == a.steady_n and steady:
                    parts = []
                    for m, d in steady:
                        k = 60.0 / d["span"] / d["n"]
                        parts.append((m, d["requests"] * k, d["writes"] * k, d["proposals"] * k,
                                      d["etcd_cpu_s"] * 60.0 / d["span"]))
                    lab = lambda m: "" if m is None else f" (mon {m:g} s)"
                    sline = ["<br>".join(f"{p[1]:.1f}{lab(p[0])}" for p in parts),
                             "<br>".join(f"{p[2]:.2f}{lab(p[0])}" for p in parts),
                             "<br>".join(f"{p[3]:.1f}{lab(p[0])}" for p in parts),
                             "<br>".join(f"{p[4]:.2f}{lab(p[0])}" for p in parts)]
                    for p in parts:
                        cw.writerow([cfg, n, "", "", "", p[0] or "", f"{p[1]:.3f}", f"{p[2]:.3f}",
                                     f"{p[3]:.3f}", f"{p[4]:.3f}"])
                cw.writerow([cfg, n, f"{r:.3f}", f"{wr:.3f}", f"{pr:.3f}", "", "", "", "", ""])
                w(f"| {LABEL[cfg]} | {n} | {r:.2f} | {wr:.2f} | {pr:.2f} | " + " | ".join(sline) + " |")
    w("")
    w("Requests = gRPC messages received (unary calls and stream messages: Watch, LeaseKeepAlive) + "
      "v2 HTTP requests; writes = increase of the v3 revision + v2 store writes; raft proposals "
      "committed include lease grants/revokes and the v2 TTL `SYNC` entries. Per rendezvous: from "
      "launch to the last worker started, in the cold runs of §1 (each backend on its own fresh etcd). "
      f"Steady: the §5 window, each cluster on its own etcd. CSV: `bench/plots/store-{tag}.csv`.")
    w("")
    # per-method detail for the steady state
    if res["steady_load"]:
        w("Steady-state requests by method over the window (all agents):")
        w("")
        for (cfg, mon), d in res["steady_load"].items():
            meth = ", ".join(f"{k} {int(v)}" for k, v in sorted(d["methods"].items(), key=lambda kv: -kv[1]))
            lab = "" if mon is None else f" (monitor {mon:g} s)"
            w(f"- {LABEL[cfg]}{lab}, {d['n']} agents, {d['span']:.0f} s: {meth or 'none'}")
        w("")
        w("Cold rendezvous requests by method (median run, all agents):")
        w("")
        for cfg in b.configs:
            for n in a.cold_n:
                loads = res["cold_load"].get((cfg, n))
                if loads and n == max(a.cold_n):
                    d = sorted(loads, key=lambda x: x["requests"])[len(loads) // 2]
                    meth = ", ".join(f"{k} {int(v)}" for k, v in sorted(d["methods"].items(), key=lambda kv: -kv[1]))
                    w(f"- {LABEL[cfg]}, N={n}: {meth}")
        w("")

    # 7. scale
    if res["scale"]:
        sc_csv = os.path.join(outdir, f"scale-{tag}.csv")
        w("### 7. Scale: many elastic-agent nodes (etcd gRPC backend) on one local etcd")
        w("")
        w("| N | agents launched in | workers started | commit after last arrival | commit → last worker | last worker after last launch | key writes / node | requests / node | proposals / node | 'lease lost' events | N → N-1: commit after SIGKILL | N → N-1: every worker restarted | PSS of all agents, guards, workers |")
        w("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        with open(sc_csv, "w", newline="") as f:
            cw = csv.writer(f, lineterminator="\n")
            cw.writerow(["N", "launch_s", "started", "lease_lost_events", "commit_after_last_arrival_s", "last_start_after_commit_s",
                         "last_start_after_last_launch_s", "writes_per_node", "requests_per_node",
                         "proposals_per_node", "loss_commit_s", "loss_restart_s", "pss_total_mib"])
            for n, d in sorted(res["scale"].items()):
                L = d["load"]
                cw.writerow([n, f"{d['launch_s']:.3f}", d["started"], d.get("lease_lost_events", ""),
                             d.get("commit_after_last_arrival_s", ""),
                             d.get("last_start_after_commit_s", ""), d.get("last_start_after_launch_s", ""),
                             f"{L['writes'] / n:.3f}", f"{L['requests'] / n:.3f}", f"{L['proposals'] / n:.3f}",
                             d.get("loss_commit_s", ""), d.get("loss_restart_s", ""), f"{d['agents_rss_total_mib']:.0f}"])
                full = d["started"] == n
                w(f"| {n} | {d['launch_s']:.1f} s | {d['started']}/{n} | {fmt_s(d.get('commit_after_last_arrival_s'))} | "
                  f"{fmt_s(d.get('last_start_after_commit_s') if full else None)} | "
                  f"{fmt_s(d.get('last_start_after_launch_s') if full else None)} | "
                  f"{L['writes'] / n:.2f} | {L['requests'] / n:.2f} | {L['proposals'] / n:.2f} | "
                  f"{d.get('lease_lost_events', 0)} | "
                  f"{fmt_s(d.get('loss_commit_s'))} | {fmt_s(d.get('loss_restart_s'))} | {d['agents_rss_total_mib']:.0f} MiB |")
        w("")
        w("Commit = the arrival, at a watcher on the same etcd (curl on the JSON gateway's /v3/watch), "
          "of the first `state` put of a running round (after the SIGKILL: of a round above the one "
          "running at the kill); last arrival = the last `nodes/` put that watcher saw before it "
          "(events that reach it in one read get the same time). "
          f"`--min N-1 --max N --settle 300 --last-call 300` (so round 1 commits when the N-th node arrives), one worker per agent, "
          + (f"`--lease-ttl {a.scale_lease_ttl:g}`. " if a.scale_lease_ttl else "default lease TTL (10 s). ") +
          f"Launch → commit includes spawning N processes on 2 cores. CSV: `bench/plots/scale-{tag}.csv`.")
        w("")
    if res["notes"]:
        w("Notes from the run:")
        w("")
        for s in res["notes"]:
            w(f"- {s}")
        w("")
    text = "\n".join(md) + "\n"
    with open(os.path.join(outdir, f"report-{tag}.md"), "w") as f:
        f.write(text)
    with open(os.path.join(outdir, f"raw-{tag}.json"), "w") as f:
        json.dump({str(k): {str(kk): vv for kk, vv in v.items()} if isinstance(v, dict) else v
                   for k, v in res.items()}, f, indent=1, default=str)
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--agent", required=True)
    ap.add_argument("--worker", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--phases", default="cold,events,steady,scale")
    ap.add_argument("--configs", default="")
    ap.add_argument("--cold-n", default="")
    ap.add_argument("--scale-n", default=None)
    ap.add_argument("--scale-lease-ttl", type=float, default=None)
    ap.add_argument("--tag", default=None, help="output name suffix (default quick / full)")
    ap.add_argument("--cmdline", default="bench/run.sh")
    ap.add_argument("--machine", default="")
    a = ap.parse_args()
    q = a.quick
    a.cold_n = [int(x) for x in (a.cold_n or ("2,4,8" if q else "2,4,8,16,32")).split(",")]
    a.reps_ea = 3 if q else 5
    a.reps_tr = 1 if q else 3
    a.reps_tr_big = 1 if q else 2
    a.fail_n = [4, 8]
    a.loss_n = [4]
    a.fail_reps_ea = 3
    a.fail_reps_tr = 1 if q else 2
    a.cold_timeout = 120.0
    a.event_timeout = 60.0
    a.loss_timeout = 20.0 if q else 60.0
    a.settle_between = 1.0
    a.steady_n = 4
    a.steady_s = 15.0 if q else 60.0
    a.scale_n = [int(x) for x in (a.scale_n if a.scale_n is not None else ("100" if q else "100,250,500")).split(",") if x]
    a.scale_timeout = 60.0
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    set_subreaper()

    b = Bench(a)
    if a.configs:
        b.configs = [c for c in b.configs if c in a.configs.split(",")]

    def on_signal(sig, frame):
        raise KeyboardInterrupt(f"signal {sig}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    t_start = time.time()
    rc = 0
    try:
        b.run()
    except KeyboardInterrupt as ex:
        log("interrupted:", ex)
        rc = 130
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        b.cleanup()
    elapsed = time.time() - t_start
    machine = a.machine + f"; bench wall time {elapsed / 60:.1f} min"
    text = write_outputs(b, a.outdir, a.tag or ("quick" if q else "full"), a.cmdline, started, machine)
    print(text)
    return rc


if __name__ == "__main__":
    sys.exit(main())
