#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""torchrun, with one fix for Debian's torch 1.13 under Python 3.11.

torch 1.13's Std.from_str maps a value to a flag by iterating over the IntFlag, and since
Python 3.11 iterating over a Flag no longer yields the zero member, so from_str("0") (the
default of --redirects and --tee) returns None and torchrun crashes before it starts anything.
This wraps from_str with a version that builds the flag from the integer, then calls
torch.distributed.run.main with the command line unchanged:

    python3 bench/torchrun_launcher.py --nnodes 1:4 ... train.py --args
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api as mp_api


def _from_str(vm):
    if re.fullmatch(r"[0-3]", vm):
        return mp_api.Std(int(vm))
    if re.fullmatch(r"(\d:[0-3],)*(\d:[0-3])", vm):
        return {int(i): mp_api.Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match: <[0-3]> or <(\\d:[0-3],)*(\\d:[0-3])>")


if mp_api.Std.from_str("0") is None:  # only where the bug is
    mp_api.Std.from_str = staticmethod(_from_str)

from torch.distributed.run import main  # noqa: E402  (after the patch)

if __name__ == "__main__":
    sys.exit(main())
