// SPDX-License-Identifier: Apache-2.0
/*
 * A worker in C that can be a warm spare (elastic-agent --warm-workers, docs/warm.md): the
 * expensive set-up first, then the assignment, then the work with the rank it got. Under a cold
 * start (or torchrun) ea_assign_wait() returns 0 at once: the environment already holds the rank.
 *
 *   cc -I/usr/include -o warm_worker examples/c/warm_worker.c    # the header is installed there
 *   elastic-agent --warm-workers --nnodes 1:4 --rdzv-endpoint etcd:2379 -- ./warm_worker
 *
 * With `--in-place` (and WARM_WORKER_STEPS=N in its environment) it says it can re-form and
 * "trains" N steps of 100 ms, taking each new assignment at a step boundary in the same process.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "elastic_agent_assign.h"

int main(void)
{
    /* 1. what does not depend on the rank: load libraries, build the model, read the data */
    fprintf(stderr, "warm_worker %d: set up, %s\n", (int)getpid(),
            getenv("ELASTIC_ASSIGN_FD") ? "parked until the round commits" : "cold start");

    /* 2. the rank: blocks (no CPU) while parked; a no-op under a cold start */
    char err[256];
    const char *steps_var = getenv("WARM_WORKER_STEPS");
    int steps = steps_var ? atoi(steps_var) : 0;
    int r = steps > 0 ? ea_assign_wait_inplace(err, sizeof(err)) : ea_assign_wait(err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "warm_worker: no assignment: %s\n", err);
        return 1;
    }

    /* 3. the work, as any worker of that rank */
    printf("rank %s of %s (generation %s, master %s:%s)%s\n", getenv("RANK"),
           getenv("WORLD_SIZE"), getenv("ELASTIC_GENERATION"), getenv("MASTER_ADDR"),
           getenv("MASTER_PORT"), r == 1 ? ", from a warm spare" : "");
    for (int step = 0; step < steps; step++) {
        /* a safe point: the next round's assignment, if one came (--in-place) */
        int ra = ea_reassignment(0, err, sizeof(err));
        if (ra < 0) {
            fprintf(stderr, "warm_worker: re-assignment refused: %s\n", err);
            return 1;
        }
        if (ra == 1) /* tear down and re-form the process group here, then go on */
            printf("re-assigned in place: rank %s of %s (generation %s)\n", getenv("RANK"),
                   getenv("WORLD_SIZE"), getenv("ELASTIC_GENERATION"));
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}
