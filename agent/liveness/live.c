// SPDX-License-Identifier: Apache-2.0
/* live: the ring's thread, its queues to and from the agent's loop, and the tight fence. */
#include "live.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "ea_time.h"

struct queued_probe {
    uint64_t id;
    struct ring_peer peer;
    int64_t round, timeout_ms;
};

struct live {
    struct ring *ring; /* the thread's own once started */
    pthread_t thread;
    bool started;
    int port;
    int wake_fd;   /* eventfd: the loop -> the thread */
    int report_fd; /* eventfd: the thread -> the loop */
    int64_t tick;  /* the thread's longest sleep while tight: the interval */

    pthread_mutex_t mu; /* everything below */
    bool stop;
    bool set_pending, set_ever, set_await;
    int64_t set_round;
    int set_members;
    char set_prev[RING_NAME_MAX + 1];
    struct ring_peer set_next;
    bool set_has_next;
    struct queued_probe probes[RING_PROBES_MAX];
    size_t n_probes;
    int in_flight; /* probes handed to the ring, not reported yet */
    struct ring_report reports[RING_REPORTS_MAX];
    size_t n_reports;
    struct ring_links links;

    int64_t fence_ms, lease_until, written;
    bool tight, latched;
    void (*fence)(void *ctx, int64_t valid_until_ms);
    void *fence_ctx;
};

static void poke(int fd)
{
    uint64_t one = 1;
    ssize_t w = write(fd, &one, sizeof(one));
    (void)w; /* EAGAIN: the counter is already set */
}

static void drain(int fd)
{
    uint64_t v;
    ssize_t r = read(fd, &v, sizeof(v));
    (void)r;
}

/* With l->mu held: the guards' deadline for now (see live.h), written when it changed. */
static void fence_locked(struct live *l, int64_t now)
{
    int64_t f;
    if (!l->tight) {
        l->latched = false;
        f = l->lease_until;
    } else if (l->latched || (l->written > 0 && now >= l->written)) {
        l->latched = true; /* past it: the guards may be stopping the workers; keep it so */
        f = l->written;
    } else {
        f = now + l->fence_ms;
        if (l->lease_until > 0 && l->lease_until < f)
            f = l->lease_until;
    }
    if (f != l->written) {
        l->written = f;
        if (l->fence)
            l->fence(l->fence_ctx, f);
    }
}

static void *run(void *arg)
{
    struct live *l = arg;
    struct pollfd fds[1 + RING_POLL_MAX];
    for (;;) {
        int64_t now = ea_now_ms();
        pthread_mutex_lock(&l->mu);
        if (l->stop) {
            pthread_mutex_unlock(&l->mu);
            break;
        }
        if (l->set_pending) {
            ring_set(l->ring, l->set_round, l->set_members, l->set_prev, l->set_await,
                     l->set_has_next ? &l->set_next : NULL, now);
            l->set_pending = false;
        }
        for (size_t i = 0; i < l->n_probes; i++) {
            struct queued_probe *q = &l->probes[i];
            if (ring_probe(l->ring, q->id, &q->peer, q->round, q->timeout_ms, now) == 0)
                l->in_flight++;
        }
        l->n_probes = 0;
        fence_locked(l, now);
        bool tight = l->tight;
        pthread_mutex_unlock(&l->mu);

        fds[0] = (struct pollfd){.fd = l->wake_fd, .events = POLLIN};
        size_t n = ring_pollfds(l->ring, fds + 1, RING_POLL_MAX);
        int64_t wake = ring_wake_ms(l->ring);
        if (tight && (wake < 0 || wake > now + l->tick))
            wake = now + l->tick; /* keep the fence ahead */
        int rc = poll(fds, n + 1, ea_timeout_until(wake));
        now = ea_now_ms();
        if (rc > 0 && (fds[0].revents & POLLIN))
            drain(l->wake_fd);
        ring_on_poll(l->ring, fds + 1, rc > 0 ? n : 0, now);

        pthread_mutex_lock(&l->mu);
        bool any = false;
        struct ring_report x;
        while (ring_take(l->ring, &x)) {
            if (x.kind == RING_REPORT_PROBE && l->in_flight > 0)
                l->in_flight--;
            if (l->n_reports == RING_REPORTS_MAX) {
                memmove(l->reports, l->reports + 1, (RING_REPORTS_MAX - 1) * sizeof(x));
                l->n_reports--;
            }
            l->reports[l->n_reports++] = x;
            any = true;
        }
        ring_get_links(l->ring, &l->links);
        fence_locked(l, now);
        pthread_mutex_unlock(&l->mu);
        if (any)
            poke(l->report_fd);
    }
    return NULL;
}

int live_create(const struct live_params *p, struct live **ret, struct ea_error *err)
{
    struct live *l = calloc(1, sizeof(*l));
    if (!l)
        return ea_errorf(err, -ENOMEM, "out of memory");
    l->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    l->report_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pthread_mutex_init(&l->mu, NULL);
    l->fence_ms = p->fence_ms;
    l->fence = p->fence;
    l->fence_ctx = p->fence_ctx;
    l->tick = p->ring.interval_ms > 0 ? p->ring.interval_ms : 200;
    int r = l->wake_fd < 0 || l->report_fd < 0
                ? ea_errorf(err, -errno, "liveness ring: eventfd: %s", strerror(errno))
                : ring_create(&p->ring, &l->ring, err);
    if (r == 0) {
        l->port = ring_port(l->ring);
        ring_get_links(l->ring, &l->links);
        r = -pthread_create(&l->thread, NULL, run, l);
        if (r < 0)
            ea_errorf(err, r, "liveness ring: cannot start its thread: %s", strerror(-r));
        l->started = r == 0;
    }
    if (r < 0) {
        live_destroy(l);
        return r;
    }
    *ret = l;
    return 0;
}

void live_destroy(struct live *l)
{
    if (!l)
        return;
    if (l->started) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_mutex_unlock(&l->mu);
        poke(l->wake_fd);
        pthread_join(l->thread, NULL);
    }
    ring_destroy(l->ring);
    if (l->wake_fd >= 0)
        close(l->wake_fd);
    if (l->report_fd >= 0)
        close(l->report_fd);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

int live_port(const struct live *l)
{
    return l->port;
}

int live_fd(const struct live *l)
{
    return l->report_fd;
}

void live_set(struct live *l, int64_t round, int members, const char *prev, bool await_prev,
              const struct ring_peer *next)
{
    pthread_mutex_lock(&l->mu);
    prev = prev ? prev : "";
    bool same = l->set_ever && l->set_round == round && l->set_members == members &&
                strcmp(l->set_prev, prev) == 0 && l->set_await == await_prev &&
                l->set_has_next == (next != NULL) &&
                (!next || memcmp(&l->set_next, next, sizeof(*next)) == 0);
    if (!same) {
        l->set_ever = true;
        l->set_await = await_prev;
        l->set_round = round;
        l->set_members = members;
        snprintf(l->set_prev, sizeof(l->set_prev), "%s", prev);
        l->set_has_next = next != NULL;
        memset(&l->set_next, 0, sizeof(l->set_next));
        if (next)
            l->set_next = *next;
        l->set_pending = true;
    }
    pthread_mutex_unlock(&l->mu);
    if (!same)
        poke(l->wake_fd);
}

int live_probe(struct live *l, uint64_t id, const struct ring_peer *peer, int64_t round,
               int64_t timeout_ms)
{
    pthread_mutex_lock(&l->mu);
    int r = -EBUSY;
    if (l->n_probes + (size_t)l->in_flight < RING_PROBES_MAX) {
        l->probes[l->n_probes++] = (struct queued_probe){
            .id = id, .peer = *peer, .round = round, .timeout_ms = timeout_ms};
        r = 0;
    }
    pthread_mutex_unlock(&l->mu);
    if (r == 0)
        poke(l->wake_fd);
    return r;
}

bool live_take(struct live *l, struct ring_report *ret)
{
    drain(l->report_fd); /* first: a report added after this pokes again */
    pthread_mutex_lock(&l->mu);
    bool any = l->n_reports > 0;
    if (any) {
        *ret = l->reports[0];
        memmove(l->reports, l->reports + 1, (l->n_reports - 1) * sizeof(*ret));
        l->n_reports--;
    }
    pthread_mutex_unlock(&l->mu);
    return any;
}

void live_links(const struct live *l, struct ring_links *ret)
{
    struct live *m = (struct live *)l; /* the lock only */
    pthread_mutex_lock(&m->mu);
    *ret = l->links;
    pthread_mutex_unlock(&m->mu);
}

int64_t live_fence(struct live *l, int64_t lease_until, bool tight, bool clear_lapse)
{
    pthread_mutex_lock(&l->mu);
    bool was = l->tight;
    l->lease_until = lease_until;
    l->tight = tight;
    if (clear_lapse || (tight && !was)) {
        l->latched = false;
        l->written = 0; /* not a lapse of its own: a fresh start */
    }
    fence_locked(l, ea_now_ms());
    int64_t f = l->written;
    pthread_mutex_unlock(&l->mu);
    if (tight && !was)
        poke(l->wake_fd); /* the thread's sleep is bounded by the tick from now on */
    return f;
}

int64_t live_fence_held(const struct live *l)
{
    struct live *m = (struct live *)l; /* the lock only */
    pthread_mutex_lock(&m->mu);
    int64_t f = l->written;
    pthread_mutex_unlock(&m->mu);
    return f;
}
