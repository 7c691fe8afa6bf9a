#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ZeRO-1 on 4 nodes, one SIGKILLed: every rank training again from the step before the kill,
the dead node's optimizer shard from its ring neighbour (issue 39's target; docs/checkpoint.md
"Fetch").

examples/pytorch/train_zero.py (ZeroRedundancyOptimizer, Adam, CPU, gloo; every rank saves its
optimizer shard into its agent's --checkpoint-memory store every step) on 4 "nodes" of one
worker each on this host, elastic-agent on a real etcd, --warm-workers, the default lease TTL,
the liveness ring on (the default):

  1. 4 nodes start (--nnodes 3:4); training runs at world 4; we wait until every node has
     parked its spare for the next round and rank 0 passed --kill-step;
  2. a node whose rank is not 0 is SIGKILLed (agent and worker: the machine is gone); the last
     step rank 0 logged before it is the step of the kill;
  3. measured, from the lines as they reach us (monotonic clock): the kill -> every survivor's
     first training step at world 3 ("/3] first step: "); the step they resumed from (the steps
     redone: the kill's step - the resumed one); which shards were fetched, from which node.

Prints each run and the medians; --out keeps every node's log.
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
TRAIN = os.path.join(ROOT, "examples/pytorch/train_zero.py")


class Run:
    def __init__(self, idx, args, outdir):
        self.idx, self.args = idx, args
        self.dir = os.path.join(outdir, f"{idx:02d}-zero-kill")
        os.makedirs(self.dir)
        self.t0 = time.monotonic()
        self.nodes = []
        import selectors
        self.sel = selectors.DefaultSelector()
        self.env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo",
                        PYTHONUNBUFFERED="1", PYTHONPATH=os.path.join(ROOT, "python"))
        self.error, self.result = None, None

    def now(self):
        return time.monotonic() - self.t0

    def start(self, i):
        a = self.args
        cmd = [a.bin, "--rdzv-endpoint", a.endpoint, "--run-id", f"zk{os.getpid()}-{self.idx}",
               "--node-id", f"n{i}", "--nnodes", "3:4", "--settle", "1", "--stop-timeout", "2",
               "--local-addr", "127.0.0.1", "--tee", "--max-restarts", "3", "--warm-workers",
               "--checkpoint-memory", str(a.memory), "--log-level", "info",
               "--", PYTHON, TRAIN, "--steps", "1000000", "--step-time", str(a.step_time)]
        n = Node(f"n{i}", cmd, self.env, self.dir, self.t0)
        self.nodes.append(n)
        self.sel.register(n.proc.stdout, 1, n)

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

    @staticmethod
    def last_step(node, before):
        r = re.compile(r"\[zero rank 0/4\] step (\d+) loss")
        s = None
        for t, text in node.lines:
            m = r.search(text)
            if t <= before and m:
                s = int(m.group(1))
        return s

    def count(self, node, regex):
        r = re.compile(regex)
        return sum(1 for _, text in node.lines if r.search(text))

    def run(self):
        a = self.args
        for i in range(4):
            self.start(i)
        if not self.pump_until(lambda: len(self.first(self.nodes, r"/4\] first step: ")) == 4,
                               a.wait):
            return self.finish("world 4 never trained")
        if not self.pump_until(lambda: all(self.count(n, r"\[zero pid \d+\] parked") >= 2
                                           for n in self.nodes), a.wait):
            return self.finish("the spares were never parked")
        rank0 = self.first(self.nodes, r"\[zero rank 0/4\]")[0][1]
        node0 = next(n for n in self.nodes if n.name == rank0)
        if not self.pump_until(lambda: (self.last_step(node0, 1e9) or 0) >= a.kill_step, a.wait):
            return self.finish("rank 0 never reached the kill step")
        victim = next(n for n in self.nodes if n.name != rank0)
        survivors = [n for n in self.nodes if n is not victim]
        t_kill = self.now()
        victim.kill_node()
        for key in list(self.sel.get_map().values()):
            if key.data is victim:
                self.sel.unregister(key.fileobj)
        s_kill = self.last_step(node0, t_kill)
        steps = self.pump_until(
            lambda: (lambda h: h if len(h) == 3 else None)(
                self.first(survivors, r"/3\] first step: ", t_kill)), a.wait)
        if not steps:
            return self.finish("not every survivor trained again at world 3")
        resumed = self.first(survivors, r"/3\] start: resumed from step (\d+)", t_kill)
        if len(resumed) != 3:
            return self.finish("a survivor did not resume from memory")
        s_res = min(int(re.search(r"resumed from step (\d+)", t).group(1)) for _, _, t in resumed)
        fetched = [(n.name, text.split("fetched ", 1)[1]) for n in survivors
                   for t, text in n.lines if t >= t_kill and "checkpoint store: fetched" in text]
        t_step = max(t for t, _, _ in steps)
        commit = self.first(survivors, r"INFO: round \d+ \(generation \d+\): started .* of "
                                       r"world 3,", t_kill)
        t_commit = min(t for t, _, _ in commit) if commit else t_step
        vrank = int(re.search(r"\[zero rank (\d+)/4\]",
                              self.first([victim], r"\[zero rank \d+/4\]")[0][2]).group(1))
        dead = [f"{who} <- {what}" for who, what in fetched
                if what.startswith(f"shard {vrank} of step {s_res} ")]
        self.result = {"kill_to_step": t_step - t_kill, "kill_to_commit": t_commit - t_kill,
                       "commit_to_step": t_step - t_commit, "kill_step": s_kill, "resumed": s_res,
                       "redone": (s_kill or 0) - s_res, "fetched": len(fetched),
                       "dead_shard": f"rank {vrank} of {victim.name}: " + "; ".join(dead)}
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
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--bin", default=os.path.join(ROOT, "build/elastic-agent"))
    p.add_argument("--step-time", type=float, default=0.05)
    p.add_argument("--kill-step", type=int, default=30, help="kill once rank 0 passed this step")
    p.add_argument("--memory", type=int, default=64, help="--checkpoint-memory, MB")
    p.add_argument("--wait", type=float, default=120, help="seconds to wait for each phase")
    p.add_argument("--out", help="keep the logs here (default: a temp dir, removed)")
    args = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="zero-kill-")
    outdir = args.out or tmp
    os.makedirs(outdir, exist_ok=True)
    etcd, args.endpoint = start_etcd(tmp)
    rs = []
    try:
        for i in range(args.runs):
            r = Run(i, args, outdir).run()
            load = os.getloadavg()[0]
            if r.error:
                print(f"run {i}: FAILED: {r.error} (logs: {r.dir})", flush=True)
                continue
            res = dict(r.result, load=load)
            rs.append(res)
            print(f"run {i}: kill_to_step {res['kill_to_step']:.3f} s (kill_to_commit "
                  f"{res['kill_to_commit']:.3f} s, commit_to_step {res['commit_to_step']:.3f} s); "
                  f"killed at step "
                  f"{res['kill_step']}, resumed from step {res['resumed']} (redone "
                  f"{res['redone']}); shards fetched {res['fetched']}, the dead node's {res['dead_shard']}; "
                  f"load {load:.1f}", flush=True)
    finally:
        etcd.kill()
        etcd.wait()
    if rs:
        m = statistics.median(r["kill_to_step"] for r in rs)
        mc = statistics.median(r["kill_to_commit"] for r in rs)
        ms = statistics.median(r["commit_to_step"] for r in rs)
        print(f"\nruns {len(rs)}: kill_to_step median **{m:.3f} s** (kill_to_commit {mc:.3f} s, "
              f"commit_to_step {ms:.3f} s; each kill_to_step: "
              + ", ".join(f"{r['kill_to_step']:.2f}" for r in rs) + "); steps redone: "
              + ", ".join(str(r["redone"]) for r in rs))
    if args.out:
        print(f"logs: {outdir}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main()
