#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Test worker for --in-place (tests/e2e/test_e2e_inplace.c), standard library only.

    inplace_worker.py DIR MODE [SECONDS]

A warm spare that says it can re-form (wait_for_assignment(inplace=True)), then "trains": every
20 ms a safe point calls elastic_agent.reassignment(). Each assignment it holds is recorded as
DIR/gen.<generation>.<pid> (RANK, WORLD_SIZE, ELASTIC_ROUND, lines NAME=VALUE). It exits 0 after
SECONDS (default 3600) of its last assignment. MODE:
  good    take every re-assignment
  ignore  never call reassignment() (the agent's --in-place-timeout must stop it)
  badack  answer a re-assignment with a malformed line instead of the ack
Parked (ELASTIC_ASSIGN_FD set), it first writes DIR/parked.<pid>, then sleeps IPW_READY_DELAY
seconds (its environment; default 0: a slow set-up), then writes DIR/ready.<pid> and only then
sends its ready line. It beats (elastic_agent.beat()) at every safe point.
"""
import json
import os
import select
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))
import elastic_agent  # noqa: E402
from elastic_agent import assign  # noqa: E402


def record(d):
    e = os.environ
    path = os.path.join(d, f"gen.{e.get('ELASTIC_GENERATION')}.{os.getpid()}")
    with open(path + ".tmp", "w") as f:
        for k in ("RANK", "WORLD_SIZE", "ELASTIC_ROUND", "ELASTIC_GENERATION", "MASTER_PORT"):
            f.write(f"{k}={e.get(k, '')}\n")
    os.replace(path + ".tmp", path)


def touch(path):
    with open(path, "w"):
        pass


def main():
    d, mode = sys.argv[1], sys.argv[2]
    secs = float(sys.argv[3]) if len(sys.argv) > 3 else 3600.0
    if os.environ.get("ELASTIC_ASSIGN_FD"):
        touch(os.path.join(d, f"parked.{os.getpid()}"))
        time.sleep(float(os.environ.get("IPW_READY_DELAY", "0")))
        touch(os.path.join(d, f"ready.{os.getpid()}"))  # before the ready line: causality
    elastic_agent.wait_for_assignment(inplace=True)
    record(d)
    until = time.monotonic() + secs
    while time.monotonic() < until:
        elastic_agent.beat()
        if mode == "good":
            if elastic_agent.reassignment(timeout=0.02) is not None:
                record(d)
                until = time.monotonic() + secs
        elif mode == "badack":
            fd = assign._fd
            r, _, _ = select.select([fd], [], [], 0.02)
            if r:
                line = os.read(fd, 1 << 20)
                if not line:
                    return 3
                msg = json.loads(line.decode())
                os.write(fd, b"ack " + str(msg["generation"]).encode() + b"\n")
        else:
            time.sleep(0.02)
    return 0


if __name__ == "__main__":
    sys.exit(main())
