// SPDX-License-Identifier: Apache-2.0
/*
 * kv: the key-value interface the rendezvous needs, in etcd v3's shape (DESIGN.md §2): revisions,
 * compare-and-swap on mod_revision (the fencing token), leases, and watches delivered through a
 * pollable fd. Implementations: memory, file, etcd (gRPC), etcd-gateway (HTTP). This header knows
 * nothing about rendezvous; it never logs (errors carry their text in struct ea_error).
 */
#ifndef EA_BACKENDS_KV_H
#define EA_BACKENDS_KV_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"

/* Error codes (negative errno values, so they mix with the project's other errors). */
#define KV_ENOTFOUND (-ENOENT)       /* get: no such key */
#define KV_ECONFLICT (-ESTALE)       /* cas: expected revision did not match (lost the race) */
#define KV_ECONN (-ECONNREFUSED)     /* store unreachable / request timed out: retry w/ backoff */
#define KV_ECOMPACTED (-ERANGE)      /* watch: from_revision already compacted: re-list, re-watch */
#define KV_EAUTH (-EACCES)           /* authentication or permission failure */
#define KV_ECORRUPT (-EBADMSG)       /* the store's own data is unreadable / foreign */
#define KV_ENOLEASE (-EKEYEXPIRED)   /* lease unknown or expired */
#define KV_EINVAL (-EINVAL)          /* bad argument or bad configuration */

/* One key as read from the store. Owned by whoever received it; free with kv_entry_clear(). */
struct kv_entry {
    char *key;               /* NUL-terminated */
    char *value;             /* value bytes + an extra NUL (values are JSON text in practice) */
    size_t value_len;        /* length without the extra NUL */
    int64_t mod_revision;    /* store revision of the last write to this key */
    int64_t create_revision; /* store revision at which this key (this incarnation) was created */
    int64_t lease;           /* lease id the key is attached to, 0 = none */
};

/* One compare of a transaction: the key's current mod_revision must equal `mod_revision`
 * (0 = the key must be absent). */
struct kv_cmp {
    const char *key;
    int64_t mod_revision;
};

/* One write of a transaction: put `value` (len bytes) attached to `lease` (0 = none), or, when
 * `del` is true, delete `key` (deleting an absent key is fine; value/len/lease unused). */
struct kv_op {
    const char *key;
    const char *value;
    size_t len;
    int64_t lease;
    bool del;
};

/* Most ops (and most compares) one transaction may carry: etcd's default --max-txn-ops. */
#define KV_TXN_OPS_MAX 128

/* Result of kv_list(): entries sorted by key (byte order), plus the store revision at which the
 * list was taken (watch from revision + 1 to see everything after it). Free with kv_list_clear(). */
struct kv_list {
    struct kv_entry *entries;
    size_t n;
    int64_t revision;
    bool more; /* kv_list_page(): keys with the prefix follow the last entry (not all fit) */
};

/* Most keys one kv_list_page() may ask for; a page of the pool's queue is far smaller. */
#define KV_PAGE_MAX 1000
/* Largest answer the store may send in one message (etcd's gRPC receive bound; twice this for
 * the gateway's JSON, base64 and all). The largest list the agent makes, a 10,000-node run's
 * prefix, is about a fifth of it; a larger answer is KV_ECORRUPT ("response too large"), never
 * an allocation without bound: list such a prefix with kv_list_page(). */
#define KV_RESPONSE_BYTES_MAX ((size_t)64 << 20)

enum kv_event_type {
    KV_EVENT_PUT = 1,    /* key created or modified; entry holds the new value and revisions */
    KV_EVENT_DELETE = 2, /* key deleted (explicitly or by lease expiry); entry.key and
                            entry.mod_revision (= revision of the delete) are set, value is "" */
    KV_EVENT_ERROR = 3,  /* the watch `watch_id` has ended with `error` (KV_ECOMPACTED, KV_ECONN,
                            ...) and delivers nothing more: re-list and watch again */
};

struct kv_event {
    enum kv_event_type type;
    int64_t watch_id;
    struct kv_entry entry;
    int error;                       /* KV_EVENT_ERROR only */
    char message[EA_ERROR_MSG_MAX];  /* KV_EVENT_ERROR only: human text */
};

/* Everything a backend may need; unused fields are ignored by backends that do not need them. */
struct kv_config {
    const char *backend;   /* "memory", "file", "etcd", "etcd-gateway" */
    const char *endpoints; /* comma-separated list (etcd, etcd-gateway) */
    const char *state_dir; /* file backend directory (created 0700 if missing) */
    const char *cacert, *cert, *key;  /* TLS files, NULL = plain */
    const char *user, *password;      /* auth, NULL = none */
    int request_timeout_ms;           /* per request; 0 = backend default (5000) */
};

struct kv;

/*
 * The operations table every backend implements. All ops are synchronous from the caller's
 * point of view except watch delivery, which is asynchronous through event_fd(). Unless said
 * otherwise: return 0 or a negative code above; on failure `ret_*` are untouched and `err` (may be
 * NULL) gets a message naming what failed.
 */
struct kv_ops {
    const char *name;

    /* Open a handle. `cfg` is only read during the call. */
    int (*open)(const struct kv_config *cfg, struct kv **ret_kv, struct ea_error *err);
    /* Close and free; does not revoke leases (they expire). NULL is a no-op. */
    void (*close)(struct kv *kv);

    /* Read one key: 0 and *ret filled, or KV_ENOTFOUND. */
    int (*get)(struct kv *kv, const char *key, struct kv_entry *ret, struct ea_error *err);
    /* All keys starting with `prefix` ("" = everything), sorted, plus the store revision. */
    int (*list)(struct kv *kv, const char *prefix, struct kv_list *ret, struct ea_error *err);
    /*
     * One page of a list: the first `limit` (1..KV_PAGE_MAX) keys starting with `prefix` that
     * sort after `after` (NULL or "" = from the first), sorted, the store revision, and
     * ret->more when keys with the prefix follow (ask again with after = the last key). Pages
     * are read at different revisions: a scan of several pages is not one snapshot. So that a
     * caller's memory stays bounded by the page whatever the store holds under the prefix.
     * Optional: NULL makes kv_list_page() list everything and keep one page (no bound).
     */
    int (*list_page)(struct kv *kv, const char *prefix, const char *after, size_t limit,
                     struct kv_list *ret, struct ea_error *err);
    /*
     * Compare-and-swap. Writes `value` (len bytes) to `key` attached to `lease` (0 = none) iff the
     * key's current mod_revision == expected_mod_revision; expected 0 = "only if absent".
     * Success: 0, *ret_mod_revision = revision of this write (may be NULL).
     * Lost: KV_ECONFLICT, and when `ret_current` is non-NULL it receives the current entry (in the
     * same round trip), or, if the key is absent, an entry with key set, value "" and revisions 0.
     */
    int (*cas)(struct kv *kv, const char *key, const char *value, size_t len,
               int64_t expected_mod_revision, int64_t lease, int64_t *ret_mod_revision,
               struct kv_entry *ret_current, struct ea_error *err);
    /*
     * Transaction: iff every compare holds, apply every op, atomically, at one new revision.
     * 0 and *ret_revision (may be NULL) = that revision. KV_ECONFLICT when a compare failed
     * (nothing written). KV_EINVAL when n_ops is 0 or over KV_TXN_OPS_MAX, n_cmps over
     * KV_TXN_OPS_MAX, or a key appears twice among the ops. KV_ENOLEASE when a put's lease does
     * not exist (nothing written). Used to fence a batch of writes on the mod_revision of the
     * keys it depends on (the rendezvous' `state` and `coord`).
     */
    int (*txn)(struct kv *kv, const struct kv_cmp *cmps, size_t n_cmps, const struct kv_op *ops,
               size_t n_ops, int64_t *ret_revision, struct ea_error *err);
    /* Unconditional write, attached to `lease` (0 = none). *ret_mod_revision may be NULL. */
    int (*put)(struct kv *kv, const char *key, const char *value, size_t len, int64_t lease,
               int64_t *ret_mod_revision, struct ea_error *err);
    /* Delete one key; deleting an absent key is not an error (0). */
    int (*del)(struct kv *kv, const char *key, struct ea_error *err);

    /* Grant a lease of ttl_ms (backends may round up, e.g. etcd to whole seconds). */
    int (*lease_grant)(struct kv *kv, int64_t ttl_ms, int64_t *ret_lease, struct ea_error *err);
    /* Renew once. *ret_ttl_ms (may be NULL) = granted TTL. Expired/unknown lease: KV_ENOLEASE. */
    int (*lease_keepalive)(struct kv *kv, int64_t lease, int64_t *ret_ttl_ms,
                           struct ea_error *err);
    /* Revoke: every key attached is deleted at once. Unknown lease: KV_ENOLEASE. */
    int (*lease_revoke)(struct kv *kv, int64_t lease, struct ea_error *err);
    /*
     * Optional (NULL: kv_lease_revoke_each() calls lease_revoke n times). Revoke n leases,
     * together where the backend can (etcd: the requests in flight at once, about one round trip
     * for the batch). ret_codes[i]: lease_revoke's answer for leases[i]. 0 when every revoke was
     * tried (err: the first failure's message), or an error with none tried.
     */
    int (*lease_revoke_each)(struct kv *kv, const int64_t *leases, size_t n, int *ret_codes,
                             struct ea_error *err);
    /* Optional (NULL: kv_lease_keepalive_each() calls lease_keepalive n times). Renew n leases
     * once each, together where the backend can; ret_codes and the answer as lease_revoke_each.
     * For a process that holds many leases (bench/rdzv_sim.c: 625 sessions a process). */
    int (*lease_keepalive_each)(struct kv *kv, const int64_t *leases, size_t n, int *ret_codes,
                                struct ea_error *err);

    /*
     * Watch every key with `prefix`, delivering every change with revision >= from_revision
     * (0 = from now on) in revision order, through event_fd()/read_events(). A from_revision that
     * the store no longer has yields KV_ECOMPACTED here or as a KV_EVENT_ERROR later.
     */
    int (*watch)(struct kv *kv, const char *prefix, int64_t from_revision, int64_t *ret_watch_id,
                 struct ea_error *err);
    /* Stop a watch; its undelivered events are dropped. Unknown id is a no-op. */
    void (*watch_cancel)(struct kv *kv, int64_t watch_id);

    /*
     * Optional (NULL: kv_get_at() calls get). Read one key as of revision `at` (> 0) without a
     * consensus round: for a caller that knows the store has applied `at` (it saw an event of
     * that revision on a watch), so that a cheap local read is still consistent. Returns the
     * key's value at `at` or at a later revision (get's answer also qualifies), never an older
     * one; KV_ENOTFOUND when absent there. A revision the store does not have (compacted, or not
     * yet applied by the member asked) falls back to get: never an error of its own.
     */
    int (*get_at)(struct kv *kv, const char *key, int64_t at, struct kv_entry *ret,
                  struct ea_error *err);

    /* A pollable fd (POLLIN) that becomes readable when read_events() may have something to
     * return or the backend needs housekeeping (e.g. lease expiry in the file backend). Owned by
     * the handle. Stable for the handle's lifetime. */
    int (*event_fd)(struct kv *kv);
    /* Non-blocking. Does pending housekeeping, then hands over every event ready now (possibly
     * none: *ret_n = 0). The caller owns the array; free with kv_events_free(). */
    int (*read_events)(struct kv *kv, struct kv_event **ret_events, size_t *ret_n,
                       struct ea_error *err);
};

/* Every handle starts with this, so the generic wrappers can find the ops. */
struct kv {
    const struct kv_ops *ops;
};

/* Registry: backends always compiled in (memory, file), NULL-terminated. */
extern const struct kv_ops *const kv_backends[];

/*
 * The etcd and etcd-gateway backends are modules (ea-kv-<name>.so, loaded on first use, see
 * kv.c) unless the program links them statically. A module exports `int kv_module_abi` (equal to
 * KV_MODULE_ABI, bumped whenever this header's structs change) and
 * `const struct kv_ops *kv_module(void)` (backends/kv_module.c).
 */
#define KV_MODULE_ABI 4

/* Find a backend by name, loading its module if needed; NULL if unknown or not loadable. */
const struct kv_ops *kv_backend_find(const char *name);

/* Open the backend named by cfg->backend. Unknown name or a module that cannot be loaded:
 * KV_EINVAL saying which names are known or why the module did not load. */
int kv_open(const struct kv_config *cfg, struct kv **ret_kv, struct ea_error *err);

/* Thin wrappers over kv->ops (same contracts as above). */
void kv_close(struct kv *kv);
int kv_get(struct kv *kv, const char *key, struct kv_entry *ret, struct ea_error *err);
int kv_get_at(struct kv *kv, const char *key, int64_t at, struct kv_entry *ret,
              struct ea_error *err);
int kv_list(struct kv *kv, const char *prefix, struct kv_list *ret, struct ea_error *err);
/* KV_EINVAL when limit is 0 or over KV_PAGE_MAX, or `after` does not start with `prefix`. */
int kv_list_page(struct kv *kv, const char *prefix, const char *after, size_t limit,
                 struct kv_list *ret, struct ea_error *err);
int kv_cas(struct kv *kv, const char *key, const char *value, size_t len,
           int64_t expected_mod_revision, int64_t lease, int64_t *ret_mod_revision,
           struct kv_entry *ret_current, struct ea_error *err);
int kv_txn(struct kv *kv, const struct kv_cmp *cmps, size_t n_cmps, const struct kv_op *ops,
           size_t n_ops, int64_t *ret_revision, struct ea_error *err);
/* What every backend's txn checks before any I/O (the KV_EINVAL cases of the contract): 1 to
 * KV_TXN_OPS_MAX ops, at most KV_TXN_OPS_MAX compares, no negative compare revision, no key twice
 * among the ops. 0, or KV_EINVAL with a message starting with `who` ("etcd txn"). */
int kv_txn_check(const char *who, const struct kv_cmp *cmps, size_t n_cmps,
                 const struct kv_op *ops, size_t n_ops, struct ea_error *err);
int kv_put(struct kv *kv, const char *key, const char *value, size_t len, int64_t lease,
           int64_t *ret_mod_revision, struct ea_error *err);
int kv_del(struct kv *kv, const char *key, struct ea_error *err);
int kv_lease_grant(struct kv *kv, int64_t ttl_ms, int64_t *ret_lease, struct ea_error *err);
int kv_lease_keepalive(struct kv *kv, int64_t lease, int64_t *ret_ttl_ms, struct ea_error *err);
int kv_lease_revoke(struct kv *kv, int64_t lease, struct ea_error *err);
int kv_lease_revoke_each(struct kv *kv, const int64_t *leases, size_t n, int *ret_codes,
                         struct ea_error *err);
int kv_lease_keepalive_each(struct kv *kv, const int64_t *leases, size_t n, int *ret_codes,
                            struct ea_error *err);
int kv_watch(struct kv *kv, const char *prefix, int64_t from_revision, int64_t *ret_watch_id,
             struct ea_error *err);
void kv_watch_cancel(struct kv *kv, int64_t watch_id);
int kv_event_fd(struct kv *kv);
int kv_read_events(struct kv *kv, struct kv_event **ret_events, size_t *ret_n,
                   struct ea_error *err);

/* Ownership helpers; all accept NULL / empty. */
void kv_entry_clear(struct kv_entry *e);
void kv_list_clear(struct kv_list *l);
void kv_events_free(struct kv_event *events, size_t n);
/* Deep copy; 0 or -ENOMEM. */
int kv_entry_copy(struct kv_entry *dst, const struct kv_entry *src);

/* Human name of a KV_E* code ("conflict", "unreachable", ...). */
const char *kv_strerror(int code);

#endif
