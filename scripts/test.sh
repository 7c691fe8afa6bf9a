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
# issue 30: after a re-sync, a chunk watch aimed at the chunk's own (compacted) version: a re-sync
# loop (tests/etcd/test_rdzv_compaction.c catches it on a real etcd too, ~120 requests/s)
./scripts/mutate.sh --target test_rdzv_session --filter 'session/compacted_watch*' \
  rendezvous/session.c \
  's/s->chunk_aim_rev = (e.mod_revision > s->listed_rev ? e.mod_revision : s->listed_rev) + 1;/s->chunk_aim_rev = e.mod_revision + 1;/' \
  '^test_rdzv_session$'
# issue 30: a chunk taken on its round number alone (a waiting rewrite, a dead coordinator's)
./scripts/mutate.sh --target test_rdzv_session --filter 'session/waiting_rewrite*' \
  rendezvous/session.c \
  's/|| rdzv_chunk_commit_cmp(&s->state, gen, e->mod_revision) != 0)/|| (rdzv_chunk_commit_cmp(\&s->state, gen, e->mod_revision) != 0 \&\& 0))/' \
  '^test_rdzv_session$'
./scripts/mutate.sh --target test_rdzv_session --filter 'session/dead_coordinators*' \
  rendezvous/session.c \
  's/|| rdzv_chunk_commit_cmp(&s->state, gen, e->mod_revision) != 0)/|| (rdzv_chunk_commit_cmp(\&s->state, gen, e->mod_revision) != 0 \&\& 0))/' \
  '^test_rdzv_session$'
# issue 30: coordinator succession by rank alone (50 ms x rank for the successors too): a lost
# rack and a slow fan-out make more than 3 claims of `coord`
./scripts/mutate.sh --target test_rdzv_bigfleet --filter 'bigfleet/a_lost_rack*' \
  rendezvous/plan.c 's/        return i \* step;/        return 50 * (group_rank < 8 ? group_rank : 8);/' \
  '^test_rdzv_bigfleet$'
# issue 30: the coordinator's deletes of old rounds' keys not fenced on `state` and `coord`: a
# coordinator that lost its key deletes them anyway; and no cleanup at all: the run's keys and
# what a join reads grow with every round
./scripts/mutate.sh --target test_rdzv_bigfleet --filter 'bigfleet/a_stale_coordinator*' \
  rendezvous/session_gc.c 's/        int r = kv_txn(s->kv, cmps, 2, ops, m, NULL, err);/        int r = kv_txn(s->kv, cmps, 0, ops, m, NULL, err);/' \
  '^test_rdzv_bigfleet$'
./scripts/mutate.sh --target test_rdzv_bigfleet --filter 'bigfleet/old_rounds*' \
  rendezvous/session.c 's/    if (r == 0 \&\& (r = rdzv_gc_old_rounds(s, now_ms, err)) > 0)/    if (r == 0 \&\& (r = 0) > 0)/' \
  '^test_rdzv_bigfleet$'
# issue 30: a new coordinator's listing taken as its first sight of the commit: the loss window
# runs again in full at every takeover
./scripts/mutate.sh --target test_rdzv_bigfleet --filter 'bigfleet/a_new_coordinator*' \
  rendezvous/session.c 's|s->state_rev = -1; /\* decode again \*/|s->state_rev = s->state_seen_rev = -1; /* decode again */|' \
  '^test_rdzv_bigfleet$'
