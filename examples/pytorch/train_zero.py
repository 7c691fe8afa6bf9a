#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ZeRO-1 (torch.distributed.optim.ZeroRedundancyOptimizer, Adam) on CPU with each rank's
optimizer shard in elastic-agent's checkpoint store (issue 39), resumable at another world size.

    elastic-agent --standalone --nproc-per-node 2 --checkpoint-memory 256 \
        --checkpoint-dir /tmp/ck --checkpoint-every 1 -- python3 train_zero.py --steps 10
    elastic-agent --standalone --nproc-per-node 4 --checkpoint-memory 256 \
        --checkpoint-dir /tmp/ck -- python3 train_zero.py --steps 20     # resumes at step 10

Every step rank r saves shard r of W: its partition's optimizer state (the local optimizer's
state_dict) with the global indices of the parameters it holds (and, in shard 0, the model). A
start finds the newest complete step (checkpoint.latest()), every rank loads all W_old shards,
merges the per-parameter states by global index and takes its own partition at the new world
size. The global batch (64 samples, drawn per step) is split evenly among the ranks, so the loss
is the same at any world size dividing 64, up to the floating-point order of the all-reduce.

Output: "[zero rank R/W] start: fresh" or "resumed from step S (W_old shards)", "first step: N"
(every rank), "step N loss X" (rank 0), "done: step N loss X". Under --warm-workers a spare
waits for its round after importing torch (elastic_agent.wait_for_assignment()); --step-time adds
simulated compute to each step (bench/zero_kill.py).
"""
import argparse
import datetime
import io
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

try:
    import elastic_agent
    from elastic_agent import checkpoint
except ImportError:  # a checkout: ../../python
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
    import elastic_agent
    from elastic_agent import checkpoint

BATCH = 64


def log(rank, world, msg):
    print("[zero rank %d/%d] %s" % (rank, world, msg), flush=True)


def wait_for_master(timeout=30.0):
    """Ranks other than 0: once rank 0's TCPStore (MASTER_ADDR:MASTER_PORT) accepts, polling every
    10 ms, as train_warm.py does: warm ranks reach init_process_group within milliseconds of each
    other, and torch's store client waits a whole second after a refused connection."""
    if os.environ.get("RANK", "0") == "0":
        return
    addr = (os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ.get("MASTER_PORT", "0")))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(addr, timeout=1).close()
            return
        except OSError:
            time.sleep(0.01)


def my_global_ids(opt, params, rank):
    index = {id(p): i for i, p in enumerate(params)}
    return [index[id(p)] for g in opt._partition_parameters()[rank] for p in g["params"]]


def resume(model, opt, params, rank, found):
    step, old_world = found
    merged, hyper, model_state = {}, None, None
    for shard in range(old_world):
        sd = torch.load(io.BytesIO(checkpoint.load(step, shard)), map_location="cpu")
        local = sd["opt"]
        for i, gid in enumerate(sd["ids"]):
            if i in local["state"]:
                merged[gid] = local["state"][i]
        hyper = {k: v for k, v in local["param_groups"][0].items() if k != "params"}
        if "model" in sd:
            model_state = sd["model"]
    model.load_state_dict(model_state)
    ids = my_global_ids(opt, params, rank)
    opt.optim.load_state_dict({
        "state": {i: merged[gid] for i, gid in enumerate(ids) if gid in merged},
        "param_groups": [dict(hyper, params=list(range(len(ids))))]})
    return step


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--step-time", type=float, default=0.0,
                   help="seconds of (simulated) compute added to each step")
    args = p.parse_args(argv)
    # a warm spare (--warm-workers) waits here, torch imported, for its round; a cold start
    # goes on at once
    warm = bool(os.environ.get("ELASTIC_ASSIGN_FD"))
    if warm:
        print("[zero pid %d] parked" % os.getpid(), flush=True)
    elastic_agent.wait_for_assignment()
    if warm:  # warm ranks start within ms of each other; a cold start needs no head start
        wait_for_master()
    # a bounded rendezvous: a master port taken meanwhile fails the start (the agent restarts
    # it), instead of waiting for gloo's 30 minutes
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 1))
    params = list(model.parameters())
    opt = ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.Adam, lr=1e-3)
    found = checkpoint.latest()
    start = 1
    if found:
        start = resume(model, opt, params, rank, found) + 1
        log(rank, world, "start: resumed from step %d (%d shards)" % (found[0], found[1]))
    else:
        log(rank, world, "start: fresh")
    ddp = DDP(model)
    gen = torch.Generator().manual_seed(1)
    x_all = torch.randn(4096, 32, generator=gen)
    y_all = x_all.sum(dim=1, keepdim=True).sin()
    per = BATCH // world
    loss_global = None
    for step in range(start, args.steps + 1):
        idx = torch.randint(0, x_all.shape[0], (BATCH,),
                            generator=torch.Generator().manual_seed(step))
        mine = idx[rank * per:(rank + 1) * per]
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x_all[mine]), y_all[mine])
        loss.backward()
        opt.step()
        with torch.no_grad():  # the global batch's loss, the same at any world size
            lg = nn.functional.mse_loss(model(x_all[idx]), y_all[idx])
        loss_global = lg.item()
        buf = io.BytesIO()
        shard = {"opt": opt.optim.state_dict(), "ids": my_global_ids(opt, params, rank),
                 "step": step}
        if rank == 0:
            shard["model"] = model.state_dict()
        torch.save(shard, buf)
        checkpoint.save(step, buf.getbuffer(), shard=rank, shards=world)
        if step == start:
            log(rank, world, "first step: %d" % step)
        if rank == 0:
            log(rank, world, "step %d loss %.6f" % (step, loss_global))
        if args.step_time > 0:
            time.sleep(args.step_time)
    log(rank, world, "done: step %d loss %.6f" % (args.steps, loss_global if loss_global is not None else -1))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
