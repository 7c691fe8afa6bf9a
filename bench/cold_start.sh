#!/usr/bin/env bash
# Cold rendezvous on one host (file backend): launch N agents at once (--min N --max N, so the
# round commits as soon as the last one arrives) and measure launch -> last worker started, over
# several repetitions. Prints one line per repetition and the median.
# Usage: bench/cold_start.sh [N=8] [REPS=5] [NPROC=1]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-8}
reps=${2:-5}
nproc=${3:-1}
bin=${BIN:-build/elastic-agent}
[[ -x $bin ]] || ./scripts/build.sh build
results=()
for rep in $(seq "$reps"); do
  tmp=$(mktemp -d)
  mkdir "$tmp/t"
  t0=$(date +%s%N)
  pids=()
  for i in $(seq "$n"); do
    $bin --run-id bench --state-dir "$tmp/state" --node-id "n$i" --min "$n" --max "$n" \
      --nproc-per-node "$nproc" -- sh -c 'date +%s%N > '"$tmp"'/t/$RANK' 2>>"$tmp/log" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  last=$(cat "$tmp"/t/* | sort -n | tail -1)
  count=$(ls "$tmp/t" | wc -l)
  ms=$(( (last - t0) / 1000000 ))
  echo "rep $rep: $count workers, launch -> last worker start: ${ms} ms"
  results+=("$ms")
  rm -rf "$tmp"
done
printf '%s\n' "${results[@]}" | sort -n | awk '{a[NR]=$1} END {print "median: " a[int((NR+1)/2)] " ms over " NR " runs"}'
