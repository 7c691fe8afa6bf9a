#!/usr/bin/env bash
# Configures and builds into build/ (or the directory given), passing extra cmake arguments on.
# Quiet unless something fails.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "build: $dir $*" >&2
if ! { cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" &&
       cmake --build "$dir" -j"$(nproc)"; } >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
sed -n 's/^-- \(tests skipped: .*\)/build: \1/p' "$log" >&2 # CMakeLists.txt: EA_TESTS AUTO
