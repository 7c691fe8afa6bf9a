#!/usr/bin/env bash
# The README's first command: installs dependencies, builds, and runs a small elastic job on the
# embedded file backend: two agents (--min 2 --max 4, two workers each) start; a third agent joins
# while they run and every worker restarts with new ranks; the run then finishes with exit 0.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
build=${EA_DEMO_BUILD_DIR:-build} # tests/demo/check_demo.sh builds elsewhere
./scripts/build.sh "$build"
bin=$build/elastic-agent
state=$(mktemp -d)
logs=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$state" "$logs"' EXIT
common=(--run-id demo --state-dir "$state" --min 2 --max 4 --nproc-per-node 2 --settle 0.5
        --lease-ttl 2 --tee)
echo "== starting agents a and b (min 2, max 4) =="
$bin "${common[@]}" --node-id a -- examples/hello_worker.sh 2>"$logs/a" &
pa=$!
$bin "${common[@]}" --node-id b -- examples/hello_worker.sh 2>"$logs/b" &
pb=$!
# wait (at most 20 s) until the first round runs, then scale up with a third node
timeout 20 tail -n +1 -f "$logs/a" | grep -q -m1 "started 2 worker" || true
echo "== agent c joins: the run scales from 4 to 6 workers =="
$bin "${common[@]}" --node-id c -- examples/hello_worker.sh 2>"$logs/c" &
pc=$!
status=0
for p in $pa $pb $pc; do wait "$p" || status=$?; done
echo "== agent logs =="
cat "$logs/a" "$logs/b" "$logs/c" | sort | grep -E "joined|round|succeeded" || true
exit $status
