#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Elastic DDP training on CPU: the standard torchrun elastic pattern.

Nothing here knows which launcher started it. It reads the torchrun environment (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT) through init_process_group("gloo"), only logs
TORCHELASTIC_RESTART_COUNT, and runs the same under

    torchrun --nnodes 1:4 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint host:29400 \
             examples/pytorch/train_elastic.py --ckpt-dir /shared/ckpt
    elastic-agent --nnodes 1:4 --nproc-per-node 1 --rdzv-endpoint etcd:2379 \
             -- python3 examples/pytorch/train_elastic.py --ckpt-dir /shared/ckpt

(Debian's torch 1.13 under Python 3.11 needs bench/torchrun_launcher.py in place of torchrun.)

The elastic contract: a worker may be stopped at any moment and started again with another
rank and world size, so all progress lives in the checkpoint. Every start loads the latest
checkpoint (if any) and continues with the next epoch; at the end of every epoch rank 0 writes
the checkpoint atomically (temporary file in the same directory, fsync, rename), so a kill
during the write leaves the previous checkpoint intact.

The data set is synthetic and deterministic (a fixed seed), so every rank and every restart
sees the same samples; DistributedSampler shards it by the current rank and world size.

Output: one line per event on stdout, flushed, prefixed with the UTC time and "[train rank R/W]"
(the time is left out below):
    [train rank 0/4] start: restart_count 0, master 127.0.0.1:29500, fresh
    [train rank 0/3] start: restart_count 0, master 127.0.0.1:41187, resumed from epoch 3
    [train rank 1/4] epoch 4 begin
    [train rank 1/4] first step: 384
    [train rank 1/4] epoch 4 loss 0.123456 samples 4096 time 1.32 s
    [train rank 0/4] checkpoint epoch 4 saved
    [train rank 0/4] done: epochs 12, first loss 0.912345, last loss 0.054321
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

try:  # the worker helpers: installed with elastic-agent (or pip install ./python)
    import elastic_agent
except ImportError:  # a checkout: ../../python
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
    import elastic_agent

CKPT_NAME = "checkpoint.pt"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ckpt-dir", required=True, help="shared directory for the checkpoint")
    p.add_argument("--epochs", type=int, default=12, help="total epochs of the run")
    p.add_argument("--samples", type=int, default=4096, help="size of the synthetic data set")
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32, help="per-rank batch size")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--seed", type=int, default=1234, help="seed of the data set and the model")
    p.add_argument("--step-time", type=float, default=0.0,
                   help="extra seconds per step, standing in for a heavier model (default 0)")
    p.add_argument("--hang-rank", type=int, default=-1,
                   help="test hang detection: this rank stops beating and blocks before the "
                        "all-reduce of step --hang-step, once per checkpoint directory")
    p.add_argument("--hang-step", type=int, default=10)
    p.add_argument("--fail-rank", type=int, default=-1,
                   help="test a worker failure: this rank exits 1 when it begins epoch "
                        "--fail-epoch, once per checkpoint directory")
    p.add_argument("--fail-epoch", type=int, default=3)
    return p.parse_args(argv)


class Log:
    """Lines to stdout, flushed: '<UTC time with ms> [train rank R/W] message'."""

    def __init__(self, rank, world):
        self.prefix = f"[train rank {rank}/{world}]"

    def __call__(self, msg):
        t = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"
        print(f"{stamp} {self.prefix} {msg}", flush=True)


def make_dataset(n, features, seed):
    """y = a fixed random 2-layer function of x plus a little noise: learnable, not trivial."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    w1 = torch.randn(features, 16, generator=g) / math.sqrt(features)
    w2 = torch.randn(16, 1, generator=g)
    y = torch.tanh(x @ w1) @ w2 + 0.01 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


def make_model(features, hidden, seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(features, hidden), nn.Tanh(), nn.Linear(hidden, hidden),
                         nn.Tanh(), nn.Linear(hidden, 1))


def load_checkpoint(ckpt_dir):
    path = os.path.join(ckpt_dir, CKPT_NAME)
    if not os.path.exists(path):
        return None
    return torch.load(path, map_location="cpu")


def save_checkpoint(ckpt_dir, state):
    """Atomic: write a temporary file next to the checkpoint, fsync it, rename it over."""
    path = os.path.join(ckpt_dir, CKPT_NAME)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(ckpt_dir, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def hang_once(ckpt_dir, rank, step, log):
    """Stand in for a stalled GPU or a deadlock: stop beating and block (the other ranks block
    in the next all-reduce). Only the first time: a marker in the checkpoint directory says so."""
    try:
        fd = os.open(os.path.join(ckpt_dir, f"hung.rank{rank}"), os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return
    os.close(fd)
    log(f"hanging at step {step}")
    while True:
        time.sleep(3600)


def fail_once(ckpt_dir, rank, log):
    """Stand in for a crash (a NaN check, an assertion): exit 1, the first time only."""
    try:
        fd = os.open(os.path.join(ckpt_dir, f"failed.rank{rank}"), os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return
    os.close(fd)
    log("failing with exit 1")
    sys.stdout.flush()
    os._exit(1)


def main(argv=None):
    args = parse_args(argv)
    dist.init_process_group("gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    log = Log(rank, world)
    os.makedirs(args.ckpt_dir, exist_ok=True)
    model = make_model(args.features, args.hidden, args.seed)
    data = make_dataset(args.samples, args.features, args.seed)
    return train(args, rank, world, log, model, data, load_checkpoint(args.ckpt_dir))


def train(args, rank, world, log, model, data, ckpt, how=""):
    """Resume from `ckpt` (or start fresh) and train to the last epoch (train_warm.py too)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    history = []  # one entry per completed epoch: epoch, loss, world size
    start_epoch = 1
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        history = ckpt["history"]
        start_epoch = ckpt["epoch"] + 1
    log(f"start: restart_count {os.environ.get('TORCHELASTIC_RESTART_COUNT', '?')}, "
        f"master {os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}, "
        + (f"resumed from epoch {ckpt['epoch']}" if ckpt is not None else "fresh") + how)
    ddp = DDP(model)  # broadcasts rank 0's parameters: every rank starts identical

    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True,
                                 seed=args.seed)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)
    loss_fn = nn.MSELoss()
    first_step = True

    for epoch in range(start_epoch, args.epochs + 1):
        sampler.set_epoch(epoch)
        ddp.train()
        log(f"epoch {epoch} begin")
        if rank == args.fail_rank and epoch == args.fail_epoch:
            fail_once(args.ckpt_dir, rank, log)
        t0 = time.monotonic()
        total = torch.zeros(2, dtype=torch.float64)  # loss sum, samples
        for i, (x, y) in enumerate(loader):
            step = (epoch - 1) * len(loader) + i
            if rank == args.hang_rank and step >= args.hang_step:
                hang_once(args.ckpt_dir, rank, step, log)
            elastic_agent.beat(step)  # a no-op unless the agent's hang detection is on
            optimizer.zero_grad()
            loss = loss_fn(ddp(x), y)
            loss.backward()  # gradients are averaged over the ranks (all-reduce)
            optimizer.step()
            if first_step:
                log(f"first step: {step}")  # bench/warm_kill.sh times the restart to here
                first_step = False
            total += torch.tensor([loss.item() * len(x), len(x)], dtype=torch.float64)
            if args.step_time > 0:
                time.sleep(args.step_time)
        dist.all_reduce(total)
        epoch_loss = (total[0] / total[1]).item()
        log(f"epoch {epoch} loss {epoch_loss:.6f} samples {int(total[1].item())} "
            f"time {time.monotonic() - t0:.2f} s")
        history.append({"epoch": epoch, "loss": epoch_loss, "world_size": world})
        if rank == 0:
            save_checkpoint(args.ckpt_dir, {"epoch": epoch, "model": model.state_dict(),
                                            "optimizer": optimizer.state_dict(),
                                            "history": history})
            log(f"checkpoint epoch {epoch} saved")
        dist.barrier()  # nobody starts the next epoch before the checkpoint is on disk

    if history:
        log(f"done: epochs {args.epochs}, first loss {history[0]['loss']:.6f}, "
            f"last loss {history[-1]['loss']:.6f}")
    else:
        log(f"done: epochs {args.epochs}, nothing left to train")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
