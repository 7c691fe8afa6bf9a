// SPDX-License-Identifier: Apache-2.0
/*
 * fleet-faults: a fleet of simulated nodes under routine faults (issue 30). A 3-member etcd
 * cluster on free loopback ports (tests/etcd/etcd_harness), N simulated nodes — real rendezvous
 * sessions with their own leases and watches, hosted --procs to a process (bench/lib/fleet_host.c)
 * — commit a round, then the faults run one after another:
 *
 *   compact_restart      compaction at the current revision, then one member killed and restarted
 *   compact_restart_all  compaction again, then every member killed and all restarted at once
 *   leader_kill          the raft leader SIGKILLed, restarted a second later
 *   rack                 the coordinator and group ranks 1-7 killed at once (claims of `coord`
 *                        counted: at most --max-claims)
 *   fifth                20% of the live nodes killed at once (drawn with --seed)
 *   partition            a follower SIGSTOPped — it answers neither its clients nor its peers, its
 *                        connections stay open (a partition as its clients and peers see it; not
 *                        a network cut: the member's own clock and timers stop too) — and one node
 *                        killed: the next round must reach every live node through the other two
 *                        members while it is stopped; SIGCONT once it has, and the round stays
 * After each store fault (the first three) one node leaves gracefully: a commit must still reach
 * every node through the restarted cluster. A killed node is SIGKILLed as an agent would be: no
 * leave, its lease expires after the TTL.
 *
 * Checked after every fault (each violation is a line "VIOLATION after FAULT: INVARIANT: ..."; the
 * exit status is 1 if there was any):
 *   ranks      every live node in one round (one generation), world size = live nodes, group
 *              ranks unique and 0..n-1 — within 3 TTL + 30 s of the fault
 *   round      a store fault (no node died) keeps the round: the same generation as before
 *   rate       the store's request rate per live node (grpc_server_msg_received_total summed over
 *              the members, divided by the live nodes) is back to its steady level (measured
 *              after the first commit) --settle s after the fault's end (a store fault ends when
 *              the members are healthy again, a node kill when every survivor has the new round,
 *              the partition at SIGCONT): over two lease renewal periods (2/3 TTL) from then, at
 *              most steady x --rate-factor + --rate-slack
 *   leases     no live node lost its lease (the killed ones' expire, they are not counted)
 *   claims     rack: at most --max-claims claims of `coord` by the survivors
 *
 * Usage: fleet-faults [--nodes N] [--procs P] [--ttl SEC] [--seed S] [--faults LIST]
 *                     [--settle SEC] [--rate-factor F] [--rate-slack R] [--max-claims C] [--keep]
 * Prints one line per fault with its figures, and key=value lines for scripts.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ea_time.h"
#include "etcd.h"
#include "etcd_harness.h"
#include "fleet_host.h"
#include "kv.h"

#define MEMBERS 3
#define PREFIX "/elastic/fleet-faults/"

struct opts {
    int nodes, procs, max_claims;
    int64_t ttl_ms, settle_ms;
    uint64_t seed;
    double rate_factor, rate_slack;
    const char *faults;
    bool keep;
};

struct drv {
    struct opts o;
    struct etcd_harness h;
    struct kv *kv; /* the driver's own handle, opened after the hosts were forked */
    int in, *ctl;
    pid_t *pids;
    struct ff_rec *view; /* per node: its last reported view */
    uint64_t *claims0;   /* per node: its claims of `coord` when the current fault began */
    bool *dead;
    int live, joined, acks, acked_kills, lease_losses;
    long msg_prev[MEMBERS];
    int stopped;   /* the SIGSTOPped member, -1: none */
    double steady; /* requests/s per node */
    int violations;
    uint64_t rng;
    int64_t t_last_converged;
};

static uint64_t next_rand(struct drv *d) /* splitmix64 */
{
    uint64_t z = (d->rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void violation(struct drv *d, const char *fault, const char *inv, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void violation(struct drv *d, const char *fault, const char *inv, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "fleet-faults: VIOLATION after %s: %s: %s\n", fault, inv, msg);
    printf("violation=%s:%s\n", fault, inv);
    d->violations++;
}

/* Read one record (or time out) and account for it. */
static int read_one(struct drv *d, int64_t deadline)
{
    struct pollfd p = {.fd = d->in, .events = POLLIN};
    int64_t left = deadline - ea_now_ms();
    if (left <= 0)
        return -ETIMEDOUT;
    int pr = poll(&p, 1, (int)left);
    if (pr < 0 && errno == EINTR)
        return 0;
    if (pr <= 0)
        return -ETIMEDOUT;
    struct ff_rec r;
    if (read(d->in, &r, sizeof(r)) != (ssize_t)sizeof(r))
        return -EPIPE;
    switch (r.type) {
    case FF_JOINED:
        d->joined++;
        break;
    case FF_VIEW:
        d->view[r.node] = r;
        break;
    case FF_LEASE_LOST:
        if (!d->dead[r.node])
            d->lease_losses++;
        break;
    case FF_KILLED:
        if (!d->dead[r.node]) {
            d->dead[r.node] = true;
            d->live--;
        }
        break;
    case FF_ACK:
        d->acks++;
        d->acked_kills += r.world;
        break;
    case FF_FATAL:
        fprintf(stderr, "fleet-faults: a host process failed (node %d)\n", r.node);
        return -EIO;
    }
    return 0;
}

/* Keep reading records until `until` (a fault's or a window's duration, not a synchronisation). */
static int pump(struct drv *d, int64_t until)
{
    for (;;) {
        int r = read_one(d, until);
        if (r == -ETIMEDOUT)
            return 0;
        if (r < 0)
            return r;
    }
}

/* ---- the request rate, from every member's /metrics ---- */

/* gRPC messages the members received since the last call (a restarted member counts from 0; a
 * stopped or dead one is not asked). */
static long msgs_since(struct drv *d)
{
    long sum = 0;
    for (int i = 0; i < MEMBERS; i++) {
        if (d->h.m[i].pid <= 0 || i == d->stopped)
            continue;
        long v = etcd_harness_metric(&d->h, i, "grpc_server_msg_received_total", "");
        if (v < 0)
            continue;
        sum += v >= d->msg_prev[i] ? v - d->msg_prev[i] : v;
        d->msg_prev[i] = v;
    }
    return sum;
}

/* A rate's window: two renewal periods (a node renews its lease every third of the TTL, and the
 * nodes that joined together renew together: a shorter window may hold no renewal at all). */
static int64_t window_ms(const struct drv *d)
{
    return 2 * d->o.ttl_ms / 3 + 200;
}

/* Requests per second per live node over [now, now + ms]. */
static double rate_over(struct drv *d, int64_t ms, int *err)
{
    msgs_since(d);
    int64_t t0 = ea_now_ms();
    *err = pump(d, t0 + ms);
    long m = msgs_since(d);
    double secs = (double)(ea_now_ms() - t0) / 1000.0;
    return d->live > 0 ? (double)m / secs / d->live : 0;
}

/* ---- convergence: one round, ranks 0..n-1 ---- */

struct conv {
    int64_t gen;
    int on_gen, other, off; /* live nodes on gen, on another gen, not running */
    int dup_rank, bad_rank;
    uint64_t claims, requests;
};

static bool converged(struct drv *d, struct conv *c)
{
    memset(c, 0, sizeof(*c));
    int n = d->o.nodes;
    /* the generation most live nodes are on */
    for (int i = 0; i < n; i++) {
        if (d->dead[i])
            continue;
        c->claims += d->view[i].claims;
        c->requests += d->view[i].requests;
        if (d->view[i].gen > c->gen && d->view[i].round > 0)
            c->gen = d->view[i].gen;
    }
    unsigned char *seen = calloc(n > 0 ? (size_t)n : 1, 1);
    for (int i = 0; i < n; i++) {
        if (d->dead[i])
            continue;
        const struct ff_rec *v = &d->view[i];
        if (v->round <= 0) {
            c->off++;
        } else if (v->gen != c->gen || v->world != d->live) {
            c->other++;
        } else {
            c->on_gen++;
            if (v->rank < 0 || v->rank >= d->live)
                c->bad_rank++;
            else if (seen[v->rank]++)
                c->dup_rank++;
        }
    }
    free(seen);
    return c->on_gen == d->live;
}

/* Wait until every live node is in one round of the live nodes with a generation other than
 * `old_gen` (0: any), then check its ranks. */
static int wait_converged(struct drv *d, const char *fault, int64_t old_gen, bool new_round,
                          int64_t deadline, struct conv *c)
{
    for (;;) {
        if (converged(d, c) && (!new_round || c->gen != old_gen))
            break;
        int r = read_one(d, deadline);
        if (r == -ETIMEDOUT) {
            violation(d, fault, "ranks",
                      "no convergence by the deadline: of %d live nodes %d in the newest round "
                      "(generation %" PRId64 ", %s), %d in another or of another size, %d in none",
                      d->live, c->on_gen, c->gen, c->gen == old_gen ? "the old one" : "new",
                      c->other, c->off);
            return -1;
        }
        if (r < 0)
            return r;
    }
    d->t_last_converged = ea_now_ms();
    if (c->dup_rank || c->bad_rank) {
        violation(d, fault, "ranks",
                  "round of generation %" PRId64 ": %d duplicate and %d out-of-range group ranks "
                  "among %d nodes",
                  c->gen, c->dup_rank, c->bad_rank, d->live);
        return -1;
    }
    if (!new_round && old_gen && c->gen != old_gen)
        violation(d, fault, "round",
                  "no node died but the round changed (generation %" PRId64 " -> %" PRId64 ")",
                  old_gen, c->gen);
    return 0;
}

/* ---- after a fault: convergence, the rate, the leases ---- */

struct fault_ctx {
    const char *name;
    int64_t old_gen;
    bool new_round;     /* nodes died: a new round must come */
    int64_t t_injected; /* the end of the injection */
    int lease0, killed;
    int64_t converged_at; /* set by check_converged */
    struct conv c;
};

static void begin(struct drv *d, struct fault_ctx *f, const char *name)
{
    struct conv c;
    converged(d, &c);
    *f = (struct fault_ctx){.name = name, .old_gen = c.gen, .lease0 = d->lease_losses};
    for (int i = 0; i < d->o.nodes; i++)
        d->claims0[i] = d->view[i].claims;
    d->acks = d->acked_kills = 0;
}

static int check_converged(struct drv *d, struct fault_ctx *f)
{
    int r = wait_converged(d, f->name, f->old_gen, f->new_round,
                           f->t_injected + 3 * d->o.ttl_ms + 30000, &f->c);
    f->converged_at = ea_now_ms();
    return r;
}

/* The rest of the checks once the fault is over at `t_end`; prints the fault's line. */
static int finish(struct drv *d, struct fault_ctx *f, int64_t t_end)
{
    int err = 0;
    double after = rate_over(d, window_ms(d), &err);
    if (!err)
        err = pump(d, t_end + d->o.settle_ms);
    double final = err ? 0 : rate_over(d, window_ms(d), &err);
    if (err)
        return err;
    double bound = d->steady * d->o.rate_factor + d->o.rate_slack;
    uint64_t claims = 0; /* by the nodes alive now (a node that claimed and died is not counted) */
    for (int i = 0; i < d->o.nodes; i++)
        if (!d->dead[i])
            claims += d->view[i].claims - d->claims0[i];
    int lost = d->lease_losses - f->lease0;
    printf("%-20s killed %4d live %5d gen %-8" PRId64 " converged %6" PRId64
           " ms | req/s/node steady %.2f, first window after %.2f, at +%" PRId64
           " s %.2f (bound %.2f) | claims %" PRIu64 " | leases lost %d\n",
           f->name, f->killed, d->live, f->c.gen, f->converged_at - f->t_injected, d->steady, after,
           d->o.settle_ms / 1000, final, bound, claims, lost);
    printf("%s_killed=%d\n%s_converge_ms=%" PRId64 "\n%s_rate_after=%.3f\n%s_rate_final=%.3f\n"
           "%s_claims=%" PRIu64 "\n%s_leases_lost=%d\n",
           f->name, f->killed, f->name, f->converged_at - f->t_injected, f->name, after, f->name,
           final, f->name, claims, f->name, lost);
    fflush(stdout);
    if (final > bound)
        violation(d, f->name, "rate",
                  "%.2f requests/s per node %" PRId64 " s after the fault (steady %.2f, bound "
                  "%.2f): a loop",
                  final, d->o.settle_ms / 1000, d->steady, bound);
    if (lost > 0)
        violation(d, f->name, "leases", "%d live node(s) lost their lease", lost);
    if (!strcmp(f->name, "rack") && claims > (uint64_t)d->o.max_claims)
        violation(d, f->name, "claims", "%" PRIu64 " claims of coord (at most %d)", claims,
                  d->o.max_claims);
    return 0;
}

/* ---- the faults ---- */

static int leader(struct drv *d)
{
    static char buf[4 << 20];
    for (int i = 0; i < MEMBERS; i++)
        if (d->h.m[i].pid > 0 && i != d->stopped &&
            etcd_harness_http_get(d->h.m[i].health_port, "/metrics", buf, sizeof(buf), 3000) &&
            strstr(buf, "\netcd_server_is_leader 1"))
            return i;
    return -1;
}

static int compact(struct drv *d, const char *fault)
{
    struct kv_list l = {0};
    struct ea_error err = {0};
    if (kv_list(d->kv, PREFIX "state", &l, &err) < 0 || etcd_compact(d->kv, l.revision, &err) < 0) {
        fprintf(stderr, "fleet-faults: %s: compaction: %s\n", fault, err.msg);
        kv_list_clear(&l);
        return -1;
    }
    printf("%s_compacted_at=%" PRId64 "\n", fault, l.revision);
    kv_list_clear(&l);
    return 0;
}

/* Kill nodes by id on every host, wait for the hosts' acknowledgements. */
static int kill_ids(struct drv *d, const uint32_t *ids, uint32_t n, char cmd)
{
    size_t len = 1 + (cmd != FF_CMD_RACK ? sizeof(n) + n * sizeof(*ids) : 0);
    char *msg = malloc(len);
    msg[0] = cmd;
    if (cmd != FF_CMD_RACK) {
        memcpy(msg + 1, &n, sizeof(n));
        memcpy(msg + 1 + sizeof(n), ids, n * sizeof(*ids));
    }
    for (int p = 0; p < d->o.procs; p++)
        if (write(d->ctl[p], msg, len) != (ssize_t)len) {
            free(msg);
            return -EPIPE;
        }
    free(msg);
    while (d->acks < d->o.procs) {
        int r = read_one(d, ea_now_ms() + 30000);
        if (r < 0)
            return r;
    }
    return d->acked_kills;
}

/* `k` live nodes drawn at random killed (cmd FF_CMD_KILL) or made to leave (FF_CMD_LEAVE). */
static int kill_random(struct drv *d, int k, char cmd)
{
    uint32_t *ids = malloc((size_t)d->live * sizeof(*ids));
    uint32_t n = 0;
    for (int i = 0; i < d->o.nodes; i++)
        if (!d->dead[i])
            ids[n++] = (uint32_t)i;
    for (uint32_t i = 0; i < (uint32_t)k && i < n; i++) { /* partial Fisher-Yates */
        uint32_t j = i + (uint32_t)(next_rand(d) % (n - i)), t = ids[i];
        ids[i] = ids[j];
        ids[j] = t;
    }
    int r = kill_ids(d, ids, (uint32_t)k < n ? (uint32_t)k : n, cmd);
    free(ids);
    return r;
}

static int run_fault(struct drv *d, const char *name)
{
    struct fault_ctx f;
    begin(d, &f, name);
    int64_t t_end;
    bool store_fault = !strcmp(name, "compact_restart") || !strcmp(name, "compact_restart_all") ||
                       !strcmp(name, "leader_kill");
    if (!strcmp(name, "compact_restart") || !strcmp(name, "compact_restart_all")) {
        if (compact(d, name) < 0)
            return -1;
        int rc = !strcmp(name, "compact_restart") ? etcd_harness_restart(&d->h, 0)
                                                  : etcd_harness_restart_all(&d->h);
        if (rc) {
            fprintf(stderr, "fleet-faults: %s: the members did not come back\n", name);
            return -1;
        }
    } else if (!strcmp(name, "leader_kill")) {
        int l = leader(d);
        if (l < 0) {
            fprintf(stderr, "fleet-faults: %s: no leader found\n", name);
            return -1;
        }
        printf("leader_kill_member=%s\n", d->h.m[l].name);
        etcd_harness_kill(&d->h, l);
        if (pump(d, ea_now_ms() + 1000) < 0 || etcd_harness_restart(&d->h, l)) {
            fprintf(stderr, "fleet-faults: %s: %s did not come back\n", name, d->h.m[l].name);
            return -1;
        }
    }
    if (store_fault) {
        /* the store is back: the same round, the rate back to steady (a re-sync loop shows
         * here: a commit would end it, as the chunks move on) ... */
        f.t_injected = ea_now_ms();
        if (check_converged(d, &f) < 0 || finish(d, &f, f.t_injected) < 0)
            return -1;
        /* ... and a commit still reaches every node: one leaves gracefully, the next round
         * comes within the settle time */
        char tag[64];
        snprintf(tag, sizeof(tag), "%s_commit", name);
        begin(d, &f, tag);
        f.new_round = true;
        int k = kill_random(d, 1, FF_CMD_LEAVE);
        if (k < 0)
            return k;
        f.t_injected = ea_now_ms();
        if (check_converged(d, &f) < 0)
            return -1;
        printf("%-20s left %6d live %5d gen %-8" PRId64 " converged %6" PRId64 " ms\n", tag, k,
               d->live, f.c.gen, f.converged_at - f.t_injected);
        printf("%s_converge_ms=%" PRId64 "\n", tag, f.converged_at - f.t_injected);
        if (d->lease_losses > f.lease0)
            violation(d, tag, "leases", "%d live node(s) lost their lease",
                      d->lease_losses - f.lease0);
        return 0;
    } else if (!strcmp(name, "rack") || !strcmp(name, "fifth")) {
        f.new_round = true;
        int k = !strcmp(name, "rack") ? kill_ids(d, NULL, 0, FF_CMD_RACK)
                                      : kill_random(d, d->live / 5, FF_CMD_KILL);
        if (k < 0)
            return k;
        f.killed = k;
    } else if (!strcmp(name, "partition")) {
        int l = leader(d), m = l == 0 ? 1 : 0;
        f.new_round = true;
        printf("partition_member=%s\n", d->h.m[m].name);
        kill(d->h.m[m].pid, SIGSTOP);
        d->stopped = m;
        int k = kill_random(d, 1, FF_CMD_KILL);
        if (k < 0)
            return k;
        f.killed = k;
        f.t_injected = ea_now_ms();
        int r = check_converged(d, &f); /* through the other two members */
        kill(d->h.m[m].pid, SIGCONT);
        d->stopped = -1;
        if (r < 0)
            return r;
        /* the member is back: nothing changes */
        t_end = ea_now_ms();
        struct fault_ctx again = f;
        again.old_gen = f.c.gen;
        again.new_round = false;
        again.t_injected = t_end;
        if (check_converged(d, &again) < 0)
            return -1;
        return finish(d, &f, t_end);
    } else {
        fprintf(stderr, "fleet-faults: unknown fault '%s'\n", name);
        return -2;
    }
    f.t_injected = ea_now_ms();
    if (check_converged(d, &f) < 0)
        return -1;
    t_end = f.converged_at > f.t_injected ? f.converged_at : f.t_injected;
    return finish(d, &f, t_end);
}

/* ---- the hosts ---- */

static int spawn_hosts(struct drv *d)
{
    int rep[2];
    if (pipe(rep) < 0)
        return -errno;
    fcntl(rep[1], F_SETPIPE_SZ, 1 << 20); /* room for the records of a commit at 10,000 */
    static struct ff_host_opts ho;
    ho = (struct ff_host_opts){
        .endpoints = d->h.endpoints, .prefix = PREFIX, .nodes = d->o.nodes, .ttl_ms = d->o.ttl_ms};
    pid_t parent = getpid();
    for (int p = 0, first = 0; p < d->o.procs; p++) {
        int count = d->o.nodes / d->o.procs + (p < d->o.nodes % d->o.procs);
        int c[2];
        if (pipe(c) < 0)
            return -errno;
        fflush(stdout);
        d->pids[p] = fork();
        if (d->pids[p] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(1);
            close(rep[0]);
            close(c[1]);
            for (int q = 0; q < p; q++)
                close(d->ctl[q]);
            _exit(ff_host_main(&ho, first, count, rep[1], c[0]));
        }
        close(c[0]);
        d->ctl[p] = c[1];
        first += count;
    }
    close(rep[1]);
    d->in = rep[0];
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: fleet-faults [--nodes N] [--procs P] [--ttl SEC] [--seed S] "
               "[--faults LIST] [--settle SEC] [--rate-factor F] [--rate-slack R] "
               "[--max-claims C] [--keep]\n"
               "faults: compact_restart,compact_restart_all,leader_kill,rack,fifth,partition\n");
}

static int parse(int argc, char **argv, struct opts *o)
{
    static const struct option lo[] = {{"nodes", required_argument, 0, 'n'},
                                       {"procs", required_argument, 0, 'p'},
                                       {"ttl", required_argument, 0, 't'},
                                       {"seed", required_argument, 0, 's'},
                                       {"faults", required_argument, 0, 'f'},
                                       {"settle", required_argument, 0, 'S'},
                                       {"rate-factor", required_argument, 0, 'F'},
                                       {"rate-slack", required_argument, 0, 'R'},
                                       {"max-claims", required_argument, 0, 'C'},
                                       {"keep", no_argument, 0, 'k'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
        switch (c) {
        case 'n':
            o->nodes = atoi(optarg);
            break;
        case 'p':
            o->procs = atoi(optarg);
            break;
        case 't':
            o->ttl_ms = (int64_t)(atof(optarg) * 1000);
            break;
        case 's':
            o->seed = strtoull(optarg, NULL, 10);
            break;
        case 'f':
            o->faults = optarg;
            break;
        case 'S':
            o->settle_ms = (int64_t)(atof(optarg) * 1000);
            break;
        case 'F':
            o->rate_factor = atof(optarg);
            break;
        case 'R':
            o->rate_slack = atof(optarg);
            break;
        case 'C':
            o->max_claims = atoi(optarg);
            break;
        case 'k':
            o->keep = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
    }
    if (o->nodes < 16 || o->procs < 1 || o->procs > o->nodes || o->ttl_ms < 2000 ||
        o->settle_ms < 1000 || o->rate_factor < 1) {
        fprintf(stderr, "fleet-faults: need --nodes >= 16, 1 <= --procs <= --nodes, --ttl >= 2, "
                        "--settle >= 1, --rate-factor >= 1\n");
        usage(stderr);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static struct drv d = {.stopped = -1};
    d.o = (struct opts){.nodes = 200,
                        .procs = 4,
                        .ttl_ms = 10000,
                        .seed = 1,
                        .settle_ms = 10000,
                        .rate_factor = 2,
                        .rate_slack = 0.5,
                        .max_claims = 3,
                        .faults = "compact_restart,compact_restart_all,leader_kill,rack,fifth,"
                                  "partition"};
    if (parse(argc, argv, &d.o) < 0)
        return 2;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    signal(SIGPIPE, SIG_IGN);
    d.rng = d.o.seed;
    int n = d.o.nodes, rc = 1;
    d.view = calloc((size_t)n, sizeof(*d.view));
    d.claims0 = calloc((size_t)n, sizeof(*d.claims0));
    d.dead = calloc((size_t)n, sizeof(*d.dead));
    d.pids = calloc((size_t)d.o.procs, sizeof(*d.pids));
    d.ctl = calloc((size_t)d.o.procs, sizeof(*d.ctl));
    d.live = n;
    if (etcd_harness_start(&d.h, MEMBERS) < 0)
        return 1;
    printf("# fleet-faults: %d nodes in %d processes, TTL %.1f s, 3 etcd members, seed %" PRIu64
           ", faults %s\n",
           n, d.o.procs, (double)d.o.ttl_ms / 1000, d.o.seed, d.o.faults);
    fflush(stdout);
    struct ea_error err = {0};
    if (spawn_hosts(&d) < 0 || etcd_harness_open(d.h.endpoints, 5000, NULL, NULL, &d.kv, &err)) {
        fprintf(stderr, "fleet-faults: start: %s\n", err.msg);
        goto out;
    }
    int64_t t0 = ea_now_ms();
    for (int p = 0; p < d.o.procs; p++)
        if (write(d.ctl[p], "g", 1) != 1)
            goto out;
    struct fault_ctx first = {.name = "first_commit", .new_round = true, .t_injected = t0};
    /* the joins: up to 60 s + 20 ms a node */
    first.t_injected = t0 + 20 * (int64_t)n;
    if (check_converged(&d, &first) < 0)
        goto out;
    printf("first_commit_ms=%" PRId64 "\n", first.converged_at - t0);
    /* the steady level: once group rank 0's master reached everyone */
    int perr = pump(&d, ea_now_ms() + 3000);
    d.steady = perr ? 0 : rate_over(&d, window_ms(&d), &perr);
    if (perr < 0)
        goto out;
    printf("steady_rate_per_node=%.3f\n", d.steady);
    char list[256];
    snprintf(list, sizeof(list), "%s", d.o.faults);
    for (char *save = NULL, *f = strtok_r(list, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
        int r = run_fault(&d, f);
        if (r == -2) {
            rc = 2;
            goto out;
        }
        if (r < 0 && d.violations == 0)
            violation(&d, f, "run", "the fault could not be run to its end");
        if (r < 0)
            break;
    }
    rc = d.violations ? 1 : 0;
out:
    if (d.stopped >= 0 && d.h.m[d.stopped].pid > 0)
        kill(d.h.m[d.stopped].pid, SIGCONT);
    /* the hosts go at once (a graceful leave of 10,000 nodes takes minutes on a loaded machine,
     * and the cluster goes next) */
    for (int p = 0; p < d.o.procs; p++)
        if (d.pids[p] > 0)
            kill(d.pids[p], SIGKILL);
    for (int p = 0; p < d.o.procs; p++)
        if (d.pids[p] > 0)
            waitpid(d.pids[p], NULL, 0);
    kv_close(d.kv);
    if (d.o.keep) { /* the members go, their data and logs stay */
        for (int i = 0; i < MEMBERS; i++)
            etcd_harness_kill(&d.h, i);
        printf("kept: %s\n", d.h.dir);
    } else {
        etcd_harness_stop(&d.h);
    }
    struct rusage ru; /* the hosts and the etcd members (reaped by now) */
    getrusage(RUSAGE_CHILDREN, &ru);
    printf("cpu_s=%.2f maxrss_mib_per_proc=%.1f\n",
           (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
           (double)ru.ru_maxrss / 1024);
    printf("violations=%d\n", d.violations);
    if (d.violations)
        fprintf(stderr, "fleet-faults: FAILED: %d violation(s), listed above\n", d.violations);
    free(d.view);
    free(d.claims0);
    free(d.dead);
    free(d.pids);
    free(d.ctl);
    return rc;
}
