// SPDX-License-Identifier: Apache-2.0
/* pool: the queue, the `next` key and a queued run's standing (docs/protocol.md, "Pools"). */
#include "pool.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "ea_time.h"
#include "state.h"

int pool_init(struct pool *p, struct kv *kv, const char *prefix, const char *name,
              struct ea_error *err)
{
    size_t n = strlen(name);
    bool ok = n > 0 && n <= 100 && isalnum((unsigned char)name[0]);
    for (const char *c = name; ok && *c; c++)
        ok = isalnum((unsigned char)*c) || *c == '.' || *c == '_' || *c == '-';
    if (!ok)
        return ea_errorf(err, -EINVAL,
                         "--pool: '%s' must be 1-100 characters of A-Z a-z 0-9 . _ -, starting with a "
                         "letter or digit",
                         name);
    memset(p, 0, sizeof(*p));
    p->kv = kv;
    snprintf(p->prefix, sizeof(p->prefix), "%s", prefix);
    snprintf(p->name, sizeof(p->name), "%s", name);
    snprintf(p->base, sizeof(p->base), "%s" POOL_DIR "%s/", prefix, name);
    snprintf(p->next_key, sizeof(p->next_key), "%snext", p->base);
    return 0;
}

void pool_queue_key(const struct pool *p, const char *run_id, char *buf, size_t size)
{
    snprintf(buf, size, "%squeue/%s", p->base, run_id);
}

void pool_daemon_key(const struct pool *p, const char *node_id, char *buf, size_t size)
{
    snprintf(buf, size, "%sdaemons/%s", p->base, node_id);
}

void pool_run_key(const struct pool *p, const char *run_id, const char *name, char *buf,
                  size_t size)
{
    snprintf(buf, size, "%s%s/%s", p->prefix, run_id, name);
}

void pool_refused_key(const struct pool *p, const char *run_id, char *buf, size_t size)
{
    snprintf(buf, size, "%srefused/%s", p->base, run_id);
}

void pool_refused_prefix(const struct pool *p, char *buf, size_t size)
{
    snprintf(buf, size, "%srefused/", p->base);
}

void pool_queue_prefix(const struct pool *p, char *buf, size_t size)
{
    snprintf(buf, size, "%squeue/", p->base);
}

void pool_daemon_prefix(const struct pool *p, char *buf, size_t size)
{
    snprintf(buf, size, "%sdaemons/", p->base);
}

int pool_status_exit(const char *status)
{
    if (strcmp(status, "succeeded") == 0)
        return 0;
    if (strcmp(status, "failed") == 0)
        return 1;
    if (strcmp(status, "closed") == 0)
        return 4;
    return -1;
}

int pool_submit(struct pool *p, const struct runspec *s, struct ea_error *err)
{
    char qkey[POOL_KEY_MAX], skey[POOL_KEY_MAX];
    pool_queue_key(p, s->run_id, qkey, sizeof(qkey));
    pool_run_key(p, s->run_id, "state", skey, sizeof(skey));
    char *json = NULL;
    int r = runspec_encode(s, &json, err);
    if (r < 0)
        return r;
    /* create-only, and only for a run id the store has never run: a second run of a finished
     * id would find its old final state and end at once */
    struct kv_cmp cmps[] = {{.key = qkey, .mod_revision = 0}, {.key = skey, .mod_revision = 0}};
    struct kv_op op = {.key = qkey, .value = json, .len = strlen(json)};
    r = kv_txn(p->kv, cmps, 2, &op, 1, NULL, err);
    free(json);
    if (r == KV_ECONFLICT)
        return ea_errorf(err, -EEXIST,
                         "run '%s' exists already (queued in pool '%s' or run under '%s'): "
                         "give the new run its own --run-id",
                         s->run_id, p->name, p->prefix);
    return r;
}

enum pool_run pool_run_of_state(const struct rdzv_state *st, int max_nodes)
{
    switch (st->status) {
    case RDZV_SUCCEEDED:
    case RDZV_FAILED:
    case RDZV_CLOSED:
        return POOL_RUN_ENDED;
    case RDZV_FAILING:
        return POOL_RUN_FULL;
    case RDZV_RUNNING:
        return st->group_world_size >= max_nodes ? POOL_RUN_FULL : POOL_RUN_ROOM;
    case RDZV_WAITING:
        break;
    }
    return POOL_RUN_ROOM;
}

uint32_t pool_node_hash(const char *node)
{
    uint32_t h = 2166136261u;
    for (const char *c = node; *c; c++)
        h = (h ^ (uint8_t)*c) * 16777619u;
    return h;
}

int pool_run_check(struct pool *p, const struct runspec *s, enum pool_run *ret,
                   char *ret_status, size_t status_size, struct ea_error *err)
{
    char key[POOL_KEY_MAX];
    pool_run_key(p, s->run_id, "state", key, sizeof(key));
    struct kv_entry e = {0};
    int r = kv_get(p->kv, key, &e, err);
    if (r < 0 && r != KV_ENOTFOUND)
        return r;
    const char *name = "none";
    enum pool_run out = POOL_RUN_ROOM;
    int live = -1;
    struct rdzv_state st = {0};
    if (r == 0) {
        struct ea_error derr = {0};
        if (rdzv_state_decode(e.value, e.value_len, &st, &derr) < 0) {
            kv_entry_clear(&e);
            ea_errorf(err, -EBADMSG, "key '%s': %s", key, derr.msg);
            *ret = POOL_RUN_BAD;
            if (ret_status)
                snprintf(ret_status, status_size, "corrupt");
            return 0;
        }
        name = rdzv_status_name(st.status);
        out = pool_run_of_state(&st, s->max_nodes);
        if (st.status == RDZV_WAITING)
            r = KV_ENOTFOUND; /* as many as the coordinator counts gather */
        rdzv_state_clear(&st);
        kv_entry_clear(&e);
    }
    if (r == KV_ENOTFOUND) {
        pool_run_key(p, s->run_id, "coord", key, sizeof(key));
        r = kv_get(p->kv, key, &e, err);
        if (r < 0 && r != KV_ENOTFOUND)
            return r;
        struct rdzv_coord c = {0};
        if (r == 0 && rdzv_coord_decode(e.value, e.value_len, &c, NULL) == 0)
            live = c.live;
        kv_entry_clear(&e);
        out = live >= s->max_nodes ? POOL_RUN_FULL : POOL_RUN_ROOM;
    }
    *ret = out;
    if (ret_status)
        snprintf(ret_status, status_size, "%s", name);
    return 0;
}

int pool_next_get(struct pool *p, char *ret_run, size_t size, int64_t *ret_rev,
                  struct ea_error *err)
{
    struct kv_entry e = {0};
    int r = kv_get(p->kv, p->next_key, &e, err);
    if (r == KV_ENOTFOUND) {
        snprintf(ret_run, size, "%s", "");
        *ret_rev = 0;
        return 0;
    }
    if (r < 0)
        return r;
    json_t *j = json_loadb(e.value, e.value_len, 0, NULL);
    json_t *schema = json_object_get(j, "schema"), *run = json_object_get(j, "run");
    if (!json_is_string(schema) || strcmp(json_string_value(schema), RUNSPEC_SCHEMA) != 0 ||
        !json_is_string(run))
        snprintf(ret_run, size, "%s", ""); /* not ours: pool_advance rewrites it */
    else
        snprintf(ret_run, size, "%s", json_string_value(run));
    *ret_rev = e.mod_revision;
    json_decref(j);
    kv_entry_clear(&e);
    return 0;
}

int pool_spec_get(struct pool *p, const char *run_id, struct runspec *ret, int64_t *ret_rev,
                  struct ea_error *err)
{
    char key[POOL_KEY_MAX];
    pool_queue_key(p, run_id, key, sizeof(key));
    struct kv_entry e = {0};
    int r = kv_get(p->kv, key, &e, err);
    if (r < 0)
        return r;
    struct ea_error derr = {0};
    r = runspec_decode(e.value, e.value_len, ret, &derr);
    if (r == 0 && strcmp(ret->run_id, run_id) != 0) {
        runspec_clear(ret);
        r = ea_errorf(&derr, -EBADMSG, "it names run '%s'", ret->run_id);
    }
    if (r < 0)
        ea_errorf(err, r, "run spec '%s': %s", key, derr.msg);
    else
        ret->queue_rev = e.mod_revision;
    if (r == 0 && ret_rev)
        *ret_rev = e.mod_revision;
    kv_entry_clear(&e);
    return r;
}

/* Point `next` at `run`, the choice of a scan that began when `next` named `seen` at revision
 * `seen_rev` (0: absent). A value written since — a submission naming a run that scan may not
 * have read — is never overwritten: 0 (also when `next` names `run` already), or KV_ECONFLICT
 * when it changed since (the caller scans again). */
/* Scans again when a submission changed `next` during a scan, at most this many times more. */
#define POOL_ADVANCE_PASSES 2

static int next_put(struct pool *p, const char *run, const char *seen, int64_t seen_rev,
                    struct ea_error *err)
{
    if (seen_rev && strcmp(seen, run) == 0)
        return 0;
    json_t *j = json_pack("{s:s, s:s}", "schema", RUNSPEC_SCHEMA, "run", run);
    char *json = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    if (!json)
        return ea_errorf(err, -ENOMEM, "out of memory");
    int r = kv_cas(p->kv, p->next_key, json, strlen(json), seen_rev, 0, NULL, NULL, err);
    free(json);
    return r;
}

static int by_creation(const void *a, const void *b)
{
    const struct kv_entry *x = a, *y = b;
    return (x->create_revision > y->create_revision) - (x->create_revision < y->create_revision);
}

void pool_queue_sort(struct kv_list *l)
{
    if (l->n > 1)
        qsort(l->entries, l->n, sizeof(*l->entries), by_creation);
}

static bool listed(const char *const *full, size_t n, const char *run)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(full[i], run) == 0)
            return true;
    return false;
}

int pool_refuse(struct pool *p, const struct runspec *s, const struct specsig_verdict *v,
                const char *node, struct ea_error *err)
{
    char qkey[POOL_KEY_MAX], rkey[POOL_KEY_MAX];
    if (s->queue_rev <= 0)
        return ea_errorf(err, -EINVAL, "run spec '%s' was not read from the queue", s->run_id);
    pool_queue_key(p, s->run_id, qkey, sizeof(qkey));
    pool_refused_key(p, s->run_id, rkey, sizeof(rkey));
    char *spec = NULL;
    int r = runspec_encode(s, &spec, err);
    if (r < 0)
        return r;
    json_t *j = json_pack("{s:s, s:s, s:s, s:b, s:s, s:s, s:s, s:I, s:s}", "schema",
                          RUNSPEC_SCHEMA, "run", s->run_id, "reason", v->reason, "signed",
                          v->is_signed, "principal", v->principal, "fingerprint", v->fingerprint,
                          "by", node, "at_ms", (json_int_t)ea_wall_ms(), "spec", spec);
    char *json = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    free(spec);
    if (!json)
        return ea_errorf(err, -ENOMEM, "out of memory");
    struct kv_cmp cmp = {.key = qkey, .mod_revision = s->queue_rev};
    struct kv_op ops[] = {{.key = rkey, .value = json, .len = strlen(json)},
                          {.key = qkey, .del = true}};
    r = kv_txn(p->kv, &cmp, 1, ops, 2, NULL, err);
    free(json);
    return r;
}

/* The name under refused/ of a queue entry that is not ours: its key's run id when that could
 * be one (up to 127 bytes of A-Z a-z 0-9 . _ -), else a hash of the key (no other key can be
 * built from it, and a long key does not make a long one). */
static void bad_name(const char *key, const char *id, char *buf, size_t size)
{
    size_t n = strlen(id);
    bool ok = n > 0 && n < 128;
    for (const char *c = id; ok && *c; c++)
        ok = isalnum((unsigned char)*c) || *c == '.' || *c == '_' || *c == '-';
    if (ok)
        snprintf(buf, size, "%s", id);
    else
        snprintf(buf, size, "~key-%08x", (unsigned)pool_node_hash(key));
}

int pool_move_bad(struct pool *p, const struct kv_entry *e, const char *why, const char *node,
                  struct ea_error *err)
{
    char qprefix[POOL_KEY_MAX], name[160], rkey[POOL_KEY_MAX];
    pool_queue_prefix(p, qprefix, sizeof(qprefix));
    size_t plen = strlen(qprefix);
    if (strncmp(e->key, qprefix, plen) != 0 || e->mod_revision <= 0)
        return ea_errorf(err, -EINVAL, "key '%.200s' was not read from the queue", e->key);
    bad_name(e->key, e->key + plen, name, sizeof(name));
    json_t *t = json_string(why); /* the decoder's text may quote bytes that are not UTF-8 */
    if (!t)
        why = "(its reason is not text)";
    json_decref(t);
    pool_refused_key(p, name, rkey, sizeof(rkey));
    json_t *j = json_pack("{s:s, s:s, s:s+, s:b, s:s, s:s, s:s, s:I, s:s, s:I}", "schema",
                          RUNSPEC_SCHEMA, "run", name, "reason", "not a run spec of ours: ",
                          why, "signed", 0, "principal", "", "fingerprint", "", "by", node,
                          "at_ms", (json_int_t)ea_wall_ms(), "spec", "", "bytes",
                          (json_int_t)e->value_len);
    /* the entry itself as evidence when it is text and small: a record never outgrows what
     * one transaction may carry */
    json_t *raw = e->value_len <= RUNSPEC_BYTES_MAX ? json_stringn(e->value, e->value_len) : NULL;
    if (j && raw)
        json_object_set_new(j, "spec", raw);
    else
        json_decref(raw);
    char *json = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    if (!json)
        return ea_errorf(err, -ENOMEM, "out of memory");
    struct kv_cmp cmp = {.key = e->key, .mod_revision = e->mod_revision};
    struct kv_op ops[] = {{.key = rkey, .value = json, .len = strlen(json)},
                          {.key = e->key, .del = true}};
    int r = kv_txn(p->kv, &cmp, 1, ops, 2, NULL, err);
    free(json);
    return r;
}

/* What pool_advance keeps while it pages through the queue: the oldest run with room so far. */
struct walk {
    struct pool *p;
    const char *const *full;
    size_t n_full;
    const struct pool_hooks *h;
    size_t plen;            /* of the queue prefix */
    struct runspec best;    /* run_id "" = none yet */
    int64_t best_created;   /* its create_revision (INT64_MAX: none) */
};

/* One queue entry: not ours (moved aside), newer than the best so far (skipped unread), ended
 * (deleted), refused (moved aside), full, or the new best. */
static int walk_entry(struct walk *w, const struct kv_entry *e, struct ea_error *err)
{
    struct pool *p = w->p;
    const struct pool_hooks *h = w->h;
    struct runspec s = {0};
    struct ea_error derr = {0};
    int r = 0;
    if (runspec_decode(e->value, e->value_len, &s, &derr) < 0 ||
        strcmp(s.run_id, e->key + w->plen) != 0) {
        /* never run, and moved aside so that no daemon reads it again: a queue full of
         * garbage costs each daemon one scan, not one per write of `next` */
        const char *why = derr.msg[0] ? derr.msg : "the spec names another run";
        struct ea_error merr = {0};
        r = pool_move_bad(p, e, why, h->node ? h->node : "", &merr);
        if (r == 0 && h->bad) /* said by the daemon whose move won: once in the pool */
            h->bad(h->ctx, e->key, e->mod_revision, why);
        else if (r < 0 && r != KV_ECONFLICT && h->bad) {
            char msg[2 * EA_ERROR_MSG_MAX];
            snprintf(msg, sizeof(msg), "%s (not moved aside: %s)", why, merr.msg);
            h->bad(h->ctx, e->key, e->mod_revision, msg);
        }
        runspec_clear(&s);
        return 0;
    }
    if (e->create_revision >= w->best_created) {
        runspec_clear(&s); /* queued after the best so far */
        return 0;
    }
    s.queue_rev = e->mod_revision;
    enum pool_run pr;
    struct specsig_verdict v;
    r = pool_run_check(p, &s, &pr, NULL, 0, &derr);
    if (r == 0 && pr == POOL_RUN_ENDED) {
        struct kv_cmp cmp = {.key = e->key, .mod_revision = e->mod_revision};
        struct kv_op op = {.key = e->key, .del = true};
        r = kv_txn(p->kv, &cmp, 1, &op, 1, NULL, err);
        r = r == KV_ECONFLICT ? 0 : r;
    } else if (r == 0 && pr == POOL_RUN_BAD) {
        if (h->bad)
            h->bad(h->ctx, e->key, e->mod_revision, derr.msg);
    } else if (r == 0 && pr == POOL_RUN_ROOM && !listed(w->full, w->n_full, s.run_id) &&
               h->gate && h->gate(h->ctx, &s, &v) < 0) {
        /* never run here: moved aside, so that no daemon reads it again */
        r = pool_refuse(p, &s, &v, h->node ? h->node : "", err);
        if (r == 0 && h->refused)
            h->refused(h->ctx, &s, &v);
        r = r == KV_ECONFLICT ? 0 : r;
    } else if (r == 0 && pr == POOL_RUN_ROOM && !listed(w->full, w->n_full, s.run_id)) {
        runspec_clear(&w->best);
        w->best = s;
        w->best_created = e->create_revision;
        return 0;
    } else if (r < 0) {
        ea_errorf(err, r, "%s", derr.msg);
    }
    runspec_clear(&s);
    return r;
}

/* Walk the queue page by page in key order, keeping the oldest run with room (create_revision:
 * the submission order): memory is one page whatever the queue holds. */
static int walk_queue(struct walk *w, const char *qprefix, struct ea_error *err)
{
    char *after = NULL;
    bool more = true;
    int r = 0;
    while (more && r == 0) {
        struct kv_list l = {0};
        if ((r = kv_list_page(w->p->kv, qprefix, after, POOL_PAGE, &l, err)) < 0)
            break;
        more = l.more && l.n > 0;
        for (size_t i = 0; i < l.n && r == 0; i++)
            r = walk_entry(w, &l.entries[i], err);
        free(after);
        after = l.n ? strdup(l.entries[l.n - 1].key) : NULL;
        if (l.n && !after)
            r = ea_errorf(err, -ENOMEM, "out of memory");
        kv_list_clear(&l);
    }
    free(after);
    return r;
}

int pool_advance(struct pool *p, const char *const *full, size_t n_full,
                 const struct pool_hooks *hooks, struct runspec *ret, struct ea_error *err)
{
    static const struct pool_hooks none = {0};
    char qprefix[POOL_KEY_MAX];
    pool_queue_prefix(p, qprefix, sizeof(qprefix));
    int r = 0;
    for (int pass = 0;; pass++) {
        char seen[128];
        int64_t seen_rev = 0; /* `next` before the scan: what it chooses must not hide a later one */
        if ((r = pool_next_get(p, seen, sizeof(seen), &seen_rev, err)) < 0)
            return r;
        struct walk w = {.p = p, .full = full, .n_full = n_full, .h = hooks ? hooks : &none,
                         .plen = strlen(qprefix), .best_created = INT64_MAX};
        r = walk_queue(&w, qprefix, err);
        if (r == 0)
            r = next_put(p, w.best.run_id, seen, seen_rev, err);
        if (r == KV_ECONFLICT && pass < POOL_ADVANCE_PASSES) { /* a submission meanwhile */
            ea_error_clear(err);
            runspec_clear(&w.best);
            continue;
        }
        if (r == KV_ECONFLICT)
            ea_errorf(err, r, "key '%s' keeps changing", p->next_key);
        if (r < 0 || !ret)
            runspec_clear(&w.best);
        else
            *ret = w.best;
        return r;
    }
}

int64_t pool_rescan_at(int64_t last_scan_ms, int64_t now_ms)
{
    if (last_scan_ms <= 0 || now_ms - last_scan_ms >= POOL_RESCAN_GAP_MS)
        return now_ms;
    return last_scan_ms + POOL_RESCAN_GAP_MS;
}

int pool_close_run(struct pool *p, const char *run_id, struct ea_error *err)
{
    char skey[POOL_KEY_MAX], qkey[POOL_KEY_MAX];
    pool_run_key(p, run_id, "state", skey, sizeof(skey));
    pool_queue_key(p, run_id, qkey, sizeof(qkey));
    char rkey[POOL_KEY_MAX]; /* a refused spec of that id is forgotten */
    pool_refused_key(p, run_id, rkey, sizeof(rkey));
    struct kv_entry re = {0};
    int rr = kv_get(p->kv, rkey, &re, err);
    kv_entry_clear(&re);
    if (rr < 0 && rr != KV_ENOTFOUND)
        return rr;
    if (rr == 0 && (rr = kv_del(p->kv, rkey, err)) < 0)
        return rr;
    struct runspec spec = {0};
    int sr = pool_spec_get(p, run_id, &spec, NULL, NULL);
    if (sr < 0 && sr != KV_ENOTFOUND && sr != -EBADMSG)
        return ea_errorf(err, sr, "cannot read the run spec '%s'", qkey);
    int r = 0;
    for (int attempt = 0; attempt < 8; attempt++) {
        struct kv_entry e = {0};
        r = kv_get(p->kv, skey, &e, err);
        if (r < 0 && r != KV_ENOTFOUND)
            break;
        struct rdzv_state st = {0};
        if (r == 0) {
            struct ea_error derr = {0};
            if ((r = rdzv_state_decode(e.value, e.value_len, &st, &derr)) < 0) {
                ea_errorf(err, r, "refusing to touch key '%s': %s", skey, derr.msg);
                kv_entry_clear(&e);
                break;
            }
            if (st.status == RDZV_SUCCEEDED || st.status == RDZV_FAILED ||
                st.status == RDZV_CLOSED) {
                rdzv_state_clear(&st);
                kv_entry_clear(&e);
                r = 0;
                break; /* over already */
            }
            st.generation = rdzv_state_generation(&st, e.mod_revision); /* a same-round write */
            free(st.members); /* the commit record only: members stay in their chunks */
            st.members = NULL;
            st.n_members = 0;
            st.status = RDZV_CLOSED;
        } else if (sr < 0) {
            r = rr == 0 ? 0 /* a refused spec, forgotten */
                        : ea_errorf(err, -ENOENT, "no run '%s' in pool '%s' (nor under '%s')",
                                    run_id, p->name, p->prefix);
            break;
        } else { /* queued, never started: a closed state of round 0 */
            st = (struct rdzv_state){.status = RDZV_CLOSED, .min_nodes = spec.min_nodes,
                                     .max_nodes = spec.max_nodes};
        }
        char *json = NULL;
        r = rdzv_state_encode(&st, &json, err);
        int64_t expect = e.mod_revision;
        kv_entry_clear(&e);
        if (r < 0)
            break;
        r = kv_cas(p->kv, skey, json, strlen(json), expect, 0, NULL, NULL, err);
        free(json);
        if (r != KV_ECONFLICT)
            break;
        ea_error_clear(err);
    }
    runspec_clear(&spec);
    if (r < 0)
        return r;
    if ((r = kv_del(p->kv, qkey, err)) < 0)
        return r;
    return pool_advance(p, NULL, 0, NULL, NULL, err);
}

static void seat_key(const struct pool *p, const char *run_id, int seat, char *buf, size_t size)
{
    snprintf(buf, size, "%sseats/%s/%06d", p->base, run_id, seat);
}

int pool_seat_claim(struct pool *p, const struct runspec *s, const char *node, int64_t lease,
                    int *ret_seat, struct ea_error *err)
{
    json_t *j = json_pack("{s:s, s:s}", "schema", RUNSPEC_SCHEMA, "node", node);
    char *json = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    if (!json)
        return ea_errorf(err, -ENOMEM, "out of memory");
    uint32_t h = pool_node_hash(node); /* daemons spread over the seats */
    int max = s->max_nodes, probes = max < 64 ? max : 64, r = -EBUSY;
    for (int i = 0; i < probes && r == -EBUSY; i++) {
        int seat = (int)((h + (uint32_t)i) % (uint32_t)max);
        char key[POOL_KEY_MAX];
        seat_key(p, s->run_id, seat, key, sizeof(key));
        struct kv_entry cur = {0};
        r = kv_cas(p->kv, key, json, strlen(json), 0, lease, NULL, &cur, err);
        if (r == KV_ECONFLICT) {
            ea_error_clear(err);
            json_t *o = cur.value ? json_loadb(cur.value, cur.value_len, 0, NULL) : NULL;
            const char *holder = json_string_value(json_object_get(o, "node"));
            bool mine = cur.mod_revision > 0 && holder && strcmp(holder, node) == 0;
            r = mine ? kv_cas(p->kv, key, json, strlen(json), cur.mod_revision, lease, NULL, NULL,
                              err)
                     : -EBUSY; /* an earlier incarnation of this node: ours again */
            if (r == KV_ECONFLICT) {
                ea_error_clear(err);
                r = -EBUSY;
            }
            json_decref(o);
        }
        kv_entry_clear(&cur);
        if (r == 0)
            *ret_seat = seat;
    }
    free(json);
    return r;
}

int pool_seat_release(struct pool *p, const char *run_id, int seat, struct ea_error *err)
{
    char key[POOL_KEY_MAX];
    seat_key(p, run_id, seat, key, sizeof(key));
    return kv_del(p->kv, key, err);
}
