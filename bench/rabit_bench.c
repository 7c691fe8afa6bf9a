// SPDX-License-Identifier: Apache-2.0
/*
 * rabit-bench: N simulated rabit workers (tests/helpers/rabit_sim.c, XGBoost 1.7's side of the
 * protocol) against a tracker already listening at HOST:PORT, all started at once; prints the
 * milliseconds from the start (the tracker is up) until every worker has its rank and all its
 * links, then says shutdown for every rank. For bench/tracker_bench.sh; exit 1 on a failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rabit_sim.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: rabit-bench HOST PORT WORKERS\n");
        return 2;
    }
    int port = atoi(argv[2]), n = atoi(argv[3]);
    struct rsim_result *res = calloc((size_t)n, sizeof(*res));
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t t0 = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    int r = rsim_run(argv[1], port, n, n, res);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t t1 = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    for (int i = 0; i < n && r == 0; i++)
        if (res[i].rank >= 0)
            rsim_shutdown(argv[1], port, res[i].rank);
    if (r < 0) {
        for (int i = 0; i < n; i++)
            if (res[i].err)
                fprintf(stderr, "rabit-bench: worker %d: %s\n", i, res[i].msg);
        free(res);
        return 1;
    }
    printf("%.2f\n", (double)(t1 - t0) / 1000.0); /* all threads joined: every link is up */
    free(res);
    return 0;
}
