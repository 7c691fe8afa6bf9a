#!/usr/bin/env bash
# Scale (issue 8, metric 7): N simulated nodes against one local etcd with bench/rdzv_sim.c —
# real rendezvous sessions (lease, node key, watch, coordinator CAS) spread over a few processes,
# without launching workers. For each N: time from the last join to the committed round, until
# every node has seen it, key writes per node; then one node's lease expires (N -> N-1) and the
# time to the next round. A fresh etcd per N.
# Usage: bench/scale_sim.sh [N...]   (default: 100 250 500 1000); env TTL (s, default 10),
#        PROCS (default 8), BUILD (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
ttl=${TTL:-10}
procs=${PROCS:-8}
sizes=("$@")
((${#sizes[@]})) || sizes=(100 250 500 1000)
[[ -x $build/rdzv-sim ]] || ./scripts/build.sh "$build"
tmp=$(mktemp -d)
etcd_pid=
# shellcheck source=bench/lib/etcd.sh
source bench/lib/etcd.sh
trap 'etcd_stop; rm -rf "$tmp"' EXIT
echo "# $(date -u +%F) $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); etcd $(etcd --version | head -1 | awk '{print $3}'); TTL ${ttl} s; ${procs} processes"
printf '%-6s %-10s %-16s %-16s %-14s %-8s %-14s %-14s %-7s\n' N joined_s commit-lastjoin commit-alljoined all_seen_ms writes 'kill->commit' 'kill->allseen' cpu_s
for n in "${sizes[@]}"; do
  etcd_start "$tmp" --quota-backend-bytes 4294967296 || { echo "etcd did not start" >&2; exit 1; }
  out=$("$build/rdzv-sim" --endpoints "$endpoint" --nodes "$n" --procs "$procs" --ttl "$ttl" \
        --kill-one --timeout 300 2>"$tmp/sim.err") || { echo "N=$n failed: $(cat "$tmp/sim.err")"; etcd_stop; continue; }
  v() { sed -n "s/^$1=//p" <<<"$out" | awk '{print $1}'; }
  printf '%-6s %-10s %-16s %-16s %-14s %-8s %-14s %-14s %-7s\n' "$n" \
    "$(awk -v m="$(v joined_ms)" 'BEGIN {printf "%.1f", m/1000}')" \
    "$(v commit_after_last_join_start_ms) ms" "$(v commit_after_last_join_done_ms) ms" \
    "$(v commit_to_all_seen_ms)" "$(v writes_per_node)" "$(v kill_to_commit_ms) ms" \
    "$(v kill_to_all_seen_ms) ms" "$(sed -n 's/^cpu_s=\([0-9.]*\).*/\1/p' <<<"$out")"
  etcd_stop
done
