// SPDX-License-Identifier: Apache-2.0
/*
 * Failure domains (issue 41, rendezvous/domain.c): the label check, the node record's "domain"
 * and the commit record's "confirm" (round trips, absent = none, refusals), the ring placement
 * (a rack of 8 of 32 consecutive members has no two ring neighbours in it; no domains: the links
 * of before; uneven domains: as few same-domain neighbours as the counts allow; group ranks never
 * move) and the cross-domain confirmer of a suspicion of the coordinator (outside the coordinator's
 * rack; today's answer without domains or for another coordinator).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain.h"
#include "state.h"
#include "suspect.h"

/* n members (group rank i, node "node-<i>", slot 1000 + i: a cold start) in nc chunks, member
 * i in domain dom(i) ("" none). */
static struct rdzv_state make(size_t n, int nc, const char *(*dom)(size_t i))
{
    struct rdzv_member *m = calloc(n, sizeof(*m));
    cr_assert(m);
    for (size_t i = 0; i < n; i++) {
        snprintf(m[i].node_id, sizeof(m[i].node_id), "node-%zu", i);
        snprintf(m[i].host, sizeof(m[i].host), "host-%zu", i);
        snprintf(m[i].domain, sizeof(m[i].domain), "%s", dom ? dom(i) : "");
        m[i].nproc = 1;
        m[i].group_rank = (int)i;
        m[i].rank_base = (int)i;
        m[i].slot = 1000 + (int64_t)i;
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

static const char *rack_of_8_first(size_t i)
{
    return i < 8 ? "rack-a" : "";
}

static const char *racks_of_8(size_t i)
{
    static const char *const r[] = {"rack-a", "rack-b", "rack-c", "rack-d"};
    return r[(i / 8) % 4];
}

static const char *rack_of_32_first(size_t i)
{
    return i < 32 ? "rack-a" : "";
}

/* two chunks (even ranks, odd ranks): the even one alternates rack-a and rack-b and ends in
 * rack-b; the odd one starts with rack-b on its own: only the front rule keeps them apart */
static const char *crossed(size_t i)
{
    if (i % 2 == 0)
        return i < 16 ? "rack-a" : "rack-b";
    return i == 1 || i == 3 ? "rack-b" : i == 5 ? "rack-c" : "";
}

static const char *all_one(size_t i)
{
    (void)i;
    return "zone-1";
}

/* Encode every chunk, decode each as its members would and walk the ring they say: ret_ring[j]
 * is the group rank at step j from rank 0. Also checks that no member's rank, rank base or
 * slot changed. */
static void ring_of(const struct rdzv_state *s, int *ret_ring)
{
    size_t n = s->n_members, nc = (size_t)s->n_chunks;
    char **json = calloc(nc, sizeof(*json));
    struct ea_error err = {0};
    cr_assert_eq(rdzv_chunks_encode(s, json, &err), 0, "%s", err.msg);
    struct rdzv_member *got = calloc(n, sizeof(*got));
    struct rdzv_member **chunks = calloc(nc, sizeof(*chunks));
    size_t *counts = calloc(nc, sizeof(*counts));
    for (size_t k = 0; k < nc; k++) {
        int64_t round;
        int chunk;
        cr_assert_eq(rdzv_chunk_decode(json[k], strlen(json[k]), &round, &chunk, &chunks[k],
                                       &counts[k], &err),
                     0, "%s", err.msg);
        for (size_t i = 0; i < counts[k]; i++) {
            const struct rdzv_member *c = &chunks[k][i];
            cr_assert(c->group_rank >= 0 && (size_t)c->group_rank < n);
            cr_assert_str_eq(c->node_id, s->members[c->group_rank].node_id, "ranks never move");
            cr_assert_eq(c->rank_base, s->members[c->group_rank].rank_base);
            cr_assert_eq(c->slot, s->members[c->group_rank].slot);
            got[c->group_rank] = *c;
        }
    }
    /* a full view (the coordinator, status) accepts the chunks' ring */
    struct rdzv_state d = *s;
    d.members = NULL;
    d.n_members = 0;
    cr_assert_eq(rdzv_state_gather(&d, chunks, counts, &err), 0, "%s", err.msg);
    rdzv_state_clear(&d);
    int at = 0;
    for (size_t j = 0; j < n; j++) {
        ret_ring[j] = at;
        at = got[at].next_rank;
    }
    cr_assert_eq(at, 0, "one cycle over all members");
    /* the coordinator's own links (rdzv_members_link_ring) say the same */
    struct rdzv_member *m = calloc(n, sizeof(*m));
    memcpy(m, s->members, n * sizeof(*m));
    cr_assert_eq(rdzv_members_link_ring(m, n, s->n_chunks), 0);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(m[i].next_rank, got[i].next_rank, "member %zu", i);
    free(m);
    for (size_t k = 0; k < nc; k++) {
        free(json[k]);
        free(chunks[k]);
    }
    free(json);
    free(chunks);
    free(counts);
    free(got);
}

/* Ring neighbours (cyclic) in one domain. */
static size_t same_domain_links(const struct rdzv_state *s, const int *ring)
{
    size_t n = s->n_members, bad = 0;
    for (size_t j = 0; j < n; j++) {
        const char *a = s->members[ring[j]].domain, *b = s->members[ring[(j + 1) % n]].domain;
        bad += a[0] && strcmp(a, b) == 0;
    }
    return bad;
}

Test(domain, labels)
{
    cr_assert(rdzv_domain_ok("rack-7"));
    cr_assert(rdzv_domain_ok("us-east-1a"));
    cr_assert(rdzv_domain_ok("topology.kubernetes.io/zone:eu_1.b"));
    char max[RDZV_DOMAIN_MAX];
    memset(max, 'x', sizeof(max) - 1);
    max[sizeof(max) - 1] = '\0';
    cr_assert(rdzv_domain_ok(max), "63 characters");
    char over[RDZV_DOMAIN_MAX + 1];
    memset(over, 'x', sizeof(over) - 1);
    over[sizeof(over) - 1] = '\0';
    cr_assert_not(rdzv_domain_ok(over), "64 characters");
    cr_assert_not(rdzv_domain_ok(""));
    cr_assert_not(rdzv_domain_ok(NULL));
    cr_assert_not(rdzv_domain_ok("rack 7"));
    cr_assert_not(rdzv_domain_ok("rack\n7"));
    cr_assert_not(rdzv_domain_ok("rack\"7"));
    cr_assert_not(rdzv_domain_ok("r\xc3\xa4ck"));
}

Test(domain, node_record_round_trip_absent_and_refused)
{
    struct rdzv_node n = {.node_id = "n1", .host = "h", .addr = "10.0.0.1", .nproc = 1, .pid = 2,
                          .domain = "rack-7"},
                     d = {0};
    char *json = NULL;
    struct ea_error err = {0};
    cr_assert_eq(rdzv_node_encode(&n, &json, NULL), 0);
    cr_assert(strstr(json, "\"domain\":\"rack-7\""), "%s", json);
    cr_assert_eq(rdzv_node_decode(json, strlen(json), &d, &err), 0, "%s", err.msg);
    cr_assert_str_eq(d.domain, "rack-7");
    free(json);
    /* an older agent's record has none: it still decodes, with no domain */
    const char *old = "{\"schema\":\"elastic-agent/v2\",\"node\":\"n\",\"host\":\"h\","
                      "\"addr\":\"a\",\"nproc\":1,\"pid\":1}";
    cr_assert_eq(rdzv_node_decode(old, strlen(old), &d, &err), 0, "%s", err.msg);
    cr_assert_str_eq(d.domain, "");
    n.domain[0] = '\0';
    cr_assert_eq(rdzv_node_encode(&n, &json, NULL), 0);
    cr_assert_null(strstr(json, "domain"), "no domain, no field: %s", json);
    free(json);
    /* foreign values: not a string, empty, a bad character, too long */
    char big[200];
    snprintf(big, sizeof(big), "%0*d", RDZV_DOMAIN_MAX, 0);
    const char *vals[] = {"7", "\"\"", "\"rack 7\"", "\"a\\tb\"", NULL};
    char rec[512];
    for (size_t i = 0; i < 5; i++) {
        char v[100];
        snprintf(v, sizeof(v), vals[i] ? "%s" : "\"%s\"", vals[i] ? vals[i] : big);
        snprintf(rec, sizeof(rec),
                 "{\"schema\":\"elastic-agent/v2\",\"node\":\"n\",\"host\":\"h\",\"addr\":\"a\","
                 "\"nproc\":1,\"pid\":1,\"domain\":%s}",
                 v);
        memset(&err, 0, sizeof(err));
        cr_assert_eq(rdzv_node_decode(rec, strlen(rec), &d, &err), -EBADMSG, "%s", rec);
        cr_assert(strstr(err.msg, "domain"), "%s: %s", rec, err.msg);
    }
}

Test(domain, commit_record_confirm_round_trip_absent_and_refused)
{
    struct rdzv_state s = {.round = 4, .status = RDZV_RUNNING, .group_world_size = 32,
                           .n_chunks = 1, .world_size = 32, .min_nodes = 1, .max_nodes = 64,
                           .n_confirm = 2, .confirm_coord = 0, .confirm = {8, 16}},
                      d = {0};
    char *json = NULL;
    struct ea_error err = {0};
    cr_assert_eq(rdzv_state_encode(&s, &json, &err), 0);
    cr_assert(strstr(json, "\"confirm\":[0,8,16]"), "%s", json);
    cr_assert_eq(rdzv_state_decode(json, strlen(json), &d, &err), 0, "%s", err.msg);
    cr_assert_eq(d.n_confirm, 2);
    cr_assert_eq(d.confirm_coord, 0);
    cr_assert_eq(d.confirm[0], 8);
    cr_assert_eq(d.confirm[1], 16);
    free(json);
    s.n_confirm = 1;
    cr_assert_eq(rdzv_state_encode(&s, &json, &err), 0);
    cr_assert_eq(rdzv_state_decode(json, strlen(json), &d, &err), 0, "%s", err.msg);
    cr_assert_eq(d.n_confirm, 1);
    cr_assert_eq(d.confirm[0], 8);
    free(json);
    s.n_confirm = 0; /* none: no field, as an older writer's */
    cr_assert_eq(rdzv_state_encode(&s, &json, &err), 0);
    cr_assert_null(strstr(json, "confirm"), "%s", json);
    cr_assert_eq(rdzv_state_decode(json, strlen(json), &d, &err), 0, "%s", err.msg);
    cr_assert_eq(d.n_confirm, 0);
    free(json);
    const char *bad[] = {"[0]", "[0,1,2,3]", "[0,32]", "[0,-1]", "[0,0]", "[0,5,5]", "[0,\"x\"]",
                         "{}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char rec[512];
        snprintf(rec, sizeof(rec),
                 "{\"schema\":\"elastic-agent/v2\",\"round\":4,\"status\":\"running\","
                 "\"members\":32,\"chunks\":1,\"world_size\":32,\"restart_count\":0,"
                 "\"max_restarts\":0,\"min\":1,\"max\":64,\"confirm\":%s}",
                 bad[i]);
        memset(&err, 0, sizeof(err));
        cr_assert_eq(rdzv_state_decode(rec, strlen(rec), &d, &err), -EBADMSG, "%s", bad[i]);
        cr_assert(strstr(err.msg, "confirm"), "%s: %s", bad[i], err.msg);
    }
}

Test(placement, a_rack_of_8_of_32_has_no_two_ring_neighbours_in_it)
{
    int ring[32];
    struct rdzv_state s = make(32, 1, rack_of_8_first);
    ring_of(&s, ring);
    cr_assert_eq(same_domain_links(&s, ring), 0, "ranks 0-7 of one rack are ring neighbours");
    free(s.members);
    /* four racks of 8 consecutive ranks each */
    s = make(32, 1, racks_of_8);
    ring_of(&s, ring);
    cr_assert_eq(same_domain_links(&s, ring), 0);
    free(s.members);
}

Test(placement, chunk_boundaries_are_kept_apart_too)
{
    /* 128 members in 4 chunks (member i in chunk i mod 4): a rack of 32 consecutive ranks puts 8
     * in every chunk, and the links between chunks must not join two of them either */
    int ring[128];
    struct rdzv_state s = make(128, 4, rack_of_32_first);
    ring_of(&s, ring);
    cr_assert_eq(same_domain_links(&s, ring), 0);
    free(s.members);
    int ring32[32];
    s = make(32, 2, crossed);
    ring_of(&s, ring32);
    cr_assert_eq(same_domain_links(&s, ring32), 0, "chunk 1's first member beside chunk 0's last");
    free(s.members);
    /* four racks, each of four runs of 8 consecutive ranks */
    s = make(128, 4, racks_of_8);
    ring_of(&s, ring);
    cr_assert_eq(same_domain_links(&s, ring), 0);
    free(s.members);
}

Test(placement, no_domains_or_one_domain_leave_the_links_of_before)
{
    const char *(*doms[])(size_t) = {NULL, all_one};
    for (size_t v = 0; v < 2; v++) {
        for (int nc = 1; nc <= 4; nc++) {
            int ring[128];
            struct rdzv_state s = make(128, nc, doms[v]);
            ring_of(&s, ring);
            /* chunk order with each chunk in rank order: chunk k holds ranks k, k+nc, ... */
            size_t j = 0;
            for (int k = 0; k < nc; k++)
                for (int r = k; r < 128; r += nc, j++)
                    cr_assert_eq(ring[j], r, "domains %zu, %d chunks, step %zu", v, nc, j);
            free(s.members);
        }
    }
}

/* The fewest same-domain neighbours n items with these counts can have in a line. */
static size_t least_clashes(const size_t *count, size_t nd, size_t n)
{
    size_t max = 0;
    for (size_t i = 0; i < nd; i++)
        max = count[i] > max ? count[i] : max;
    return max > n - max + 1 ? max - (n - max + 1) : 0;
}

Test(placement, uneven_domains_clash_only_as_the_counts_force)
{
    static const struct {
        const char *doms; /* one letter a member, '.' none */
    } cases[] = {{"AAAAABBBC"}, {"AAAAAABB"}, {"ABABAB"},      {"AAAA....."},
                 {"A.A.A.A"},   {"AAABBBCCCDDDEEE"},             {"AAAAAAAAAAAAB"},
                 {"CBACBAAAAAA"}, {"A"},      {""}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const char *d = cases[c].doms;
        size_t n = strlen(d), count[128] = {0}, order[64];
        char lab[64][2];
        const char *dom[64];
        for (size_t i = 0; i < n; i++) {
            lab[i][0] = d[i] == '.' ? '\0' : d[i];
            lab[i][1] = '\0';
            dom[i] = lab[i];
            count[(unsigned char)d[i]] += d[i] != '.';
        }
        cr_assert_eq(rdzv_ring_order(dom, n, order), 0);
        bool seen[64] = {false};
        size_t clash = 0;
        for (size_t j = 0; j < n; j++) {
            cr_assert(order[j] < n && !seen[order[j]], "'%s': not a permutation", d);
            seen[order[j]] = true;
            if (j && dom[order[j]][0] && strcmp(dom[order[j]], dom[order[j - 1]]) == 0)
                clash++;
        }
        cr_assert_eq(clash, least_clashes(count, 128, n), "'%s': %zu clashes", d, clash);
        /* within a domain the rank order is kept */
        for (size_t j = 0; j < n; j++)
            for (size_t k = j + 1; k < n; k++)
                if (dom[order[j]][0] && strcmp(dom[order[j]], dom[order[k]]) == 0)
                    cr_assert_lt(order[j], order[k], "'%s'", d);
    }
}

Test(placement, the_front_moves_one_interior_member_never_the_last)
{
    /* the previous chunk ended in A: the first interior member that fits comes to the front */
    const char *dom[] = {"A", "B", "C", "B"};
    size_t order[4] = {0, 1, 2, 3};
    cr_assert(rdzv_ring_front(dom, 4, "A", order));
    cr_assert_eq(order[0], 1);
    cr_assert_eq(order[1], 0);
    cr_assert_eq(order[3], 3, "the last stays: the next chunk's start depends on it");
    /* no member may move without a new clash inside: left as it is */
    const char *alt[] = {"A", "B", "A", "B"};
    size_t o2[4] = {0, 1, 2, 3};
    cr_assert_not(rdzv_ring_front(alt, 4, "A", o2));
    for (size_t j = 0; j < 4; j++)
        cr_assert_eq(o2[j], j);
    /* apart already, or nothing before it: nothing moves */
    cr_assert(rdzv_ring_front(alt, 4, "B", o2));
    cr_assert(rdzv_ring_front(alt, 4, NULL, o2));
    cr_assert(rdzv_ring_front(alt, 4, "", o2));
    for (size_t j = 0; j < 4; j++)
        cr_assert_eq(o2[j], j);
    /* two members: nothing interior to move */
    size_t o3[2] = {0, 1};
    cr_assert_not(rdzv_ring_front(dom, 2, "A", o3));
    cr_assert_eq(o3[0], 0);
}

/* One departure changes the links of its own chunk and at most the front of the next one: with
 * two domains spread at random over 10,000 members, never more than two chunks' worth of
 * successors (a chunk's order that followed the one before it re-linked 1,907 on average). */
static const char *two_zones(size_t i)
{
    return (i * 7919) % 2 ? "zone-a" : "zone-b";
}

Test(placement, a_departure_relinks_two_chunks_at_most)
{
    size_t n = 10000;
    int nc = rdzv_chunk_count(n);
    struct rdzv_state s = make(n, nc, two_zones);
    cr_assert_eq(rdzv_members_link_ring(s.members, n, nc), 0);
    struct rdzv_member *b = calloc(n, sizeof(*b));
    for (size_t gone = 0; gone < n; gone += 331) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (i != gone) {
                b[k] = s.members[i];
                b[k].group_rank = (int)k;
                k++;
            }
        cr_assert_eq(rdzv_members_link_ring(b, k, rdzv_chunk_count_next(nc, k)), 0);
        size_t changed = 0;
        for (size_t i = 0, j = 0; i < n; i++)
            if (i != gone)
                changed += strcmp(s.members[i].next, b[j++].next) != 0;
        cr_assert_leq(changed, 2 * RDZV_CHUNK_NODES, "member %zu left: %zu successors changed",
                      gone, changed);
    }
    free(b);
    free(s.members);
}

/* Members 0..n-1 in rank order, member i in domain dom(i). */
static struct rdzv_member *members(size_t n, const char *(*dom)(size_t))
{
    struct rdzv_member *m = calloc(n, sizeof(*m));
    for (size_t i = 0; i < n; i++) {
        m[i].group_rank = (int)i;
        snprintf(m[i].domain, sizeof(m[i].domain), "%s", dom ? dom(i) : "");
    }
    return m;
}

static const char *two_racks(size_t i)
{
    return i < 8 ? "rack-a" : "rack-b";
}

Test(confirm, the_coordinators_rack_confirms_nothing)
{
    /* the coordinator (rank 0) and ranks 1-7 in rack-a: today's confirmer is rank 1, which dies
     * with the rack; the committed ones are outside it, in two different racks */
    struct rdzv_member *m = members(32, racks_of_8);
    int c[2];
    rdzv_pick_confirmers(m, 32, 0, c);
    cr_assert_eq(c[0], 8, "the lowest rank outside rack-a");
    cr_assert_eq(c[1], 16, "the lowest outside rack-a and rack-b");
    struct rdzv_state s = {.group_world_size = 32, .n_confirm = 2, .confirm_coord = 0,
                           .confirm = {c[0], c[1]}};
    for (int by = 1; by < 32; by++) {
        int who = rdzv_coord_confirmer_of(&s, 0, by);
        cr_assert(who > 0 && who != by, "watcher %d: confirmer %d", by, who);
        cr_assert_str_neq(m[who].domain, "rack-a", "watcher %d: confirmer %d in the rack", by,
                          who);
    }
    cr_assert_eq(rdzv_coord_confirmer_of(&s, 0, 31), 8, "the ring's predecessor of rank 0");
    cr_assert_eq(rdzv_coord_confirmer_of(&s, 0, 8), 16, "not the watcher itself");
    /* a coordinator in the middle of the order (a successor's round) */
    rdzv_pick_confirmers(m, 32, 17, c);
    cr_assert(c[0] >= 0 && strcmp(m[c[0]].domain, "rack-c") != 0);
    cr_assert(c[1] >= 0 && strcmp(m[c[1]].domain, "rack-c") != 0 &&
              strcmp(m[c[1]].domain, m[c[0]].domain) != 0);
    free(m);
    /* two domains: both confirmers in the other one */
    m = members(32, two_racks);
    rdzv_pick_confirmers(m, 32, 0, c);
    cr_assert_eq(c[0], 8);
    cr_assert_eq(c[1], 9);
    free(m);
    /* a coordinator without a domain: nothing to be outside of, nobody committed */
    m = members(32, racks_of_8);
    m[0].domain[0] = '\0';
    rdzv_pick_confirmers(m, 32, 0, c);
    cr_assert_eq(c[0], -1);
    free(m);
    /* members without a domain may be anywhere, the coordinator's rack too: never chosen */
    m = members(32, rack_of_8_first);
    rdzv_pick_confirmers(m, 32, 0, c);
    cr_assert_eq(c[0], -1);
    cr_assert_eq(c[1], -1);
    snprintf(m[20].domain, sizeof(m[20].domain), "rack-b");
    rdzv_pick_confirmers(m, 32, 0, c);
    cr_assert_eq(c[0], 20);
    cr_assert_eq(c[1], -1);
    free(m);
}

Test(confirm, without_domains_the_answer_of_before)
{
    struct rdzv_member *m = members(32, NULL);
    int c[2];
    rdzv_pick_confirmers(m, 32, 0, c);
    cr_assert_eq(c[0], -1, "no domains: nobody committed");
    free(m);
    m = members(32, all_one);
    rdzv_pick_confirmers(m, 32, 0, c);
    cr_assert_eq(c[0], -1, "one domain: nobody outside it");
    free(m);
    for (int n = 1; n <= 9; n++) {
        struct rdzv_state s = {.group_world_size = n};
        for (int coord = 0; coord < n; coord++)
            for (int by = 0; by < n; by++)
                if (by != coord)
                    cr_assert_eq(rdzv_coord_confirmer_of(&s, coord, by),
                                 rdzv_coord_confirmer(n, coord, by), "n %d coord %d by %d", n,
                                 coord, by);
    }
    cr_assert_eq(rdzv_coord_confirmer_of(NULL, 0, 1), -1);
    /* committed for another coordinator (a successor took over in that round): as before */
    struct rdzv_state s = {.group_world_size = 32, .n_confirm = 2, .confirm_coord = 0,
                           .confirm = {8, 16}};
    cr_assert_eq(rdzv_coord_confirmer_of(&s, 3, 5), rdzv_coord_confirmer(32, 3, 5));
    /* the only committed one is the watcher: as before */
    s.n_confirm = 1;
    cr_assert_eq(rdzv_coord_confirmer_of(&s, 0, 8), rdzv_coord_confirmer(32, 0, 8));
    /* a round of two: the watcher confirms it itself */
    struct rdzv_state two = {.group_world_size = 2, .n_confirm = 1, .confirm_coord = 0,
                             .confirm = {1}};
    cr_assert_eq(rdzv_coord_confirmer_of(&two, 0, 1), -1);
}

/* Two vantage points in one failure domain are one when the suspect is outside it (a domain cut
 * at its switch finds everybody outside dead): correlated. A suspect in the prober's own domain,
 * a watcher (or a second watcher, `also`) outside it, or no domain at all: independent. */
Test(confirm, correlated_evidence_is_one_domains_word)
{
    cr_assert(rdzv_correlated("rackA", "rackA", NULL, "rackB"));
    cr_assert(rdzv_correlated("rackA", "rackA", "rackA", "rackB"));
    cr_assert(rdzv_correlated("rackA", "rackA", NULL, ""), "a suspect without a domain is apart");
    cr_assert_not(rdzv_correlated("rackA", "rackA", NULL, "rackA"), "a death inside the rack");
    cr_assert_not(rdzv_correlated("rackA", "rackB", NULL, "rackB"), "a watcher outside");
    cr_assert_not(rdzv_correlated("rackA", "rackA", "rackB", "rackB"), "a second word outside");
    cr_assert_not(rdzv_correlated("rackA", "rackA", "", "rackB"), "a second word, no domain");
    cr_assert_not(rdzv_correlated("", "", NULL, "rackB"), "no domains");
    cr_assert_not(rdzv_correlated(NULL, NULL, NULL, NULL), "no domains");
}
