// SPDX-License-Identifier: Apache-2.0
/*
 * fleet_host: many simulated nodes in one process (fleet_host.h). The loop is rdzv-sim's
 * (bench/rdzv_sim.c): the store's events first, applied to every session, then each session's
 * step — the product's node unit (agent/node/node.h): the lease, the rejoin after a loss with the
 * agent's jittered back-off, the session's tick; a node whose renewal is over half its TTL old is
 * renewed between the sessions of a long batch of events. What differs: every change of a node's
 * view is reported, a lost lease is reported and the node joins again, and nodes are killed by
 * id.
 */
#include "fleet_host.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ea_time.h"
#include "kv.h"
#include "node.h"
#include "session.h"

struct host;

struct fleet_node {
    int id;
    struct host *h;
    struct node nd;          /* the product's node unit: the lease, the rejoin, store trouble */
    struct rdzv_session *s;  /* nd.rdzv */
    struct ff_rec last;      /* the view last reported */
    int64_t published_round; /* as group rank 0: the last round it published the master of */
    bool joined, dead;
};

struct host {
    const struct ff_host_opts *o;
    struct fleet_node *nodes;
    int count, out;
    int complaints; /* store errors printed (a few per host, then only counted) */
    uint64_t errors;
};

static void send_rec(struct host *h, const struct ff_rec *r)
{
    if (write(h->out, r, sizeof(*r)) != (ssize_t)sizeof(*r))
        _exit(3);
}

static void send_simple(struct host *h, int type, int node, int members)
{
    struct ff_rec r = {
        .type = type, .node = node, .world = members, .rank = -1, .t_ms = ea_now_ms()};
    send_rec(h, &r);
}

static void complain(struct host *h, int node, const char *what, const struct ea_error *err)
{
    h->errors++;
    if (h->complaints++ < 2)
        fprintf(stderr, "fleet-faults: node %d: %s: %s%s\n", node, what, err->msg,
                h->complaints == 2 ? " (further store errors of this process not shown)" : "");
}

/* Report the node's view if it changed; as group rank 0, publish the round's master (what an
 * agent does before its workers start: it keeps the store's load realistic). */
static void observe(struct host *h, struct fleet_node *n)
{
    if (n->dead || !n->joined)
        return;
    int64_t gen = 0;
    const struct rdzv_state *st = rdzv_current(n->s, &gen);
    int idx = rdzv_my_index(n->s);
    bool running = st && st->status == RDZV_RUNNING && idx >= 0;
    struct ff_rec r = {.type = FF_VIEW,
                       .node = n->id,
                       .gen = st ? gen : 0,
                       .round = running ? st->round : 0,
                       .rank = running ? idx : -1,
                       .world = running ? st->group_world_size : 0,
                       .coord = rdzv_is_coordinator(n->s)};
    if (r.gen != n->last.gen || r.round != n->last.round || r.rank != n->last.rank ||
        r.world != n->last.world || r.coord != n->last.coord) {
        struct rdzv_stats s;
        rdzv_stats_get(n->s, &s);
        r.claims = s.claims;
        r.requests = s.requests;
        r.resyncs = rdzv_resync_count(n->s);
        r.t_ms = ea_now_ms();
        n->last = r;
        send_rec(h, &r);
    }
    if (running && idx == 0 && st->round > n->published_round) {
        struct ea_error err = {0};
        if (rdzv_publish_master(n->s, st->round, "127.0.0.1:29500", &err) < 0)
            complain(h, n->id, "master", &err); /* tried again at the next turn */
        else
            n->published_round = st->round;
    }
}

/* The node unit's step (node.h): the lease renewed when due, a lost one reported and the node
 * joined again (with the agent's jittered back-off on store errors), the session's tick. */
static void step(struct host *h, struct fleet_node *n, int64_t now)
{
    (void)h;
    struct node_step_in in = {.may_rejoin = true}; /* no workers to stop first */
    node_step(&n->nd, &in, now);
}

/* Renew the lease of every node whose last renewal is over half its TTL old (between the
 * sessions of a long batch of events). */
static void renew_late(struct host *h, int64_t now)
{
    for (int i = 0; i < h->count; i++) {
        struct fleet_node *n = &h->nodes[i];
        if (n->joined && !n->dead && !n->nd.lease_lost &&
            rdzv_lease_valid_until(n->s) - h->o->ttl_ms + h->o->ttl_ms / 2 < now)
            step(h, n, now);
    }
}

static void node_log_cb(void *ctx, enum node_level level, const char *msg)
{
    struct fleet_node *n = ctx;
    if (level < NODE_WARN)
        return;
    struct ea_error err = {0};
    snprintf(err.msg, sizeof(err.msg), "%s", msg);
    complain(n->h, n->id, "node", &err);
}

static void node_event_cb(void *ctx, const struct node_event *e)
{
    struct fleet_node *n = ctx;
    if (e->kind == NODE_EV_LEASE_LOST) {
        send_simple(n->h, FF_LEASE_LOST, n->id, 0);
        fprintf(stderr, "fleet-faults: node %d: lease lost: %s\n", n->id, e->detail);
    }
}

/* A node dies like a SIGKILLed agent: no more renewals, no leave; its lease expires. */
static void kill_node(struct host *h, struct fleet_node *n)
{
    n->dead = true;
    send_simple(h, FF_KILLED, n->id, 0);
    rdzv_session_destroy(n->s);
    n->s = n->nd.rdzv = NULL;
}

static int read_full(int fd, void *buf, size_t len)
{
    for (size_t got = 0; got < len;) {
        ssize_t r = read(fd, (char *)buf + got, len - got);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

/* One command from the driver: 1 to go on, 0 to quit, -1 on a broken pipe. */
static int command(struct host *h, int ctl)
{
    char c = 0;
    if (read_full(ctl, &c, 1) < 0)
        return -1;
    int killed = 0;
    if (c == FF_CMD_QUIT)
        return 0;
    if (c == FF_CMD_RACK) {
        for (int i = 0; i < h->count; i++) {
            struct fleet_node *n = &h->nodes[i];
            if (!n->dead && n->joined &&
                (rdzv_is_coordinator(n->s) || (unsigned)rdzv_my_index(n->s) < 8)) {
                kill_node(h, n);
                killed++;
            }
        }
    } else if (c == FF_CMD_KILL || c == FF_CMD_LEAVE) {
        uint32_t cnt;
        if (read_full(ctl, &cnt, sizeof(cnt)) < 0)
            return -1;
        for (uint32_t k = 0; k < cnt; k++) {
            uint32_t id;
            if (read_full(ctl, &id, sizeof(id)) < 0)
                return -1;
            int i = (int)id - h->nodes[0].id;
            if (i >= 0 && i < h->count && !h->nodes[i].dead && h->nodes[i].joined) {
                struct ea_error err = {0};
                if (c == FF_CMD_LEAVE && rdzv_leave(h->nodes[i].s, &err) < 0)
                    complain(h, (int)id, "leave", &err);
                kill_node(h, &h->nodes[i]);
                killed++;
            }
        }
    }
    send_simple(h, FF_ACK, -1, killed);
    return 1;
}

static int create_all(struct host *h, struct kv *kv, int first)
{
    for (int i = 0; i < h->count; i++) {
        struct fleet_node *n = &h->nodes[i];
        n->id = first + i;
        n->last.rank = -1;
        struct rdzv_config rc = {
            .prefix = h->o->prefix,
            .params = {.min_nodes = h->o->nodes / 2,
                       .max_nodes = h->o->nodes,
                       .settle_ms = 1000,
                       .last_call_ms = 30000,
                       .lease_ttl_ms = h->o->ttl_ms},
            .lease_ttl_ms = h->o->ttl_ms,
        };
        /* realistic ids: <hostname>-<pid> */
        snprintf(rc.self.host, sizeof(rc.self.host), "gpu-node-%05d.rack%03d.example.internal",
                 n->id, n->id / 32);
        snprintf(rc.self.node_id, sizeof(rc.self.node_id), "%s-%d", rc.self.host, 40000 + n->id);
        snprintf(rc.self.addr, sizeof(rc.self.addr), "127.0.0.1");
        rc.self.nproc = 1;
        rc.self.pid = getpid();
        struct ea_error err = {0};
        if (rdzv_session_create(kv, &rc, &n->s, &err) < 0) {
            fprintf(stderr, "fleet-faults: node %d: session: %s\n", n->id, err.msg);
            return -1;
        }
        n->h = h;
        n->nd.rdzv = n->s;
        struct node_params np = {.node_id = rc.self.node_id,
                                 .join_timeout_ms = INT64_MAX / 4, /* never gives up */
                                 .ops = {.ctx = n, .log = node_log_cb, .event = node_event_cb}};
        node_init(&n->nd, &np);
    }
    return 0;
}

int ff_host_main(const struct ff_host_opts *o, int first, int count, int out, int ctl)
{
    struct host h = {.o = o, .count = count, .out = out};
    h.nodes = calloc((size_t)count, sizeof(*h.nodes));
    /* As the agent: a request slower than a third of the TTL is as good as lost. */
    int64_t timeout = o->ttl_ms / 3;
    timeout = timeout < 300 ? 300 : timeout > 5000 ? 5000 : timeout;
    struct kv_config kc = {
        .backend = "etcd", .endpoints = o->endpoints, .request_timeout_ms = (int)timeout};
    struct ea_error err = {0};
    struct kv *kv = NULL; /* one connection for this process's sessions */
    if (!h.nodes || kv_open(&kc, &kv, &err) < 0) {
        fprintf(stderr, "fleet-faults: open: %s\n", err.msg);
        send_simple(&h, FF_FATAL, first, 0);
        return 1;
    }
    if (create_all(&h, kv, first) < 0) {
        send_simple(&h, FF_FATAL, first, 0);
        return 1;
    }
    char go = 0;
    if (read_full(ctl, &go, 1) < 0 || go != FF_CMD_GO)
        return 1;
    int joined = 0, rc = 0;
    for (;;) {
        if (joined < count) { /* one per turn: the nodes already in keep renewing */
            struct fleet_node *n = &h.nodes[joined++];
            if (rdzv_join(n->s, &err) < 0) {
                fprintf(stderr, "fleet-faults: node %d: join: %s\n", n->id, err.msg);
                send_simple(&h, FF_FATAL, n->id, 0);
                rc = 1;
                break;
            }
            n->joined = true;
            send_simple(&h, FF_JOINED, n->id, 0);
        }
        int64_t now = ea_now_ms(), wake = joined < count ? now : now + 1000;
        for (int i = 0; i < joined; i++) {
            struct fleet_node *n = &h.nodes[i];
            if (n->dead)
                continue;
            step(&h, n, now);
            observe(&h, n);
            int64_t w = node_wake_ms(&n->nd);
            if (w >= 0 && w < wake)
                wake = w;
        }
        struct pollfd pfd[2] = {{.fd = kv_event_fd(kv), .events = POLLIN},
                                {.fd = ctl, .events = POLLIN}};
        int64_t left = wake - ea_now_ms();
        if (poll(pfd, 2, left < 0 ? 0 : (int)left) < 0 && errno != EINTR) {
            rc = 1;
            break;
        }
        /* the store's events (up to 4 batches in a row, so the renewals are not starved) */
        for (int batch = 0; pfd[0].revents && batch < 4; batch++) {
            struct kv_event *ev = NULL;
            size_t nev = 0;
            if (kv_read_events(kv, &ev, &nev, &err) < 0) {
                complain(&h, first, "events", &err);
                break;
            }
            for (int i = 0; i < joined; i++) {
                struct fleet_node *n = &h.nodes[i];
                if (n->dead)
                    continue;
                if (rdzv_apply_events(n->s, ev, nev, &err) < 0)
                    complain(&h, n->id, "apply events", &err);
                observe(&h, n);
                if (i % 32 == 31)
                    renew_late(&h, ea_now_ms());
            }
            kv_events_free(ev, nev);
            if (poll(pfd, 1, 0) < 0 && errno != EINTR)
                break;
        }
        if (pfd[1].revents) {
            int c = command(&h, ctl);
            if (c <= 0) {
                rc = c < 0;
                break;
            }
        }
    }
    for (int i = 0; i < count; i++) {
        struct fleet_node *n = &h.nodes[i];
        if (!n->dead && n->joined && !rc)
            rdzv_leave(n->s, NULL);
        rdzv_session_destroy(n->s);
    }
    if (h.errors)
        fprintf(stderr, "fleet-faults: nodes %d-%d: %" PRIu64 " store errors in all\n", first,
                first + count - 1, h.errors);
    kv_close(kv);
    free(h.nodes);
    return rc;
}
