// SPDX-License-Identifier: Apache-2.0
/*
 * node: one member of a run, the unit the agent, rdzv-sim and fleet-faults all run. It holds the
 * rendezvous session (rendezvous/session.h), keeps its lease, rejoins after a loss with the one
 * jittered back-off (ea_retry_next), writes the pending reports (a local failure, this node's
 * done marker, a reform), and makes the liveness ring's decisions (docs/protocol.md "The liveness
 * ring"): it follows each running round with the ring, writes a suspicion when a link breaks,
 * and, as coordinator, confirms each suspicion with a probe of its own before it revokes the
 * suspect's lease; a suspicion of the coordinator goes to a third member. A node that loses its
 * lease again soon after rejoining waits before it rejoins (no round storm).
 *
 * It knows neither the agent nor time: the clock comes in (struct ea_clock), the ring's sockets
 * are its host's (struct node_transport: the agent's ring thread, liveness/live.h, or rdzv-sim's
 * epoll host), and what it has to tell (logs, events, a fatal store error) goes out through
 * struct node_ops. It never logs itself.
 */
#ifndef EA_AGENT_NODE_NODE_H
#define EA_AGENT_NODE_NODE_H

#include <stdbool.h>
#include <stdint.h>

#include "ea_loop.h"
#include "ring.h"
#include "session.h"

/* Store retries, the join's and every later request's (ea_retry_next): 200 ms doubling to 5 s,
 * each wait spread over half to one and a half times the delay. */
#define NODE_RETRY_BASE_MS 200
#define NODE_RETRY_CAP_MS 5000
/* Suspicions the coordinator confirms at once (more wait for a free slot); allocated by the node
 * that confirms (about 1 KiB each), never by the others. */
#define NODE_CASES_MAX 512
/* While the coordinator confirms suspicions (and until the node keys of those it evicted are
 * gone), its next round waits (rdzv_hold_losses) so that one burst's evictions leave in one
 * round: at most this long after the burst began. */
#define NODE_LOSS_HOLD_MAX_MS 1000
/* So many cases in one hold make a burst: the round waits a beat after its last (hold_losses). */
#define NODE_BURST_MIN 4
/* Suspicion writes waiting for the store. */
#define NODE_UNSENT_MAX 8
/* Reading the successor's node record failed: try again after this long. */
#define NODE_PEER_RETRY_MS 500
/* The longest a node that keeps losing its lease soon after rejoining waits before rejoining. */
#define NODE_REJOIN_COOLDOWN_CAP_MS (300 * 1000)

enum node_level { NODE_DEBUG, NODE_INFO, NODE_WARN, NODE_ERROR };

enum node_event_kind {
    NODE_EV_LEASE_LOST = 1, /* workers must stop: the lease is lost (detail: why) */
    NODE_EV_REJOINED,       /* joined again after a loss */
    NODE_EV_SUSPECT,        /* a ring link broke: `node` suspected (outbound: the successor) */
    NODE_EV_EVICTED,        /* a suspicion confirmed by this node's probe: `node`'s lease revoked */
    NODE_EV_CLEARED,        /* a suspicion's probe answered: a false alarm */
};

struct node_event {
    enum node_event_kind kind;
    const char *node, *by, *cause, *detail; /* "" when not applicable */
    bool outbound;
};

/* A store error the node does not retry: the caller ends (exit codes are its own). */
enum node_fatal {
    NODE_FATAL_AUTH = 1, /* the store refused the credentials */
    NODE_FATAL_CORRUPT,  /* a corrupt or foreign value */
    NODE_FATAL_TIMEOUT,  /* unreachable for longer than params.join_timeout_ms */
};

struct node_ops {
    void *ctx;
    void (*log)(void *ctx, enum node_level level, const char *msg); /* or NULL */
    void (*event)(void *ctx, const struct node_event *e);           /* or NULL */
    void (*fatal)(void *ctx, enum node_fatal why, const char *msg); /* or NULL */
};

/* The ring's sockets, run by whoever hosts them (ring.h's ring_set/ring_probe, maybe on a thread
 * of their own); their reports come back through node_on_report(). */
struct node_transport {
    void *ctx;
    void (*set)(void *ctx, int64_t round, int members, const char *prev, bool await_prev,
                const struct ring_peer *next, int64_t now);
    /* -EBUSY when every probe slot is taken */
    int (*probe)(void *ctx, uint64_t id, const struct ring_peer *peer, int64_t round,
                 int64_t timeout_ms, int64_t now);
};

struct node_ring_params {
    struct node_transport tr;
    int64_t probe_ms;    /* a probe's answer within this long */
    int64_t cooldown_ms; /* the first rejoin cooldown (the agent: the lease TTL) */
    const char *ns;      /* this host and network namespace (node_netns_id), or NULL: any */
    bool loopback;       /* this node's ring address is a loopback one */
    bool await_prev;     /* suspect a predecessor that never links (the agent does) */
};

struct node_params {
    const char *node_id;          /* copied */
    const struct ea_clock *clock; /* NULL: ea_clock_real */
    int64_t join_timeout_ms;      /* store unreachable this long: NODE_FATAL_TIMEOUT */
    struct node_ops ops;
};

struct node_ring;

struct node {
    struct kv *kv;             /* the store the session is on (its owner's: not closed here) */
    struct rdzv_session *rdzv; /* owned once node_init took it: node_free destroys it */
    struct node_params p;
    char node_id[RDZV_ID_MAX];
    struct node_ring *ring; /* the ring's decisions (node_ring_open); NULL when off */

    bool lease_lost;     /* fenced out: stop workers, then rejoin */
    bool reform_pending; /* rejoined: ask for a new round of reform_generation */
    int64_t reform_generation;

    bool failure_pending; /* a local failure still to be written to the store */
    struct rdzv_failure failure;
    int64_t failure_generation;
    bool done_pending; /* this node's done marker for done_round still to be written */
    int64_t done_round;

    int64_t store_down_since_ms; /* -1: the store answers */
    int64_t retry_at_ms;         /* -1: none */
    int64_t retry_delay_ms;      /* store retries: jittered, doubling to 5 s; 0 after a success */
    uint64_t renew_failures;     /* keepalives that failed */
    uint64_t rejoins;
};

/* What the node's owner tells its step (the node knows no workers). */
struct node_step_in {
    bool may_rejoin;       /* the workers are stopped and nothing else holds the node back */
    int64_t generation;    /* the generation the node's workers ran (a rejoin's reform) */
    bool done_still_valid; /* the done marker still applies (the workers of done_round succeeded) */
};

void node_init(struct node *n, const struct node_params *p);
int64_t node_now(const struct node *n);
/* Release the ring's state and destroy the session (no leave: the caller's). */
void node_free(struct node *n);

/* The store's step of every pass: the lease's renewal (a loss: NODE_EV_LEASE_LOST), the rejoin,
 * the pending reports, the session's tick (the coordinator's duties), retries. */
void node_step(struct node *n, const struct node_step_in *in, int64_t now);
/* A store operation failed: logged once per outage, retried with the jittered back-off,
 * NODE_FATAL_* after join_timeout_ms (or at once for a refused credential or a corrupt value). */
void node_store_problem(struct node *n, int code, const struct ea_error *err, int64_t now);
/* A store request succeeded: the outage (if any) is over. */
void node_store_ok(struct node *n);
/* Queue a local failure of `generation` / this node's done marker for `round`; written now. */
void node_report_failure(struct node *n, int64_t generation, const struct rdzv_failure *f);
void node_report_done(struct node *n, int64_t round);
/* Write the pending failure / done marker now (retried by node_step on trouble). */
void node_write_failure(struct node *n, int64_t now);
void node_write_done(struct node *n, int64_t now);
/* Next monotonic wake-up the node's store duties need, -1 none. */
int64_t node_wake_ms(const struct node *n);

/* ---- the liveness ring (node_ring.c) ----------------------------------------------------------
 */

/* Take part in the ring: 0 or -ENOMEM. */
int node_ring_open(struct node *n, const struct node_ring_params *p);
/* Leave the ring's decisions (the transport is closed by its owner). */
void node_ring_free(struct node *n);
/* Every pass: the rejoin cooldown, follow the running round with the ring (`active`: false while
 * leaving: the node is in no ring), flush suspicions, and (coordinator) probe the suspects. */
void node_ring_step(struct node *n, bool active, int64_t now);
/* A report of the ring (ring_take / live_take). */
void node_on_report(struct node *n, const struct ring_report *x);
/* The rejoin cooldown's decision when the lease is lost (pure): `strikes` losses in a row so far,
 * `since_rejoin_ms` since the last rejoin (-1: none), `cut`: the loss came in the ring round in
 * which this node's own links broke and the store took its report of it (an eviction by the ring
 * of a node cut from its neighbours that still reaches the store). A loss soon after a rejoin
 * (within the last wait) is one strike more; a cut loss otherwise is the first; any other loss
 * none. The wait before rejoining: 0, or cooldown_ms doubled per strike after the first (up to
 * NODE_REJOIN_COOLDOWN_CAP_MS); *ret_strikes the new count. */
int64_t node_rejoin_wait(int64_t cooldown_ms, int strikes, int64_t since_rejoin_ms, bool cut,
                         int *ret_strikes);
/* node_step's: the lease is lost (the rejoin's wait decided now, node_rejoin_wait: the rejoin
 * may follow in the same pass); this node rejoined. No-ops without the ring. */
void node_ring_lease_lost(struct node *n, int64_t now);
void node_ring_rejoined(struct node *n, int64_t now);
/* False while a node that lost its lease again soon after rejoining (or in the ring round in
 * which it was cut from its neighbours) waits before rejoining. */
bool node_may_rejoin(const struct node *n, int64_t now);
int64_t node_ring_wake_ms(const struct node *n, int64_t now);
/* In a ring of at least two now (the workers' fence is tight then). */
bool node_ring_linked(const struct node *n);

struct node_ring_stats {
    uint64_t suspicions, evictions, false_alarms;
};
void node_ring_stats_get(const struct node *n, struct node_ring_stats *ret);

/* This host and network namespace ("<boot id>:<netns inode>"): a loopback address is good only
 * there. */
void node_netns_id(char *buf, size_t size);
bool node_is_loopback(const char *addr);
/* `addr` as a numeric address (a name is resolved once, here): false when it does not resolve. */
bool node_numeric_addr(const char *addr, char *buf, size_t size);

#endif
