#!/usr/bin/env bash
# The save stall of a 256 MB state: elastic-agent's checkpoint store against torch.save to a local
# file, side by side in one worker (bench/ckpt_save_bench.py; issue 39). Usage:
#   bench/ckpt_save.sh [BUILD_DIR]      (CK_MB, CK_REPEAT, CK_TMPDIR, CK_GAP passed on)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
mb=${CK_MB:-256}
exec "$build/elastic-agent" --standalone --run-id ckpt-bench --log-level warn \
  --checkpoint-memory $((mb * 3)) -- \
  env PYTHONPATH="$PWD/python" CK_MB="$mb" /usr/bin/python3 bench/ckpt_save_bench.py
