# SPDX-License-Identifier: Apache-2.0
"""Heartbeats for elastic-agent's hang detection (--worker-heartbeat-timeout) and its
progress-aware restarts (--max-restarts-without-progress: the step is where the run was when a
worker fails, docs/restarts.md).

    import elastic_agent
    for step, batch in enumerate(loader):
        ...
        elastic_agent.beat(step)       # or beat("checkpoint"), or beat()

Each call overwrites the file named by ELASTIC_HEARTBEAT_FILE with one line (the step number or
phase name, shown in the failure table as "last: step 1234"). The agent does not read the file on
every beat: it looks at it only when the rank's deadline comes, so beating once per step costs
one small write. Without ELASTIC_HEARTBEAT_FILE (another launcher, workers over ssh, or both hang
detection and --max-restarts-without-progress off) every call is a no-op. The shell form is:

    echo "$STEP" > "$ELASTIC_HEARTBEAT_FILE"     # or: touch "$ELASTIC_HEARTBEAT_FILE"

Straggler detection (docs/restarts.md) compares each rank's own compute time (forward/backward,
before the collective), not its step rate (the collective makes every rank's the same):

    with elastic_agent.compute():       # two perf_counter() calls; the time goes with the beat
        loss = model(batch).sum(); loss.backward()   # no collective inside (not DDP)
    all_reduce_gradients(); optimizer.step()         # the collective: not timed
    elastic_agent.beat(step)            # writes "1234 0.052341"

With DistributedDataParallel the all-reduce runs inside backward() (a fast rank waits there for
the slowest), so time the block with ddp_compute_hook(model) instead: it ends where DDP hands
the last gradient bucket to the all-reduce. compute() around a DDP backward() times every rank
at the slowest one's pace and hides the straggler (measured: bench/RESULTS.md, issue 40).

or beat(step, compute_s=0.052). The shell form: echo "$STEP $SECONDS_OF_COMPUTE" > the file.
"""
import os
from time import perf_counter

_fd = None
_path = None
_compute_s = None


class _Timer:
    __slots__ = ("t0",)

    def __enter__(self):
        self.t0 = perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb):
        global _compute_s
        _compute_s = perf_counter() - self.t0
        return False


_timer = _Timer()  # one per process: a step's blocks do not nest


class _DDPTimer:
    """compute() for a block that holds a DDP backward(): it ends when DDP hands the last
    gradient bucket to the all-reduce, not when backward() returns (DDP waits for the all-reduce
    inside backward(), so a fast rank's block would also time its wait for the slowest rank)."""
    __slots__ = ("t0", "ready")

    def __init__(self):
        self.t0 = 0.0
        self.ready = None

    def hook(self, process_group, bucket):
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
        self.ready = perf_counter()  # the last call of a backward: every gradient computed
        return allreduce_hook(process_group, bucket)

    def __enter__(self):
        self.ready = None
        self.t0 = perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb):
        global _compute_s
        end = self.ready if self.ready is not None else perf_counter()
        _compute_s = end - self.t0
        return False


def ddp_compute_hook(model, process_group=None):
    """For a DistributedDataParallel `model`: registers a communication hook (the default
    all-reduce, timed) and returns the block to use in place of compute():

        timed = elastic_agent.ddp_compute_hook(model)
        with timed:
            loss = model(x).sum(); loss.backward()   # timed up to the last bucket's all-reduce
        elastic_agent.beat(step)

    Needs torch (imported here only); replaces any other comm hook (DDP takes one)."""
    t = _DDPTimer()
    model.register_comm_hook(process_group, t.hook)
    return t


def compute():
    """Time the block (`with compute():`) as this step's compute time; the next beat() carries
    it. No allocation: the same timer each time."""
    return _timer


def path():
    """The heartbeat file of this worker, or None when hang detection is off."""
    return os.environ.get("ELASTIC_HEARTBEAT_FILE") or None


def beat(what=None, compute_s=None):
    """Tell the agent this rank is alive; `what` (a step number or a word) is what it last did;
    `compute_s` (default: the last compute() block's, used once) its compute time in seconds."""
    global _fd, _path, _compute_s
    if compute_s is None:
        compute_s, _compute_s = _compute_s, None
    p = path()
    if p is None:
        return
    text = "" if what is None else str(what).replace("\n", " ")[:60]
    if compute_s is not None and text.isdigit() and compute_s > 0:  # only after a step
        text += " %.6f" % compute_s
    data = (text + "\n").encode()
    try:
        if _fd is None or _path != p:  # a warm spare learns its file with its assignment
            if _fd is not None:
                os.close(_fd)
                _fd = None
            _fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            _path = p
        os.pwrite(_fd, data, 0)  # updates the file's mtime: that is the beat
        os.ftruncate(_fd, len(data))
    except OSError:
        # never let a heartbeat break training: a beat that keeps failing is a missed beat,
        # which the agent reports as a hang
        if _fd is not None:
            os.close(_fd)
        _fd = None
