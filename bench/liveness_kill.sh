#!/usr/bin/env bash
# A dead node with and without the liveness ring (issue 31): 4 agents (real processes, one worker
# each) on one local etcd at --lease-ttl 10; SIGKILL one agent (not the coordinator) and its
# worker; measure kill -> every survivor's worker of the next round started (each worker writes
# its start time; the figure is the latest of the three new ones minus the kill's time). REPS
# runs with --liveness on and REPS with --liveness off, alternating, in one etcd; prints each run,
# the medians and their ratio. Usage: bench/liveness_kill.sh [REPS=3]  (BIN=path/to/elastic-agent)
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
bin=${BIN:-build/elastic-agent}
[[ -x $bin ]] || ./scripts/build.sh build
for tool in etcd curl; do
  command -v "$tool" >/dev/null || { echo "liveness_kill: needs $tool" >&2; exit 2; }
done
n=4
tmp=$(mktemp -d)
etcd_pid=
agents=()
cleanup() {
  for p in "${agents[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  if [[ -n $etcd_pid ]]; then kill -9 "$etcd_pid" 2>/dev/null; wait "$etcd_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
# shellcheck source=bench/lib/etcd.sh
source bench/lib/etcd.sh
etcd_start "$tmp" || { echo "liveness_kill: etcd did not start" >&2; tail "$tmp/etcd.log" >&2; exit 1; }
echo "etcd $(etcd --version | head -1 | awk '{print $3}') on $endpoint; $n agents x 1 worker," \
  "--lease-ttl 10; $reps runs per mode; $bin ($(git rev-parse --short HEAD 2>/dev/null || echo ?))"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
count() { find "$1" -name "$2" ! -name '*.tmp' | wc -l; }
# wait_for CMD...: poll (50 ms) until CMD succeeds, at most 60 s; the figures come from the
# workers' own timestamps, so the polling only decides when to look
wait_for() {
  for _ in $(seq 1200); do "$@" && return 0; sleep 0.05; done
  return 1
}
have() { [[ $(count "$1" "$2") -ge $3 ]]; }

run_once() { # MODE REP: prints the milliseconds
  local mode=$1 rep=$2 d=$tmp/$1.$2 i
  mkdir -p "$d/t"
  mkfifo "$d/go"
  local worker="echo \$\$ > $d/pid.\$ELASTIC_NODE_ID; date +%s%N > $d/t/\$ELASTIC_ROUND.\$RANK.tmp && \
mv $d/t/\$ELASTIC_ROUND.\$RANK.tmp $d/t/\$ELASTIC_ROUND.\$RANK && exec cat $d/go > /dev/null"
  agents=()
  for i in $(seq 0 $((n - 1))); do
    "$bin" --rdzv-endpoint "$endpoint" --run-id "lk-$mode-$rep" --node-id "n$i" --min 2 --max $n \
      --settle 1 --stop-timeout 2 --lease-ttl 10 --liveness "$mode" --local-addr 127.0.0.1 \
      -- sh -c "$worker" 2>"$d/n$i.log" &
    agents+=($!)
    # n0 alone first: it holds the coordinator's key, and n3 (killed below) does not
    ((i == 0)) && wait_for grep -q "joined run" "$d/n0.log"
  done
  wait_for have "$d/t" '1.*' $n || { echo "$mode run $rep: round 1 did not start" >&2; tail "$d"/n*.log >&2; exit 1; }
  local victim wpid t0 last
  victim=${agents[3]} wpid=$(cat "$d/pid.n3")
  t0=$(date +%s%N)
  kill -9 "$victim" "$wpid" 2>/dev/null || true # its worker may be gone with it already
  wait_for have "$d/t" '2.*' $((n - 1)) || { echo "$mode run $rep: no round 2 within 60 s" >&2; tail "$d"/n*.log >&2; exit 1; }
  last=$(cat "$d"/t/2.* | sort -n | tail -1)
  exec 3<>"$d/go"; exec 3>&- # release the workers: every `cat` sees EOF
  for i in 0 1 2; do wait "${agents[$i]}" || true; done
  wait "$victim" 2>/dev/null || true
  agents=()
  echo $(((last - t0) / 1000000))
}

on=() off=()
for rep in $(seq "$reps"); do
  for mode in on off; do
    ms=$(run_once "$mode" "$rep")
    printf 'run %d, --liveness %-3s: SIGKILL -> every survivor'"'"'s next-round worker started: %6d ms\n' \
      "$rep" "$mode" "$ms"
    if [[ $mode == on ]]; then on+=("$ms"); else off+=("$ms"); fi
  done
done
m_on=$(printf '%s\n' "${on[@]}" | median)
m_off=$(printf '%s\n' "${off[@]}" | median)
echo "median over $reps runs: --liveness on ${m_on} ms, --liveness off ${m_off} ms;" \
  "off/on $(awk -v a="$m_off" -v b="$m_on" 'BEGIN {printf "%.0f", a / (b > 0 ? b : 1)}')x"
