#!/usr/bin/env bash
# ZeRO-1 on 4 nodes, one SIGKILLed (issue 39's target): bench/zero_kill.py. Needs etcd, etcdctl
# and Debian's python3-torch (/usr/bin/python3). Not part of CI.
# Usage: bench/zero_kill.sh [--runs N] [--out DIR]   (bench/zero_kill.py --help lists the rest)
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/elastic-agent ]] || ./scripts/build.sh build
for tool in etcd etcdctl; do
  command -v "$tool" >/dev/null || { echo "zero_kill: needs $tool (etcd-server, etcd-client)" >&2; exit 2; }
done
/usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' ||
  { echo "zero_kill: needs python3-torch for /usr/bin/python3" >&2; exit 2; }
exec /usr/bin/python3 bench/zero_kill.py "$@"
