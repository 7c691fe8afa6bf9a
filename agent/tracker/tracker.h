// SPDX-License-Identifier: Apache-2.0
/*
 * tracker: the DMLC/rabit tracker served by the agent of group rank 0 for one round (docs/env.md
 * "The built-in rabit tracker"). Workers connect, get their elastic-agent global rank (their
 * DMLC_TASK_ID) and the round's tree and ring links (rendezvous/topology.c, as in the topology
 * file), and the tracker brokers the peer connections until every worker is linked; `print` goes
 * to the agent's log, `shutdown` is counted. Non-blocking sockets driven by the agent's poll loop;
 * a bad peer is closed with one warning. One tracker serves one round: a new round gets a new one
 * (on a fresh port), so workers of an older round cannot reach it. It admits only the round's
 * member hosts, a few connections per worker, one `start` per rank, and closes a peer that says
 * nothing within TRACKER_HELLO_TIMEOUT_MS (docs/security.md "The built-in tracker"). Not for
 * parameter servers.
 */
#ifndef EA_AGENT_TRACKER_H
#define EA_AGENT_TRACKER_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"

struct tracker;

/* Connections served at once (more wait in the listen backlog); pollfds: these + the listener. */
#define TRACKER_CONN_MAX 1024
#define TRACKER_POLL_MAX (1 + TRACKER_CONN_MAX)
/* How long a peer may take to send a message it owes (its links, a print) before it is closed. */
#define TRACKER_IO_TIMEOUT_MS 30000
/* How long a new connection may take to send its magic and hello before it is closed. */
#define TRACKER_HELLO_TIMEOUT_MS 5000
/* Connections open at once per source address: this many per worker behind it. */
#define TRACKER_CONNS_PER_WORKER 4

/* A member host: a numeric address its workers connect from, and how many workers it runs. */
struct tracker_host {
    const char *addr;
    int workers;
};

struct tracker_params {
    const char *addr;  /* numeric address to listen on (see tracker_addr()) */
    int world_size;    /* the round's world: ranks 0..world_size-1 */
    int64_t round;     /* for messages, and tracker_round() */
    int avoid_port;    /* the previous round's port, never reused; 0: none */
    int io_timeout_ms; /* 0: TRACKER_IO_TIMEOUT_MS */
    int hello_timeout_ms; /* 0: TRACKER_HELLO_TIMEOUT_MS (never more than io_timeout_ms) */
    /* who may connect: the members' addresses (copied); a peer from any other address is
     * refused. With `loopback` (every member runs on this host), or when n_hosts is 0, loopback
     * peers are admitted too, up to TRACKER_CONNS_PER_WORKER × world_size at once. */
    const struct tracker_host *hosts;
    size_t n_hosts;
    bool loopback;
};

/* What the tracker has seen (for logs, tests and the benchmark). */
struct tracker_stats {
    int accepted;          /* connections */
    int refused;           /* closed with a warning (or refused at once, see below) */
    int not_member;        /* refused at once: not from a member host */
    int over_cap;          /* refused at once: its host had its connections open already */
    int linked;            /* ranks that got their links (the last start/recover of each) */
    int shutdown;          /* ranks that said shutdown */
    int printed;           /* print messages */
    bool all_linked;       /* every rank linked and no rank waits for a peer */
    int64_t all_linked_ms; /* monotonic time of that, else 0 */
};

/* Listen on p->addr, a free port. 0, or a negative errno with a message. */
int tracker_create(const struct tracker_params *p, struct tracker **ret, struct ea_error *err);
/* Close the listener and every connection. NULL is a no-op. */
void tracker_destroy(struct tracker *t);

/* The address tracker_addr() gives for p->addr = `addr`, into out (size bytes): `addr` itself when
 * it is an address of this machine (or not IPv4), else this machine's address on the route to
 * it (workers on another host, --host over ssh). The agent lists it in its node record. */
void tracker_local_addr(const char *addr, char *out, size_t size);

int tracker_port(const struct tracker *t);
/* The address workers connect to: p->addr, or when that is not an address of this machine, this
 * machine's address on the route to it (the tracker then listens on every address). */
const char *tracker_addr(const struct tracker *t);
int64_t tracker_round(const struct tracker *t);
const struct tracker_stats *tracker_stats(const struct tracker *t);
/* The last warning the tracker logged ("" if none); owned by t. */
const char *tracker_last_warning(const struct tracker *t);

/* Fill up to `max` pollfds (the listener, then each connection); returns how many. */
size_t tracker_pollfds(const struct tracker *t, struct pollfd *fds, size_t max);
/* Handle the revents of the fds tracker_pollfds() filled (nfds of them), and the deadlines
 * due at monotonic `now_ms`; call after every poll(), also when it timed out. */
void tracker_on_poll(struct tracker *t, const struct pollfd *fds, size_t nfds, int64_t now_ms);
/* Monotonic time of the next deadline, or -1. */
int64_t tracker_wake_ms(const struct tracker *t);

#endif
