#!/usr/bin/env bash
# The README's first command, ./scripts/demo.sh, on a machine without the test packages (issue
# 19): run by scripts/test.sh on a machine that has them, so it hides them. The demo runs as
# written (its install step, scripts/build.sh, the three agents), only with its build in a
# directory of its own and with every package that `scripts/install-deps.sh --test` adds made
# invisible: pkg-config sees every .pc file but theirs (criterion's), and PATH (a fresh Debian's:
# /usr/local/sbin ... /bin) holds every program but theirs (etcd, clang, valgrind, promtool,
# python3, curl, ...). Fails unless the build said the tests are skipped, built none, and the
# demo ended with exit 0 after its scale-up.
# (mutation checked: `option(EA_TESTS "Build the tests" ON)` back in CMakeLists.txt: the
# configure step fails on criterion: this check fails)
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d /tmp/ea-demo-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

mapfile -t test_pkgs < <(./scripts/install-deps.sh --list-test)
((${#test_pkgs[@]} > 0)) || { echo "check_demo: install-deps.sh --list-test printed nothing" >&2; exit 1; }
declare -A hidden_pc=() hidden_bin=()
for p in "${test_pkgs[@]}"; do
  while IFS= read -r f; do
    case $f in
      */pkgconfig/*.pc) hidden_pc[${f##*/}]=1 ;;
      */bin/?* | */sbin/?*) hidden_bin[${f##*/}]=1 ;;
    esac
  done < <(dpkg -L "$p" 2>/dev/null || true)
done
[[ -n ${hidden_pc[criterion.pc]:-} ]] || {
  echo "check_demo: criterion.pc is not among the test packages' files: nothing would be hidden" >&2
  exit 1
}

# pkg-config: every .pc file of its default search path but the hidden ones (first one wins)
mkdir "$tmp/pc" "$tmp/bin"
IFS=: read -r -a pc_dirs <<<"$(pkg-config --variable pc_path pkg-config)"
declare -A seen=()
links=()
for d in "${pc_dirs[@]}"; do
  for f in "$d"/*.pc; do
    [[ -e $f ]] || continue
    n=${f##*/}
    [[ -z ${hidden_pc[$n]:-} && -z ${seen[$n]:-} ]] || continue
    seen[$n]=1
    links+=("$f")
  done
done
ln -s -t "$tmp/pc" "${links[@]}"
# PATH: every program of a fresh Debian's PATH but the hidden ones
seen=()
links=()
for d in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
  for f in "$d"/*; do
    n=${f##*/}
    [[ -x $f && ! -d $f && -z ${hidden_bin[$n]:-} && -z ${seen[$n]:-} ]] || continue
    seen[$n]=1
    links+=("$f")
  done
done
ln -s -t "$tmp/bin" "${links[@]}"
echo "check_demo: hiding ${#hidden_pc[@]} .pc file(s) and ${#hidden_bin[@]} program(s) of: ${test_pkgs[*]}"

rc=0
env -u PKG_CONFIG_PATH PKG_CONFIG_LIBDIR="$tmp/pc" PATH="$tmp/bin" \
  EA_DEMO_BUILD_DIR="$tmp/build" ./scripts/demo.sh >"$tmp/demo.out" 2>&1 || rc=$?
fail() {
  echo "check_demo: $*" >&2
  echo "---- scripts/demo.sh said:" >&2
  cat "$tmp/demo.out" >&2
  exit 1
}
((rc == 0)) || fail "the demo exited $rc"
grep '^build: tests skipped: criterion not found' "$tmp/demo.out" ||
  fail "the build did not say that the tests are skipped (is criterion still visible?)"
[[ ! -e $tmp/build/tests ]] || fail "tests were configured without criterion"
grep -q 'agent c joins' "$tmp/demo.out" || fail "the third agent never joined"
grep -q "run 'demo' succeeded" "$tmp/demo.out" || fail "the run did not succeed"
echo "check_demo: the demo ran without the test packages (build, 3 agents, exit 0)"
