// SPDX-License-Identifier: Apache-2.0
/* tracker_srv: the tracker served on a thread for its tests (tracker_srv.h). */
#include "tracker_srv.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <unistd.h>

#include "ea_time.h"

static void *serve(void *arg)
{
    struct srv *s = arg;
    struct pollfd fds[1 + TRACKER_POLL_MAX];
    bool stopping = false;
    for (;;) {
        fds[0] = (struct pollfd){.fd = stopping ? -1 : s->stop[0], .events = POLLIN};
        size_t n = tracker_pollfds(s->t, fds + 1, TRACKER_POLL_MAX);
        int r = poll(fds, 1 + n, stopping ? 0 : ea_timeout_until(tracker_wake_ms(s->t)));
        if (r < 0 && errno != EINTR)
            break;
        if (stopping && r == 0)
            break;
        if (r > 0 && fds[0].revents)
            stopping = true;
        if (r >= 0)
            tracker_on_poll(s->t, fds + 1, n, ea_now_ms());
    }
    return NULL;
}

void srv_start_params(struct srv *s, const struct tracker_params *p)
{
    struct ea_error err = {0};
    cr_assert_eq(tracker_create(p, &s->t, &err), 0, "%s", err.msg);
    cr_assert_eq(pipe(s->stop), 0);
    cr_assert_eq(pthread_create(&s->th, NULL, serve, s), 0);
}

void srv_join(struct srv *s)
{
    cr_assert_eq(write(s->stop[1], "x", 1), 1);
    pthread_join(s->th, NULL);
    close(s->stop[0]);
    close(s->stop[1]);
}

void srv_destroy(struct srv *s)
{
    tracker_destroy(s->t);
    s->t = NULL;
}
