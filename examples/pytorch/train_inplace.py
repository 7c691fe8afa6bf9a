#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Elastic DDP training that re-forms in place: warm start, and no restart at a membership change.

Under `elastic-agent --warm-workers --in-place` this process is started parked (as
train_warm.py: torch imported, model and data built, the checkpoint read before the rank), says
it can re-form (wait_for_assignment(inplace=True)), and then trains. When the membership changes
(a node added, a node lost) the agent does not stop it: at the next step boundary
elastic_agent.reassignment() returns the new round's assignment (new RANK, WORLD_SIZE,
MASTER_PORT in os.environ); the process tears down its process group, builds a new one and goes
on from the state it holds. A step whose all-reduce failed because a peer vanished is dropped
(never applied on any rank), the process waits for its re-assignment, and that step is trained
again in the new world.

Exact resumption: the samples of an epoch are one global order (a permutation seeded by the
epoch); a step trains the next WORLD_SIZE x batch samples of it, rank r its r-th slice, so the
position in the epoch is one number that means the same at any world size. The state is
(epoch, position, model, optimizer, per-sample counts); after every re-form the rank holding the
newest state (the largest (epoch, position); a new node has only the checkpoint) broadcasts it,
so survivors lose nothing and a new node catches up. Rank 0 checkpoints every --ckpt-every steps
and at the end of each epoch; a cold start resumes from it. At the end of each epoch every rank
logs how often each sample was trained: "coverage min 1 max 1" is exact.

    elastic-agent --warm-workers --in-place --nnodes 2:4 --nproc-per-node 1 \\
        --rdzv-endpoint etcd:2379 -- python3 examples/pytorch/train_inplace.py --ckpt-dir /ckpt

Output (stdout, flushed, "[train rank R/W]" as train_elastic.py):
    [train pid P] parked: set up in 2.71 s (checkpoint none)
    [train rank 1/3] start: warm (pid P), generation 2, state from rank 0 at epoch 1 pos 96
    [train rank 1/3] first step: 4                 (the first step after each (re-)form)
    [train rank 1/4] re-formed in place: generation 3, world 3 -> 4 (pid P)
    [train rank 0/4] epoch 1 coverage min 1 max 1 samples 4096
"""
import datetime
import gc
import os
import sys
import time

T0 = time.monotonic()
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import train_elastic as te  # noqa: E402
import train_warm as tw  # noqa: E402
from train_elastic import elastic_agent  # noqa: E402


def parse_args(argv):
    p = te.argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for a, kw in (("--ckpt-dir", {"required": True}), ("--epochs", {"type": int, "default": 4}),
                  ("--samples", {"type": int, "default": 4096}),
                  ("--features", {"type": int, "default": 32}),
                  ("--hidden", {"type": int, "default": 128}),
                  ("--batch-size", {"type": int, "default": 32}),
                  ("--lr", {"type": float, "default": 0.02}),
                  ("--seed", {"type": int, "default": 1234}),
                  ("--step-time", {"type": float, "default": 0.0}),
                  ("--ckpt-every", {"type": int, "default": 20})):
        p.add_argument(a, **kw)
    return p.parse_args(argv)


def fresh_state(args, model, optimizer):
    return {"epoch": 1, "pos": 0, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "counts": torch.zeros(args.samples, dtype=torch.int32)}


def sync_state(state, model, optimizer):
    """Every rank ends with the newest state any rank holds (largest (epoch, pos)); its rank."""
    mine = torch.tensor([state["epoch"], state["pos"]], dtype=torch.int64)
    all_ = [torch.zeros(2, dtype=torch.int64) for _ in range(dist.get_world_size())]
    dist.all_gather(all_, mine)
    keys = [(int(t[0]), int(t[1])) for t in all_]
    src = max(range(len(keys)), key=lambda r: (keys[r], -r))
    obj = [{"epoch": state["epoch"], "pos": state["pos"], "model": model.state_dict(),
            "optimizer": optimizer.state_dict(), "counts": state["counts"]}
           if dist.get_rank() == src else None]
    dist.broadcast_object_list(obj, src=src)
    new = obj[0]
    model.load_state_dict(new["model"])
    optimizer.load_state_dict(new["optimizer"])
    state.update(epoch=new["epoch"], pos=new["pos"], counts=new["counts"].clone())
    return src


def teardown():
    """Close the process group's connections now: a peer blocked in a collective with us fails
    at once (and then waits for its re-assignment too). DDP holds the group: it must go first."""
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()
    gc.collect()


def form(state, model, optimizer):
    """(Re-)build the process group from os.environ and agree on the state: (rank, world, src)."""
    teardown()
    tw.wait_for_master()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    return dist.get_rank(), dist.get_world_size(), sync_state(state, model, optimizer)


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.ckpt_dir, exist_ok=True)
    # 1. everything that needs no rank, while parked
    model = te.make_model(args.features, args.hidden, args.seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    data = te.make_dataset(args.samples, args.features, args.seed)
    state = fresh_state(args, model, optimizer)
    stamp = tw.ckpt_stamp(args.ckpt_dir)
    ckpt = te.load_checkpoint(args.ckpt_dir)
    # everything so far lives as long as the process: out of the collector's sight, so that the
    # collection of each re-form (the old DDP and process group) takes microseconds, not 0.3 s
    gc.collect()
    gc.freeze()
    if "ELASTIC_ASSIGN_FD" in os.environ:
        tw.Pid()(f"parked: set up in {time.monotonic() - T0:.2f} s (checkpoint "
                 + (f"epoch {ckpt['epoch']} pos {ckpt['pos']})" if ckpt else "none)"))
    # 2. the rank; and the socket kept for the next ones (--in-place)
    a = elastic_agent.wait_for_assignment(inplace=True)
    if tw.ckpt_stamp(args.ckpt_dir) != stamp:
        ckpt = te.load_checkpoint(args.ckpt_dir)
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        state.update(epoch=ckpt["epoch"], pos=ckpt["pos"], counts=ckpt["counts"])
    rank, world, src = form(state, model, optimizer)
    log = te.Log(rank, world)
    log(f"start: {'warm' if a['warm'] else 'cold'} (pid {os.getpid()}), generation "
        f"{os.environ.get('ELASTIC_GENERATION', '?')}, state from rank {src} at epoch "
        f"{state['epoch']} pos {state['pos']}")
    ddp, loss_fn, first, steps, loss = DDP(model), nn.MSELoss(), True, 0, None
    B = args.batch_size
    while state["epoch"] <= args.epochs:
        # a safe point: between two steps, nothing half done
        new = elastic_agent.reassignment()
        failed = None
        if new is None:
            e, pos = state["epoch"], state["pos"]
            order = torch.randperm(args.samples, generator=torch.Generator().manual_seed(
                args.seed * 1000 + e))
            batch = order[pos:pos + world * B]
            mine = batch[rank * B:(rank + 1) * B]
            try:
                optimizer.zero_grad()
                if len(mine):
                    x, y = data.tensors[0][mine], data.tensors[1][mine]
                    loss = loss_fn(ddp(x), y) * (len(mine) / B)
                else:  # the epoch's last, short step: no sample here, the all-reduce all the same
                    x, y = data.tensors[0][:1], data.tensors[1][:1]
                    loss = loss_fn(ddp(x), y) * 0.0
                loss.backward()
                optimizer.step()
            except RuntimeError as err:  # a peer left mid all-reduce: the step is dropped
                failed = err
            if failed is None:
                state["counts"][batch] += 1
                state["pos"] = pos + len(batch)
                steps += 1
                if first:
                    log(f"first step: {e}:{pos}")
                    first = False
                if pos == 0:
                    log(f"epoch {e} begin")
                elastic_agent.beat(steps)
                if state["pos"] >= args.samples:
                    c = state["counts"]
                    log(f"epoch {e} coverage min {int(c.min())} max {int(c.max())} samples "
                        f"{int(c.sum())}")
                    state.update(epoch=e + 1, pos=0, counts=torch.zeros_like(c))
                if rank == 0 and (steps % args.ckpt_every == 0 or state["pos"] == 0):
                    te.save_checkpoint(args.ckpt_dir, {
                        "epoch": state["epoch"], "pos": state["pos"], "model": model.state_dict(),
                        "optimizer": optimizer.state_dict(), "counts": state["counts"]})
                if args.step_time > 0:
                    time.sleep(args.step_time)
                continue
        if failed is not None:
            if not elastic_agent.in_place():
                raise failed
            log(f"step failed ({str(failed).splitlines()[0][:80]}); waiting for the "
                f"re-assignment")
            ddp = failed = loss = None
            teardown()  # the peers blocked on us fail too, and wait as well
            new = elastic_agent.reassignment(timeout=None)
        ddp = loss = None  # they hold the old group
        old_world, t0 = world, time.monotonic()
        rank, world, src = form(state, model, optimizer)
        log = te.Log(rank, world)
        log(f"re-formed in place: generation {new['generation']}, world {old_world} -> {world} "
            f"(pid {os.getpid()}), state from rank {src} at epoch {state['epoch']} pos "
            f"{state['pos']} in {time.monotonic() - t0:.3f} s")
        ddp, first = DDP(model), True
    log(f"done: epochs {args.epochs}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
