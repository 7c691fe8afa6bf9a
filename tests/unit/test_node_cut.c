// SPDX-License-Identifier: Apache-2.0
/*
 * The node unit (agent/node/) when a failure domain is cut from its peers but still reaches the
 * store (issue 41, docs/security.md "A rack cut at its switch"), on the memory store with a fake
 * clock and a fake ring transport, as tests/unit/test_node.c: (1) a prober's failed probe that is
 * correlated with the watcher's word (prober and watcher in one domain, the suspect outside it)
 * evicts only when the prober reaches the watcher too — the coordinator's and the confirmer of a
 * suspicion of the coordinator; (3) a node whose lease is revoked in the ring round in which it
 * reported its own links broken waits one cooldown before rejoining, while any other first loss
 * rejoins at once (node_rejoin_wait, a pure function).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain.h"
#include "ea_time.h"
#include "node_fx.h"
#include "session.h"
#include "suspect.h"

#define NN 4
#define PREFIX "/elastic/nodecut/"
#define TTL NFX_TTL

/* the (1) cases: two racks of two */
static const char *const dom[NN] = {"rackA", "rackA", "rackB", "rackB"};

static void setup_domains(void)
{
    nfx_setup_domains(NN, PREFIX, 40000, 16, dom);
}

static void setup_plain(void)
{
    nfx_setup(NN, PREFIX, 40000, 16);
}

TestSuite(cut, .init = setup_plain, .fini = nfx_teardown, .timeout = 60);
TestSuite(corr, .init = setup_domains, .fini = nfx_teardown, .timeout = 60);

/* ---- (3) the rejoin wait after an eviction of a node cut from its ring ---------------------- */

Test(cut, the_rejoin_wait_is_a_pure_decision)
{
    int s = -1;
    cr_assert_eq(node_rejoin_wait(TTL, 0, -1, false, &s), 0, "a plain first loss waits");
    cr_assert_eq(s, 0);
    cr_assert_eq(node_rejoin_wait(TTL, 0, -1, true, &s), TTL, "a cut loss: one TTL");
    cr_assert_eq(s, 1);
    cr_assert_eq(node_rejoin_wait(TTL, 0, 60000, true, &s), TTL, "long after a rejoin: one TTL");
    cr_assert_eq(s, 1);
    cr_assert_eq(node_rejoin_wait(TTL, 1, TTL / 2, true, &s), 2 * TTL, "cut again soon: doubled");
    cr_assert_eq(s, 2);
    cr_assert_eq(node_rejoin_wait(TTL, 1, TTL / 2, false, &s), 2 * TTL, "lost again soon");
    cr_assert_eq(s, 2);
    cr_assert_eq(node_rejoin_wait(TTL, 2, 10 * TTL, false, &s), 0, "a loss long after: none");
    cr_assert_eq(s, 0);
}

/* x's lease is revoked (as the coordinator does on an eviction); the passes that follow until
 * it finds out: its keepalive is due. */
static void lose_lease(int x, struct node_step_in *hold)
{
    revoke(x);
    advance(TTL / 3 + 1);
    node_step(&nodes[x], hold, fc.now);
    node_ring_step(&nodes[x], true, fc.now);
    cr_assert(nodes[x].lease_lost);
}

/* x reported its own ring link broken (the store took the report: its lease was live) and then
 * lost its lease in that round: cut from its neighbours while it reaches the store, it is not
 * taken back at once (nobody could reach it over the ring: a storm of rounds) but after one
 * cooldown. Without the fix it rejoined in the same pass. */
Test(cut, a_node_evicted_while_cut_from_its_ring_waits_before_rejoining)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int x = plain_member();
    int64_t gen = 0;
    rdzv_current(nodes[x].rdzv, &gen);
    struct node_step_in hold = {.may_rejoin = false, .generation = gen};
    struct node_step_in go = {.may_rejoin = true, .generation = gen};
    link_broke(x, index_of(tr[x].next));
    link_broke(x, index_of(tr[x].prev));
    cr_assert_eq(cnt[x].suspect, 2);
    lose_lease(x, &hold);
    cr_assert_not(node_may_rejoin(&nodes[x], fc.now), "a cut node may rejoin at once");
    node_step(&nodes[x], &go, fc.now);
    cr_assert_eq(cnt[x].rejoined, 0, "rejoined at once after an eviction while cut");
    advance(TTL - 1);
    cr_assert_not(node_may_rejoin(&nodes[x], fc.now), "waited less than one cooldown");
    advance(1);
    cr_assert(node_may_rejoin(&nodes[x], fc.now));
    node_step(&nodes[x], &go, fc.now);
    cr_assert_eq(cnt[x].rejoined, 1);
}

/* As it happens in a run: the eviction is followed by a round without x, which x sees (it
 * reaches the store) before its keepalive finds the lease gone: it is in no ring any more when
 * the loss comes, and still waits. Every node steps with its workers stopped (the rejoin may
 * follow in the pass that sees the loss). */
Test(cut, a_cut_node_that_saw_the_run_go_on_without_it_waits_too)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int x = plain_member();
    int64_t r0 = round_of(x);
    link_broke(x, index_of(tr[x].next));
    link_broke(x, index_of(tr[x].prev));
    revoke(x);
    int64_t lost = -1;
    for (int k = 0; k < 400 && lost < 0; k++) {
        pass();
        if (nodes[x].lease_lost)
            lost = fc.now;
        else
            advance(50);
    }
    cr_assert_geq(lost, 0, "x never found its lease gone");
    cr_assert_eq(tr[x].round, 0, "x still in a ring when its loss came");
    cr_assert_gt(round_of(coordinator()), r0, "the run did not go on without x");
    cr_assert_eq(cnt[x].rejoined, 0, "rejoined at once after an eviction while cut");
    cr_assert_not(node_may_rejoin(&nodes[x], lost + TTL - 1), "waited less than one cooldown");
    cr_assert(node_may_rejoin(&nodes[x], lost + TTL));
}

/* A report long before the loss (more than one cooldown: an eviction follows its watcher's
 * report within seconds) says nothing of the loss: a link that broke and came back, then a lease
 * lost for another reason, rejoins at once. */
Test(cut, a_report_long_before_the_loss_is_no_cut)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int x = plain_member();
    int64_t gen = 0;
    rdzv_current(nodes[x].rdzv, &gen);
    struct node_step_in hold = {.may_rejoin = false, .generation = gen};
    link_broke(x, index_of(tr[x].next));
    cr_assert_eq(cnt[x].suspect, 1);
    advance(TTL);
    lose_lease(x, &hold);
    cr_assert(node_may_rejoin(&nodes[x], fc.now), "a report %d ms old made the loss a cut",
              TTL + TTL / 3 + 1);
}

/* The same when its workers had stopped already (its guards stopped them when the ring's links
 * went): the rejoin would follow in the very pass that saw the loss, so the wait is decided there,
 * not on the ring's next step. */
Test(cut, a_cut_node_whose_workers_stopped_already_waits_too)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int x = plain_member();
    int64_t gen = 0;
    rdzv_current(nodes[x].rdzv, &gen);
    struct node_step_in go = {.may_rejoin = true, .generation = gen};
    link_broke(x, index_of(tr[x].next));
    revoke(x);
    advance(TTL / 3 + 1);
    node_step(&nodes[x], &go, fc.now);
    cr_assert(nodes[x].lease_lost, "rejoined in the pass that saw the loss");
    cr_assert_eq(cnt[x].rejoined, 0);
    node_ring_step(&nodes[x], true, fc.now);
    advance(TTL - 1);
    node_step(&nodes[x], &go, fc.now);
    cr_assert_eq(cnt[x].rejoined, 0, "rejoined before one cooldown");
    advance(1);
    node_step(&nodes[x], &go, fc.now);
    cr_assert_eq(cnt[x].rejoined, 1);
}

/* A first loss with the ring's links up, and one whose reports the store refused (a frozen node
 * resumed after its eviction: its lease is gone when it reports), rejoin at once, as before. */
Test(cut, a_first_loss_not_cut_from_the_ring_rejoins_at_once)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int x = plain_member();
    int64_t gen = 0;
    rdzv_current(nodes[x].rdzv, &gen);
    struct node_step_in hold = {.may_rejoin = false, .generation = gen};
    struct node_step_in go = {.may_rejoin = true, .generation = gen};
    revoke(x);
    link_broke(x, index_of(tr[x].next)); /* resumed: its report is refused (no lease) */
    advance(TTL / 3 + 1);
    node_step(&nodes[x], &hold, fc.now);
    node_ring_step(&nodes[x], true, fc.now);
    cr_assert(nodes[x].lease_lost);
    cr_assert(node_may_rejoin(&nodes[x], fc.now), "a first loss not cut waits");
    node_step(&nodes[x], &go, fc.now);
    cr_assert_eq(cnt[x].rejoined, 1);
}

/* The same when the broken link is to the coordinator: its suspicion (rounds/<r>/coord_suspect) is
 * written without the writer's lease, so the store taking it says nothing of whether the writer
 * was alive (CI: a frozen node resumed next to the coordinator waited a TTL to rejoin). */
Test(cut, a_report_of_the_coordinator_is_no_proof_of_being_alive)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int c = coordinator(), x = index_of(tr[c].next);
    int64_t gen = 0;
    rdzv_current(nodes[x].rdzv, &gen);
    struct node_step_in hold = {.may_rejoin = false, .generation = gen};
    struct node_step_in go = {.may_rejoin = true, .generation = gen};
    revoke(x);
    int wrote = writes_tried;
    link_broke(x, c); /* resumed: it reports the coordinator, a key without a lease */
    cr_assert_gt(writes_tried, wrote, "no report of the coordinator written");
    advance(TTL / 3 + 1);
    node_step(&nodes[x], &hold, fc.now);
    node_ring_step(&nodes[x], true, fc.now);
    cr_assert(nodes[x].lease_lost);
    cr_assert(node_may_rejoin(&nodes[x], fc.now), "a lease-less report made the loss a cut");
    node_step(&nodes[x], &go, fc.now);
    cr_assert_eq(cnt[x].rejoined, 1);
}

/* ---- (1) correlated evidence: two vantage points in one failure domain ---------------------- */

/* The probes node w asked for since `from`, of node `of`: how many, the last in *ret. */
static int probes_of(int w, int from, int of, const struct probe_req **ret)
{
    int k = 0;
    for (int i = from; i < tr[w].n_probes; i++)
        if (index_of(tr[w].probes[i].peer) == of) {
            k++;
            *ret = &tr[w].probes[i];
        }
    return k;
}

/* n1 (rackA) reports its successor x (rackB); the coordinator n0 is in rackA too: its failed
 * probe of x is one vantage point with n1's (rackA cut at its switch finds all of rackB dead),
 * so it probes n1 as well. Returns x and the two probes. */
static int correlated_suspicion(const struct probe_req **ps, const struct probe_req **pw)
{
    cr_assert(settle(NN), "no round of %d", NN);
    cr_assert_eq(coordinator(), 0);
    int x = index_of(tr[1].next);
    cr_assert(x == 2 || x == 3, "the ring does not alternate the domains: n1 -> %s", tr[1].next);
    int before = tr[0].n_probes;
    link_broke(1, x);
    passes(5);
    cr_assert_eq(probes_of(0, before, x, ps), 1, "the suspect was not probed");
    cr_assert_eq(probes_of(0, before, 1, pw), 1, "the watcher of its own domain was not probed");
    return x;
}

Test(corr, a_probe_from_the_watchers_domain_that_cannot_reach_the_watcher_evicts_nobody)
{
    const struct probe_req *ps = NULL, *pw = NULL;
    int x = correlated_suspicion(&ps, &pw);
    probe_result(0, ps, false, false);
    probe_result(0, pw, false, false); /* the coordinator reaches nobody: its domain is cut */
    passes(3);
    cr_assert_eq(cnt[0].evicted, 0, "a healthy member outside the cut domain was evicted");
    cr_assert(lease_valid(x));
}

Test(corr, a_probe_from_the_watchers_domain_that_reaches_the_watcher_evicts)
{
    const struct probe_req *ps = NULL, *pw = NULL;
    int x = correlated_suspicion(&ps, &pw);
    probe_result(0, pw, true, false); /* the watcher answers: the domain is not cut */
    cr_assert_eq(cnt[0].evicted, 0, "evicted before the suspect's probe ended");
    probe_result(0, ps, false, false);
    cr_assert_eq(cnt[0].evicted, 1);
    cr_assert_not(lease_valid(x));
}

/* The watcher outside the coordinator's domain: two independent vantage points, one probe. */
Test(corr, a_suspicion_from_another_domain_needs_one_probe)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int before = tr[0].n_probes;
    const struct probe_req *ps = NULL, *pw = NULL;
    int w = index_of(tr[1].prev); /* rackB reports its successor n1 (rackA) */
    cr_assert(w == 2 || w == 3, "the ring does not alternate the domains: n1 <- %s", tr[1].prev);
    link_broke(w, 1);
    passes(5);
    cr_assert_eq(probes_of(0, before, 1, &ps), 1, "the suspect was not probed");
    cr_assert_eq(probes_of(0, before, w, &pw), 0, "the watcher was probed");
    probe_result(0, ps, false, false);
    cr_assert_eq(cnt[0].evicted, 1);
}

/* w (rackB) suspects the coordinator n0 (rackA); the committed confirmer k is rackB too (both
 * confirmers are outside the coordinator's domain): its failed probe of n0 counts only if it
 * reaches w. Returns k. */
static int correlated_coordinator_suspicion(const struct probe_req **pc,
                                            const struct probe_req **pw)
{
    cr_assert(settle(NN), "no round of %d", NN);
    cr_assert_eq(coordinator(), 0);
    int w = index_of(tr[0].prev);
    cr_assert(w == 2 || w == 3, "the ring does not alternate the domains: n0 <- %s", tr[0].prev);
    const struct rdzv_state *s = rdzv_current(nodes[w].rdzv, NULL);
    int kr = rdzv_coord_confirmer_of(s, 0, rdzv_self_member(nodes[w].rdzv)->group_rank), k = -1;
    for (int i = 0; i < NN; i++)
        if (rdzv_self_member(nodes[i].rdzv)->group_rank == kr)
            k = i;
    cr_assert(k == 2 || k == 3, "the confirmer n%d is not in rackB", k);
    cr_assert_neq(k, w);
    int before = tr[k].n_probes;
    link_broke(w, 0);
    passes(5);
    cr_assert_eq(probes_of(k, before, 0, pc), 1, "the confirmer did not probe the coordinator");
    cr_assert_eq(probes_of(k, before, w, pw), 1, "the confirmer did not probe the watcher");
    return k;
}

Test(corr, a_confirmer_in_the_watchers_domain_that_cannot_reach_it_keeps_the_coordinator)
{
    const struct probe_req *pc = NULL, *pw = NULL;
    int k = correlated_coordinator_suspicion(&pc, &pw);
    probe_result(k, pc, false, false);
    probe_result(k, pw, false, false);
    passes(3);
    cr_assert_eq(cnt[k].evicted, 0, "the coordinator was evicted on one domain's word");
    cr_assert(rdzv_is_coordinator(nodes[0].rdzv));
}

Test(corr, a_confirmer_in_the_watchers_domain_that_reaches_it_evicts_the_coordinator)
{
    const struct probe_req *pc = NULL, *pw = NULL;
    int k = correlated_coordinator_suspicion(&pc, &pw);
    probe_result(k, pc, false, false);
    cr_assert_eq(cnt[k].evicted, 0, "evicted before the watcher's probe ended");
    probe_result(k, pw, true, false);
    cr_assert_eq(cnt[k].evicted, 1);
}
