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

#include "ea_loop.h"
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

    /* the thread's own (its loop's pass): not under mu */
    int64_t pass_now;
    bool pass_tight, woke;
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

/* The thread's loop (ea_loop.h, one loop for this thread): a step takes what the agent's loop
 * queued (the ring's members, probes) and writes the fence; the ring's wake, held to one tick
 * while tight, is its deadline; the sources are the agent's wake-up, the ring's sockets, and,
 * after every wait, handing the ring's reports back. */
static void step_queued(void *ctx, int64_t now)
{
    struct live *l = ctx;
    pthread_mutex_lock(&l->mu);
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
    l->pass_tight = l->tight;
    pthread_mutex_unlock(&l->mu);
    l->pass_now = now;
    l->woke = false;
}

static int64_t wake_ring(void *ctx)
{
    const struct live *l = ctx;
    int64_t wake = ring_wake_ms(l->ring);
    if (l->pass_tight && (wake < 0 || wake > l->pass_now + l->tick))
        wake = l->pass_now + l->tick; /* keep the fence ahead */
    return wake;
}

static const struct ea_loop_step live_steps[] = {{"queued", step_queued, wake_ring, false}};

static size_t fds_wake(void *ctx, struct pollfd *fds, size_t max)
{
    (void)max;
    fds[0] = (struct pollfd){.fd = ((struct live *)ctx)->wake_fd, .events = POLLIN};
    return 1;
}

static void ready_wake(void *ctx, const struct pollfd *fds, size_t n, int64_t now)
{
    struct live *l = ctx;
    (void)n, (void)now;
    l->woke = true;
    if (fds[0].revents & POLLIN)
        drain(l->wake_fd);
}

static size_t fds_ring(void *ctx, struct pollfd *fds, size_t max)
{
    return ring_pollfds(((struct live *)ctx)->ring, fds, max);
}

static void ready_ring(void *ctx, const struct pollfd *fds, size_t n, int64_t now)
{
    struct live *l = ctx;
    bool any = l->woke;
    for (size_t i = 0; i < n && !any; i++)
        any = fds[i].revents != 0;
    ring_on_poll(l->ring, fds, any ? n : 0, now); /* every wait: the ring's own deadlines */
}

static void ready_reports(void *ctx, const struct pollfd *fds, size_t n, int64_t now)
{
    struct live *l = ctx;
    (void)fds, (void)n;
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

static const struct ea_loop_source live_sources[] = {
    {"wake", 1, fds_wake, ready_wake, false},
    {"ring", RING_POLL_MAX, fds_ring, ready_ring, true},
    {"reports", 0, NULL, ready_reports, true},
};

static bool stopped(void *ctx)
{
    struct live *l = ctx;
    pthread_mutex_lock(&l->mu);
    bool stop = l->stop;
    pthread_mutex_unlock(&l->mu);
    return stop;
}

static void *run(void *arg)
{
    struct live *l = arg;
    struct ea_loop *lp = ea_loop_create(NULL, stopped, l);
    int r = lp ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < sizeof(live_steps) / sizeof(live_steps[0]); i++)
        r = ea_loop_add_step(lp, &live_steps[i], l);
    for (size_t i = 0; r == 0 && i < sizeof(live_sources) / sizeof(live_sources[0]); i++)
        r = ea_loop_add_source(lp, &live_sources[i], l);
    while (r == 0 && ea_loop_run(lp) < 0 && !stopped(l))
        ; /* a failed wait (not EINTR) is passed over, as before: the next pass waits again */
    ea_loop_destroy(lp);
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
