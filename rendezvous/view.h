// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv run view: a read-only picture of one run, decoded from a listing of its keys (DESIGN.md
 * §3): the `state`, the live `nodes/`, the current round's master and `done/` keys, and every
 * `failures/<r>` record. For observers (`elastic-agent status`); the agent's own session keeps its
 * own mirror. No I/O: the caller lists the keys (kv_list) and hands them over.
 */
#ifndef EA_RENDEZVOUS_VIEW_H
#define EA_RENDEZVOUS_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv.h"
#include "state.h"

/* One `failures/<r>` record. */
struct rdzv_view_failure {
    int64_t round;
    struct rdzv_failure f;
};

struct rdzv_run_view {
    size_t n_keys;           /* keys under the run's prefix; 0: the run does not exist */
    bool have_state;         /* false while the first round is still forming */
    struct rdzv_state state; /* owned */
    int64_t generation;      /* of state.round (0 without state) */
    struct rdzv_node *nodes; /* live nodes (valid records), by create_revision; owned */
    size_t n_nodes;
    char **done; /* node ids with rounds/<state.round>/done/<id>; owned */
    size_t n_done;
    char master[RDZV_ADDR_MAX + 8];     /* rounds/<state.round>/master, "" when unknown */
    struct rdzv_view_failure *failures; /* by round; owned */
    size_t n_failures;
    struct rdzv_view_compute {          /* compute/<node> of state.round (straggler detection) */
        char node_id[RDZV_ID_MAX];
        double median_s;
    } *compute; /* owned */
    size_t n_compute;
    size_t n_ignored; /* node or failure records that did not decode */
};

/*
 * Decode the `n` entries of a listing of `prefix` (which ends with '/'; entries outside it are
 * ignored, in any order) into *ret. -EAGAIN when the listing caught a commit half-way (the next
 * round's assignment chunks are written, its `state` not yet): list again. A `state` value that
 * is not ours: -EBADMSG naming the key (an observer must not guess). Undecodable node or failure records are skipped and counted in
 * n_ignored. -ENOMEM on allocation failure. On failure *ret is untouched.
 */
int rdzv_run_view_decode(const char *prefix, const struct kv_entry *entries, size_t n,
                         struct rdzv_run_view *ret, struct ea_error *err);

/* Free everything; leaves a zeroed view. NULL is a no-op. */
void rdzv_run_view_clear(struct rdzv_run_view *v);

/* The live node record of `node_id`, or NULL. */
const struct rdzv_node *rdzv_run_view_node(const struct rdzv_run_view *v, const char *node_id);

/* True when `node_id` has reported done for state.round. */
bool rdzv_run_view_is_done(const struct rdzv_run_view *v, const char *node_id);

/* Live nodes that are not members of the state's round (spares, or not admitted yet). */
size_t rdzv_run_view_spares(const struct rdzv_run_view *v);

/* The median compute time `node_id` published for state.round (compute/<node>), 0 when none. */
double rdzv_run_view_compute(const struct rdzv_run_view *v, const char *node_id);

/* The failure record of `round`, or NULL. */
const struct rdzv_view_failure *rdzv_run_view_failure(const struct rdzv_run_view *v, int64_t round);

#endif
