// SPDX-License-Identifier: Apache-2.0
/*
 * kvstore: the in-memory MVCC-ish store model the memory and file backends share — keys with
 * revisions and leases, a store revision, leases with absolute deadlines, a bounded event log to
 * replay watches from, watch cursors, and a JSON snapshot codec. Pure data structure: no I/O, no
 * clocks (callers pass `now_ms` on whatever clock they use for lease deadlines), no locking.
 */
#ifndef EA_BACKENDS_KVSTORE_H
#define EA_BACKENDS_KVSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv.h"

/* Event-log bounds. The memory backend keeps more history; the file backend rewrites its snapshot
 * on every write, so it keeps less (a watcher that falls further behind gets KV_ECOMPACTED). */
#define KVS_MEMORY_LOG_EVENTS 4096
#define KVS_MEMORY_LOG_BYTES (16u << 20)
#define KVS_FILE_LOG_EVENTS 512
#define KVS_FILE_LOG_BYTES (256u << 10)

/* Magic of the snapshot format; a JSON file without it is foreign (KV_ECORRUPT). */
#define KVS_SNAPSHOT_FORMAT "elastic-agent-kv-snapshot"
#define KVS_SNAPSHOT_VERSION 1

struct kvs;

/* A new empty store (revision 0) whose event log keeps at most `max_events` events and about
 * `max_bytes` of keys+values (always at least the newest revision). 0 or -ENOMEM. */
int kvs_create(size_t max_events, size_t max_bytes, struct kvs **ret_store);
/* Free the store. NULL is a no-op. */
void kvs_destroy(struct kvs *s);

/* Current store revision (0 for a new store; bumped by every write that changed something). */
int64_t kvs_revision(const struct kvs *s);
/* Oldest revision the event log still holds completely; a watch from an older one is compacted. */
int64_t kvs_first_revision(const struct kvs *s);
/* Earliest lease deadline (on the caller's clock), or INT64_MAX when there is no lease. */
int64_t kvs_next_expiry(const struct kvs *s);

/* Reads and writes fill `err` (may be NULL) with a message naming the key or lease on failure. */

/* Deep copy of one key into *ret: 0 or KV_ENOTFOUND / -ENOMEM. */
int kvs_get(const struct kvs *s, const char *key, struct kv_entry *ret, struct ea_error *err);
/* Deep copy of every key starting with `prefix`, sorted, plus the store revision. 0 or -ENOMEM. */
int kvs_list(const struct kvs *s, const char *prefix, struct kv_list *ret, struct ea_error *err);
/* The same, at most `limit` keys (0 = all) sorting after `after` (NULL = from the first);
 * ret->more when keys with the prefix follow (kv_ops.list_page). */
int kvs_list_page(const struct kvs *s, const char *prefix, const char *after, size_t limit,
                  struct kv_list *ret, struct ea_error *err);

/*
 * The write operations have kv.h's contracts (see struct kv_ops), without I/O. Each one that
 * changes the store bumps the revision and appends events. On failure nothing has changed.
 * kvs_cas/kvs_put: a non-zero `lease` must exist (else KV_ENOLEASE, checked after the compare).
 */
int kvs_cas(struct kvs *s, const char *key, const char *value, size_t len, int64_t expected,
            int64_t lease, int64_t *ret_mod_revision, struct kv_entry *ret_current,
            struct ea_error *err);
int kvs_put(struct kvs *s, const char *key, const char *value, size_t len, int64_t lease,
            int64_t *ret_mod_revision, struct ea_error *err);
/* 0 also for an absent key (then nothing changes); *ret_deleted (may be NULL) says which. */
int kvs_del(struct kvs *s, const char *key, bool *ret_deleted, struct ea_error *err);
/* kv.h's txn: counts and distinct op keys checked first (KV_EINVAL), then the compares
 * (KV_ECONFLICT), then the puts' leases (KV_ENOLEASE). On success every op is applied in order at
 * one new revision, with one event per put and per delete of a present key, in op order; a txn
 * that changes nothing (only deletes of absent keys) keeps the current revision, as etcd does. */
int kvs_txn(struct kvs *s, const struct kv_cmp *cmps, size_t n_cmps, const struct kv_op *ops,
            size_t n_ops, int64_t *ret_revision, struct ea_error *err);

/* Leases: deadlines are `now_ms + ttl_ms` on the caller's clock. ttl_ms must be > 0. */
int kvs_lease_grant(struct kvs *s, int64_t ttl_ms, int64_t now_ms, int64_t *ret_lease,
                    struct ea_error *err);
/* Renew: KV_ENOLEASE when unknown or already past its deadline at `now_ms`. */
int kvs_lease_keepalive(struct kvs *s, int64_t lease, int64_t now_ms, int64_t *ret_ttl_ms,
                        struct ea_error *err);
/* Remove the lease and delete its keys (one revision for all of them). KV_ENOLEASE if unknown. */
int kvs_lease_revoke(struct kvs *s, int64_t lease, struct ea_error *err);
/* Revoke every lease whose deadline is <= now_ms (INT64_MAX: all of them). Returns how many
 * leases expired (>= 0) or -ENOMEM (then some may have expired already; the store stays valid). */
int kvs_expire(struct kvs *s, int64_t now_ms);

/*
 * Watch cursors. A watch set belongs to a backend handle; cursors are revisions, so they stay
 * valid when the handle replaces its store with a newer snapshot of the same store.
 */
struct kvs_watch {
    int64_t id;
    char *prefix;
    int64_t next; /* next revision to deliver */
};

struct kvs_watchset {
    struct kvs_watch *w;
    size_t n, cap;
    int64_t last_id;
};

/* Add a watch of `prefix` from `from_revision` (0 = after the current revision).
 * KV_ECOMPACTED (with a message) when the log no longer holds from_revision; -ENOMEM. */
int kvs_watch_add(struct kvs_watchset *ws, const struct kvs *s, const char *prefix,
                  int64_t from_revision, int64_t *ret_id, struct ea_error *err);
/* Remove a watch; unknown id is a no-op. */
void kvs_watch_remove(struct kvs_watchset *ws, int64_t id);
/* True when some watch has not yet been handed every revision up to the store's. */
bool kvs_watch_pending(const struct kvs_watchset *ws, const struct kvs *s);
/* Hand over every event each watch has not seen yet, watch by watch in revision order, and
 * advance the cursors. A watch whose cursor fell out of the log gets one KV_EVENT_ERROR
 * (KV_ECOMPACTED) and is removed. Caller frees with kv_events_free(). 0 or -ENOMEM (then no
 * cursor moved). */
int kvs_watch_collect(struct kvs_watchset *ws, const struct kvs *s, struct kv_event **ret_events,
                      size_t *ret_n);
/* Free every watch (the set itself is caller-owned). NULL is a no-op. */
void kvs_watchset_clear(struct kvs_watchset *ws);

/*
 * Snapshot codec. kvs_dump: compact JSON text of the whole store tagged with `boot_id` (the
 * clock epoch of the lease deadlines); caller frees *ret_json. kvs_load: parse and validate such
 * text into a new store with the given log bounds; anything malformed or foreign is KV_ECORRUPT
 * with a message (not naming any file: the caller knows which). *ret_boot_id gets the stored tag.
 */
int kvs_dump(const struct kvs *s, const char *boot_id, char **ret_json, size_t *ret_len);
int kvs_load(const char *json, size_t len, size_t max_events, size_t max_bytes,
             struct kvs **ret_store, char *ret_boot_id, size_t boot_id_size, struct ea_error *err);

#endif
