// SPDX-License-Identifier: Apache-2.0
/*
 * live: the liveness ring (ring.h) run on a thread of its own, and the workers' fence it keeps
 * tight. On its own thread, a heartbeat says "this process runs", not "its loop is not waiting on
 * the store": an agent blocked in a slow store request is not taken for dead, while a frozen or
 * killed one stops beating (docs/protocol.md "The liveness ring"). The thread does socket I/O
 * and writes the fence page only (no store, no logging); the agent's loop hands it the ring of
 * each round and probes to run, and takes its reports through one pollable fd.
 *
 * The fence: while the node is in a ring, a peer can have it evicted about (2 x misses - 1) x
 * interval after it last beat, long before its lease expires. So its workers' guards get the
 * deadline min(lease, the thread's last turn + fence_ms): a process frozen that long has its
 * workers stopped by their guards before the others can move on without it — the same promise
 * the lease deadline gives without the ring. A lapse is latched (not undone by a late turn) until
 * the loop acts on it.
 */
#ifndef EA_AGENT_LIVENESS_LIVE_H
#define EA_AGENT_LIVENESS_LIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "ring.h"

struct live_params {
    struct ring_params ring;
    int64_t fence_ms; /* while tight: the guards' deadline is at most this long ahead */
    /* writes the guards' deadline (launcher_fence); called from either thread, never at once */
    void (*fence)(void *ctx, int64_t valid_until_ms);
    void *fence_ctx;
};

struct live;

/* Open the ring's listener and start the thread. 0, or a negative errno with a message. */
int live_create(const struct live_params *p, struct live **ret, struct ea_error *err);
/* Stop the thread, say bye on the links, close everything. NULL is a no-op. */
void live_destroy(struct live *l);

int live_port(const struct live *l);
/* Readable (POLLIN) when reports wait: call live_take() until it returns false. */
int live_fd(const struct live *l);

/* The ring of `round` (ring_set(); 0: none). Cheap when nothing changed. */
void live_set(struct live *l, int64_t round, int members, const char *prev, bool await_prev,
              const struct ring_peer *next);
/* Queue a probe (ring_probe()); -EBUSY when RING_PROBES_MAX are queued or in flight. */
int live_probe(struct live *l, uint64_t id, const struct ring_peer *peer, int64_t round,
               int64_t timeout_ms);
/* The oldest report, or false. */
bool live_take(struct live *l, struct ring_report *ret);
void live_links(const struct live *l, struct ring_links *ret);

/*
 * The workers' fence: `lease_until` (rdzv_lease_valid_until), tightened as above while `tight`
 * (this node is in a ring of at least two). Writes it through params.fence and returns the
 * deadline in force. A lapsed tight deadline stays until `clear_lapse` (the loop stopped the
 * workers, or had none) or tight goes false.
 */
int64_t live_fence(struct live *l, int64_t lease_until, bool tight, bool clear_lapse);
/* The deadline written last (by either thread): what the guards hold now. */
int64_t live_fence_held(const struct live *l);

#endif
