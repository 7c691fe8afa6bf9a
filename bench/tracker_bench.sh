#!/usr/bin/env bash
# The built-in rabit tracker (issue 20) against XGBoost's own Python RabitTracker
# (xgboost.tracker, Debian's python3-xgboost 1.7), in the same run, alternating: each tracker is
# started, and once it listens (its port is known: "tracker up") WORKERS simulated rabit workers
# (bench/rabit_bench.c; XGBoost 1.7's side of the protocol) connect at once; the time until every
# worker has its rank and all its links. Prints median, p90, min and max per tracker. Then the
# same with REAL_RUNS runs of WORKERS real XGBoost processes (python3, xgboost imported before the
# tracker starts): from tracker up until the last one's collective.init() returned.
# Usage: bench/tracker_bench.sh [RUNS] [REAL_RUNS]   (default 20, 5); env WORKERS (8), BUILD (build)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20}
real_runs=${2:-5}
workers=${WORKERS:-8}
build=${BUILD:-build}
for b in tracker-serve rabit-bench; do
  [[ -x $build/$b ]] || { echo "tracker_bench: build $build/$b first (scripts/build.sh)" >&2; exit 2; }
done
/usr/bin/python3 -c 'import xgboost.tracker' ||
  { echo "tracker_bench: needs python3-xgboost" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# run_one NAME CMD...: start the tracker, read its port, run the workers, wait for it to exit
run_one() {
  local name=$1 port
  shift
  coproc TRK { exec "$@"; }
  local pid=$TRK_PID
  read -r port <&"${TRK[0]}"
  "$build/rabit-bench" 127.0.0.1 "$port" "$workers" >>"$out/$name"
  wait "$pid"
}
py_tracker="from xgboost.tracker import RabitTracker
t = RabitTracker(host_ip='127.0.0.1', n_workers=$workers)
t.start($workers)
print(t.port, flush=True)
t.join()"
# run_real NAME CMD...: WORKERS real XGBoost workers start and import xgboost; once all are ready
# the tracker starts, and as soon as its port is known (tracker up) each worker gets it and calls
# collective.init(): ms from tracker up to the last init() returned
py_worker="import os, sys, time, xgboost.collective as c
open(sys.argv[1] + '.ready', 'w').close()
with open(sys.argv[1]) as f:
    os.environ['DMLC_TRACKER_PORT'] = f.readline().strip()
c.init()
print(time.time(), flush=True)
c.finalize()"
run_real() {
  local name=$1 port
  shift
  local wpids=()
  rm -f "$out"/w*
  for ((w = 0; w < workers; w++)); do
    mkfifo "$out/w$w.fifo"
    DMLC_TRACKER_URI=127.0.0.1 DMLC_TASK_ID=$w \
      /usr/bin/python3 -c "$py_worker" "$out/w$w.fifo" >"$out/w$w.time" &
    wpids+=($!)
  done
  while (($(ls "$out"/w*.ready 2>/dev/null | wc -l) < workers)); do sleep 0.05; done
  coproc TRK { exec "$@"; }
  local pid=$TRK_PID
  read -r port <&"${TRK[0]}"
  local up
  up=$(date +%s.%N)
  for ((w = 0; w < workers; w++)); do echo "$port" >"$out/w$w.fifo"; done
  for p in "${wpids[@]}"; do wait "$p"; done
  wait "$pid"
  cat "$out"/w*.time | sort -n | tail -1 | awk -v up="$up" '{ printf "%.1f\n", ($1 - up) * 1000 }' \
    >>"$out/real-$name"
}
for ((i = 0; i < runs; i++)); do
  run_one ours "$build/tracker-serve" "$workers"
  run_one python /usr/bin/python3 -c "$py_tracker"
done
for ((i = 0; i < real_runs; i++)); do
  run_real ours "$build/tracker-serve" "$workers"
  run_real python /usr/bin/python3 -c "$py_tracker"
done
stats() {
  sort -n "$out/$1" | awk '{v[NR] = $1} END {
    i = int((NR + 1) / 2); j = int(NR * 0.9 + 0.999); if (j > NR) j = NR
    printf "%.2f %.2f %.2f %.2f %d\n", v[i], v[j], v[1], v[NR], NR }'
}
read -r o_med o_p90 o_min o_max o_n <<<"$(stats ours)"
read -r p_med p_p90 p_min p_max p_n <<<"$(stats python)"
echo "# $(date -u +%F) $(nproc) cores; $runs runs each, alternating; $workers workers; tracker up -> every worker has its rank and links"
printf '| tracker | median | p90 | min | max | runs |\n|---|---|---|---|---|---|\n'
printf '| elastic-agent built-in (C, poll loop) | %s ms | %s ms | %s ms | %s ms | %s |\n' \
  "$o_med" "$o_p90" "$o_min" "$o_max" "$o_n"
printf '| XGBoost 1.7 RabitTracker (Python thread) | %s ms | %s ms | %s ms | %s ms | %s |\n' \
  "$p_med" "$p_p90" "$p_min" "$p_max" "$p_n"
awk -v o="$o_med" -v p="$p_med" 'BEGIN { printf "median ratio: %.1fx\n", p / o }'
if ((real_runs > 0)); then
  read -r o_med o_p90 o_min o_max o_n <<<"$(stats real-ours)"
  read -r p_med p_p90 p_min p_max p_n <<<"$(stats real-python)"
  echo
  echo "# $real_runs runs, $workers real XGBoost workers (imported before): tracker up -> the last collective.init() returned"
  printf '| tracker | median | p90 | min | max | runs |\n|---|---|---|---|---|---|\n'
  printf '| elastic-agent built-in | %s ms | %s ms | %s ms | %s ms | %s |\n' \
    "$o_med" "$o_p90" "$o_min" "$o_max" "$o_n"
  printf '| XGBoost 1.7 RabitTracker | %s ms | %s ms | %s ms | %s ms | %s |\n' \
    "$p_med" "$p_p90" "$p_min" "$p_max" "$p_n"
fi
