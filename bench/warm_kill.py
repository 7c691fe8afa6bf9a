#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Node kill during real DDP training: cold restarts against --warm-workers, side by side.

Both run the same script, examples/pytorch/train_warm.py (train_elastic.py's DDP training on
CPU with gloo; its set-up — import torch, the model, the data, the checkpoint — comes before
elastic_agent.wait_for_assignment(), which returns at once under a cold start), on 4 "nodes" of
one worker each on this host, elastic-agent on a real etcd:

  1. 4 nodes start (--nnodes 3:4); training runs at world 4. With --warm-workers we also wait
     until every node has parked its spare for the next round (in a long run they are parked
     minutes before any failure);
  2. when the victim's worker (never rank 0) begins epoch 3, the whole victim node is SIGKILLed
     (agent and worker: the machine is gone);
  3. measured, from the lines as they reach us (one event loop on the nodes' pipes, monotonic
     clock): the new round's commit (the first survivor's "round N (generation G): started"
     line at world 3) -> every survivor's first training step ("/3] first step: ").

The two kinds alternate run by run (cold, warm, cold, warm, ...) so that a load change on the
machine hits both. Prints each run and the medians; --out keeps every node's log.
"""
import argparse
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pytorch_kill import Node, start_etcd  # noqa: E402

ROOT = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"
TRAIN = os.path.join(ROOT, "examples/pytorch/train_warm.py")


class Run:
    def __init__(self, kind, idx, args, outdir):
        self.kind, self.idx, self.args = kind, idx, args
        self.dir = os.path.join(outdir, f"{idx:02d}-{kind}")
        os.makedirs(self.dir)
        self.t0 = time.monotonic()
        self.nodes = []
        import selectors
        self.sel = selectors.DefaultSelector()
        self.env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo",
                        PYTHONUNBUFFERED="1")

    def now(self):
        return time.monotonic() - self.t0

    def start(self, i):
        a = self.args
        cmd = [a.bin, "--rdzv-endpoint", a.endpoint, "--run-id", f"wk{os.getpid()}-{self.idx}",
               "--node-id", f"n{i}", "--nnodes", "3:4", "--settle", "1",
               "--lease-ttl", str(a.lease_ttl), "--stop-timeout", "2",
               "--local-addr", "127.0.0.1", "--tee"]
        if self.kind == "warm":
            cmd.append("--warm-workers")
        cmd += ["--", PYTHON, TRAIN, "--ckpt-dir", os.path.join(self.dir, "ckpt"),
                "--epochs", str(a.epochs), "--step-time", str(a.step_time)]
        n = Node(f"n{i}", cmd, self.env, self.dir, self.t0)
        self.nodes.append(n)
        self.sel.register(n.proc.stdout, 1, n)  # selectors.EVENT_READ

    def pump_until(self, pred, timeout):
        deadline = time.monotonic() + timeout
        while True:
            v = pred()
            if v:
                return v
            left = deadline - time.monotonic()
            if left <= 0:
                return v
            for key, _ in self.sel.select(min(left, 0.2)):
                if not key.data.pump(time.monotonic()):
                    self.sel.unregister(key.fileobj)

    @staticmethod
    def first(nodes, regex, after=0.0):
        r = re.compile(regex)
        hits = []
        for n in nodes:
            for t, text in n.lines:
                if t >= after and r.search(text):
                    hits.append((t, n.name, text))
                    break
        return hits

    def count(self, node, regex):
        r = re.compile(regex)
        return sum(1 for _, text in node.lines if r.search(text))

    def run(self):
        a = self.args
        for i in range(4):
            self.start(i)
        if not self.pump_until(lambda: len(self.first(self.nodes, r"/4\] epoch 1 begin")) == 4,
                               a.wait):
            return self.finish("world 4 never trained")
        if self.kind == "warm" and not self.pump_until(
                lambda: all(self.count(n, r"\] parked: set up in ") >= 2 for n in self.nodes),
                a.wait):
            return self.finish("the spares were never parked")
        rank0 = self.first(self.nodes, r"\[train rank 0/4\]")
        victim = next(n for n in self.nodes if n.name != rank0[0][1])
        survivors = [n for n in self.nodes if n is not victim]
        if not self.pump_until(lambda: self.first([victim], r"/4\] epoch 3 begin"), a.wait):
            return self.finish("the victim never began epoch 3")
        victim.kill_node()
        t_kill = self.now()
        commit = self.pump_until(
            lambda: self.first(survivors, r"INFO: round \d+ \(generation \d+\): started .* of "
                                          r"world 3,", t_kill), a.wait)
        if not commit:
            return self.finish("no world-3 round")
        steps = self.pump_until(
            lambda: (lambda h: h if len(h) == 3 else None)(
                self.first(survivors, r"/3\] first step: ", t_kill)), a.wait)
        if not steps:
            return self.finish("not every survivor trained at world 3")
        t_commit = min(t for t, _, _ in commit)
        t_step = max(t for t, _, _ in steps)
        starts = self.first(survivors, r"/3\] start: ", t_kill)
        self.result = {
            "commit_to_step": t_step - t_commit,
            "kill_to_step": t_step - t_kill,
            "kill_to_commit": t_commit - t_kill,
            "warm_starts": sum(", warm (pid" in x for _, _, x in starts),
        }
        return self.finish(None)

    def finish(self, error):
        self.error = error
        for n in self.nodes:
            if n.proc.poll() is None:
                n.kill_node()
            n.proc.wait()
        for n in self.nodes:
            n.pump(time.monotonic())
            n.log.close()
        return self


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5, help="runs of each kind (default 5)")
    p.add_argument("--bin", default=os.path.join(ROOT, "build/elastic-agent"))
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--step-time", type=float, default=0.03)
    p.add_argument("--lease-ttl", type=float, default=2)
    p.add_argument("--wait", type=float, default=120, help="seconds to wait for each phase")
    p.add_argument("--out", help="keep the logs here (default: a temp dir, removed)")
    args = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="warm-kill-")
    outdir = args.out or tmp
    os.makedirs(outdir, exist_ok=True)
    etcd, args.endpoint = start_etcd(tmp)
    results = {"cold": [], "warm": []}
    try:
        for i in range(args.runs):
            for kind in (("cold", "warm") if i % 2 == 0 else ("warm", "cold")):
                r = Run(kind, len(results["cold"]) + len(results["warm"]), args, outdir).run()
                load = os.getloadavg()[0]
                if r.error:
                    print(f"run {r.idx:2d} {kind}: FAILED: {r.error} (logs: {r.dir})", flush=True)
                    continue
                res = r.result
                res["load"] = load
                results[kind].append(res)
                print(f"run {r.idx:2d} {kind}: commit -> every survivor's first step "
                      f"{res['commit_to_step']:.3f} s; kill -> commit {res['kill_to_commit']:.3f}"
                      f" s; kill -> first step {res['kill_to_step']:.3f} s; warm starts "
                      f"{res['warm_starts']}/3; load {load:.1f}", flush=True)
    finally:
        etcd.kill()
        etcd.wait()
    print()
    med = {}
    for kind in ("cold", "warm"):
        rs = results[kind]
        if not rs:
            print(f"{kind}: no successful run")
            continue
        m = {k: statistics.median(r[k] for r in rs)
             for k in ("commit_to_step", "kill_to_commit", "kill_to_step")}
        med[kind] = m
        vals = ", ".join(f"{r['commit_to_step']:.2f}" for r in rs)
        print(f"{kind}: {len(rs)} runs; commit -> every survivor's first step: median "
              f"{m['commit_to_step']:.3f} s ({vals}); kill -> commit {m['kill_to_commit']:.3f} s;"
              f" kill -> first step {m['kill_to_step']:.3f} s")
    if len(med) == 2:
        print(f"warm/cold: commit -> first step x{med['warm']['commit_to_step'] / med['cold']['commit_to_step']:.2f}"
              f" ({med['cold']['commit_to_step'] - med['warm']['commit_to_step']:.2f} s saved);"
              f" kill -> first step x{med['warm']['kill_to_step'] / med['cold']['kill_to_step']:.2f}")
    if args.out:
        print(f"logs: {outdir}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main()
