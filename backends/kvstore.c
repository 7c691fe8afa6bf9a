// SPDX-License-Identifier: Apache-2.0
/*
 * kvstore: keys live in one array sorted by key (binary search; the key count is small), leases
 * in a short array, events in an array used as a queue (append at the end, drop at the front).
 * Every write first allocates everything it needs, then mutates: a failed write changes nothing.
 */
#include "kvstore.h"
#include "kvstore_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVENT_OVERHEAD 64 /* bytes a log event counts for besides its key and value */

static char *dup_bytes(const char *p, size_t len)
{
    char *d = malloc(len + 1);
    if (!d)
        return NULL;
    if (len)
        memcpy(d, p, len);
    d[len] = '\0';
    return d;
}

/* Grow *arr (of *cap elements of `size`) to hold at least `want`. 0 or -ENOMEM. */
int kvs_reserve(void **arr, size_t *cap, size_t want, size_t size)
{
    if (want <= *cap)
        return 0;
    size_t c = *cap ? *cap : 8;
    while (c < want)
        c *= 2;
    void *p = realloc(*arr, c * size);
    if (!p)
        return -ENOMEM;
    *arr = p;
    *cap = c;
    return 0;
}

int kvs_create(size_t max_events, size_t max_bytes, struct kvs **ret_store)
{
    struct kvs *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->max_events = max_events ? max_events : 1;
    s->max_bytes = max_bytes;
    s->first_rev = 1;
    *ret_store = s;
    return 0;
}

void kvs_destroy(struct kvs *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_keys; i++)
        kv_entry_clear(&s->keys[i]);
    for (size_t i = s->ev_off; i < s->ev_end; i++)
        kv_entry_clear(&s->ev[i].e);
    free(s->keys);
    free(s->leases);
    free(s->ev);
    free(s);
}

int64_t kvs_revision(const struct kvs *s)
{
    return s->revision;
}

int64_t kvs_first_revision(const struct kvs *s)
{
    return s->first_rev;
}

int64_t kvs_next_expiry(const struct kvs *s)
{
    int64_t t = INT64_MAX;
    for (size_t i = 0; i < s->n_leases; i++)
        if (s->leases[i].deadline_ms < t)
            t = s->leases[i].deadline_ms;
    return t;
}

/* Index of `key`, or where it would be inserted; *found says which. */
static size_t key_find(const struct kvs *s, const char *key, bool *found)
{
    size_t lo = 0, hi = s->n_keys;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->keys[mid].key, key);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

struct kvs_lease *kvs_lease_find(const struct kvs *s, int64_t id)
{
    for (size_t i = 0; i < s->n_leases; i++)
        if (s->leases[i].id == id)
            return &s->leases[i];
    return NULL;
}

/* ---- event log ---- */

/* Make room for k more events without allocating later. */
int kvs_ev_reserve(struct kvs *s, size_t k)
{
    if (s->ev_end + k <= s->ev_cap)
        return 0;
    if (s->ev_off > 0) {
        memmove(s->ev, s->ev + s->ev_off, (s->ev_end - s->ev_off) * sizeof(*s->ev));
        s->ev_end -= s->ev_off;
        s->ev_off = 0;
    }
    return kvs_reserve((void **)&s->ev, &s->ev_cap, s->ev_end + k, sizeof(*s->ev));
}

static size_t ev_size(const struct kv_entry *e)
{
    return strlen(e->key) + e->value_len + EVENT_OVERHEAD;
}

/* Append (room reserved); takes ownership of e's strings. */
void kvs_ev_push(struct kvs *s, enum kv_event_type type, struct kv_entry e)
{
    s->ev[s->ev_end++] = (struct kvs_event){.type = type, .e = e};
    s->ev_bytes += ev_size(&e);
}

/* Drop the oldest events past the bounds, but never the newest revision's. */
void kvs_ev_trim(struct kvs *s)
{
    while (s->ev_off < s->ev_end &&
           (s->ev_end - s->ev_off > s->max_events || s->ev_bytes > s->max_bytes)) {
        struct kvs_event *old = &s->ev[s->ev_off];
        if (old->e.mod_revision >= s->revision)
            break;
        if (old->e.mod_revision + 1 > s->first_rev)
            s->first_rev = old->e.mod_revision + 1;
        s->ev_bytes -= ev_size(&old->e);
        kv_entry_clear(&old->e);
        s->ev_off++;
    }
    if (s->ev_off == s->ev_end)
        s->ev_off = s->ev_end = 0;
}

/* First log index whose revision is >= rev. */
static size_t ev_lower_bound(const struct kvs *s, int64_t rev)
{
    size_t lo = s->ev_off, hi = s->ev_end;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->ev[mid].e.mod_revision < rev)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- reads ---- */

int kvs_get(const struct kvs *s, const char *key, struct kv_entry *ret, struct ea_error *err)
{
    bool found;
    size_t i = key_find(s, key, &found);
    if (!found)
        return ea_errorf(err, KV_ENOTFOUND, "key '%s' not found", key);
    if (kv_entry_copy(ret, &s->keys[i]) < 0)
        return ea_errorf(err, -ENOMEM, "out of memory reading key '%s'", key);
    return 0;
}

int kvs_list(const struct kvs *s, const char *prefix, struct kv_list *ret, struct ea_error *err)
{
    return kvs_list_page(s, prefix, NULL, 0, ret, err);
}

int kvs_list_page(const struct kvs *s, const char *prefix, const char *after, size_t limit,
                  struct kv_list *ret, struct ea_error *err)
{
    size_t plen = strlen(prefix);
    bool found;
    size_t first = key_find(s, after && after[0] ? after : prefix, &found), last = first;
    if (after && after[0] && found)
        first = ++last; /* strictly after */
    while (last < s->n_keys && strncmp(s->keys[last].key, prefix, plen) == 0 &&
           (!limit || last - first < limit))
        last++;
    struct kv_list l = {.revision = s->revision};
    l.more = last < s->n_keys && strncmp(s->keys[last].key, prefix, plen) == 0;
    if (last > first) {
        l.entries = calloc(last - first, sizeof(*l.entries));
        if (!l.entries)
            return ea_errorf(err, -ENOMEM, "out of memory listing '%s'", prefix);
    }
    for (size_t i = first; i < last; i++) {
        if (kv_entry_copy(&l.entries[l.n], &s->keys[i]) < 0) {
            kv_list_clear(&l);
            return ea_errorf(err, -ENOMEM, "out of memory listing '%s'", prefix);
        }
        l.n++;
    }
    *ret = l;
    return 0;
}

/* ---- writes ---- */

/* What one put allocates before the store changes: the key's new value, the event's key and
 * value, and the key itself when it is new. */
struct put_buf {
    char *v, *ek, *ev, *k;
};

static void put_buf_free(struct put_buf *b)
{
    free(b->v);
    free(b->ek);
    free(b->ev);
    free(b->k);
    *b = (struct put_buf){0};
}

/* Allocate what a put of `key` needs (the key is new iff absent now). 0 or -ENOMEM (b freed). */
static int put_prepare(const struct kvs *s, const char *key, const char *value, size_t len,
                       struct put_buf *b)
{
    bool found;
    key_find(s, key, &found);
    *b = (struct put_buf){
        .v = dup_bytes(value, len), .ek = strdup(key), .ev = dup_bytes(value, len)};
    if (!found)
        b->k = strdup(key);
    if (!b->v || !b->ek || !b->ev || (!found && !b->k)) {
        put_buf_free(b);
        return -ENOMEM;
    }
    return 0;
}

/* Write `key` at `rev` with b's strings (taken over) and log its PUT. Room for one more key and
 * one more event must be reserved; `key` must be absent iff b->k was allocated. */
static void put_apply(struct kvs *s, const char *key, size_t len, int64_t lease, int64_t rev,
                      struct put_buf *b)
{
    bool found;
    size_t i = key_find(s, key, &found);
    if (found) {
        free(s->keys[i].value);
        free(b->k);
    } else {
        memmove(&s->keys[i + 1], &s->keys[i], (s->n_keys - i) * sizeof(*s->keys));
        s->n_keys++;
        s->keys[i] = (struct kv_entry){.key = b->k, .create_revision = rev};
    }
    struct kv_entry *e = &s->keys[i];
    e->value = b->v;
    e->value_len = len;
    e->mod_revision = rev;
    e->lease = lease;
    kvs_ev_push(s, KV_EVENT_PUT,
            (struct kv_entry){.key = b->ek,
                              .value = b->ev,
                              .value_len = len,
                              .mod_revision = rev,
                              .create_revision = e->create_revision,
                              .lease = lease});
    *b = (struct put_buf){0};
}

static int write_key(struct kvs *s, const char *key, const char *value, size_t len, int64_t lease,
                     int64_t *ret_mod_revision, struct ea_error *err)
{
    struct put_buf b;
    if (put_prepare(s, key, value, len, &b) < 0)
        return ea_errorf(err, -ENOMEM, "out of memory writing key '%s'", key);
    if (kvs_ev_reserve(s, 1) < 0 ||
        kvs_reserve((void **)&s->keys, &s->cap_keys, s->n_keys + 1, sizeof(*s->keys)) < 0) {
        put_buf_free(&b);
        return ea_errorf(err, -ENOMEM, "out of memory writing key '%s'", key);
    }
    int64_t rev = ++s->revision;
    put_apply(s, key, len, lease, rev, &b);
    kvs_ev_trim(s);
    if (ret_mod_revision)
        *ret_mod_revision = rev;
    return 0;
}

static int no_lease(const char *key, int64_t lease, struct ea_error *err)
{
    return ea_errorf(err, KV_ENOLEASE, "cannot write key '%s': lease %lld unknown or expired", key,
                     (long long)lease);
}

int kvs_cas(struct kvs *s, const char *key, const char *value, size_t len, int64_t expected,
            int64_t lease, int64_t *ret_mod_revision, struct kv_entry *ret_current,
            struct ea_error *err)
{
    bool found;
    size_t i = key_find(s, key, &found);
    int64_t cur = found ? s->keys[i].mod_revision : 0;
    if (cur != expected) {
        struct kv_entry absent = {.key = (char *)key, .value = ""};
        if (ret_current && kv_entry_copy(ret_current, found ? &s->keys[i] : &absent) < 0)
            return ea_errorf(err, -ENOMEM, "out of memory reading key '%s'", key);
        return ea_errorf(err, KV_ECONFLICT, "key '%s' is at revision %lld, not %lld", key,
                         (long long)cur, (long long)expected);
    }
    if (lease && !kvs_lease_find(s, lease))
        return no_lease(key, lease, err);
    return write_key(s, key, value, len, lease, ret_mod_revision, err);
}

int kvs_put(struct kvs *s, const char *key, const char *value, size_t len, int64_t lease,
            int64_t *ret_mod_revision, struct ea_error *err)
{
    if (lease && !kvs_lease_find(s, lease))
        return no_lease(key, lease, err);
    return write_key(s, key, value, len, lease, ret_mod_revision, err);
}

/* Remove keys[i] and log its DELETE at `rev` (room reserved). */
static void delete_at(struct kvs *s, size_t i, int64_t rev)
{
    struct kv_entry e = s->keys[i];
    memmove(&s->keys[i], &s->keys[i + 1], (s->n_keys - i - 1) * sizeof(*s->keys));
    s->n_keys--;
    free(e.value);
    kvs_ev_push(s, KV_EVENT_DELETE, (struct kv_entry){.key = e.key, .mod_revision = rev});
}

int kvs_del(struct kvs *s, const char *key, bool *ret_deleted, struct ea_error *err)
{
    bool found;
    size_t i = key_find(s, key, &found);
    if (found) {
        if (kvs_ev_reserve(s, 1) < 0)
            return ea_errorf(err, -ENOMEM, "out of memory deleting key '%s'", key);
        delete_at(s, i, ++s->revision);
        kvs_ev_trim(s);
    }
    if (ret_deleted)
        *ret_deleted = found;
    return 0;
}

int kvs_txn(struct kvs *s, const struct kv_cmp *cmps, size_t n_cmps, const struct kv_op *ops,
            size_t n_ops, int64_t *ret_revision, struct ea_error *err)
{
    int r = kv_txn_check("transaction", cmps, n_cmps, ops, n_ops, err);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n_cmps; i++) {
        bool found;
        size_t k = key_find(s, cmps[i].key, &found);
        int64_t cur = found ? s->keys[k].mod_revision : 0;
        if (cur != cmps[i].mod_revision)
            return ea_errorf(err, KV_ECONFLICT,
                             "transaction: key '%s' is at revision %lld, not %lld", cmps[i].key,
                             (long long)cur, (long long)cmps[i].mod_revision);
    }
    for (size_t i = 0; i < n_ops; i++)
        if (!ops[i].del && ops[i].lease && !kvs_lease_find(s, ops[i].lease))
            return no_lease(ops[i].key, ops[i].lease, err);

    /* Allocate everything, then mutate: keys are distinct, so which ones are new (and which
     * deletes find their key) is decided now, before any op runs. */
    struct put_buf *bufs = calloc(n_ops, sizeof(*bufs));
    size_t n_events = 0, n_new = 0;
    r = bufs ? 0 : -ENOMEM;
    for (size_t i = 0; i < n_ops && r == 0; i++) {
        bool found;
        key_find(s, ops[i].key, &found);
        if (ops[i].del) {
            n_events += found;
            continue;
        }
        r = put_prepare(s, ops[i].key, ops[i].value, ops[i].len, &bufs[i]);
        n_events++;
        n_new += !found;
    }
    if (r == 0 && (kvs_ev_reserve(s, n_events) < 0 || kvs_reserve((void **)&s->keys, &s->cap_keys,
                                                          s->n_keys + n_new, sizeof(*s->keys)) < 0))
        r = -ENOMEM;
    if (r < 0) {
        for (size_t i = 0; bufs && i < n_ops; i++)
            put_buf_free(&bufs[i]);
        free(bufs);
        return ea_errorf(err, r, "out of memory in a transaction of %zu op(s) (first key '%s')",
                         n_ops, ops[0].key);
    }
    /* Like etcd, a transaction that changes nothing (only deletes of absent keys) takes no new
     * revision and reports the current one. */
    int64_t rev = n_events ? ++s->revision : s->revision;
    for (size_t i = 0; i < n_ops; i++) {
        if (!ops[i].del) {
            put_apply(s, ops[i].key, ops[i].len, ops[i].lease, rev, &bufs[i]);
            continue;
        }
        bool found;
        size_t k = key_find(s, ops[i].key, &found);
        if (found)
            delete_at(s, k, rev);
    }
    free(bufs);
    kvs_ev_trim(s);
    if (ret_revision)
        *ret_revision = rev;
    return 0;
}

int kvs_lease_grant(struct kvs *s, int64_t ttl_ms, int64_t now_ms, int64_t *ret_lease,
                    struct ea_error *err)
{
    if (ttl_ms <= 0 || ttl_ms > INT64_MAX / 4)
        return ea_errorf(err, KV_EINVAL, "invalid lease TTL %lld ms", (long long)ttl_ms);
    if (kvs_reserve((void **)&s->leases, &s->cap_leases, s->n_leases + 1, sizeof(*s->leases)) < 0)
        return ea_errorf(err, -ENOMEM, "out of memory granting a lease");
    int64_t id = ++s->last_lease;
    s->leases[s->n_leases++] =
        (struct kvs_lease){.id = id, .ttl_ms = ttl_ms, .deadline_ms = now_ms + ttl_ms};
    *ret_lease = id;
    return 0;
}

int kvs_lease_keepalive(struct kvs *s, int64_t lease, int64_t now_ms, int64_t *ret_ttl_ms,
                        struct ea_error *err)
{
    struct kvs_lease *l = kvs_lease_find(s, lease);
    if (!l || l->deadline_ms <= now_ms)
        return ea_errorf(err, KV_ENOLEASE, "cannot renew lease %lld: unknown or expired",
                         (long long)lease);
    l->deadline_ms = now_ms + l->ttl_ms;
    if (ret_ttl_ms)
        *ret_ttl_ms = l->ttl_ms;
    return 0;
}

int kvs_lease_revoke(struct kvs *s, int64_t lease, struct ea_error *err)
{
    struct kvs_lease *l = kvs_lease_find(s, lease);
    if (!l)
        return ea_errorf(err, KV_ENOLEASE, "cannot revoke lease %lld: unknown or expired",
                         (long long)lease);
    size_t k = 0;
    for (size_t i = 0; i < s->n_keys; i++)
        k += s->keys[i].lease == lease;
    if (kvs_ev_reserve(s, k) < 0)
        return ea_errorf(err, -ENOMEM, "out of memory revoking lease %lld", (long long)lease);
    if (k) {
        int64_t rev = ++s->revision;
        for (size_t i = 0; i < s->n_keys;) {
            if (s->keys[i].lease == lease)
                delete_at(s, i, rev);
            else
                i++;
        }
        kvs_ev_trim(s);
    }
    *l = s->leases[--s->n_leases];
    return 0;
}

int kvs_expire(struct kvs *s, int64_t now_ms)
{
    int n = 0;
    for (;;) {
        struct kvs_lease *due = NULL;
        for (size_t i = 0; i < s->n_leases; i++)
            if (s->leases[i].deadline_ms <= now_ms &&
                (!due || s->leases[i].deadline_ms < due->deadline_ms))
                due = &s->leases[i];
        if (!due)
            return n;
        int r = kvs_lease_revoke(s, due->id, NULL);
        if (r < 0)
            return r;
        n++;
    }
}

/* ---- watches ---- */

int kvs_watch_add(struct kvs_watchset *ws, const struct kvs *s, const char *prefix,
                  int64_t from_revision, int64_t *ret_id, struct ea_error *err)
{
    int64_t next = from_revision > 0 ? from_revision : s->revision + 1;
    if (next < s->first_rev)
        return ea_errorf(err, KV_ECOMPACTED,
                         "cannot watch from revision %lld: compacted (oldest kept: %lld)",
                         (long long)next, (long long)s->first_rev);
    char *p = strdup(prefix);
    if (!p || kvs_reserve((void **)&ws->w, &ws->cap, ws->n + 1, sizeof(*ws->w)) < 0) {
        free(p);
        return ea_errorf(err, -ENOMEM, "out of memory adding a watch");
    }
    int64_t id = ++ws->last_id;
    ws->w[ws->n++] = (struct kvs_watch){.id = id, .prefix = p, .next = next};
    *ret_id = id;
    return 0;
}

void kvs_watch_remove(struct kvs_watchset *ws, int64_t id)
{
    for (size_t i = 0; i < ws->n; i++) {
        if (ws->w[i].id == id) {
            free(ws->w[i].prefix);
            memmove(&ws->w[i], &ws->w[i + 1], (ws->n - i - 1) * sizeof(*ws->w));
            ws->n--;
            return;
        }
    }
}

bool kvs_watch_pending(const struct kvs_watchset *ws, const struct kvs *s)
{
    for (size_t i = 0; i < ws->n; i++)
        if (ws->w[i].next <= s->revision)
            return true;
    return false;
}

/* Events for one watch: count them (out == NULL) or copy them into out. -ENOMEM on copy failure. */
static int watch_events(const struct kvs *s, const struct kvs_watch *w, struct kv_event *out,
                        size_t *n)
{
    size_t plen = strlen(w->prefix);
    if (w->next < s->first_rev) {
        if (out) {
            out[*n] = (struct kv_event){
                .type = KV_EVENT_ERROR, .watch_id = w->id, .error = KV_ECOMPACTED};
            snprintf(out[*n].message, sizeof(out[*n].message),
                     "watch %lld fell behind: revision %lld compacted (oldest kept: %lld)",
                     (long long)w->id, (long long)w->next, (long long)s->first_rev);
            out[*n].entry.key = strdup(w->prefix);
            out[*n].entry.value = strdup("");
            if (!out[*n].entry.key || !out[*n].entry.value) {
                kv_entry_clear(&out[*n].entry);
                return -ENOMEM;
            }
        }
        (*n)++;
        return 0;
    }
    for (size_t i = ev_lower_bound(s, w->next); i < s->ev_end; i++) {
        const struct kvs_event *ev = &s->ev[i];
        if (strncmp(ev->e.key, w->prefix, plen) != 0)
            continue;
        if (out) {
            out[*n] = (struct kv_event){.type = ev->type, .watch_id = w->id};
            if (kv_entry_copy(&out[*n].entry, &ev->e) < 0)
                return -ENOMEM;
        }
        (*n)++;
    }
    return 0;
}

int kvs_watch_collect(struct kvs_watchset *ws, const struct kvs *s, struct kv_event **ret_events,
                      size_t *ret_n)
{
    size_t total = 0, n = 0;
    for (size_t i = 0; i < ws->n; i++)
        watch_events(s, &ws->w[i], NULL, &total);
    struct kv_event *out = NULL;
    if (total) {
        out = calloc(total, sizeof(*out));
        if (!out)
            return -ENOMEM;
    }
    for (size_t i = 0; i < ws->n; i++) {
        if (watch_events(s, &ws->w[i], out, &n) < 0) {
            kv_events_free(out, n);
            return -ENOMEM;
        }
    }
    for (size_t i = 0; i < ws->n;) {
        struct kvs_watch *w = &ws->w[i];
        if (w->next < s->first_rev) {
            kvs_watch_remove(ws, w->id);
            continue;
        }
        if (w->next <= s->revision)
            w->next = s->revision + 1;
        i++;
    }
    *ret_events = out;
    *ret_n = n;
    return 0;
}

void kvs_watchset_clear(struct kvs_watchset *ws)
{
    if (!ws)
        return;
    for (size_t i = 0; i < ws->n; i++)
        free(ws->w[i].prefix);
    free(ws->w);
    ws->w = NULL;
    ws->n = ws->cap = 0;
}
