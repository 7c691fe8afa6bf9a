# shellcheck shell=bash
# issue 37 step 3: the node unit's decisions (agent/node/), each decided by test_node on the
# memory store with a fake clock and a fake ring transport (no real time: the verdict does not
# depend on the machine's load). Were the agent's e2e checks on agent/agent_liveness.c.
# A probe the suspect answered clears it (no eviction); the coordinator's probe that failed evicts.
mutant --target test_node --filter 'node/a_suspicion_whose_probe*' agent/node/node_confirm.c \
  's/        if (k->sres == PR_ALIVE) { \/\* the suspect answered/        if (0) { \/* mutant: probe ignored/' \
  '^test_node$'
mutant --target test_node --filter 'node/a_suspicion_confirmed*' agent/node/node_confirm.c \
  's/    if (rdzv_evict_each(n->rdzv, cs, m, rs, \&err) < 0)/    if (1) \/* mutant: no evict *\//' \
  '^test_node$'
# A probe that could not leave this node is no evidence: the key stays, nobody is evicted.
mutant --target test_node --filter 'node/a_probe_that_could_not*' agent/node/node_confirm.c \
  's/        if (k->sres == PR_LOCAL) { \/\* the key stays/        if (0) { \/* mutant/' '^test_node$'
# A suspicion of the coordinator needs a third member's probe, and the coordinator never confirms
# a suspicion on its own word alone (a node cut off would evict everybody).
mutant --target test_node --filter 'node/a_suspicion_of_the_coordinator*' agent/node/node_ring.c \
  's/    if (rdzv_coord_confirmer_of(s, cx.coord_rank, cx.by_rank) < 0) {/    if (1) { \/* mutant: the watcher alone *\//' \
  '^test_node$'
mutant --target test_node --filter 'node/the_coordinators_word_alone*' agent/node/node_confirm.c \
  's/    return strcmp(c->sus.by, n->node_id) == 0 \&\& !c->sus.also\[0\] \&\& world >= 3;/    return false;/' \
  '^test_node$'
# The rejoin cooldown of a node that keeps losing its lease soon after rejoining, and its doubling.
mutant --target test_node --filter 'node/a_node_that_loses*' agent/node/node_ring.c \
  's/    return !n->ring || now >= n->ring->cooldown_until_ms;/    return true;/' '^test_node$'
mutant --target test_node --filter 'node/a_node_that_loses*' agent/node/node_cut.c \
  's/    int s = quick ? strikes + 1 : cut ? 1 : 0;/    int s = quick ? strikes : cut ? 1 : 0; \/* mutant: strikes not counted *\//' \
  '^test_node$'
# A node without a lease leaves the ring; it rejoins only once its owner stopped the workers.
mutant --target test_node --filter 'node/a_lost_lease*' agent/node/node_ring.c \
  's/m \&\& !n->lease_lost \&\& active ? s->round : 0;/m \&\& active ? s->round : 0;/' '^test_node$'
mutant --target test_node --filter 'node/a_lost_lease*' agent/node/node.c \
  's/    if (n->lease_lost \&\& in->may_rejoin \&\& (n->retry_at_ms < 0/    if (n->lease_lost \&\& (n->retry_at_ms < 0/' \
  '^test_node$'
# Store retries wait out the jittered back-off (a thousand nodes must not retry in lockstep), and
# give up after --join-timeout.
mutant --target test_node --filter 'node/a_failure_report_is_retried*' agent/node/node.c \
  's/    if (n->retry_at_ms >= 0 \&\& now < n->retry_at_ms)/    if (0)/' '^test_node$'
mutant --target test_node --filter 'node/a_store_unreachable*' agent/node/node.c \
  's/    } else if (now - n->store_down_since_ms > n->p.join_timeout_ms) {/    } else if (0) {/' \
  '^test_node$'
# issue 41: a settled case (a false alarm cleared, a lease revoked) frees its slot, and no more
# cases are taken out than there are free slots: a death after a round's burst of false alarms is
# probed, not left to its lease (at 10,000 nodes the table filled and a death took 12.5-15.2 s).
mutant --target test_node --filter 'node/settled_false_alarms*' agent/node/node_confirm.c \
  's/                k->state = CASE_FREE; \/\* settled, its key gone/                (void)0; \/* mutant/' \
  '^test_node$'
# issue 41: while the coordinator confirms suspicions its next round waits (rdzv_hold_losses), so
# one burst's evictions leave in one round; the hold is bounded; suspicions not looked at yet
# (a coordinator that has just taken over) hold a loss too, a step at a time.
mutant --target test_rdzv_plan --filter 'plan/a_loss_waits*' rendezvous/plan.c \
  's/    if (v->loss_hold_ms > hold) \/\* the ring/    if (0) \/* mutant/' '^test_rdzv_plan$'
mutant --target test_node --filter 'node/a_burst_of_deaths*' agent/node/node_confirm.c \
  's/        busy = busy || k->state == CASE_QUEUED || k->state == CASE_PROBING ||/        busy = busy || 0 ||/' \
  '^test_node$'
mutant --target test_node --filter 'node/a_round_waits_for_every*' agent/node/node_confirm.c \
  's/               k->state == CASE_CONFIRMED || k->state == CASE_EVICTED || k->state == CASE_DEAD;/               0;/' '^test_node$'
mutant --target test_node --filter 'node/a_probe_that_never_ends*' agent/node/node_confirm.c \
  '0,/        if (to > g->hold_from + cap)/s//        if (0)/' '^test_node$'
mutant --target test_node --filter 'node/a_loss_waits_for_suspicions*' rendezvous/suspect.c \
  's/    if (!s->cfg.params.ring || !rdzv_suspects_due(s)) {/    if (1) {/' '^test_node$'
mutant --target test_node --filter 'node/the_member_that_confirmed*' rendezvous/session.c \
  's/        s->takeover_ms = now_ms + (s->revoked_coord_lease ? 0 : takeover_delay_ms(s));/        s->takeover_ms = now_ms + takeover_delay_ms(s);/' '^test_node$'
mutant --target test_node --filter 'node/the_member_that_confirmed*' rendezvous/suspect.c \
  's/    s->revoked_coord_lease = lease;/    (void)lease;/' '^test_node$'
mutant --target test_node --filter 'node/the_coordinators_own_key*' agent/node/node_confirm.c \
  's/    return strcmp(c->sus.by, n->node_id) == 0 \&\& !c->sus.also\[0\] \&\& world >= 3;/    return strcmp(c->sus.by, n->node_id) == 0 \&\& world >= 3;/' '^test_node$'
mutant --target test_node --filter 'node/the_coordinators_own_key*' rendezvous/suspect.c \
  's/        r = second_word(s, key, \&cur, x->by, err);/        r = KV_ECONFLICT;/' '^test_node$'
mutant --target test_rdzv_suspect --filter 'suspect/suspicion_values_are_checked' rendezvous/suspect.c \
  's/                      strcmp(also, by) == 0))/                      0))/' '^test_rdzv_suspect$'
mutant --target test_rdzv_suspect --filter 'suspect/the_other_neighbours_report*' rendezvous/suspect.c \
  's/            if (strcmp(ret\[j\].sus.node_id, c.sus.node_id) == 0) {/            if (0) {/' '^test_rdzv_suspect$'
mutant --target test_rdzv_suspect --filter 'suspect/a_third_member_confirms*' rendezvous/suspect.c \
  's/    int far = (coord_rank + n \/ 2) % n;/    int far = coord_rank;/' '^test_rdzv_suspect$'
# issue 41: the member confirming the coordinator's death probes the round's other suspects in
# the same moment and, once it claims `coord`, evicts those that did not answer within a probe's
# deadline, with no second probe (test_node_succession: fake clock, no real time); one that
# answered or whose verdict is stale is probed again; its own word alone is no second vantage point.
mutant --target test_node_succession --filter 'succession/a_suspect_that_did_not*' agent/node/node_ring.c \
  's/        if (now < g->succeed_until) { \/\* this node may coordinate/        if (0) { \/* mutant/' \
  '^test_node_succession$'
mutant --target test_node_succession --filter 'succession/a_suspect_that_answered*' agent/node/node_confirm.c \
  's/            k->state = k->sres == PR_DEAD \&\& k->wres == PR_ALIVE ? CASE_DEAD : CASE_FREE;/            k->state = CASE_DEAD;/' \
  '^test_node_succession$'
mutant --target test_node_succession --filter 'succession/a_verdict_older*' agent/node/node_confirm.c \
  's/        if (now - k->dead_ms <= g->p.probe_ms)/        if (1)/' '^test_node_succession$'
mutant --target test_node_succession --filter 'succession/a_suspect_only_the_confirmer*' agent/node/node_confirm.c \
  's/            own_word_only(n, \&list\[i\], s->group_world_size))/            0)/' \
  '^test_node_succession$'
