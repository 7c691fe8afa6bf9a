#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) into build-fuzz/ and runs them all at once for
# SECONDS each (default 60), starting from the corpus in tests/fuzz/corpus/<target>/. New inputs go
# to a scratch directory (the repo corpus stays small). On a crash, leak or UB it prints the
# reproducer and exits 1: copy the file into tests/fuzz/corpus/<target>/ (the ctest
# fuzz_replay_<target> then replays it forever) and fix the parser.
# Environment: EA_FUZZ_BUILD, the build directory.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
dir=${EA_FUZZ_BUILD:-build-fuzz}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "fuzz: building $dir (clang, libFuzzer, ASan+UBSan)" >&2
if ! { cmake -S . -B "$dir" -DEA_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang &&
       cmake --build "$dir" -j"$(nproc)" --target fuzz; } >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
targets=()
for f in "$dir"/tests/fuzz_*; do
  t=${f##*/}
  [[ -f $f && -x $f && $t != fuzz_replay_* ]] && targets+=("$t")
done
if ((${#targets[@]} == 0)); then
  echo "fuzz: no targets built in $dir/tests" >&2
  exit 1
fi
out=$(mktemp -d /tmp/ea-fuzz.XXXXXX)
echo "fuzz: ${targets[*]} for ${secs}s each, all at once; scratch $out" >&2
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
pids=()
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  mkdir -p "$out/$name/new"
  "$dir/tests/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 -max_len=8192 \
    -print_final_stats=1 -artifact_prefix="$out/$name/" "$out/$name/new" \
    "tests/fuzz/corpus/$name" >"$out/$name/log" 2>&1 &
  pids+=($!)
done
fail=0
for i in "${!targets[@]}"; do
  name=${targets[$i]#fuzz_}
  if ! wait "${pids[$i]}"; then
    fail=1
    echo "fuzz: $name FOUND A PROBLEM; reproducer(s):" >&2
    ls "$out/$name"/{crash,leak,timeout,oom}-* 2>/dev/null >&2 || true
    grep -E "ERROR|runtime error|invariant broken|SUMMARY" "$out/$name/log" | head -5 >&2 || true
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$name/log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$out/$name/log" | tail -1)
  printf 'fuzz: %-12s %10s executions in %ss, %s\n' "$name" "${execs:-?}" "$secs" "${cov:-cov: ?}"
done
if ((fail)); then
  echo "fuzz: logs and reproducers kept in $out" >&2
  exit 1
fi
rm -rf "$out"
echo "fuzz: no crash, leak, timeout or UB"
