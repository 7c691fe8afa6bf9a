#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The worker of bench/goodput.py: DDP or ZeRO-1 on CPU (gloo), checkpointed into the agent's
memory every step, to a shared directory every --every steps, or not at all.

    --workload ddp   DistributedDataParallel, Adam; rank 0 saves {model, opt} (one shard)
    --workload zero  ZeroRedundancyOptimizer(Adam) as examples/pytorch/train_zero.py: every rank
                     saves its optimizer shard (shard 0 with the model); a resume merges the
                     shards of the old world and partitions again
    --ckpt store     elastic_agent.checkpoint (the agent's --checkpoint-memory), every step
    --ckpt disk      torch.save to --dir every --every steps (temp file + rename; ZeRO: one file
                     a rank, DIR/step-N/shard-R-of-W, a step is whole when all W files are there)

The global batch (64 samples a step) is split among the ranks, so the work of a step is the same
at any world size; --step-time adds simulated compute (a sleep) to each step. Set-up that needs
no rank (import torch, the data) happens before elastic_agent.wait_for_assignment(), so under
--warm-workers a spare is parked ready; under torchrun the call returns at once.

Output (flushed): "[gp pid P] parked", "[gp rank R/W] start: fresh" or "start: resumed from step
S (store|disk, T s)", "first step: N (shard B bytes)" on every rank, "step N" on rank 0.
"""
import argparse
import datetime
import io
import os
import re
import shutil
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples", "pytorch"))
sys.path.insert(0, os.path.join(ROOT, "python"))
import elastic_agent  # noqa: E402
from elastic_agent import checkpoint  # noqa: E402
from train_zero import my_global_ids, wait_for_master  # noqa: E402

BATCH = 64


def log(rank, world, msg):
    print("[gp rank %d/%d] %s" % (rank, world, msg), flush=True)


def disk_latest_zero(d):
    """(step, shards) of the newest step directory holding every shard of one world, or None."""
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return None
    steps = sorted((int(n[5:]) for n in names if re.fullmatch(r"step-\d+", n)), reverse=True)
    for s in steps:
        files = os.listdir(os.path.join(d, "step-%d" % s))
        for w in sorted({int(m.group(1)) for f in files
                         for m in [re.fullmatch(r"shard-\d+-of-(\d+)", f)] if m}, reverse=True):
            if all("shard-%d-of-%d" % (i, w) in files for i in range(w)):
                return s, w
    return None


def zero_resume(model, opt, params, rank, found, read):
    """train_zero.py's resume with the shard reader given: merge the old world's shards by
    global parameter index, take this rank's partition at the new world size."""
    step, old_world = found
    merged, hyper, model_state = {}, None, None
    for shard in range(old_world):
        sd = torch.load(io.BytesIO(read(step, shard, old_world)), map_location="cpu")
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


def read_file(d):
    def read(step, shard, shards):
        with open(os.path.join(d, "step-%d" % step, "shard-%d-of-%d" % (shard, shards)), "rb") as f:
            return f.read()
    return read


def read_store(step, shard, shards):
    return checkpoint.load(step, shard)


def resume(args, rank, model, opt, params):
    """The step to go on from (0: fresh) and where it came from."""
    if args.ckpt == "none":
        return 0, None
    if args.workload == "zero":
        if args.ckpt == "store":
            found, read = checkpoint.latest(), read_store
        else:
            found, read = disk_latest_zero(args.dir), read_file(args.dir)
        if not found:
            return 0, None
        return zero_resume(model, opt, params, rank, found, read), args.ckpt
    # ddp: rank 0 reads, everyone gets it by broadcast (train_checkpoint.py's way)
    box = [None]
    if rank == 0:
        if args.ckpt == "store":
            found = checkpoint.latest()
            if found:
                box[0] = checkpoint.load_state_dict(found[0], shard=0)
        else:
            path = os.path.join(args.dir, "ddp.pt")
            if os.path.exists(path):
                box[0] = torch.load(path, map_location="cpu")
    dist.broadcast_object_list(box, src=0)
    if box[0] is None:
        return 0, None
    model.load_state_dict(box[0]["model"])
    opt.load_state_dict(box[0]["opt"])
    return box[0]["step"], args.ckpt


def save(args, rank, world, step, model, opt, params):
    """This rank's checkpoint of step; its size in bytes (0 when nothing was saved)."""
    if args.ckpt == "none" or (args.ckpt == "disk" and step % args.every):
        return 0
    if args.workload == "ddp":
        if rank != 0:
            return 0
        state = {"model": model.state_dict(), "opt": opt.state_dict(), "step": step}
    else:
        state = {"opt": opt.optim.state_dict(), "ids": my_global_ids(opt, params, rank),
                 "step": step}
        if rank == 0:
            state["model"] = model.state_dict()
    buf = io.BytesIO()
    torch.save(state, buf)
    if args.ckpt == "store":
        if args.workload == "ddp":
            checkpoint.save(step, buf.getbuffer(), shard=0, shards=1)
        else:
            checkpoint.save(step, buf.getbuffer(), shard=rank, shards=world)
        return buf.tell()
    if args.workload == "ddp":
        path = os.path.join(args.dir, "ddp.pt")
    else:
        sd = os.path.join(args.dir, "step-%d" % step)
        os.makedirs(sd, exist_ok=True)
        path = os.path.join(sd, "shard-%d-of-%d" % (rank, world))
    tmp = path + ".tmp.%d" % os.getpid()
    with open(tmp, "wb") as f:
        f.write(buf.getbuffer())
    os.replace(tmp, path)
    if args.workload == "zero" and rank == 0:  # keep the newest few step directories
        old = os.path.join(args.dir, "step-%d" % (step - 3 * args.every))
        shutil.rmtree(old, ignore_errors=True)
    return buf.tell()


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", choices=["ddp", "zero"], required=True)
    p.add_argument("--ckpt", choices=["store", "disk", "none"], required=True)
    p.add_argument("--dir", help="--ckpt disk: the shared directory")
    p.add_argument("--every", type=int, default=20, help="--ckpt disk: save every N steps")
    p.add_argument("--steps", type=int, default=10**9)
    p.add_argument("--step-time", type=float, default=0.05)
    p.add_argument("--hidden", type=int, default=128, help="hidden width (the state's size)")
    args = p.parse_args(argv)
    if args.ckpt == "disk":
        if not args.dir:
            p.error("--ckpt disk needs --dir")
        os.makedirs(args.dir, exist_ok=True)
    gen = torch.Generator().manual_seed(1)
    x_all = torch.randn(4096, 32, generator=gen)
    y_all = x_all.sum(dim=1, keepdim=True).sin()
    warm = bool(os.environ.get("ELASTIC_ASSIGN_FD"))
    if warm:
        print("[gp pid %d] parked" % os.getpid(), flush=True)
    elastic_agent.wait_for_assignment()
    if warm:
        wait_for_master()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    h = args.hidden
    model = nn.Sequential(nn.Linear(32, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 1))
    params = list(model.parameters())
    if args.workload == "zero":
        opt = ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.Adam, lr=1e-3)
    else:
        opt = torch.optim.Adam(params, lr=1e-3)
    t0 = time.perf_counter()
    done, source = resume(args, rank, model, opt, params)
    if source:
        log(rank, world, "start: resumed from step %d (%s, %.3f s)" % (
            done, source, time.perf_counter() - t0))
    else:
        log(rank, world, "start: fresh")
    ddp = DDP(model)
    per = BATCH // world
    for step in range(done + 1, args.steps + 1):
        idx = torch.randint(0, x_all.shape[0], (BATCH,),
                            generator=torch.Generator().manual_seed(step))
        mine = idx[rank * per:(rank + 1) * per]
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x_all[mine]), y_all[mine])
        loss.backward()
        opt.step()
        nbytes = save(args, rank, world, step, model, opt, params)
        if step == done + 1:
            log(rank, world, "first step: %d (shard %d bytes)" % (step, nbytes))
        if rank == 0:
            log(rank, world, "step %d" % step)
        if args.step_time > 0:
            time.sleep(args.step_time)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
