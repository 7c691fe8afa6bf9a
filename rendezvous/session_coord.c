// SPDX-License-Identifier: Apache-2.0
/* rdzv session: the coordinator's writes — a round's assignment chunks and commit record in
 * fenced transactions, and the `coord` key (its claim, and the live count while gathering). */
#include "session_internal.h"
#include "domain.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The coordinator publishes the live count while gathering at most this often. */
#define GATHER_PUBLISH_MS 1000

/* Write the `coord` key (our node id, the live count, the last call) with our lease, iff its
 * mod_revision is `expected` (0: absent, a claim). The winner's value is mirrored either way:
 * 0 on success, KV_ECONFLICT when somebody else's write won, or an error. */
int rdzv_write_coord(struct rdzv_session *s, int live, int64_t last_call_in_ms, int64_t expected,
                     struct ea_error *err)
{
    struct rdzv_coord c = {.live = live, .last_call_in_ms = last_call_in_ms};
    snprintf(c.node_id, sizeof(c.node_id), "%s", s->cfg.self.node_id);
    char *json = NULL;
    int r = rdzv_coord_encode(&c, &json, err);
    if (r < 0)
        return r;
    struct kv_entry cur = {0};
    int64_t rev = 0;
    s->stats.requests++;
    s->stats.writes++;
    s->stats.keys_written++;
    r = kv_cas(s->kv, s->coord_key, json, strlen(json), expected, s->lease, &rev, &cur, err);
    ssize_t ci = rdzv_mirror_find(&s->m, s->coord_key);
    int m = 0;
    if (r == 0) {
        m = rdzv_mirror_put_own(&s->m, s->coord_key, json, rev,
                                expected && ci >= 0 ? s->m.keys[ci].create_revision : rev,
                                s->lease);
    } else if (r == KV_ECONFLICT) {
        ea_error_clear(err);
        if (cur.mod_revision > 0)
            m = rdzv_mirror_put(&s->m, &cur);
        else
            rdzv_mirror_del(&s->m, s->coord_key);
    }
    free(json);
    kv_entry_clear(&cur);
    return m < 0 ? ea_errorf(err, m, "out of memory") : r;
}

/* After a lost transaction: read `state` and `coord` again (the watch would, later). */
int rdzv_refresh_fences(struct rdzv_session *s, int64_t now_ms, struct ea_error *err)
{
    const char *keys[] = {s->state_key, s->coord_key};
    for (size_t i = 0; i < 2; i++) {
        struct kv_entry e = {0};
        s->stats.requests++;
        int r = kv_get(s->kv, keys[i], &e, err);
        if (r == KV_ENOTFOUND) {
            ea_error_clear(err);
            rdzv_mirror_del(&s->m, keys[i]);
            continue;
        }
        if (r < 0)
            return r;
        s->stats.bytes_received += strlen(e.key) + e.value_len;
        r = rdzv_mirror_put(&s->m, &e);
        kv_entry_clear(&e);
        if (r < 0)
            return ea_errorf(err, r, "out of memory");
    }
    return rdzv_derive(s, now_ms, err);
}

/*
 * The coordinator's write of `next`: the round's assignment chunks (when the members change)
 * and then `state`, in transactions of at most KV_TXN_OPS_MAX ops, each fenced on the
 * mod_revision of `state` and of our `coord` key: a stale coordinator cannot write anything.
 * `state` goes last and names the revision of the commit's first chunk write (chunks_rev):
 * readers take a chunk only when it was written between that and the commit. 1 when written, 0
 * when a fence failed (the view is refreshed), or a negative error.
 */
/* Name group rank 0 of a running round in the commit record, with the addresses its node record
 * lists, so that every node can check the round's master and tracker without a read. Left as
 * it is (a same-round write keeps its commit's) when the members or the record are not here. */
static void leader_of(struct rdzv_session *s, struct rdzv_state *st)
{
    if (st->status != RDZV_RUNNING || !st->members)
        return;
    const struct rdzv_member *m0 = NULL;
    for (size_t i = 0; i < st->n_members && !m0; i++)
        if (st->members[i].group_rank == 0)
            m0 = &st->members[i];
    char key[KEY_MAX];
    ssize_t i = m0 ? (rdzv_key_of(s, key, "nodes/%s", m0->node_id), rdzv_mirror_find(&s->m, key))
                   : -1;
    memset(&st->leader, 0, sizeof(st->leader));
    const struct rdzv_node *n = i >= 0 ? s->m.dec[i] : NULL;
    if (!n || s->m.keys[i].create_revision != m0->slot)
        return; /* no record of that incarnation: nodes read it (roundguard.c) */
    struct rdzv_leader *l = &st->leader;
    snprintf(l->node_id, sizeof(l->node_id), "%s", n->node_id);
    l->slot = m0->slot;
    const char *extra[2] = {n->addr, n->agent_addr};
    for (size_t k = 0; k < 2; k++)
        if (extra[k][0])
            snprintf(l->addrs[l->n_addrs++], RDZV_ADDR_MAX, "%s", extra[k]);
    for (size_t k = 0; k < n->n_ifaces && k < RDZV_IFACE_MAX && l->n_addrs < RDZV_LEADER_ADDRS; k++)
        snprintf(l->addrs[l->n_addrs++], RDZV_ADDR_MAX, "%s", n->ifaces[k].addr);
    if (!l->n_addrs)
        memset(l, 0, sizeof(*l));
}

/* Commit the members that confirm a suspicion of this coordinator (issue 41): members outside
 * its failure domain, so that a rack or switch that takes it takes them not with it (the lowest
 * other rank, today's confirmer, is often its rack neighbour). Chosen for a round this commit
 * writes the members of (they carry their records' domains); a same-round write keeps its
 * commit's; none outside a running round. */
static void confirmers_of(struct rdzv_session *s, struct rdzv_state *st, bool chunks)
{
    if (st->status != RDZV_RUNNING) {
        st->n_confirm = 0;
        return;
    }
    if (!chunks || !st->members)
        return;
    int coord = -1, c[2];
    for (size_t i = 0; i < st->n_members && coord < 0; i++)
        if (strcmp(st->members[i].node_id, s->cfg.self.node_id) == 0)
            coord = st->members[i].group_rank;
    rdzv_pick_confirmers(st->members, st->n_members, coord, c);
    st->n_confirm = coord < 0 || c[0] < 0 ? 0 : c[1] < 0 ? 1 : 2;
    st->confirm_coord = st->n_confirm ? coord : 0;
    st->confirm[0] = st->n_confirm ? c[0] : 0;
    st->confirm[1] = st->n_confirm > 1 ? c[1] : 0;
}

int rdzv_commit(struct rdzv_session *s, const struct rdzv_state *next, int64_t now_ms,
                struct ea_error *err)
{
    bool chunks = !s->have_state || next->round != s->state.round || next->status == RDZV_WAITING ||
                  s->state.status == RDZV_WAITING;
    int old = s->have_state ? s->state.n_chunks : 0;
    size_t n_put = chunks ? (size_t)next->n_chunks : 0;
    size_t n_del = chunks && old > next->n_chunks ? (size_t)(old - next->n_chunks) : 0;
    size_t n_ops = n_put + n_del + 1;
    struct kv_op *ops = calloc(n_ops, sizeof(*ops));
    char(*keys)[KEY_MAX] = calloc(n_ops, sizeof(*keys));
    char **vals = calloc(n_ops, sizeof(*vals));
    int64_t *revs = calloc(n_ops, sizeof(*revs)); /* the revision each op was written at */
    int r = ops && keys && vals && revs ? 0 : ea_errorf(err, -ENOMEM, "out of memory");
    struct rdzv_state enc = *next; /* with the liveness ring's links when it is on */
    enc.ring = s->cfg.params.ring;
    if (r == 0 && n_put)
        r = rdzv_chunks_encode(&enc, vals, err); /* one pass over the members */
    for (size_t k = 0; r == 0 && k < n_put + n_del; k++) {
        rdzv_key_of(s, keys[k], "assign/%06zu", k);
        ops[k].key = keys[k];
        if (k < n_put)
            ops[k].value = vals[k], ops[k].len = strlen(vals[k]);
        ops[k].del = k >= n_put;
    }
    struct kv_cmp cmps[2] = {{s->state_key, s->have_state ? s->state_rev : 0},
                             {s->coord_key, s->coord_rev}};
    /* a shallow copy that differs in chunks_rev: a same-round write keeps its commit's chunks */
    struct rdzv_state st = *next;
    st.chunks_rev = chunks ? 0 : s->state.chunks_rev;
    leader_of(s, &st);
    confirmers_of(s, &st, chunks);
    /* the chunks in batches, then `state` alone, at a later revision than every chunk: a node
     * watching its chunk and `state` on one stream gets its chunk first */
    for (size_t at = 0; r == 0 && at < n_ops;) {
        size_t left = n_ops - 1 - at, n = left == 0               ? 1
                                          : left < KV_TXN_OPS_MAX ? left
                                                                  : KV_TXN_OPS_MAX;
        if (left == 0 && (r = rdzv_state_encode(&st, &vals[at], err)) < 0)
            break;
        if (left == 0)
            ops[at] =
                (struct kv_op){.key = s->state_key, .value = vals[at], .len = strlen(vals[at])};
        s->stats.requests++;
        s->stats.writes++;
        s->stats.keys_written += n;
        r = kv_txn(s->kv, cmps, 2, ops + at, n, &revs[at], err);
        for (size_t k = at + 1; r == 0 && k < at + n; k++)
            revs[k] = revs[at];
        if (r == 0 && at == 0 && left > 0)
            st.chunks_rev = revs[0];
        at += n;
    }
    if (r == 0) {
        /* mirror our own writes at once, each at its revision (the watch confirms them later) */
        ssize_t si = rdzv_mirror_find(&s->m, s->state_key);
        int64_t created = si >= 0 ? s->m.keys[si].create_revision : revs[n_ops - 1];
        for (size_t k = 0; r == 0 && k < n_ops; k++)
            if (ops[k].del)
                rdzv_mirror_del(&s->m, ops[k].key);
            else
                r = rdzv_mirror_put_own(&s->m, ops[k].key, ops[k].value, revs[k],
                                        k == n_ops - 1 ? created : revs[k], 0);
        if (r < 0)
            r = ea_errorf(err, r, "out of memory");
    }
    int64_t written = r == 0 ? revs[n_ops - 1] : 0; /* the revision of our `state` */
    for (size_t k = 0; vals && k < n_ops; k++)
        free(vals[k]);
    free(vals);
    free(revs);
    free(keys);
    free(ops);
    if (r == KV_ECONFLICT) {
        ea_error_clear(err);
        r = rdzv_refresh_fences(s, now_ms, err);
        return r < 0 ? r : 0;
    }
    if (r < 0)
        return r;
    s->adopt = chunks ? next : NULL; /* decode_state takes these members: no chunk decoding */
    s->adopt_rev = written;
    r = rdzv_derive(s, now_ms, err);
    s->adopt = NULL;
    if (r == 0) /* keys planted for rounds after this one go, fenced like the commit */
        rdzv_guard_cleanup(s);
    return r < 0 ? r : 1;
}

/* While the run gathers, the coordinator tells everybody how many nodes are live (at most once
 * a second: what a node receives grows with time, not with N). */
int rdzv_publish_gather(struct rdzv_session *s, int64_t now_ms, struct ea_error *err)
{
    bool gathering = !s->have_state || s->state.status == RDZV_WAITING;
    bool quorum = s->min_reached_ms >= 0;
    if (!gathering || ((int)s->n_live == s->gather_pub_live && quorum == s->gather_pub_quorum))
        return 0;
    if (s->gather_pub_live >= 0 && now_ms < s->gather_pub_ms + GATHER_PUBLISH_MS) {
        s->plan_wake_ms =
            s->plan_wake_ms < 0 || s->gather_pub_ms + GATHER_PUBLISH_MS < s->plan_wake_ms
                ? s->gather_pub_ms + GATHER_PUBLISH_MS
                : s->plan_wake_ms;
        return 0;
    }
    int64_t last_call = quorum ? s->min_reached_ms + s->cfg.params.last_call_ms - now_ms : -1;
    if (last_call < 0 && quorum)
        last_call = 0;
    int r = rdzv_write_coord(s, (int)s->n_live, last_call, s->coord_rev, err);
    if (r < 0 && r != KV_ECONFLICT)
        return r;
    s->gather_pub_ms = now_ms;
    s->gather_pub_live = (int)s->n_live;
    s->gather_pub_quorum = quorum;
    return rdzv_derive(s, now_ms, err);
}
