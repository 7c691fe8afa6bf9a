// SPDX-License-Identifier: Apache-2.0
/*
 * status: the `elastic-agent status` subcommand. Opens the run's store with the agent's backend
 * options, lists the run's keys (reading only) and prints the run — status, round, generation,
 * world size, restarts, members with their ranks and since when they are in the run, spares, nodes
 * waiting, the failure that ended the run (else the last one) — as a table or as JSON; --watch
 * prints it again on every change the store's watch reports.
 */
#ifndef EA_AGENT_STATUS_H
#define EA_AGENT_STATUS_H

#include <jansson.h>
#include <stdio.h>

#include "view.h"

/* `elastic-agent status ARGS...`: argv[0] is "status". Returns the exit code: 0 shown, 2 usage,
 * 3 store unreachable, 4 no such run (or a state that is not ours). */
int status_main(int argc, char **argv, char **envp);

/* The human table of run `run_id` (pure: the same view always prints the same text). */
void status_print_text(FILE *out, const char *run_id, const struct rdzv_run_view *v);

/* The view as a JSON object (new reference; NULL on allocation failure). Fields: run_id, status
 * ("forming" before the first round), round, generation, world_size, min, max, restart_count
 * (worker failures charged to the budget: max_restarts + 1 or more once failed), max_restarts,
 * scale_events, master, live_nodes, nodes_waiting, members[] (each with since_revision: the store
 * revision at which its live nodes/<id> record was created, null once gone), spares[], failure
 * (the one that ended the run, else the last recorded; ended_run says which; or null),
 * failures_recorded. */
json_t *status_to_json(const char *run_id, const struct rdzv_run_view *v);

#endif
