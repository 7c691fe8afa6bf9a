// SPDX-License-Identifier: Apache-2.0
/* rdzv session: join, mirror the run's keys through one watch, coordinate with CAS. */
#include "session.h"

#include <errno.h>
#include <signal.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "ea_time.h"

#define KEY_MAX 512

struct rdzv_session {
    struct kv *kv;
    struct rdzv_config cfg;
    char prefix[KEY_MAX];
    char node_key[KEY_MAX];
    int64_t lease;
    int64_t watch_id;
    bool need_resync; /* the watch broke and re-listing failed: retry before anything else */
    int64_t keepalive_due_ms;
    int64_t renewed_ms; /* last successful grant or renewal of the lease */

    /* mirror of every key under the prefix, with a hash index (slot: key index + 1, 0 = empty)
     * and, for nodes/<id> keys, the record decoded once when it arrives (NULL: not a valid
     * record). Everything per event is O(1) and per batch O(keys) without decoding, so a run of
     * N nodes costs each agent O(N) work per round, not O(N) JSON decodes per event. */
    struct kv_entry *keys;
    struct rdzv_node **dec;
    size_t n_keys, cap_keys;
    size_t *slots, n_slots;
    bool dirty, nodes_dirty;

    /* derived from the mirror (rebuilt when dirty) */
    size_t n_live;           /* valid node records */
    ssize_t coord;           /* index in keys of the coordinator's node key, -1: none */
    struct rdzv_node *nodes; /* sorted by create_revision; built on demand (ensure_nodes) */
    size_t n_nodes;
    struct rdzv_state state;
    bool have_state;
    int64_t state_rev;
    const char **done; /* node ids done in state.round; point into keys */
    size_t n_done;

    int64_t last_arrival_ms, min_reached_ms, plan_wake_ms;
    int64_t charge_seen_round, charge_seen_ms; /* when we first saw the pending charge */
    char warning[EA_ERROR_MSG_MAX];      /* pending, not yet taken */
    char last_warning[EA_ERROR_MSG_MAX]; /* so one bad key is reported once, not per event */
};

static void key_of(const struct rdzv_session *s, char *buf, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void key_of(const struct rdzv_session *s, char *buf, const char *fmt, ...)
{
    char rel[KEY_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof(rel), fmt, ap);
    va_end(ap);
    snprintf(buf, KEY_MAX, "%s%s", s->prefix, rel);
}

int rdzv_session_create(struct kv *kv, const struct rdzv_config *cfg, struct rdzv_session **ret,
                        struct ea_error *err)
{
    size_t plen = strlen(cfg->prefix);
    if (plen == 0 || cfg->prefix[plen - 1] != '/' || plen > KEY_MAX / 2)
        return ea_errorf(err, -EINVAL, "key prefix '%s' must end with '/' and be short",
                         cfg->prefix);
    struct rdzv_session *s = calloc(1, sizeof(*s));
    if (!s)
        return ea_errorf(err, -ENOMEM, "out of memory");
    s->kv = kv;
    s->cfg = *cfg;
    memcpy(s->prefix, cfg->prefix, plen + 1);
    s->cfg.prefix = s->prefix;
    key_of(s, s->node_key, "nodes/%s", cfg->self.node_id);
    s->min_reached_ms = -1;
    s->plan_wake_ms = -1;
    s->charge_seen_ms = -1;
    s->coord = -1;
    s->cfg.params.lease_ttl_ms = cfg->lease_ttl_ms;
    s->keepalive_due_ms = -1;
    *ret = s;
    return 0;
}

static void mirror_clear(struct rdzv_session *s)
{
    for (size_t i = 0; i < s->n_keys; i++) {
        kv_entry_clear(&s->keys[i]);
        free(s->dec[i]);
    }
    s->n_keys = 0;
    if (s->slots)
        memset(s->slots, 0, s->n_slots * sizeof(*s->slots));
    s->coord = -1; /* until derive() */
    s->dirty = s->nodes_dirty = true;
}

void rdzv_session_destroy(struct rdzv_session *s)
{
    if (!s)
        return;
    if (s->watch_id)
        kv_watch_cancel(s->kv, s->watch_id);
    mirror_clear(s);
    free(s->keys);
    free(s->dec);
    free(s->slots);
    free(s->nodes);
    free(s->done);
    rdzv_state_clear(&s->state);
    free(s);
}

static size_t key_hash(const char *key)
{
    size_t h = 14695981039346656037u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211u;
    return h;
}

/* The slot holding `key`, or the empty slot where it would go (n_slots is a power of two, at
 * least twice n_keys, so there always is one). */
static size_t slot_of(const struct rdzv_session *s, const char *key)
{
    size_t mask = s->n_slots - 1, i = key_hash(key) & mask;
    while (s->slots[i] && strcmp(s->keys[s->slots[i] - 1].key, key) != 0)
        i = (i + 1) & mask;
    return i;
}

static ssize_t mirror_find(const struct rdzv_session *s, const char *key)
{
    if (!s->n_slots)
        return -1;
    size_t i = s->slots[slot_of(s, key)];
    return i ? (ssize_t)(i - 1) : -1;
}

/* Rebuild the index for n_keys (after a delete or when it is too full). */
static int index_rebuild(struct rdzv_session *s, size_t want)
{
    size_t n = s->n_slots ? s->n_slots : 64;
    while (n < 2 * want)
        n *= 2;
    if (n != s->n_slots) {
        size_t *slots = calloc(n, sizeof(*slots));
        if (!slots)
            return -ENOMEM;
        free(s->slots);
        s->slots = slots;
        s->n_slots = n;
    } else {
        memset(s->slots, 0, n * sizeof(*s->slots));
    }
    for (size_t k = 0; k < s->n_keys; k++)
        s->slots[slot_of(s, s->keys[k].key)] = k + 1;
    return 0;
}

static bool is_node_key(const struct rdzv_session *s, const char *key)
{
    size_t plen = strlen(s->prefix);
    return strncmp(key, s->prefix, plen) == 0 && strncmp(key + plen, "nodes/", 6) == 0;
}

static void warn(struct rdzv_session *s, const char *msg);

/* The record of a nodes/<id> entry, decoded (malloc'ed), or NULL with a warning. */
static struct rdzv_node *node_decode(struct rdzv_session *s, const struct kv_entry *e)
{
    const char *id = e->key + strlen(s->prefix) + 6;
    struct ea_error nerr = {0};
    struct rdzv_node *n = malloc(sizeof(*n));
    if (n && rdzv_node_decode(e->value, e->value_len, n, &nerr) == 0 &&
        strcmp(n->node_id, id) == 0) {
        n->create_revision = e->create_revision;
        return n;
    }
    char msg[EA_ERROR_MSG_MAX + 64];
    snprintf(msg, sizeof(msg), "ignoring node key '%s': %s", e->key,
             !n ? "out of memory" : nerr.msg[0] ? nerr.msg : "node id does not match the key");
    warn(s, msg);
    free(n);
    return NULL;
}

/* Insert or replace (takes ownership of e's strings) / delete a key in the mirror. */
static int mirror_put(struct rdzv_session *s, struct kv_entry *e, int64_t now_ms)
{
    bool node = is_node_key(s, e->key);
    ssize_t i = mirror_find(s, e->key);
    if (i < 0) {
        if (s->n_keys == s->cap_keys) {
            size_t cap = s->cap_keys ? s->cap_keys * 2 : 32;
            struct kv_entry *k = realloc(s->keys, cap * sizeof(*k));
            if (!k)
                return -ENOMEM;
            s->keys = k;
            struct rdzv_node **d = realloc(s->dec, cap * sizeof(*d));
            if (!d)
                return -ENOMEM;
            s->dec = d;
            s->cap_keys = cap;
        }
        if (2 * (s->n_keys + 1) > s->n_slots && index_rebuild(s, s->n_keys + 1) < 0)
            return -ENOMEM;
        i = (ssize_t)s->n_keys++;
        s->keys[i] = (struct kv_entry){.key = e->key};
        s->dec[i] = NULL;
        s->slots[slot_of(s, e->key)] = (size_t)i + 1;
        e->key = NULL; /* now the mirror's */
        if (node)
            s->last_arrival_ms = now_ms;
    }
    char *key = s->keys[i].key;
    s->keys[i].key = NULL;
    kv_entry_clear(&s->keys[i]);
    free(e->key);
    s->keys[i] = *e;
    s->keys[i].key = key;
    free(s->dec[i]);
    s->dec[i] = node ? node_decode(s, &s->keys[i]) : NULL;
    memset(e, 0, sizeof(*e));
    s->dirty = true;
    s->nodes_dirty |= node;
    return 0;
}

static void mirror_del(struct rdzv_session *s, const char *key)
{
    ssize_t i = mirror_find(s, key);
    if (i < 0)
        return;
    s->nodes_dirty |= is_node_key(s, key);
    kv_entry_clear(&s->keys[i]);
    free(s->dec[i]);
    s->keys[i] = s->keys[--s->n_keys];
    s->dec[i] = s->dec[s->n_keys];
    index_rebuild(s, s->n_keys); /* deletes are rare: nodes leaving, rounds pruned */
    s->coord = -1;                /* until derive() */
    s->dirty = true;
}

static int cmp_node(const void *a, const void *b)
{
    const struct rdzv_node *x = a, *y = b;
    return (x->create_revision > y->create_revision) - (x->create_revision < y->create_revision);
}

static void warn(struct rdzv_session *s, const char *msg)
{
    if (strncmp(s->last_warning, msg, sizeof(s->last_warning) - 1) == 0)
        return;
    snprintf(s->last_warning, sizeof(s->last_warning), "%s", msg);
    snprintf(s->warning, sizeof(s->warning), "%s", msg);
}

/* The live nodes sorted by create_revision (arrival), for the plan: rebuilt from the decoded
 * records only when a node key changed, and only when somebody needs the list. */
static int ensure_nodes(struct rdzv_session *s, struct ea_error *err)
{
    if (!s->nodes_dirty && s->nodes)
        return 0;
    struct rdzv_node *nodes = malloc((s->n_keys ? s->n_keys : 1) * sizeof(*nodes));
    if (!nodes)
        return ea_errorf(err, -ENOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < s->n_keys; i++)
        if (s->dec[i])
            nodes[n++] = *s->dec[i];
    qsort(nodes, n, sizeof(*nodes), cmp_node);
    free(s->nodes);
    s->nodes = nodes;
    s->n_nodes = n;
    s->nodes_dirty = false;
    return 0;
}

/* Re-derive the coordinator, live count, state and done list from the mirror: no node record is
 * decoded here, and `state` only when it changed. -EBADMSG when `state` is not ours. */
static int derive(struct rdzv_session *s, int64_t now_ms, struct ea_error *err)
{
    if (!s->dirty)
        return 0;
    size_t plen = strlen(s->prefix);
    size_t n_live = 0;
    ssize_t coord = -1;
    const struct kv_entry *state_e = NULL;
    for (size_t i = 0; i < s->n_keys; i++) {
        const struct kv_entry *e = &s->keys[i];
        if (s->dec[i]) {
            n_live++;
            if (coord < 0 || e->create_revision < s->keys[coord].create_revision)
                coord = (ssize_t)i;
        } else if (strcmp(e->key + plen, "state") == 0) {
            state_e = e;
        }
    }
    int64_t state_rev = state_e ? state_e->mod_revision : 0;
    if (state_rev != s->state_rev || !s->have_state != !state_e) {
        struct rdzv_state st = {0};
        if (state_e) {
            int r = rdzv_state_decode(state_e->value, state_e->value_len, &st, err);
            if (r < 0)
                return ea_error_wrap(err, r, "key '%s'", state_e->key);
        }
        rdzv_state_clear(&s->state);
        s->state = st;
        s->have_state = state_e != NULL;
        s->state_rev = state_rev;
    }
    const char **done = calloc(s->n_keys ? s->n_keys : 1, sizeof(*done));
    if (!done)
        return ea_errorf(err, -ENOMEM, "out of memory");
    size_t n_done = 0;
    if (s->have_state) {
        char dprefix[KEY_MAX];
        key_of(s, dprefix, "rounds/%" PRId64 "/done/", s->state.round);
        size_t dlen = strlen(dprefix);
        for (size_t i = 0; i < s->n_keys; i++)
            if (strncmp(s->keys[i].key, dprefix, dlen) == 0)
                done[n_done++] = s->keys[i].key + dlen;
    }
    free(s->done);
    s->done = done;
    s->n_done = n_done;
    s->n_live = n_live;
    s->coord = coord;
    const struct rdzv_state *st = &s->state;
    if (s->have_state && st->charge_round > 0 && st->charge_round == st->round) {
        if (s->charge_seen_round != st->charge_round) {
            s->charge_seen_round = st->charge_round;
            s->charge_seen_ms = now_ms;
        }
    } else {
        s->charge_seen_round = 0;
        s->charge_seen_ms = -1;
    }
    if (n_live >= (size_t)s->cfg.params.min_nodes) {
        if (s->min_reached_ms < 0)
            s->min_reached_ms = now_ms;
    } else {
        s->min_reached_ms = -1;
    }
    s->dirty = false;
    return 0;
}

/* List the whole run and (re)start the watch just after the listed revision. */
static int resync(struct rdzv_session *s, int64_t now_ms, struct ea_error *err)
{
    if (s->watch_id) {
        kv_watch_cancel(s->kv, s->watch_id);
        s->watch_id = 0;
    }
    s->need_resync = true; /* until the list and the new watch both succeed */
    struct kv_list l = {0};
    int r = kv_list(s->kv, s->prefix, &l, err);
    if (r < 0)
        return r;
    mirror_clear(s);
    for (size_t i = 0; i < l.n && r == 0; i++)
        r = mirror_put(s, &l.entries[i], now_ms);
    int64_t rev = l.revision;
    kv_list_clear(&l);
    if (r < 0)
        return ea_errorf(err, r, "out of memory");
    r = kv_watch(s->kv, s->prefix, rev + 1, &s->watch_id, err);
    if (r < 0)
        return r;
    s->need_resync = false;
    return derive(s, now_ms, err);
}

/* Write our node record only if the key is absent, or holds a stale record of ours: the same
 * host and our pid (a rejoin) or a pid that no longer exists there (this agent restarted). Another
 * live agent's record means a duplicate --node-id: KV_EINVAL naming it (the agent exits 2). */
static int claim_node_key(struct rdzv_session *s, const char *json, int64_t lease,
                          struct ea_error *err)
{
    int64_t expected = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        struct kv_entry cur = {0};
        int r = kv_cas(s->kv, s->node_key, json, strlen(json), expected, lease, NULL, &cur, err);
        if (r != KV_ECONFLICT) {
            kv_entry_clear(&cur);
            return r;
        }
        struct rdzv_node old = {0};
        bool known = cur.mod_revision > 0 && cur.value &&
                     rdzv_node_decode(cur.value, cur.value_len, &old, NULL) == 0;
        bool ours = known && strcmp(old.host, s->cfg.self.host) == 0 &&
                    (old.pid == s->cfg.self.pid ||
                     (old.pid > 0 && kill((pid_t)old.pid, 0) < 0 && errno == ESRCH));
        if (cur.mod_revision > 0 && !ours) {
            r = ea_errorf(err, KV_EINVAL,
                          "node id '%s' is already used by a live agent (pid %lld on host '%s') "
                          "under '%s': give every agent its own --node-id",
                          s->cfg.self.node_id, (long long)old.pid, known ? old.host : "?",
                          s->prefix);
            kv_entry_clear(&cur);
            return r;
        }
        expected = cur.mod_revision; /* 0: it vanished meanwhile */
        kv_entry_clear(&cur);
        ea_error_clear(err);
    }
    return ea_errorf(err, KV_ECONFLICT, "node key '%s' keeps changing under us", s->node_key);
}

int rdzv_join(struct rdzv_session *s, struct ea_error *err)
{
    int64_t now = ea_now_ms();
    char *json = NULL;
    s->cfg.self.joined_ms = ea_wall_ms(); /* this incarnation's; `status` shows it as SINCE */
    int r = rdzv_node_encode(&s->cfg.self, &json, err);
    if (r < 0)
        return r;
    int64_t lease = 0;
    r = kv_lease_grant(s->kv, s->cfg.lease_ttl_ms, &lease, err);
    if (r == 0)
        r = claim_node_key(s, json, lease, err);
    if (r < 0 && lease)
        kv_lease_revoke(s->kv, lease, NULL);
    free(json);
    if (r < 0)
        return r;
    s->lease = lease;
    s->keepalive_due_ms = now + s->cfg.lease_ttl_ms / 3;
    s->renewed_ms = now;
    s->last_arrival_ms = now;
    return resync(s, now, err);
}

int rdzv_on_events(struct rdzv_session *s, struct ea_error *err)
{
    struct kv_event *ev = NULL;
    size_t n = 0;
    int64_t now = ea_now_ms();
    int r = kv_read_events(s->kv, &ev, &n, err);
    if (r < 0)
        return r;
    bool broken = false;
    for (size_t i = 0; i < n && r == 0; i++) {
        if (ev[i].watch_id != s->watch_id)
            continue;
        if (ev[i].type == KV_EVENT_PUT)
            r = mirror_put(s, &ev[i].entry, now);
        else if (ev[i].type == KV_EVENT_DELETE)
            mirror_del(s, ev[i].entry.key);
        else
            broken = true;
    }
    kv_events_free(ev, n);
    if (r < 0)
        return ea_errorf(err, r, "out of memory");
    if (broken)
        return resync(s, now, err);
    return derive(s, now, err);
}

bool rdzv_is_coordinator(const struct rdzv_session *s)
{
    return s->coord >= 0 && strcmp(s->dec[s->coord]->node_id, s->cfg.self.node_id) == 0;
}

/* CAS `next` onto `state` fenced on `expected`; adopt the winner's value on conflict. */
static int write_state(struct rdzv_session *s, const struct rdzv_state *next, int64_t expected,
                       struct ea_error *err)
{
    char key[KEY_MAX], *json = NULL;
    key_of(s, key, "state");
    int r = rdzv_state_encode(next, &json, err);
    if (r < 0)
        return r;
    struct kv_entry cur = {0};
    int64_t rev = 0;
    r = kv_cas(s->kv, key, json, strlen(json), expected, 0, &rev, &cur, err);
    if (r == 0) {
        /* mirror our own write at once (the watch will confirm it) */
        ssize_t i = mirror_find(s, key);
        struct kv_entry e = {.key = key, .value = json, .value_len = strlen(json),
                             .mod_revision = rev,
                             .create_revision = i >= 0 ? s->keys[i].create_revision : rev};
        struct kv_entry copy;
        r = kv_entry_copy(&copy, &e);
        if (r == 0)
            r = mirror_put(s, &copy, ea_now_ms());
        free(json);
        if (r < 0)
            return ea_errorf(err, r, "out of memory");
        r = derive(s, ea_now_ms(), err);
        return r < 0 ? r : 1;
    }
    free(json);
    if (r == KV_ECONFLICT) {
        r = 0;
        if (cur.mod_revision > 0)
            r = mirror_put(s, &cur, ea_now_ms());
        else
            mirror_del(s, key);
        kv_entry_clear(&cur);
        if (r < 0)
            return ea_errorf(err, r, "out of memory");
        r = derive(s, ea_now_ms(), err);
        return r < 0 ? r : 0;
    }
    return r;
}

int rdzv_tick(struct rdzv_session *s, int64_t now_ms, struct ea_error *err)
{
    int r = s->need_resync ? resync(s, now_ms, err) : derive(s, now_ms, err);
    if (r < 0)
        return r;
    s->plan_wake_ms = -1;
    if (!rdzv_is_coordinator(s))
        return 0;
    if ((r = ensure_nodes(s, err)) < 0)
        return r;
    struct rdzv_view v = {
        .state = s->have_state ? &s->state : NULL,
        .nodes = s->nodes,
        .n_nodes = s->n_nodes,
        .done = s->done,
        .n_done = s->n_done,
        .now_ms = now_ms,
        .last_arrival_ms = s->last_arrival_ms,
        .min_reached_ms = s->min_reached_ms,
        .generation = s->have_state ? rdzv_state_generation(&s->state, s->state_rev) : 0,
        .charge_seen_ms = s->charge_seen_ms,
    };
    struct rdzv_state next = {0};
    r = rdzv_plan(&s->cfg.params, &v, &next, &s->plan_wake_ms, err);
    if (r <= 0)
        return r;
    r = write_state(s, &next, s->have_state ? s->state_rev : 0, err);
    rdzv_state_clear(&next);
    return r;
}

int rdzv_keepalive(struct rdzv_session *s, int64_t now_ms, struct ea_error *err)
{
    if (s->keepalive_due_ms < 0 || now_ms < s->keepalive_due_ms)
        return 0;
    int r = kv_lease_keepalive(s->kv, s->lease, NULL, err);
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

int64_t rdzv_last_call_ms(const struct rdzv_session *s)
{
    return s->min_reached_ms >= 0 ? s->min_reached_ms + s->cfg.params.last_call_ms : -1;
}

int64_t rdzv_lease_valid_until(const struct rdzv_session *s)
{
    return s->lease ? s->renewed_ms + s->cfg.lease_ttl_ms : 0;
}

/* 1 when `generation` is still the running round (after catching up with the store), 0 when
 * the run has moved on already, or a negative error. */
static int still_running(struct rdzv_session *s, int64_t generation, struct ea_error *err)
{
    int r = derive(s, ea_now_ms(), err);
    if (r < 0)
        return r;
    return s->have_state && rdzv_state_generation(&s->state, s->state_rev) == generation &&
           s->state.status == RDZV_RUNNING;
}

int rdzv_reform(struct rdzv_session *s, int64_t generation, struct ea_error *err)
{
    int r = still_running(s, generation, err);
    if (r <= 0)
        return r;
    struct rdzv_state next = {0};
    if ((r = ensure_nodes(s, err)) < 0)
        return r;
    r = rdzv_plan_reform(&s->cfg.params, &s->state, s->nodes, s->n_nodes, &next, err);
    if (r < 0)
        return r;
    r = write_state(s, &next, s->state_rev, err);
    rdzv_state_clear(&next);
    return r < 0 ? r : 0;
}

int64_t rdzv_wake_ms(const struct rdzv_session *s)
{
    int64_t a = s->plan_wake_ms, b = s->keepalive_due_ms;
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    return a < b ? a : b;
}

const struct rdzv_state *rdzv_current(const struct rdzv_session *s, int64_t *ret_generation)
{
    if (!s->have_state)
        return NULL;
    if (ret_generation)
        *ret_generation = rdzv_state_generation(&s->state, s->state_rev);
    return &s->state;
}

int rdzv_my_index(const struct rdzv_session *s)
{
    return s->have_state ? rdzv_state_find(&s->state, s->cfg.self.node_id) : -1;
}

size_t rdzv_live_count(const struct rdzv_session *s)
{
    return s->n_live;
}

int rdzv_publish_round_key(struct rdzv_session *s, int64_t round, const char *name,
                           const char *value, struct ea_error *err)
{
    char key[KEY_MAX];
    key_of(s, key, "rounds/%" PRId64 "/%s", round, name);
    struct kv_entry cur = {0};
    int64_t rev = 0;
    int r = kv_cas(s->kv, key, value, strlen(value), 0, 0, &rev, &cur, err);
    if (r == 0) {
        /* mirror our own write at once, so the caller can use it without waiting for the watch */
        struct kv_entry e = {.key = key, .value = (char *)value, .value_len = strlen(value),
                             .mod_revision = rev, .create_revision = rev};
        r = kv_entry_copy(&cur, &e);
    } else if (r != KV_ECONFLICT) {
        return r;
    }
    r = r < 0 && r != KV_ECONFLICT ? r : mirror_put(s, &cur, ea_now_ms()); /* first one wins */
    kv_entry_clear(&cur);
    return r < 0 ? ea_errorf(err, r, "out of memory") : 0;
}

const char *rdzv_round_key(const struct rdzv_session *s, int64_t round, const char *name)
{
    char key[KEY_MAX];
    key_of(s, key, "rounds/%" PRId64 "/%s", round, name);
    ssize_t i = mirror_find(s, key);
    return i >= 0 ? s->keys[i].value : NULL;
}

int rdzv_publish_master(struct rdzv_session *s, int64_t round, const char *addr_port,
                        struct ea_error *err)
{
    return rdzv_publish_round_key(s, round, "master", addr_port, err);
}

const char *rdzv_master(const struct rdzv_session *s, int64_t round)
{
    return rdzv_round_key(s, round, "master");
}

const struct rdzv_node *rdzv_node_find(const struct rdzv_session *s, const char *node_id)
{
    char key[KEY_MAX];
    key_of(s, key, "nodes/%s", node_id);
    ssize_t i = mirror_find(s, key);
    return i >= 0 ? s->dec[i] : NULL;
}

int rdzv_publish_probe(struct rdzv_session *s, const char *value, struct ea_error *err)
{
    char key[KEY_MAX];
    key_of(s, key, "probe/%s", s->cfg.self.node_id);
    int64_t rev = 0;
    int r = kv_put(s->kv, key, value, strlen(value), s->lease, &rev, err);
    if (r < 0)
        return r;
    /* mirror our own write at once (the watch delivers it again later) */
    struct kv_entry e = {.key = key, .value = (char *)value, .value_len = strlen(value),
                         .mod_revision = rev, .create_revision = rev},
                    own = {0};
    if (kv_entry_copy(&own, &e) < 0 || mirror_put(s, &own, ea_now_ms()) < 0) {
        kv_entry_clear(&own);
        return ea_errorf(err, -ENOMEM, "out of memory");
    }
    return 0;
}

const char *rdzv_probe(const struct rdzv_session *s, const char *node_id)
{
    char key[KEY_MAX];
    key_of(s, key, "probe/%s", node_id);
    ssize_t i = mirror_find(s, key);
    return i >= 0 ? s->keys[i].value : NULL;
}

int rdzv_report_failure(struct rdzv_session *s, int64_t generation, const struct rdzv_failure *f,
                        struct ea_error *err)
{
    int r = derive(s, ea_now_ms(), err);
    if (r < 0)
        return r;
    if (!s->have_state || rdzv_state_generation(&s->state, s->state_rev) != generation ||
        s->state.status != RDZV_RUNNING)
        return 0; /* the run has moved on already: this failure is part of an older round */
    char key[KEY_MAX], *json = NULL;
    key_of(s, key, "failures/%" PRId64, s->state.round);
    if ((r = rdzv_failure_encode(f, &json, err)) < 0)
        return r;
    r = kv_cas(s->kv, key, json, strlen(json), 0, 0, NULL, NULL, err);
    free(json);
    if (r < 0 && r != KV_ECONFLICT)
        return r;
    struct rdzv_state next = {0};
    if ((r = ensure_nodes(s, err)) < 0)
        return r;
    r = rdzv_plan_failure(&s->cfg.params, &s->state, s->nodes, s->n_nodes, &next, err);
    if (r < 0)
        return r;
    r = write_state(s, &next, s->state_rev, err);
    rdzv_state_clear(&next);
    return r < 0 ? r : 0;
}

int rdzv_close(struct rdzv_session *s, int64_t generation, struct ea_error *err)
{
    int r = still_running(s, generation, err);
    if (r <= 0)
        return r;
    struct rdzv_state next = {0};
    if (rdzv_state_copy(&next, &s->state) < 0)
        return ea_errorf(err, -ENOMEM, "out of memory");
    next.status = RDZV_CLOSED;
    next.generation = generation; /* a same-round write */
    r = write_state(s, &next, s->state_rev, err);
    rdzv_state_clear(&next);
    return r < 0 ? r : 0;
}

int rdzv_get_failure(struct rdzv_session *s, int64_t round, struct rdzv_failure *ret,
                     struct ea_error *err)
{
    char key[KEY_MAX];
    key_of(s, key, "failures/%" PRId64, round);
    struct kv_entry e = {0};
    int r = kv_get(s->kv, key, &e, err);
    if (r < 0)
        return r;
    r = rdzv_failure_decode(e.value, e.value_len, ret, err);
    kv_entry_clear(&e);
    return r;
}

int rdzv_report_done(struct rdzv_session *s, int64_t round, struct ea_error *err)
{
    char key[KEY_MAX];
    key_of(s, key, "rounds/%" PRId64 "/done/%s", round, s->cfg.self.node_id);
    return kv_put(s->kv, key, "{}", 2, 0, NULL, err);
}

int rdzv_leave(struct rdzv_session *s, struct ea_error *err)
{
    if (!s->lease)
        return 0; /* never joined (or already left): nothing of ours is in the store */
    int r = kv_del(s->kv, s->node_key, err);
    if (s->lease) {
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
