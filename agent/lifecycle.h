// SPDX-License-Identifier: Apache-2.0
/*
 * lc: the worker group's lifecycle as a pure decision function. Given what the local worker group
 * is doing and what the rendezvous says (status, round generation, membership), it names the one
 * next action. No I/O, so every rule is unit-tested; agent.c carries the actions out.
 */
#ifndef EA_AGENT_LIFECYCLE_H
#define EA_AGENT_LIFECYCLE_H

#include <stdbool.h>
#include <stdint.h>

#include "state.h"

enum lc_group {
    LC_IDLE,     /* no workers (joining, waiting, spare) */
    LC_RUNNING,  /* workers of generation `group_generation` running */
    LC_STOPPING, /* stop requested; some workers still alive */
    LC_FINISHED, /* every local worker of the generation exited 0; done reported */
    LC_FAILED,   /* a local worker of the generation failed; failure reported */
};

struct lc_input {
    enum lc_group group;
    int64_t group_generation; /* generation the workers were started for (0: never) */
    int live_workers;
    bool terminating;         /* a SIGTERM/SIGINT/SIGHUP arrived, or the lease was lost */
    bool have_state;
    enum rdzv_status status;
    int64_t generation;       /* of the current state */
    int my_index;             /* in the current members, -1 if not a member */
    bool master_known;        /* rounds/<round>/master is known */
};

enum lc_action {
    LC_NOTHING,
    LC_STOP_WORKERS,    /* begin stopping every live worker */
    LC_PUBLISH_MASTER,  /* group rank 0: choose MASTER_ADDR:PORT and publish it */
    LC_START_WORKERS,   /* start the workers of the current generation */
    LC_EXIT_SUCCESS,    /* exit 0 */
    LC_EXIT_FAILED,     /* print the first failure, exit 1 */
    LC_EXIT_CLOSED,     /* exit 4 */
    LC_EXIT_INTERRUPTED /* exit 128 + signal (or rejoin, when the lease was lost) */
};

enum lc_action lc_decide(const struct lc_input *in);
const char *lc_action_name(enum lc_action a);

#endif
