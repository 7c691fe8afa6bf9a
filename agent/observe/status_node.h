// SPDX-License-Identifier: Apache-2.0
/*
 * status_node: one node's own view, which the store does not hold — its liveness ring links (to
 * its successor, from its predecessor: state, peer, age of the last heartbeat heard). The agent
 * serves it as JSON on its --http endpoint (/status); `elastic-agent status --agent
 * [ADDR]:PORT` reads it from there and shows it under the run. Kept out of the store on purpose:
 * a link's state changes at every round and every heartbeat, and a write per node per change
 * would break the ring's O(1) store cost per node (issue 31).
 */
#ifndef EA_AGENT_OBSERVE_STATUS_NODE_H
#define EA_AGENT_OBSERVE_STATUS_NODE_H

#include <jansson.h>
#include <stdio.h>

#include "ea_error.h"
#include "metrics.h"

/* The agent's side: the snapshot as /status's JSON, malloc'ed (NULL on allocation failure).
 * Fields: node, run, run_status, round, group_rank (null: not a member), workers, and liveness
 * (null when this node is in no ring) with successor and predecessor, each {peer, state,
 * heartbeat_age_s (null when the link is not up)}. */
char *status_node_json(const struct metrics_snapshot *m);

/* The link lines of a snapshot (what `status --agent` prints), for tests and the text view. */
void status_node_print_text(FILE *out, const char *where, const json_t *node);

/* `status --agent`: check "[ADDR]:PORT" (an IPv4 or [IPv6] address, or empty for 127.0.0.1):
 * -EINVAL naming what is wrong. */
int status_node_check_addr(const char *spec, struct ea_error *err);

/* GET /status from the agent at `spec` ([ADDR]:PORT) within timeout_ms: 0 and the decoded
 * object (new reference), or a negative errno with a message (unreachable, timed out, not an
 * agent's answer). */
int status_node_fetch(const char *spec, int timeout_ms, json_t **ret, struct ea_error *err);

#endif
