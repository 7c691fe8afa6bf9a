// SPDX-License-Identifier: Apache-2.0
/* rdzv state codec: JSON (jansson) for the state, node and failure records, with validation. */
#include "state.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const status_names[] = {
    [RDZV_WAITING] = "waiting",     [RDZV_RUNNING] = "running",
    [RDZV_SUCCEEDED] = "succeeded", [RDZV_FAILED] = "failed",
    [RDZV_CLOSED] = "closed",       [RDZV_FAILING] = "failing", /* issue 19 */
};

const char *rdzv_status_name(enum rdzv_status s)
{
    if ((size_t)s < sizeof(status_names) / sizeof(status_names[0]))
        return status_names[s];
    return "?";
}

static int status_parse(const char *name, enum rdzv_status *ret)
{
    for (size_t i = 0; i < sizeof(status_names) / sizeof(status_names[0]); i++)
        if (strcmp(status_names[i], name) == 0) {
            *ret = (enum rdzv_status)i;
            return 0;
        }
    return -EBADMSG;
}

int rdzv_strlcpy(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size)
        return -ENAMETOOLONG;
    memcpy(dst, src, n + 1);
    return 0;
}

/* Dump `j` (stolen) compactly into *ret_json. */
static int dump(json_t *j, char **ret_json, struct ea_error *err)
{
    if (!j)
        return ea_errorf(err, -ENOMEM, "out of memory encoding a record");
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    if (!s)
        return ea_errorf(err, -ENOMEM, "out of memory encoding a record");
    *ret_json = s;
    return 0;
}

/* Parse `json` and check the schema tag; *ret_root is a new reference. */
static int load(const char *json, size_t len, const char *what, size_t max, json_t **ret_root,
                struct ea_error *err)
{
    json_error_t jerr;
    if (len > max) /* before parsing: a huge value is someone else's, never ours */
        return ea_errorf(err, -EBADMSG,
                         "%s is %zu bytes, more than the %zu a valid one can be (written by "
                         "another program?)",
                         what, len, max);
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return ea_errorf(err, -EBADMSG, "%s is not valid JSON (%s at position %d)", what, jerr.text,
                         jerr.position);
    if (!json_is_object(root)) {
        json_decref(root);
        return ea_errorf(err, -EBADMSG, "%s is not a JSON object", what);
    }
    const char *schema = json_string_value(json_object_get(root, "schema"));
    if (schema && strcmp(schema, RDZV_SCHEMA_V1) == 0) {
        json_decref(root);
        return ea_errorf(
            err, -EBADMSG,
            "%s was written by an older elastic-agent (schema '" RDZV_SCHEMA_V1
            "', which sent every member list to every node); this agent speaks '" RDZV_SCHEMA
            "': let that run finish with the old agents, or use "
            "another --run-id",
            what);
    }
    if (!schema || strcmp(schema, RDZV_SCHEMA) != 0) {
        int r = ea_errorf(err, -EBADMSG,
                          "%s has schema '%s', expected '" RDZV_SCHEMA
                          "' (written by another program or version?)",
                          what, schema ? schema : "(none)");
        json_decref(root);
        return r;
    }
    *ret_root = root;
    return 0;
}

/* Copy a string field into a fixed buffer, failing with a message naming it. */
static int copy_field(char *dst, size_t size, const char *src, const char *what, const char *field,
                      struct ea_error *err)
{
    if (!src || !src[0] || rdzv_strlcpy(dst, size, src) < 0)
        return ea_errorf(err, -EBADMSG, "%s: field '%s' is missing, empty or too long", what,
                         field);
    return 0;
}

int rdzv_state_encode(const struct rdzv_state *s, char **ret_json, struct ea_error *err)
{
    json_t *j = json_pack(
        "{s:s, s:I, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "schema", RDZV_SCHEMA, "round",
        (json_int_t)s->round, "status", rdzv_status_name(s->status), "members", s->group_world_size,
        "chunks", s->n_chunks, "world_size", s->world_size, "restart_count", s->restart_count,
        "max_restarts", s->max_restarts, "min", s->min_nodes, "max", s->max_nodes);
    /* every node receives this at every commit: the fields that are mostly 0 only when set */
    const struct {
        const char *name;
        json_int_t v;
    } opt[] = {{"failure_round", s->failure_round},
               {"generation", s->generation},
               {"charge_round", s->charge_round},
               {"charge_failed_round", s->charge_failed_round},
               {"scale_events", s->scale_events},
               {"chunks_rev", s->chunks_rev}};
    for (size_t i = 0; j && i < sizeof(opt) / sizeof(opt[0]); i++)
        if (opt[i].v && json_object_set_new(j, opt[i].name, json_integer(opt[i].v)) < 0) {
            json_decref(j);
            j = NULL;
        }
    if (j && s->leader.node_id[0]) {
        json_t *addrs = json_array();
        for (size_t i = 0; addrs && i < s->leader.n_addrs && i < RDZV_LEADER_ADDRS; i++)
            if (json_array_append_new(addrs, json_string(s->leader.addrs[i])) < 0) {
                json_decref(addrs);
                addrs = NULL;
            }
        json_t *l = addrs ? json_pack("{s:s, s:I, s:o}", "node", s->leader.node_id, "slot",
                                      (json_int_t)s->leader.slot, "addrs", addrs)
                          : NULL;
        if (!l || json_object_set_new(j, "leader", l) < 0) {
            json_decref(j);
            j = NULL;
        }
    }
    return dump(j, ret_json, err);
}

/* The commit record's "leader": {"node","slot","addrs":[numeric addresses]}. */
static int leader_decode(const json_t *l, struct rdzv_leader *ret, struct ea_error *err)
{
    const char *node = NULL;
    json_int_t slot = 0;
    json_t *addrs = NULL;
    struct rdzv_leader out = {0};
    bool ok = json_unpack((json_t *)l, "{s:s, s:I, s:o}", "node", &node, "slot", &slot, "addrs",
                          &addrs) == 0 &&
              node[0] && rdzv_strlcpy(out.node_id, sizeof(out.node_id), node) == 0 && slot > 0 &&
              json_is_array(addrs) && json_array_size(addrs) >= 1 &&
              json_array_size(addrs) <= RDZV_LEADER_ADDRS;
    for (size_t i = 0; ok && i < json_array_size(addrs); i++) {
        const char *a = json_string_value(json_array_get(addrs, i));
        ok = a && a[0] && rdzv_strlcpy(out.addrs[i], RDZV_ADDR_MAX, a) == 0;
    }
    if (!ok)
        return ea_errorf(err, -EBADMSG,
                         "state: field 'leader' is not {\"node\",\"slot\",\"addrs\":[1-%d "
                         "addresses]}",
                         RDZV_LEADER_ADDRS);
    out.slot = slot;
    out.n_addrs = json_array_size(addrs);
    *ret = out;
    return 0;
}

int rdzv_state_decode(const char *json, size_t len, struct rdzv_state *ret, struct ea_error *err)
{
    json_t *root;
    int r = load(json, len, "state", RDZV_STATE_BYTES_MAX, &root, err);
    if (r < 0)
        return r;
    struct rdzv_state s = {0};
    const char *status = NULL;
    json_int_t round = 0, failure_round = 0, generation = 0, charge = 0, charge_failed = 0;
    json_int_t chunks_rev = 0;
    json_t *leader = NULL;
    json_error_t jerr;
    if (json_unpack_ex(root, &jerr, 0,
                       "{s:I, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s?I, s?I, s?I, s?I, s?i, s?I, "
                       "s?o}",
                       "round", &round, "status", &status, "members", &s.group_world_size, "chunks",
                       &s.n_chunks, "world_size", &s.world_size, "restart_count", &s.restart_count,
                       "max_restarts", &s.max_restarts, "min", &s.min_nodes, "max", &s.max_nodes,
                       "failure_round", &failure_round, "generation", &generation, "charge_round",
                       &charge, "charge_failed_round", &charge_failed, "scale_events",
                       &s.scale_events, "chunks_rev", &chunks_rev, "leader", &leader) < 0) {
        r = ea_errorf(err, -EBADMSG, "state: %s", jerr.text);
        goto out;
    }
    s.round = round;
    s.failure_round = failure_round;
    s.generation = generation;
    s.charge_round = charge;
    s.charge_failed_round = charge_failed;
    s.chunks_rev = chunks_rev;
    if (leader && (r = leader_decode(leader, &s.leader, err)) < 0)
        goto out;
    if (status_parse(status, &s.status) < 0) {
        r = ea_errorf(err, -EBADMSG, "state: unknown status '%s'", status);
        goto out;
    }
    if (round < 0 || s.min_nodes < 1 || s.max_nodes < s.min_nodes || s.restart_count < 0 ||
        generation < 0 || charge < 0 || charge_failed < 0 || s.scale_events < 0 || chunks_rev < 0 ||
        s.max_restarts < 0 || s.group_world_size < 0 || s.world_size < s.group_world_size ||
        !rdzv_chunk_count_ok(s.n_chunks, (size_t)s.group_world_size) ||
        (s.status == RDZV_RUNNING && (s.group_world_size == 0 || round < 1))) {
        r = ea_errorf(err, -EBADMSG,
                      "state: inconsistent values (round %lld, status %s, %d members in %d "
                      "chunks, world_size %d, min %d, max %d)",
                      (long long)round, status, s.group_world_size, s.n_chunks, s.world_size,
                      s.min_nodes, s.max_nodes);
        goto out;
    }
    *ret = s;
    r = 0;
out:
    json_decref(root);
    return r;
}

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

/* The members m[0..n) in chunk order: chunk k's are idx[end[k-1]..end[k]) (end[-1] = 0), in
 * group-rank order within the chunk (m[] is in that order). This is also the liveness ring's
 * order: the members of chunk k as listed, then the first member of the next non-empty chunk,
 * wrapping. Both malloc'ed; end has nc entries. */
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
    return dump(root, ret_json, err);
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
    if ((r = copy_field(out_next, sizeof(out_next), next, "assignment", "ring next", err)) ||
        (r = copy_field(out_prev, sizeof(out_prev), prev, "assignment", "ring prev", err)))
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
    int r = load(json, len, "assignment chunk", RDZV_CHUNK_BYTES_MAX, &root, err);
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
        if ((r = copy_field(m->node_id, sizeof(m->node_id), node, "assignment", "node", err)) ||
            (r = copy_field(m->host, sizeof(m->host), host, "assignment", "host", err)))
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

void rdzv_state_clear(struct rdzv_state *s)
{
    if (!s)
        return;
    free(s->members);
    memset(s, 0, sizeof(*s));
}

int rdzv_state_copy(struct rdzv_state *dst, const struct rdzv_state *src)
{
    struct rdzv_state c = *src;
    c.members = NULL;
    if (src->n_members) {
        c.members = malloc(src->n_members * sizeof(*c.members));
        if (!c.members)
            return -ENOMEM;
        memcpy(c.members, src->members, src->n_members * sizeof(*c.members));
    }
    *dst = c;
    return 0;
}

int64_t rdzv_state_generation(const struct rdzv_state *s, int64_t mod_revision)
{
    return s->generation > 0 ? s->generation : mod_revision;
}

int rdzv_chunk_commit_cmp(const struct rdzv_state *s, int64_t generation, int64_t chunk_rev)
{
    if (chunk_rev >= generation)
        return 1;
    return chunk_rev < s->chunks_rev ? -1 : 0;
}

int rdzv_state_find(const struct rdzv_state *s, const char *node_id)
{
    for (size_t i = 0; i < s->n_members; i++)
        if (strcmp(s->members[i].node_id, node_id) == 0)
            return (int)i;
    return -1;
}

int rdzv_node_encode(const struct rdzv_node *n, char **ret_json, struct ea_error *err)
{
    json_t *root = json_pack("{s:s, s:s, s:s, s:s, s:i, s:I, s:s}", "schema", RDZV_SCHEMA, "node",
                             n->node_id, "host", n->host, "addr", n->addr, "nproc", n->nproc, "pid",
                             (json_int_t)n->pid, "version", EA_VERSION);
    if (root && n->probe_port > 0) {
        json_t *ifs = json_array();
        for (size_t i = 0; i < n->n_ifaces && i < RDZV_IFACE_MAX; i++)
            json_array_append_new(ifs,
                                  json_pack("{s:s, s:s, s:i}", "name", n->ifaces[i].name, "addr",
                                            n->ifaces[i].addr, "prefix", n->ifaces[i].prefix));
        json_object_set_new(root, "ifaces", ifs);
        json_object_set_new(root, "probe_port", json_integer(n->probe_port));
    }
    if (root && n->joined_ms > 0)
        json_object_set_new(root, "joined_ms", json_integer(n->joined_ms));
    if (root && n->agent_addr[0])
        json_object_set_new(root, "agent_addr", json_string(n->agent_addr));
    if (root && n->live_port > 0)
        json_object_set_new(root, "live_port", json_integer(n->live_port));
    if (root && n->live_port > 0 && n->live_addr[0])
        json_object_set_new(root, "live_addr", json_string(n->live_addr));
    if (root && n->live_port > 0 && n->live_ns[0])
        json_object_set_new(root, "live_ns", json_string(n->live_ns));
    return dump(root, ret_json, err);
}

/* The optional NIC discovery fields of a node record. */
static int node_ifaces_parse(json_t *root, struct rdzv_node *n, struct ea_error *err)
{
    json_t *port = json_object_get(root, "probe_port"), *ifs = json_object_get(root, "ifaces");
    if (!port && !ifs)
        return 0; /* not taking part in NIC discovery */
    json_int_t p = json_is_integer(port) ? json_integer_value(port) : -1;
    if (p < 1 || p > 65535 || !json_is_array(ifs) || json_array_size(ifs) > RDZV_IFACE_MAX)
        return ea_errorf(err, -EBADMSG,
                         "node record '%s': probe_port must be 1-65535 and ifaces an array of at "
                         "most %d",
                         n->node_id, RDZV_IFACE_MAX);
    n->probe_port = (int)p;
    for (size_t i = 0; i < json_array_size(ifs); i++) {
        struct rdzv_iface *f = &n->ifaces[i];
        const char *name = NULL, *addr = NULL;
        json_error_t jerr;
        int r;
        if (json_unpack_ex(json_array_get(ifs, i), &jerr, 0, "{s:s, s:s, s:i}", "name", &name,
                           "addr", &addr, "prefix", &f->prefix) < 0)
            return ea_errorf(err, -EBADMSG, "node record '%s': ifaces[%zu]: %s", n->node_id, i,
                             jerr.text);
        if ((r = copy_field(f->name, sizeof(f->name), name, "node record", "ifaces.name", err)) ||
            (r = copy_field(f->addr, sizeof(f->addr), addr, "node record", "ifaces.addr", err)))
            return r;
        if (f->prefix < 0 || f->prefix > 128 || !name[0])
            return ea_errorf(err, -EBADMSG, "node record '%s': ifaces[%zu] is not valid",
                             n->node_id, i);
        n->n_ifaces = i + 1;
    }
    return 0;
}

/* The optional liveness ring fields of a node record: a port (and an address of its own). */
static int node_live_parse(json_t *root, struct rdzv_node *n, struct ea_error *err)
{
    json_t *port = json_object_get(root, "live_port"), *addr = json_object_get(root, "live_addr");
    json_t *ns = json_object_get(root, "live_ns");
    if (!port && !addr && !ns)
        return 0; /* not taking part in the ring */
    json_int_t p = json_is_integer(port) ? json_integer_value(port) : -1;
    if (p < 1 || p > 65535 || (addr && (!json_is_string(addr) || !json_string_length(addr))) ||
        (ns && (!json_is_string(ns) || !json_string_length(ns))))
        return ea_errorf(err, -EBADMSG,
                         "node record '%s': live_port must be 1-65535 and live_addr a non-empty "
                         "string",
                         n->node_id);
    n->live_port = (int)p;
    int r = addr ? copy_field(n->live_addr, sizeof(n->live_addr), json_string_value(addr),
                              "node record", "live_addr", err)
                 : 0;
    if (r == 0 && ns)
        r = copy_field(n->live_ns, sizeof(n->live_ns), json_string_value(ns), "node record",
                       "live_ns", err);
    return r;
}

int rdzv_node_decode(const char *json, size_t len, struct rdzv_node *ret, struct ea_error *err)
{
    json_t *root;
    int r = load(json, len, "node record", RDZV_RECORD_BYTES_MAX, &root, err);
    if (r < 0)
        return r;
    struct rdzv_node n = {0};
    const char *node = NULL, *host = NULL, *addr = NULL, *agent_addr = "";
    json_int_t pid = 0, joined = 0;
    json_error_t jerr;
    if (json_unpack_ex(root, &jerr, 0, "{s:s, s:s, s:s, s:i, s:I, s?I, s?s}", "node", &node,
                       "host", &host, "addr", &addr, "nproc", &n.nproc, "pid", &pid, "joined_ms",
                       &joined, "agent_addr", &agent_addr) < 0)
        r = ea_errorf(err, -EBADMSG, "node record: %s", jerr.text);
    else if (!(r = copy_field(n.node_id, sizeof(n.node_id), node, "node record", "node", err)) &&
             !(r = copy_field(n.host, sizeof(n.host), host, "node record", "host", err)) &&
             !(r = copy_field(n.addr, sizeof(n.addr), addr, "node record", "addr", err)) &&
             (!agent_addr[0] || !(r = copy_field(n.agent_addr, sizeof(n.agent_addr), agent_addr,
                                                 "node record", "agent_addr", err)))) {
        if (n.nproc < 1)
            r = ea_errorf(err, -EBADMSG, "node record '%s': nproc %d < 1", node, n.nproc);
        else if ((r = node_ifaces_parse(root, &n, err)) == 0)
            r = node_live_parse(root, &n, err);
    }
    json_decref(root);
    if (r < 0)
        return r;
    n.pid = pid;
    n.joined_ms = joined > 0 ? joined : 0;
    *ret = n;
    return 0;
}

int rdzv_coord_encode(const struct rdzv_coord *c, char **ret_json, struct ea_error *err)
{
    return dump(json_pack("{s:s, s:s, s:i, s:I}", "schema", RDZV_SCHEMA, "node", c->node_id, "live",
                          c->live, "last_call_in_ms", (json_int_t)c->last_call_in_ms),
                ret_json, err);
}

int rdzv_coord_decode(const char *json, size_t len, struct rdzv_coord *ret, struct ea_error *err)
{
    json_t *root;
    int r = load(json, len, "coordinator record", RDZV_RECORD_BYTES_MAX, &root, err);
    if (r < 0)
        return r;
    struct rdzv_coord c = {0};
    const char *node = NULL;
    json_int_t last = -1;
    json_error_t jerr;
    if (json_unpack_ex(root, &jerr, 0, "{s:s, s:i, s:I}", "node", &node, "live", &c.live,
                       "last_call_in_ms", &last) < 0)
        r = ea_errorf(err, -EBADMSG, "coordinator record: %s", jerr.text);
    else if (!(r = copy_field(c.node_id, sizeof(c.node_id), node, "coordinator record", "node",
                              err)) &&
             (c.live < 0 || last < -1))
        r = ea_errorf(err, -EBADMSG, "coordinator record: negative counts");
    json_decref(root);
    if (r < 0)
        return r;
    c.last_call_in_ms = last;
    *ret = c;
    return 0;
}

int rdzv_failure_encode(const struct rdzv_failure *f, char **ret_json, struct ea_error *err)
{
    return dump(json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:s}", "schema",
                          RDZV_SCHEMA, "node", f->node_id, "host", f->host, "rank", f->rank,
                          "local_rank", f->local_rank, "exit_code", f->exit_code, "signal",
                          f->signal, "pid", (json_int_t)f->pid, "time_ms", (json_int_t)f->time_ms,
                          "message", f->message),
                ret_json, err);
}

int rdzv_failure_decode(const char *json, size_t len, struct rdzv_failure *ret,
                        struct ea_error *err)
{
    json_t *root;
    int r = load(json, len, "failure record", RDZV_RECORD_BYTES_MAX, &root, err);
    if (r < 0)
        return r;
    struct rdzv_failure f = {0};
    const char *node = NULL, *host = NULL, *msg = NULL;
    json_int_t pid = 0, t = 0;
    json_error_t jerr;
    if (json_unpack_ex(root, &jerr, 0, "{s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:s}", "node",
                       &node, "host", &host, "rank", &f.rank, "local_rank", &f.local_rank,
                       "exit_code", &f.exit_code, "signal", &f.signal, "pid", &pid, "time_ms", &t,
                       "message", &msg) < 0)
        r = ea_errorf(err, -EBADMSG, "failure record: %s", jerr.text);
    else if (!(r = copy_field(f.node_id, sizeof(f.node_id), node, "failure record", "node", err)) &&
             !(r = copy_field(f.host, sizeof(f.host), host, "failure record", "host", err))) {
        /* messages may be long: cut rather than reject */
        snprintf(f.message, sizeof(f.message), "%s", msg);
    }
    json_decref(root);
    if (r < 0)
        return r;
    f.pid = pid;
    f.time_ms = t;
    *ret = f;
    return 0;
}
