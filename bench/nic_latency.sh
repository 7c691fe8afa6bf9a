#!/usr/bin/env bash
# NIC discovery's added latency (issue 11): 4 agents, each in a network namespace of its own with
# two links (only one subnet routed between all hosts), file backend; the time from a node's
# round commit to its workers started, with --nic-discovery on (auto: several hosts) and off.
# Runs the two end-to-end cases of tests/nic/test_nic_e2e.c RUNS times each (needs root for the
# namespaces) and prints median and p90 over every agent of every run, and the difference.
# Usage: bench/nic_latency.sh [RUNS]   (default 10); env BUILD (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
bin=${BUILD:-build}/tests/test_nic_e2e
[[ -x $bin ]] || { echo "nic_latency: build $bin first (scripts/build.sh)" >&2; exit 2; }
[[ $EUID -eq 0 ]] || { echo "nic_latency: needs root (network namespaces)" >&2; exit 2; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((i = 0; i < runs; i++)); do
  "$bin" --verbose --jobs 1 --filter 'nic/@(common_interface|discovery_off)' >>"$out" 2>&1 ||
    { tail -20 "$out" >&2; echo "nic_latency: run $i failed" >&2; exit 1; }
done
stats() { # mode: median p90 n
  sed -n "s/.*NIC discovery $1: n[0-9]* round committed -> workers started \([0-9]*\) ms.*/\1/p" \
    "$out" | sort -n | awk '{v[NR] = $1} END {
      if (NR == 0) { print "- - 0"; exit }
      i = int((NR + 1) / 2); j = int(NR * 0.9 + 0.999); if (j > NR) j = NR
      print v[i], v[j], NR }'
}
read -r on_med on_p90 on_n <<<"$(stats on)"
read -r off_med off_p90 off_n <<<"$(stats off)"
echo "# $(date -u +%F) $(nproc) cores; $runs runs x 4 agents each; round committed -> workers started"
printf '| NIC discovery | median | p90 | samples |\n|---|---|---|---|\n'
printf '| on  | %s ms | %s ms | %s |\n| off | %s ms | %s ms | %s |\n' \
  "$on_med" "$on_p90" "$on_n" "$off_med" "$off_p90" "$off_n"
echo "added by discovery (median): $((on_med - off_med)) ms"
