// SPDX-License-Identifier: Apache-2.0
/*
 * tracker-serve: the agent's built-in rabit tracker (agent/tracker/) on its own, for
 * bench/tracker_bench.sh: `tracker-serve WORLD [ADDR]` listens on a free port of ADDR (default
 * 127.0.0.1), prints the port on stdout, serves one round of WORLD workers in a poll loop as the
 * agent does, and exits 0 once every rank said shutdown.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#include "ea_time.h"
#include "log.h"
#include "tracker.h"

static struct pollfd fds[TRACKER_POLL_MAX];

int main(int argc, char **argv)
{
    if (argc < 2 || atoi(argv[1]) < 1) {
        fprintf(stderr, "usage: tracker-serve WORLD [ADDR]\n");
        return 2;
    }
    log_init("warn", "tracker-serve");
    struct tracker_params p = {
        .addr = argc > 2 ? argv[2] : "127.0.0.1", .world_size = atoi(argv[1]), .round = 1};
    struct tracker *t;
    struct ea_error err = {0};
    if (tracker_create(&p, &t, &err) < 0) {
        fprintf(stderr, "tracker-serve: %s\n", err.msg);
        return 1;
    }
    printf("%d\n", tracker_port(t));
    fflush(stdout);
    while (tracker_stats(t)->shutdown < p.world_size) {
        size_t n = tracker_pollfds(t, fds, TRACKER_POLL_MAX);
        int r = poll(fds, n, ea_timeout_until(tracker_wake_ms(t)));
        if (r < 0 && errno != EINTR)
            break;
        if (r >= 0)
            tracker_on_poll(t, fds, n, ea_now_ms());
    }
    tracker_destroy(t);
    return 0;
}
