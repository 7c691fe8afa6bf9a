// SPDX-License-Identifier: Apache-2.0
/* agent_node: the agent's glue to its node (node/node.h: the session, the lease, the rejoin, the
 * pending reports, the liveness ring's decisions): the node's callbacks (logs, events, metrics, a
 * fatal store error), the ring's thread (liveness/live.h) as the node's transport, and the
 * workers' fence; and what the loop writes to the store for its round (the master and the
 * built-in tracker's address). Called by the loop; calls nothing of it back. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"
#include "agent_internal.h"
#include "ea_time.h"
#include "live.h"
#include "log.h"
#include "roster.h"

/* Connects that could not start here (no route): logged at most once this often. */
#define NO_ROUTE_LOG_MS 30000

/* The ring's thread, the node's transport. */
struct agent_live {
    struct live *live;
    /* connects and probes that could not start here, as last logged */
    uint64_t no_route_seen;
    int64_t no_route_logged_ms;
};

/* ---- the node's callbacks ------------------------------------------------------------------ */

static void node_log_cb(void *ctx, enum node_level level, const char *msg)
{
    (void)ctx;
    switch (level) {
    case NODE_DEBUG:
        log_debug("%s", msg);
        break;
    case NODE_INFO:
        log_info("%s", msg);
        break;
    case NODE_WARN:
        log_warn("%s", msg);
        break;
    default:
        log_error("%s", msg);
        break;
    }
}

static void node_event_cb(void *ctx, const struct node_event *e)
{
    struct agent *a = ctx;
    switch (e->kind) {
    case NODE_EV_LEASE_LOST:
        agent_emit(a, "lease_lost", "{s:s, s:i}", "reason", e->detail, "workers_running",
                   a->group.live);
        break;
    case NODE_EV_REJOINED:
        log_info("rejoined run '%s'", a->cfg->run_id);
        a->obs.m.rejoins++;
        agent_emit(a, "rejoined", NULL);
        a->state = LC_IDLE;
        break;
    case NODE_EV_SUSPECT:
        a->obs.m.liveness_suspicions++;
        agent_emit(a, "suspect", "{s:s, s:s, s:s}", "node", e->node, "cause", e->cause, "link",
                   e->outbound ? "to_successor" : "from_predecessor");
        break;
    case NODE_EV_EVICTED:
        a->obs.m.liveness_confirmed++;
        agent_emit(a, "evicted", "{s:s, s:s, s:s, s:s}", "node", e->node, "by", e->by, "cause",
                   e->cause, "probe", e->detail);
        break;
    case NODE_EV_CLEARED:
        a->obs.m.liveness_false_alarms++;
        agent_emit(a, "suspect_cleared", "{s:s, s:s, s:s}", "node", e->node, "by", e->by, "cause",
                   e->cause);
        break;
    }
}

static void node_fatal_cb(void *ctx, enum node_fatal why, const char *msg)
{
    struct agent *a = ctx;
    (void)msg; /* logged by the node */
    a->quit.exiting = true;
    a->quit.exit_code = why == NODE_FATAL_AUTH      ? AGENT_EXIT_USAGE
                   : why == NODE_FATAL_CORRUPT ? AGENT_EXIT_RDZV
                                               : AGENT_EXIT_STORE;
}

void agent_node_init(struct agent *a, const struct ea_clock *clock)
{
    struct node_params p = {
        .node_id = a->cfg->node_id,
        .clock = clock,
        .join_timeout_ms = a->cfg->join_timeout_ms,
        .ops = {.ctx = a, .log = node_log_cb, .event = node_event_cb, .fatal = node_fatal_cb}};
    node_init(&a->node, &p);
}

/* ---- the store ----------------------------------------------------------------------------- */

void agent_store_problem(struct agent *a, int code, const struct ea_error *err)
{
    node_store_problem(&a->node, code, err, node_now(&a->node));
}

void agent_store_ok(struct agent *a)
{
    node_store_ok(&a->node);
}

void agent_store_step(struct agent *a, int64_t now)
{
    uint64_t failures = a->node.renew_failures;
    struct node_step_in in = {.may_rejoin = a->group.live == 0 && !a->quit.term_signal,
                              .generation = a->group.generation,
                              .done_still_valid = a->state == LC_FINISHED};
    node_step(&a->node, &in, now);
    a->obs.m.lease_renew_failures += a->node.renew_failures - failures;
}

/* ---- the liveness ring: the node's transport is the ring's thread ------------------------ */

/* The ring's thread writes the guards' deadline too: the launcher exists by then (the first
 * write follows the loop's first agent_liveness_fence()), and its fence op is one atomic store. */
static void fence_write(void *ctx, int64_t until)
{
    struct agent *a = ctx;
    if (a->launcher)
        launcher_fence(a->launcher, until);
}

static void live_set_cb(void *ctx, int64_t round, int members, const char *prev, bool await_prev,
                        const struct ring_peer *next, int64_t now)
{
    (void)now;
    live_set(ctx, round, members, prev, await_prev, next);
}

static int live_probe_cb(void *ctx, uint64_t id, const struct ring_peer *peer, int64_t round,
                         int64_t timeout_ms, int64_t now)
{
    (void)now;
    return live_probe(ctx, id, peer, round, timeout_ms);
}

int agent_liveness_open(struct agent *a, struct rdzv_node *self)
{
    const struct cfg *c = a->cfg;
    /* the memory backend is one agent's process: there is nobody to link to */
    if (strcmp(c->liveness, "on") != 0 || strcmp(c->backend, "memory") == 0)
        return 0;
    char here[RDZV_ADDR_MAX];
    if (!node_numeric_addr(a->me.self_addr, here, sizeof(here))) {
        log_warn("liveness ring: '%s' does not resolve to an address: this node stays out of "
                 "the ring (its lease still counts)",
                 a->me.self_addr);
        return 0;
    }
    struct agent_live *g = calloc(1, sizeof(*g));
    if (!g) {
        log_error("out of memory");
        return AGENT_EXIT_RDZV;
    }
    char ns[RDZV_ADDR_MAX];
    node_netns_id(ns, sizeof(ns));
    int64_t iv = c->liveness_interval_ms, misses = c->liveness_misses;
    /* a frozen node can be evicted (misses - 1) x interval after its last beat plus a probe of
     * misses x interval: its guards stop its workers before, with half an interval to spare */
    int64_t fence_ms = (2 * misses - 1) * iv - iv / 2;
    struct live_params p = {
        .ring = {.run_id = c->run_id,
                 .node_id = c->node_id,
                 .bind_addr = here,
                 .interval_ms = iv,
                 .misses = (int)misses,
                 .await_cap_ms = c->lease_ttl_ms / 2},
        .fence_ms = fence_ms > iv ? fence_ms : iv,
        .fence = fence_write,
        .fence_ctx = a,
    };
    struct ea_error err = {0};
    if (live_create(&p, &g->live, &err) < 0) {
        log_error("%s", err.msg);
        free(g);
        return AGENT_EXIT_RDZV;
    }
    bool lo = node_is_loopback(here);
    struct node_ring_params rp = {
        .tr = {.ctx = g->live, .set = live_set_cb, .probe = live_probe_cb},
        .probe_ms = misses * iv,
        .cooldown_ms = c->lease_ttl_ms,
        .ns = ns,
        .loopback = lo,
        .await_prev = true};
    if (node_ring_open(&a->node, &rp) < 0) {
        log_error("out of memory");
        live_destroy(g->live);
        free(g);
        return AGENT_EXIT_RDZV;
    }
    self->live_port = live_port(g->live);
    /* its workers run on another host (--host), or its address is a name */
    if (strcmp(here, self->addr) != 0)
        snprintf(self->live_addr, sizeof(self->live_addr), "%s", here);
    if (lo)
        snprintf(self->live_ns, sizeof(self->live_ns), "%s", ns);
    a->ring.live = g;
    log_debug("liveness ring: listening on %s port %d (heartbeat %" PRId64 " ms, %d misses)", here,
              self->live_port, iv, (int)misses);
    return 0;
}

void agent_liveness_close(struct agent *a)
{
    if (!a->ring.live)
        return;
    http_set_links(a->obs.http, NULL, NULL); /* the HTTP thread asks the ring no more */
    live_destroy(a->ring.live->live);         /* a bye on both links: the neighbours suspect nobody */
    free(a->ring.live);
    a->ring.live = NULL;
    node_ring_free(&a->node);
}

int agent_liveness_fd(const struct agent *a)
{
    return a->ring.live ? live_fd(a->ring.live->live) : -1;
}

void agent_liveness_on_reports(struct agent *a)
{
    struct ring_report x;
    while (a->ring.live && live_take(a->ring.live->live, &x))
        node_on_report(&a->node, &x);
}

void agent_liveness_step(struct agent *a, int64_t now)
{
    struct agent_live *g = a->ring.live;
    if (!g)
        return;
    node_ring_step(&a->node, !a->quit.term_signal && !a->quit.exiting, now);
    struct ring_links l;
    live_links(g->live, &l);
    a->obs.m.liveness_links_up = (strcmp(l.out, "up") == 0) + (strcmp(l.in, "up") == 0);
    a->obs.m.liveness_no_route = l.local_failures;
    if (l.local_failures > g->no_route_seen &&
        (!g->no_route_logged_ms || now - g->no_route_logged_ms >= NO_ROUTE_LOG_MS)) {
        log_warn("liveness ring: %" PRIu64 " ring connect(s) could not start from this node (%s): "
                 "no route here is no evidence against a peer, so nobody is suspected for it; "
                 "retrying",
                 l.local_failures - g->no_route_seen, l.local_cause);
        g->no_route_seen = l.local_failures;
        g->no_route_logged_ms = now;
    }
    agent_liveness_links(a, &a->obs.m.liveness_out, &a->obs.m.liveness_in);
}

/* This node's two links now, for the HTTP thread (http_set_links: /status and /metrics). */
static void link_of(struct metrics_link *m, const char *peer, const char *state, int64_t heard,
                    int64_t now)
{
    snprintf(m->peer, sizeof(m->peer), "%s", peer);
    snprintf(m->state, sizeof(m->state), "%s", state);
    m->heartbeat_age_s = heard >= 0 && now >= heard ? (double)(now - heard) / 1000.0 : -1;
}

void agent_liveness_links(void *ctx, struct metrics_link *out, struct metrics_link *in)
{
    struct agent_live *g = ((struct agent *)ctx)->ring.live;
    if (!g)
        return;
    struct ring_links l;
    live_links(g->live, &l);
    int64_t now = ea_now_ms();
    link_of(out, l.next, l.out, strcmp(l.out, "up") == 0 ? l.out_heard_ms : -1, now);
    link_of(in, l.prev, l.in, strcmp(l.in, "up") == 0 ? l.in_heard_ms : -1, now);
}

int64_t agent_liveness_wake_ms(const struct agent *a)
{
    return a->ring.live ? node_ring_wake_ms(&a->node, ea_now_ms()) : -1;
}

int64_t agent_liveness_fence(struct agent *a, int64_t lease_until)
{
    if (!a->ring.live) {
        launcher_fence(a->launcher, lease_until);
        return lease_until;
    }
    return live_fence(a->ring.live->live, lease_until, node_ring_linked(&a->node),
                      a->group.live == 0 || a->node.lease_lost);
}

int64_t agent_liveness_fence_held(const struct agent *a, int64_t handed)
{
    return a->ring.live ? live_fence_held(a->ring.live->live) : handed;
}

/* Choose a free port on this node for the round's MASTER_PORT. */
static int free_port(const char *addr)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof(sa);
    int b = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    if (b < 0 && errno == EADDRNOTAVAIL) {
        /* not an address of this machine: the workers run on another host (--host, over ssh);
         * a port free here is a guess there, as good as any without asking that host */
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
        b = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    }
    int r =
        b < 0 || getsockname(fd, (struct sockaddr *)&sa, &len) < 0 ? -errno : ntohs(sa.sin_port);
    close(fd);
    return r;
}


void agent_publish_master(struct agent *a, const struct rdzv_state *s)
{
    const char *addr = nic_master_addr(a->nic); /* on a common interface, when discovery ran */
    if (!addr)
        addr = a->me.addr;
    if (agent_builtin_tracker(a) && agent_publish_tracker(a, s, addr) < 0)
        return;
    int port = free_port(addr);
    if (port < 0) {
        log_error("cannot find a free port for MASTER_PORT on '%s': %s", addr, strerror(-port));
        a->node.retry_at_ms = ea_now_ms() + 500;
        return;
    }
    char ap[128];
    snprintf(ap, sizeof(ap), "%s:%d", addr, port);
    struct ea_error err = {0};
    int r = rdzv_publish_master(a->node.rdzv, s->round, ap, &err);
    if (r < 0)
        agent_store_problem(a, r, &err);
}

/* A local worker failed (or could not start): record it and move the run on. */
void agent_report_failure(struct agent *a)
{
    node_write_failure(&a->node, node_now(&a->node));
}

/* All local workers of the round succeeded: say so (retried until the store takes it, or the
 * run has moved on to another round). */
void agent_report_done(struct agent *a)
{
    if (a->state != LC_FINISHED) {
        a->node.done_pending = false;
        return;
    }
    a->node.done_round = a->group.round;
    node_write_done(&a->node, node_now(&a->node));
}
