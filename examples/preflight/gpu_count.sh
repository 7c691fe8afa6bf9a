#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# elastic-agent --preflight check: nvidia-smi sees at least N GPUs (default: --nproc-per-node's
# value is not known here, so give it). Without nvidia-smi the check passes (CPU node).
#   elastic-agent --nproc-per-node 8 --preflight '/usr/share/doc/elastic-agent/examples/preflight/gpu_count.sh 8' ...
want=${1:-1}
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu_count: no nvidia-smi on this node: nothing to check"
  exit 0
fi
have=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>&1) || {
  echo "gpu_count: nvidia-smi failed: $have" >&2
  exit 1
}
n=$(printf '%s\n' "$have" | grep -c .)
if [ "$n" -lt "$want" ]; then
  echo "gpu_count: $n GPU(s) visible, need $want" >&2
  exit 1
fi
echo "gpu_count: $n GPU(s)"
