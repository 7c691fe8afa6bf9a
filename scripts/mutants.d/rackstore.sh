# shellcheck shell=bash
# Issue 41, a rack cut from its peers that still reaches the store (docs/security.md, "A rack cut
# at its switch"; agent/node/node_cut.c). Decided by pure functions (test_rdzv_domain,
# test_node_cut's rejoin_wait) and the node unit on the memory store with a fake clock and a fake
# ring transport (test_node_cut): no real time, the verdict does not depend on the machine's load.
# (1) correlated evidence: the prober and the watchers in one domain, the suspect outside it ...
mutant --target test_rdzv_domain --filter 'confirm/correlated_evidence*' rendezvous/domain.c \
  's/    return same_domain(prober, by) \&\& (!also || same_domain(prober, also)) \&\&/    return same_domain(prober, by) \&\&/' \
  '^test_rdzv_domain$'
mutant --target test_rdzv_domain --filter 'confirm/correlated_evidence*' rendezvous/domain.c \
  's/           !same_domain(prober, suspect);/           true;/' '^test_rdzv_domain$'
mutant --target test_node_cut --filter 'corr/a_probe_from_the_watchers_domain_that_cannot*' \
  agent/node/node_cut.c \
  's/    if (!rdzv_correlated(me.domain, w.domain, have_a ? a.domain : NULL, suspect_domain))/    if (1)/' \
  '^test_node_cut$'
# ... counts only if the prober reached the watcher too: the coordinator's confirmation ...
mutant --target test_node_cut --filter 'corr/a_probe_from_the_watchers_domain_that_cannot*' \
  agent/node/node_confirm.c \
  's/        if (k->sres == PR_DEAD \&\& k->wres != PR_ALIVE) {/        if (0) {/' '^test_node_cut$'
# ... and the confirmer's of a suspicion of the coordinator, which waits for both answers
mutant --target test_node_cut \
  --filter 'corr/a_confirmer_in_the_watchers_domain_that_cannot*' agent/node/node_confirm.c \
  's/        if (g->coord_sres == PR_DEAD \&\& g->coord_wres != PR_ALIVE) {/        if (0) {/' \
  '^test_node_cut$'
mutant --target test_node_cut --filter 'corr/a_confirmer_in_the_watchers_domain_that_reaches*' \
  agent/node/node_confirm.c \
  's/            (g->coord_sres == PR_DEAD \&\& g->coord_wres == PR_PENDING))/            0)/' \
  '^test_node_cut$'
# (3) a lease lost in the ring round in which the node's own report of a broken link was taken
# by the store (it was alive, cut) waits one cooldown before the rejoin ...
mutant --target test_node_cut --filter 'cut/a_node_evicted_while_cut*' agent/node/node_ring.c \
  's/    bool cut = g->cut_round > 0 \&\& g->cut_round == g->ring_last \&\&/    bool cut = false \&\&/' \
  '^test_node_cut$'
mutant --target test_node_cut --filter 'cut/a_node_evicted_while_cut*' agent/node/node_ring.c \
  's/        g->cut_round = round;/        (void)0;/' '^test_node_cut$'
# ... also when the node saw the run go on without it (in no ring any more) before the loss
mutant --target test_node_cut --filter 'cut/a_cut_node_that_saw*' agent/node/node_ring.c \
  's/        g->ring_last = round;/        (void)0;/' '^test_node_cut$'
mutant --target test_node_cut --filter 'cut/the_rejoin_wait*' agent/node/node_cut.c \
  's/    int s = quick ? strikes + 1 : cut ? 1 : 0;/    int s = quick ? strikes + 1 : 0;/' \
  '^test_node_cut$'
# ... only within one cooldown of the report (an older one says nothing of the loss)
mutant --target test_node_cut --filter 'cut/a_report_long_before*' agent/node/node_ring.c \
  's/               now - g->cut_ms <= g->p.cooldown_ms;/               true;/' '^test_node_cut$'
# ... decided at the loss, before a rejoin in the same pass
mutant --target test_node_cut --filter 'cut/a_cut_node_whose_workers*' agent/node/node.c \
  's/        node_ring_lease_lost(n, now); \/\* the rejoin.s wait: before the rejoin below \*\//        (void)0;/' \
  '^test_node_cut$'
# ... but a report the store refused (a frozen node resumed after its eviction) is no cut
mutant --target test_node_cut --filter 'cut/a_first_loss_not_cut*' agent/node/node_ring.c \
  's/        if (r > 0) \/\* written with this node.s lease: it was alive, cut \*\//        if (1)/' \
  '^test_node_cut$'
# A report of the coordinator (rounds/<r>/coord_suspect, written without the writer's lease) is no
# proof that the writer was alive: a frozen node resumed next to the coordinator rejoins at once.
mutant --target test_node_cut --filter 'cut/a_report_of_the_coordinator*' agent/node/node_ring.c \
  's/    int r = rdzv_coord_suspect(n->rdzv, \&cx, \&err);/    int r = rdzv_coord_suspect(n->rdzv, \&cx, \&err); if (r > 0) note_cut(n, g, cx.sus.round);/' \
  '^test_node_cut$'
