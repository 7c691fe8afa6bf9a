// SPDX-License-Identifier: Apache-2.0
/*
 * ring: one node's links of the liveness ring (docs/protocol.md "The liveness ring"). For a
 * round, it holds one TCP link to its successor (it connects) and accepts one from its
 * predecessor, each carrying a heartbeat byte every interval both ways; a link that breaks (EOF,
 * reset, refused, or `misses` intervals of silence) becomes a suspicion of the peer. It also runs
 * the one-shot probes with which a suspicion is confirmed, and answers other nodes' probes. A
 * plain state machine of non-blocking sockets driven by its caller's poll: pollfds, on_poll,
 * wake_ms (agent/liveness/live.h runs it on a thread of its own). No store, no logging.
 */
#ifndef EA_AGENT_LIVENESS_RING_H
#define EA_AGENT_LIVENESS_RING_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"
#include "ring_proto.h"

/* Connections that have not said hello yet (more: the oldest is closed). */
#define RING_PENDING_MAX 8
/* Probes in flight at once (the coordinator's of a burst: a tenth of a fleet at a probe's deadline
 * per this many). */
#define RING_PROBES_MAX 128
/* Reports waiting to be taken (more: the oldest is dropped): every probe's, and the links'. */
#define RING_REPORTS_MAX (RING_PROBES_MAX + 64)
/* pollfds: the listener, the pending connections, the two links, the probes. */
#define RING_POLL_MAX (1 + RING_PENDING_MAX + 2 + RING_PROBES_MAX)
/* A connection must have said hello within this long (or misses x interval, if longer). */
#define RING_HELLO_TIMEOUT_MS 1000
/* A predecessor that never links is suspected 2 x silence + this much per member of the round
 * after ring_set(): a big round takes seconds to reach every node (the fan-out, measured at
 * about 0.6-1.1 ms a node at 10,000 nodes), and one that has not seen the round yet cannot link.
 * Capped by ring_params.await_cap_ms (docs/protocol.md "The liveness ring"). */
#define RING_FANOUT_US_PER_MEMBER 1000
/* The cap when ring_params.await_cap_ms is 0. */
#define RING_AWAIT_CAP_DEFAULT_MS 5000

struct ring_params {
    const char *run_id, *node_id; /* copied; printable ASCII, 1..RING_NAME_MAX bytes */
    const char *bind_addr;        /* numeric address to listen on; NULL or "": every address */
    int64_t interval_ms;          /* heartbeat period */
    int misses;                   /* a link silent for misses x interval is broken */
    /* the fan-out allowance above 2 x silence for a first link is at most this (the agent: half
     * the lease TTL, so the ring still sees a frozen newcomer well before its lease does);
     * 0: RING_AWAIT_CAP_DEFAULT_MS */
    int64_t await_cap_ms;
};

/* Where a node's ring listener is. */
struct ring_peer {
    char node_id[RING_NAME_MAX + 1];
    char addr[64]; /* numeric IPv4 or IPv6 */
    int port;
};

enum ring_report_kind {
    RING_REPORT_SUSPECT = 1, /* a link of the current round broke: suspect its peer */
    RING_REPORT_PROBE = 2,   /* a probe finished */
};

struct ring_report {
    enum ring_report_kind kind;
    int64_t round;
    char node_id[RING_NAME_MAX + 1]; /* the suspect, or the probed node */
    char cause[64];                  /* what was seen: "closed", "refused", "silent 612 ms"... */
    bool outbound;                   /* suspect: on the link to the successor */
    int64_t heard_ms;                /* suspect: monotonic time of its last sign of life, -1 none */
    uint64_t probe_id;               /* probe: as given to ring_probe() */
    bool alive;                      /* probe: it answered as the node named */
    /* probe: not alive, but no evidence against the peer either: this node could not send it a
     * packet (ring_local_error(): no route from here, no local port or fd). Never confirm on it. */
    bool local;
};

/* The links as they are now (for metrics and status). */
struct ring_links {
    int64_t round;        /* 0: in no ring */
    const char *out, *in; /* "none", "connecting", "up", "down", "retrying" */
    char next[RING_NAME_MAX + 1], prev[RING_NAME_MAX + 1];
    /* monotonic ms of the last heartbeat heard on each link while it is up, else -1 */
    int64_t out_heard_ms, in_heard_ms;
    /* connects and probes this node could not even start (ring_local_error()), since created,
     * and the last one's cause ("" none): no suspicion came of them */
    uint64_t local_failures;
    char local_cause[64];
};

struct ring;

/* Open the listener (an ephemeral port). 0, or a negative errno with a message. */
int ring_create(const struct ring_params *p, struct ring **ret, struct ea_error *err);
/* Say bye on both links and close everything. NULL is a no-op. */
void ring_destroy(struct ring *r);
int ring_port(const struct ring *r);

/*
 * The ring of `round` (0: this node is in none) of `members` nodes: accept a link from `prev`
 * (NULL or "": from nobody) and keep one to `next` (NULL: none). With `await_prev`, a predecessor
 * that has not linked within ring_await_ms() is suspected (the caller knows whether it can reach
 * this node at all). A change closes the links of the previous round with a bye (no suspicion on
 * either side) and connects anew. Same arguments: no-op.
 */
void ring_set(struct ring *r, int64_t round, int members, const char *prev, bool await_prev,
              const struct ring_peer *next, int64_t now);
/* How long after ring_set() a predecessor that never linked is suspected, in a round of
 * `members`: 2 x silence + RING_FANOUT_US_PER_MEMBER per member, the latter capped. */
int64_t ring_await_ms(const struct ring *r, int members);

/* Probe `peer` once: connect, hello, answer within timeout_ms. The result comes as a
 * RING_REPORT_PROBE report with `id`. -EBUSY when RING_PROBES_MAX are in flight. */
int ring_probe(struct ring *r, uint64_t id, const struct ring_peer *peer, int64_t round,
               int64_t timeout_ms, int64_t now);

/* Fill up to `max` pollfds; returns how many. */
size_t ring_pollfds(const struct ring *r, struct pollfd *fds, size_t max);
/* How many of its sockets r has closed so far. While it has not changed, none of the numbers
 * ring_pollfds() gave can have been reused for another socket (bench/ring_host.c keeps the
 * rings' sockets in one epoll set, and re-registers a ring's sockets only when it changed). */
uint64_t ring_sockets_closed(const struct ring *r);
/* Handle the revents of the fds ring_pollfds() filled, and the deadlines due at `now`; call
 * after every poll, also when it timed out. */
void ring_on_poll(struct ring *r, const struct pollfd *fds, size_t nfds, int64_t now);
/* Monotonic time of the next deadline (heartbeat, silence, retry, probe), or -1. */
int64_t ring_wake_ms(const struct ring *r);

/* Take the oldest report: true, or false when there is none. */
bool ring_take(struct ring *r, struct ring_report *ret);
void ring_get_links(const struct ring *r, struct ring_links *ret);

#endif
