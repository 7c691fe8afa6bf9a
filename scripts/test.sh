#!/usr/bin/env bash
# The README's test command: installs dependencies, builds the release and the sanitizer
# (ASan+UBSan) builds, and runs every test (unit, KV conformance, real etcd, end to end).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --test
./scripts/build.sh build -DEA_TESTS=ON
./scripts/build.sh build-asan -DEA_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DEA_TESTS=ON
echo "== static analysis =="
./scripts/lint.sh
echo "== the demo (README command 1) with the test packages hidden =="
tests/demo/check_demo.sh
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# A test that fails and then passes on its second try is printed in full above its pass: a flake
# to chase down, shown in the log, but not one that loses the whole run. A real break fails both.
retry=(--repeat until-pass:2)
echo "== tests under ASan+UBSan =="
ctest --test-dir build-asan --output-on-failure --timeout 300 "${retry[@]}"
echo "== fuzzing: every target 60 s, all at once =="
./scripts/fuzz.sh 60
echo "== end-to-end tests on the release build =="
ctest --test-dir build --output-on-failure --timeout 300 -L e2e "${retry[@]}"
