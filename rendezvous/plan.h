// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv plan: the protocol's decisions as pure functions (DESIGN.md §4): what the coordinator
 * commits next given the state, the live nodes and the clock; rank assignment (survivors keep
 * their order, newcomers are appended by arrival); the transition a worker failure causes.
 * No I/O and no clock reads: everything comes in as arguments, so every rule is unit-tested.
 */
#ifndef EA_RENDEZVOUS_PLAN_H
#define EA_RENDEZVOUS_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state.h"

/* In a round of n members, members lost within rdzv_loss_batch_ms(n) of the last commit wait
 * for it to pass and go in one round: a burst of lease expiries (a rack lost, 10% of a fleet)
 * becomes a few rounds, not one per expiry batch, each sent to every node. 0 below 1,000
 * members (a loss there costs little: at once), n/5 ms above, at most 2 s. */
int64_t rdzv_loss_batch_ms(size_t n_members);

/*
 * Coordinator succession (docs/protocol.md, "The coordinator"): how long after a node saw `coord`
 * vanish it claims the key. The members at RDZV_SUCCESSORS positions of the committed round's
 * rank order, spread over it (group rank 1, then every n/8th rank), claim in that order, one
 * rdzv_succession_step_ms(n) apart: a rack that takes the coordinator and its neighbours in rank
 * order takes at most one of them, and a claim's event has a whole step to reach the next one, so
 * one or two nodes write where every node of the round used to. Every other member waits until
 * they all had their turn, and a node that is not a member of the committed round (a spare, or no
 * round runs) after that, spread by its slot. Pure: each node computes its own delay in O(1).
 * group_rank -1: not a member (or its rank is not known yet); n_members: the committed round's
 * group world size (0: no round runs).
 */
#define RDZV_SUCCESSORS 8
int64_t rdzv_succession_step_ms(size_t n_members);
int64_t rdzv_takeover_delay_ms(int group_rank, size_t n_members, int64_t slot);
/* The same while the run gathers (no round, no ranks): the order comes from a hash of the slot
 * modulo n_live, the live count the coordinator last published, so that about one node is at
 * each of the first RDZV_SUCCESSORS turns (one rdzv_succession_step_ms(n_live) apart) and every
 * other node waits until they all had theirs, then spread by slot; n_live 0 (none published
 * yet): everyone that way. Where the turns are empty by chance (e^-8 of the time) the rest
 * claim as before: a stampede spread over a second, never a loss. Pure, O(1). */
int64_t rdzv_gather_takeover_delay_ms(size_t n_live, int64_t slot);

struct rdzv_params {
    int min_nodes, max_nodes;
    int64_t settle_ms;    /* commit at >= min once no node arrived for this long */
    int64_t last_call_ms; /* ... or once this long has passed since min was reached */
    int max_restarts;
    int64_t lease_ttl_ms; /* a failure's charge is final after this long without a member lost */
    bool rank_by_host;    /* --rank-order host: group ranks follow sorted host names (DMLC) */
    bool ring;            /* --liveness: each member's ring links go into its assignment chunk */
};

/* What the coordinator sees. */
struct rdzv_view {
    const struct rdzv_state *state; /* NULL: no state key yet */
    const struct rdzv_node *nodes;  /* live nodes, sorted by create_revision (arrival) */
    size_t n_nodes;
    const char *const *done;        /* node ids with rounds/<state->round>/done/<id> */
    size_t n_done;
    int64_t now_ms;
    int64_t last_arrival_ms; /* when the newest live node appeared (monotonic) */
    int64_t min_reached_ms;  /* when the live count last reached >= min, -1 if below */
    int64_t generation;      /* of the state's round */
    int64_t charge_seen_ms;  /* when this node first saw the state's pending charge, -1: none */
    int64_t state_seen_ms;   /* when the coordinator first saw this state value (monotonic; 0:
                                unknown): losses within rdzv_loss_batch_ms() of it are batched */
    int64_t loss_hold_ms;    /* the coordinator's liveness ring confirms suspicions until then
                                (rdzv_hold_losses; 0: none): a loss waits for it, so the members
                                one burst takes (a rack, a domain) leave in one round */
    bool failure_reported;   /* failures/<state->round> exists: a worker of the round failed */
    bool failure_stop;       /* ... and its record says the run ends (no progress, issue 40) */
    bool reform_requested;   /* reform/<state->round> exists: a member had to stop its workers
                                without a membership change (it lost its lease and rejoined) */
    /* Optional, from a caller that keeps it up to date per event (the coordinator's session: its
     * CPU per event must not grow with N): survivors_known says n_survivors is the number of the
     * state's members among the live nodes, and then `nodes` may be NULL (n_nodes still the
     * count): the plan decides from the counts and asks for the list (RDZV_PLAN_NEED_NODES) only
     * when it writes a round of them. */
    bool survivors_known;
    size_t n_survivors;
};

/* rdzv_plan(): a round is to be written and view.nodes is NULL: call again with the list. */
#define RDZV_PLAN_NEED_NODES 2

/*
 * Decide the coordinator's next write. Returns 1 with *ret_next filled (caller owns; CAS it on the
 * state's mod_revision), 0 when nothing is to be written now, or RDZV_PLAN_NEED_NODES (only when
 * v->nodes is NULL: see survivors_known); either way *ret_wake_ms is the
 * monotonic time at which to evaluate again even without new events (-1: only on events).
 * Negative errno on allocation failure.
 */
int rdzv_plan(const struct rdzv_params *p, const struct rdzv_view *v, struct rdzv_state *ret_next,
              int64_t *ret_wake_ms, struct ea_error *err);

/* How long a worker failure's charge stays provisional: one lease TTL plus max(1 s, TTL/2) for
 * the store's lease-expiry granularity and event delivery. */
int64_t rdzv_charge_window_ms(const struct rdzv_params *p);

/*
 * Members of the next round: members of `prev` (may be NULL) that are still live, in their old
 * order, then live newcomers in arrival order, at most max_nodes; with `by_host`, the chosen
 * members are then ordered by host name (then node id), so a node keeps its rank as long as its
 * host does. Group ranks and rank bases are assigned contiguously. *ret is malloc'ed.
 */
int rdzv_assign(const struct rdzv_state *prev, const struct rdzv_node *nodes, size_t n_nodes,
                int max_nodes, bool by_host, struct rdzv_member **ret, size_t *ret_n);

/*
 * The state a worker failure in round `s->round` leads to. Within the budget: the next round at
 * once, with restart_count+1 charged provisionally (charge_round = the new round): rdzv_plan()
 * refunds it if a member turns out lost within rdzv_charge_window_ms() (the failure was a symptom
 * of the loss) and makes it final otherwise; fewer than min live: WAITING. Past the budget no
 * worker starts again on speculation: FAILED at once when the round's own charge is still pending
 * (this failure confirms it) or the round has a single member (no loss could explain it), else
 * FAILING (same round, charge_round = it, restart_count unchanged): every agent stops its workers
 * and rdzv_plan() then starts the next round uncharged if a member is lost within the window, or
 * sets FAILED (restart_count+1) once it has passed. *ret_next is owned by the caller.
 */
int rdzv_plan_failure(const struct rdzv_params *p, const struct rdzv_state *s,
                      const struct rdzv_node *nodes, size_t n_nodes, struct rdzv_state *ret_next,
                      struct ea_error *err);
/* The same, `stop`: the failure's record says the run ends (--max-restarts-without-progress,
 * agent/progress/): handled as if the budget were spent (FAILING or FAILED, never a restart).
 * Either way the next state's last_failure names this round. */
int rdzv_plan_failure_ex(const struct rdzv_params *p, const struct rdzv_state *s,
                         const struct rdzv_node *nodes, size_t n_nodes, bool stop,
                         struct rdzv_state *ret_next, struct ea_error *err);

/*
 * The next round over the live nodes, restart budget unchanged (or WAITING below min): used when a
 * member had to stop its workers without a membership change (it lost its lease and rejoined).
 */
int rdzv_plan_reform(const struct rdzv_params *p, const struct rdzv_state *s,
                     const struct rdzv_node *nodes, size_t n_nodes, struct rdzv_state *ret_next,
                     struct ea_error *err);

#endif
