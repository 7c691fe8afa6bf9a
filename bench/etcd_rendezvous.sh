#!/usr/bin/env bash
# Cold rendezvous against one local etcd (issue #4): start etcd on free loopback ports with a temp
# data dir, then REPS times launch N agents at once (--min N --max N, one worker each, a new
# --run-id per repetition) and measure
#   - launch -> last worker started (each worker writes its start time, then blocks on a FIFO),
#   - etcd requests per agent per rendezvous, from etcd's /metrics
#     (grpc_server_msg_received_total by method: unary calls + messages sent on the Watch and
#     LeaseKeepAlive streams), read before the launch, once every worker has started (the
#     rendezvous) and after every agent has exited (the whole run: done keys, leave, revoke),
#   - the agents' peak RSS: VmHWM from /proc/<pid>/status while the workers run, and GNU time's
#     maximum resident set size at exit when /usr/bin/time is installed (package `time`).
# Prints one line per repetition and the medians; etcd is stopped and the temp dir removed after.
# Usage: bench/etcd_rendezvous.sh [N=8] [REPS=7]     (BIN=path/to/elastic-agent to override)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-8}
reps=${2:-7}
bin=${BIN:-build/elastic-agent}
[[ -x $bin ]] || ./scripts/build.sh build
for tool in etcd curl; do
  command -v "$tool" >/dev/null || { echo "etcd_rendezvous: needs $tool" >&2; exit 2; }
done
gnutime=/usr/bin/time
[[ -x $gnutime ]] && $gnutime -f %M true 2>/dev/null >/dev/null || gnutime=

tmp=$(mktemp -d)
etcd_pid=
cleanup() {
  [[ -n $etcd_pid ]] && kill -9 "$etcd_pid" 2>/dev/null && wait "$etcd_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# --- etcd on free loopback ports ---------------------------------------------------------------
# shellcheck source=bench/lib/etcd.sh
source bench/lib/etcd.sh
etcd_start "$tmp" || { echo "etcd_rendezvous: etcd did not start" >&2; tail "$tmp/etcd.log" >&2; exit 1; }
echo "etcd $(etcd --version | head -1 | awk '{print $3}') on $endpoint (pid $etcd_pid); $n agents x 1 worker; $reps runs; $bin"

snap() { curl -sf "http://127.0.0.1:$mport/metrics" | grep -E '^grpc_server_(msg_received|started)_total\{' >"$1"; }
# received messages per method between two snapshots: "Method=count ... total=count"
requests() {
  awk '
    FNR == NR { if ($1 ~ /^grpc_server_msg_received_total/) before[$1] = $2; next }
    $1 ~ /^grpc_server_msg_received_total/ {
      d = $2 - before[$1]; if (d == 0) next
      m = $1; sub(/.*grpc_method="/, "", m); sub(/".*/, "", m)
      per[m] += d; total += d
    }
    END { for (m in per) printf "%s=%d ", m, per[m]; printf "total=%d\n", total }' "$1" "$2"
}
div() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", a / b}'; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
hwm() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

times=() rdzv_req=() run_req=() hwms=() gnurss=()
for rep in $(seq "$reps"); do
  d=$tmp/r$rep
  mkdir -p "$d/t"
  mkfifo "$d/go"
  snap "$d/m0"
  worker="date +%s%N > $d/t/\$RANK.tmp && mv $d/t/\$RANK.tmp $d/t/\$RANK && exec cat $d/go > /dev/null"
  pids=()
  t0=$(date +%s%N)
  for i in $(seq 0 $((n - 1))); do
    if [[ -n $gnutime ]]; then
      $gnutime -f %M -o "$d/rss.$i" \
        "$bin" --rdzv-endpoint "$endpoint" --run-id "bench$rep" --node-id "n$i" --min "$n" --max "$n" \
        --local-addr 127.0.0.1 -- sh -c "$worker" 2>>"$d/agents.log" &
    else
      "$bin" --rdzv-endpoint "$endpoint" --run-id "bench$rep" --node-id "n$i" --min "$n" --max "$n" \
        --local-addr 127.0.0.1 -- sh -c "$worker" 2>>"$d/agents.log" &
    fi
    pids+=($!)
  done
  # the measurement is the workers' own timestamps; this wait only decides when to read metrics
  for _ in $(seq 600); do
    [[ $(find "$d/t" -name '[0-9]*' ! -name '*.tmp' | wc -l) -ge $n ]] && break
    sleep 0.05
  done
  started=$(find "$d/t" -name '[0-9]*' ! -name '*.tmp' | wc -l)
  snap "$d/m1"
  peak=0
  for p in "${pids[@]}"; do
    agent=$p
    [[ -n $gnutime ]] && agent=$(pgrep -P "$p" | head -1)
    h=$(hwm "$agent"); ((h > peak)) && peak=$h
  done
  exec 3>"$d/go"; exec 3>&- # release the workers (every `cat` sees EOF)
  rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  snap "$d/m2"
  if ((started < n || rc != 0)); then
    echo "run $rep: $started/$n workers started, an agent exited $rc" >&2
    tail -20 "$d/agents.log" >&2
    exit 1
  fi
  last=$(cat "$d"/t/[0-9]* | sort -n | tail -1)
  ms=$(((last - t0) / 1000000))
  r1=$(requests "$d/m0" "$d/m1")
  r2=$(requests "$d/m0" "$d/m2")
  t1=${r1##*total=} t2=${r2##*total=}
  g=0
  if [[ -n $gnutime ]]; then g=$(cat "$d"/rss.* | sort -n | tail -1); fi
  printf 'run %d: launch -> last worker start %4d ms; etcd requests, rendezvous: %s (%s/agent); whole run: %s (%s/agent); agent VmHWM max %d KiB%s\n' \
    "$rep" "$ms" "$r1" "$(div "$t1" "$n")" "$r2" "$(div "$t2" "$n")" "$peak" \
    "$([[ -n $gnutime ]] && echo "; GNU time max RSS $g KiB")"
  times+=("$ms") rdzv_req+=("$t1") run_req+=("$t2") hwms+=("$peak") gnurss+=("$g")
done

m_time=$(printf '%s\n' "${times[@]}" | median)
m_r1=$(printf '%s\n' "${rdzv_req[@]}" | median)
m_r2=$(printf '%s\n' "${run_req[@]}" | median)
max_hwm=$(printf '%s\n' "${hwms[@]}" | sort -n | tail -1)
max_gnu=$(printf '%s\n' "${gnurss[@]}" | sort -n | tail -1)
echo "median over $reps runs: launch -> last worker start ${m_time} ms;" \
  "etcd requests per agent: rendezvous $(div "$m_r1" "$n")," \
  "whole run $(div "$m_r2" "$n");" \
  "agent peak RSS: VmHWM ${max_hwm} KiB$([[ -n $gnutime ]] && echo ", GNU time ${max_gnu} KiB") (max over all agents and runs)"
