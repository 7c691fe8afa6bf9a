// SPDX-License-Identifier: Apache-2.0
/* rdzv session: what a node reports (failures, done, reform, close), per-round values, leave,
 * the read accessors, and the lease's renewal. Every write here is O(1) bytes and reaches the
 * coordinator or every node as one small key. */
#include "session_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ea_time.h"

static void count_write(struct rdzv_session *s)
{
    s->stats.requests++;
    s->stats.writes++;
    s->stats.keys_written++;
}

/* Create-only write of a small value; the first writer wins (0 then too). The value that won is
 * mirrored when `mirror` is set. */
static int create_only(struct rdzv_session *s, const char *key, const char *value, bool mirror,
                       struct ea_error *err)
{
    struct kv_entry cur = {0};
    int64_t rev = 0;
    count_write(s);
    int r = kv_cas(s->kv, key, value, strlen(value), 0, 0, &rev, &cur, err);
    if (r == 0 && mirror) {
        r = rdzv_mirror_put_own(&s->m, key, value, rev, rev, 0);
    } else if (r == KV_ECONFLICT) {
        ea_error_clear(err);
        r = mirror && cur.mod_revision > 0 ? rdzv_mirror_put(&s->m, &cur) : 0;
    }
    kv_entry_clear(&cur);
    return r == -ENOMEM ? ea_errorf(err, r, "out of memory") : r;
}

int rdzv_publish_round_key(struct rdzv_session *s, int64_t round, const char *name,
                           const char *value, struct ea_error *err)
{
    int which = rdzv_guard_index(name);
    if (which >= 0) /* master, tracker: group rank 0's, checked by every reader */
        return rdzv_guard_publish(s, round, which, value, err);
    char key[KEY_MAX];
    rdzv_key_of(s, key, "rounds/%" PRId64 "/%s", round, name);
    return create_only(s, key, value, true, err);
}

const char *rdzv_round_key(const struct rdzv_session *s, int64_t round, const char *name)
{
    int which = rdzv_guard_index(name);
    if (which >= 0)
        return rdzv_guard_value(s, round, which);
    char key[KEY_MAX];
    rdzv_key_of(s, key, "rounds/%" PRId64 "/%s", round, name);
    return rdzv_mirror_value(&s->m, key);
}

int rdzv_publish_master(struct rdzv_session *s, int64_t round, const char *addr_port,
                        struct ea_error *err)
{
    return rdzv_guard_publish(s, round, RDZV_GUARD_MASTER, addr_port, err);
}

const char *rdzv_master(const struct rdzv_session *s, int64_t round)
{
    return rdzv_guard_value(s, round, RDZV_GUARD_MASTER);
}

const struct rdzv_node *rdzv_node_find(const struct rdzv_session *s, const char *node_id)
{
    char key[KEY_MAX];
    rdzv_key_of(s, key, "nodes/%s", node_id);
    ssize_t i = rdzv_mirror_find(&s->m, key);
    return i >= 0 ? s->m.dec[i] : NULL;
}

/* <dir>/<self id>: this node's value under its lease (it vanishes with the node). */
static int put_own_leased(struct rdzv_session *s, const char *dir, const char *value,
                          struct ea_error *err)
{
    char key[KEY_MAX];
    rdzv_key_of(s, key, "%s/%s", dir, s->cfg.self.node_id);
    int64_t rev = 0;
    count_write(s);
    int r = kv_put(s->kv, key, value, strlen(value), s->lease, &rev, err);
    if (r < 0)
        return r;
    /* mirror our own write at once (the watch delivers it again later) */
    if (rdzv_mirror_put_own(&s->m, key, value, rev, rev, s->lease) < 0)
        return ea_errorf(err, -ENOMEM, "out of memory");
    return 0;
}

int rdzv_publish_probe(struct rdzv_session *s, const char *value, struct ea_error *err)
{
    return put_own_leased(s, "probe", value, err);
}

int rdzv_publish_compute(struct rdzv_session *s, const char *value, struct ea_error *err)
{
    return put_own_leased(s, "compute", value, err);
}

const char *rdzv_compute(const struct rdzv_session *s, const char *node_id)
{
    char key[KEY_MAX];
    rdzv_key_of(s, key, "compute/%s", node_id);
    return rdzv_mirror_value(&s->m, key);
}

const char *rdzv_probe(const struct rdzv_session *s, const char *node_id)
{
    char key[KEY_MAX];
    rdzv_key_of(s, key, "probe/%s", node_id);
    return rdzv_mirror_value(&s->m, key);
}

/* 1 when `generation` is still the running round (after catching up with the store), 0 when
 * the run has moved on already, or a negative error. */
static int still_running(struct rdzv_session *s, int64_t generation, struct ea_error *err)
{
    int r = rdzv_derive(s, ea_now_ms(), err);
    if (r < 0)
        return r;
    return s->have_state && rdzv_state_generation(&s->state, s->state_rev) == generation &&
           s->state.status == RDZV_RUNNING;
}

int rdzv_report_failure(struct rdzv_session *s, int64_t generation, const struct rdzv_failure *f,
                        struct ea_error *err)
{
    int r = still_running(s, generation, err);
    if (r <= 0)
        return r; /* the run has moved on already: this failure is part of an older round */
    char key[KEY_MAX], *json = NULL;
    rdzv_key_of(s, key, "failures/%" PRId64, s->state.round);
    if ((r = rdzv_failure_encode(f, &json, err)) < 0)
        return r;
    r = create_only(s, key, json, s->full, err);
    free(json);
    return r;
}

int rdzv_reform(struct rdzv_session *s, int64_t generation, struct ea_error *err)
{
    int r = still_running(s, generation, err);
    if (r <= 0)
        return r;
    char key[KEY_MAX];
    rdzv_key_of(s, key, "reform/%" PRId64, s->state.round);
    return create_only(s, key, s->cfg.self.node_id, s->full, err);
}

int rdzv_close(struct rdzv_session *s, int64_t generation, struct ea_error *err)
{
    int r = still_running(s, generation, err);
    if (r <= 0)
        return r;
    struct rdzv_state next = s->state;
    next.members = NULL; /* the commit record only: the members stay in their chunks */
    next.n_members = 0;
    next.status = RDZV_CLOSED;
    next.generation = generation; /* a same-round write */
    char *json = NULL;
    if ((r = rdzv_state_encode(&next, &json, err)) < 0)
        return r;
    struct kv_entry cur = {0};
    int64_t rev = 0;
    count_write(s);
    r = kv_cas(s->kv, s->state_key, json, strlen(json), s->state_rev, 0, &rev, &cur, err);
    ssize_t si = rdzv_mirror_find(&s->m, s->state_key);
    if (r == 0)
        r = rdzv_mirror_put_own(&s->m, s->state_key, json, rev,
                                si >= 0 ? s->m.keys[si].create_revision : rev, 0);
    else if (r == KV_ECONFLICT) {
        ea_error_clear(err);
        r = cur.mod_revision > 0 ? rdzv_mirror_put(&s->m, &cur) : 0;
    }
    free(json);
    kv_entry_clear(&cur);
    if (r < 0)
        return r == -ENOMEM ? ea_errorf(err, r, "out of memory") : r;
    r = rdzv_derive(s, ea_now_ms(), err);
    return r < 0 ? r : 0;
}

int rdzv_get_failure(struct rdzv_session *s, int64_t round, struct rdzv_failure *ret,
                     struct ea_error *err)
{
    char key[KEY_MAX];
    rdzv_key_of(s, key, "failures/%" PRId64, round);
    struct kv_entry e = {0};
    s->stats.requests++;
    int r = kv_get(s->kv, key, &e, err);
    if (r < 0)
        return r;
    s->stats.bytes_received += strlen(e.key) + e.value_len;
    r = rdzv_failure_decode(e.value, e.value_len, ret, err);
    kv_entry_clear(&e);
    return r;
}

int rdzv_report_done(struct rdzv_session *s, int64_t round, struct ea_error *err)
{
    char key[KEY_MAX];
    rdzv_key_of(s, key, "done/%" PRId64 "/%s", round, s->cfg.self.node_id);
    count_write(s);
    return kv_put(s->kv, key, "{}", 2, 0, NULL, err);
}

int rdzv_leave(struct rdzv_session *s, struct ea_error *err)
{
    if (!s->lease)
        return 0; /* never joined (or already left): nothing of ours is in the store */
    count_write(s);
    int r = kv_del(s->kv, s->node_key, err);
    if (s->lease) {
        /* revoking also drops `coord` when we held it: the next node takes over at once */
        s->stats.requests++;
        int r2 = kv_lease_revoke(s->kv, s->lease, r < 0 ? NULL : err);
        if (r == 0 && r2 != KV_ENOLEASE)
            r = r2;
        s->lease = 0;
    }
    s->keepalive_due_ms = -1;
    return r;
}

bool rdzv_take_warning(struct rdzv_session *s, char *buf, size_t size)
{
    if (!s->warning[0])
        return false;
    snprintf(buf, size, "%s", s->warning);
    s->warning[0] = '\0';
    return true;
}

int64_t rdzv_last_call_ms(const struct rdzv_session *s)
{
    if (s->is_coord)
        return s->min_reached_ms >= 0 ? s->min_reached_ms + s->cfg.params.last_call_ms : -1;
    if (!s->have_coord || s->coord.last_call_in_ms < 0)
        return -1;
    return s->coord_seen_ms + s->coord.last_call_in_ms;
}

int64_t rdzv_lease_valid_until(const struct rdzv_session *s)
{
    return s->lease ? s->renewed_ms + s->cfg.lease_ttl_ms : 0;
}

const struct rdzv_state *rdzv_current(const struct rdzv_session *s, int64_t *ret_generation)
{
    if (!s->have_state)
        return NULL;
    if (ret_generation)
        *ret_generation = rdzv_state_generation(&s->state, s->state_rev);
    return &s->state;
}

const struct rdzv_node *rdzv_session_self(const struct rdzv_session *s)
{
    return &s->cfg.self;
}

void rdzv_session_set_ckpt_port(struct rdzv_session *s, int port)
{
    s->cfg.self.ckpt_port = port;
}

const struct rdzv_member *rdzv_self_member(const struct rdzv_session *s)
{
    return s->have_state && s->self_ok && s->self_round == s->state.round ? &s->self : NULL;
}

int rdzv_my_index(const struct rdzv_session *s)
{
    const struct rdzv_member *m = rdzv_self_member(s);
    return m ? m->group_rank : -1;
}

size_t rdzv_live_count(const struct rdzv_session *s)
{
    return s->n_live;
}

void rdzv_stats_get(const struct rdzv_session *s, struct rdzv_stats *ret)
{
    *ret = s->stats;
}

uint64_t rdzv_resync_count(const struct rdzv_session *s)
{
    return s->resyncs;
}

/* ---- the lease's renewal ---- */

int64_t rdzv_keepalive_due(struct rdzv_session *s, int64_t now_ms)
{
    return s->keepalive_due_ms < 0 || now_ms < s->keepalive_due_ms ? 0 : s->lease;
}

int rdzv_keepalive(struct rdzv_session *s, int64_t now_ms, struct ea_error *err)
{
    if (s->keepalive_due_ms < 0 || now_ms < s->keepalive_due_ms)
        return 0;
    return rdzv_keepalive_done(s, now_ms, kv_lease_keepalive(s->kv, s->lease, NULL, err), err);
}

int rdzv_keepalive_done(struct rdzv_session *s, int64_t now_ms, int r, struct ea_error *err)
{
    s->stats.requests++;
    if (r == 0) {
        s->renewed_ms = now_ms; /* sent at now_ms: the store's TTL restarted no earlier */
        s->keepalive_due_ms = now_ms + s->cfg.lease_ttl_ms / 3;
        return 1;
    }
    /* Give up on the lease at 2/3 of its TTL without a renewal: the store may expire it at
     * TTL, and this node must have begun stopping its workers before the others can declare it
     * dead and move on (a partitioned node never keeps running an abandoned generation). The
     * clock is read again: the failed request itself took time. */
    int64_t after = ea_now_ms();
    int64_t give_up = s->renewed_ms + s->cfg.lease_ttl_ms * 2 / 3;
    if (r != KV_ENOLEASE && after < give_up) {
        int64_t retry = after + s->cfg.lease_ttl_ms / 10;
        s->keepalive_due_ms = retry < give_up ? retry : give_up;
        return r;
    }
    if (r != KV_ENOLEASE)
        ea_error_wrap(err, r, "lease not renewed for %.1f s (TTL %.1f s)",
                      (double)(after - s->renewed_ms) / 1000.0,
                      (double)s->cfg.lease_ttl_ms / 1000.0);
    s->keepalive_due_ms = -1;
    return KV_ENOLEASE;
}
