// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv mirror: a session's copy of the store keys it watches, with a hash index, and for
 * `nodes/<id>` keys the record decoded once when it arrives. Everything per event is O(1) (a
 * delete too: the index is repaired in place), so a coordinator's CPU per event does not grow
 * with the fleet. No I/O and no logging: undecodable node records are
 * kept undecoded (dec NULL) and reported through the warning callback.
 */
#ifndef EA_RENDEZVOUS_MIRROR_H
#define EA_RENDEZVOUS_MIRROR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "kv.h"
#include "state.h"

struct rdzv_mirror {
    const char *prefix; /* the run's prefix (borrowed) */
    struct kv_entry *keys;
    struct rdzv_node **dec; /* for nodes/<id> keys: the record, or NULL when invalid */
    size_t n_keys, cap_keys;
    size_t *slots, n_slots; /* open addressing: key index + 1, 0 = empty */
    bool dirty;             /* something changed since the owner last derived */
    bool nodes_dirty;       /* a nodes/ key changed */
    bool node_arrived;      /* a nodes/ key appeared (for the settle timer) */
    bool done_dirty;        /* a done/ key changed */
    size_t n_nodes_valid;   /* nodes/ keys whose record decoded */
    uint64_t changes;       /* puts and deletes so far (a reader rescans only after a change) */
    void (*warn)(void *ctx, const char *msg);
    void *warn_ctx;
    /* Optional: a valid node record arrived (+1) or went (-1; it is still valid during the call),
     * including at rdzv_mirror_clear(): the owner keeps counts over the nodes up to date per event
     * (the coordinator's survivors) instead of scanning every node. */
    void (*on_node)(void *ctx, const struct rdzv_node *n, int delta);
    void *node_ctx;
    /* Optional: a key was put (its mirror-owned name, valid during the call), or every key went
     * (NULL, at rdzv_mirror_clear()): the owner acts on the keys an event brings (the liveness
     * ring's suspicions) instead of scanning the mirror after every change. */
    void (*on_put)(void *ctx, const char *key);
    void *put_ctx;
};

/* Drop every key (the index keeps its size). */
void rdzv_mirror_clear(struct rdzv_mirror *m);
/* Free everything. */
void rdzv_mirror_free(struct rdzv_mirror *m);
/* Index of `key` or -1. */
ssize_t rdzv_mirror_find(const struct rdzv_mirror *m, const char *key);
/* Insert or replace; takes ownership of e's strings (e is zeroed). -ENOMEM. */
int rdzv_mirror_put(struct rdzv_mirror *m, struct kv_entry *e);
/* Insert a copy of a key we wrote ourselves (the watch confirms it later). -ENOMEM. */
int rdzv_mirror_put_own(struct rdzv_mirror *m, const char *key, const char *value,
                        int64_t mod_revision, int64_t create_revision, int64_t lease);
/* Delete (absent: no-op). */
void rdzv_mirror_del(struct rdzv_mirror *m, const char *key);
/* The value of `key`, or NULL. */
const char *rdzv_mirror_value(const struct rdzv_mirror *m, const char *key);
/* True when `key` is under prefix + rel (rel like "nodes/"). */
bool rdzv_mirror_under(const struct rdzv_mirror *m, const char *key, const char *rel);

#endif
