// SPDX-License-Identifier: Apache-2.0
/*
 * The successor walk of the node unit (agent/node/node_walk.c) without real time or sockets:
 * twelve nodes on one memory store (one assignment chunk: the ring in its order), each a real
 * rendezvous session in a struct node, a fake clock and a fake ring transport that records the
 * probes the nodes ask for (the test answers them, out of order). A node whose successor died
 * probes the members after it and reports every one up to the first that answers: a run of 3 or
 * of 8 dead members is reported in one pass and leaves in one round, and so is one walked from
 * its end (backwards, from the member after it); the walk stops at the first live member and at
 * one it could not probe (no evidence); a walk of a round that has ended writes nothing.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node_fx.h"
#include "session.h"
#include "suspect.h"

#define NN 12

static void setup(void)
{
    nfx_setup(NN, "/elastic/walkt/", 41000, NFX_PROBES);
}

TestSuite(walk, .init = setup, .fini = nfx_teardown, .timeout = 60);

/* The ring's report to node w: its link to its successor (`outbound`) or predecessor broke. */
static void link_dir(int w, bool outbound)
{
    link_broke(w, index_of(outbound ? tr[w].next : tr[w].prev));
}

/* The member `k` places after node i in the ring (k < 0: before). */
static int after(int i, int k)
{
    for (; k > 0; k--)
        i = index_of(tr[i].next);
    for (; k < 0; k++)
        i = index_of(tr[i].prev);
    return i;
}

/* A round of NN; w, the coordinator's successor, watches the run of members after it. */
static int walker(void)
{
    cr_assert(settle(NN), "no round of %d", NN);
    return index_of(tr[coordinator()].next);
}

/* w's walk answered until it asks for no more probes, the last asked first (they run in
 * parallel): dead members refuse, the rest answer; `lying` (if >= 0) refuses although it lives,
 * `local` (if >= 0) cannot be probed. */
static void answer_walk(int w, int from, int lying, int local)
{
    while (from < tr[w].n_probes) {
        int to = tr[w].n_probes;
        for (int i = to - 1; i >= from; i--) {
            int x = index_of(tr[w].probes[i].peer);
            probe_result(w, &tr[w].probes[i], !dead[x] && x != lying, x == local);
        }
        from = to;
        passes(1);
    }
}

/* The coordinator probes exactly the k members after w (`dir` 1; -1: before it) and no one
 * else, they refuse, and the survivors go on in one round without them. */
static void leave_in_one_round(int w, int k, int dir, int64_t r0)
{
    int c = coordinator();
    passes(5);
    cr_assert_eq(tr[c].n_probes, k, "the coordinator probed %d suspects, not the run of %d",
                 tr[c].n_probes, k);
    for (int j = 1; j <= k; j++)
        cr_assert_not_null(probe_of(c, after(w, dir * j), 0),
                           "member %d of the run (n%d) unreported", j, after(w, dir * j));
    for (int i = 0; i < k; i++)
        probe_result(c, &tr[c].probes[i], false, false);
    cr_assert_eq(cnt[c].evicted, k);
    cr_assert(settle(NN - k), "no round without the run of %d", k);
    cr_assert_eq(round_of(c), r0 + 1, "the survivors went through more than one round");
}

/* A run of k consecutive members after w (`dir` 1; -1: before it) dies; only w's link to the
 * first breaks. */
static void run_dies(int w, int k, int dir)
{
    for (int j = 1; j <= k; j++)
        dead[after(w, dir * j)] = true;
    link_dir(w, dir > 0);
    passes(3);
}

Test(walk, a_run_of_three_dead_successors_is_reported_in_one_pass)
{
    int w = walker();
    int64_t r0 = round_of(w);
    run_dies(w, 3, 1);
    cr_assert_not_null(probe_of(w, after(w, 2), 0), "the walk did not probe past the successor");
    cr_assert_null(probe_of(w, after(w, 3), 0), "the walk probed on before its first was dead");
    answer_walk(w, 0, -1, -1);
    leave_in_one_round(w, 3, 1, r0);
}

Test(walk, a_run_of_eight_dead_successors_is_reported_in_one_pass)
{
    int w = walker();
    int64_t r0 = round_of(w);
    run_dies(w, 8, 1);
    answer_walk(w, 0, -1, -1);
    cr_assert_eq(cnt[w].suspect, 8, "the walker reported %d of the run of 8", cnt[w].suspect);
    leave_in_one_round(w, 8, 1, r0);
}

/* A run that ends at w's predecessor (it may begin at a chunk's first member, past which the
 * walker before it knows no order): w walks it backwards. */
Test(walk, a_run_of_dead_predecessors_is_reported_from_its_end)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int w = index_of(tr[coordinator()].prev);
    int64_t r0 = round_of(w);
    run_dies(w, 4, -1);
    answer_walk(w, 0, -1, -1);
    cr_assert_eq(cnt[w].suspect, 4, "the walker reported %d of the run of 4", cnt[w].suspect);
    leave_in_one_round(w, 4, -1, r0);
}

/* The first member that answers ends the run: one after it that does not answer (here one that
 * lies) is its own neighbours' to report, not the walker's. */
Test(walk, the_walk_stops_at_the_first_live_member)
{
    int w = walker();
    run_dies(w, 3, 1);
    int live = after(w, 4), beyond = after(w, 5);
    answer_walk(w, 0, beyond, -1);
    cr_assert_not_null(probe_of(w, beyond, 0));
    passes(5);
    cr_assert_eq(cnt[w].suspect, 3, "the walker reported %d, not the run of 3", cnt[w].suspect);
    int c = coordinator();
    cr_assert_null(probe_of(c, live, 0));
    cr_assert_null(probe_of(c, beyond, 0), "a member past the first live one was reported");
    cr_assert_eq(tr[c].n_probes, 3);
}

/* A probe that could not leave this node says nothing of its member: the walk ends there
 * without reporting it or anyone after it. */
Test(walk, a_probe_that_could_not_leave_this_node_stops_the_walk)
{
    int w = walker();
    run_dies(w, 4, 1);
    int unknown = after(w, 3);
    answer_walk(w, 0, -1, unknown);
    passes(5);
    cr_assert_eq(cnt[w].suspect, 2, "the walker reported %d, not the two before the local probe",
                 cnt[w].suspect);
    int c = coordinator();
    cr_assert_not_null(probe_of(c, after(w, 2), 0), "the member before the local probe unreported");
    cr_assert_null(probe_of(c, unknown, 0), "a member that could not be probed was reported");
    cr_assert_null(probe_of(c, after(w, 4), 0), "a member past the local probe was reported");
}

/* The round changes while the walk's probes are out: their answers write nothing. */
Test(walk, a_walk_of_the_previous_round_is_dropped_when_the_round_changes)
{
    int w = walker();
    int64_t r0 = round_of(w);
    int s = after(w, 1);
    run_dies(w, 3, 1);
    int walked = tr[w].n_probes;
    cr_assert_not_null(probe_of(w, after(w, 2), 0), "the walk did not probe past the successor");
    /* only the successor's own suspicion is confirmed: a round without it */
    int c = coordinator();
    const struct probe_req *p = probe_of(c, s, 0);
    cr_assert_not_null(p);
    probe_result(c, p, false, false);
    dead[after(w, 2)] = dead[after(w, 3)] = false; /* back, as far as the test goes */
    cr_assert(settle(NN - 1), "no round without the successor");
    cr_assert_eq(round_of(w), r0 + 1);
    int before = cnt[w].suspect;
    for (int i = 0; i < walked; i++) /* the old round's answers: all refused */
        probe_result(w, &tr[w].probes[i], false, false);
    passes(5);
    cr_assert_eq(cnt[w].suspect, before, "a walk of round %lld reported in round %lld",
                 (long long)r0, (long long)r0 + 1);
}
