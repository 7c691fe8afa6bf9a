// SPDX-License-Identifier: Apache-2.0
/*
 * ring_host: the liveness ring's sockets of rdzv-sim's simulated nodes, one epoll thread per
 * process. Each node owns a real ring (agent/liveness/ring.c: a listening socket, a TCP link to
 * its successor, heartbeats); this host is only their transport (node.h's node_transport: set,
 * probe; the reports back): every decision (which round, what to suspect, what to probe and
 * evict) is the product's node unit (agent/node/), as in the agent. Bench only.
 */
#ifndef EA_BENCH_RING_HOST_H
#define EA_BENCH_RING_HOST_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ring.h"

/* One process's rings, served by a thread of its own as the agent's ring has one (a process
 * whose loop applies a commit's events for its 1,250 sessions would otherwise fall silent on
 * every link for as long, and be evicted): the rings' sockets are in one epoll set, and a pass
 * serves the rings with a ready socket or a deadline due, at most one pass every `pass_ms`; the
 * reports (suspicions, probe results) wait in a queue for the loop, signalled on an eventfd. One
 * mutex guards the rings. */
struct ring_host;
int ring_host_create(size_t max_rings, int64_t pass_ms, struct ring_host **ret,
                     struct ea_error *err);
/* Start the thread (after fork, in the process that serves the rings). */
int ring_host_start(struct ring_host *h, struct ea_error *err);
/* Readable when reports wait: call ring_host_reports(). */
int ring_host_fd(const struct ring_host *h);
/* Stop the thread; the rings must be closed first. NULL is a no-op. */
void ring_host_destroy(struct ring_host *h);

struct ring_host_ring;

/* Open a node's ring listener on 127.0.0.1 (its port goes in the node record); `ctx` is handed
 * back with its reports (the caller's node). */
int ring_host_open(struct ring_host *h, const char *run_id, const char *node_id,
                   int64_t interval_ms, int misses, void *ctx, struct ring_host_ring **ret,
                   struct ea_error *err);
int ring_host_port(const struct ring_host_ring *g);
/* A clean end: a bye on both links. NULL is a no-op. */
void ring_host_close(struct ring_host_ring *g);
/* A SIGKILLed process: the kernel closes its sockets (no bye: its neighbours see EOF, and its
 * listener refuses); everything else is freed without touching the sockets again. */
void ring_host_kill(struct ring_host_ring *g);

/* node_transport's two calls, ctx = the node's struct ring_host_ring. */
void ring_host_set(void *ctx, int64_t round, int members, const char *prev, bool await_prev,
                   const struct ring_peer *next, int64_t now);
int ring_host_probe(void *ctx, uint64_t id, const struct ring_peer *peer, int64_t round,
                    int64_t timeout_ms, int64_t now);

/* Take the queued reports of up to `max` rings (64 at most), the oldest first, every report of
 * each: `handle(ctx, report)` for each (the caller hands it to its node: node_on_report). The
 * rest stay queued, the fd readable. */
void ring_host_reports(struct ring_host *h, size_t max,
                       void (*handle)(void *ctx, const struct ring_report *x));

#endif
