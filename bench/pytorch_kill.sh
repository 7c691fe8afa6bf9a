#!/usr/bin/env bash
# Node kill during real DDP training, elastic-agent (etcd) and torchrun (c10d) side by side
# (issue #13): 4 nodes x 1 worker of examples/pytorch/train_elastic.py on this host; the
# victim node (launcher + worker) is SIGKILLed when its worker begins epoch 3; a 5th node joins
# once training runs again at world 3 (or after --wait s); timelines relative to the kill.
# Needs etcd, etcdctl and Debian's python3-torch (/usr/bin/python3). Not part of CI.
# Usage: bench/pytorch_kill.sh [--scenario both|elastic-agent|torchrun] [--wait S] [--out DIR]
#        (bench/pytorch_kill.py --help lists every option)
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/elastic-agent ]] || ./scripts/build.sh build
for tool in etcd etcdctl; do
  command -v "$tool" >/dev/null || { echo "pytorch_kill: needs $tool (etcd-server, etcd-client)" >&2; exit 2; }
done
/usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' ||
  { echo "pytorch_kill: needs python3-torch for /usr/bin/python3" >&2; exit 2; }
exec /usr/bin/python3 bench/pytorch_kill.py "$@"
