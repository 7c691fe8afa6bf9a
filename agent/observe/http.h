// SPDX-License-Identifier: Apache-2.0
/*
 * http: the agent's HTTP endpoint (--http ADDR:PORT) on libmicrohttpd: /healthz (200 while the
 * agent is joined and live, for liveness probes), /readyz (200 while workers of the current round
 * run here), /metrics (Prometheus text). libmicrohttpd serves from its own thread; that thread
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

/* Stop serving (joins the thread) and free. NULL is a no-op. */
void http_stop(struct http *h);

#endif
