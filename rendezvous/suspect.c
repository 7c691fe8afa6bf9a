// SPDX-License-Identifier: Apache-2.0
/* rdzv suspect: suspicion keys, their confirmation's store writes, and the ring's node records. */
#include "suspect.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ea_time.h"
#include "session_internal.h"

/* Deletes of stale suspect keys one rdzv_suspects() call makes at most (the rest next time: the
 * deletes themselves are changes): a pass of the agent's loop stays short. */
#define SUSPECT_CLEAN_MAX 64
_Static_assert(SUSPECT_CLEAN_MAX <= KV_TXN_OPS_MAX, "one transaction deletes a pass's stale keys");

static void count_request(struct rdzv_session *s, bool write)
{
    s->stats.requests++;
    if (write) {
        s->stats.writes++;
        s->stats.keys_written++;
    }
}

static int peer_of(const struct rdzv_node *n, int64_t lease, struct rdzv_ring_peer *ret,
                   struct ea_error *err)
{
    if (n->live_port <= 0)
        return ea_errorf(err, -ENOPROTOOPT, "node '%s' does not take part in the liveness ring",
                         n->node_id);
    struct rdzv_ring_peer p = {.port = n->live_port, .lease = lease, .ckpt_port = n->ckpt_port};
    snprintf(p.node_id, sizeof(p.node_id), "%s", n->node_id);
    snprintf(p.addr, sizeof(p.addr), "%s", n->live_addr[0] ? n->live_addr : n->addr);
    snprintf(p.ns, sizeof(p.ns), "%s", n->live_ns);
    snprintf(p.domain, sizeof(p.domain), "%s", n->domain);
    *ret = p;
    return 0;
}

int rdzv_ring_peer(struct rdzv_session *s, const char *node_id, struct rdzv_ring_peer *ret,
                   struct ea_error *err)
{
    char key[KEY_MAX];
    rdzv_key_of(s, key, "nodes/%s", node_id);
    if (s->full) {
        ssize_t i = rdzv_mirror_find(&s->m, key);
        if (i < 0)
            return ea_errorf(err, KV_ENOTFOUND, "no node record '%s'", key);
        if (!s->m.dec[i])
            return ea_errorf(err, -ENOPROTOOPT, "node record '%s' does not decode", key);
        return peer_of(s->m.dec[i], s->m.keys[i].lease, ret, err);
    }
    struct kv_entry e = {0};
    count_request(s, false);
    int r = kv_get(s->kv, key, &e, err);
    if (r < 0)
        return r;
    s->stats.bytes_received += strlen(e.key) + e.value_len;
    struct rdzv_node n;
    r = rdzv_node_decode(e.value, e.value_len, &n, err);
    if (r == 0 && strcmp(n.node_id, node_id) != 0)
        r = ea_errorf(err, -EBADMSG, "node record '%s' names node '%s'", key, n.node_id);
    if (r == 0)
        r = peer_of(&n, e.lease, ret, err);
    else
        r = ea_error_wrap(err, -ENOPROTOOPT, "key '%s'", key);
    kv_entry_clear(&e);
    return r;
}

int rdzv_suspicion_encode(const struct rdzv_suspicion *x, char **ret_json, struct ea_error *err)
{
    json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:I}", "schema", RDZV_SCHEMA, "by", x->by, "cause",
                          x->cause, "fault_ms", (json_int_t)x->fault_ms, "detected_ms",
                          (json_int_t)x->detected_ms);
    if (j && x->also[0] && json_object_set_new(j, "also", json_string(x->also)) < 0) {
        json_decref(j);
        j = NULL;
    }
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s)
        return ea_errorf(err, -ENOMEM, "out of memory encoding a suspicion");
    *ret_json = s;
    return 0;
}

int rdzv_suspicion_decode(const char *json, size_t len, struct rdzv_suspicion *ret,
                          struct ea_error *err)
{
    if (len > RDZV_SUSPECT_BYTES_MAX)
        return ea_errorf(err, -EBADMSG, "suspicion is %zu bytes, more than the %u one can be", len,
                         RDZV_SUSPECT_BYTES_MAX);
    json_error_t jerr;
    json_t *j = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    const char *schema = NULL, *by = NULL, *cause = NULL, *also = NULL;
    json_int_t fault = 0, detected = 0;
    int r = 0;
    if (!j || json_unpack_ex(j, &jerr, 0, "{s:s, s:s, s:s, s:I, s:I, s?s}", "schema", &schema, "by",
                             &by, "cause", &cause, "fault_ms", &fault, "detected_ms", &detected,
                             "also", &also) < 0)
        r = ea_errorf(err, -EBADMSG, "suspicion: %s", jerr.text);
    else if (strcmp(schema, RDZV_SCHEMA) != 0)
        r = ea_errorf(err, -EBADMSG, "suspicion has schema '%s', expected '%s'", schema,
                      RDZV_SCHEMA);
    else if (!by[0] || rdzv_strlcpy(ret->by, sizeof(ret->by), by) < 0 || !cause[0] ||
             rdzv_strlcpy(ret->cause, sizeof(ret->cause), cause) < 0)
        r = ea_errorf(err, -EBADMSG, "suspicion: 'by' or 'cause' is empty or too long");
    else if (also && (!also[0] || rdzv_strlcpy(ret->also, sizeof(ret->also), also) < 0 ||
                      strcmp(also, by) == 0))
        r = ea_errorf(err, -EBADMSG, "suspicion: 'also' is empty, too long or the same as 'by'");
    else if (fault < -1 || detected <= 0)
        r = ea_errorf(err, -EBADMSG, "suspicion: fault_ms %lld or detected_ms %lld out of range",
                      (long long)fault, (long long)detected);
    json_decref(j);
    if (r == 0 && !also)
        ret->also[0] = '\0';
    if (r == 0) {
        ret->fault_ms = fault;
        ret->detected_ms = detected;
    }
    return r;
}

/* Key `key` (cur) was written by another watcher first: put this one (`by`) in its `also`, iff
 * it is unchanged and has nobody there yet. KV_ECONFLICT when nothing was written. A key that
 * does not decode is left to the coordinator (it deletes it). */
static int second_word(struct rdzv_session *s, const char *key, const struct kv_entry *cur,
                       const char *by, struct ea_error *err)
{
    struct rdzv_suspicion old = {0};
    if (cur->mod_revision <= 0 || !cur->value ||
        rdzv_suspicion_decode(cur->value, cur->value_len, &old, NULL) < 0 || old.also[0] ||
        strcmp(old.by, by) == 0)
        return KV_ECONFLICT;
    snprintf(old.also, sizeof(old.also), "%s", by);
    char *json = NULL;
    int r = rdzv_suspicion_encode(&old, &json, err);
    if (r < 0)
        return r;
    count_request(s, true);
    r = kv_cas(s->kv, key, json, strlen(json), cur->mod_revision, cur->lease, NULL, NULL, err);
    free(json);
    if (r == KV_ECONFLICT)
        ea_error_clear(err);
    return r;
}

int rdzv_suspect(struct rdzv_session *s, const struct rdzv_suspicion *x, struct ea_error *err)
{
    int r = rdzv_derive(s, ea_now_ms(), err);
    if (r < 0)
        return r;
    if (!s->lease || !s->have_state || s->state.round != x->round ||
        s->state.status != RDZV_RUNNING)
        return 0; /* the run has moved on: this suspicion is about a round that ended */
    char key[KEY_MAX], *json = NULL;
    rdzv_key_of(s, key, "suspect/%" PRId64 "/%s", x->round, x->node_id);
    if ((r = rdzv_suspicion_encode(x, &json, err)) < 0)
        return r;
    count_request(s, true);
    struct kv_entry cur = {0};
    r = kv_cas(s->kv, key, json, strlen(json), 0, s->lease, NULL, &cur, err);
    free(json);
    if (r == KV_ECONFLICT) { /* somebody (the suspect's other neighbour) was first */
        ea_error_clear(err);
        r = second_word(s, key, &cur, x->by, err);
    }
    kv_entry_clear(&cur);
    return r == KV_ECONFLICT ? 0 : r < 0 ? r : 1;
}

/* Delete `key` iff its mod_revision is still `rev` (0 on success or when it changed). */
static int delete_fenced(struct rdzv_session *s, const char *key, int64_t rev, struct ea_error *err)
{
    struct kv_cmp cmp = {key, rev};
    struct kv_op op = {.key = key, .del = true};
    count_request(s, true);
    int r = kv_txn(s->kv, &cmp, 1, &op, 1, NULL, err);
    if (r == KV_ECONFLICT) {
        ea_error_clear(err);
        return 0;
    }
    ssize_t i = r == 0 ? rdzv_mirror_find(&s->m, key) : -1;
    if (i >= 0 && s->m.keys[i].mod_revision == rev)
        rdzv_mirror_del(&s->m, key); /* the watch would, later */
    return r;
}

/* Delete keys[0..n) (n <= KV_TXN_OPS_MAX) in one transaction, each fenced on its mod_revision:
 * 0 and every key freed, or nonzero with nothing deleted and nothing freed (one was rewritten
 * meanwhile, or the store failed: the caller goes key by key). A round's evictions leave that
 * many keys behind; one write for them, not one each. */
static int delete_all_fenced(struct rdzv_session *s, char **keys, const int64_t *revs, size_t n)
{
    struct kv_cmp cmps[SUSPECT_CLEAN_MAX];
    struct kv_op ops[SUSPECT_CLEAN_MAX];
    for (size_t k = 0; k < n; k++) {
        cmps[k] = (struct kv_cmp){keys[k], revs[k]};
        ops[k] = (struct kv_op){.key = keys[k], .del = true};
    }
    count_request(s, true);
    if (kv_txn(s->kv, cmps, n, ops, n, NULL, NULL) != 0)
        return -1;
    for (size_t k = 0; k < n; k++) {
        ssize_t i = rdzv_mirror_find(&s->m, keys[k]);
        if (i >= 0 && s->m.keys[i].mod_revision == revs[k])
            rdzv_mirror_del(&s->m, keys[k]); /* the watch would, later */
        free(keys[k]);
    }
    return 0;
}

/* "suspect/<round>/<node-id>" (rel, after the prefix) into its parts; false when malformed. */
static bool parse_key(const char *rel, int64_t *ret_round, const char **ret_node)
{
    const char *p = rel + strlen("suspect/");
    if (*p < '0' || *p > '9')
        return false;
    int64_t round = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (round > (INT64_MAX - 9) / 10)
            return false;
        round = round * 10 + (*p - '0');
    }
    if (*p != '/' || !p[1] || strlen(p + 1) >= RDZV_ID_MAX || strchr(p + 1, '/'))
        return false;
    *ret_round = round;
    *ret_node = p + 1;
    return true;
}

int rdzv_suspects_peek(struct rdzv_session *s, int64_t round, struct rdzv_suspect_case *ret,
                       size_t max, size_t *ret_n, struct ea_error *err)
{
    *ret_n = 0;
    if (round <= 0 || !max)
        return 0;
    char prefix[KEY_MAX];
    rdzv_key_of(s, prefix, "suspect/%" PRId64 "/", round);
    struct kv_list l = {0};
    count_request(s, false);
    int r = kv_list_page(s->kv, prefix, prefix, max, &l, err);
    if (r < 0)
        return r;
    size_t n = 0;
    for (size_t i = 0; i < l.n && n < max; i++) {
        const struct kv_entry *e = &l.entries[i];
        s->stats.bytes_received += strlen(e->key) + e->value_len;
        int64_t kr = 0;
        const char *node = NULL;
        struct rdzv_suspect_case c = {.key_rev = e->mod_revision};
        struct ea_error derr = {0};
        /* a key that does not parse or decode is the coordinator's to report and delete */
        if (!parse_key(e->key + strlen(s->prefix), &kr, &node) || kr != round ||
            strcmp(node, s->cfg.self.node_id) == 0 ||
            rdzv_suspicion_decode(e->value, e->value_len, &c.sus, &derr) < 0 ||
            rdzv_ring_peer(s, node, &c.peer, &derr) < 0)
            continue;
        c.sus.round = round;
        snprintf(c.sus.node_id, sizeof(c.sus.node_id), "%s", node);
        ret[n++] = c;
    }
    kv_list_clear(&l);
    *ret_n = n;
    return 0;
}

/* ---- the coordinator's queue of suspicion keys -------------------------------------------
 * The mirror reports every key put (rdzv_suspect_on_put); suspect/ keys are queued and
 * rdzv_suspects() looks only at those: O(keys changed) per event at the coordinator, never a
 * scan of the N-key mirror (issue 30's rule). A re-sync clears the mirror and lists it again:
 * every key is put again, so each is looked at once then. Keys looked at and left in the store
 * (a later round's; one handed out to be confirmed) are kept aside and looked at again once the
 * round changes (then, of an earlier round, they are deleted). */

/* Suspicion keys queued at most (due + kept); past it, the queue is dropped and the next
 * rdzv_suspects() scans the mirror once. */
#define SUSPECT_QUEUE_MAX 4096

static void queue_drop(char **v, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        free(v[i]);
    *n = 0;
}

/* Append `key` (taken: NULL copies `copy`). -ENOMEM. */
static int queue_push(char ***v, size_t *n, size_t *cap, char *key, const char *copy)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        char **p = realloc(*v, c * sizeof(*p));
        if (!p) {
            free(key);
            return -ENOMEM;
        }
        *v = p;
        *cap = c;
    }
    if (!key && (!copy || !(key = strdup(copy))))
        return -ENOMEM;
    (*v)[(*n)++] = key;
    return 0;
}

static void queue_overflow(struct rdzv_suspect_queue *q)
{
    queue_drop(q->due, &q->n_due);
    queue_drop(q->kept, &q->n_kept);
    q->overflow = true;
}

void rdzv_suspect_on_put(void *ctx, const char *key)
{
    struct rdzv_session *s = ctx;
    struct rdzv_suspect_queue *q = &s->sq;
    if (!key) { /* the mirror was cleared: the listing that follows puts every key again */
        queue_drop(q->due, &q->n_due);
        queue_drop(q->kept, &q->n_kept);
        q->overflow = false;
        return;
    }
    if (q->overflow || !rdzv_mirror_under(&s->m, key, "suspect/"))
        return;
    if (q->n_due + q->n_kept >= SUSPECT_QUEUE_MAX ||
        queue_push(&q->due, &q->n_due, &q->cap_due, NULL, key) < 0)
        queue_overflow(q);
}

void rdzv_suspect_queue_free(struct rdzv_session *s)
{
    struct rdzv_suspect_queue *q = &s->sq;
    queue_drop(q->due, &q->n_due);
    queue_drop(q->kept, &q->n_kept);
    free(q->due);
    free(q->kept);
    memset(q, 0, sizeof(*q));
}

/* Make the queue what it must look at now: after an overflow, every suspect/ key of the mirror
 * (one scan); after a change of round, the keys kept aside too. */
static int queue_refill(struct rdzv_session *s, int64_t round, struct ea_error *err)
{
    struct rdzv_suspect_queue *q = &s->sq;
    int r = 0;
    if (q->overflow) {
        queue_drop(q->due, &q->n_due);
        queue_drop(q->kept, &q->n_kept);
        q->overflow = false;
        for (size_t i = 0; i < s->m.n_keys && r == 0; i++)
            if (rdzv_mirror_under(&s->m, s->m.keys[i].key, "suspect/"))
                r = queue_push(&q->due, &q->n_due, &q->cap_due, NULL, s->m.keys[i].key);
    } else if (round != q->round) {
        for (size_t i = 0; i < q->n_kept && r == 0; i++) {
            r = queue_push(&q->due, &q->n_due, &q->cap_due, q->kept[i], NULL);
            q->kept[i] = NULL;
        }
        queue_drop(q->kept, &q->n_kept);
    }
    if (r < 0) {
        queue_overflow(q);
        return ea_errorf(err, r, "out of memory");
    }
    q->round = round;
    return 0;
}

enum verdict { V_LATER, V_CASE, V_STALE };

/* What the coordinator makes of suspect key e (its case in *c when V_CASE). */
static enum verdict judge(struct rdzv_session *s, const struct kv_entry *e, bool running,
                          struct rdzv_suspect_case *c)
{
    const char *rel = e->key + strlen(s->prefix);
    int64_t round = 0;
    const char *node = NULL;
    *c = (struct rdzv_suspect_case){.key_rev = e->mod_revision};
    bool ok = parse_key(rel, &round, &node);
    if (ok && s->have_state && round > s->state.round)
        return V_LATER; /* of a round this node has not seen committed yet: leave it */
    struct ea_error derr = {0};
    if (ok && rdzv_suspicion_decode(e->value, e->value_len, &c->sus, &derr) < 0) {
        char msg[EA_ERROR_MSG_MAX + 64];
        snprintf(msg, sizeof(msg), "ignoring key '%s': %s", e->key, derr.msg);
        rdzv_warn(s, msg); /* once; the key is deleted */
        ok = false;
    }
    ok = ok && running && round == s->state.round && rdzv_state_find(&s->state, node) >= 0 &&
         strcmp(node, s->cfg.self.node_id) != 0;
    ok = ok && rdzv_ring_peer(s, node, &c->peer, NULL) == 0; /* live, and in the ring */
    if (!ok)
        return V_STALE;
    c->sus.round = round;
    snprintf(c->sus.node_id, sizeof(c->sus.node_id), "%s", node);
    return V_CASE;
}

int rdzv_suspects(struct rdzv_session *s, struct rdzv_suspect_case *ret, size_t max, size_t *ret_n,
                  struct ea_error *err)
{
    *ret_n = 0;
    if (!s->is_coord || !s->full)
        return 0;
    int r = rdzv_derive(s, ea_now_ms(), err);
    if (r < 0)
        return r;
    bool running = s->have_state && s->state.status == RDZV_RUNNING;
    if ((r = queue_refill(s, running ? s->state.round : 0, err)) < 0)
        return r;
    struct rdzv_suspect_queue *q = &s->sq;
    size_t n = 0, cleaned = 0, left = 0;
    /* keys to delete are collected first: deleting changes the mirror being looked at */
    char *stale[SUSPECT_CLEAN_MAX];
    int64_t stale_rev[SUSPECT_CLEAN_MAX];
    for (size_t i = 0; i < q->n_due; i++) {
        char *key = q->due[i];
        ssize_t mi = rdzv_mirror_find(&s->m, key);
        if (mi < 0) { /* gone already */
            free(key);
            continue;
        }
        struct rdzv_suspect_case c;
        enum verdict v = judge(s, &s->m.keys[mi], running, &c);
        for (size_t j = 0; v == V_CASE && j < n; j++)
            if (strcmp(ret[j].sus.node_id, c.sus.node_id) == 0) { /* put twice since the last
                                                                     look (`also` written) */
                free(key);
                key = NULL;
                v = V_LATER;
            }
        if (!key)
            continue;
        if (v == V_CASE && n < max) {
            ret[n++] = c;
            v = V_LATER; /* kept aside: deleted once its round is over */
        } else if (v == V_STALE && cleaned < SUSPECT_CLEAN_MAX) {
            stale_rev[cleaned] = s->m.keys[mi].mod_revision;
            stale[cleaned++] = key;
            continue;
        } else if (v != V_LATER) {
            q->due[left++] = key; /* no room in this call: the next one */
            continue;
        }
        if (queue_push(&q->kept, &q->n_kept, &q->cap_kept, key, NULL) < 0)
            q->overflow = true; /* looked at again by the scan that follows */
    }
    q->n_due = left;
    if (cleaned > 1 && delete_all_fenced(s, stale, stale_rev, cleaned) == 0)
        cleaned = 0; /* one transaction took them all */
    for (size_t k = 0; k < cleaned; k++) {
        if (r == 0)
            r = delete_fenced(s, stale[k], stale_rev[k], err);
        if (r == 0)
            free(stale[k]);
        else if (queue_push(&q->due, &q->n_due, &q->cap_due, stale[k], NULL) < 0)
            q->overflow = true; /* the store failed: looked at again next time */
    }
    *ret_n = n;
    return r;
}

bool rdzv_suspects_due(const struct rdzv_session *s)
{
    return s->sq.n_due > 0 || s->sq.overflow;
}

int rdzv_suspect_clear(struct rdzv_session *s, const struct rdzv_suspect_case *c,
                       struct ea_error *err)
{
    char key[KEY_MAX];
    rdzv_key_of(s, key, "suspect/%" PRId64 "/%s", c->sus.round, c->sus.node_id);
    return delete_fenced(s, key, c->key_rev, err);
}

/* A coordinator with suspect keys not looked at yet (one that has just taken over lists them
 * all) holds a loss a step at a time, at most this long from the first: its ring's confirmations
 * follow in the same pass (rdzv_hold_losses). */
#define DUE_HOLD_STEP_MS 50
#define DUE_HOLD_MAX_MS 1000

int64_t rdzv_loss_hold(struct rdzv_session *s, int64_t now_ms)
{
    if (!s->cfg.params.ring || !rdzv_suspects_due(s)) {
        s->due_since_ms = -1;
        return s->loss_hold_ms;
    }
    if (s->due_since_ms < 0)
        s->due_since_ms = now_ms;
    int64_t t = now_ms + DUE_HOLD_STEP_MS;
    if (t > s->due_since_ms + DUE_HOLD_MAX_MS)
        t = s->due_since_ms + DUE_HOLD_MAX_MS;
    return t > s->loss_hold_ms ? t : s->loss_hold_ms;
}

void rdzv_hold_losses(struct rdzv_session *s, int64_t until_ms)
{
    s->loss_hold_ms = until_ms;
    if (s->is_coord && (s->plan_wake_ms < 0 || until_ms < s->plan_wake_ms))
        s->plan_wake_ms = until_ms; /* planned again when it ends (or at once, lifted) */
}

/* Whether c's lease is the one to revoke: its node key is on it now (never a lease the node has
 * rejoined with since), and it is not this node's. */
static bool evictable(struct rdzv_session *s, const struct rdzv_suspect_case *c)
{
    char key[KEY_MAX];
    rdzv_key_of(s, key, "nodes/%s", c->sus.node_id);
    ssize_t i = rdzv_mirror_find(&s->m, key);
    return i >= 0 && c->peer.lease != 0 && s->m.keys[i].lease == c->peer.lease &&
           c->peer.lease != s->lease;
}

int rdzv_evict_each(struct rdzv_session *s, const struct rdzv_suspect_case *const *cs, size_t n,
                    int *ret, struct ea_error *err)
{
    int64_t *leases = calloc(n ? n : 1, sizeof(*leases));
    size_t *at = calloc(n ? n : 1, sizeof(*at));
    int *codes = calloc(n ? n : 1, sizeof(*codes));
    int r = leases && at && codes ? 0 : ea_errorf(err, -ENOMEM, "out of memory");
    size_t m = 0;
    for (size_t i = 0; r == 0 && i < n; i++) {
        ret[i] = 0;
        if (!evictable(s, cs[i]))
            continue;
        leases[m] = cs[i]->peer.lease;
        at[m++] = i;
        count_request(s, true);
    }
    /* the revokes together: a burst's evictions cost about one round trip, not one each (the
     * suspect keys are not deleted here: each was kept aside when handed out, and is deleted
     * once its round is over, in batches) */
    if (r == 0 && m)
        r = kv_lease_revoke_each(s->kv, leases, m, codes, err);
    bool failed = false;
    for (size_t j = 0; r == 0 && j < m; j++) {
        ret[at[j]] = codes[j] == 0 ? 1 : codes[j] == KV_ENOLEASE ? 0 : codes[j];
        failed = failed || ret[at[j]] < 0;
    }
    if (r == 0 && !failed)
        ea_error_clear(err); /* a lease gone already is no failure */
    free(codes);
    free(at);
    free(leases);
    return r;
}

int rdzv_evict(struct rdzv_session *s, const struct rdzv_suspect_case *c, struct ea_error *err)
{
    int one = 0;
    int r = rdzv_evict_each(s, &c, 1, &one, err);
    return r < 0 ? r : one;
}

bool rdzv_coord_holder(const struct rdzv_session *s, char *node_id, size_t size, int64_t *ret_lease)
{
    ssize_t i = rdzv_mirror_find(&s->m, s->coord_key);
    if (!s->have_coord || i < 0)
        return false;
    snprintf(node_id, size, "%s", s->coord.node_id);
    *ret_lease = s->m.keys[i].lease;
    return true;
}

int rdzv_evict_coord(struct rdzv_session *s, const char *node_id, int64_t lease,
                     struct ea_error *err)
{
    char holder[RDZV_ID_MAX];
    int64_t now_lease = 0;
    int r = rdzv_derive(s, ea_now_ms(), err);
    if (r < 0)
        return r;
    if (!rdzv_coord_holder(s, holder, sizeof(holder), &now_lease) || strcmp(holder, node_id) != 0 ||
        now_lease != lease || lease == 0 || lease == s->lease)
        return 0; /* another coordinator by now (or it rejoined): nothing to revoke */
    count_request(s, true);
    r = kv_lease_revoke(s->kv, lease, err);
    if (r == KV_ENOLEASE) {
        ea_error_clear(err);
        return 0;
    }
    if (r < 0)
        return r;
    /* this node saw it dead itself: it claims `coord` as soon as the key's delete arrives, not
     * at its turn (with failure domains it is outside the dead coordinator's) */
    s->revoked_coord_lease = lease;
    return 1;
}

int rdzv_coord_suspect(struct rdzv_session *s, const struct rdzv_coord_suspicion *x,
                       struct ea_error *err)
{
    int r = rdzv_derive(s, ea_now_ms(), err);
    if (r < 0)
        return r;
    if (!s->have_state || s->state.round != x->sus.round || s->state.status != RDZV_RUNNING)
        return 0;
    json_t *j = json_pack(
        "{s:s, s:s, s:i, s:s, s:i, s:s, s:I, s:I}", "schema", RDZV_SCHEMA, "node", x->sus.node_id,
        "coord_rank", x->coord_rank, "by", x->sus.by, "by_rank", x->by_rank, "cause", x->sus.cause,
        "fault_ms", (json_int_t)x->sus.fault_ms, "detected_ms", (json_int_t)x->sus.detected_ms);
    char *json = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!json)
        return ea_errorf(err, -ENOMEM, "out of memory");
    char key[KEY_MAX];
    rdzv_key_of(s, key, "rounds/%" PRId64 "/coord_suspect", x->sus.round);
    ssize_t before = rdzv_mirror_find(&s->m, key);
    r = before >= 0 ? 0 : rdzv_publish_round_key(s, x->sus.round, "coord_suspect", json, err);
    free(json);
    return r < 0 ? r : before < 0;
}

int rdzv_coord_suspicion(struct rdzv_session *s, struct rdzv_coord_suspicion *ret)
{
    if (!s->have_state || s->state.status != RDZV_RUNNING)
        return 0;
    char key[KEY_MAX];
    rdzv_key_of(s, key, "rounds/%" PRId64 "/coord_suspect", s->state.round);
    ssize_t i = rdzv_mirror_find(&s->m, key);
    if (i < 0)
        return 0;
    const struct kv_entry *e = &s->m.keys[i];
    struct rdzv_coord_suspicion x = {.key_rev = e->mod_revision, .sus.round = s->state.round};
    json_error_t jerr;
    json_t *j = e->value_len <= RDZV_SUSPECT_BYTES_MAX
                    ? json_loadb(e->value, e->value_len, JSON_REJECT_DUPLICATES, &jerr)
                    : NULL;
    const char *schema = NULL, *node = NULL, *by = NULL, *cause = NULL;
    json_int_t fault = 0, detected = 0;
    int bad =
        !j ||
        json_unpack_ex(j, &jerr, 0, "{s:s, s:s, s:i, s:s, s:i, s:s, s:I, s:I}", "schema", &schema,
                       "node", &node, "coord_rank", &x.coord_rank, "by", &by, "by_rank", &x.by_rank,
                       "cause", &cause, "fault_ms", &fault, "detected_ms", &detected) < 0 ||
        strcmp(schema, RDZV_SCHEMA) != 0 || !node[0] ||
        rdzv_strlcpy(x.sus.node_id, sizeof(x.sus.node_id), node) < 0 || !by[0] ||
        rdzv_strlcpy(x.sus.by, sizeof(x.sus.by), by) < 0 ||
        rdzv_strlcpy(x.sus.cause, sizeof(x.sus.cause), cause) < 0 || x.coord_rank < 0 ||
        x.by_rank < 0 || x.coord_rank == x.by_rank || fault < -1 || detected <= 0;
    json_decref(j);
    if (bad) {
        char msg[EA_ERROR_MSG_MAX];
        snprintf(msg, sizeof(msg), "ignoring key '%s': not a suspicion of the coordinator", key);
        rdzv_warn(s, msg);
        return -EBADMSG;
    }
    x.sus.fault_ms = fault;
    x.sus.detected_ms = detected;
    *ret = x;
    return 1;
}

int rdzv_coord_suspect_clear(struct rdzv_session *s, const struct rdzv_coord_suspicion *x,
                             struct ea_error *err)
{
    char key[KEY_MAX];
    rdzv_key_of(s, key, "rounds/%" PRId64 "/coord_suspect", x->sus.round);
    return delete_fenced(s, key, x->key_rev, err);
}

int rdzv_coord_confirmer(int n, int coord_rank, int by_rank)
{
    if (n < 3)
        return -1;
    /* half the rank order away: a rack of consecutive ranks that took the coordinator (its
     * neighbour by rank, the confirmer before issue 41, with it) leaves it alive */
    int far = (coord_rank + n / 2) % n;
    if (far != coord_rank && far != by_rank)
        return far;
    for (int k = 0;; k++)
        if (k != coord_rank && k != by_rank)
            return k;
}

uint64_t rdzv_changes(const struct rdzv_session *s)
{
    return s->m.changes;
}
