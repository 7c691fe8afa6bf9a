// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv_ring_walk_order (rendezvous/ringwalk.h), the successor walk's order as a pure function:
 * the members after a suspected successor (before a predecessor) as one chunk gives them —
 * through the rest of the chunk and one past its end (its `ring` next or prev), around a chunk
 * that holds the whole ring up to the walker itself, nothing when the neighbour is beyond the
 * chunk, and never more than the bound (a rack).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "ringwalk.h"

/* n members "<p>0".."<p>n-1" as rdzv_chunk_decode links them: each to the next, the last to
 * `out` (another chunk's first member), or to the first when `out` is NULL (the whole ring); and
 * back, the first to "z9" (the previous chunk's last), or the last (the whole ring). */
static void chunk(struct rdzv_member *m, size_t n, const char *p, const char *out)
{
    memset(m, 0, n * sizeof(*m));
    for (size_t i = 0; i < n; i++) {
        snprintf(m[i].node_id, sizeof(m[i].node_id), "%s%zu", p, i);
        m[i].group_rank = (int)(100 + i);
        m[i].slot = (int64_t)(1000 + i);
    }
    for (size_t i = 0; i < n; i++) {
        const char *nx = i + 1 < n ? m[i + 1].node_id : out ? out : m[0].node_id;
        snprintf(m[i].next, sizeof(m[i].next), "%s", nx);
        m[i].next_rank = i + 1 < n ? m[i + 1].group_rank : out ? 7 : m[0].group_rank;
        m[i].next_slot = i + 1 < n ? m[i + 1].slot : out ? 77 : m[0].slot;
        const char *pv = i > 0 ? m[i - 1].node_id : out ? "z9" : m[n - 1].node_id;
        snprintf(m[i].prev, sizeof(m[i].prev), "%s", pv);
        m[i].prev_rank = i > 0 ? m[i - 1].group_rank : out ? 9 : m[n - 1].group_rank;
    }
}

Test(ringwalk, the_rest_of_the_chunk_then_its_ring_next)
{
    struct rdzv_member m[10];
    struct rdzv_walk_step w[RDZV_WALK_MAX];
    chunk(m, 10, "a", "b0");
    size_t k = rdzv_ring_walk_order(m, 10, "a2", "a3", false, w, RDZV_WALK_MAX);
    cr_assert_eq(k, 7);
    for (size_t i = 0; i < 6; i++) {
        char id[8];
        snprintf(id, sizeof(id), "a%zu", i + 4);
        cr_assert_str_eq(w[i].node_id, id);
        cr_assert_eq(w[i].group_rank, (int)(104 + i));
        cr_assert_eq(w[i].slot, (int64_t)(1004 + i));
    }
    /* the next chunk's first member, from the chunk's `ring`; past it the order is unknown */
    cr_assert_str_eq(w[6].node_id, "b0");
    cr_assert_eq(w[6].group_rank, 7);
    cr_assert_eq(w[6].slot, 77);
}

Test(ringwalk, nothing_when_the_successor_is_in_another_chunk)
{
    struct rdzv_member m[10];
    struct rdzv_walk_step w[RDZV_WALK_MAX];
    chunk(m, 10, "a", "b0");
    cr_assert_eq(rdzv_ring_walk_order(m, 10, "a9", "b0", false, w, RDZV_WALK_MAX), 0);
    cr_assert_eq(rdzv_ring_walk_order(m, 10, "a8", "a9", false, w, RDZV_WALK_MAX), 1);
    cr_assert_str_eq(w[0].node_id, "b0");
    cr_assert_eq(rdzv_ring_walk_order(m, 10, "a8", "", false, w, RDZV_WALK_MAX), 0);
}

Test(ringwalk, around_a_whole_ring_up_to_the_walker)
{
    struct rdzv_member m[12];
    struct rdzv_walk_step w[RDZV_WALK_MAX];
    chunk(m, 12, "c", NULL);
    size_t k = rdzv_ring_walk_order(m, 12, "c5", "c6", false, w, RDZV_WALK_MAX);
    cr_assert_eq(k, 10, "c7..c11, c0..c4: every member but the walker and its successor");
    cr_assert_str_eq(w[0].node_id, "c7");
    cr_assert_str_eq(w[4].node_id, "c11");
    cr_assert_str_eq(w[5].node_id, "c0");
    cr_assert_str_eq(w[9].node_id, "c4");
}

/* Backward from a predecessor: the chunk's members before it, then the previous chunk's last (the
 * chunk's `ring` prev). A run that begins at a chunk's first member is walked from its end. */
Test(ringwalk, backward_to_the_chunks_start_then_its_ring_prev)
{
    struct rdzv_member m[10];
    struct rdzv_walk_step w[RDZV_WALK_MAX];
    chunk(m, 10, "a", "b0");
    size_t k = rdzv_ring_walk_order(m, 10, "a4", "a3", true, w, RDZV_WALK_MAX);
    cr_assert_eq(k, 4);
    cr_assert_str_eq(w[0].node_id, "a2");
    cr_assert_eq(w[0].group_rank, 102);
    cr_assert_str_eq(w[2].node_id, "a0");
    cr_assert_str_eq(w[3].node_id, "z9");
    cr_assert_eq(w[3].group_rank, 9);
    cr_assert_eq(rdzv_ring_walk_order(m, 10, "a0", "z9", true, w, RDZV_WALK_MAX), 0);
    chunk(m, 10, "c", NULL); /* the whole ring: round to the walker */
    cr_assert_eq(rdzv_ring_walk_order(m, 10, "c1", "c0", true, w, RDZV_WALK_MAX), 8);
    cr_assert_str_eq(w[0].node_id, "c9");
    cr_assert_str_eq(w[7].node_id, "c2");
}

/* A chunk longer than a rack (as a writer may make it): the walk ends at the bound. */
Test(ringwalk, the_bound_holds)
{
    struct rdzv_member m[48];
    struct rdzv_walk_step w[48];
    chunk(m, 48, "d", NULL);
    cr_assert_eq(rdzv_ring_walk_order(m, 48, "d0", "d1", false, w, RDZV_WALK_MAX), RDZV_WALK_MAX);
    cr_assert_str_eq(w[RDZV_WALK_MAX - 1].node_id, "d33");
    cr_assert_eq(rdzv_ring_walk_order(m, 48, "d0", "d1", false, w, 3), 3);
}
