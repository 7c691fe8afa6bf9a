// SPDX-License-Identifier: Apache-2.0
/* rdzv assignment chunks (assign/<k>): which chunk a member goes to, their JSON codec with the
 * liveness ring's links in chunk order, and gathering a commit's members from its chunks, with
 * validation (a corrupt or foreign chunk is reported, not trusted). */
#include "state.h"
#include "domain.h"
#include "state_internal.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rdzv_chunk_count(size_t n_members)
{
    return (int)((n_members + RDZV_CHUNK_NODES - 1) / RDZV_CHUNK_NODES);
}

bool rdzv_chunk_count_ok(int n_chunks, size_t n_members)
{
    if (n_members == 0)
        return n_chunks == 0;
    return n_chunks >= rdzv_chunk_count(n_members) &&
           (size_t)n_chunks <= (n_members + RDZV_CHUNK_NODES / 2 - 1) / (RDZV_CHUNK_NODES / 2);
}

int rdzv_chunk_count_next(int prev, size_t n_members)
{
    return rdzv_chunk_count_ok(prev, n_members) ? prev : rdzv_chunk_count(n_members);
}

int rdzv_chunk_of(int64_t slot, int n_chunks)
{
    return n_chunks > 0 ? (int)((uint64_t)slot % (uint64_t)n_chunks) : 0;
}

/* Within each chunk, the ring order of its members idx[from..end[k]) (issue 41): members of one
 * failure domain apart where the domains allow (rdzv_ring_order, from the chunk's own members
 * only), then each chunk's first member away from the previous non-empty chunk's last
 * (rdzv_ring_front, which never moves a last member). So a membership change re-places its own
 * chunk and at most the front of the next one, never a cascade over the ring. Ranks do not
 * change, only the order a chunk lists its members in, which is the ring's. Nothing moves when
 * no member names a domain. */
static int chunk_place(const struct rdzv_member *m, size_t n, size_t k_max, size_t *idx,
                       const size_t *end)
{
    bool any = false;
    for (size_t i = 0; i < n && !any; i++)
        any = m[i].domain[0] != '\0';
    if (!any)
        return 0;
    const char **dom = malloc((n ? n : 1) * sizeof(*dom));
    size_t *ord = malloc((n ? n : 1) * sizeof(*ord)), *was = malloc((n ? n : 1) * sizeof(*was));
    int r = dom && ord && was ? 0 : -ENOMEM;
    for (size_t k = 0, from = 0; r == 0 && k < k_max; from = end[k++]) {
        size_t c = end[k] - from;
        for (size_t j = 0; j < c; j++)
            dom[j] = m[idx[from + j]].domain, was[j] = idx[from + j];
        if (c && (r = rdzv_ring_order(dom, c, ord)) == 0)
            for (size_t j = 0; j < c; j++)
                idx[from + j] = was[ord[j]];
    }
    /* the fronts, each after the last of the non-empty chunk before it (wrapping) */
    const char *after = NULL;
    for (size_t k = k_max; r == 0 && k-- > 0 && !after;)
        if (end[k] > (k ? end[k - 1] : 0))
            after = m[idx[end[k] - 1]].domain;
    for (size_t k = 0, from = 0; r == 0 && k < k_max; from = end[k++]) {
        size_t c = end[k] - from;
        if (!c)
            continue;
        for (size_t j = 0; j < c; j++)
            dom[j] = m[idx[from + j]].domain, ord[j] = j, was[j] = idx[from + j];
        if (rdzv_ring_front(dom, c, after, ord))
            for (size_t j = 0; j < c; j++)
                idx[from + j] = was[ord[j]];
        after = m[idx[from + c - 1]].domain;
    }
    free(dom);
    free(ord);
    free(was);
    return r;
}

/* The members m[0..n) in chunk order: chunk k's are idx[end[k-1]..end[k]) (end[-1] = 0), in
 * group-rank order within the chunk (m[] is in that order), or with failure domains in their
 * ring placement (chunk_place). This is also the liveness ring's order: the members of chunk k
 * as listed, then the first member of the next non-empty chunk, wrapping. Both malloc'ed; end
 * has nc entries. */
static int chunk_layout(const struct rdzv_member *m, size_t n, int nc, size_t **ret_idx,
                        size_t **ret_end)
{
    size_t k_max = nc > 0 ? (size_t)nc : 1;
    size_t *start = calloc(k_max + 1, sizeof(*start)), *idx = malloc((n + 1) * sizeof(*idx));
    if (!start || !idx) {
        free(start);
        free(idx);
        return -ENOMEM;
    }
    /* one pass: count per chunk, then place each member (rank order kept within a chunk) */
    for (size_t i = 0; i < n; i++)
        start[rdzv_chunk_of(m[i].slot, nc) + 1]++;
    for (size_t k = 0; k < k_max; k++)
        start[k + 1] += start[k];
    for (size_t i = 0; i < n; i++)
        idx[start[rdzv_chunk_of(m[i].slot, nc)]++] = i;
    /* start[k] is now the end of chunk k */
    if (chunk_place(m, n, k_max, idx, start) < 0) {
        free(start);
        free(idx);
        return -ENOMEM;
    }
    *ret_idx = idx;
    *ret_end = start;
    return 0;
}

/* Chunk `chunk` of `s` from its members idx[0..n) (indices into s->members, rank order). With
 * the ring on, `ring_next` / `ring_prev` are the ring's links out of the chunk: the member after
 * its last one and the one before its first one, in ring (chunk) order (their ids and group
 * ranks: a watcher that suspects the coordinator names its rank, rdzv_coord_confirmer; and the
 * successor's slot: a node whose successor is the same incarnation as in the last round need not
 * read its node record again). */
static int chunk_encode(const struct rdzv_state *s, int chunk, const size_t *idx, size_t n,
                        const struct rdzv_member *ring_next, const struct rdzv_member *ring_prev,
                        char **ret_json, struct ea_error *err)
{
    json_t *arr = json_array();
    for (size_t j = 0; arr && j < n; j++) {
        const struct rdzv_member *m = &s->members[idx[j]];
        /* compact: a node reads its chunk at every round, so every byte counts 32 times (no
         * address: group rank 0 publishes the master's, and node records carry the rest) */
        json_t *e = json_pack("[s, s, i, i, i, I]", m->node_id, m->host, m->nproc, m->group_rank,
                              m->rank_base, (json_int_t)m->slot);
        if (json_array_append_new(arr, e) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    if (!arr)
        return ea_errorf(err, -ENOMEM, "out of memory encoding an assignment");
    json_t *root = json_pack("{s:s, s:I, s:i, s:o}", "schema", RDZV_SCHEMA, "round",
                             (json_int_t)s->round, "chunk", chunk, "m", arr);
    /* the liveness ring in chunk order: a member's neighbours inside its chunk are the entries
     * beside it, so the chunk adds the two links out of it: O(1) ids a chunk, not 2 a member */
    if (root && s->ring && s->n_members > 1 && n > 0 &&
        json_object_set_new(root, "ring",
                            json_pack("[s, i, I, s, i]", ring_next->node_id, ring_next->group_rank,
                                      (json_int_t)ring_next->slot, ring_prev->node_id,
                                      ring_prev->group_rank)) < 0) {
        json_decref(root);
        root = NULL;
    }
    return rdzv_json_dump(root, ret_json, err);
}

/* The ring's links out of chunk k: the member after its last and before its first (chunk order,
 * wrapping over the empty chunks). */
static void chunk_ring_ends(const struct rdzv_state *s, const size_t *idx, const size_t *end,
                            size_t k, const struct rdzv_member **ret_next,
                            const struct rdzv_member **ret_prev)
{
    size_t n = s->n_members, from = k ? end[k - 1] : 0;
    *ret_next = n ? &s->members[idx[end[k] % n]] : NULL;
    *ret_prev = n ? &s->members[idx[(from + n - 1) % n]] : NULL;
}

int rdzv_members_link_ring(struct rdzv_member *m, size_t n, int n_chunks)
{
    size_t *idx, *end;
    if (chunk_layout(m, n, n_chunks, &idx, &end) < 0)
        return -ENOMEM;
    for (size_t j = 0; n > 1 && j < n; j++) {
        struct rdzv_member *x = &m[idx[j]];
        const struct rdzv_member *nx = &m[idx[(j + 1) % n]], *pv = &m[idx[(j + n - 1) % n]];
        snprintf(x->next, sizeof(x->next), "%s", nx->node_id);
        snprintf(x->prev, sizeof(x->prev), "%s", pv->node_id);
        x->next_rank = nx->group_rank;
        x->prev_rank = pv->group_rank;
        x->next_slot = nx->slot;
    }
    free(idx);
    free(end);
    return 0;
}

int rdzv_chunk_encode(const struct rdzv_state *s, int chunk, char **ret_json, struct ea_error *err)
{
    size_t *idx, *end;
    if (chunk < 0 || (s->n_chunks > 0 ? chunk >= s->n_chunks : chunk != 0))
        return ea_errorf(err, -EINVAL, "no chunk %d in a round of %d chunks", chunk, s->n_chunks);
    if (chunk_layout(s->members, s->n_members, s->n_chunks, &idx, &end) < 0)
        return ea_errorf(err, -ENOMEM, "out of memory encoding an assignment");
    size_t k = (size_t)chunk, from = k ? end[k - 1] : 0;
    const struct rdzv_member *next, *prev;
    chunk_ring_ends(s, idx, end, k, &next, &prev);
    int r = chunk_encode(s, chunk, idx + from, end[k] - from, next, prev, ret_json, err);
    free(idx);
    free(end);
    return r;
}

int rdzv_chunks_encode(const struct rdzv_state *s, char **ret_json, struct ea_error *err)
{
    size_t nc = s->n_chunks > 0 ? (size_t)s->n_chunks : 0;
    if (nc == 0)
        return 0;
    size_t *idx, *end;
    if (chunk_layout(s->members, s->n_members, (int)nc, &idx, &end) < 0)
        return ea_errorf(err, -ENOMEM, "out of memory encoding an assignment");
    int r = 0;
    size_t k = 0;
    for (; r == 0 && k < nc; k++) {
        size_t from = k ? end[k - 1] : 0;
        const struct rdzv_member *next, *prev;
        chunk_ring_ends(s, idx, end, k, &next, &prev);
        r = chunk_encode(s, (int)k, idx + from, end[k] - from, next, prev, &ret_json[k], err);
    }
    if (r < 0)
        while (k-- > 0)
            free(ret_json[k]), ret_json[k] = NULL;
    free(end);
    free(idx);
    return r;
}

/* The chunk's optional "ring": [next, its group rank, its slot, prev, its group rank] for the
 * member after its last and the one before its first (ring order = chunk order, docs/protocol.md):
 * each member's links, from the entries beside it and these two. */
static int chunk_ring_parse(json_t *ring, int chunk, struct rdzv_member *m, size_t n,
                            struct ea_error *err)
{
    const char *next = NULL, *prev = NULL;
    int next_rank = -1, prev_rank = -1;
    json_int_t next_slot = -1;
    json_error_t jerr;
    char out_next[RDZV_ID_MAX], out_prev[RDZV_ID_MAX];
    if (json_unpack_ex(ring, &jerr, JSON_STRICT, "[s, i, I, s, i]", &next, &next_rank, &next_slot,
                       &prev, &prev_rank) < 0 ||
        n == 0 || next_rank < 0 || prev_rank < 0 || next_slot < 0)
        return ea_errorf(err, -EBADMSG,
                         "assignment chunk %d: field 'ring' is not [next, rank, slot, prev, rank] "
                         "of a chunk with members",
                         chunk);
    int r;
    if ((r = rdzv_copy_field(out_next, sizeof(out_next), next, "assignment", "ring next", err)) ||
        (r = rdzv_copy_field(out_prev, sizeof(out_prev), prev, "assignment", "ring prev", err)))
        return r;
    /* the ring wraps inside this chunk only when it is the round's one non-empty chunk: then it
     * leaves from its last member to its first, both ways, and a one-member ring is no ring */
    bool wrap_next = strcmp(next, m[0].node_id) == 0 && next_rank == m[0].group_rank &&
                     next_slot == m[0].slot,
         wrap_prev = strcmp(prev, m[n - 1].node_id) == 0 && prev_rank == m[n - 1].group_rank;
    if (wrap_next != wrap_prev || (wrap_next && n == 1))
        return ea_errorf(err, -EBADMSG,
                         "assignment chunk %d: field 'ring' ['%s', '%s'] does not close a ring "
                         "over its members",
                         chunk, next, prev);
    for (size_t i = 0; i < n; i++) {
        snprintf(m[i].next, sizeof(m[i].next), "%s", i + 1 < n ? m[i + 1].node_id : out_next);
        snprintf(m[i].prev, sizeof(m[i].prev), "%s", i > 0 ? m[i - 1].node_id : out_prev);
        m[i].next_rank = i + 1 < n ? m[i + 1].group_rank : next_rank;
        m[i].next_slot = i + 1 < n ? m[i + 1].slot : next_slot;
        m[i].prev_rank = i > 0 ? m[i - 1].group_rank : prev_rank;
    }
    return 0;
}

int rdzv_chunk_decode(const char *json, size_t len, int64_t *ret_round, int *ret_chunk,
                      struct rdzv_member **ret, size_t *ret_n, struct ea_error *err)
{
    json_t *root;
    int r = rdzv_json_load(json, len, "assignment chunk", RDZV_CHUNK_BYTES_MAX, &root, err);
    if (r < 0)
        return r;
    json_int_t round = 0;
    int chunk = -1;
    json_t *arr = NULL, *ring = NULL;
    json_error_t jerr;
    struct rdzv_member *out = NULL;
    size_t n = 0;
    if (json_unpack_ex(root, &jerr, 0, "{s:I, s:i, s:o, s?o}", "round", &round, "chunk", &chunk,
                       "m", &arr, "ring", &ring) < 0 ||
        !json_is_array(arr) || round < 0 || chunk < 0) {
        r = ea_errorf(err, -EBADMSG, "assignment chunk: %s",
                      arr && !json_is_array(arr) ? "'m' is not an array" : jerr.text);
        goto out;
    }
    n = json_array_size(arr);
    out = calloc(n ? n : 1, sizeof(*out));
    if (!out) {
        r = ea_errorf(err, -ENOMEM, "out of memory decoding an assignment");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        struct rdzv_member *m = &out[i];
        const char *node = NULL, *host = NULL;
        json_int_t slot = 0;
        json_t *e = json_array_get(arr, i);
        if (json_array_size(e) == 8) { /* [..., next, prev]: the ring in group-rank order */
            r = ea_errorf(err, -EBADMSG,
                          "assignment chunk %d: member %zu carries its own ring links (8 fields: "
                          "written by an older elastic-agent, whose ring ran in group-rank "
                          "order); this agent takes the ring from the chunk's 'ring': run one "
                          "version of elastic-agent in a run",
                          chunk, i);
            goto out;
        }
        if (json_unpack_ex(e, &jerr, JSON_STRICT, "[s, s, i, i, i, I]", &node, &host, &m->nproc,
                           &m->group_rank, &m->rank_base, &slot) < 0) {
            r = ea_errorf(err, -EBADMSG, "assignment chunk %d: member %zu: %s", chunk, i,
                          jerr.text);
            goto out;
        }
        m->slot = slot;
        if ((r = rdzv_copy_field(m->node_id, sizeof(m->node_id), node, "assignment", "node",
                                 err)) ||
            (r = rdzv_copy_field(m->host, sizeof(m->host), host, "assignment", "host", err)))
            goto out;
        if (m->nproc < 1 || m->group_rank < 0 || m->rank_base < 0 || slot < 0) {
            r = ea_errorf(err, -EBADMSG, "assignment chunk %d: member '%s' has invalid values",
                          chunk, m->node_id);
            goto out;
        }
    }
    if (ring && (r = chunk_ring_parse(ring, chunk, out, n, err)) < 0)
        goto out;
    *ret_round = round;
    *ret_chunk = chunk;
    *ret = out;
    *ret_n = n;
    out = NULL;
    r = 0;
out:
    free(out);
    json_decref(root);
    return r;
}

/* With the ring on (the members carry links), every member's links must be the chunk order's:
 * the chunks agree on one cycle over all members. Without it, none may carry any. */
static int gather_check_ring(const struct rdzv_state *s, struct rdzv_member *const *chunks,
                             const size_t *counts, size_t n, struct ea_error *err)
{
    const struct rdzv_member *first = NULL, *last = NULL;
    bool ring = false;
    for (int k = 0; k < s->n_chunks && !first; k++)
        if (counts[k]) {
            first = &chunks[k][0];
            ring = first->next[0] || first->prev[0];
        }
    for (int k = 0; k < s->n_chunks; k++)
        for (size_t i = 0; i < counts[k]; i++) {
            const struct rdzv_member *c = &chunks[k][i];
            bool bad = ring ? n > 1 && last &&
                                  (strcmp(last->next, c->node_id) != 0 ||
                                   strcmp(c->prev, last->node_id) != 0 ||
                                   last->next_rank != c->group_rank || last->next_slot != c->slot ||
                                   c->prev_rank != last->group_rank)
                            : c->next[0] || c->prev[0];
            if (bad)
                return ea_errorf(err, -EBADMSG,
                                 "assignment: the ring's links at member '%s' (chunk %d) do not "
                                 "follow the chunk order",
                                 c->node_id, k);
            last = c;
        }
    if (ring && n > 1 &&
        (strcmp(last->next, first->node_id) != 0 || strcmp(first->prev, last->node_id) != 0 ||
         last->next_rank != first->group_rank || last->next_slot != first->slot ||
         first->prev_rank != last->group_rank))
        return ea_errorf(err, -EBADMSG,
                         "assignment: the ring does not close from '%s' back to '%s'",
                         last->node_id, first->node_id);
    return 0;
}

int rdzv_state_gather(struct rdzv_state *s, struct rdzv_member *const *chunks, const size_t *counts,
                      struct ea_error *err)
{
    size_t n = (size_t)s->group_world_size;
    struct rdzv_member *m = calloc(n ? n : 1, sizeof(*m));
    if (!m)
        return ea_errorf(err, -ENOMEM, "out of memory gathering the members");
    size_t got = 0;
    int r = 0;
    for (int k = 0; k < s->n_chunks && r == 0; k++)
        for (size_t i = 0; i < counts[k] && r == 0; i++) {
            const struct rdzv_member *c = &chunks[k][i];
            if (c->group_rank < 0 || (size_t)c->group_rank >= n || m[c->group_rank].nproc ||
                rdzv_chunk_of(c->slot, s->n_chunks) != k)
                r = ea_errorf(err, -EBADMSG,
                              "assignment: member '%s' (group rank %d) is out of place", c->node_id,
                              c->group_rank);
            else {
                m[c->group_rank] = *c;
                got++;
            }
        }
    int sum = 0;
    for (size_t i = 0; r == 0 && i < n; i++) {
        if (got != n || m[i].rank_base != sum || m[i].nproc > INT_MAX - sum)
            r = ea_errorf(err, -EBADMSG,
                          "assignment: %zu of %zu members found, or rank bases not contiguous "
                          "at group rank %zu",
                          got, n, i);
        else
            sum += m[i].nproc;
    }
    if (r == 0 && sum != s->world_size)
        r = ea_errorf(err, -EBADMSG, "assignment: members' workers sum to %d, world size is %d",
                      sum, s->world_size);
    if (r == 0)
        r = gather_check_ring(s, chunks, counts, n, err);
    if (r < 0) {
        free(m);
        return r;
    }
    free(s->members);
    s->members = m;
    s->n_members = n;
    return 0;
}
