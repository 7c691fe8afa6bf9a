// SPDX-License-Identifier: Apache-2.0
/*
 * node_ring_internal: the liveness ring's state of one node (node_ring.c, which follows the
 * rounds and writes suspicions) shared with its confirmations (node_confirm.c: the coordinator's
 * probes of suspects, the successor's early probes, the loss hold). Private to agent/node/.
 */
#ifndef EA_NODE_RING_INTERNAL_H
#define EA_NODE_RING_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "node.h"
#include "node_internal.h"
#include "suspect.h"

/* CONFIRMED: its probe went unanswered; its lease is revoked with the pass's others
 * (evict_confirmed: the revokes in flight together). EVICTED: its lease revoked, until the
 * coordinator's mirror no longer has its node key (the round waits for that: hold_losses). DEAD: this node's own probe, made while it confirmed a
 * suspicion of the coordinator and before it coordinated, went unanswered at dead_ms (used once
 * it coordinates, while fresh: succession_probes) */
enum case_state {
    CASE_FREE,
    CASE_QUEUED,
    CASE_PROBING,
    CASE_CONFIRMED,
    CASE_EVICTED,
    CASE_DONE,
    CASE_DEAD
};

/* A probe's outcome, as far as a confirmation goes. */
enum probe_res { PR_PENDING, PR_ALIVE, PR_DEAD, PR_LOCAL };

struct ring_case {
    enum case_state state;
    struct rdzv_suspect_case c;
    uint64_t probe;
    int64_t dead_ms;
    /* correlated evidence (rdzv_correlated): the watcher, probed too; wprobe 0: not needed */
    struct rdzv_ring_peer watcher;
    uint64_t wprobe;
    enum probe_res sres, wres;
    char why[96]; /* CONFIRMED: what its probe met */
};

struct node_ring {
    struct node_ring_params p;
    char ns[RDZV_ADDR_MAX]; /* this host and network namespace ("" any) */

    /* the ring as handed to the transport */
    int64_t round;
    char next[RDZV_ID_MAX], prev[RDZV_ID_MAX];
    int64_t peer_retry_ms;
    /* the successor's node record as last read: the same while its slot is (no read a round) */
    char peer_id[RDZV_ID_MAX];
    int64_t peer_slot;
    struct ring_peer peer_rp;
    bool peer_have, peer_reach;

    struct rdzv_suspicion unsent[NODE_UNSENT_MAX];
    size_t n_unsent;

    /* the coordinator's confirmations in cases_round (allocated when this node first
     * coordinates: most nodes never do) */
    struct ring_case *cases;
    struct rdzv_suspect_case *listed; /* a listing's scratch, NODE_CASES_MAX, with `cases` */
    int64_t cases_round;
    uint64_t seen_changes;
    bool rescan;
    size_t n_confirmed;         /* cases CONFIRMED, to evict at the end of the pass */
    bool holding;               /* the next round waits for the confirmations (hold_losses) */
    int64_t hold_from, hold_to; /* since when; until when, as last told to the session */
    size_t burst;               /* cases taken while holding; the first and last one when */
    int64_t first_case_ms, last_case_ms;

    /* a confirmation of a suspicion of the coordinator (this node is its third member, or the
     * watcher in a round of two) */
    bool coord_probing, coord_from_key;
    uint64_t coord_probe, coord_wprobe; /* of the coordinator; of the watcher (0: not needed) */
    enum probe_res coord_sres, coord_wres;
    int64_t coord_lease;
    struct rdzv_coord_suspicion coord_x;
    int64_t coord_seen_round, coord_seen_rev; /* the last rounds/<r>/coord_suspect looked at */
    bool coord_todo;                          /* coord_x still to be written */
    /* while this node confirms a suspicion of the coordinator (it claims `coord` if it dies): until
     * when it probes the round's other suspects too, and when it last listed them */
    int64_t succeed_until, succeed_listed;

    uint64_t probe_ids;
    struct node_ring_stats st;
    /* past a suspected successor [0] and predecessor [1] (node_walk.c); NULL until a first walk */
    struct node_walk *walk[2];

    /* the rejoin cooldown: `strikes` losses in a row, each soon after rejoining or cut from
     * the ring (node_rejoin_wait); was_lost: the loss was seen (by node_step, or here) */
    bool was_lost;
    int strikes;
    int64_t rejoined_ms, cooldown_until_ms;
    /* the ring round in which this node reported a broken link of its own and the store took
     * the report (so its lease was live then): a loss of the lease in that round is a ring
     * eviction of a node cut from its neighbours that still reaches the store (0: none); when;
     * the last ring round this node was in (the loss is often seen after the run went on) */
    int64_t cut_round, cut_ms, ring_last;
};

/* Whether this node can reach a peer at the address in its record: a loopback address only
 * from the same host and network namespace (agents of a file store in network namespaces all
 * publish 127.0.0.1: without this each would find every other dead). */
static inline bool node_ring_reachable(const struct node_ring *g, const struct rdzv_ring_peer *p)
{
    return !p->ns[0] || !g->ns[0] || strcmp(p->ns, g->ns) == 0;
}

/* node_confirm.c */
/* A probe this node asked for ended (the coordinator's, a confirmer's, an early one). */
void node_ring_on_probe(struct node *n, struct node_ring *g, const struct ring_report *x);
/* The coordinator: probe the suspects its watch delivered, evict those that did not answer. */
void node_confirm_suspects(struct node *n, struct node_ring *g, int64_t now);
/* Revoke the leases of the cases confirmed dead since the last call, together. */
void node_evict_confirmed(struct node *n, struct node_ring *g);
/* While confirmations are in flight, the next round waits (a burst leaves in one round). */
void node_hold_losses(struct node *n, struct node_ring *g, int64_t now);
/* The member confirming the coordinator's death probes the round's other suspects too. */
void node_succession_probes(struct node *n, struct node_ring *g, int64_t now);

#endif
