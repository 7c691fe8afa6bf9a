// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv-sim's children (rdzv_sim.c says what the simulator does): each serves its share of the
 * simulated nodes, a real rdzv session and, with --ring, the product's node unit each, on one
 * store connection and one ring thread (ring_host.h). A node's store requests, events and ring
 * reports do not wait for the other nodes' (renew, pump): they would not in separate agents.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ea_time.h"
#include "kv.h"
#include "session.h"
#include "suspect.h"
#include "node.h"
#include "ring_host.h"
#include "sim_wire.h"
#include "rdzv_sim.h"

struct sim_node {
    int id;
    struct rdzv_session *s;
    int64_t seen_round;
    int64_t ready_round;     /* the last round it could start its workers in */
    int64_t published_round; /* as group rank 0: the last round it published the master of */
    int64_t renewed_ms;      /* its last lease renewal (or its join) */
    bool dead;
    struct ring_host_ring *g; /* --ring: its links' sockets */
    struct node node;         /* --ring: the product's node unit (its ring's decisions) */
};

/* --domains: node i's failure domain, contiguous blocks of ids (as racks of consecutive hosts) */
static int domain_of(const struct opts *o, int id)
{
    return o->domains > 0 ? (int)((int64_t)id * o->domains / o->nodes) : -1;
}

/* The coordinator's domain as node s sees it (-1: none known): its id is in its name. */
static int coord_domain(const struct opts *o, struct rdzv_session *s)
{
    char holder[RDZV_ID_MAX];
    int64_t lease = 0;
    int id = -1;
    if (!rdzv_coord_holder(s, holder, sizeof(holder), &lease) ||
        sscanf(holder, "sim-%d", &id) != 1)
        return -2; /* never a node's */
    return domain_of(o, id);
}

static void report_stats(int fd, int type, int node, int64_t round, int members,
                         const struct rdzv_session *s, int64_t ev_ms)
{
    struct rec r = {.type = type,
                    .node = node,
                    .round = round,
                    .members = members,
                    .t_ms = ea_now_ms(),
                    .ev_ms = ev_ms};
    if (s) {
        struct rdzv_stats st;
        rdzv_stats_get(s, &st);
        r.bytes = st.bytes_received;
        r.keys = st.keys_written;
        r.claims = st.claims;
        r.coord = rdzv_is_coordinator(s);
    }
    if (write(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
        _exit(3);
}

static void report(int fd, int type, int node, int64_t round, int members)
{
    report_stats(fd, type, node, round, members, NULL, 0);
}

static void fatal(int fd, int node, const char *what, const struct ea_error *err)
{
    fprintf(stderr, "rdzv-sim: node %d: %s: %s\n", node, what, err->msg);
    report(fd, REC_FATAL, node, 0, 0);
    _exit(1);
}

/* Report the committed round a node sees, once per round; ev_ms: when the events that may have
 * brought it were read. Then what an agent does up to starting its workers: group rank 0
 * publishes the master (rounds/<r>/master, create-only) once it has its own assignment, and
 * every node starts its workers once that has reached it: reported as REC_READY. */
static void observe(struct sim_node *n, int out, int64_t ev_ms)
{
    int64_t gen;
    if (n->g)
        node_ring_step(&n->node, true, ea_now_ms());
    const struct rdzv_state *st = rdzv_current(n->s, &gen);
    if (!st || st->status != RDZV_RUNNING || rdzv_my_index(n->s) < 0)
        return;
    if (st->round > n->seen_round) {
        n->seen_round = st->round;
        report_stats(out, REC_SEEN, n->id, st->round, st->group_world_size, n->s, ev_ms);
        if (rdzv_is_coordinator(n->s) && getenv("RDZV_SIM_VERBOSE"))
            fprintf(stderr, "rdzv-sim: %" PRId64 " node %d: coordinates round %" PRId64 " of %d\n",
                    ea_now_ms() % 100000, n->id, st->round, st->group_world_size);
    }
    if (rdzv_my_index(n->s) == 0 && st->round > n->published_round) {
        struct ea_error err = {0};
        if (rdzv_publish_master(n->s, st->round, "127.0.0.1:29500", &err) < 0)
            fprintf(stderr, "rdzv-sim: node %d: master of round %" PRId64 ": %s\n", n->id,
                    st->round, err.msg); /* tried again at the next event or tick */
        else
            n->published_round = st->round;
    }
    if (st->round > n->ready_round && rdzv_master(n->s, st->round)) {
        n->ready_round = st->round;
        report_stats(out, REC_READY, n->id, st->round, st->group_world_size, n->s, ev_ms);
    }
}

/* A node dies like a SIGKILLed agent: no more renewals, no leave; its lease expires. */
static void kill_node(struct sim_node *n, int out)
{
    n->dead = true;
    report(out, REC_KILLED, n->id, 0, 0);
    ring_host_kill(n->g); /* the kernel closes its sockets: its ring neighbours see EOF */
    n->g = NULL;
    node_ring_free(&n->node);
    rdzv_session_destroy(n->s);
    n->s = NULL;
}

static struct sim_node *touched[64]; /* the nodes of one ring_host_reports call (64 rings) */
static size_t n_touched;

/* A ring report of one of this process's nodes (ring_host_reports): its node decides. */
static void on_ring_report(void *ctx, const struct ring_report *x)
{
    struct sim_node *n = ctx;
    if (n->dead)
        return;
    node_on_report(&n->node, x);
    bool seen = false;
    for (size_t i = 0; i < n_touched && !seen; i++)
        seen = touched[i] == n;
    if (!seen && n_touched < sizeof(touched) / sizeof(touched[0]))
        touched[n_touched++] = n;
}

/* The ring reports of up to `rings` nodes, each node then stepped at once, as an agent steps its
 * node after a report in the same pass (a confirmer's probe answer, the claim, the evictions
 * follow one another without waiting for the node's turn among 625). */
static void take_reports(struct ring_host *host, size_t rings)
{
    n_touched = 0;
    ring_host_reports(host, rings, on_ring_report);
    for (size_t i = 0; i < n_touched; i++)
        if (!touched[i]->dead)
            node_ring_step(&touched[i]->node, true, ea_now_ms());
    n_touched = 0;
}

/* What one child serves: its nodes, their store connection and their rings. */
struct child {
    const struct opts *o;
    struct sim_node *nodes;
    int first, count, joined, out;
    int ctl;   /* the parent's commands */
    bool quit; /* told to stop (or the parent is gone) */
    struct kv *kv;
    struct ring_host *host; /* --ring */
};

/* The parent's command: kill some of the child's nodes (one letter, 'p' with a count), or 'q'. */
static void on_ctl(struct child *c)
{
    char cmd = 0;
    unsigned char quota = 0; /* 'p': how many of this process's nodes die */
    if (read(c->ctl, &cmd, 1) <= 0 || cmd == 'q' ||
        (cmd == 'p' && read(c->ctl, &quota, 1) != 1)) {
        c->quit = true;
        return;
    }
    const struct opts *o = c->o;
    int killed = 0;
    for (int i = c->count - 1; i >= 0; i--) {
        struct sim_node *n = &c->nodes[i];
        if (n->dead || i >= c->joined)
            continue;
        bool coord = rdzv_is_coordinator(n->s);
        int idx = rdzv_my_index(n->s), lo = o->rack_spares_coord ? 1 : 0;
        if ((cmd == 'k' && !coord && killed < 1 && c->first + c->count == o->nodes) ||
            (cmd == 'c' && coord) || (cmd == 'p' && !coord && killed < quota) ||
            (cmd == 'r' && ((coord && !o->rack_spares_coord) ||
                            (!coord && idx >= lo && idx < lo + o->rack_size))) ||
            (cmd == 'd' && domain_of(o, n->id) == coord_domain(o, n->s))) {
            kill_node(n, c->out);
            killed++;
        }
    }
    report(c->out, REC_KILLED, -1, 0, killed); /* this child is done killing */
}

/* A command waiting from the parent, taken now (while the child works through its nodes). */
static void kill_now(struct child *c)
{
    struct pollfd p = {.fd = c->ctl, .events = POLLIN};
    if (!c->quit && poll(&p, 1, 0) > 0)
        on_ctl(c);
}

/* Renew the leases of the child's nodes whose renewal is due (late: only those whose last
 * renewal is over half the TTL old), in one request (kv_lease_keepalive_each): 625 separate
 * agents renew at once, where 625 renewals one after the other took a process seconds on 2
 * cores and held up its nodes' events and suspicions. */
static void renew(struct child *c, int64_t now, bool late)
{
    int *at = malloc((size_t)c->count * sizeof(*at));
    int *codes = malloc((size_t)c->count * sizeof(*codes));
    int64_t *leases = malloc((size_t)c->count * sizeof(*leases));
    if (!at || !codes || !leases)
        fatal(c->out, c->first, "renew", &(struct ea_error){.msg = "out of memory"});
    size_t n = 0;
    for (int i = 0; i < c->joined; i++) {
        struct sim_node *nd = &c->nodes[i];
        if (nd->dead || (late && now - nd->renewed_ms <= c->o->ttl_ms / 2))
            continue;
        int64_t l = rdzv_keepalive_due(nd->s, now);
        if (l) {
            at[n] = i;
            leases[n++] = l;
        }
    }
    struct ea_error err = {0};
    if (n && kv_lease_keepalive_each(c->kv, leases, n, codes, &err) < 0)
        fatal(c->out, c->first, "renew", &err);
    for (size_t k = 0; k < n; k++) {
        struct sim_node *nd = &c->nodes[at[k]];
        int r = rdzv_keepalive_done(nd->s, now, codes[k], &err);
        if (r == KV_ENOLEASE)
            fatal(c->out, nd->id, "lease lost", &err);
        if (r > 0)
            nd->renewed_ms = now;
    }
    free(leases);
    free(codes);
    free(at);
}

/* One batch of the store's events, applied to every node of the child. */
static void apply_batch(struct child *c)
{
    struct ea_error err = {0};
    struct kv_event *ev = NULL;
    size_t nev = 0;
    if (kv_read_events(c->kv, &ev, &nev, &err) < 0)
        fatal(c->out, c->first, "events", &err);
    int64_t t_read = ea_now_ms();
    for (int i = 0; i < c->joined; i++) {
        if (c->nodes[i].dead)
            continue;
        if (rdzv_apply_events(c->nodes[i].s, ev, nev, &err) < 0)
            fprintf(stderr, "rdzv-sim: node %d: events: %s\n", c->nodes[i].id, err.msg);
        /* an agent acts on what its events brought at once (agent.c: on_store_events),
         * before its next tick; node i is not charged with nodes 0..i-1's ticks */
        observe(&c->nodes[i], c->out, t_read);
        if (i % 32 == 31) {
            renew(c, ea_now_ms(), true);
            kill_now(c);
        }
    }
    kv_events_free(ev, nev);
}

/* Between one node's store requests and the next's: the events and ring reports that arrived
 * meanwhile. Separate agents do not queue behind each other's lease renewals; without this a
 * coordinator's suspects waited seconds behind its 625 neighbours' renewals after a kill. */
static void pump(struct child *c)
{
    struct pollfd p[3] = {{.fd = kv_event_fd(c->kv), .events = POLLIN},
                          {.fd = c->host ? ring_host_fd(c->host) : -1, .events = POLLIN},
                          {.fd = c->ctl, .events = POLLIN}};
    if (poll(p, 3, 0) <= 0)
        return;
    if (p[2].revents && !c->quit) /* a kill first, at once, as the parent's other children do */
        on_ctl(c);
    if (c->quit)
        return;
    if (p[1].revents)
        take_reports(c->host, 8);
    if (p[0].revents)
        apply_batch(c);
}

/* The node unit's log lines: errors only (a 10,000-node run's suspicions would flood stderr). */
static void node_log_cb(void *ctx, enum node_level level, const char *msg)
{
    const struct sim_node *n = ctx;
    static int verbose = -1; /* RDZV_SIM_VERBOSE=1: every node's log (a diagnosis) */
    if (verbose < 0)
        verbose = getenv("RDZV_SIM_VERBOSE") != NULL;
    if (level == NODE_ERROR || (verbose && level >= NODE_INFO))
        fprintf(stderr, "rdzv-sim: %" PRId64 " node %d: %s\n", ea_now_ms() % 100000, n->id, msg);
}

/* The "agent" of nodes [first, first+count): join all, then serve them until told to stop. */
int child_main(const struct opts *o, int first, int count, int out, int ctl)
{
    struct sim_node *nodes = calloc((size_t)count, sizeof(*nodes));
    char prefix[160];
    snprintf(prefix, sizeof(prefix), "/elastic/%s/", o->run_id);
    struct kv_config kc = {
        .backend = "etcd", .endpoints = o->endpoints, .request_timeout_ms = 5000};
    struct ea_error err = {0};
    struct ring_host *host = NULL; /* --ring: this process's rings, on a thread */
    if (o->ring && ring_host_create((size_t)count, o->ring_pass_ms, &host, &err) < 0)
        fatal(out, first, "ring", &err);
    struct kv *kv = NULL; /* one connection for this process's sessions */
    if (kv_open(&kc, &kv, &err) < 0)
        fatal(out, first, "open", &err);
    for (int i = 0; i < count; i++) {
        struct sim_node *n = &nodes[i];
        n->id = first + i;
        struct rdzv_config rc = {
            .prefix = prefix,
            .params = {.min_nodes = o->nodes / 2,
                       .max_nodes = o->nodes,
                       .settle_ms = 1000,
                       .last_call_ms = 30000,
                       .lease_ttl_ms = o->ttl_ms},
            .lease_ttl_ms = o->ttl_ms,
        };
        sim_names(n->id, o->real_names, rc.self.node_id, sizeof(rc.self.node_id), rc.self.host,
                  sizeof(rc.self.host));
        snprintf(rc.self.addr, sizeof(rc.self.addr), "127.0.0.1");
        rc.self.nproc = 1;
        rc.self.pid = getpid();
        if (o->domains > 0)
            snprintf(rc.self.domain, sizeof(rc.self.domain), "d%03d", domain_of(o, n->id));
        if (o->ring) { /* a real listener per node: its port in its node record */
            rc.params.ring = true;
            if (ring_host_open(host, o->run_id, rc.self.node_id, o->ring_interval_ms, 3, n,
                               &n->g, &err) < 0)
                fatal(out, n->id, "ring", &err);
            rc.self.live_port = ring_host_port(n->g);
        }
        if (rdzv_session_create(kv, &rc, &n->s, &err) < 0)
            fatal(out, n->id, "session", &err);
        if (o->ring) { /* the session is the node's (node_free is not called: n->s is freed here) */
            struct node_params np = {.node_id = rc.self.node_id,
                                     .join_timeout_ms = 600000,
                                     .ops = {.ctx = n, .log = node_log_cb}};
            n->node.rdzv = n->s;
            node_init(&n->node, &np);
            /* as the agent: probes of misses x interval, a first cooldown of one TTL */
            struct node_ring_params rp = {
                .tr = {.ctx = n->g, .set = ring_host_set, .probe = ring_host_probe},
                .probe_ms = 3 * o->ring_interval_ms,
                .cooldown_ms = o->ttl_ms,
                .await_prev = !o->ring_no_await};
            if (node_ring_open(&n->node, &rp) < 0)
                fatal(out, n->id, "ring", &(struct ea_error){.msg = "out of memory"});
        }
    }
    struct child ch = {.o = o, .nodes = nodes, .first = first, .count = count, .out = out,
                       .ctl = ctl, .kv = kv, .host = host};
    char go = 0; /* the parent measures the store first (gRPC must not be set up before fork) */
    if (read(ctl, &go, 1) != 1 || go != 'g')
        return 1;
    if (host && ring_host_start(host, &err) < 0)
        fatal(out, first, "ring", &err);
    /* nodes join one per loop turn, so the ones already in keep renewing and reading events, as
     * separate agents would */
    int joined = 0;
    for (;;) {
        if (joined < count) {
            unsigned seed = (unsigned)nodes[joined].id * 2654435761u;
            if (sim_noise(kv, o->run_id, &seed, o->noise, &err) < 0)
                fatal(out, nodes[joined].id, "unrelated keys", &err);
            report(out, REC_JOINING, nodes[joined].id, 0, 0);
            if (rdzv_join(nodes[joined].s, &err) < 0)
                fatal(out, nodes[joined].id, "join", &err);
            report(out, REC_JOINED, nodes[joined].id, 0, 0);
            nodes[joined].renewed_ms = ea_now_ms();
            joined++;
        }
        int64_t now = ea_now_ms(), wake = joined < count ? now : now + 1000;
        ch.joined = joined;
        renew(&ch, now, false);
        for (int i = 0; i < joined; i++) {
            struct sim_node *n = &nodes[i];
            if (n->dead)
                continue;
            int r = rdzv_tick(n->s, now, &err);
            if (r > 0) {
                int64_t gen;
                const struct rdzv_state *st = rdzv_current(n->s, &gen);
                report(out, REC_WROTE, n->id, st ? st->round : 0,
                       st && st->status == RDZV_RUNNING ? st->group_world_size : 0);
            } else if (r < 0) {
                fprintf(stderr, "rdzv-sim: node %d: tick: %s\n", n->id, err.msg);
            }
            observe(n, out, now);
            if (i % 16 == 15)
                pump(&ch);
            if (n->dead || ch.quit)
                continue;
            int64_t w = rdzv_wake_ms(n->s);
            if (w >= 0 && w < wake)
                wake = w;
        }
        for (int i = 0; host && i < joined; i++) /* the coordinator's confirmations */
            if (!nodes[i].dead && rdzv_is_coordinator(nodes[i].s))
                node_ring_step(&nodes[i].node, true, ea_now_ms());
        struct pollfd pfd[3] = {{.fd = kv_event_fd(kv), .events = POLLIN},
                                {.fd = ctl, .events = POLLIN},
                                {.fd = host ? ring_host_fd(host) : -1, .events = POLLIN}};
        int64_t left = wake - ea_now_ms();
        if (poll(pfd, 3, left < 0 ? 0 : (int)left) < 0 && errno != EINTR)
            return 1;
        if (pfd[1].revents) /* a kill first: the other children's nodes die now too */
            on_ctl(&ch);
        if (ch.quit)
            break;
        if (pfd[2].revents)
            take_reports(host, 64);
        /* The store's events first, and those that arrived while the last batch was applied
         * (one commit reaches the 625 sessions' watches as 625 events, which may come in a few
         * batches) before the next ticks: a node's events do not wait for other nodes' ticks.
         * At most 4 batches in a row, so that the ticks (keepalives) are not starved. */
        for (int batch = 0; pfd[0].revents && batch < 4; batch++) {
            apply_batch(&ch);
            if (poll(pfd, 1, 0) < 0 && errno != EINTR)
                return 1;
        }
    }
    struct rec rr = {.type = REC_RING, .node = -1, .t_ms = ea_now_ms()};
    for (int i = 0; i < count; i++) {
        struct node_ring_stats st = {0};
        if (nodes[i].g)
            node_ring_stats_get(&nodes[i].node, &st);
        rr.bytes += st.suspicions;
        rr.keys += st.evictions;
        rr.claims += st.false_alarms;
    }
    if (o->ring && write(out, &rr, sizeof(rr)) != (ssize_t)sizeof(rr))
        _exit(3);
    for (int i = 0; i < count; i++) {
        if (nodes[i].dead)
            continue;
        ring_host_close(nodes[i].g);
        node_ring_free(&nodes[i].node);
        if (i < joined)
            rdzv_leave(nodes[i].s, NULL);
        rdzv_session_destroy(nodes[i].s);
    }
    ring_host_destroy(host);
    kv_close(kv);
    free(nodes);
    return 0;
}

