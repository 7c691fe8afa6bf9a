// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv-sim: many rendezvous participants against one etcd, cheaply (bench issue, metric 7).
 * Each simulated node is a real rdzv session (rendezvous/session.c) with its own lease, node key,
 * watches and assignment, exactly as an agent's; only the worker launching is left out. The
 * nodes are spread over --procs processes, each running one poll() loop over its sessions, which
 * share one store connection per process (each session still has its own lease and watches), so
 * 10,000 nodes cost 10,000 sessions instead of 10,000 agents, exec-guards and workers.
 *
 * Phase 1: every node joins (--min N/2 --max N: commits when all N are in); measured: last join ->
 * the coordinator's commit, commit -> every node has its assignment (a node has it once the
 * events that brought the commit are applied, the one read that the first round takes included,
 * as in an agent: commit_to_all_events is when the last of them was read), commit -> every node
 * could start its workers (what an agent waits for after its assignment: group rank 0 publishes
 * rounds/<r>/master once it has its own chunk, and the key reaches every node: all_ready), and
 * from each session's own counters (rdzv_stats): bytes received and keys written per node, the
 * coordinator apart.
 * --kill-one: one node (not the coordinator) stops renewing its lease and vanishes, like a
 * SIGKILLed agent; --kill-coordinator: the same for the coordinator; --kill-rack: the coordinator
 * and group ranks 1-7 at once (a rack; counted: the claims of `coord`; --rack-size K: K ranks,
 * --rack-spares-coordinator: ranks 1..K, the coordinator lives); --kill-tenth: 10% of the
 * nodes at once; --domains D --kill-domain: every node of the coordinator's failure domain (node
 * i's domain is d<i*D/N>, carried in its node record as --failure-domain). Each measured: kill -> the next round committed, -> every survivor has it, ->
 * every survivor could start its workers (it has the new round's master).
 *
 * Usage: rdzv-sim --endpoints HOST:PORT [--nodes N] [--procs P] [--ttl SEC] [--kill-one]
 *                 [--kill-coordinator] [--kill-rack] [--kill-tenth] [--run-id ID] [--timeout SEC]
 *                 [--max-bytes B] (exit 1 if a non-coordinator received more than B bytes in
 *                 a round after its join) [--ring] [--ring-interval MS] [--ring-pass MS]
 * --ring: every node in the liveness ring as an agent with --liveness on: the product's node unit
 * (agent/node/node.h) makes every decision, its sockets on bench/ring_host.h's epoll thread: a
 * real listener and a real TCP link to its successor per node, heartbeats every --ring-interval
 * (200 ms) served by each process every --ring-pass (10 ms); a killed node's sockets are closed
 * as the kernel closes a SIGKILLed process's, and the suspicion, the coordinator's probe and the
 * lease revoke go through rendezvous/suspect.c as in the agent.
 * --names real, --noise K, --rx-iface IF, --metrics-url URL (bench/sim_wire.h, wire_bytes.sh):
 * fleet-like node names, 0..K unrelated keys written before each join, and each kill round's
 * bytes on IF per node (and etcd's grpc sent bytes), plus a steady round's rate over 5 s.
 * Prints key=value lines (for bench scripts) and a summary line.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ea_time.h"
#include "kv.h"
#include "session.h"
#include "suspect.h"
#include "node.h"
#include "ring_host.h"
#include "sim_wire.h"
#include "rdzv_sim.h"

enum rec_type {
    REC_JOINING = 1,
    REC_JOINED,
    REC_WROTE,
    REC_SEEN,
    REC_FATAL,
    REC_KILLED,
    REC_READY, /* the node could start its workers: it has its assignment and the round's master */
    REC_RING,  /* at a child's end, its nodes' ring counters: bytes = suspicions written or held,
                  keys = evictions, claims = false alarms */
};

/* One report from a child to the parent (written atomically: < PIPE_BUF). */
struct rec {
    int type;
    int node;
    int64_t round;
    int members;
    int coord;       /* the node coordinates */
    int64_t t_ms;    /* CLOCK_MONOTONIC, the same clock in every process */
    int64_t ev_ms;   /* REC_SEEN: when the store's events that brought the round were read */
    uint64_t bytes;  /* rdzv_stats: bytes received so far */
    uint64_t keys;   /* rdzv_stats: keys written so far */
    uint64_t claims; /* rdzv_stats: claims of `coord` so far */
};


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

/* Renew the lease of every node whose last renewal is over half its TTL old (the sessions renew
 * at a third): called while a process works through one batch of events for all its nodes, so
 * that no node's renewal waits for its neighbours' reads, as it would not in separate agents. */
static void renew_late(struct sim_node *nodes, int joined, const struct opts *o, int out)
{
    int64_t now = ea_now_ms();
    struct ea_error err = {0};
    for (int i = 0; i < joined; i++) {
        struct sim_node *n = &nodes[i];
        if (n->dead || now - n->renewed_ms <= o->ttl_ms / 2)
            continue;
        int r = rdzv_keepalive(n->s, now, &err);
        if (r == KV_ENOLEASE)
            fatal(out, n->id, "lease lost", &err);
        if (r > 0)
            n->renewed_ms = now;
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

/* A ring report of one of this process's nodes (ring_host_reports): its node decides. */
static void on_ring_report(void *ctx, const struct ring_report *x)
{
    struct sim_node *n = ctx;
    if (!n->dead)
        node_on_report(&n->node, x);
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
static int child_main(const struct opts *o, int first, int count, int out, int ctl)
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
            int ka = rdzv_keepalive(n->s, now, &err);
            if (ka == KV_ENOLEASE)
                fatal(out, n->id, "lease lost", &err);
            if (ka > 0)
                n->renewed_ms = now;
            observe(n, out, now);
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
        if (pfd[2].revents)
            ring_host_reports(host, on_ring_report);
        /* The store's events first, and those that arrived while the last batch was applied
         * (one commit reaches the 625 sessions' watches as 625 events, which may come in a few
         * batches) before the next ticks: a node's events do not wait for other nodes' ticks.
         * At most 4 batches in a row, so that the ticks (keepalives) are not starved. */
        for (int batch = 0; pfd[0].revents && batch < 4; batch++) {
            struct kv_event *ev = NULL;
            size_t nev = 0;
            if (kv_read_events(kv, &ev, &nev, &err) < 0)
                fatal(out, first, "events", &err);
            int64_t t_read = ea_now_ms();
            for (int i = 0; i < joined; i++) {
                if (nodes[i].dead)
                    continue;
                if (rdzv_apply_events(nodes[i].s, ev, nev, &err) < 0)
                    fprintf(stderr, "rdzv-sim: node %d: events: %s\n", nodes[i].id, err.msg);
                /* an agent acts on what its events brought at once (agent.c: on_store_events),
                 * before its next tick; node i is not charged with nodes 0..i-1's ticks */
                observe(&nodes[i], out, t_read);
                if (i % 32 == 31)
                    renew_late(nodes, joined, o, out);
            }
            kv_events_free(ev, nev);
            if (poll(pfd, 1, 0) < 0 && errno != EINTR)
                return 1;
        }
        if (pfd[1].revents) {
            char c = 0;
            unsigned char quota = 0; /* 'p': how many of this process's nodes die */
            if (read(ctl, &c, 1) <= 0 || c == 'q' || (c == 'p' && read(ctl, &quota, 1) != 1))
                break;
            int killed = 0;
            for (int i = count - 1; i >= 0; i--) {
                struct sim_node *n = &nodes[i];
                if (n->dead || i >= joined)
                    continue;
                bool coord = rdzv_is_coordinator(n->s);
                int idx = rdzv_my_index(n->s), lo = o->rack_spares_coord ? 1 : 0;
                if ((c == 'k' && !coord && killed < 1 && first + count == o->nodes) ||
                    (c == 'c' && coord) || (c == 'p' && !coord && killed < quota) ||
                    (c == 'r' && ((coord && !o->rack_spares_coord) ||
                                  (!coord && idx >= lo && idx < lo + o->rack_size))) ||
                    (c == 'd' && domain_of(o, n->id) == coord_domain(o, n->s))) {
                    kill_node(n, out);
                    killed++;
                }
            }
            report(out, REC_KILLED, -1, 0, killed); /* this child is done killing */
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

static int64_t store_revision(const struct opts *o)
{
    struct kv_config kc = {.backend = "etcd", .endpoints = o->endpoints};
    struct kv *kv;
    struct kv_list l = {0};
    struct ea_error err = {0};
    if (kv_open(&kc, &kv, &err) < 0 || kv_list(kv, "/rdzv-sim-probe/", &l, &err) < 0) {
        fprintf(stderr, "rdzv-sim: %s\n", err.msg);
        exit(3);
    }
    int64_t rev = l.revision;
    kv_list_clear(&l);
    kv_close(kv);
    return rev;
}

struct phase {
    int seen;  /* nodes that saw a round with `want` members */
    int ready; /* ... and could start their workers in it (they have its master) */
    int64_t last_ready;
    int64_t commit; /* time of the write that committed it, 0 until then */
    int64_t last_seen;
    int64_t last_event; /* the latest ev_ms of those nodes: when the last one got the commit */
    int64_t round;
};

/* Per node: counters at the round it last saw, and at the one before (for per-round deltas). */
struct node_acct {
    uint64_t bytes, keys, prev_bytes, prev_keys, claims, prev_claims;
    int coord;
};

struct sim {
    int in;
    struct node_acct *acct;
    int64_t last_join, last_join_start;
    int joined, killed, kill_acks;
    int64_t last_round; /* the newest round any node committed */
    bool *dead;
    int n_nodes;
};

/* Read one report (or time out) and account for it; a node's SEEN of a round of `want`
 * members after `min_round` counts for `ph`. */
static int read_one(struct sim *sm, int want, int64_t min_round, struct phase *ph, int64_t deadline)
{
    struct pollfd p = {.fd = sm->in, .events = POLLIN};
    int64_t left = deadline - ea_now_ms();
    if (left <= 0 || poll(&p, 1, (int)left) <= 0)
        return -ETIMEDOUT;
    struct rec r;
    if (read(sm->in, &r, sizeof(r)) != (ssize_t)sizeof(r))
        return -EPIPE;
    switch (r.type) {
    case REC_JOINING:
        if (r.t_ms > sm->last_join_start)
            sm->last_join_start = r.t_ms;
        break;
    case REC_JOINED:
        ++sm->joined;
        if (r.t_ms > sm->last_join)
            sm->last_join = r.t_ms;
        break;
    case REC_WROTE:
        if (r.round > sm->last_round)
            sm->last_round = r.round;
        if (r.members == want && r.round > min_round && !ph->commit) {
            ph->commit = r.t_ms;
            ph->round = r.round;
        }
        break;
    case REC_SEEN:
        if (r.members == want && r.round > min_round) {
            struct node_acct *a = &sm->acct[r.node];
            a->prev_bytes = a->bytes;
            a->prev_keys = a->keys;
            a->prev_claims = a->claims;
            a->bytes = r.bytes;
            a->keys = r.keys;
            a->claims = r.claims;
            a->coord = r.coord;
            ph->seen++;
            if (r.t_ms > ph->last_seen)
                ph->last_seen = r.t_ms;
            if (r.ev_ms > ph->last_event)
                ph->last_event = r.ev_ms;
        }
        break;
    case REC_READY:
        if (r.members == want && r.round > min_round) {
            ph->ready++;
            if (r.t_ms > ph->last_ready)
                ph->last_ready = r.t_ms;
        }
        break;
    case REC_KILLED:
        if (r.node < 0) {
            sm->kill_acks++;
        } else {
            sm->killed++;
            sm->dead[r.node] = true;
        }
        break;
    case REC_FATAL:
        return -EIO;
    }
    return 0;
}

/* Read reports until every live node saw a round of `want` members and could start its workers
 * in it (or the deadline). */
static int collect(struct sim *sm, int want, int64_t min_round, struct phase *ph, int64_t deadline)
{
    while (ph->seen < want || ph->ready < want) {
        int r = read_one(sm, want, min_round, ph, deadline);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Bytes received and keys written in the last round, per node: mean and max of the nodes that
 * do not coordinate, and the coordinator's. */
static void print_costs(const char *tag, const struct sim *sm, int n, const bool *dead)
{
    double sum_b = 0, sum_k = 0;
    uint64_t max_b = 0, coord_b = 0, coord_k = 0, max_k = 0, claims = 0;
    int cnt = 0;
    for (int i = 0; i < n; i++) {
        if (dead[i])
            continue;
        const struct node_acct *a = &sm->acct[i];
        claims += a->claims - a->prev_claims;
        uint64_t b = a->bytes - a->prev_bytes, k = a->keys - a->prev_keys;
        if (a->coord) {
            coord_b = b;
            coord_k = k;
            continue;
        }
        sum_b += (double)b;
        sum_k += (double)k;
        max_b = b > max_b ? b : max_b;
        max_k = k > max_k ? k : max_k;
        cnt++;
    }
    printf("%s_bytes_per_node_mean=%.0f\n%s_bytes_per_node_max=%" PRIu64 "\n", tag,
           cnt ? sum_b / cnt : 0, tag, max_b);
    printf("%s_keys_written_per_node_mean=%.2f\n%s_keys_written_per_node_max=%" PRIu64 "\n", tag,
           cnt ? sum_k / cnt : 0, tag, max_k);
    printf("%s_coordinator_bytes=%" PRIu64 "\n%s_coordinator_keys_written=%" PRIu64 "\n", tag,
           coord_b, tag, coord_k);
    /* claims of `coord` in the round by the nodes still live (the ones that died took theirs
     * with them: a claim by a node that then died is not counted) */
    printf("%s_claims=%" PRIu64 "\n", tag, claims);
}


/* Send a kill command to every child and wait for their acknowledgements; the number of nodes
 * killed is in sm->killed. */
static int kill_round(struct sim *sm, const int *ctl, int procs, char cmd, int64_t deadline)
{
    sm->kill_acks = 0;
    for (int p = 0; p < procs; p++) {
        /* 'p': a tenth of all nodes, spread over the processes (the last ones take the rest) */
        int total = sm->n_nodes / 10, share = total / procs + (p < total % procs);
        unsigned char msg[2] = {(unsigned char)cmd, (unsigned char)(share > 255 ? 255 : share)};
        if (write(ctl[p], msg, cmd == 'p' ? 2 : 1) != (cmd == 'p' ? 2 : 1))
            return -EPIPE;
    }
    struct phase none = {0};
    while (sm->kill_acks < procs) {
        int r = read_one(sm, -1, INT64_MAX, &none, deadline);
        if (r < 0)
            return r;
    }
    return 0;
}

/* One kill phase: the command, then every survivor in a round of the new size. */
/* With --rx-iface: what every node receives in a steady round (keepalive replies, mostly) over
 * `ms`, reading the children's reports meanwhile. */
static void wire_idle(struct sim *sm, const struct opts *o, int live, int64_t ms)
{
    struct sim_wire_mark w0;
    sim_wire_begin(o->rx_iface, o->metrics_url, &w0);
    struct phase none = {0};
    while (read_one(sm, -1, INT64_MAX, &none, w0.t_ms + ms) == 0) {
    }
    sim_wire_end(o->rx_iface, o->metrics_url, &w0, "idle", live);
}

static int kill_phase(struct sim *sm, const struct opts *o, const int *ctl, char cmd,
                      const char *tag, int *live, int64_t *round, bool *dead)
{
    int before = sm->killed;
    struct sim_wire_mark w0;
    sim_wire_begin(o->rx_iface, o->metrics_url, &w0);
    int64_t t_kill = ea_now_ms();
    int r = kill_round(sm, ctl, o->procs, cmd, t_kill + 30000);
    if (r < 0)
        return r;
    int n_killed = sm->killed - before;
    int64_t round_before = *round;
    *live -= n_killed;
    struct phase ph = {0};
    r = collect(sm, *live, *round, &ph, t_kill + 3 * o->ttl_ms + 30000);
    if (r < 0) {
        fprintf(stderr, "rdzv-sim: %s: %d/%d saw the next round: %s\n", tag, ph.seen, *live,
                strerror(-r));
        return r;
    }
    *round = ph.round;
    (void)dead;
    sim_wire_end(o->rx_iface, o->metrics_url, &w0, tag, *live);
    printf("%s_killed=%d\n%s_to_commit_ms=%" PRId64 "\n%s_to_all_seen_ms=%" PRId64 "\n", tag,
           n_killed, tag, ph.commit - t_kill, tag, ph.last_seen - t_kill);
    printf("%s_to_all_ready_ms=%" PRId64 "\n", tag, ph.last_ready - t_kill);
    /* 1: the survivors went on in one round (every dead node out at once) */
    printf("%s_rounds=%" PRId64 "\n", tag, ph.round - round_before);
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o = {
        .run_id = "rdzv-sim", .nodes = 1000, .procs = 8, .ttl_ms = 10000, .timeout_ms = 120000,
        .ring_interval_ms = 200, .ring_pass_ms = 10, .rack_size = 8};
    int pr = sim_parse_opts(argc, argv, &o);
    if (pr >= 0)
        return pr;
    signal(SIGPIPE, SIG_IGN); /* a child that died (a lost lease) must not kill the report */
    struct rlimit nofile; /* --ring: three sockets a node (listener, two links), ~1,250 a process */
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    int rep[2];
    if (pipe(rep) < 0)
        return 3;
    pid_t *pids = calloc((size_t)o.procs, sizeof(*pids));
    int *ctl = calloc((size_t)o.procs, sizeof(*ctl));
    for (int p = 0, first = 0; p < o.procs; p++) {
        int count = o.nodes / o.procs + (p < o.nodes % o.procs);
        int c[2];
        if (pipe(c) < 0)
            return 3;
        pids[p] = fork();
        if (pids[p] == 0) {
            close(rep[0]);
            close(c[1]);
            _exit(child_main(&o, first, count, rep[1], c[0]));
        }
        close(c[0]);
        ctl[p] = c[1];
        first += count;
    }
    close(rep[1]);
    bool *dead = calloc((size_t)o.nodes, sizeof(*dead));
    struct sim sm = {.in = rep[0],
                     .acct = calloc((size_t)o.nodes, sizeof(*sm.acct)),
                     .dead = dead,
                     .n_nodes = o.nodes};
    int64_t rev0 = store_revision(&o), t0 = ea_now_ms();
    for (int p = 0; p < o.procs; p++)
        if (write(ctl[p], "g", 1) != 1)
            return 3;
    int64_t deadline = t0 + o.timeout_ms;
    int rc = 0, live = o.nodes;
    struct phase p1 = {0};
    int r = collect(&sm, o.nodes, 0, &p1, deadline);
    int64_t rev1 = store_revision(&o);
    if (r < 0) {
        fprintf(stderr,
                "rdzv-sim: phase 1: %d/%d joined, %d/%d saw the round, %d could start: %s\n",
                sm.joined, o.nodes, p1.seen, o.nodes, p1.ready, strerror(-r));
        rc = 1;
        goto out;
    }
    printf("nodes=%d procs=%d ttl_s=%.1f\n", o.nodes, o.procs, (double)o.ttl_ms / 1000);
    printf("joined_ms=%" PRId64 "\n", sm.last_join - t0);
    /* the last node's key is written between the start and the end of its join (the end also
     * reads the run and starts the watches, so the commit may come before it) */
    printf("commit_after_last_join_start_ms=%" PRId64 "\n", p1.commit - sm.last_join_start);
    printf("commit_after_last_join_done_ms=%" PRId64 "\n", p1.commit - sm.last_join);
    printf("commit_to_all_seen_ms=%" PRId64 "\n", p1.last_seen - p1.commit);
    /* the breakdown: when the last node's process read the events that brought the commit (the
     * rest, to all_seen, is the first round's chunk reads, one per node after those events) */
    printf("commit_to_all_events_ms=%" PRId64 "\n", p1.last_event - p1.commit);
    printf("last_join_to_all_seen_ms=%" PRId64 "\n", p1.last_seen - sm.last_join_start);
    /* ... and could start its workers: group rank 0 published the master once it had its chunk,
     * and it reached every node */
    printf("commit_to_all_ready_ms=%" PRId64 "\n", p1.last_ready - p1.commit);
    printf("last_join_to_all_ready_ms=%" PRId64 "\n", p1.last_ready - sm.last_join_start);
    printf("writes_per_node=%.2f\n", (double)(rev1 - rev0) / o.nodes);
    /* the first round includes each node's join (listing what it watches) */
    print_costs("join", &sm, o.nodes, dead);
    int64_t round = p1.round;
    if (o.hold_ms > 0) { /* an even run: nobody dies, so every round after the first is false */
        int64_t end = ea_now_ms() + o.hold_ms;
        struct phase none = {0};
        int hr;
        while ((hr = read_one(&sm, -1, INT64_MAX, &none, end)) == 0) {
        }
        printf("hold_s=%.0f\nhold_rounds=%" PRId64 "\n", (double)o.hold_ms / 1000,
               sm.last_round - round);
        if (hr != -ETIMEDOUT || sm.last_round != round) {
            fprintf(stderr, "rdzv-sim: the even run %s\n",
                    hr != -ETIMEDOUT ? "ended early (a node failed)" : "committed rounds");
            rc = 1;
            goto out;
        }
    }
    if (o.rx_iface)
        wire_idle(&sm, &o, live, 5000);
    struct {
        bool on;
        char cmd;
        const char *tag;
    } kills[] = {{o.kill_one, 'k', "kill_one"},
                 {o.kill_coord, 'c', "kill_coordinator"},
                 {o.kill_rack, 'r', "kill_rack"},
                 {o.kill_tenth, 'p', "kill_tenth"},
                 {o.kill_domain, 'd', "kill_domain"}};
    for (size_t k = 0; k < sizeof(kills) / sizeof(kills[0]) && rc == 0; k++) {
        if (!kills[k].on)
            continue;
        if (kill_phase(&sm, &o, ctl, kills[k].cmd, kills[k].tag, &live, &round, dead) < 0) {
            rc = 1;
            break;
        }
        /* a round after the join: what a node receives per round */
        print_costs(kills[k].tag, &sm, o.nodes, dead);
        if (o.max_bytes > 0) {
            for (int i = 0; i < o.nodes; i++) {
                const struct node_acct *a = &sm.acct[i];
                if (!a->coord && a->bytes - a->prev_bytes > (uint64_t)o.max_bytes &&
                    a->prev_bytes) {
                    fprintf(stderr,
                            "rdzv-sim: %s: node %d received %" PRIu64
                            " bytes in the round, more than --max-bytes %ld\n",
                            kills[k].tag, i, a->bytes - a->prev_bytes, o.max_bytes);
                    rc = 1;
                    break;
                }
            }
        }
    }
out:
    for (int p = 0; p < o.procs; p++)
        if (write(ctl[p], "q", 1) != 1)
            kill(pids[p], SIGKILL);
    /* read the children's reports until they have all closed the pipe (a child blocked on a
     * full pipe would never see the 'q'), taking each one's last: its nodes' ring counters */
    uint64_t sus = 0, ev = 0, fa = 0;
    for (struct rec rr; read(rep[0], &rr, sizeof(rr)) == (ssize_t)sizeof(rr);)
        if (rr.type == REC_RING)
            sus += rr.bytes, ev += rr.keys, fa += rr.claims;
    for (int p = 0; p < o.procs; p++)
        waitpid(pids[p], NULL, 0);
    if (o.ring) {
        printf("ring_suspicions=%" PRIu64 "\nring_evictions=%" PRIu64
               "\nring_false_alarms=%" PRIu64 "\n",
               sus, ev, fa);
    }
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    printf("cpu_s=%.2f maxrss_mib_per_proc=%.1f\n",
           (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
           (double)ru.ru_maxrss / 1024);
    free(sm.acct);
    free(dead);
    free(pids);
    free(ctl);
    return rc;
}
