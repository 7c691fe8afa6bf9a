#!/usr/bin/env bash
# Node kill during real DDP training, cold restarts against --warm-workers side by side (issue
# 32): 4 nodes x 1 gloo worker of examples/pytorch/train_warm.py on this host, elastic-agent on a
# real etcd; a node that is not rank 0's is SIGKILLed when its worker begins epoch 3; measured:
# the new round's commit -> every survivor's first training step, medians over --runs of each.
# Needs etcd, etcdctl and Debian's python3-torch (/usr/bin/python3). Not part of CI.
# Usage: bench/warm_kill.sh [--runs N] [--out DIR]   (bench/warm_kill.py --help lists the rest)
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/elastic-agent ]] || ./scripts/build.sh build
for tool in etcd etcdctl; do
  command -v "$tool" >/dev/null || { echo "warm_kill: needs $tool (etcd-server, etcd-client)" >&2; exit 2; }
done
/usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' ||
  { echo "warm_kill: needs python3-torch for /usr/bin/python3" >&2; exit 2; }
exec /usr/bin/python3 bench/warm_kill.py "$@"
