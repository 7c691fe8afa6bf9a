# SPDX-License-Identifier: Apache-2.0
"""test_e2e_checkpoint's replication worker: each rank saves shard RANK of WORLD_SIZE for steps
1..CK_STEPS, then waits (60 s at most) until latest() says the last step is complete on its node
(its own shard and the ring predecessor's replica), writes CK_OUT/complete.<CK_NODE> and its pid
to CK_OUT/pid.<CK_NODE>, and sleeps until it is stopped. A worker that finds a complete step at
start loads every shard of it, checks the bytes and exits 0. In a round of fewer than CK_WORLD
ranks with nothing saved (the other node not joined yet) it waits to be stopped. With CK_WAIT=0 it
does not wait for a complete step (with three nodes or more none is complete at any one node: the
fetch test) and writes CK_OUT/saved.<CK_NODE> instead. Lines go to CK_OUT/log.<CK_NODE>."""
import os
import sys
import time

from elastic_agent import checkpoint as ck

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
node = os.environ["CK_NODE"]
out = os.environ["CK_OUT"]
steps = int(os.environ.get("CK_STEPS", "3"))
size = int(os.environ.get("CK_SIZE", str(1 << 20)))


def state(step, shard):
    unit = ("step %d shard %d|" % (step, shard)).encode()
    return (unit * (size // len(unit) + 1))[:size]


def log(line):
    with open(os.path.join(out, "log.%s" % node), "a") as f:
        f.write(line + "\n")


def put(name, text):
    tmp = os.path.join(out, name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, os.path.join(out, name))


found = ck.latest()
if found:
    step, shards = found
    ok = all(bytes(ck.load(step, s)) == state(step, s) for s in range(shards))
    log("resumed %d shards %d %s" % (step, shards, "ok" if ok else "BAD"))
    sys.exit(0 if ok else 1)
if world < int(os.environ.get("CK_WORLD", "2")):
    time.sleep(600)  # a round before every node joined: the next round stops this one
log("fresh")
for step in range(1, steps + 1):
    ck.save(step, state(step, rank), shard=rank, shards=world)
log("saved %d" % steps)
if os.environ.get("CK_WAIT") == "0":
    put("pid.%s" % node, str(os.getpid()))
    put("saved.%s" % node, str(steps))
    time.sleep(600)
deadline = time.monotonic() + 60
while ck.latest() != (steps, world) and time.monotonic() < deadline:
    time.sleep(0.05)
log("complete %d" % steps if ck.latest() == (steps, world) else "incomplete")
put("pid.%s" % node, str(os.getpid()))
put("complete.%s" % node, str(ck.latest()))
time.sleep(600)
