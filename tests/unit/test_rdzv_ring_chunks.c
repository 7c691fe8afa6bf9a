// SPDX-License-Identifier: Apache-2.0
/*
 * The liveness ring in chunk order (rendezvous/state.c, docs/protocol.md "The liveness ring"): a
 * chunk carries the ring's two links out of it, each member's neighbours inside it are the
 * entries beside it. Checked: the links every member decodes from its own chunk form one cycle
 * over all members (several N, chunks of one member, empty chunks, one non-empty chunk), agree
 * with rdzv_members_link_ring and gather; the ring costs O(1) ids a chunk; a chunk whose ring is
 * malformed, wraps wrongly or is the older per-member format is refused with a reason.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

/* n members (group rank i, node "n<i>") in nc chunks; member i's slot is slots(i). */
static struct rdzv_state make(size_t n, int nc, int64_t (*slot)(size_t i, int nc))
{
    struct rdzv_member *m = calloc(n, sizeof(*m));
    cr_assert(m);
    for (size_t i = 0; i < n; i++) {
        snprintf(m[i].node_id, sizeof(m[i].node_id), "node-%zu", i);
        snprintf(m[i].host, sizeof(m[i].host), "host-%zu", i);
        m[i].nproc = 1;
        m[i].group_rank = (int)i;
        m[i].rank_base = (int)i;
        m[i].slot = slot(i, nc);
    }
    return (struct rdzv_state){.round = 3,
                               .status = RDZV_RUNNING,
                               .members = m,
                               .n_members = n,
                               .group_world_size = (int)n,
                               .n_chunks = nc,
                               .world_size = (int)n,
                               .min_nodes = 1,
                               .max_nodes = (int)n,
                               .ring = true};
}

static int64_t slot_spread(size_t i, int nc)
{
    (void)nc;
    return 1000 + (int64_t)i; /* a cold start: consecutive */
}

/* chunk 1 empty, chunk 2 holds member 0 alone, the rest in chunks 0 and 3.. */
static int64_t slot_gaps(size_t i, int nc)
{
    if (i == 0)
        return 2 + 100 * (int64_t)nc;
    int64_t k = (int64_t)(i % 2 ? 0 : 3 % nc);
    return k + (int64_t)nc * (int64_t)(i + 1);
}

/* every member in the one chunk nc - 1 (the others empty) */
static int64_t slot_one_chunk(size_t i, int nc)
{
    return (int64_t)nc * (int64_t)(i + 7) + nc - 1;
}

static ssize_t find(const struct rdzv_member *m, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(m[i].node_id, id) == 0)
            return (ssize_t)i;
    return -1;
}

/* Encode every chunk, decode each as its members would, and check the ring they say. */
static void check_ring(size_t n, int nc, int64_t (*slot)(size_t, int))
{
    struct rdzv_state s = make(n, nc, slot);
    char **json = calloc((size_t)nc, sizeof(*json));
    struct ea_error err = {0};
    cr_assert_eq(rdzv_chunks_encode(&s, json, &err), 0, "%s", err.msg);
    struct rdzv_member **chunks = calloc((size_t)nc, sizeof(*chunks));
    size_t *counts = calloc((size_t)nc, sizeof(*counts));
    struct rdzv_member *got = calloc(n, sizeof(*got)); /* by group rank, as decoded */
    size_t empty = 0, single = 0;
    for (int k = 0; k < nc; k++) {
        int64_t round;
        int chunk;
        cr_assert_eq(rdzv_chunk_decode(json[k], strlen(json[k]), &round, &chunk, &chunks[k],
                                       &counts[k], &err),
                     0, "n %zu chunk %d: %s", n, k, err.msg);
        /* the same chunk as rdzv_chunk_encode() alone writes it */
        char *one = NULL;
        cr_assert_eq(rdzv_chunk_encode(&s, k, &one, &err), 0, "%s", err.msg);
        cr_assert_str_eq(one, json[k]);
        free(one);
        empty += counts[k] == 0;
        single += counts[k] == 1;
        for (size_t i = 0; i < counts[k]; i++)
            got[chunks[k][i].group_rank] = chunks[k][i];
    }
    if (slot == slot_gaps)
        cr_assert(empty >= 1 && single >= 1, "n %zu: %zu empty, %zu single chunks", n, empty,
                  single);
    /* one cycle over all members: n steps along next visit each once and come back */
    bool *seen = calloc(n, sizeof(*seen));
    size_t at = 0;
    for (size_t step = 0; step < n; step++) {
        cr_assert_not(seen[at], "n %zu: '%s' is visited twice", n, got[at].node_id);
        seen[at] = true;
        ssize_t nx = find(got, n, got[at].next);
        cr_assert(nx >= 0, "n %zu: '%s' has successor '%s', not a member", n, got[at].node_id,
                  got[at].next);
        cr_assert_eq(got[at].next_rank, got[nx].group_rank, "n %zu: the successor's rank", n);
        cr_assert_eq(got[at].next_slot, got[nx].slot, "n %zu: the successor's slot", n);
        cr_assert_str_eq(got[nx].prev, got[at].node_id, "n %zu: prev of next is itself", n);
        cr_assert_eq(got[nx].prev_rank, got[at].group_rank, "n %zu: the predecessor's rank", n);
        at = (size_t)nx;
    }
    cr_assert_eq(at, 0, "n %zu: the ring closes at its start", n);
    /* the coordinator's own members (rdzv_members_link_ring) say the same */
    cr_assert_eq(rdzv_members_link_ring(s.members, n, nc), 0);
    for (size_t i = 0; i < n; i++) {
        cr_assert_str_eq(s.members[i].next, got[i].next, "n %zu member %zu", n, i);
        cr_assert_str_eq(s.members[i].prev, got[i].prev, "n %zu member %zu", n, i);
        cr_assert_eq(s.members[i].next_rank, got[i].next_rank);
        cr_assert_eq(s.members[i].prev_rank, got[i].prev_rank);
        cr_assert_eq(s.members[i].next_slot, got[i].next_slot);
    }
    /* and gather (a full view) accepts it */
    struct rdzv_state d = s;
    d.members = NULL;
    d.n_members = 0;
    cr_assert_eq(rdzv_state_gather(&d, chunks, counts, &err), 0, "n %zu: %s", n, err.msg);
    rdzv_state_clear(&d);
    for (int k = 0; k < nc; k++) {
        free(json[k]);
        free(chunks[k]);
    }
    free(json);
    free(chunks);
    free(counts);
    free(got);
    free(seen);
    free(s.members);
}

Test(ring_chunks, one_cycle_over_all_members_from_the_chunks)
{
    static const size_t ns[] = {2, 3, 31, 33, 64, 100, 1000};
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        size_t n = ns[i];
        int nc = rdzv_chunk_count(n);
        check_ring(n, nc, slot_spread);
        check_ring(n, nc + 3, slot_gaps); /* an empty chunk and one of a single member */
        check_ring(n, nc + 1, slot_one_chunk);
    }
}

Test(ring_chunks, the_ring_costs_two_ids_a_chunk_not_two_a_member)
{
    struct rdzv_state s = make(10000, rdzv_chunk_count(10000), slot_spread);
    char *on = NULL, *off = NULL;
    cr_assert_eq(rdzv_chunk_encode(&s, 5, &on, NULL), 0);
    s.ring = false;
    cr_assert_eq(rdzv_chunk_encode(&s, 5, &off, NULL), 0);
    size_t extra = strlen(on) - strlen(off);
    cr_assert(extra <= 2 * (strlen("node-9999") + 8) + 24,
              "the ring adds %zu bytes to a chunk of 32: %s", extra, on);
    cr_assert(strstr(on, "\"ring\":[\"node-"), "%s", on);
    free(on);
    free(off);
    free(s.members);
}

static void expect_refused(const char *json, const char *needle)
{
    int64_t round;
    int chunk;
    struct rdzv_member *m = NULL;
    size_t n = 0;
    struct ea_error err = {0};
    cr_assert_eq(rdzv_chunk_decode(json, strlen(json), &round, &chunk, &m, &n, &err), -EBADMSG,
                 "accepted: %s", json);
    cr_assert(strstr(err.msg, needle), "message '%s' lacks '%s'", err.msg, needle);
}

#define CHUNK "{\"schema\":\"elastic-agent/v2\",\"round\":1,\"chunk\":0,"
#define TWO "\"m\":[[\"a\",\"h\",1,0,0,1],[\"b\",\"h\",1,1,1,3]]"

Test(ring_chunks, malformed_rings_and_the_older_format_are_refused)
{
    /* the group-rank ring of an older agent: links in every entry */
    expect_refused(CHUNK "\"m\":[[\"a\",\"h\",1,0,0,1,\"b\",\"b\"]]}", "older elastic-agent");
    expect_refused(CHUNK TWO ",\"ring\":[\"c\",2,5]}", "'ring' is not");
    expect_refused(CHUNK TWO ",\"ring\":[\"c\",2,5,\"d\",-1]}", "'ring' is not");
    expect_refused(CHUNK TWO ",\"ring\":[\"c\",2,-5,\"d\",3]}", "'ring' is not");
    expect_refused(CHUNK TWO ",\"ring\":[\"c\",2,\"d\",3]}", "'ring' is not");
    expect_refused(CHUNK TWO ",\"ring\":\"c\"}", "'ring' is not");
    expect_refused(CHUNK "\"m\":[],\"ring\":[\"c\",2,5,\"d\",3]}", "'ring' is not");
    expect_refused(CHUNK TWO ",\"ring\":[\"\",2,5,\"d\",3]}", "ring next");
    /* wrapping to its own first member on one side only, or a ring of one */
    expect_refused(CHUNK TWO ",\"ring\":[\"a\",0,1,\"d\",3]}", "does not close");
    expect_refused(CHUNK "\"m\":[[\"a\",\"h\",1,0,0,1]],\"ring\":[\"a\",0,1,\"a\",0]}",
                   "does not close");
    /* accepted: its one chunk, wrapping; and a chunk between two others */
    const char *ok[] = {CHUNK TWO ",\"ring\":[\"a\",0,1,\"b\",1]}",
                        CHUNK TWO ",\"ring\":[\"c\",2,5,\"d\",3]}"};
    for (size_t i = 0; i < 2; i++) {
        int64_t round;
        int chunk;
        struct rdzv_member *m = NULL;
        size_t n = 0;
        struct ea_error err = {0};
        cr_assert_eq(rdzv_chunk_decode(ok[i], strlen(ok[i]), &round, &chunk, &m, &n, &err), 0, "%s",
                     err.msg);
        cr_assert_str_eq(m[0].next, "b");
        cr_assert_str_eq(m[1].prev, "a");
        cr_assert_str_eq(m[1].next, i ? "c" : "a");
        cr_assert_eq(m[1].next_rank, i ? 2 : 0);
        cr_assert_eq(m[1].next_slot, i ? 5 : 1);
        cr_assert_eq(m[0].next_slot, 3);
        cr_assert_str_eq(m[0].prev, i ? "d" : "b");
        cr_assert_eq(m[0].prev_rank, i ? 3 : 1);
        free(m);
    }
}

/* Chunks that each decode but do not agree on one ring: gather refuses them. */
Test(ring_chunks, gather_refuses_chunks_whose_rings_disagree)
{
    struct rdzv_state s = make(64, 2, slot_spread);
    char *json[2];
    cr_assert_eq(rdzv_chunks_encode(&s, json, NULL), 0);
    struct rdzv_member *chunks[2];
    size_t counts[2];
    for (int k = 0; k < 2; k++) {
        int64_t round;
        int chunk;
        cr_assert_eq(rdzv_chunk_decode(json[k], strlen(json[k]), &round, &chunk, &chunks[k],
                                       &counts[k], NULL),
                     0);
        free(json[k]);
    }
    struct ea_error err = {0};
    struct rdzv_state d = s;
    d.members = NULL;
    d.n_members = 0;
    /* chunk 1's last member names a wrong successor (the ring would not close) */
    struct rdzv_member keep = chunks[1][counts[1] - 1];
    snprintf(chunks[1][counts[1] - 1].next, RDZV_ID_MAX, "%s", chunks[1][0].node_id);
    cr_assert_eq(rdzv_state_gather(&d, chunks, counts, &err), -EBADMSG);
    cr_assert(strstr(err.msg, "does not close"), "%s", err.msg);
    chunks[1][counts[1] - 1] = keep;
    /* a member in the middle says another rank for its successor */
    chunks[0][3].next_rank = 40;
    cr_assert_eq(rdzv_state_gather(&d, chunks, counts, &err), -EBADMSG);
    cr_assert(strstr(err.msg, "do not follow the chunk order"), "%s", err.msg);
    chunks[0][3].next_rank = chunks[0][4].group_rank;
    /* one chunk without the ring, the other with it */
    for (size_t i = 0; i < counts[1]; i++)
        chunks[1][i].next[0] = chunks[1][i].prev[0] = '\0';
    cr_assert_eq(rdzv_state_gather(&d, chunks, counts, &err), -EBADMSG);
    free(chunks[0]);
    free(chunks[1]);
    free(s.members);
}
