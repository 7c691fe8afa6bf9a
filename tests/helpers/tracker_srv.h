// SPDX-License-Identifier: Apache-2.0
/*
 * tracker_srv: the built-in rabit tracker (agent/tracker/) served on a thread, for its tests: the
 * tracker's own poll loop until srv_join(), which then handles whatever is already queued on its
 * sockets (on loopback a peer's send() has reached our socket when it returns), so that the
 * counters include everything the clients sent before srv_join(). Failures are criterion
 * assertions.
 */
#ifndef EA_TESTS_TRACKER_SRV_H
#define EA_TESTS_TRACKER_SRV_H

#include <pthread.h>

#include "tracker.h"

struct srv {
    struct tracker *t;
    int stop[2];
    pthread_t th;
};

/* Create the tracker with `p` and serve it on a thread. */
void srv_start_params(struct srv *s, const struct tracker_params *p);
/* Stop the loop (the tracker stays, for its counters). */
void srv_join(struct srv *s);
void srv_destroy(struct srv *s);

#endif
