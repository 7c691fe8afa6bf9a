// SPDX-License-Identifier: Apache-2.0
/*
 * A burst of deaths at the coordinator (agent/node/node_confirm.c) without real time or sockets:
 * twelve nodes on one memory store, a fake clock and a fake ring transport (tests/unit/node_fx.c).
 * The probes that went unanswered in one pass are evicted together: one call revoking every lease
 * (the etcd backend has them in flight at once) and one write of the round's detect time, where
 * each eviction cost three store writes one after the other. A burst's round then waits a beat
 * after its last case, so a member whose watcher saw it silent a little later leaves in the same
 * round, and one seen at once (a rack) or a lone death does not wait.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node_fx.h"
#include "session.h"
#include "suspect.h"

#define NN 12
/* the fixture's probe deadline is 600 ms: a beat is a third of it */
#define BEAT_MS 200

static void setup(void)
{
    nfx_setup(NN, "/elastic/burstt/", 43000, NFX_PROBES);
}

TestSuite(burst, .init = setup, .fini = nfx_teardown, .timeout = 60);

/* The member `k` places after node i in the ring. */
static int after(int i, int k)
{
    for (; k > 0; k--)
        i = index_of(tr[i].next);
    return i;
}

/* The member k places after the coordinator dies; the member before it reports it. */
static int dies(int c, int k)
{
    int x = after(c, k);
    dead[x] = true;
    link_broke(after(c, k - 1), x);
    return x;
}

/* Every probe of node c from index `from` on of a dead member answered, in one pass's reports,
 * then one pass; how many there were. */
static int answer_dead(int c, int from)
{
    int n = 0;
    for (int k = from; k < tr[c].n_probes; k++)
        if (dead[index_of(tr[c].probes[k].peer)]) {
            probe_answer(c, &tr[c].probes[k], false, false);
            n++;
        }
    pass();
    return n;
}

/* Mutation (scripts/mutants.d/burst.sh): the revokes one call each -> four calls. */
Test(burst, one_pass_of_failed_probes_is_evicted_together)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int c = coordinator();
    int64_t r0 = round_of(c);
    int xs[4];
    for (int i = 0; i < 4; i++)
        xs[i] = dies(c, 2 + 2 * i); /* every other member: each has a live watcher */
    passes(5);
    int writes0 = writes_tried;
    cr_assert_eq(answer_dead(c, 0), 4, "the coordinator did not probe the four suspects");
    cr_assert_eq(cnt[c].evicted, 4, "evicted %d of 4", cnt[c].evicted);
    cr_assert_eq(revoke_batches, 1, "the four revokes took %d calls", revoke_batches);
    cr_assert_eq(revokes, 4);
    for (int i = 0; i < 4; i++)
        cr_assert_not(lease_valid(xs[i]), "n%d's lease was not revoked", xs[i]);
    /* the detect time once; no suspect key deleted one by one (they go with the round) */
    cr_assert_leq(writes_tried - writes0, 1, "the evictions cost %d store writes besides the revokes",
                  writes_tried - writes0);
    cr_assert(settle(NN - 4), "no round without the four");
    cr_assert_eq(round_of(c), r0 + 1, "the survivors went through more than one round");
}

/* The round goes on once no case is open: the time from the evicted members' answers until then
 * (passes 10 simulated ms apart, at most `max` ms). */
static int64_t until_round(int c, int64_t r, int64_t max)
{
    int64_t t0 = fc.now;
    while (round_of(c) == r && fc.now - t0 < max) {
        pass();
        advance(10);
    }
    cr_assert_neq(round_of(c), r, "no round %lld ms after the burst's evictions", (long long)max);
    return fc.now - t0;
}

/* Four members die, two and `gap` ms later two more; the coordinator's probes of them answered. */
static void trickle(int c, int64_t gap)
{
    dies(c, 2), dies(c, 4);
    passes(3);
    advance(gap);
    dies(c, 6), dies(c, 8);
    passes(3);
    cr_assert_eq(answer_dead(c, 0), 4);
}

/* Mutation (scripts/mutants.d/burst.sh): no wait after a burst's last case -> the round goes on
 * without the first four as soon as their keys are gone, and the fifth costs a second round. */
Test(burst, a_member_seen_silent_a_little_later_leaves_in_the_same_round)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int c = coordinator();
    int64_t r0 = round_of(c);
    trickle(c, 150); /* the burst arrives over 180 ms */
    int probed = tr[c].n_probes;
    passes(5); /* 50 ms: their keys gone, the round would go on now */
    cr_assert_eq(round_of(c), r0, "a round went on right after a burst that trickled in");
    dies(c, 10);
    passes(3);
    cr_assert_eq(answer_dead(c, probed), 1, "the fifth suspect was not probed");
    cr_assert_eq(cnt[c].evicted, 5);
    cr_assert(settle(NN - 5), "no round without the five");
    cr_assert_eq(round_of(c), r0 + 1, "the burst took %lld rounds", (long long)(round_of(c) - r0));
}

/* A burst seen in one pass (a rack) waits for nothing more. Mutation: the wait always a beat. */
Test(burst, a_burst_seen_at_once_does_not_wait)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int c = coordinator();
    int64_t r0 = round_of(c);
    for (int i = 0; i < 4; i++)
        dies(c, 2 + 2 * i);
    passes(5);
    cr_assert_eq(answer_dead(c, 0), 4);
    int64_t t = until_round(c, r0, 4 * BEAT_MS);
    cr_assert_lt(t, BEAT_MS / 2, "the round waited %lld ms", (long long)t);
}

/* A burst that trickles in for longer than a beat waits a beat after its last case, no more.
 * Mutations: the wait as long as the burst took, unbounded; the wait until the hold's cap. */
Test(burst, a_trickle_waits_a_beat_at_most)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int c = coordinator();
    int64_t r0 = round_of(c);
    trickle(c, 2 * BEAT_MS);
    int64_t t = until_round(c, r0, 10 * BEAT_MS);
    cr_assert_leq(t, BEAT_MS + 40, "the round waited %lld ms after the last case", (long long)t);
    cr_assert_geq(t, BEAT_MS / 2, "the round did not wait for the rest of the trickle (%lld ms)",
                  (long long)t);
}

/* Fewer than NODE_BURST_MIN cases are no burst, however they arrive: their round goes on once
 * their keys are gone. Mutation: every case a burst -> the round waits. */
Test(burst, two_deaths_apart_do_not_wait)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int c = coordinator();
    int64_t r0 = round_of(c);
    dies(c, 2);
    passes(3);
    advance(BEAT_MS / 2);
    dies(c, 6);
    passes(3);
    cr_assert_eq(answer_dead(c, 0), 2);
    int64_t t = until_round(c, r0, 4 * BEAT_MS);
    cr_assert_lt(t, BEAT_MS / 4, "the round waited %lld ms", (long long)t);
}
