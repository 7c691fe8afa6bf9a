#!/usr/bin/env bash
# A hung rank during real DDP training, elastic-agent (--worker-heartbeat-timeout) and torchrun
# side by side (issue 21): time from the hang to training again; torchrun capped (--cap, 180 s).
# Needs Debian's python3-torch (/usr/bin/python3). Not part of CI.
# Usage: bench/hang_bench.sh [--runs N] [--timeout SEC] [--cap SEC] [--scenario both|elastic-agent|torchrun]
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/elastic-agent ]] || ./scripts/build.sh build
/usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' ||
  { echo "hang_bench: needs python3-torch for /usr/bin/python3" >&2; exit 2; }
exec /usr/bin/python3 bench/hang_bench.py "$@"
