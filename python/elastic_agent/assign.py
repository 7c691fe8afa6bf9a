# SPDX-License-Identifier: Apache-2.0
"""Warm spares (elastic-agent --warm-workers): take this worker's rank from the agent.

A warm spare is started before its round, with ELASTIC_ASSIGN_FD (one end of a socket the agent
holds the other end of) and no rank in its environment. It does its expensive set-up, then calls
wait_for_assignment(), which sends one line, {"ready":1,"pid":N}, and blocks (no CPU) until the
agent writes the assignment: one JSON line {"generation":G,"round":R,"env":{NAME:VALUE,...}}
holding every variable a cold worker of that rank would have had. The variables go into
os.environ, ELASTIC_ASSIGN_FD leaves it, and the socket is closed. docs/warm.md has the protocol.

Under a cold start (no ELASTIC_ASSIGN_FD) it returns the assignment the environment already holds.

While parked, ELASTIC_ASSIGN_LOCAL_RANK says which local rank the spare will take (the agent
parks spare i for local rank i), so the set-up can pick its GPU: parked_local_rank().
"""
import json
import os
import select

LINE_MAX = 1 << 20  # the agent's assignment line, at most (WARM_ASSIGN_MAX)

__all__ = ["AssignmentError", "wait_for_assignment", "current_assignment", "parked_local_rank",
           "reassignment", "in_place"]

# --in-place: the socket kept after the first assignment, bytes read past the last line, and the
# variables of the last assignment (a new one replaces them all)
_fd = None
_buf = b""
_env = None


class AssignmentError(RuntimeError):
    """The assignment could not be taken: the agent went away, sent something malformed, or an
    assignment that would move this worker back to an older generation."""


def _int(name, default=0):
    try:
        return int(os.environ.get(name) or default)
    except ValueError:
        return default


def current_assignment(warm=False, env=None):
    """The assignment os.environ holds: generation, round, rank, local_rank, world_size,
    master_addr, master_port (None where unset), `env` (the variables, a dict) and `warm`."""
    e = dict(os.environ) if env is None else dict(env)
    port = os.environ.get("MASTER_PORT")
    return {
        "generation": _int("ELASTIC_GENERATION"),
        "round": _int("ELASTIC_ROUND"),
        "rank": _int("RANK", -1) if "RANK" in os.environ else None,
        "local_rank": _int("LOCAL_RANK", -1) if "LOCAL_RANK" in os.environ else None,
        "world_size": _int("WORLD_SIZE", -1) if "WORLD_SIZE" in os.environ else None,
        "master_addr": os.environ.get("MASTER_ADDR"),
        "master_port": int(port) if port and port.isdigit() else None,
        "env": e,
        "warm": warm,
    }


def parked_local_rank():
    """The local rank this process has or will take: LOCAL_RANK once assigned (or under a cold
    start), ELASTIC_ASSIGN_LOCAL_RANK while parked; None when neither is set."""
    for name in ("LOCAL_RANK", "ELASTIC_ASSIGN_LOCAL_RANK"):
        v = os.environ.get(name)
        if v and v.isdigit():
            return int(v)
    return None


def _write_all(fd, data):
    while data:
        try:
            n = os.write(fd, data)
        except OSError as e:
            raise AssignmentError(f"cannot write to ELASTIC_ASSIGN_FD {fd}: {e}")
        data = data[n:]


def _read_line(fd, timeout):
    buf = b""
    while b"\n" not in buf:
        if timeout is not None:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                raise AssignmentError(f"no assignment within {timeout} s")
        try:
            chunk = os.read(fd, 65536)
        except OSError as e:
            raise AssignmentError(f"cannot read ELASTIC_ASSIGN_FD {fd}: {e}")
        if not chunk:
            raise AssignmentError("the agent closed ELASTIC_ASSIGN_FD before the assignment "
                                  "(it stopped, or this spare was not needed)")
        buf += chunk
        if len(buf) > LINE_MAX:
            raise AssignmentError(f"the assignment is longer than {LINE_MAX} bytes")
    line, _, rest = buf.partition(b"\n")
    return line, rest


def _parse(line):
    """The assignment line: (generation, round, env) or AssignmentError."""
    try:
        # an environment is bytes: anything that is not UTF-8 survives as surrogates and goes
        # back to the same bytes through os.environ (which encodes with surrogateescape)
        msg = json.loads(line.decode("utf-8", "surrogateescape"))
    except ValueError as e:
        raise AssignmentError(f"malformed assignment on ELASTIC_ASSIGN_FD: {e}")
    if not isinstance(msg, dict):
        raise AssignmentError("malformed assignment on ELASTIC_ASSIGN_FD: not a JSON object")
    gen, rnd, env = msg.get("generation"), msg.get("round", 0), msg.get("env")
    if type(gen) is not int or gen < 1 or type(rnd) is not int:
        raise AssignmentError("malformed assignment on ELASTIC_ASSIGN_FD: no generation")
    if not isinstance(env, dict) or not env:
        raise AssignmentError("malformed assignment on ELASTIC_ASSIGN_FD: no env")
    for k, v in env.items():
        if (not isinstance(v, str) or not k or "=" in k or "\0" in k or "\0" in v):
            raise AssignmentError(f"malformed assignment on ELASTIC_ASSIGN_FD: variable {k!r}")
    return gen, rnd, env


def wait_for_assignment(timeout=None, inplace=False):
    """Block until the agent assigns this warm spare its rank; put the assignment's variables into
    os.environ and return current_assignment() of it (with warm=True).

    Without ELASTIC_ASSIGN_FD (a cold start, or another launcher) it returns at once what the
    environment holds. Raises AssignmentError when the agent goes away first (it stopped, or this
    spare is not needed: the process is about to be stopped anyway), on a malformed assignment,
    when `timeout` seconds pass, and when the assignment's generation is not newer than the one
    this process already has (ELASTIC_GENERATION): an assignment only ever moves a worker forward.

    inplace=True says (in the ready line) that this worker can take a new assignment while it
    runs (elastic-agent --in-place): the socket then stays open, and reassignment() delivers the
    next round's assignment at a safe point instead of the agent restarting the process.
    """
    global _fd, _env, _buf
    var = os.environ.get("ELASTIC_ASSIGN_FD")
    if not var:
        return current_assignment(warm=False)
    try:
        fd = int(var)
    except ValueError:
        raise AssignmentError(f"ELASTIC_ASSIGN_FD={var!r} is not an fd")
    ready = {"ready": 1, "pid": os.getpid()}
    if inplace:
        ready["inplace"] = 1
    _write_all(fd, json.dumps(ready, separators=(",", ":")).encode() + b"\n")
    line, rest = _read_line(fd, timeout)
    if rest and not inplace:  # in place, the next assignment may follow at once
        raise AssignmentError("more than one line on ELASTIC_ASSIGN_FD")
    gen, rnd, env = _parse(line)
    last = _int("ELASTIC_GENERATION")
    if gen <= last:  # the generation check
        raise AssignmentError(f"refusing an assignment of generation {gen}: not newer than "
                              f"generation {last}")
    os.environ.update(env)
    os.environ.pop("ELASTIC_ASSIGN_FD", None)
    os.environ.pop("ELASTIC_ASSIGN_LOCAL_RANK", None)
    if inplace:  # kept, out of reach of the processes this one starts
        os.set_inheritable(fd, False)
        _fd, _env, _buf = fd, dict(env), rest
        return current_assignment(warm=True, env=env)
    try:
        os.close(fd)
    except OSError:
        pass
    return current_assignment(warm=True, env=env)


def in_place():
    """True when this worker holds its socket for in-place re-assignment (it called
    wait_for_assignment(inplace=True) as a warm spare of an agent with --in-place)."""
    return _fd is not None


def _close():
    global _fd
    if _fd is not None:
        try:
            os.close(_fd)
        except OSError:
            pass
        _fd = None


def reassignment(timeout=0):
    """At a safe point (between training steps): the next round's assignment, or None.

    None at once when there is none (timeout=0, the default: one poll, no blocking), or after
    `timeout` seconds; timeout=None blocks until one comes (after a collective failed because a
    peer left: the agent re-assigns this worker once the new round commits). When one comes, its
    variables replace the last assignment's in os.environ (RANK, WORLD_SIZE, MASTER_PORT, ...),
    the agent gets {"ack":G}, and it is returned as current_assignment() returns it: the caller
    tears down its process group and initialises a new one from os.environ.

    Raises AssignmentError when the agent closed the socket (it is stopping this worker), on a
    malformed line, or when the generation is not newer than this worker's (the socket is closed
    then: the agent restarts the worker the normal way). Always None without in_place().
    """
    global _buf, _env
    if _fd is None:
        return None
    while b"\n" not in _buf:
        ready, _, _ = select.select([_fd], [], [], timeout)
        if not ready:
            return None
        try:
            chunk = os.read(_fd, 65536)
        except OSError as e:
            _close()
            raise AssignmentError(f"cannot read ELASTIC_ASSIGN_FD: {e}")
        if not chunk:
            _close()
            raise AssignmentError("the agent closed ELASTIC_ASSIGN_FD (it is stopping this "
                                  "worker)")
        _buf += chunk
        if len(_buf) > LINE_MAX:
            _close()
            raise AssignmentError(f"a re-assignment longer than {LINE_MAX} bytes")
    line, _, _buf = _buf.partition(b"\n")
    try:
        gen, rnd, env = _parse(line)
    except AssignmentError:
        _close()
        raise
    last = _int("ELASTIC_GENERATION")
    if gen <= last:  # the generation check: forward only
        _close()
        raise AssignmentError(f"refusing a re-assignment of generation {gen}: not newer than "
                              f"generation {last}")
    for name in _env or ():
        if name not in env:
            os.environ.pop(name, None)
    os.environ.update(env)
    _env = dict(env)
    _write_all(_fd, json.dumps({"ack": gen}, separators=(",", ":")).encode() + b"\n")
    return current_assignment(warm=True, env=env)
