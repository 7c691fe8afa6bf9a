#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Node kill during real DDP training: cold restarts against --warm-workers, side by side.

With --scenarios (issue 32's rows, each kind in turn; default: kill with cold and warm):
  kill  the node kill below, kinds cold / warm / inplace (train_inplace.py under
        --warm-workers --in-place: the survivors re-form in the same process);
  add   3 nodes train, a 4th is started: its agent's start (and its join: its "joined run" line;
        with --warm-workers it joins once its spare is ready) -> every rank's first step at world 4
        (after --settle 1), and the world-4 commit -> that; kinds cold / warm / inplace;
  fail  4 nodes train, the victim's worker exits 1 when it begins epoch 3 (--fail-rank): its
        exit line -> every rank's first step of the next round (--max-restarts 3); cold / warm.
--kinds picks kinds (default cold,warm; inplace with it).

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
TRAIN_INPLACE = os.path.join(ROOT, "examples/pytorch/train_inplace.py")
KINDS = {"kill": ("cold", "warm", "inplace"), "add": ("cold", "warm", "inplace"),
         "fail": ("cold", "warm")}


class Run:
    def __init__(self, kind, idx, args, outdir, scenario="kill"):
        self.kind, self.idx, self.args, self.scenario = kind, idx, args, scenario
        self.dir = os.path.join(outdir, f"{idx:02d}-{scenario}-{kind}")
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
               "--local-addr", "127.0.0.1", "--tee", "--max-restarts", "3"]
        if self.kind in ("warm", "inplace"):
            cmd.append("--warm-workers")
        if self.kind == "inplace":
            cmd += ["--in-place", "--in-place-timeout", "30"]
        train = TRAIN_INPLACE if self.kind == "inplace" else TRAIN
        cmd += ["--", PYTHON, train, "--ckpt-dir", os.path.join(self.dir, "ckpt"),
                "--epochs", str(a.epochs), "--step-time", str(a.step_time)]
        if self.scenario == "fail":
            cmd += ["--fail-rank", "1", "--fail-epoch", "3"]
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

    def parked(self, nodes):
        return self.kind == "cold" or self.pump_until(
            lambda: all(self.count(n, r"\] parked: set up in ") >= 2 for n in nodes),
            self.args.wait)

    def run(self):
        if self.scenario == "add":
            return self.run_add()
        if self.scenario == "fail":
            return self.run_fail()
        return self.run_kill()

    def run_add(self):
        """3 nodes train at world 3; a 4th starts: -> every rank's first step at world 4."""
        a = self.args
        for i in range(3):
            self.start(i)
        if not self.pump_until(lambda: len(self.first(self.nodes, r"/3\] first step: ")) == 3,
                               a.wait):
            return self.finish("world 3 never trained")
        if not self.parked(self.nodes):
            return self.finish("the spares were never parked")
        t_add = self.now()
        self.start(3)
        commit = self.pump_until(
            lambda: self.first(self.nodes, r"INFO: round \d+ \(generation \d+\): started .* of "
                                          r"world 4,", t_add), a.wait)
        if not commit:
            return self.finish("no world-4 round")
        steps = self.pump_until(
            lambda: (lambda h: h if len(h) == 4 else None)(
                self.first(self.nodes, r"/4\] first step: ", t_add)), a.wait)
        if not steps:
            return self.finish("not every rank trained at world 4")
        t_commit = min(t for t, _, _ in commit)
        t_step = max(t for t, _, _ in steps)
        joined = self.first(self.nodes[3:], r"INFO: joined run ", t_add)
        t_join = joined[0][0] if joined else t_add
        self.result = {"add_to_step": t_step - t_add, "commit_to_step": t_step - t_commit,
                       "add_to_commit": t_commit - t_add, "join_to_step": t_step - t_join,
                       "add_to_join": t_join - t_add}
        return self.finish(None)

    def run_fail(self):
        """4 nodes; rank 1's worker exits 1 at epoch 3: -> every rank's next first step."""
        a = self.args
        for i in range(4):
            self.start(i)
        if not self.pump_until(lambda: len(self.first(self.nodes, r"/4\] epoch 1 begin")) == 4,
                               a.wait):
            return self.finish("world 4 never trained")
        if not self.parked(self.nodes):
            return self.finish("the spares were never parked")
        fail = self.pump_until(lambda: self.first(self.nodes, r"failing with exit 1"), a.wait)
        if not fail:
            return self.finish("the worker never failed")
        t_fail = fail[0][0]
        commit = self.pump_until(
            lambda: self.first(self.nodes, r"INFO: round \d+ \(generation \d+\): started .* of "
                                          r"world 4,", t_fail), a.wait)
        steps = self.pump_until(
            lambda: (lambda h: h if len(h) == 4 else None)(
                self.first(self.nodes, r"/4\] first step: ", t_fail)), a.wait)
        if not commit or not steps:
            return self.finish("not every rank trained again")
        t_commit = min(t for t, _, _ in commit)
        t_step = max(t for t, _, _ in steps)
        self.result = {"fail_to_step": t_step - t_fail, "commit_to_step": t_step - t_commit,
                       "fail_to_commit": t_commit - t_fail}
        return self.finish(None)

    def run_kill(self):
        a = self.args
        for i in range(4):
            self.start(i)
        if not self.pump_until(lambda: len(self.first(self.nodes, r"/4\] epoch 1 begin")) == 4,
                               a.wait):
            return self.finish("world 4 never trained")
        if not self.parked(self.nodes):
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
            "warm_starts": sum(", warm (pid" in x or "warm (pid" in x for _, _, x in starts),
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


MEASURES = {"kill": ("commit_to_step", "kill_to_commit", "kill_to_step"),
            "add": ("add_to_step", "join_to_step", "add_to_join", "add_to_commit",
                    "commit_to_step"),
            "fail": ("fail_to_step", "fail_to_commit", "commit_to_step")}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5, help="runs of each kind (default 5)")
    p.add_argument("--scenarios", default="kill", help="kill,add,fail (default kill)")
    p.add_argument("--kinds", default="cold,warm", help="cold,warm,inplace (default cold,warm)")
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
    wanted = args.kinds.split(",")
    results = {}
    idx = 0
    try:
        for i in range(args.runs):
            for sc in args.scenarios.split(","):
                kinds = [k for k in KINDS[sc] if k in wanted]
                if i % 2:
                    kinds.reverse()  # a load change hits every kind
                for kind in kinds:
                    r = Run(kind, idx, args, outdir, sc).run()
                    idx += 1
                    load = os.getloadavg()[0]
                    if r.error:
                        print(f"run {r.idx:2d} {sc} {kind}: FAILED: {r.error} (logs: {r.dir})",
                              flush=True)
                        continue
                    res = dict(r.result, load=load)
                    results.setdefault((sc, kind), []).append(res)
                    print(f"run {r.idx:2d} {sc} {kind}: "
                          + "; ".join(f"{k} {res[k]:.3f} s" for k in MEASURES[sc])
                          + (f"; warm starts {res['warm_starts']}/3" if "warm_starts" in res
                             else "") + f"; load {load:.1f}", flush=True)
    finally:
        etcd.kill()
        etcd.wait()
    print()
    print("| scenario | kind | runs | measure, median | each run | other medians |")
    print("|---|---|---|---|---|---|")
    for (sc, kind), rs in results.items():
        k0 = MEASURES[sc][0]
        m = {k: statistics.median(r[k] for r in rs) for k in MEASURES[sc]}
        vals = ", ".join(f"{r[k0]:.2f}" for r in rs)
        more = "; ".join(f"{k} {m[k]:.3f} s" for k in MEASURES[sc][1:])
        print(f"| {sc} | {kind} | {len(rs)} | {k0} **{m[k0]:.3f} s** | {vals} | {more} |")
    if args.out:
        print(f"logs: {outdir}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main()
