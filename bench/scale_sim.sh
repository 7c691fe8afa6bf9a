#!/usr/bin/env bash
# Scale (issue 18): N simulated nodes against one local etcd with bench/rdzv_sim.c — real
# rendezvous sessions (lease, node key, watches, assignment; the coordinator's fenced
# transactions) spread over a few processes, without launching workers. A fresh etcd per run.
# For each N: joins, last join -> every node has its assignment (and commit -> the last process
# read the events that brought the commit: the rest is the first round's chunk reads), last join
# -> every node could start its workers (group rank 0 published the round's master once it had
# its own chunk, and the master reached every node: what an agent waits for), bytes
# received and keys written per node per round (from each session's own counters), etcd's CPU;
# then one node killed, the coordinator killed, the coordinator and group ranks 1-7 killed (a rack:
# and how many nodes claimed `coord`), 10% killed at once (each: kill -> every survivor
# in the next round, and could start its workers in it).
# With OLD_BUILD (a build of an earlier commit, e.g. the v1 protocol), the same N up to OLD_MAX
# are run with its rdzv-sim too, in the same run, for the side-by-side curve.
# With RING=1 (the default, as agents run with --liveness on) every simulated node is in the
# liveness ring (rdzv-sim --ring: a listener and a TCP link per node, suspicion -> probe -> lease
# revoke), so a killed node is seen by its neighbours, not by its lease.
# Usage: bench/scale_sim.sh [N...]   (default: 100 1000 2000 5000 10000); env TTL (s, default
#        10), PROCS (default 16), BUILD (default build), OLD_BUILD, OLD_MAX (default 1000),
#        CSV (default bench/plots/scale.csv), RING (default 1), RING_ARGS (more rdzv-sim ring
#        options, e.g. "--ring-interval 1000")
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
ttl=${TTL:-10}
procs=${PROCS:-16}
old=${OLD_BUILD:-}
old_max=${OLD_MAX:-1000}
csv=${CSV:-bench/plots/scale.csv}
ring=${RING:-1}
read -r -a ring_args <<<"${RING_ARGS:-}"
sizes=("$@")
((${#sizes[@]})) || sizes=(100 1000 2000 5000 10000)
[[ -x $build/rdzv-sim ]] || ./scripts/build.sh "$build"
tmp=$(mktemp -d)
etcd_pid=
# shellcheck source=bench/lib/etcd.sh
source bench/lib/etcd.sh
trap 'etcd_stop; rm -rf "$tmp"' EXIT
ulimit -n 65536 2>/dev/null || true
cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime, clock ticks
hz=$(getconf CLK_TCK)
echo "# $(date -u +%F) $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); etcd $(etcd --version | head -1 | awk '{print $3}'); TTL ${ttl} s; ${procs} processes; ring $ring; load $(cut -d' ' -f1-3 /proc/loadavg); commit $(git rev-parse --short HEAD)"
printf '%-8s %-6s %-8s %-12s %-12s %-10s %-12s %-12s %-9s %-10s %-10s %-10s %-8s\n' protocol N joins_s \
  lastjoin-all lastjoin-ready commit-all bytes/node bytes/node writes/nd coord_keys 'kill1->all' 'coord->all' '10%->all'
printf '%-8s %-6s %-8s %-12s %-12s %-10s %-12s %-12s %-9s %-10s %-10s %-10s %-8s\n' '' '' '' \
  '(ms)' '(ms)' '(ms)' 'mean/max' '(join)' '' '' '(ms)' '(ms)' '(ms)'
header="protocol,n,joins_ms,lastjoin_to_all_ms,commit_to_all_ms,round_bytes_mean,round_bytes_max,join_bytes_mean,keys_per_node,coord_keys,kill_one_ms,kill_coord_ms,kill_tenth_ms,etcd_cpu_s,leases_lost,lastjoin_to_ready_ms,commit_to_ready_ms,kill_one_ready_ms,kill_coord_ready_ms,kill_tenth_ready_ms,kill_rack_ms,kill_rack_ready_ms,kill_rack_claims,ring,ring_suspicions,ring_evictions,ring_false_alarms"
if [[ ! -f $csv ]]; then
  echo "$header" >"$csv"
elif [[ $(head -1 "$csv") != "$header" ]]; then # an older file: the new columns go at the end
  sed -i "1s/.*/$header/" "$csv"
fi
run() { # protocol binary n
  local proto=$1 bin=$2 n=$3 out flags=(--kill-one) c0 c1
  [[ $proto == v2 ]] && flags=(--kill-one --kill-coordinator --kill-rack --kill-tenth)
  [[ $proto == v2 && $ring == 1 ]] && flags+=(--ring "${ring_args[@]}")
  # the last run's closed connections hold loopback ports for 60 s (TIME_WAIT): with the ring a
  # 10,000-node run needs ~20,000 of the ~28,000, so let them drain first (up to 90 s)
  for _ in $(seq 90); do
    (($(ss -Htan state time-wait 2>/dev/null | wc -l) < 1000)) && break
    sleep 1
  done
  etcd_start "$tmp" --quota-backend-bytes 8589934592 || { echo "etcd did not start" >&2; exit 1; }
  c0=$(cpu_of "$etcd_pid")
  if ! out=$("$bin" --endpoints "$endpoint" --nodes "$n" --procs "$procs" --ttl "$ttl" \
               "${flags[@]}" --timeout 600 2>"$tmp/sim.err"); then
    printf '%-8s %-6s failed: %s\n' "$proto" "$n" "$(grep -v '^$' "$tmp/sim.err" | tail -3 | tr '\n' ' ')"
    if ! grep -q '^commit_to_all_seen_ms=' <<<"$out"; then # nothing to show
      echo "$proto,$n,,,,,,,,,,,,,$(grep -c 'lease lost' "$tmp/sim.err" || true)" >>"$csv"
      etcd_stop
      return
    fi
  fi
  c1=$(cpu_of "$etcd_pid")
  etcd_stop
  v() { sed -n "s/^$1=//p" <<<"$out" | awk '{print $1}'; }
  local kill1 kc kt rb rbm ready
  kill1=$(v kill_one_to_all_seen_ms); [[ -n $kill1 ]] || kill1=$(v kill_to_all_seen_ms)
  kc=$(v kill_coordinator_to_all_seen_ms) kt=$(v kill_tenth_to_all_seen_ms)
  rb=$(v kill_one_bytes_per_node_mean) rbm=$(v kill_one_bytes_per_node_max)
  ready=$(v last_join_to_all_ready_ms)
  printf '%-8s %-6s %-8s %-12s %-12s %-10s %-12s %-12s %-9s %-10s %-10s %-10s %-8s  etcd cpu %.1f s; commit -> events at every process %s ms; kill -> every survivor could start: %s / %s / %s ms; rack -> all %s ms, could start %s ms, %s claims of coord; ring: %s suspicions, %s evictions, %s false alarms\n' \
    "$proto" "$n" "$(awk -v m="$(v joined_ms)" 'BEGIN {printf "%.1f", m/1000}')" \
    "$(v last_join_to_all_seen_ms)" "${ready:--}" "$(v commit_to_all_seen_ms)" "${rb:--}/${rbm:--}" \
    "$(v join_bytes_per_node_mean)" "$(v join_keys_written_per_node_mean)" \
    "$(v kill_one_coordinator_keys_written)" "$kill1" "${kc:--}" "${kt:--}" \
    "$(awk -v a="$c0" -v b="$c1" -v h="$hz" 'BEGIN {print (b - a) / h}')" "$(v commit_to_all_events_ms)" \
    "$(v kill_one_to_all_ready_ms)" "$(v kill_coordinator_to_all_ready_ms)" "$(v kill_tenth_to_all_ready_ms)" \
    "$(v kill_rack_to_all_seen_ms)" "$(v kill_rack_to_all_ready_ms)" "$(v kill_rack_claims)" \
    "$(v ring_suspicions)" "$(v ring_evictions)" "$(v ring_false_alarms)"
  echo "$proto,$n,$(v joined_ms),$(v last_join_to_all_seen_ms),$(v commit_to_all_seen_ms),$rb,$rbm,$(v join_bytes_per_node_mean),$(v join_keys_written_per_node_mean),$(v kill_one_coordinator_keys_written),$kill1,$kc,$kt,$(awk -v a="$c0" -v b="$c1" -v h="$hz" 'BEGIN {print (b - a) / h}'),0,$ready,$(v commit_to_all_ready_ms),$(v kill_one_to_all_ready_ms),$(v kill_coordinator_to_all_ready_ms),$(v kill_tenth_to_all_ready_ms),$(v kill_rack_to_all_seen_ms),$(v kill_rack_to_all_ready_ms),$(v kill_rack_claims),$([[ $proto == v2 ]] && echo "$ring" || echo 0),$(v ring_suspicions),$(v ring_evictions),$(v ring_false_alarms)" >>"$csv"
}
for n in "${sizes[@]}"; do
  run v2 "$build/rdzv-sim" "$n"
  if [[ -n $old && $n -le $old_max ]]; then
    run v1 "$old/rdzv-sim" "$n"
  fi
done
