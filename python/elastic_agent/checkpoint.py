# SPDX-License-Identifier: Apache-2.0
"""Checkpoints held in the agent's memory (elastic-agent --checkpoint-memory; docs/checkpoint.md).

    from elastic_agent import checkpoint
    found = checkpoint.latest()                # (step, shards) or None
    if found:
        state = checkpoint.load(found[0], shard=rank)   # a read-only memoryview (a memory map)
    ...
    checkpoint.save(step, buf)                 # bytes or any buffer; shard=RANK, shards=WORLD_SIZE

The agent hands a memfd of the shard's size over ELASTIC_AGENT_CHECKPOINT_SOCKET; the bytes are
written into it (pwrite, not through the socket), then committed: the agent seals the memfd
against writes and checks its length (and with checksum=True the CRC-32 sent along), so the bytes
outlive this process and cannot change. A save
that does not fit --checkpoint-memory raises CheckpointError (code "ENOSPC"). Standard library
only; torch is imported by save_state_dict / load_state_dict alone.
"""
import io
import mmap
import os
import socket
import zlib

ENV = "ELASTIC_AGENT_CHECKPOINT_SOCKET"
_MSG_MAX = 512


class CheckpointError(Exception):
    """The agent refused a request (code: "ENOSPC", "EINVAL", "EBADMSG", ...), or there is none."""

    def __init__(self, code, message):
        super().__init__("%s: %s" % (code, message))
        self.code = code


_conn = None  # (pid, socket): a child after fork() connects anew


def available():
    """True when this worker's agent holds checkpoints (--checkpoint-memory)."""
    return bool(os.environ.get(ENV))


def _sock():
    global _conn
    if _conn is not None and _conn[0] == os.getpid():
        return _conn[1]
    path = os.environ.get(ENV)
    if not path:
        raise CheckpointError("ENOENT", "no %s: the agent runs without --checkpoint-memory" % ENV)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    s.connect(path)
    _conn = (os.getpid(), s)
    return s


def _request(msg):
    """Send one request; the reply's words and the fd that came with it (or None)."""
    s = _sock()
    s.send(msg.encode())
    data, fds, _flags, _addr = socket.recv_fds(s, _MSG_MAX, 1)
    if not data:
        raise CheckpointError("EPIPE", "the agent closed the checkpoint socket")
    words = data.decode(errors="replace").split(" ")
    fd = fds[0] if fds else None
    for extra in fds[1:]:
        os.close(extra)
    if words[0] == "err":
        if fd is not None:
            os.close(fd)
        raise CheckpointError(words[1] if len(words) > 1 else "EIO", " ".join(words[2:]))
    return words, fd


def _run():
    run = os.environ.get("TORCHELASTIC_RUN_ID")
    if not run:
        raise CheckpointError("ENOENT", "no TORCHELASTIC_RUN_ID (--env-style without torch?)")
    return run


def _default(value, name):
    if value is not None:
        return int(value)
    return int(os.environ.get(name, "0" if name == "RANK" else "1"))


def save(step, data, shard=None, shards=None, checksum=False):
    """Save `data` (bytes or any buffer) as shard `shard` (default RANK) of `shards` (default
    WORLD_SIZE) of step `step` into the agent's memory. Returns once the agent has sealed it and
    checked its length. checksum=True also sends zlib.crc32(data), checked by the agent after the
    seal (one more pass over the bytes here and there: it catches this process writing other
    bytes than it meant to; the seal already guarantees they cannot change afterwards). Raises
    CheckpointError (e.g. "ENOSPC": it does not fit --checkpoint-memory)."""
    view = memoryview(data).cast("B")
    n = view.nbytes
    shard, shards = _default(shard, "RANK"), _default(shards, "WORLD_SIZE")
    words, fd = _request("save %s %d %d %d %d" % (_run(), step, shard, shards, n))
    if fd is None or len(words) != 2:
        raise CheckpointError("EPROTO", "unexpected reply %r" % " ".join(words))
    try:
        off = 0
        while off < n:  # into the agent's memfd: faster than a map (no fault per page)
            off += os.pwrite(fd, view[off:], off)
    finally:
        os.close(fd)
    _request("commit %s %s" % (words[1], "%08x" % zlib.crc32(view) if checksum else "-"))


def latest():
    """The newest step complete across the run (every shard held by this node's agent or by
    another live node's, as they published it at the round's start), as (step, shards), or None.
    The first call of a round may wait for the coordinator's value of the round (3 s; without it,
    this node's own newest complete step after 5 s)."""
    words, fd = _request("latest %s" % _run())
    if fd is not None:
        os.close(fd)
    if words[0] == "none":
        return None
    return int(words[1]), int(words[2])


def load(step, shard=None, verify=False):
    """Shard `shard` (default RANK) of step `step`: a read-only memoryview over the agent's
    sealed memory (a map, no copy). A shard this node does not hold is fetched by the agent from
    a node that does first (CRC-checked; CheckpointError "ENOENT" with the reason if it cannot). verify=True checks its CRC-32 here too, when the agent knows
    it (declared at the save, or read from --checkpoint-dir)."""
    shard = _default(shard, "RANK")
    words, fd = _request("load %s %d %d" % (_run(), step, shard))
    if fd is None or len(words) != 3:
        raise CheckpointError("EPROTO", "unexpected reply %r" % " ".join(words))
    n, crc = int(words[1]), None if words[2] == "-" else int(words[2], 16)
    try:
        if n == 0:
            return memoryview(b"")
        m = mmap.mmap(fd, n, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    view = memoryview(m)
    if verify and crc is not None and zlib.crc32(view) != crc:
        raise CheckpointError("EBADMSG", "shard %d of step %d: checksum mismatch" % (shard, step))
    return view


def save_state_dict(step, state_dict, shard=None, shards=None):
    """torch.save(state_dict) into the store (serialized once in memory, then one copy into the
    agent's memfd)."""
    import torch

    buf = io.BytesIO()
    torch.save(state_dict, buf)
    save(step, buf.getbuffer(), shard=shard, shards=shards)


def load_state_dict(step, shard=None, map_location="cpu"):
    """torch.load of a shard saved with save_state_dict."""
    import torch

    return torch.load(io.BytesIO(load(step, shard)), map_location=map_location)
