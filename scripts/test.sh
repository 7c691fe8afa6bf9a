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
# No retry for the chaos suite and the safety assertions (ctest label `safety`: fencing,
# generations, ranks): a failure there on the first try is a real violation. Any other test may
# take a second try; each one that needed it is listed at the end of the run (flakes to chase).
retried=$(mktemp)
summary() {
  echo "== tests that passed only on their second try (flaky: chase them down) =="
  if [[ -s $retried ]]; then cat "$retried"; else echo "none"; fi
  rm -f "$retried"
}
trap summary EXIT
ctest_run() { # DIR ARGS...: ctest; the tests that failed, then passed on a retry, go to $retried
  local out rc=0
  out=$(mktemp)
  ctest --test-dir "$1" --output-on-failure --timeout 300 "${@:2}" | tee "$out" || rc=$?
  awk -v d="$1" 'match($0, /Test +#[0-9]+: [^ ]+/) {
      n = substr($0, RSTART, RLENGTH); sub(/.*: /, "", n)
      if ($0 ~ /\*\*\*/) bad[n] = 1; else if ($0 ~ / Passed / && bad[n]) print d ": " n
    }' "$out" >>"$retried"
  rm -f "$out"
  return "$rc"
}
retry=(--repeat until-pass:2)
echo "== tests under ASan+UBSan =="
ctest_run build-asan -LE 'chaos|safety' "${retry[@]}"
ctest_run build-asan -L 'chaos|safety'
echo "== fuzzing: every target 60 s, all at once =="
./scripts/fuzz.sh 60
echo "== end-to-end tests on the release build =="
ctest_run build -L e2e -LE 'chaos|safety' "${retry[@]}"
ctest_run build -L e2e -L safety
# Mutation checks: each product line below, broken on purpose, must turn its tests red
# (scripts/mutate.sh; a release build in build-mutate/, only the tests' targets).
echo "== mutation checks =="
./scripts/mutate.sh --target test_rdzv_session --target test_e2e_elastic_file \
  --filter '@(session/graceful_leave*|elastic/sigterm_leaves*)' rendezvous/session_ops.c \
  '/^int rdzv_leave(/,/^{/s/^{$/{ return 0; \/* mutant: leave is a no-op *\//' \
  '^(test_rdzv_session|test_e2e_elastic_file)$'
./scripts/mutate.sh --target test_guard --filter 'guard/fence_deadline_passed*' \
  launcher/guard.c 's/|| now < d)/|| 1)/' '^test_guard$'
./scripts/mutate.sh --target test_e2e_observe --filter 'observe/metrics_follow*' \
  agent/agent.c 's/^\(\s*\)a->m.worker_failures++;/\1;/' '^test_e2e_observe$'
./scripts/mutate.sh --target test_e2e_daemon --filter 'daemon/idle_daemon_fills*' \
  agent/daemon/serve.c '/^static void watch_run_state(/,/^{/s/^{$/{ return; \/* mutant: no watch *\//' \
  '^test_e2e_daemon$'
# issue 29: rendezvous values checked against who may write them (rendezvous/roundguard.c)
./scripts/mutate.sh --target test_rdzv_guard --target test_e2e_rdzv_guard \
  --filter '@(guard/forged_master*|e2e_rdzv_guard/forged_master*)' rendezvous/roundguard.c \
  '/^static bool record_lists(/,/^{/s/^{$/{ return true; \/* mutant: any address *\//' \
  '^(test_rdzv_guard|test_e2e_rdzv_guard)$'
./scripts/mutate.sh --target test_rdzv_guard --target test_e2e_rdzv_guard \
  --filter '@(guard/reports_count*|e2e_rdzv_guard/forged_failure*)' rendezvous/roundguard.c \
  's/if (node\[0\] \&\& rdzv_state_find(\&s->state, node) >= 0)/if (node[0])/' \
  '^(test_rdzv_guard|test_e2e_rdzv_guard)$'
./scripts/mutate.sh --target test_rdzv_guard --filter 'guard/master_from_anyone*' \
  rendezvous/roundguard.c 's/^        if (!r)$/        if (0)/' '^test_rdzv_guard$'
./scripts/mutate.sh --target test_rdzv_guard --filter 'guard/keys_of_later*' rendezvous/roundguard.c \
  '/^void rdzv_guard_cleanup(/,/^{/s/^{$/{ return; \/* mutant: no cleanup *\//' '^test_rdzv_guard$'
# issue 29: the built-in tracker admits only the round's members (agent/tracker/)
./scripts/mutate.sh --target test_tracker_admit --filter 'tracker_admit/non_member*' \
  agent/tracker/tracker.c 's/int bucket = tracker_admit_bucket(&t->admit, &ss);/int bucket = 0;/' \
  '^test_tracker_admit$'
./scripts/mutate.sh --target test_tracker_admit --filter 'tracker_admit/second_start*' \
  agent/tracker/tracker.c 's/if (c->hello.cmd == TRACKER_START \&\& e->linked \&\& !e->shut)/if (0)/' \
  '^test_tracker_admit$'
./scripts/mutate.sh --target test_tracker_admit --filter 'tracker_admit/hello_deadline*' \
  agent/tracker/tracker.c \
  's/c->deadline_ms = now + t->hello_timeout_ms;/c->deadline_ms = now + t->io_timeout_ms;/' \
  '^test_tracker_admit$'
./scripts/mutate.sh --target test_tracker_admit --filter 'tracker_admit/per_host_cap*' \
  agent/tracker/tracker_admit.c 's/if (b->open >= TRACKER_CONNS_PER_WORKER \* b->workers)/if (0)/' \
  '^test_tracker_admit$'
