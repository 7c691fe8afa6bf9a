# SPDX-License-Identifier: Apache-2.0
"""The save stall of a checkpoint: elastic_agent.checkpoint (the agent's memory, issue 39) against
torch.save to a local file, side by side in one process (bench/ckpt_save.sh runs it under
elastic-agent --checkpoint-memory). A float32 state of CK_MB megabytes (default 256); each way
CK_REPEAT times (default 5), the median reported:

  store.save (raw)   checkpoint.save(step, tensor.numpy()): the tensor's bytes, no serialization
  store.state_dict   checkpoint.save_state_dict(step, {"w": tensor}) (torch.save into memory + copy)
  torch.save         torch.save({"w": tensor}, FILE) into the page cache (no fsync)
  torch.save+fsync   the same, then os.fsync (the bytes on the local disk)
  store.load         checkpoint.load(step): a memory map of the agent's sealed memfd

CK_GAP (seconds, default 0) pauses before each timed call, outside the measure: the training step
between two saves, during which the agent prepares the next save's memory (its spare memfd).
"""
import os
import statistics
import sys
import tempfile
import time

import torch

from elastic_agent import checkpoint as ck

mb = int(os.environ.get("CK_MB", "256"))
repeat = int(os.environ.get("CK_REPEAT", "5"))
tmpdir = os.environ.get("CK_TMPDIR") or tempfile.gettempdir()
gap = float(os.environ.get("CK_GAP", "0"))
t = torch.randn(mb * (1 << 20) // 4)
step = [0]


def timed(fn):
    xs = []
    for _ in range(repeat):
        if gap > 0:
            time.sleep(gap)  # a training step between saves (not measured)
        t0 = time.perf_counter()
        fn()
        xs.append(time.perf_counter() - t0)
    return statistics.median(xs), min(xs), max(xs)


def store_raw():
    step[0] += 1
    ck.save(step[0], t.numpy(), shard=0, shards=1)


def store_sd():
    step[0] += 1
    ck.save_state_dict(step[0], {"w": t}, shard=0, shards=1)


path = os.path.join(tmpdir, "ckpt_bench_%d.pt" % os.getpid())


def torch_save():
    torch.save({"w": t}, path)


def torch_save_fsync():
    with open(path, "wb") as f:
        torch.save({"w": t}, f)
        f.flush()
        os.fsync(f.fileno())


def store_load():
    v = ck.load(step[0], 0)
    v[len(v) - 1]  # touch the mapping
    v.release()


rows = [("store.save (raw)", timed(store_raw)), ("store.state_dict", timed(store_sd)),
        ("torch.save", timed(torch_save)), ("torch.save+fsync", timed(torch_save_fsync)),
        ("store.load", timed(store_load))]
os.unlink(path)
print("state %d MB, %d runs each, torch %s, file in %s, %.2f s between calls" %
      (mb, repeat, torch.__version__, tmpdir, gap))
print("%-18s %10s %10s %10s" % ("way", "median s", "min s", "max s"))
for name, (med, lo, hi) in rows:
    print("%-18s %10.3f %10.3f %10.3f" % (name, med, lo, hi))
raw, sd, ts, tsf = rows[0][1][0], rows[1][1][0], rows[2][1][0], rows[3][1][0]
print("ratio torch.save / store.save (raw): %.1fx; torch.save+fsync / store.save: %.1fx; "
      "torch.save / store.state_dict: %.1fx" % (ts / raw, tsf / raw, ts / sd))
sys.stdout.flush()
