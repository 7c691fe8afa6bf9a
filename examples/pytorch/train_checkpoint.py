#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""DDP on CPU (gloo) with its checkpoint in elastic-agent's memory (--checkpoint-memory, issue 39).

    elastic-agent --standalone --nproc-per-node 2 --max-restarts 1 --checkpoint-memory 64 \
        -- python3 examples/pytorch/train_checkpoint.py --steps 30 --kill-at 12

Rank 0 saves the model and optimizer state every step with
elastic_agent.checkpoint.save_state_dict (into the agent's memory: no disk, the bytes outlive the
worker). Every start asks checkpoint.latest(); rank 0 loads the newest step and broadcasts it, so
a restarted group goes on from the step after the last save, not from the beginning.
--kill-at N: rank 1's first incarnation SIGKILLs itself after step N (the agent restarts the
group; --max-restarts must allow it). With --checkpoint-dir the agent also writes it to disk in
the background, and a whole-run restart resumes from there.

Output (stdout, flushed):
    [ckpt rank 0/2] start: fresh
    [ckpt rank 0/2] step 12 loss 0.123456
    [ckpt rank 0/2] start: resumed from step 12 (the agent's memory, 0.004 s)
    [ckpt rank 0/2] done: step 30 loss 0.054321
"""
import argparse
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

try:
    from elastic_agent import checkpoint
except ImportError:  # a checkout: ../../python
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
    from elastic_agent import checkpoint


def log(rank, world, msg):
    print("[ckpt rank %d/%d] %s" % (rank, world, msg), flush=True)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--kill-at", type=int, default=-1)
    p.add_argument("--width", type=int, default=256)
    args = p.parse_args(argv)
    # a bounded rendezvous: a master port taken meanwhile fails the start (the agent restarts
    # it), instead of waiting for gloo's 30 minutes
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, args.width), nn.ReLU(), nn.Linear(args.width, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    start = 1
    found = checkpoint.latest() if rank == 0 else None
    box = [None]
    if found:
        t0 = time.perf_counter()
        box[0] = checkpoint.load_state_dict(found[0], shard=0)
        took = time.perf_counter() - t0
    dist.broadcast_object_list(box, src=0)
    if box[0] is not None:
        model.load_state_dict(box[0]["model"])
        opt.load_state_dict(box[0]["opt"])
        start = box[0]["step"] + 1
        log(rank, world, "start: resumed from step %d%s" % (
            start - 1, " (the agent's memory, %.3f s)" % took if rank == 0 else ""))
    else:
        log(rank, world, "start: fresh")
    ddp = DDP(model)
    gen = torch.Generator().manual_seed(1)
    x_all = torch.randn(4096, 32, generator=gen)
    y_all = x_all.sum(dim=1, keepdim=True).sin()
    loss = None
    for step in range(start, args.steps + 1):
        g = torch.Generator().manual_seed(step * 1000 + rank)
        idx = torch.randint(0, x_all.shape[0], (64,), generator=g)
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x_all[idx]), y_all[idx])
        loss.backward()
        opt.step()
        if rank == 0:
            checkpoint.save_state_dict(step, {"model": model.state_dict(),
                                              "opt": opt.state_dict(), "step": step},
                                       shard=0, shards=1)
            log(rank, world, "step %d loss %.6f" % (step, loss.item()))
        marker = os.path.join(os.environ.get("CK_MARKER_DIR", "/tmp"),
                              "train_checkpoint.killed.%s" % os.environ.get("TORCHELASTIC_RUN_ID"))
        if rank == 1 and step == args.kill_at and not os.path.exists(marker):
            dist.barrier()  # rank 0's save of this step is committed
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        if args.kill_at == step:
            dist.barrier()
    log(rank, world, "done: step %d loss %.6f" % (args.steps, loss.item() if loss is not None else -1))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
