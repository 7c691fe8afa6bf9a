// SPDX-License-Identifier: Apache-2.0
/* rdzv run view: decode a listing of a run's keys into one read-only picture. */
#include "view.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A decimal round number that is the whole of [s, end) (or of s when end is NULL). */
static bool parse_round(const char *s, const char *end, int64_t *ret)
{
    size_t len = end ? (size_t)(end - s) : strlen(s);
    if (len == 0 || len > 18)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *ret = v;
    return true;
}

static int cmp_node(const void *a, const void *b)
{
    const struct rdzv_node *x = a, *y = b;
    return (x->create_revision > y->create_revision) - (x->create_revision < y->create_revision);
}

static int cmp_failure(const void *a, const void *b)
{
    const struct rdzv_view_failure *x = a, *y = b;
    return (x->round > y->round) - (x->round < y->round);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The members of the state's round from its assignment chunks (assign/<k>), matched to the commit
 * as the agent does (rdzv_chunk_commit_cmp). An observer must not guess: chunks that do not add
 * up to the committed round are an error naming them. */
static int gather(const char *prefix, const struct kv_entry *entries, size_t n,
                  struct rdzv_run_view *v, struct ea_error *err)
{
    int nc = v->state.n_chunks;
    if (nc <= 0)
        return 0;
    size_t plen = strlen(prefix);
    struct rdzv_member **chunks = calloc((size_t)nc, sizeof(*chunks));
    size_t *counts = calloc((size_t)nc, sizeof(*counts));
    int r = chunks && counts ? 0 : ea_errorf(err, -ENOMEM, "out of memory");
    for (size_t i = 0; r == 0 && i < n; i++) {
        const struct kv_entry *e = &entries[i];
        char *end;
        if (strncmp(e->key, prefix, plen) != 0 || strncmp(e->key + plen, "assign/", 7) != 0)
            continue;
        long k = strtol(e->key + plen + 7, &end, 10);
        if (*end || k < 0 || k >= nc)
            continue; /* a chunk the committed round does not use */
        int64_t round = 0;
        int chunk = -1;
        free(chunks[k]);
        chunks[k] = NULL;
        /* a chunk counts only when written by the commit `state` names (in [chunks_rev, the
         * commit's revision)): a `waiting` state, or a coordinator's successor, reuses round
         * numbers, so a round number alone cannot tell an old chunk from the commit's */
        int when = rdzv_chunk_commit_cmp(&v->state, v->generation, e->mod_revision);
        if ((r = rdzv_chunk_decode(e->value, e->value_len, &round, &chunk, &chunks[k], &counts[k],
                                   err)) < 0)
            r = ea_error_wrap(err, r, "key '%s'", e->key);
        else if ((when > 0 || round > v->state.round) && chunk == (int)k)
            /* the coordinator writes a round's chunks, then its commit record: caught between */
            r = ea_errorf(err, -EAGAIN, "round %" PRId64 " is being committed", round);
        else if (round != v->state.round || chunk != (int)k || when < 0)
            r = ea_errorf(err, -EBADMSG,
                          "key '%s' holds chunk %d of round %" PRId64 " written at revision %" PRId64
                          ", not of the commit of round %" PRId64 " (chunks from revision %" PRId64
                          ")",
                          e->key, chunk, round, e->mod_revision, v->state.round,
                          v->state.chunks_rev);
    }
    if (r == 0)
        r = rdzv_state_gather(&v->state, chunks, counts, err);
    for (int k = 0; chunks && k < nc; k++)
        free(chunks[k]);
    free(chunks);
    free(counts);
    return r;
}

/* First pass: the state key, so the second pass knows which round's keys matter. */
static int decode_state(const char *prefix, const struct kv_entry *entries, size_t n,
                        struct rdzv_run_view *v, struct ea_error *err)
{
    size_t plen = strlen(prefix);
    for (size_t i = 0; i < n; i++) {
        const struct kv_entry *e = &entries[i];
        if (strncmp(e->key, prefix, plen) != 0 || strcmp(e->key + plen, "state") != 0)
            continue;
        int r = rdzv_state_decode(e->value, e->value_len, &v->state, err);
        if (r < 0)
            return ea_error_wrap(err, r, "key '%s'", e->key);
        v->have_state = true;
        v->generation = rdzv_state_generation(&v->state, e->mod_revision);
    }
    return v->have_state ? gather(prefix, entries, n, v, err) : 0;
}

/* One key of the run other than `state`; -ENOMEM only. */
static int decode_key(const char *rel, const struct kv_entry *e, struct rdzv_run_view *v)
{
    int64_t round;
    if (strncmp(rel, "nodes/", 6) == 0) {
        struct rdzv_node nd;
        if (rdzv_node_decode(e->value, e->value_len, &nd, NULL) < 0 ||
            strcmp(nd.node_id, rel + 6) != 0) {
            v->n_ignored++;
            return 0;
        }
        nd.create_revision = e->create_revision;
        v->nodes[v->n_nodes++] = nd;
    } else if (strncmp(rel, "failures/", 9) == 0 && parse_round(rel + 9, NULL, &round)) {
        struct rdzv_view_failure *f = &v->failures[v->n_failures];
        if (rdzv_failure_decode(e->value, e->value_len, &f->f, NULL) < 0) {
            v->n_ignored++;
            return 0;
        }
        f->round = round;
        v->n_failures++;
    } else if (v->have_state && strncmp(rel, "rounds/", 7) == 0) {
        const char *slash = strchr(rel + 7, '/');
        if (!slash || !parse_round(rel + 7, slash, &round) || round != v->state.round)
            return 0;
        if (strcmp(slash, "/master") == 0) {
            /* {"schema","node","addr"} (roundguard.c), shown as written: status checks nothing */
            json_t *j = e->value[0] == '{' ? json_loadb(e->value, e->value_len, 0, NULL) : NULL;
            const char *addr = json_string_value(json_object_get(j, "addr"));
            snprintf(v->master, sizeof(v->master), "%s", addr ? addr : e->value);
            json_decref(j);
        }
    } else if (v->have_state && strncmp(rel, "compute/", 8) == 0 && rel[8]) {
        /* {"round","median_s"}: this round's only, shown as written (status checks nothing) */
        json_t *j = json_loadb(e->value, e->value_len, 0, NULL);
        json_int_t r = 0;
        double m = 0;
        if (j && json_unpack(j, "{s:I, s:F}", "round", &r, "median_s", &m) == 0 &&
            r == v->state.round && m > 0 && m <= 86400) {
            struct rdzv_view_compute *c = &v->compute[v->n_compute++];
            snprintf(c->node_id, sizeof(c->node_id), "%s", rel + 8);
            c->median_s = m;
        }
        json_decref(j);
    } else if (v->have_state && strncmp(rel, "done/", 5) == 0) {
        const char *slash = strchr(rel + 5, '/');
        if (!slash || !parse_round(rel + 5, slash, &round) || round != v->state.round || !slash[1])
            return 0;
        if (!(v->done[v->n_done] = strdup(slash + 1)))
            return -ENOMEM;
        v->n_done++;
    }
    return 0;
}

int rdzv_run_view_decode(const char *prefix, const struct kv_entry *entries, size_t n,
                         struct rdzv_run_view *ret, struct ea_error *err)
{
    struct rdzv_run_view v = {0};
    size_t plen = strlen(prefix);
    int r = decode_state(prefix, entries, n, &v, err);
    if (r < 0)
        return r;
    size_t cap = n ? n : 1;
    v.nodes = calloc(cap, sizeof(*v.nodes));
    v.done = calloc(cap, sizeof(*v.done));
    v.failures = calloc(cap, sizeof(*v.failures));
    v.compute = calloc(cap, sizeof(*v.compute));
    if (!v.nodes || !v.done || !v.failures || !v.compute) {
        r = -ENOMEM;
        goto error;
    }
    for (size_t i = 0; i < n; i++) {
        if (strncmp(entries[i].key, prefix, plen) != 0)
            continue;
        v.n_keys++;
        if ((r = decode_key(entries[i].key + plen, &entries[i], &v)) < 0)
            goto error;
    }
    qsort(v.nodes, v.n_nodes, sizeof(*v.nodes), cmp_node);
    qsort(v.failures, v.n_failures, sizeof(*v.failures), cmp_failure);
    qsort(v.done, v.n_done, sizeof(*v.done), cmp_str);
    *ret = v;
    return 0;
error:
    rdzv_run_view_clear(&v);
    return ea_errorf(err, r, "out of memory decoding the run");
}

void rdzv_run_view_clear(struct rdzv_run_view *v)
{
    if (!v)
        return;
    for (size_t i = 0; v->done && i < v->n_done; i++)
        free(v->done[i]);
    free(v->done);
    free(v->nodes);
    free(v->failures);
    free(v->compute);
    rdzv_state_clear(&v->state);
    memset(v, 0, sizeof(*v));
}

double rdzv_run_view_compute(const struct rdzv_run_view *v, const char *node_id)
{
    for (size_t i = 0; i < v->n_compute; i++)
        if (strcmp(v->compute[i].node_id, node_id) == 0)
            return v->compute[i].median_s;
    return 0;
}

const struct rdzv_node *rdzv_run_view_node(const struct rdzv_run_view *v, const char *node_id)
{
    for (size_t i = 0; i < v->n_nodes; i++)
        if (strcmp(v->nodes[i].node_id, node_id) == 0)
            return &v->nodes[i];
    return NULL;
}

bool rdzv_run_view_is_done(const struct rdzv_run_view *v, const char *node_id)
{
    for (size_t i = 0; i < v->n_done; i++)
        if (strcmp(v->done[i], node_id) == 0)
            return true;
    return false;
}

size_t rdzv_run_view_spares(const struct rdzv_run_view *v)
{
    size_t n = 0;
    for (size_t i = 0; i < v->n_nodes; i++)
        n += !v->have_state || rdzv_state_find(&v->state, v->nodes[i].node_id) < 0;
    return n;
}

const struct rdzv_view_failure *rdzv_run_view_failure(const struct rdzv_run_view *v, int64_t round)
{
    for (size_t i = 0; i < v->n_failures; i++)
        if (v->failures[i].round == round)
            return &v->failures[i];
    return NULL;
}
