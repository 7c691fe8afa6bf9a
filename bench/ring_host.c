// SPDX-License-Identifier: Apache-2.0
/* ring_host: the simulated nodes' ring sockets on one epoll thread per process (ring_host.h). */
#include "ring_host.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "ea_time.h"

struct queued {
    struct ring_host_ring *g;
    struct ring_report x;
};

/* The rings' sockets are in one epoll set, so a pass costs what is ready and due, not every
 * socket of every ring (625 rings a process at 10,000 nodes: a poll() of ~2,000 sockets 100 times
 * a second in each of 16 processes took both cores, and leases were lost). */
struct ring_host {
    pthread_mutex_t mu;
    pthread_t th;
    bool started, stop;
    int64_t pass_ms;
    int efd;                       /* reports wait for the loop */
    int kick;                      /* the loop changed a ring: the thread looks again */
    int ep;                        /* epoll: the kick and every ring's sockets */
    struct ring_host_ring **rings; /* NULL where a ring was closed or killed */
    size_t n, max;
    struct ring_host_ring **dirty; /* rings the loop changed since the thread last synced them */
    size_t n_dirty;
    struct ring_host_ring **owner; /* by fd: the ring that registered it */
    short *rev;                    /* by fd: what epoll reported in this pass */
    size_t fd_max;
    struct epoll_event *evs;
    size_t evmax;
    struct ring_host_ring **serve; /* this pass's rings with a ready socket or a deadline due */
    uint64_t pass;
    struct queued *q;
    size_t nq, qmax;
};

struct ring_host_ring {
    struct ring_host *h;
    size_t slot;                      /* in h->rings */
    struct pollfd reg[RING_POLL_MAX]; /* its sockets as registered with h->ep */
    size_t n_reg;
    int64_t wake;    /* ring_wake_ms() when last served or synced */
    uint64_t closed; /* ring_sockets_closed() at the last sync */
    uint64_t mark;   /* the pass it is served in */
    bool is_dirty;   /* in h->dirty */
    void *ctx;
    struct ring *ring;
};

int ring_host_create(size_t max_rings, int64_t pass_ms, struct ring_host **ret,
                     struct ea_error *err)
{
    struct ring_host *h = calloc(1, sizeof(*h));
    if (!h)
        return ea_errorf(err, -ENOMEM, "out of memory");
    h->max = max_rings ? max_rings : 1;
    h->pass_ms = pass_ms;
    h->qmax = 4096;
    struct rlimit rl;
    h->fd_max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
                        rl.rlim_cur < (1u << 20)
                    ? (size_t)rl.rlim_cur
                    : (1u << 20);
    h->evmax = 4096;
    h->rings = calloc(h->max, sizeof(*h->rings));
    h->dirty = calloc(h->max, sizeof(*h->dirty));
    h->serve = calloc(h->max, sizeof(*h->serve));
    h->owner = calloc(h->fd_max, sizeof(*h->owner));
    h->rev = calloc(h->fd_max, sizeof(*h->rev));
    h->evs = calloc(h->evmax, sizeof(*h->evs));
    h->q = calloc(h->qmax, sizeof(*h->q));
    h->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    h->kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    h->ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event kev = {.events = EPOLLIN, .data.fd = h->kick};
    int e = 0;
    if (h->efd < 0 || h->kick < 0 || h->ep < 0 ||
        epoll_ctl(h->ep, EPOLL_CTL_ADD, h->kick, &kev) < 0)
        e = -errno;
    else if (!h->rings || !h->dirty || !h->serve || !h->owner || !h->rev || !h->evs || !h->q)
        e = -ENOMEM;
    if (e) {
        if (h->efd >= 0)
            close(h->efd);
        if (h->kick >= 0)
            close(h->kick);
        if (h->ep >= 0)
            close(h->ep);
        free(h->rings), free(h->dirty), free(h->serve), free(h->owner), free(h->rev);
        free(h->evs), free(h->q), free(h);
        return ea_errorf(err, e, "ring host: %s", strerror(-e));
    }
    pthread_mutex_init(&h->mu, NULL);
    *ret = h;
    return 0;
}

/* The loop changed ring g (under the lock): the thread syncs its sockets; NULL: none (a stop). */
static void host_changed(struct ring_host *h, struct ring_host_ring *g)
{
    uint64_t one = 1;
    if (g && !g->is_dirty) {
        g->is_dirty = true;
        h->dirty[h->n_dirty++] = g;
    }
    if (write(h->kick, &one, sizeof(one)) < 0) {
        /* the counter is full: the thread is woken anyway */
    }
}

static const struct pollfd *reg_find(const struct pollfd *fds, size_t n, int fd)
{
    for (size_t i = 0; i < n; i++)
        if (fds[i].fd == fd)
            return &fds[i];
    return NULL;
}

/* Bring h->ep in line with ring g's sockets now, and note its next deadline. Under the lock. A
 * number the ring closed and opened again is a new socket (epoll forgot the old one when it was
 * closed): so once the ring has closed a socket since the last sync, every socket is MODified,
 * and ADDed when epoll does not know it; until then only the new ones and those whose events
 * changed (an epoll_ctl per socket per heartbeat took a fifth of the simulator's CPU). */
static void host_sync(struct ring_host *h, struct ring_host_ring *g)
{
    struct pollfd now[RING_POLL_MAX];
    size_t n = ring_pollfds(g->ring, now, RING_POLL_MAX);
    uint64_t closed = ring_sockets_closed(g->ring);
    bool same = closed == g->closed;
    g->closed = closed;
    for (size_t i = 0; i < g->n_reg; i++) {
        int fd = g->reg[i].fd;
        if (!reg_find(now, n, fd) && (size_t)fd < h->fd_max && h->owner[fd] == g) {
            epoll_ctl(h->ep, EPOLL_CTL_DEL, fd, NULL); /* ENOENT/EBADF: already closed */
            h->owner[fd] = NULL;
        }
    }
    for (size_t i = 0; i < n; i++) {
        int fd = now[i].fd;
        if ((size_t)fd >= h->fd_max)
            continue; /* not in a table: cannot happen under RLIMIT_NOFILE */
        const struct pollfd *was = same ? reg_find(g->reg, g->n_reg, fd) : NULL;
        if (was && was->events == now[i].events && h->owner[fd] == g)
            continue; /* the same socket, registered as it is */
        struct epoll_event ev = {.events = (uint32_t)now[i].events, .data.fd = fd};
        if (epoll_ctl(h->ep, EPOLL_CTL_MOD, fd, &ev) < 0 && errno == ENOENT)
            epoll_ctl(h->ep, EPOLL_CTL_ADD, fd, &ev);
        h->owner[fd] = g;
    }
    memcpy(g->reg, now, n * sizeof(*now));
    g->n_reg = n;
    g->wake = ring_wake_ms(g->ring);
}

/* Serve the rings in h->serve[0..n): their sockets' events (h->rev) and deadlines due; queue their
 * reports for the loop. Under the lock. */
static void host_serve(struct ring_host *h, size_t n, int64_t now)
{
    size_t before = h->nq;
    for (size_t i = 0; i < n; i++) {
        struct ring_host_ring *g = h->serve[i];
        struct pollfd fds[RING_POLL_MAX];
        for (size_t j = 0; j < g->n_reg; j++) {
            fds[j] = g->reg[j];
            fds[j].revents = h->rev[fds[j].fd];
        }
        ring_on_poll(g->ring, fds, g->n_reg, now);
        struct ring_report x;
        while (ring_take(g->ring, &x))
            if (h->nq < h->qmax)
                h->q[h->nq++] = (struct queued){.g = g, .x = x};
        host_sync(h, g);
    }
    if (h->nq > before) {
        uint64_t one = 1;
        if (write(h->efd, &one, sizeof(one)) < 0) {
            /* the counter is full: the loop is woken anyway */
        }
    }
}

static void serve_add(struct ring_host *h, struct ring_host_ring *g, size_t *n)
{
    if (g && g->mark != h->pass) {
        g->mark = h->pass;
        h->serve[(*n)++] = g;
    }
}

/* Sleep in epoll until a socket or a deadline needs the rings (idle rings, as while the nodes
 * join, cost nothing), then serve those; at most one pass every pass_ms (a byte or a deadline
 * waits at most that long: heartbeats are due every interval). */
static void *host_main(void *arg)
{
    struct ring_host *h = arg;
    for (;;) {
        pthread_mutex_lock(&h->mu);
        if (h->stop) {
            pthread_mutex_unlock(&h->mu);
            return NULL;
        }
        for (size_t i = 0; i < h->n_dirty; i++) {
            h->dirty[i]->is_dirty = false;
            host_sync(h, h->dirty[i]);
        }
        h->n_dirty = 0;
        int64_t wake = -1;
        for (size_t i = 0; i < h->n; i++) {
            const struct ring_host_ring *g = h->rings[i];
            if (g && g->wake >= 0 && (wake < 0 || g->wake < wake))
                wake = g->wake;
        }
        pthread_mutex_unlock(&h->mu);
        int64_t left = wake < 0 ? 1000 : wake - ea_now_ms();
        int ne = epoll_wait(h->ep, h->evs, (int)h->evmax,
                            left < 0      ? 0
                            : left > 1000 ? 1000
                                          : (int)left);
        pthread_mutex_lock(&h->mu);
        int64_t now = ea_now_ms();
        h->pass++;
        size_t ns = 0;
        for (int i = 0; i < ne; i++) {
            int fd = h->evs[i].data.fd;
            if (fd == h->kick) {
                uint64_t c;
                if (read(h->kick, &c, sizeof(c)) < 0) {
                    /* drained by an earlier read */
                }
                continue;
            }
            h->rev[fd] = (short)h->evs[i].events;
            serve_add(h, h->owner[fd], &ns);
        }
        for (size_t i = 0; i < h->n; i++) {
            struct ring_host_ring *g = h->rings[i];
            if (g && !g->is_dirty && g->wake >= 0 && g->wake <= now)
                serve_add(h, g, &ns);
        }
        host_serve(h, ns, now);
        for (int i = 0; i < ne; i++)
            if (h->evs[i].data.fd != h->kick)
                h->rev[h->evs[i].data.fd] = 0;
        pthread_mutex_unlock(&h->mu);
        struct timespec ts = {.tv_sec = h->pass_ms / 1000,
                              .tv_nsec = (h->pass_ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
    }
}

int ring_host_start(struct ring_host *h, struct ea_error *err)
{
    int e = pthread_create(&h->th, NULL, host_main, h);
    if (e)
        return ea_errorf(err, -e, "ring host thread: %s", strerror(e));
    h->started = true;
    return 0;
}

int ring_host_fd(const struct ring_host *h)
{
    return h->efd;
}

void ring_host_destroy(struct ring_host *h)
{
    if (!h)
        return;
    if (h->started) {
        pthread_mutex_lock(&h->mu);
        h->stop = true;
        host_changed(h, NULL);
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->th, NULL);
    }
    pthread_mutex_destroy(&h->mu);
    close(h->efd);
    close(h->kick);
    close(h->ep);
    free(h->rings), free(h->dirty), free(h->serve), free(h->owner), free(h->rev);
    free(h->evs), free(h->q), free(h);
}

void ring_host_reports(struct ring_host *h, size_t max,
                       void (*handle)(void *ctx, const struct ring_report *x))
{
    uint64_t c;
    if (read(h->efd, &c, sizeof(c)) < 0) {
        /* nothing signalled: the queue may still hold reports of an earlier pass */
    }
    pthread_mutex_lock(&h->mu);
    /* the first `max` rings in the queue, each with every report it has queued: a node's answers
     * (a coordinator's 128 probes) do not wait behind its process neighbours' reports one by one,
     * as they would not in separate agents */
    struct queued *q = h->nq ? malloc(h->nq * sizeof(*q)) : NULL;
    size_t n = 0, kept = 0, rings = 0;
    struct ring_host_ring *taken[64];
    if (max > sizeof(taken) / sizeof(taken[0]))
        max = sizeof(taken) / sizeof(taken[0]);
    for (size_t i = 0; q && i < h->nq; i++) {
        struct ring_host_ring *g = h->q[i].g;
        bool mine = false;
        for (size_t j = 0; j < rings && !mine; j++)
            mine = taken[j] == g;
        if (!mine && rings < max) {
            taken[rings++] = g;
            mine = true;
        }
        if (mine)
            q[n++] = h->q[i];
        else
            h->q[kept++] = h->q[i];
    }
    if (q)
        h->nq = kept;
    if (h->nq) { /* the rest: readable again */
        uint64_t one = 1;
        if (write(h->efd, &one, sizeof(one)) < 0) {
            /* the counter is already set: readable anyway */
        }
    }
    pthread_mutex_unlock(&h->mu);
    for (size_t i = 0; q && i < n; i++)
        handle(q[i].g->ctx, &q[i].x);
    free(q);
}

int ring_host_open(struct ring_host *h, const char *run_id, const char *node_id,
                   int64_t interval_ms, int misses, void *ctx, struct ring_host_ring **ret,
                   struct ea_error *err)
{
    if (h->n >= h->max)
        return ea_errorf(err, -ENOSPC, "ring host: %zu rings already", h->max);
    struct ring_host_ring *g = calloc(1, sizeof(*g));
    if (!g)
        return ea_errorf(err, -ENOMEM, "out of memory");
    struct ring_params p = {.run_id = run_id,
                            .node_id = node_id,
                            .bind_addr = "127.0.0.1",
                            .interval_ms = interval_ms,
                            .misses = misses};
    int r = ring_create(&p, &g->ring, err);
    if (r < 0) {
        free(g);
        return r;
    }
    g->h = h;
    g->ctx = ctx;
    pthread_mutex_lock(&h->mu);
    g->slot = h->n;
    g->wake = -1;
    h->rings[h->n++] = g;
    host_changed(h, g);
    pthread_mutex_unlock(&h->mu);
    *ret = g;
    return 0;
}

/* Out of the host (under its lock), and its queued reports dropped. */
static void host_remove(struct ring_host_ring *g)
{
    struct ring_host *h = g->h;
    h->rings[g->slot] = NULL;
    for (size_t i = 0; i < g->n_reg; i++) /* closed next: epoll forgets them then */
        if ((size_t)g->reg[i].fd < h->fd_max && h->owner[g->reg[i].fd] == g)
            h->owner[g->reg[i].fd] = NULL;
    if (g->is_dirty) {
        size_t kept = 0;
        for (size_t i = 0; i < h->n_dirty; i++)
            if (h->dirty[i] != g)
                h->dirty[kept++] = h->dirty[i];
        h->n_dirty = kept;
    }
    host_changed(h, NULL);
    size_t kept = 0;
    for (size_t i = 0; i < h->nq; i++)
        if (h->q[i].g != g)
            h->q[kept++] = h->q[i];
    h->nq = kept;
}

int ring_host_port(const struct ring_host_ring *g)
{
    return ring_port(g->ring);
}

void ring_host_close(struct ring_host_ring *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->h->mu);
    host_remove(g);
    ring_destroy(g->ring);
    pthread_mutex_unlock(&g->h->mu);
    free(g);
}

void ring_host_kill(struct ring_host_ring *g)
{
    if (!g)
        return;
    struct pollfd fds[RING_POLL_MAX];
    pthread_mutex_lock(&g->h->mu);
    host_remove(g);
    size_t n = ring_pollfds(g->ring, fds, RING_POLL_MAX); /* every socket it holds is polled */
    for (size_t i = 0; i < n; i++)
        close(fds[i].fd);
    pthread_mutex_unlock(&g->h->mu);
    /* the ring itself is left as it is (ring_destroy would say bye on closed descriptors, or on
     * whatever reuses their numbers): a few hundred bytes leaked per killed node */
    free(g);
}

/* The node's transport (node_transport.set): the ring of a round, under the host's lock. */
void ring_host_set(void *ctx, int64_t round, int members, const char *prev, bool await_prev,
                   const struct ring_peer *next, int64_t now)
{
    struct ring_host_ring *g = ctx;
    pthread_mutex_lock(&g->h->mu);
    ring_set(g->ring, round, members, prev, await_prev, next, now);
    host_changed(g->h, g);
    pthread_mutex_unlock(&g->h->mu);
}

/* node_transport.probe: one probe, under the host's lock. */
int ring_host_probe(void *ctx, uint64_t id, const struct ring_peer *peer, int64_t round,
                    int64_t timeout_ms, int64_t now)
{
    struct ring_host_ring *g = ctx;
    pthread_mutex_lock(&g->h->mu);
    int r = ring_probe(g->ring, id, peer, round, timeout_ms, now);
    host_changed(g->h, g);
    pthread_mutex_unlock(&g->h->mu);
    return r;
}
