#!/usr/bin/env bash
# Fleet faults (issue 30): N simulated nodes (real rendezvous sessions, PROCS processes) on a
# 3-member etcd cluster through the routine faults of bench/fleet_faults.c — compaction + one
# member restarted, compaction + every member restarted, the raft leader killed, the coordinator
# and group ranks 1-7 killed at once (a rack), 20% of the nodes killed at once, one member
# SIGSTOPped (partitioned) while a node dies — with ranks, convergence, the request rate per node,
# leases and claims checked after each. A fresh cluster per N. For each N: the first commit, the
# steady rate, one line per fault (time to converge, rate after, claims, leases lost), the CPU of
# the hosts and the etcd members together.
# Usage: bench/fleet_faults.sh [N...]   (default: 2000 10000); env TTL (s, default 10), PROCS
#        (default 16), BUILD (default build; needs -DEA_TESTS=ON: fleet-faults uses the tests'
#        etcd harness), SEED (default 1), FAULTS (default all)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
ttl=${TTL:-10}
procs=${PROCS:-16}
seed=${SEED:-1}
sizes=("$@")
((${#sizes[@]})) || sizes=(2000 10000)
[[ -x $build/fleet-faults ]] || {
  echo "fleet_faults.sh: no $build/fleet-faults (./scripts/build.sh $build -DEA_TESTS=ON)" >&2
  exit 2
}
ulimit -n 65536 2>/dev/null || true
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# $(date -u +%F) $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); etcd $(etcd --version | head -1 | awk '{print $3}') x3; TTL ${ttl} s; ${procs} processes; seed ${seed}; commit $(git rev-parse --short HEAD)"
status=0
for n in "${sizes[@]}"; do
  p=$procs
  ((p <= n)) || p=$n
  args=(--nodes "$n" --procs "$p" --ttl "$ttl" --seed "$seed")
  [[ -z ${FAULTS:-} ]] || args+=(--faults "$FAULTS")
  start=$(date +%s)
  rc=0
  "$build/fleet-faults" "${args[@]}" >"$tmp/out" 2>"$tmp/err" || rc=$?
  v() { sed -n "s/^$1=//p" "$tmp/out" | tail -1; }
  echo "## N=$n: $build/fleet-faults ${args[*]} (exit $rc, wall $(($(date +%s) - start)) s)"
  echo "first commit $(v first_commit_ms) ms after the go; steady $(v steady_rate_per_node) requests/s per node; $(grep -h '^cpu_s=' "$tmp/out" | sed 's/cpu_s=/CPU of hosts + etcd: /; s/ maxrss_mib_per_proc=/ s, max RSS per process /; s/$/ MiB/')"
  grep -v -e '=' -e '^#' "$tmp/out" || true
  grep -h 'VIOLATION' "$tmp/err" || true
  lost=$(grep -c 'lease lost:' "$tmp/err" || true)
  ((lost == 0)) || echo "$lost lease losses reported by the nodes, e.g.: $(grep -m1 'lease lost:' "$tmp/err")"
  if ((rc)); then
    status=1
    echo "(stderr tail)"
    grep -v 'apply events\|: tick: \|keepalive: \|further store errors\|lease lost:\|VIOLATION' "$tmp/err" | tail -5
  fi
done
exit $status
