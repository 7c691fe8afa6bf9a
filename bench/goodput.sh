#!/usr/bin/env bash
# Goodput of DDP and ZeRO-1 on 4 nodes, a node SIGKILLed every 30 s and replaced 5 s later, for
# 150 s (issue 39's target): elastic-agent with --checkpoint-memory, elastic-agent with a disk
# checkpoint every 20 steps, torchrun with the same; each worker capped to a fixed CPU share by
# a cgroup v1 cpu cgroup of its own (bench/goodput.py). --memory: the checkpoint bytes and RSS of
# each agent in the ZeRO-1 store run. Needs root (cgroups), etcd, etcdctl and Debian's
# python3-torch (/usr/bin/python3). Not part of CI.
# Usage: bench/goodput.sh [--workload ddp|zero|both] [--seconds 150] [--out DIR] [--memory]
#        (bench/goodput.py --help lists the rest; the release build is used when there is one)
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build-release/elastic-agent || -x build/elastic-agent ]] || ./scripts/build.sh build
for tool in etcd etcdctl; do
  command -v "$tool" >/dev/null || { echo "goodput: needs $tool (etcd-server, etcd-client)" >&2; exit 2; }
done
/usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' ||
  { echo "goodput: needs python3-torch for /usr/bin/python3" >&2; exit 2; }
[[ -w /sys/fs/cgroup/cpu/cgroup.procs && -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]] ||
  { echo "goodput: needs a writable cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu (root)" >&2; exit 2; }
prefix="ea-goodput-$$"
# What the driver did not clean up (it was killed): the workers' cgroups, and what is in them.
cleanup() {
  local d pid
  for d in /sys/fs/cgroup/cpu/"$prefix"-w*; do
    [[ -d $d ]] || continue
    for _ in $(seq 50); do
      while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done <"$d/cgroup.procs"
      rmdir "$d" 2>/dev/null && break
      sleep 0.1
    done
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
/usr/bin/python3 bench/goodput.py --cgroup-prefix "$prefix" "$@"
