# SPDX-License-Identifier: Apache-2.0
"""Worker-side helpers of elastic-agent (standard library only).

    import elastic_agent
    # ... expensive set-up: imports, model, data, the checkpoint into host memory ...
    a = elastic_agent.wait_for_assignment()   # a warm spare gets its rank here
    # os.environ now holds RANK, WORLD_SIZE, MASTER_ADDR, ... as under a cold start
    for step, batch in enumerate(loader):
        ...
        elastic_agent.beat(step)              # hang detection's heartbeat

With elastic-agent --in-place, wait_for_assignment(inplace=True) keeps the socket, and the loop
calls reassignment() at a safe point (each step): the next round's assignment (then re-form the
process group from os.environ) or None.

wait_for_assignment() returns at once under a cold start (no ELASTIC_ASSIGN_FD), and beat() is a
no-op without hang detection, so one script runs under elastic-agent with or without
--warm-workers, and under torchrun.
"""
from .assign import (AssignmentError, current_assignment, in_place, parked_local_rank,
                     reassignment, wait_for_assignment)
from .heartbeat import beat, compute, ddp_compute_hook
from .heartbeat import path as heartbeat_path

__all__ = ["wait_for_assignment", "current_assignment", "parked_local_rank", "AssignmentError",
           "reassignment", "in_place",
           "beat", "compute", "ddp_compute_hook", "heartbeat_path"]
__version__ = "0.1.0"
