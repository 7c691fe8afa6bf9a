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
"""
import os

_fd = None
_path = None


def path():
    """The heartbeat file of this worker, or None when hang detection is off."""
    return os.environ.get("ELASTIC_HEARTBEAT_FILE") or None


def beat(what=None):
    """Tell the agent this rank is alive; `what` (a step number or a word) is what it last did."""
    global _fd, _path
    p = path()
    if p is None:
        return
    data = b"\n" if what is None else (str(what).replace("\n", " ")[:80] + "\n").encode()
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
