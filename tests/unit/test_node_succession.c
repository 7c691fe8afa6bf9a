// SPDX-License-Identifier: Apache-2.0
/*
 * Coordinator succession under correlated loss (issue 41; agent/node/node_ring.c
 * succession_probes), on the node unit's fixture (node_fx.h: no real time, no sockets). A rack
 * took the coordinator and another member: the member that confirms the coordinator's death
 * probes the round's other suspects in the same moment, and once it claims `coord` evicts those
 * that did not answer with no second probe's deadline; one that answered, or whose verdict is
 * older than a probe's deadline, is probed again.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "ea_time.h"
#include "plan.h"
#include "node_fx.h"
#include "session.h"
#include "suspect.h"

#define NN 6

static void setup(void)
{
    nfx_setup(NN, "/elastic/succt/", 42000, NFX_PROBES);
}

TestSuite(succession, .init = setup, .fini = nfx_teardown, .timeout = 60);

struct scene {
    int c, w, k3, x; /* the coordinator, its watcher, the confirmer, another member that died */
    const struct probe_req *pc, *px; /* k3's probes of c and of x */
};

static bool live_other(int i, const bool *gone, int k3)
{
    return i >= 0 && !gone[i] && i != k3;
}

/* A rack: the coordinator c, the member first in line to succeed it (it would claim at once) and
 * another member x die; c's other neighbour w reports c, and x's live neighbours report x (one of
 * them neither the confirmer k3 nor dead: the confirmer's own word alone is no second vantage
 * point). The passes after: k3 probes both, before it coordinates. */
static struct scene rack_with_the_coordinator(void)
{
    cr_assert(settle(NN), "no round of %d", NN);
    struct scene sc = {.c = coordinator()};
    int first = node_of_rank(rank_of(sc.c) == 0 ? 1 : 0);
    sc.w = index_of(tr[sc.c].next) == first ? index_of(tr[sc.c].prev) : index_of(tr[sc.c].next);
    cr_assert_gt(rdzv_takeover_delay_ms(rank_of(sc.w), NN, 0), 0, "the premise: w waits");
    sc.k3 = node_of_rank(rdzv_coord_confirmer(NN, rank_of(sc.c), rank_of(sc.w)));
    cr_assert(sc.k3 >= 0 && sc.k3 != sc.w && sc.k3 != sc.c && sc.k3 != first);
    bool gone[NN] = {0};
    gone[sc.c] = gone[first] = true;
    sc.x = -1;
    for (int i = 0; i < NN && sc.x < 0; i++)
        if (!gone[i] && i != sc.w && i != sc.k3 &&
            (live_other(index_of(tr[i].next), gone, sc.k3) ||
             live_other(index_of(tr[i].prev), gone, sc.k3)))
            sc.x = i;
    cr_assert_geq(sc.x, 0);
    dead[sc.c] = dead[first] = dead[sc.x] = true;
    link_broke(sc.w, sc.c);
    int nb[2] = {index_of(tr[sc.x].next), index_of(tr[sc.x].prev)};
    for (int k = 0; k < 2; k++)
        if (!dead[nb[k]])
            link_broke(nb[k], sc.x);
    passes(5);
    sc.pc = probe_of(sc.k3, sc.c, 0);
    sc.px = probe_of(sc.k3, sc.x, 0);
    cr_assert_not_null(sc.pc, "the confirmer did not probe the coordinator");
    cr_assert_not_null(sc.px, "the confirmer did not probe the other suspect before it coordinated");
    cr_assert_not(rdzv_is_coordinator(nodes[sc.k3].rdzv));
    return sc;
}

/* The coordinator's probe fails: k3 revokes its lease and claims `coord` (the clock stands
 * still); the number of probes k3 had asked for until then. */
static int claim(const struct scene *sc)
{
    probe_result(sc->k3, sc->pc, false, false);
    int before = tr[sc->k3].n_probes;
    for (int k = 0; k < 3; k++)
        pass();
    cr_assert(rdzv_is_coordinator(nodes[sc->k3].rdzv), "the confirmer did not take over");
    return before;
}

Test(succession, a_suspect_that_did_not_answer_is_evicted_at_the_claim_in_the_same_round)
{
    struct scene sc = rack_with_the_coordinator();
    int64_t r0 = round_of(sc.k3);
    probe_result(sc.k3, sc.px, false, false); /* before the coordinator's: k3 does not coordinate */
    cr_assert_eq(cnt[sc.k3].evicted, 0, "evicted before it coordinated");
    int before = claim(&sc);
    cr_assert_eq(cnt[sc.k3].evicted, 2, "the coordinator and the other suspect: %d evicted",
                 cnt[sc.k3].evicted);
    cr_assert_null(probe_of(sc.k3, sc.x, before), "probed the other suspect a second time");
    /* (the member first in line stays until its lease ends: nobody reported it here) */
    cr_assert(settle(NN - 2), "no round without both");
    cr_assert_eq(round_of(sc.k3), r0 + 1, "both left in one round");
}

Test(succession, a_suspect_that_answered_is_probed_again_not_evicted)
{
    struct scene sc = rack_with_the_coordinator();
    probe_result(sc.k3, sc.px, true, false); /* it answered this one */
    int before = claim(&sc);
    cr_assert_eq(cnt[sc.k3].evicted, 1, "evicted a member that answered");
    passes(3);
    const struct probe_req *again = probe_of(sc.k3, sc.x, before);
    cr_assert_not_null(again, "the coordinator did not probe it itself");
    probe_result(sc.k3, again, false, false);
    cr_assert_eq(cnt[sc.k3].evicted, 2);
}

Test(succession, a_verdict_older_than_a_probes_deadline_is_probed_again)
{
    struct scene sc = rack_with_the_coordinator();
    probe_result(sc.k3, sc.px, false, false);
    advance(700); /* past the probe's deadline (600 ms) before the coordinator's probe ends */
    int before = claim(&sc);
    cr_assert_eq(cnt[sc.k3].evicted, 1, "evicted on a stale verdict");
    passes(3);
    const struct probe_req *again = probe_of(sc.k3, sc.x, before);
    cr_assert_not_null(again, "a stale verdict was not probed again");
    probe_result(sc.k3, again, false, false);
    cr_assert_eq(cnt[sc.k3].evicted, 2);
}

/* The confirmer's own word alone is no second vantage point, before it coordinates as after: a
 * member only it reported (its other neighbour died with the rack) is neither probed early nor
 * evicted at the claim. */
Test(succession, a_suspect_only_the_confirmer_reported_is_not_evicted_at_the_claim)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int c = coordinator();
    int first = node_of_rank(rank_of(c) == 0 ? 1 : 0);
    int w = index_of(tr[c].next) == first ? index_of(tr[c].prev) : index_of(tr[c].next);
    int k3 = node_of_rank(rdzv_coord_confirmer(NN, rank_of(c), rank_of(w)));
    int x = -1;
    for (int i = 0; i < NN && x < 0; i++) {
        int a = index_of(tr[i].next), b = index_of(tr[i].prev);
        if (i != c && i != first && i != w && i != k3 && (a == k3 || b == k3) &&
            (a == c || a == first || b == c || b == first))
            x = i;
    }
    cr_assert_geq(x, 0, "no member between the confirmer and the rack");
    dead[c] = dead[first] = dead[x] = true;
    link_broke(w, c);
    link_broke(k3, x);
    passes(5);
    const struct probe_req *pc = probe_of(k3, c, 0);
    cr_assert_not_null(pc);
    cr_assert_null(probe_of(k3, x, 0), "probed on its own word alone");
    probe_result(k3, pc, false, false);
    for (int k = 0; k < 3; k++)
        pass();
    cr_assert(rdzv_is_coordinator(nodes[k3].rdzv));
    passes(3);
    cr_assert_eq(cnt[k3].evicted, 1, "evicted a member on its own word alone");
}
