// SPDX-License-Identifier: Apache-2.0
/* node internals, shared by node.c, node_ring.c and node_walk.c. Not for other modules: node.h
 * is the unit's interface. */
#ifndef EA_AGENT_NODE_NODE_INTERNAL_H
#define EA_AGENT_NODE_NODE_INTERNAL_H

#include "node.h"
#include "suspect.h"

/* Hand a log line to the owner (node_ops.log); formatted only when there is one. */
void node_log(struct node *n, enum node_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void node_event(struct node *n, const struct node_event *e);
/* The session's warning, if any, logged as a warning. */
void node_take_warning(struct node *n);

/* ---- node_ring.c, for the walk --------------------------------------------------------------- */

/* A suspicion of a member that this node's successor walk found dead (sus->by: this node): as
 * node_ring's own — suspect/<r>/<id>, or for the coordinator (group rank `rank`) a suspicion of
 * the coordinator — counted and told as an event. < 0: a store error, to try again. */
int node_ring_suspect_member(struct node *n, const struct rdzv_suspicion *sus, int rank);

/* ---- correlated evidence (node_cut.c) ------------------------------------------------------- */

/* This node is about to confirm the suspicion of a member in `suspect_domain` written by `by`
 * (`also`: the key's second watcher, or NULL): 1 when its probe would be correlated with their
 * word (rdzv_correlated: this node and the watchers in one failure domain, the suspect outside
 * it), with the watcher to probe as well in *ret (of a key this node wrote itself, `also`); 0
 * when it is not (or a domain or the watcher's record is unknown: as before issue 41). */
int node_correlated_watcher(struct node *n, const char *by, const char *also,
                            const char *suspect_domain, struct rdzv_ring_peer *ret);

/* rounds/<r>/detect for the suspicion x (create-only: the first wins). */
void node_publish_detect(struct node *n, const struct rdzv_suspicion *x);
/* Logged: a probe that could not leave this node (`cause`), or a failed probe correlated with
 * the watcher's word whose probe of the watcher failed too: nothing is confirmed either way. */
void node_no_evidence(struct node *n, const struct rdzv_suspicion *x, const char *cause);
void node_unverified(struct node *n, const struct rdzv_suspicion *x);
void node_to_ring_peer(const struct rdzv_ring_peer *p, struct ring_peer *ret);

/* ---- the successor walk (node_walk.c) --------------------------------------------------------- */

/* A run of dead members past a suspected successor, found in one pass (docs/protocol.md "The
 * liveness ring"). Allocated at its first walk (most nodes never walk), owned by node_ring. */
struct node_walk;

struct node_walk_env {
    const struct node_transport *tr; /* the ring's probes */
    int64_t probe_ms;                /* a probe's answer within this long */
    const char *ns;                  /* this host and network namespace, "" any */
};

/* This node (not the coordinator) suspects its successor `from` (`backward`: its predecessor) in
 * ring round `round`: walk past it (once per round and neighbour) into *w (one walk a direction)
 * — read the members' records and probe them. 0 or -ENOMEM. */
int node_walk_start(struct node *n, struct node_walk **w, const struct node_walk_env *env,
                    int64_t round, const char *from, bool backward, int64_t now);
/* A probe's report: true when it was one of this walk's direction (taken; of another ring round
 * than `round`: ignored). */
bool node_walk_on_probe(struct node *n, struct node_walk *w, int64_t round,
                        const struct ring_report *x);
/* Every pass, with the ring's round: a walk of another round is dropped; records and probes that
 * had to wait, and suspicions the store refused, are tried again. */
void node_walk_step(struct node *n, struct node_walk *w, const struct node_walk_env *env,
                    int64_t round, int64_t now);
/* Something to try again soon (node_walk_step). */
bool node_walk_due(const struct node_walk *w);
void node_walk_free(struct node_walk *w);

#endif
