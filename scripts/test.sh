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
# The liveness ring (issue 31): its revoke, its tight fence, its confirming probe, its cooldown,
# and the checks on what reaches its port or the store.
./scripts/mutate.sh --target test_e2e_liveness --filter 'liveness/sigkill*' rendezvous/suspect.c \
  's/    int r = kv_lease_revoke(s->kv, c->peer.lease, err);/    int r = 0; \/* mutant: no revoke *\//' \
  '^test_e2e_liveness$'
./scripts/mutate.sh --target test_e2e_liveness --filter 'liveness/sigstop*' agent/liveness/live.c \
  's/        f = now + l->fence_ms;/        f = l->lease_until; \/* mutant: no tight fence *\//' \
  '^test_e2e_liveness$'
./scripts/mutate.sh --target test_e2e_liveness --filter 'liveness/a_forged*' agent/agent_liveness.c \
  's/if (x->alive) { \/\* the suspect answered/if (0) { \/* mutant: probe ignored/' '^test_e2e_liveness$'
./scripts/mutate.sh --target test_e2e_liveness --filter 'liveness/evicted_again*' --timeout 200 \
  agent/agent_liveness.c 's/return !a->ring || now >= a->ring->cooldown_until_ms;/return true;/' \
  '^test_e2e_liveness$'
./scripts/mutate.sh --target test_rdzv_suspect --filter 'suspect/a_revoke_never*' rendezvous/suspect.c \
  's/ || s->m.keys\[i\].lease != c->peer.lease ||/ ||/' '^test_rdzv_suspect$'
./scripts/mutate.sh --target test_liveness_ring --filter 'ring/hellos_are_checked*' \
  agent/liveness/ring.c 's/if (strcmp(h->run, r->run) != 0)/if (0)/' '^test_liveness_ring$'
./scripts/mutate.sh --target test_liveness_ring --filter 'ring/hellos_are_checked*' \
  agent/liveness/ring.c 's/return r->prev\[0\] && strcmp(h->from, r->prev) == 0 ? RING_OK : RING_NOT_PEER;/return RING_OK;/' \
  '^test_liveness_ring$'
./scripts/mutate.sh --target test_liveness_ring --filter 'ring/garbage_and_silence*' \
  agent/liveness/ring.c 's/if (p->fd >= 0 \&\& now >= p->deadline)/if (0)/' '^test_liveness_ring$'
./scripts/mutate.sh --target test_liveness_ring --filter 'ring/a_flood*' agent/liveness/ring.c \
  's/        if (!slot) { \/\* full: whoever waited longest/        if (!slot) { close(fd); continue; \/* mutant/' \
  '^test_liveness_ring$'
./scripts/mutate.sh --target test_liveness_ring --filter 'ring_proto/hello_round_trips*' \
  agent/liveness/ring_proto.c 's/ || lr > RING_NAME_MAX || lf > RING_NAME_MAX || lt > RING_NAME_MAX)/)/' \
  '^test_liveness_ring$'
./scripts/mutate.sh --target test_e2e_liveness_netns --filter 'liveness_netns/*' agent/agent_liveness.c \
  's/if (rdzv_coord_confirmer(n, cx.coord_rank, cx.by_rank) < 0) {/if (1) { \/* mutant: the watcher alone *\//' \
  '^test_e2e_liveness_netns$'
./scripts/mutate.sh --target test_e2e_liveness_netns --filter 'liveness_netns/a_cut_off_coordinator*' \
  agent/agent_liveness.c \
  's/if (rdzv_is_coordinator(a->rdzv) \&\& s \&\& s->group_world_size >= 3) {/if (!s) {/;s/if (strcmp(list\[i\].sus.by, a->cfg->node_id) == 0 \&\& s->group_world_size >= 3)/if (0)/' \
  '^test_e2e_liveness_netns$'
./scripts/mutate.sh --target test_liveness_ring --filter 'ring/a_predecessor_that_never*' \
  agent/liveness/ring.c 's/        now >= r->in_deadline) {/        0) {/' '^test_liveness_ring$'
./scripts/mutate.sh --target test_nic_e2e --filter 'nic/host_order_restart*' agent/agent_liveness.c \
  's/    return !p->ns\[0\] || strcmp(p->ns, g->ns) == 0;/    return true;/' '^test_nic_e2e$'
