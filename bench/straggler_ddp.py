#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""DDP worker for bench/straggler_ddp.sh (issue 40's straggler targets): a small MLP on a fixed
batch (gloo, CPU, one thread), a fixed amount of compute per step, timed for the agent and
beaten each step.

--timing docs: `with elastic_agent.compute(): forward; loss.backward()`, the pattern
docs/restarts.md showed before this bench. Under DDP the gradient all-reduce runs *inside*
backward() (the reducer waits for its buckets before backward() returns), so a fast rank's
"compute" includes its wait for the slowest one.
--timing hook: the same block, but it ends when DDP hands the last gradient bucket to the
all-reduce (elastic_agent.ddp_compute_hook): the rank's own work only.

Each step appends "step unix_time compute_s world" to OUT/steps.<node>.<round> (read by the
script for the step rate). Runs until killed (the agent stops it) or --seconds.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import elastic_agent  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--timing", choices=("docs", "hook"), default="hook")
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seconds", type=float, default=0)
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    w = a.width
    model = DDP(nn.Sequential(nn.Linear(w, 2 * w), nn.ReLU(), nn.Linear(2 * w, 2 * w), nn.ReLU(),
                              nn.Linear(2 * w, 10)))
    if a.timing == "hook":
        timer = elastic_agent.ddp_compute_hook(model)
    else:
        timer = elastic_agent.compute()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(a.batch, w)
    y = torch.randint(0, 10, (a.batch,))
    loss_fn = nn.CrossEntropyLoss()
    node = os.environ.get("ELASTIC_NODE_ID", "x")
    rnd = os.environ.get("ELASTIC_ROUND", "0")
    world = dist.get_world_size()
    with open(os.path.join(a.out, "pid.%s" % node), "w") as f:
        f.write("%d\n" % os.getpid())
    log = open(os.path.join(a.out, "steps.%s.%s" % (node, rnd)), "a", buffering=1)
    t_end = time.time() + a.seconds if a.seconds > 0 else None
    step = 0
    while t_end is None or time.time() < t_end:
        opt.zero_grad(set_to_none=True)
        with timer:
            loss = loss_fn(model(x), y)
            loss.backward()
        opt.step()
        step += 1
        c = elastic_agent.heartbeat._compute_s  # before beat() takes it
        elastic_agent.beat(step)
        log.write("%d %.3f %.6f %d\n" % (step, time.time(), c or 0, world))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
