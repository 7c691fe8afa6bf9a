// SPDX-License-Identifier: Apache-2.0
/*
 * The node unit (agent/node/node.h) without real time or sockets: four nodes on one memory store,
 * each a real rendezvous session in a struct node, a fake clock, and a fake ring transport that
 * records the links and probes the node asks for (the test hands back the ring's reports). The
 * decisions: a lease loss stops the node and it rejoins with the jittered back-off; a suspicion
 * confirmed by the coordinator's probe evicts, one answered clears it (and frees its case slot), a
 * local probe failure does neither; two deaths at once leave in one round; the coordinator alone
 * is no second vantage point; a suspicion of the coordinator is confirmed by the third member; a
 * node that loses its lease again soon after rejoining waits; a pending failure report is retried
 * after a store error, not before its back-off.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ea_time.h"
#include "node_fx.h"
#include "session.h"
#include "suspect.h"

#define NN 4
#define PREFIX "/elastic/nodet/"
#define TTL NFX_TTL

static void setup(void)
{
    nfx_setup(NN, PREFIX, 40000, 16);
}

TestSuite(node, .init = setup, .fini = nfx_teardown, .timeout = 60);

/* Both neighbours of x report it; the passes after: the coordinator's probe of x (or NULL). */
static const struct probe_req *suspected_by_neighbours(int x)
{
    int c = coordinator();
    int before = tr[c].n_probes;
    link_broke(index_of(tr[x].prev), x);
    link_broke(index_of(tr[x].next), x);
    for (int k = 0; k < 5; k++) {
        pass();
        advance(10);
    }
    for (int i = before; i < tr[c].n_probes; i++)
        if (index_of(tr[c].probes[i].peer) == x)
            return &tr[c].probes[i];
    return NULL;
}

Test(node, a_suspicion_confirmed_by_the_coordinators_probe_evicts)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int x = plain_member(), c = coordinator();
    const struct probe_req *p = suspected_by_neighbours(x);
    cr_assert_not_null(p, "the coordinator did not probe the suspect n%d", x);
    probe_result(c, p, false, false);
    cr_assert_eq(cnt[c].evicted, 1);
    cr_assert_not(lease_valid(x), "the suspect's lease was not revoked");
    dead[x] = true; /* it is gone: the run goes on without it */
    cr_assert(settle(NN - 1), "no round without the evicted node");
}

Test(node, a_suspicion_whose_probe_is_answered_is_a_false_alarm)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int x = plain_member(), c = coordinator();
    const struct probe_req *p = suspected_by_neighbours(x);
    cr_assert_not_null(p, "the coordinator did not probe the suspect n%d", x);
    int64_t r = round_of(c);
    probe_result(c, p, true, false);
    for (int k = 0; k < 5; k++) {
        pass();
        advance(10);
    }
    cr_assert_eq(cnt[c].cleared, 1);
    cr_assert_eq(cnt[c].evicted, 0);
    cr_assert(lease_valid(x), "a node that answered was evicted");
    cr_assert_eq(round_of(x), r, "a false alarm started a round");
}

/* More false alarms in one round than the coordinator has case slots (a round's first links at
 * 10,000 nodes raise a hundred or more): each settled case frees its slot, so a real death after
 * them is still probed and evicted, not left to its lease. */
Test(node, settled_false_alarms_free_their_slots_for_a_later_death)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int x = plain_member(), c = coordinator();
    int64_t r = round_of(c);
    for (int i = 0; i < NODE_CASES_MAX + 8; i++) {
        tr[c].n_probes = 0; /* the fake transport's probes answered: its slots are free */
        const struct probe_req *p = suspected_by_neighbours(x);
        cr_assert_not_null(p, "false alarm %d of n%d was not probed", i + 1, x);
        probe_result(c, p, true, false);
    }
    cr_assert_eq(cnt[c].cleared, NODE_CASES_MAX + 8);
    cr_assert_eq(round_of(c), r, "a false alarm started a round");
    tr[c].n_probes = 0;
    const struct probe_req *p = suspected_by_neighbours(x);
    cr_assert_not_null(p, "the death after %d false alarms was not probed", NODE_CASES_MAX + 8);
    probe_result(c, p, false, false);
    cr_assert_eq(cnt[c].evicted, 1);
    cr_assert_not(lease_valid(x), "the suspect's lease was not revoked");
}

/* A round of NN, then the coordinator's two ring neighbours x and y die at once; b, the one
 * member left beside it, sees both go (and reports them when `reported`). */
struct burst {
    int c, x, y, b;
    int64_t r0; /* the round they died in */
};

static struct burst both_neighbours_die(bool reported)
{
    cr_assert(settle(NN), "no round of %d", NN);
    struct burst u = {.c = coordinator()};
    u.x = index_of(tr[u.c].next);
    u.y = index_of(tr[u.c].prev);
    u.b = index_of(tr[u.x].next);
    cr_assert(u.b != u.c && u.b != u.x && u.b != u.y && index_of(tr[u.b].next) == u.y);
    u.r0 = round_of(u.c);
    dead[u.x] = dead[u.y] = true;
    if (reported) {
        link_broke(u.b, u.x);
        link_broke(u.b, u.y);
    }
    return u;
}

/* Two members die at once (a rack): the coordinator probes both, and the round waits for the
 * second confirmation (rdzv_hold_losses) instead of going on without the first alone: the
 * survivors restart once, in one round without both. */
Test(node, a_burst_of_deaths_leaves_in_one_round)
{
    struct burst u = both_neighbours_die(true);
    int c = u.c;
    int64_t r0 = u.r0;
    passes(5);
    cr_assert_eq(tr[c].n_probes, 2, "the coordinator did not probe both suspects");
    probe_result(c, &tr[c].probes[0], false, false);
    passes(10);
    cr_assert_eq(cnt[c].evicted, 1);
    cr_assert_eq(round_of(c), r0, "a round went on without the first while the second's probe "
                                  "was in flight");
    probe_result(c, &tr[c].probes[1], false, false);
    cr_assert_eq(cnt[c].evicted, 2);
    cr_assert(settle(NN - 2), "no round without both");
    cr_assert_eq(round_of(c), r0 + 1, "the survivors went through more than one round");
}

/* The hold is bounded: a probe that never ends holds the round NODE_LOSS_HOLD_MAX_MS from the
 * burst's start at most, then the survivors go on without the member evicted. */
Test(node, a_probe_that_never_ends_holds_the_round_a_bounded_time)
{
    struct burst u = both_neighbours_die(true);
    int c = u.c;
    int64_t r0 = u.r0, t0 = fc.now;
    passes(5);
    cr_assert_eq(tr[c].n_probes, 2);
    probe_result(c, &tr[c].probes[0], false, false); /* y's probe never ends */
    while (round_of(c) == r0 && fc.now - t0 < 3 * NODE_LOSS_HOLD_MAX_MS) {
        pass();
        advance(50);
    }
    cr_assert_neq(round_of(c), r0, "no round %d ms after the burst began", 3 * NODE_LOSS_HOLD_MAX_MS);
    cr_assert_leq(fc.now - t0, NODE_LOSS_HOLD_MAX_MS + 200, "the round waited %lld ms",
                  (long long)(fc.now - t0));
}

/* A coordinator that sees a member gone while suspicions it has not looked at yet wait in the
 * store (one that has just taken over lists them all) holds the round until its ring has taken
 * them: the suspects it then evicts leave in the same round. */
Test(node, a_loss_waits_for_suspicions_not_looked_at_yet)
{
    struct burst u = both_neighbours_die(false);
    int c = u.c, x = u.x, y = u.y, b = u.b;
    int64_t r0 = u.r0;
    struct rdzv_suspicion sus = {.round = r0, .fault_ms = -1, .detected_ms = 1};
    snprintf(sus.node_id, sizeof(sus.node_id), "n%d", y);
    snprintf(sus.by, sizeof(sus.by), "n%d", b);
    snprintf(sus.cause, sizeof(sus.cause), "closed");
    struct ea_error err = {0};
    cr_assert_eq(rdzv_suspect(nodes[b].rdzv, &sus, &err), 1, "%s", err.msg);
    revoke(x); /* x's lease gone in the same batch of events */
    passes(5);
    cr_assert_eq(round_of(c), r0, "the round went on without x before y's suspicion was looked at");
    cr_assert_eq(tr[c].n_probes, 1, "y was not probed");
    probe_result(c, &tr[c].probes[0], false, false);
    cr_assert(settle(NN - 2), "no round without both");
    cr_assert_eq(round_of(c), r0 + 1, "the survivors went through more than one round");
}

/* Both probes ended, both leases revoked, but the coordinator has seen only the first node key's
 * delete: the round waits for the second's (an evicted case holds until its key is gone from the
 * coordinator's mirror), then goes on without both at once. */
Test(node, a_round_waits_for_every_evicted_nodes_delete)
{
    struct burst u = both_neighbours_die(true);
    int c = u.c;
    int64_t r0 = u.r0;
    passes(5);
    cr_assert_eq(tr[c].n_probes, 2);
    probe_result(c, &tr[c].probes[0], false, false);
    probe_result(c, &tr[c].probes[1], false, false);
    cr_assert_eq(cnt[c].evicted, 2);
    node_ring_step(&nodes[c], true, fc.now); /* both evictions seen by the ring, no delete yet */
    struct kv_event *ev = NULL;
    size_t n = 0, first = 0;
    struct ea_error err = {0};
    cr_assert_eq(kv_read_events(kv, &ev, &n, &err), 0, "%s", err.msg);
    char key[64];
    snprintf(key, sizeof(key), PREFIX "nodes/%s", tr[c].probes[0].peer);
    while (first < n && strcmp(ev[first].entry.key, key) != 0)
        first++;
    cr_assert_lt(first, n, "no delete of %s", key);
    first++; /* the coordinator sees the events up to the first node key's delete only */
    for (int i = 0; i < NN; i++)
        if (!dead[i])
            cr_assert_geq(rdzv_apply_events_at(nodes[i].rdzv, ev, i == c ? first : n, fc.now,
                                               &err), 0, "%s", err.msg);
    advance(10);
    struct node_step_in in = {.may_rejoin = true, .generation = 1, .done_still_valid = true};
    node_step(&nodes[c], &in, fc.now);
    node_ring_step(&nodes[c], true, fc.now);
    node_step(&nodes[c], &in, fc.now);
    cr_assert_eq(round_of(c), r0, "a round went on before the second evicted node's delete");
    cr_assert_geq(rdzv_apply_events_at(nodes[c].rdzv, ev + first, n - first, fc.now, &err), 0,
                  "%s", err.msg);
    kv_events_free(ev, n);
    cr_assert(settle(NN - 2), "no round without both");
    cr_assert_eq(round_of(c), r0 + 1, "the survivors went through more than one round");
}

Test(node, a_probe_that_could_not_leave_this_node_neither_evicts_nor_clears)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int x = plain_member(), c = coordinator();
    const struct probe_req *p = suspected_by_neighbours(x);
    cr_assert_not_null(p);
    probe_result(c, p, false, true);
    cr_assert_eq(cnt[c].evicted, 0);
    cr_assert_eq(cnt[c].cleared, 0);
    cr_assert(lease_valid(x));
}

Test(node, the_coordinators_word_alone_is_no_second_vantage_point)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int c = coordinator(), x = index_of(tr[c].next);
    int before = tr[c].n_probes;
    link_broke(c, x); /* only the coordinator lost its link to x */
    for (int k = 0; k < 5; k++) {
        pass();
        advance(10);
    }
    cr_assert_eq(cnt[c].suspect, 1);
    cr_assert_eq(tr[c].n_probes, before, "the coordinator probed on its own word");
    cr_assert(lease_valid(x));
}

/* A key the coordinator wrote itself (before it coordinated: it confirmed its predecessor's
 * death and took over) is confirmed once the suspect's other neighbour saw it too (`also`):
 * before, it waited for the next round's links, a second round for a rack. */
Test(node, the_coordinators_own_key_with_a_second_watcher_is_confirmed)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int c = coordinator(), x = index_of(tr[c].next), o = index_of(tr[x].next);
    cr_assert(o != c && o != x, "a ring of %d", NN);
    struct rdzv_suspicion mine = {.round = tr[c].round, .fault_ms = -1, .detected_ms = 1};
    snprintf(mine.node_id, sizeof(mine.node_id), "n%d", x);
    snprintf(mine.by, sizeof(mine.by), "n%d", c);
    snprintf(mine.cause, sizeof(mine.cause), "closed");
    struct ea_error err = {0};
    cr_assert_eq(rdzv_suspect(nodes[c].rdzv, &mine, &err), 1, "%s", err.msg);
    int before = tr[c].n_probes;
    for (int k = 0; k < 3; k++) {
        pass();
        advance(10);
    }
    cr_assert_eq(tr[c].n_probes, before, "the coordinator probed on its own word");
    link_broke(o, x); /* the other neighbour saw it too */
    for (int k = 0; k < 3; k++) {
        pass();
        advance(10);
    }
    cr_assert_eq(tr[c].n_probes, before + 1, "the second word was not taken");
    cr_assert_eq(index_of(tr[c].probes[before].peer), x);
    probe_result(c, &tr[c].probes[before], false, false);
    cr_assert_eq(cnt[c].evicted, 1);
    cr_assert_not(lease_valid(x));
}

Test(node, a_suspicion_of_the_coordinator_is_confirmed_by_the_third_member)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int c = coordinator(), w = index_of(tr[c].prev); /* its predecessor watches it */
    const struct rdzv_member *mw = rdzv_self_member(nodes[w].rdzv);
    int coord_rank = mw->next_rank;
    int confirmer_rank = rdzv_coord_confirmer(NN, coord_rank, mw->group_rank);
    cr_assert_geq(confirmer_rank, 0);
    int k3 = 0;
    bool found = false;
    for (int i = 0; i < NN; i++)
        if (rdzv_self_member(nodes[i].rdzv)->group_rank == confirmer_rank) {
            k3 = i;
            found = true;
        }
    cr_assert(found && k3 != w && k3 != c);
    link_broke(w, c);
    for (int k = 0; k < 5; k++) {
        pass();
        advance(10);
    }
    for (int i = 0; i < tr[w].n_probes; i++) /* (its walk probes the members after c) */
        cr_assert_neq(index_of(tr[w].probes[i].peer), c, "the watcher confirmed its own suspicion");
    cr_assert_eq(tr[k3].n_probes, 1, "the third member did not probe the coordinator");
    cr_assert_eq(index_of(tr[k3].probes[0].peer), c);
    probe_result(k3, &tr[k3].probes[0], false, false);
    cr_assert_eq(cnt[k3].evicted, 1);
    dead[c] = true;
    cr_assert(settle(NN - 1), "no round after the coordinator's eviction");
}

/* The member whose probe found the coordinator dead claims `coord` as soon as the key's delete
 * arrives, not at its turn in the succession (issue 41: with failure domains it is outside the
 * coordinator's, so alive when a rack took the coordinator and its successors by rank). */
Test(node, the_member_that_confirmed_the_coordinators_death_claims_at_once)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int c = coordinator(), w = index_of(tr[c].next); /* its successor watches it too */
    const struct rdzv_member *mw = rdzv_self_member(nodes[w].rdzv);
    int coord_rank = mw->prev_rank;
    int confirmer_rank = rdzv_coord_confirmer(NN, coord_rank, mw->group_rank);
    int k3 = 0;
    bool found = false;
    for (int i = 0; i < NN; i++)
        if (rdzv_self_member(nodes[i].rdzv)->group_rank == confirmer_rank) {
            k3 = i;
            found = true;
        }
    cr_assert(found && k3 != w && k3 != c);
    /* the premise: at its turn it would wait */
    cr_assert_gt(rdzv_takeover_delay_ms(confirmer_rank, NN, 0), 0);
    link_broke(w, c);
    for (int k = 0; k < 5; k++) {
        pass();
        advance(10);
    }
    cr_assert_eq(tr[k3].n_probes, 1, "the third member did not probe the coordinator");
    struct rdzv_stats st;
    int before = 0, claims = 0;
    for (int i = 0; i < NN; i++) {
        rdzv_stats_get(nodes[i].rdzv, &st);
        before += (int)st.claims;
    }
    /* the rack took the watcher with the coordinator: nobody else claims at once */
    dead[w] = true;
    probe_result(k3, &tr[k3].probes[0], false, false);
    cr_assert_eq(cnt[k3].evicted, 1);
    dead[c] = true;
    for (int k = 0; k < 3; k++)
        pass(); /* the clock stands still */
    cr_assert(rdzv_is_coordinator(nodes[k3].rdzv), "the confirmer did not take over at once");
    for (int i = 0; i < NN; i++) {
        rdzv_stats_get(nodes[i].rdzv, &st);
        claims += (int)st.claims;
    }
    cr_assert_eq(claims - before, 1, "%d claims of the coordinator's key", claims - before);
}

Test(node, a_lost_lease_stops_the_node_and_it_rejoins_with_the_jittered_backoff)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int x = plain_member();
    int64_t gen = 0; /* the generation its workers ran: a rejoin asks for a new round of it */
    rdzv_current(nodes[x].rdzv, &gen);
    revoke(x);
    advance(TTL / 3 + 1);                                                /* its keepalive is due */
    struct node_step_in hold = {.may_rejoin = false, .generation = gen}; /* workers stopping */
    node_step(&nodes[x], &hold, fc.now);
    cr_assert(nodes[x].lease_lost);
    cr_assert_eq(cnt[x].lease_lost, 1, "the owner was not told to stop its workers");
    node_ring_step(&nodes[x], true, fc.now);
    cr_assert_eq(tr[x].round, 0, "a node without a lease stays in the ring");
    node_step(&nodes[x], &hold, fc.now);
    cr_assert_eq(cnt[x].rejoined, 0, "rejoined while its workers ran");

    /* the workers stopped; the store is down: the rejoin backs off, doubling, with jitter */
    fail_writes = true;
    struct node_step_in go = {.may_rejoin = true, .generation = gen};
    node_step(&nodes[x], &go, fc.now);
    cr_assert(nodes[x].lease_lost);
    int64_t w1 = nodes[x].retry_at_ms - fc.now;
    cr_assert(w1 >= NODE_RETRY_BASE_MS / 2 && w1 <= NODE_RETRY_BASE_MS * 3 / 2, "first wait %lld",
              (long long)w1);
    int tried = writes_tried;
    advance(w1 - 1);
    node_step(&nodes[x], &go, fc.now);
    cr_assert_eq(writes_tried, tried, "tried again before its back-off");
    advance(1);
    node_step(&nodes[x], &go, fc.now);
    cr_assert_gt(writes_tried, tried);
    int64_t w2 = nodes[x].retry_at_ms - fc.now;
    cr_assert(w2 >= NODE_RETRY_BASE_MS && w2 <= NODE_RETRY_BASE_MS * 3, "second wait %lld",
              (long long)w2);
    cr_assert_eq(cnt[x].fatal, 0);

    /* the store is back: it rejoins and asks for a new round of its generation */
    fail_writes = false;
    advance(w2);
    node_step(&nodes[x], &go, fc.now);
    cr_assert_not(nodes[x].lease_lost);
    cr_assert_eq(cnt[x].rejoined, 1);
    cr_assert_eq(nodes[x].reform_generation, gen);
    cr_assert(settle(NN), "no round with the rejoined node");
}

Test(node, a_node_that_loses_its_lease_again_soon_after_rejoining_waits)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int x = plain_member();
    int64_t gen = 0; /* the generation its workers ran: a rejoin asks for a new round of it */
    rdzv_current(nodes[x].rdzv, &gen);
    struct node_step_in go = {.may_rejoin = true, .generation = gen};
    struct node_step_in hold = {.may_rejoin = false, .generation = gen}; /* workers stopping */
    revoke(x); /* a first loss: rejoined once its workers stopped */
    advance(TTL / 3 + 1);
    node_step(&nodes[x], &hold, fc.now);
    node_ring_step(&nodes[x], true, fc.now);
    cr_assert(nodes[x].lease_lost);
    node_step(&nodes[x], &go, fc.now);
    node_ring_step(&nodes[x], true, fc.now);
    cr_assert_eq(cnt[x].rejoined, 1);
    cr_assert(settle(NN));
    /* lost again a few seconds after rejoining: it waits one TTL; the next time, two */
    for (int strike = 1; strike <= 2; strike++) {
        cr_assert(settle(NN));
        rdzv_current(nodes[x].rdzv, &gen);
        hold.generation = go.generation = gen;
        revoke(x);
        advance(TTL / 3 + 1);
        node_step(&nodes[x], &hold, fc.now);
        node_ring_step(&nodes[x], true, fc.now);
        cr_assert(nodes[x].lease_lost);
        cr_assert_not(node_may_rejoin(&nodes[x], fc.now), "no cooldown after a quick loss");
        node_step(&nodes[x], &go, fc.now);
        cr_assert_eq(cnt[x].rejoined, strike, "rejoined during its cooldown");
        advance(strike * TTL - 1);
        cr_assert_not(node_may_rejoin(&nodes[x], fc.now), "loss %d: a cooldown under %d TTL",
                      strike + 1, strike);
        advance(1);
        cr_assert(node_may_rejoin(&nodes[x], fc.now));
        node_step(&nodes[x], &go, fc.now);
        node_ring_step(&nodes[x], true, fc.now);
        cr_assert_eq(cnt[x].rejoined, strike + 1);
    }
}

Test(node, a_failure_report_is_retried_after_a_store_error_not_before_its_backoff)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int x = plain_member();
    struct rdzv_failure f = {.rank = 1, .local_rank = 0, .exit_code = 3, .pid = 42};
    snprintf(f.node_id, sizeof(f.node_id), "n%d", x);
    snprintf(f.message, sizeof(f.message), "worker exited with code 3");
    fail_writes = true;
    int64_t gen = 0;
    rdzv_current(nodes[x].rdzv, &gen);
    node_report_failure(&nodes[x], gen, &f);
    cr_assert(nodes[x].failure_pending, "a failed write is not kept");
    cr_assert_geq(nodes[x].store_down_since_ms, 0);
    int64_t wait = nodes[x].retry_at_ms - fc.now;
    cr_assert(wait >= NODE_RETRY_BASE_MS / 2 && wait <= NODE_RETRY_BASE_MS * 3 / 2);
    fail_writes = false;
    int tried = writes_tried;
    struct node_step_in in = {.may_rejoin = true, .generation = gen};
    node_step(&nodes[x], &in, fc.now);
    cr_assert(nodes[x].failure_pending, "written before its back-off");
    cr_assert_eq(writes_tried, tried);
    advance(wait);
    node_step(&nodes[x], &in, fc.now);
    cr_assert_not(nodes[x].failure_pending, "not written once the store was back");
    cr_assert_lt(nodes[x].store_down_since_ms, 0, "the outage was not seen to end");
    int64_t r = round_of(x);
    char key[64];
    snprintf(key, sizeof(key), PREFIX "failures/%lld", (long long)r);
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, key, &e, NULL), 0, "no %s in the store", key);
    kv_entry_clear(&e);
}

Test(node, a_store_unreachable_past_the_join_timeout_is_fatal)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int x = plain_member();
    struct ea_error err = {0};
    ea_errorf(&err, KV_ECONN, "down");
    node_store_problem(&nodes[x], KV_ECONN, &err, fc.now);
    advance(60000);
    node_store_problem(&nodes[x], KV_ECONN, &err, fc.now);
    cr_assert_eq(cnt[x].fatal, 0, "fatal at the timeout, not past it");
    advance(1);
    node_store_problem(&nodes[x], KV_ECONN, &err, fc.now);
    cr_assert_eq(cnt[x].fatal, 1);
}
