# SPDX-License-Identifier: Apache-2.0
"""test_e2e_checkpoint's worker: resumes from elastic_agent.checkpoint.latest() (checking the
bytes it loads), then saves steps up to CK_STEPS, one shard per rank. CK_CRASH_AT=N: the first
incarnation (no marker file) exits 1 right after saving step N. Lines go to CK_OUT/log.<rank>."""
import os
import sys

from elastic_agent import checkpoint as ck

rank = int(os.environ["RANK"])
out = os.environ["CK_OUT"]
steps = int(os.environ.get("CK_STEPS", "5"))
crash_at = int(os.environ.get("CK_CRASH_AT", "-1"))
size = int(os.environ.get("CK_SIZE", str(1 << 20)))


def state(step):
    unit = ("step %d rank %d|" % (step, rank)).encode()
    return (unit * (size // len(unit) + 1))[:size]


def log(line):
    with open(os.path.join(out, "log.%d" % rank), "a") as f:
        f.write(line + "\n")


found = ck.latest()
start = 1
if found:
    step, shards = found
    data = ck.load(step, rank)
    log("resumed %d %s" % (step, "ok" if bytes(data) == state(step) else "BAD"))
    start = step + 1
else:
    log("fresh")
for step in range(start, steps + 1):
    ck.save(step, state(step))
    log("saved %d" % step)
    marker = os.path.join(out, "crashed.%d" % rank)
    if step == crash_at and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
sys.exit(0)
