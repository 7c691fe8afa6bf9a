// SPDX-License-Identifier: Apache-2.0
/* rdzv roster: the committed round's members with their node records' addresses (roster.h). */
#include "roster.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session_internal.h"

static void add_addr(struct rdzv_roster_node *n, const char *addr)
{
    if (!addr[0] || n->n_addrs >= RDZV_ROSTER_ADDRS)
        return;
    for (size_t i = 0; i < n->n_addrs; i++)
        if (strcmp(n->addrs[i], addr) == 0)
            return;
    snprintf(n->addrs[n->n_addrs++], RDZV_ADDR_MAX, "%s", addr);
}

/* Member m with the addresses of `rec` when it is the same incarnation (create_revision). */
static void fill(struct rdzv_roster_node *out, const struct rdzv_member *m,
                 const struct rdzv_node *rec)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->node_id, sizeof(out->node_id), "%s", m->node_id);
    snprintf(out->host, sizeof(out->host), "%s", m->host);
    out->nproc = m->nproc;
    if (!rec || rec->create_revision != m->slot || strcmp(rec->node_id, m->node_id) != 0)
        return;
    add_addr(out, rec->addr);
    for (size_t i = 0; i < rec->n_ifaces && i < RDZV_IFACE_MAX; i++)
        add_addr(out, rec->ifaces[i].addr);
}

static int cmp_rank(const void *a, const void *b)
{
    const struct rdzv_member *x = a, *y = b;
    return (x->group_rank > y->group_rank) - (x->group_rank < y->group_rank);
}

static int by_id(const void *a, const void *b)
{
    return strcmp(((const struct rdzv_node *)a)->node_id, ((const struct rdzv_node *)b)->node_id);
}

/* bsearch: a node id against a record */
static int id_vs_node(const void *id, const void *n)
{
    return strcmp(id, ((const struct rdzv_node *)n)->node_id);
}

/* Light mode: the round's chunks and the live node records, listed. */
static int roster_light(struct rdzv_session *s, struct rdzv_member **ret_m,
                        struct rdzv_node **ret_nodes, size_t *ret_nn, struct ea_error *err)
{
    size_t want = (size_t)s->state.group_world_size, n = 0;
    struct rdzv_member *all = calloc(want ? want : 1, sizeof(*all));
    struct kv_list l = {0};
    char prefix[KEY_MAX];
    rdzv_key_of(s, prefix, "assign/");
    s->stats.requests++;
    int r = all ? kv_list(s->kv, prefix, &l, err) : ea_errorf(err, -ENOMEM, "out of memory");
    for (size_t i = 0; r == 0 && i < l.n; i++) {
        int64_t round = 0;
        int chunk = -1;
        struct rdzv_member *m = NULL;
        size_t nm = 0;
        s->stats.bytes_received += strlen(l.entries[i].key) + l.entries[i].value_len;
        if (rdzv_chunk_decode(l.entries[i].value, l.entries[i].value_len, &round, &chunk, &m, &nm,
                              NULL) < 0 ||
            chunk >= s->state.n_chunks)
            continue; /* not one of this commit's chunks */
        if (round != s->state.round || n + nm > want)
            r = ea_errorf(err, -EAGAIN, "round %" PRId64 " moved on", s->state.round);
        else
            memcpy(all + n, m, nm * sizeof(*m)), n += nm;
        free(m);
    }
    kv_list_clear(&l);
    if (r == 0 && n != want)
        r = ea_errorf(err, -EAGAIN, "round %" PRId64 ": %zu of %zu members in its chunks",
                      s->state.round, n, want);
    struct rdzv_node *nodes = NULL;
    size_t nn = 0;
    if (r == 0) {
        rdzv_key_of(s, prefix, "nodes/");
        s->stats.requests++;
        r = kv_list(s->kv, prefix, &l, err);
    }
    if (r == 0 && !(nodes = calloc(l.n ? l.n : 1, sizeof(*nodes))))
        r = ea_errorf(err, -ENOMEM, "out of memory");
    for (size_t i = 0; r == 0 && i < l.n; i++) {
        s->stats.bytes_received += strlen(l.entries[i].key) + l.entries[i].value_len;
        if (rdzv_node_decode(l.entries[i].value, l.entries[i].value_len, &nodes[nn], NULL) == 0)
            nodes[nn++].create_revision = l.entries[i].create_revision;
    }
    kv_list_clear(&l);
    if (r < 0) {
        free(all);
        free(nodes);
        return r;
    }
    *ret_m = all;
    *ret_nodes = nodes;
    *ret_nn = nn;
    return 0;
}

int rdzv_round_roster(struct rdzv_session *s, struct rdzv_roster_node **ret, size_t *ret_n,
                      struct ea_error *err)
{
    if (!s->have_state || s->state.status != RDZV_RUNNING)
        return ea_errorf(err, -EAGAIN, "no round runs");
    struct rdzv_member *m = NULL;
    struct rdzv_node *nodes = NULL;
    size_t nm = 0, nn = 0;
    int r = 0;
    if (s->full) {
        if (!s->state.members)
            return ea_errorf(err, -EAGAIN, "round %" PRId64 ": its members are not known yet",
                             s->state.round);
        nm = s->state.n_members;
        m = malloc((nm ? nm : 1) * sizeof(*m));
        nodes = malloc((s->m.n_keys ? s->m.n_keys : 1) * sizeof(*nodes));
        if (!m || !nodes)
            r = ea_errorf(err, -ENOMEM, "out of memory");
        for (size_t i = 0; r == 0 && i < nm; i++)
            m[i] = s->state.members[i];
        for (size_t i = 0; r == 0 && i < s->m.n_keys; i++)
            if (s->m.dec[i])
                nodes[nn++] = *s->m.dec[i];
    } else {
        r = roster_light(s, &m, &nodes, &nn, err);
        nm = (size_t)s->state.group_world_size;
    }
    struct rdzv_roster_node *out = r == 0 ? calloc(nm ? nm : 1, sizeof(*out)) : NULL;
    if (r == 0 && !out)
        r = ea_errorf(err, -ENOMEM, "out of memory");
    if (out) {
        qsort(m, nm, sizeof(*m), cmp_rank);
        qsort(nodes, nn, sizeof(*nodes), by_id);
        for (size_t i = 0; i < nm; i++)
            fill(&out[i], &m[i], bsearch(m[i].node_id, nodes, nn, sizeof(*nodes), id_vs_node));
        *ret = out;
        *ret_n = nm;
    }
    free(m);
    free(nodes);
    return r;
}
