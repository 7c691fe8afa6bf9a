// SPDX-License-Identifier: Apache-2.0
/*
 * http: the agent's HTTP endpoint (--http ADDR:PORT) on libmicrohttpd: /healthz (200 while the
 * agent is joined and live, for liveness probes), /readyz (200 while workers of the current round
 * run here), /metrics (Prometheus text), /status (this node's own view as JSON: its run, round,
 * group rank, workers and its two liveness ring links; `status --agent` reads it). libmicrohttpd serves from its own thread; that thread
 * only ever reads the last snapshot the agent published (copied under a mutex), never agent
 * state. Every signal is blocked in it, so the agent's signalfd and SIGCHLD handling see them all.
 */
#ifndef EA_AGENT_HTTP_H
#define EA_AGENT_HTTP_H

#include "ea_error.h"
#include "metrics.h"

struct http;

/* Listen on `addr` (IPv4, or IPv6 without brackets):`port` (0: a free port) and serve. *ret_port is the bound port. */
int http_start(const char *addr, int port, struct http **ret, int *ret_port, struct ea_error *err);

/* Replace the snapshot the endpoints serve (copied). Cheap: call once per loop iteration. */
void http_publish(struct http *h, const struct metrics_snapshot *m);

/* Optional: fill this node's ring links as they are at the moment of a request (/status and
 * /metrics show the heartbeat's age then, not at the agent's last loop pass). Called on the
 * server's thread under its lock; set NULL before what ctx points to goes (then no call is in
 * flight or follows). */
typedef void (*http_links_fn)(void *ctx, struct metrics_link *out, struct metrics_link *in);
void http_set_links(struct http *h, http_links_fn fn, void *ctx);

/* Stop serving (joins the thread) and free. NULL is a no-op. */
void http_stop(struct http *h);

#endif
