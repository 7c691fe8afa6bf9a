#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cpu_cap.sh PREFIX QUOTA_US PERIOD_US CMD [ARG...]: run CMD held to QUOTA_US of CPU time per
# PERIOD_US (cgroup v1 cpu.cfs_quota_us / cpu.cfs_period_us, v2's cpu.max) in a cgroup of its
# own, PREFIX-w<pid>, made here (PREFIX: /sys/fs/cgroup/cpu/NAME; the caller removes every
# PREFIX-w* when it is done: bench/goodput.py, bench/goodput.sh). A sibling of the top
# cgroup, so that it weighs what one process does against the rest of the machine (the default
# cpu.shares); the quota only caps it. Exit 126 when the cgroup cannot be made or entered.
prefix=$1 quota=$2 period=$3
shift 3
d="$prefix-w$$"
if ! { mkdir "$d" && echo "$period" >"$d/cpu.cfs_period_us" &&
        echo "$quota" >"$d/cpu.cfs_quota_us" && echo $$ >"$d/cgroup.procs"; }; then
  echo "cpu_cap: cannot enter $d" >&2
  exit 126
fi
exec "$@"
