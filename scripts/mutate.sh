#!/usr/bin/env bash
# Mutation check: proves that tests can catch the break they are named for. Copies the tree to a
# scratch dir, applies ONE sed change to FILE there (an error if it changed nothing, so a moved
# line is noticed, not silently "killed"), builds it (release) and runs the ctest tests matching
# TEST-REGEX, each on its own. Exits 0 only if every one of them FAILS on the mutant; 1 if one
# passes (the mutation survived: that test cannot catch it); 2 on a usage, sed or build error.
#
#   scripts/mutate.sh [--target T]... [--filter PATTERN] [--timeout SEC] FILE 'SED-EXPR' TEST-REGEX
#
# --target   build only these targets (default: all): a criterion test's target brings
#            elastic-agent and the helpers along; a script test (bad_input) names them
# A failure is counted as a kill whatever its cause: run the same tests unmutated first (as
# scripts/test.sh does) so that a test broken for another reason is seen there.
# --filter   criterion test pattern (CRITERION_TEST_PATTERN), e.g. 'session/graceful_leave*'
# --timeout  per test, seconds (default 120)
# The scratch copy and its build persist in $EA_MUTATE_DIR (default build-mutate/ here): only
# files whose content differs are copied (with a fresh mtime), so a mutant rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=() filter="" per_test=120
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --target) targets+=("$2"); shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    --timeout) per_test=$2; shift 2 ;;
    *) echo "mutate: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $# -eq 3 ]] || { sed -n '2,17p' "$0" >&2; exit 2; }
file=$1 expr=$2 regex=$3
[[ -f $file ]] || { echo "mutate: no file '$file'" >&2; exit 2; }
work=${EA_MUTATE_DIR:-$PWD/build-mutate}
src=$work/src bld=$work/build
mkdir -p "$src"
exec 9>"$work/lock"
flock 9 # one mutant at a time in this scratch dir

# sync the tree (tracked and untracked, not ignored) by content
while IFS= read -r -d '' f; do
  [[ -f $f ]] || continue
  if ! cmp -s "$f" "$src/$f"; then
    mkdir -p "$src/$(dirname "$f")"
    cp "$f" "$src/$f"
  fi
done < <(git ls-files -z -co --exclude-standard)

restore() { cp "$file" "$src/$file"; } # a fresh mtime: the next build recompiles the original
trap restore EXIT
sed -e "$expr" "$file" >"$src/$file"
if cmp -s "$file" "$src/$file"; then
  echo "mutate: '$expr' changed nothing in $file (has the line moved? update the expression)" >&2
  exit 2
fi
echo "mutate: $file: $(diff "$file" "$src/$file" | grep '^>' | head -3 | tr -s ' ' | tr '\n' ' ')"

log=$work/build.log
build=(cmake --build "$bld" -j"$(nproc)")
for t in "${targets[@]}"; do build+=(--target "$t"); done
# configured every time (quick once cached): a test target added since the last run must exist
if ! cmake -S "$src" -B "$bld" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$log" 2>&1 || ! "${build[@]}" >>"$log" 2>&1; then
  echo "mutate: the mutant does not build (a mutation must compile):" >&2
  tail -n 30 "$log" >&2
  exit 2
fi

mapfile -t tests < <(ctest --test-dir "$bld" -N -R "$regex" | sed -n 's/^ *Test *#[0-9]*: //p')
[[ ${#tests[@]} -gt 0 ]] || { echo "mutate: no test matches '$regex'" >&2; exit 2; }
[[ -z $filter ]] || export CRITERION_TEST_PATTERN=$filter
survived=0
for t in "${tests[@]}"; do
  start=$SECONDS
  if ctest --test-dir "$bld" -R "^${t}\$" --timeout "$per_test" --output-on-failure >"$work/$t.log" 2>&1; then
    echo "mutate: SURVIVED: $t passes with the mutation (log: $work/$t.log)" >&2
    survived=1
  else
    echo "mutate: killed by $t ($((SECONDS - start)) s)"
  fi
done
exit "$survived"
