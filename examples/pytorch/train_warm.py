#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Elastic DDP training that starts warm: train_elastic.py with its set-up before the rank.

Under `elastic-agent --warm-workers` this process is started before its round, parked: it has
no rank yet. It does everything that does not need one — `import torch`, builds the model, makes
the data set, reads the latest checkpoint into host memory — then calls
elastic_agent.wait_for_assignment(), which blocks (no CPU) until a round commits and the agent
hands it RANK, WORLD_SIZE, MASTER_ADDR, ... . Only init_process_group and the first step are
left, so a membership change costs the survivors a rendezvous and a DDP set-up, not a Python
start (bench/warm_kill.sh measures both). Under a cold start, or torchrun, the call returns at
once and this is train_elastic.py.

    elastic-agent --warm-workers --nnodes 2:4 --nproc-per-node 1 --rdzv-endpoint etcd:2379 \\
        -- python3 examples/pytorch/train_warm.py --ckpt-dir /shared/ckpt

A checkpoint saved while it was parked (the round before it ran on) is read again after the
assignment, so it resumes from the latest epoch. Ranks other than 0 wait for rank 0's store to
listen before init_process_group (wait_for_master: torch's client would wait a second after a
refused connection, and warm ranks all get there at once). Output as train_elastic.py's, plus one line
while parked, "[train pid P] parked: set up in 2.71 s (checkpoint epoch 3)", and the start line
says "warm (pid P)" or "cold (pid P)".
"""
import os
import socket
import sys
import time

T0 = time.monotonic()
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # train_elastic.py, next to this file

import torch.distributed as dist  # noqa: E402

import train_elastic as te  # noqa: E402  (imports torch and elastic_agent)
from train_elastic import elastic_agent  # noqa: E402


def ckpt_stamp(ckpt_dir):
    """What identifies the checkpoint file's version: a rename gives a new inode."""
    try:
        st = os.stat(os.path.join(ckpt_dir, te.CKPT_NAME))
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def wait_for_master(timeout=30.0):
    """Ranks other than 0: return once MASTER_ADDR:MASTER_PORT accepts a connection (rank 0's
    TCPStore), polling every 10 ms. A warm round's ranks all reach init_process_group within
    milliseconds of each other, and torch's store client waits a whole second after a refused
    connection before it tries again (c10d: "is not yet listening ..., will retry")."""
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


def main(argv=None):
    args = te.parse_args(argv)
    os.makedirs(args.ckpt_dir, exist_ok=True)
    # 1. everything that does not need a rank, while parked
    model = te.make_model(args.features, args.hidden, args.seed)
    data = te.make_dataset(args.samples, args.features, args.seed)
    stamp = ckpt_stamp(args.ckpt_dir)
    ckpt = te.load_checkpoint(args.ckpt_dir)
    if "ELASTIC_ASSIGN_FD" in os.environ:
        pid = Pid()
        pid(f"parked: set up in {time.monotonic() - T0:.2f} s (checkpoint "
            + (f"epoch {ckpt['epoch']})" if ckpt is not None else "none)"))
    # 2. the rank: blocks until a round commits (returns at once under a cold start)
    assignment = elastic_agent.wait_for_assignment()
    if ckpt_stamp(args.ckpt_dir) != stamp:  # saved while we were parked: the latest wins
        ckpt = te.load_checkpoint(args.ckpt_dir)
    wait_for_master()
    dist.init_process_group("gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    log = te.Log(rank, world)
    how = f", {'warm' if assignment['warm'] else 'cold'} (pid {os.getpid()})"
    return te.train(args, rank, world, log, model, data, ckpt, how)


class Pid(te.Log):
    """te.Log with "[train pid P]" for the lines before there is a rank."""

    def __init__(self):
        self.prefix = f"[train pid {os.getpid()}]"


if __name__ == "__main__":
    sys.exit(main())
