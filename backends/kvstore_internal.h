// SPDX-License-Identifier: Apache-2.0
/*
 * kvstore internals, shared by kvstore.c (keys, leases, the event log, watches) and
 * kvstore_snapshot.c (the JSON snapshot codec the file backend persists). Not for other modules.
 */
#ifndef EA_BACKENDS_KVSTORE_INTERNAL_H
#define EA_BACKENDS_KVSTORE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kvstore.h"

struct kvs_lease {
    int64_t id;
    int64_t ttl_ms;
    int64_t deadline_ms;
};

struct kvs_event {
    enum kv_event_type type;
    struct kv_entry e; /* DELETE: value may be NULL, read as "" */
};

struct kvs {
    struct kv_entry *keys;
    size_t n_keys, cap_keys;
    struct kvs_lease *leases;
    size_t n_leases, cap_leases;
    struct kvs_event *ev; /* live events are ev[ev_off .. ev_end) */
    size_t ev_off, ev_end, ev_cap, ev_bytes;
    size_t max_events, max_bytes;
    int64_t revision;   /* last revision written */
    int64_t first_rev;  /* every event with revision >= first_rev is in the log */
    int64_t last_lease; /* lease ids are never reused */
};

/* Grow *arr (of *cap elements of `size`) to hold at least `want`. 0 or -ENOMEM. */
int kvs_reserve(void **arr, size_t *cap, size_t want, size_t size);
/* The lease with this id, or NULL. */
struct kvs_lease *kvs_lease_find(const struct kvs *s, int64_t id);

/* The event log: make room for k more events without allocating later; append (room reserved,
 * takes ownership of e's strings); drop the oldest events past the bounds, never the newest
 * revision's. */
int kvs_ev_reserve(struct kvs *s, size_t k);
void kvs_ev_push(struct kvs *s, enum kv_event_type type, struct kv_entry e);
void kvs_ev_trim(struct kvs *s);

#endif
