# --straggler-action evict (issue 40, docs/restarts.md): the decision (a spare waits) and the
# cooldown as pure functions, and who may write rounds/<r>/evict (rendezvous/evict.c), on
# synthetic values and on sessions sharing the file backend (tests/unit/test_straggler_evict.c:
# no clock, no etcd).
# evicted without a spare waiting (the run would shrink)
mutant --target test_straggler_evict --filter 'evict_decide/only_with_a_spare*' \
  agent/straggler/straggler.c 's/^    if (live <= members) \/\* no node waits/    if (live < members) \/* no node waits/' \
  '^test_straggler_evict$'
# the cooldown one ms short
mutant --target test_straggler_evict --filter 'evict_decide/cooldown*' \
  agent/straggler/straggler.c 's/^    return h->until != 0 \&\& now < h->until;$/    return h->until != 0 \&\& now + 1 < h->until;/' \
  '^test_straggler_evict$'
# an eviction naming the coordinator as its writer taken from anyone
mutant --target test_straggler_evict --filter 'evict_check/another_writer*' \
  rendezvous/evict.c 's/^    if (r == 0 \&\& (!coord_id || !coord_id\[0\] || strcmp(by, coord_id) != 0))$/    if (r == 0 \&\& (!coord_id || !coord_id[0]))/' \
  '^test_straggler_evict$'
# ... or on any lease
mutant --target test_straggler_evict --filter 'evict_check/another_writer*' \
  rendezvous/evict.c 's/^    if (r == 0 \&\& (coord_lease == 0 || key_lease != coord_lease))$/    if (r == 0 \&\& coord_lease == 0)/' \
  '^test_straggler_evict$'
# the lease check on a real session: a member's planted key acted on by every node
mutant --target test_straggler_evict --filter 'evict_key/a_planted*' \
  rendezvous/evict.c 's/^    if (r == 0 \&\& (coord_lease == 0 || key_lease != coord_lease))$/    if (r == 0 \&\& coord_lease == 0)/' \
  '^test_straggler_evict$'
# a member or a spare may write it
mutant --target test_straggler_evict --filter 'evict_key/only_the_coordinator*' \
  rendezvous/evict.c 's/^    if (!s->is_coord || !s->have_state || s->state.round != round || !s->lease)$/    if (!s->have_state || s->state.round != round || !s->lease)/' \
  '^test_straggler_evict$'
# a planted value blocks the coordinator's (create-only, not overwritten)
mutant --target test_straggler_evict --filter 'evict_key/a_planted*' \
  rendezvous/evict.c 's/^        expected = e->mod_revision; \/\* planted: overwritten \*\/$/        expected = 0;/' \
  '^test_straggler_evict$'
# End to end on a real etcd (tests/e2e/test_e2e_progress.c): the evicted node not held out (it
# rejoins at once, before --straggler-cooldown) ...
mutant --target test_e2e_progress --filter 'e2e_progress/a_straggler_is_evicted*' \
  agent/health/preflight_agent.c 's/^    bool held = a->health.out_until > now;$/    bool held = false;/' \
  '^test_e2e_progress$'
# ... and every member leaving on an eviction that names another node
mutant --target test_e2e_progress --filter 'e2e_progress/a_straggler_is_evicted*' \
  agent/progress/progress_agent.c 's/^    if (rdzv_straggler_evicted(a->node.rdzv, s->round, node) < 0 || strcmp(node, c->node_id) != 0)$/    if (rdzv_straggler_evicted(a->node.rdzv, s->round, node) < 0)/' \
  '^test_e2e_progress$'
