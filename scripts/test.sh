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
./scripts/mutate.sh --target test_rdzv_session --filter 'session/stale_coordinator_cannot_commit' \
  rendezvous/session_coord.c 's/kv_txn(s->kv, cmps, 2,/kv_txn(s->kv, cmps, 1,/' \
  '^test_rdzv_session$'
./scripts/mutate.sh --target test_rdzv_session \
  --filter 'session/rejoined_node_does_not_take_its_dead_incarnations_place' \
  rendezvous/session.c 's/ \&\& m\[i\]\.slot == s->slot)/)/' '^test_rdzv_session$'
./scripts/mutate.sh --target test_tracker \
  --filter 'tracker/avoided_port_is_refused_when_the_kernel_offers_it' agent/tracker/tracker.c \
  's/if (port == p->avoid_port \&\& attempt < 3)/if (0 \&\& attempt < 3)/' '^test_tracker_safety$'
./scripts/mutate.sh --target test_e2e_daemon --filter 'daemon/fifo_two_runs_on_three_nodes' \
  agent/daemon/pool.c 's/group_world_size >= max_nodes/group_world_size > max_nodes/' \
  '^test_e2e_daemon_safety$'
./scripts/mutate.sh --target test_e2e_daemon \
  --filter 'daemon/failed_run_exits_1_leaves_the_queue_and_spends_its_id' agent/daemon/pool.c \
  '/"failed") == 0)/{n;s/return 1;/return 0;/}' '^test_e2e_daemon$'
./scripts/mutate.sh --target test_e2e_daemon \
  --filter 'daemon/failed_run_exits_1_leaves_the_queue_and_spends_its_id' agent/daemon/pool.c \
  's/kv_txn(p->kv, cmps, 2, \&op, 1, NULL, err)/kv_txn(p->kv, cmps, 1, \&op, 1, NULL, err)/' \
  '^test_e2e_daemon$'
./scripts/mutate.sh --target test_rdzv_session \
  --filter 'session/rejoined_full_view_node_does_not_take_its_dead_incarnations_place' \
  rendezvous/session.c 's/s->state.members\[i\].slot == s->slot) {/1) {/' \
  '^test_rdzv_session$'
# warm spares (issue 32): the generation check on an assignment (the agent's, the C helper's, the
# Python helper's), the bound on a worker's line, the ready line's parse and its deadline
./scripts/mutate.sh --target test_warm --filter 'warm/assignment_of_a_generation_not_newer*' \
  agent/warm/warm.c \
  's/if (t->generation <= s->floor_gen || t->generation <= w->last_gen\[local_rank\]) {/if (0) {/' \
  '^test_warm$'
./scripts/mutate.sh --target test_warm --filter 'warm_proto/c_helper_refuses_a_generation*' \
  include/elastic_agent_assign.h 's/    if (gen <= last) {/    if (0) {/' '^test_warm$'
./scripts/mutate.sh --target ea-testworker python/elastic_agent/assign.py \
  's/    if gen <= last:  # the generation check/    if False:/' '^test_python_elastic_agent$'
./scripts/mutate.sh --target test_warm --filter 'warm/line_past_the_bound_is_a_fault' \
  agent/warm/warm.c 's/if (s->len < sizeof(s->line))/if (1)/' '^test_warm$'
./scripts/mutate.sh --target test_e2e_warm --filter 'warm/malformed_line*' agent/warm/warm.c \
  's/if (warm_parse_ready(s->line, len, \&pid, \&perr) < 0) {/if (warm_parse_ready(s->line, len, \&pid, \&perr) < 0 \&\& 0) {/' \
  '^test_e2e_warm$'
./scripts/mutate.sh --target test_warm --filter 'warm/spare_without_a_ready_line*' \
  agent/warm/warm.c 's/|| now < s->deadline_ms)/|| 1)/' '^test_warm$'
