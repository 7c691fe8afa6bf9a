// SPDX-License-Identifier: Apache-2.0
/* sim_ring: a simulated node's liveness ring, as agent/agent_liveness.c runs it (sim_ring.h). */
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
#include "suspect.h"

#define CASES_MAX 16
#define UNSENT_MAX 4
#define PEER_RETRY_MS 500

enum case_state { CASE_FREE, CASE_QUEUED, CASE_PROBING, CASE_DONE };

struct sim_case {
    enum case_state state;
    struct rdzv_suspect_case c;
    uint64_t probe;
};

/* The coordinator's confirmations (allocated when a node first coordinates). */
struct sim_cases {
    struct sim_case k[CASES_MAX];
    int64_t round;
    uint64_t seen_changes;
    bool rescan;
};

struct queued {
    struct sim_ring *g;
    struct ring_report x;
};

/* The rings' sockets are in one epoll set, so a pass costs what is ready and due, not every
 * socket of every ring (625 rings a process at 10,000 nodes: a poll() of ~2,000 sockets 100 times
 * a second in each of 16 processes took both cores, and leases were lost). */
struct sim_ring_host {
    pthread_mutex_t mu;
    pthread_t th;
    bool started, stop;
    int64_t pass_ms;
    int efd;                 /* reports wait for the loop */
    int kick;                /* the loop changed a ring: the thread looks again */
    int ep;                  /* epoll: the kick and every ring's sockets */
    struct sim_ring **rings; /* NULL where a ring was closed or killed */
    size_t n, max;
    struct sim_ring **dirty; /* rings the loop changed since the thread last synced them */
    size_t n_dirty;
    struct sim_ring **owner; /* by fd: the ring that registered it */
    short *rev;              /* by fd: what epoll reported in this pass */
    size_t fd_max;
    struct epoll_event *evs;
    size_t evmax;
    struct sim_ring **serve; /* this pass's rings with a ready socket or a deadline due */
    uint64_t pass;
    struct queued *q;
    size_t nq, qmax;
};

struct sim_ring {
    struct sim_ring_host *h;
    size_t slot;                      /* in h->rings */
    struct pollfd reg[RING_POLL_MAX]; /* its sockets as registered with h->ep */
    size_t n_reg;
    int64_t wake;  /* ring_wake_ms() when last served or synced */
    uint64_t mark; /* the pass it is served in */
    bool is_dirty; /* in h->dirty */
    void *ctx;
    struct ring *ring;
    char node_id[RDZV_ID_MAX];
    int64_t probe_ms;
    bool await_prev; /* suspect a predecessor that never links (the agent does) */
    int64_t round;
    char next[RDZV_ID_MAX], prev[RDZV_ID_MAX];
    int64_t peer_retry_ms;
    char peer_id[RDZV_ID_MAX]; /* the successor's record as last read (agent_liveness.c) */
    int64_t peer_slot;
    struct ring_peer peer_rp;
    struct rdzv_suspicion unsent[UNSENT_MAX];
    size_t n_unsent;
    struct sim_cases *cases;
    uint64_t probe_ids;
    struct sim_ring_stats st;
    /* a suspicion of the coordinator this node confirms (its third member, or the watcher in a
     * round of two), as agent_liveness.c */
    bool coord_probing, coord_from_key, coord_todo;
    uint64_t coord_probe;
    int64_t coord_lease, coord_seen_round, coord_seen_rev;
    struct rdzv_coord_suspicion coord_x;
};

int sim_ring_host_create(size_t max_rings, int64_t pass_ms, struct sim_ring_host **ret,
                         struct ea_error *err)
{
    struct sim_ring_host *h = calloc(1, sizeof(*h));
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
static void host_changed(struct sim_ring_host *h, struct sim_ring *g)
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
 * closed): so every socket is MODified, and ADDed when epoll does not know it. */
static void host_sync(struct sim_ring_host *h, struct sim_ring *g)
{
    struct pollfd now[RING_POLL_MAX];
    size_t n = ring_pollfds(g->ring, now, RING_POLL_MAX);
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
static void host_serve(struct sim_ring_host *h, size_t n, int64_t now)
{
    size_t before = h->nq;
    for (size_t i = 0; i < n; i++) {
        struct sim_ring *g = h->serve[i];
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

static void serve_add(struct sim_ring_host *h, struct sim_ring *g, size_t *n)
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
    struct sim_ring_host *h = arg;
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
            const struct sim_ring *g = h->rings[i];
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
            struct sim_ring *g = h->rings[i];
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

int sim_ring_host_start(struct sim_ring_host *h, struct ea_error *err)
{
    int e = pthread_create(&h->th, NULL, host_main, h);
    if (e)
        return ea_errorf(err, -e, "ring host thread: %s", strerror(e));
    h->started = true;
    return 0;
}

int sim_ring_host_fd(const struct sim_ring_host *h)
{
    return h->efd;
}

void sim_ring_host_destroy(struct sim_ring_host *h)
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

void sim_ring_host_reports(struct sim_ring_host *h, void (*handle)(void *ctx, struct sim_ring *g,
                                                                   const struct ring_report *x))
{
    uint64_t c;
    if (read(h->efd, &c, sizeof(c)) < 0) {
        /* nothing signalled: the queue may still hold reports of an earlier pass */
    }
    pthread_mutex_lock(&h->mu);
    size_t n = h->nq;
    struct queued *q = n ? malloc(n * sizeof(*q)) : NULL;
    if (q)
        memcpy(q, h->q, n * sizeof(*q));
    h->nq = q ? 0 : h->nq;
    pthread_mutex_unlock(&h->mu);
    for (size_t i = 0; q && i < n; i++)
        handle(q[i].g->ctx, q[i].g, &q[i].x);
    free(q);
}

int sim_ring_open(struct sim_ring_host *h, const char *run_id, const char *node_id,
                  int64_t interval_ms, int misses, bool await_prev, void *ctx,
                  struct sim_ring **ret, struct ea_error *err)
{
    if (h->n >= h->max)
        return ea_errorf(err, -ENOSPC, "ring host: %zu rings already", h->max);
    struct sim_ring *g = calloc(1, sizeof(*g));
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
    snprintf(g->node_id, sizeof(g->node_id), "%s", node_id);
    g->probe_ms = misses * interval_ms;
    g->await_prev = await_prev;
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
static void host_remove(struct sim_ring *g)
{
    struct sim_ring_host *h = g->h;
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

int sim_ring_port(const struct sim_ring *g)
{
    return ring_port(g->ring);
}

void sim_ring_close(struct sim_ring *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->h->mu);
    host_remove(g);
    ring_destroy(g->ring);
    pthread_mutex_unlock(&g->h->mu);
    free(g->cases);
    free(g);
}

void sim_ring_kill(struct sim_ring *g)
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
    free(g->cases);
    free(g);
}

static void check_coord(struct sim_ring *g, struct rdzv_session *s);

void sim_ring_follow(struct sim_ring *g, struct rdzv_session *s, int64_t now)
{
    check_coord(g, s);
    const struct rdzv_state *st = rdzv_current(s, NULL);
    const struct rdzv_member *m = rdzv_self_member(s);
    int64_t round = st && st->status == RDZV_RUNNING && m ? st->round : 0;
    const char *next = round && m->next[0] && strcmp(m->next, g->node_id) != 0 ? m->next : "";
    const char *prev = round && m->prev[0] && strcmp(m->prev, g->node_id) != 0 ? m->prev : "";
    if (round == g->round && strcmp(next, g->next) == 0 && strcmp(prev, g->prev) == 0)
        return;
    if (next[0] && now < g->peer_retry_ms)
        return;
    struct ring_peer rp = {0};
    bool have = false;
    if (next[0] && m->next_slot > 0 && m->next_slot == g->peer_slot &&
        strcmp(next, g->peer_id) == 0) { /* the incarnation of the last read: its record */
        rp = g->peer_rp;
        have = true;
    } else if (next[0]) { /* the one node record a node reads per round: its successor's */
        struct rdzv_ring_peer p;
        struct ea_error err = {0};
        int r = rdzv_ring_peer(s, next, &p, &err);
        if (r == 0) {
            snprintf(rp.node_id, sizeof(rp.node_id), "%s", p.node_id);
            snprintf(rp.addr, sizeof(rp.addr), "%s", p.addr);
            rp.port = p.port;
            have = true;
            snprintf(g->peer_id, sizeof(g->peer_id), "%s", next);
            g->peer_slot = m->next_slot;
            g->peer_rp = rp;
        } else if (r != KV_ENOTFOUND && r != -ENOPROTOOPT) {
            g->peer_retry_ms = now + PEER_RETRY_MS;
            return;
        }
    }
    pthread_mutex_lock(&g->h->mu);
    ring_set(g->ring, round, round ? st->group_world_size : 0, prev, g->await_prev,
             have ? &rp : NULL, now);
    host_changed(g->h, g);
    pthread_mutex_unlock(&g->h->mu);
    g->round = round;
    snprintf(g->next, sizeof(g->next), "%s", next);
    snprintf(g->prev, sizeof(g->prev), "%s", prev);
}

static void flush_unsent(struct sim_ring *g, struct rdzv_session *s)
{
    size_t kept = 0;
    for (size_t i = 0; i < g->n_unsent; i++) {
        struct ea_error err = {0};
        if (rdzv_suspect(s, &g->unsent[i], &err) < 0 && g->unsent[i].round == g->round)
            g->unsent[kept++] = g->unsent[i];
    }
    g->n_unsent = kept;
}

/* Probe the coordinator a suspicion names, at its own node record, iff `coord` still names it. */
static void confirm_coord(struct sim_ring *g, struct rdzv_session *s,
                          const struct rdzv_coord_suspicion *x, bool from_key)
{
    char holder[RDZV_ID_MAX];
    int64_t lease = 0;
    struct rdzv_ring_peer p;
    if (g->coord_probing || !rdzv_coord_holder(s, holder, sizeof(holder), &lease) ||
        strcmp(holder, x->sus.node_id) != 0 || rdzv_ring_peer(s, holder, &p, NULL) < 0 ||
        p.lease != lease)
        return;
    struct ring_peer rp = {0};
    snprintf(rp.node_id, sizeof(rp.node_id), "%s", p.node_id);
    snprintf(rp.addr, sizeof(rp.addr), "%s", p.addr);
    rp.port = p.port;
    uint64_t id = ++g->probe_ids;
    pthread_mutex_lock(&g->h->mu);
    int r = ring_probe(g->ring, id, &rp, x->sus.round, g->probe_ms, ea_now_ms());
    host_changed(g->h, g);
    pthread_mutex_unlock(&g->h->mu);
    if (r < 0)
        return;
    g->coord_probing = true;
    g->coord_from_key = from_key;
    g->coord_probe = id;
    g->coord_lease = lease;
    g->coord_x = *x;
}

/* A watcher's suspicion of the coordinator: rounds/<r>/coord_suspect for a third member, or in
 * a round of two its own probe. */
static void suspect_coord(struct sim_ring *g, struct rdzv_session *s,
                          const struct rdzv_suspicion *x, bool outbound)
{
    const struct rdzv_state *st = rdzv_current(s, NULL);
    const struct rdzv_member *m = rdzv_self_member(s);
    int n = st ? st->group_world_size : 0;
    if (!m || n < 2)
        return;
    struct rdzv_coord_suspicion cx = {
        .sus = *x, .by_rank = m->group_rank, .coord_rank = outbound ? m->next_rank : m->prev_rank};
    if (rdzv_coord_confirmer(n, cx.coord_rank, cx.by_rank) < 0) {
        confirm_coord(g, s, &cx, false);
        return;
    }
    g->coord_x = cx;
    g->coord_todo = rdzv_coord_suspect(s, &cx, NULL) < 0;
}

/* Another member suspects the coordinator: confirm it when this node is the one to. */
static void check_coord(struct sim_ring *g, struct rdzv_session *s)
{
    if (g->coord_todo)
        g->coord_todo = rdzv_coord_suspect(s, &g->coord_x, NULL) < 0;
    struct rdzv_coord_suspicion cx;
    if (rdzv_coord_suspicion(s, &cx) <= 0 ||
        (cx.sus.round == g->coord_seen_round && cx.key_rev == g->coord_seen_rev))
        return;
    g->coord_seen_round = cx.sus.round;
    g->coord_seen_rev = cx.key_rev;
    const struct rdzv_state *st = rdzv_current(s, NULL);
    const struct rdzv_member *m = rdzv_self_member(s);
    if (st && m && !rdzv_is_coordinator(s) &&
        rdzv_coord_confirmer(st->group_world_size, cx.coord_rank, cx.by_rank) == m->group_rank)
        confirm_coord(g, s, &cx, true);
}

static void on_suspect(struct sim_ring *g, struct rdzv_session *s, const struct ring_report *x)
{
    if (x->round != g->round || !x->round)
        return;
    g->st.suspicions++;
    int64_t now = ea_now_ms(), wall = ea_wall_ms();
    struct rdzv_suspicion sus = {.round = x->round,
                                 .fault_ms = x->heard_ms >= 0 ? wall - (now - x->heard_ms) : -1,
                                 .detected_ms = wall};
    snprintf(sus.node_id, sizeof(sus.node_id), "%s", x->node_id);
    snprintf(sus.by, sizeof(sus.by), "%s", g->node_id);
    snprintf(sus.cause, sizeof(sus.cause), "%s", x->cause);
    char holder[RDZV_ID_MAX];
    int64_t lease = 0;
    if (!rdzv_is_coordinator(s) && rdzv_coord_holder(s, holder, sizeof(holder), &lease) &&
        strcmp(holder, x->node_id) == 0) {
        suspect_coord(g, s, &sus, x->outbound);
        return;
    }
    const struct rdzv_state *st = rdzv_current(s, NULL);
    if (rdzv_is_coordinator(s) && st && st->group_world_size >= 3)
        return; /* the suspect's other neighbour reports it: a second vantage point */
    if (g->n_unsent < UNSENT_MAX)
        g->unsent[g->n_unsent++] = sus;
    flush_unsent(g, s);
}

/* rounds/<r>/detect, as the agent writes it (every node receives it: counted in its bytes). */
static void publish_detect(struct rdzv_session *s, const struct rdzv_suspicion *x)
{
    char v[384];
    snprintf(v, sizeof(v),
             "{\"fault_ms\":%lld,\"detected_ms\":%lld,\"cause\":\"node_lost\",\"node\":\"%s\","
             "\"rank\":-1}",
             (long long)(x->fault_ms > 0 ? x->fault_ms : x->detected_ms), (long long)x->detected_ms,
             x->node_id);
    rdzv_publish_round_key(s, x->round, "detect", v, NULL);
}

static void on_probe(struct sim_ring *g, struct rdzv_session *s, const struct ring_report *x)
{
    if (g->coord_probing && x->probe_id == g->coord_probe) {
        g->coord_probing = false;
        if (x->local) /* not probed: nothing left this node (as the agent: no eviction) */
            return;
        if (x->alive) {
            g->st.false_alarms++;
            if (g->coord_from_key)
                rdzv_coord_suspect_clear(s, &g->coord_x, NULL);
            return;
        }
        publish_detect(s, &g->coord_x.sus);
        if (rdzv_evict_coord(s, g->coord_x.sus.node_id, g->coord_lease, NULL) > 0)
            g->st.evictions++;
        return;
    }
    struct sim_cases *cs = g->cases;
    for (size_t i = 0; cs && i < CASES_MAX; i++) {
        struct sim_case *k = &cs->k[i];
        if (k->state != CASE_PROBING || k->probe != x->probe_id)
            continue;
        k->state = CASE_DONE;
        if (cs->round != x->round || !rdzv_is_coordinator(s) || x->local)
            return;
        struct ea_error err = {0};
        if (x->alive) {
            g->st.false_alarms++;
            rdzv_suspect_clear(s, &k->c, &err);
            return;
        }
        publish_detect(s, &k->c.sus);
        if (rdzv_evict(s, &k->c, &err) > 0)
            g->st.evictions++;
        else if (err.msg[0])
            fprintf(stderr, "rdzv-sim: %s: revoking the lease of '%s': %s\n", g->node_id,
                    k->c.sus.node_id, err.msg);
        return;
    }
}

static struct sim_case *case_for(struct sim_cases *cs, const struct rdzv_suspect_case *c)
{
    struct sim_case *free_slot = NULL;
    for (size_t i = 0; i < CASES_MAX; i++) {
        struct sim_case *k = &cs->k[i];
        if (k->state == CASE_FREE) {
            if (!free_slot)
                free_slot = k;
        } else if (strcmp(k->c.sus.node_id, c->sus.node_id) == 0 && k->c.key_rev == c->key_rev) {
            return NULL;
        }
    }
    return free_slot;
}

void sim_ring_confirm(struct sim_ring *g, struct rdzv_session *s, int64_t now)
{
    if (!rdzv_is_coordinator(s))
        return;
    if (!g->cases && !(g->cases = calloc(1, sizeof(*g->cases))))
        return;
    struct sim_cases *cs = g->cases;
    const struct rdzv_state *st = rdzv_current(s, NULL);
    int64_t round = st && st->status == RDZV_RUNNING ? st->round : 0;
    if (round != cs->round) {
        memset(cs, 0, sizeof(*cs));
        cs->round = round;
        cs->rescan = true;
    }
    uint64_t changes = rdzv_changes(s);
    if (!round || (changes == cs->seen_changes && !cs->rescan))
        return;
    cs->seen_changes = changes;
    cs->rescan = false;
    struct rdzv_suspect_case list[CASES_MAX];
    size_t n = 0;
    struct ea_error err = {0};
    if (rdzv_suspects(s, list, CASES_MAX, &n, &err) < 0)
        cs->rescan = true;
    char warning[EA_ERROR_MSG_MAX];
    while (rdzv_take_warning(s, warning, sizeof(warning)))
        fprintf(stderr, "rdzv-sim: %s: %s\n", g->node_id, warning);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(list[i].sus.by, g->node_id) == 0 && st->group_world_size >= 3)
            continue;
        struct sim_case *k = case_for(cs, &list[i]);
        if (k) {
            k->state = CASE_QUEUED;
            k->c = list[i];
        }
    }
    for (size_t i = 0; i < CASES_MAX; i++) {
        struct sim_case *k = &cs->k[i];
        if (k->state != CASE_QUEUED)
            continue;
        struct ring_peer rp = {0};
        snprintf(rp.node_id, sizeof(rp.node_id), "%s", k->c.peer.node_id);
        snprintf(rp.addr, sizeof(rp.addr), "%s", k->c.peer.addr);
        rp.port = k->c.peer.port;
        uint64_t id = ++g->probe_ids;
        pthread_mutex_lock(&g->h->mu);
        int r = ring_probe(g->ring, id, &rp, round, g->probe_ms, now);
        host_changed(g->h, g);
        pthread_mutex_unlock(&g->h->mu);
        if (r < 0) {
            cs->rescan = true;
            break;
        }
        k->probe = id;
        k->state = CASE_PROBING;
    }
}

void sim_ring_report(struct sim_ring *g, struct rdzv_session *s, const struct ring_report *x)
{
    if (x->kind == RING_REPORT_SUSPECT)
        on_suspect(g, s, x);
    else
        on_probe(g, s, x);
    if (g->n_unsent)
        flush_unsent(g, s);
}

void sim_ring_stats_get(const struct sim_ring *g, struct sim_ring_stats *ret)
{
    *ret = g->st;
}
