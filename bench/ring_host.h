// SPDX-License-Identifier: Apache-2.0
/*
 * sim_ring: the liveness ring for rdzv-sim's simulated nodes, as the agent has it
 * (agent/agent_liveness.c): each node owns a real ring (agent/liveness/ring.c: a listening
 * socket, a TCP link to its successor, heartbeats) driven by its process's poll loop instead of a
 * thread of its own; it follows each running round from its own chunk (one node record read per
 * round, its successor's), writes a suspicion when a link breaks (rendezvous/suspect.c), and as
 * coordinator confirms each with a probe of its own before it revokes the suspect's lease; a
 * suspicion of the coordinator goes to a third member (rounds/<r>/coord_suspect), which probes
 * it and revokes the lease `coord` is on. Bench only.
 */
#ifndef EA_BENCH_SIM_RING_H
#define EA_BENCH_SIM_RING_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ring.h"
#include "session.h"

struct sim_ring_stats {
    uint64_t suspicions, evictions, false_alarms;
};

/* One process's rings, served by a thread of its own as the agent's ring has one (a process
 * whose loop applies a commit's events for its 1,250 sessions would otherwise fall silent on
 * every link for as long, and be evicted): every `pass_ms` it polls every ring's sockets without
 * waiting and lets each handle what came and what is due; the reports (suspicions, probe
 * results) wait in a queue for the loop, signalled on an eventfd. One mutex guards the rings. */
struct sim_ring_host;
int sim_ring_host_create(size_t max_rings, int64_t pass_ms, struct sim_ring_host **ret,
                         struct ea_error *err);
/* Start the thread (after fork, in the process that serves the rings). */
int sim_ring_host_start(struct sim_ring_host *h, struct ea_error *err);
/* Readable when reports wait: call sim_ring_host_reports(). */
int sim_ring_host_fd(const struct sim_ring_host *h);
/* Stop the thread; the rings must be closed first. NULL is a no-op. */
void sim_ring_host_destroy(struct sim_ring_host *h);

struct sim_ring;

/* Open a node's ring listener on 127.0.0.1 (its port goes in the node record: live_port);
 * `ctx` is handed back with its reports (the caller's node). With await_prev (the agent's
 * behaviour) a predecessor that has not linked within twice the silence is suspected. */
int sim_ring_open(struct sim_ring_host *h, const char *run_id, const char *node_id,
                  int64_t interval_ms, int misses, bool await_prev, void *ctx,
                  struct sim_ring **ret, struct ea_error *err);
int sim_ring_port(const struct sim_ring *g);
/* A clean end: a bye on both links. NULL is a no-op. */
void sim_ring_close(struct sim_ring *g);
/* A SIGKILLed process: the kernel closes its sockets (no bye: its neighbours see EOF, and its
 * listener refuses); everything else is freed without touching the sockets again. */
void sim_ring_kill(struct sim_ring *g);

/* Follow the session's running round (call after its events or tick): the links its chunk says
 * (the successor's node record is read outside the rings' lock); and a suspicion of the
 * coordinator this node is to confirm. */
void sim_ring_follow(struct sim_ring *g, struct rdzv_session *s, int64_t now);
/* Take the queued reports: for each, `handle(ctx, ring, report)` is called, which should call
 * sim_ring_report() with the node's session. */
void sim_ring_host_reports(struct sim_ring_host *h, void (*handle)(void *ctx, struct sim_ring *g,
                                                                   const struct ring_report *x));
/* Act on one report as the agent does: a suspicion written, a probe's verdict applied. */
void sim_ring_report(struct sim_ring *g, struct rdzv_session *s, const struct ring_report *x);
/* As the coordinator: probe the suspicions the store holds (after its events). */
void sim_ring_confirm(struct sim_ring *g, struct rdzv_session *s, int64_t now);
void sim_ring_stats_get(const struct sim_ring *g, struct sim_ring_stats *ret);

#endif
