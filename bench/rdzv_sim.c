// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv-sim: many rendezvous participants against one etcd, cheaply (bench issue, metric 7).
 * Each simulated node is a real rdzv session (rendezvous/session.c) with its own etcd handle,
 * lease, node key and watch, exactly as an agent's; only the worker launching is left out. The
 * nodes are spread over --procs processes, each running one poll() loop over its sessions, so
 * 1000 nodes cost 1000 sessions instead of 1000 agents, exec-guards and workers.
 *
 * Phase 1: every node joins (--min N-1 --max N: commits when all N are in); measured: last join → the coordinator's commit,
 * commit → every node has seen the round, key writes per node (etcd revision delta).
 * Phase 2 (--kill-one): the last node stops renewing its lease and drops its connection, like a
 * SIGKILLed agent; measured: kill → the next round committed, → every survivor has seen it.
 *
 * Usage: rdzv-sim --endpoints HOST:PORT [--nodes N] [--procs P] [--ttl SEC] [--kill-one]
 *                 [--run-id ID] [--timeout SEC]
 * Prints key=value lines (for bench scripts) and a summary line.
 */
#include <errno.h>
#include <getopt.h>
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

enum rec_type { REC_JOINING = 1, REC_JOINED, REC_WROTE, REC_SEEN, REC_FATAL };

/* One report from a child to the parent (written atomically: < PIPE_BUF). */
struct rec {
    int type;
    int node;
    int64_t round;
    int members;
    int64_t t_ms; /* CLOCK_MONOTONIC, the same clock in every process */
};

struct opts {
    const char *endpoints, *run_id;
    int nodes, procs;
    int64_t ttl_ms, timeout_ms;
    bool kill_one;
};

struct sim_node {
    int id;
    struct kv *kv;
    struct rdzv_session *s;
    int64_t seen_round;
    bool dead;
};

static void report(int fd, int type, int node, int64_t round, int members)
{
    struct rec r = {type, node, round, members, ea_now_ms()};
    if (write(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
        _exit(3);
}

static void fatal(int fd, int node, const char *what, const struct ea_error *err)
{
    fprintf(stderr, "rdzv-sim: node %d: %s: %s\n", node, what, err->msg);
    report(fd, REC_FATAL, node, 0, 0);
    _exit(1);
}

/* Report the committed round a node sees, once per round. */
static void observe(struct sim_node *n, int out)
{
    int64_t gen;
    const struct rdzv_state *st = rdzv_current(n->s, &gen);
    if (st && st->status == RDZV_RUNNING && st->round > n->seen_round && rdzv_my_index(n->s) >= 0) {
        n->seen_round = st->round;
        report(out, REC_SEEN, n->id, st->round, (int)st->n_members);
    }
}

/* The "agent" of nodes [first, first+count): join all, then serve them until told to stop. */
static int child_main(const struct opts *o, int first, int count, int out, int ctl)
{
    struct sim_node *nodes = calloc((size_t)count, sizeof(*nodes));
    struct pollfd *pfd = calloc((size_t)count + 1, sizeof(*pfd));
    char prefix[160];
    snprintf(prefix, sizeof(prefix), "/elastic/%s/", o->run_id);
    struct kv_config kc = {.backend = "etcd", .endpoints = o->endpoints,
                           .request_timeout_ms = 5000};
    struct ea_error err = {0};
    for (int i = 0; i < count; i++) {
        struct sim_node *n = &nodes[i];
        n->id = first + i;
        struct rdzv_config rc = {
            .prefix = prefix,
            .params = {.min_nodes = o->nodes - 1, .max_nodes = o->nodes, .settle_ms = 1000,
                       .last_call_ms = 30000, .lease_ttl_ms = o->ttl_ms},
            .lease_ttl_ms = o->ttl_ms,
        };
        snprintf(rc.self.node_id, sizeof(rc.self.node_id), "sim-%05d", n->id);
        snprintf(rc.self.host, sizeof(rc.self.host), "simhost-%05d", n->id);
        snprintf(rc.self.addr, sizeof(rc.self.addr), "127.0.0.1");
        rc.self.nproc = 1;
        rc.self.pid = getpid();
        if (kv_open(&kc, &n->kv, &err) < 0)
            fatal(out, n->id, "open", &err);
        if (rdzv_session_create(n->kv, &rc, &n->s, &err) < 0)
            fatal(out, n->id, "session", &err);
    }
    char go = 0; /* the parent measures the store first (gRPC must not be set up before fork) */
    if (read(ctl, &go, 1) != 1 || go != 'g')
        return 1;
    /* nodes join one per loop turn, so the ones already in keep renewing and reading events, as
     * separate agents would */
    int joined = 0;
    for (;;) {
        if (joined < count) {
            report(out, REC_JOINING, nodes[joined].id, 0, 0);
            if (rdzv_join(nodes[joined].s, &err) < 0)
                fatal(out, nodes[joined].id, "join", &err);
            report(out, REC_JOINED, nodes[joined].id, 0, 0);
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
                       st && st->status == RDZV_RUNNING ? (int)st->n_members : 0);
            }
            if (rdzv_keepalive(n->s, now, &err) == KV_ENOLEASE)
                fatal(out, n->id, "lease lost", &err);
            observe(n, out);
            int64_t w = rdzv_wake_ms(n->s);
            if (w >= 0 && w < wake)
                wake = w;
        }
        for (int i = 0; i < count; i++)
            pfd[i] = (struct pollfd){
                .fd = nodes[i].dead || i >= joined ? -1 : kv_event_fd(nodes[i].kv),
                .events = POLLIN};
        pfd[count] = (struct pollfd){.fd = ctl, .events = POLLIN};
        int64_t left = wake - ea_now_ms();
        if (poll(pfd, (nfds_t)count + 1, left < 0 ? 0 : (int)left) < 0 && errno != EINTR)
            return 1;
        for (int i = 0; i < joined; i++)
            if (pfd[i].revents && rdzv_on_events(nodes[i].s, &err) < 0)
                fatal(out, nodes[i].id, "events", &err);
        if (pfd[count].revents) {
            char c = 0;
            if (read(ctl, &c, 1) <= 0 || c == 'q')
                break;
            if (c == 'k') { /* the last node dies: no renewal, connection dropped */
                struct sim_node *n = &nodes[count - 1];
                n->dead = true;
                rdzv_session_destroy(n->s);
                kv_close(n->kv);
            }
        }
    }
    for (int i = 0; i < count; i++) {
        if (nodes[i].dead || i >= joined)
            continue;
        rdzv_leave(nodes[i].s, NULL);
        rdzv_session_destroy(nodes[i].s);
        kv_close(nodes[i].kv);
    }
    free(nodes);
    free(pfd);
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
    int seen;         /* nodes that saw a round with `want` members */
    int64_t commit;   /* time of the write that committed it, 0 until then */
    int64_t last_seen;
    int64_t round;
};

/* Read reports until every live node saw a round of `want` members (or the deadline). */
static int collect(int in, int want, int64_t min_round, struct phase *ph, int64_t *last_join,
                   int64_t *last_join_start, int *joined, int64_t deadline)
{
    while (ph->seen < want) {
        struct pollfd p = {.fd = in, .events = POLLIN};
        int64_t left = deadline - ea_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return -ETIMEDOUT;
        struct rec r;
        if (read(in, &r, sizeof(r)) != (ssize_t)sizeof(r))
            return -EPIPE;
        switch (r.type) {
        case REC_JOINING:
            if (r.t_ms > *last_join_start)
                *last_join_start = r.t_ms;
            break;
        case REC_JOINED:
            ++*joined;
            if (r.t_ms > *last_join)
                *last_join = r.t_ms;
            break;
        case REC_WROTE:
            if (r.members == want && r.round > min_round && !ph->commit) {
                ph->commit = r.t_ms;
                ph->round = r.round;
            }
            break;
        case REC_SEEN:
            if (r.members == want && r.round > min_round) {
                ph->seen++;
                if (r.t_ms > ph->last_seen)
                    ph->last_seen = r.t_ms;
            }
            break;
        case REC_FATAL:
            return -EIO;
        }
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: rdzv-sim --endpoints HOST:PORT [--nodes N] [--procs P] [--ttl SEC] "
               "[--kill-one] [--run-id ID] [--timeout SEC]\n");
}

int main(int argc, char **argv)
{
    struct opts o = {.run_id = "rdzv-sim", .nodes = 1000, .procs = 8, .ttl_ms = 10000,
                     .timeout_ms = 120000};
    static const struct option lo[] = {
        {"endpoints", required_argument, 0, 'e'}, {"nodes", required_argument, 0, 'n'},
        {"procs", required_argument, 0, 'p'},     {"ttl", required_argument, 0, 't'},
        {"kill-one", no_argument, 0, 'k'},        {"run-id", required_argument, 0, 'r'},
        {"timeout", required_argument, 0, 'T'},   {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
        switch (c) {
        case 'e': o.endpoints = optarg; break;
        case 'n': o.nodes = atoi(optarg); break;
        case 'p': o.procs = atoi(optarg); break;
        case 't': o.ttl_ms = (int64_t)(atof(optarg) * 1000); break;
        case 'k': o.kill_one = true; break;
        case 'r': o.run_id = optarg; break;
        case 'T': o.timeout_ms = (int64_t)(atof(optarg) * 1000); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!o.endpoints || o.nodes < 2 || o.procs < 1 || o.procs > o.nodes || o.ttl_ms < 1000) {
        fprintf(stderr, "rdzv-sim: need --endpoints, --nodes >= 2, 1 <= --procs <= --nodes, "
                        "--ttl >= 1\n");
        usage(stderr);
        return 2;
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
    int64_t rev0 = store_revision(&o), t0 = ea_now_ms();
    for (int p = 0; p < o.procs; p++)
        if (write(ctl[p], "g", 1) != 1)
            return 3;
    int64_t deadline = t0 + o.timeout_ms, last_join = 0, last_join_start = 0;
    int joined = 0, rc = 0;
    struct phase p1 = {0}, p2 = {0};
    int r = collect(rep[0], o.nodes, 0, &p1, &last_join, &last_join_start, &joined, deadline);
    int64_t rev1 = store_revision(&o);
    if (r < 0) {
        fprintf(stderr, "rdzv-sim: phase 1: %d/%d joined, %d/%d saw the round: %s\n", joined,
                o.nodes, p1.seen, o.nodes, strerror(-r));
        rc = 1;
        goto out;
    }
    printf("nodes=%d procs=%d ttl_s=%.1f\n", o.nodes, o.procs, (double)o.ttl_ms / 1000);
    printf("joined_ms=%" PRId64 "\n", last_join - t0);
    /* the last node's key is written between the start and the end of its join (the end also
     * lists the run and starts the watch, so the commit may come before it) */
    printf("commit_after_last_join_start_ms=%" PRId64 "\n", p1.commit - last_join_start);
    printf("commit_after_last_join_done_ms=%" PRId64 "\n", p1.commit - last_join);
    printf("commit_to_all_seen_ms=%" PRId64 "\n", p1.last_seen - p1.commit);
    printf("writes_per_node=%.2f\n", (double)(rev1 - rev0) / o.nodes);
    if (o.kill_one) {
        int64_t t_kill = ea_now_ms();
        /* the last process's last node dies */
        if (write(ctl[o.procs - 1], "k", 1) != 1)
            return 3;
        r = collect(rep[0], o.nodes - 1, p1.round, &p2, &last_join, &last_join_start, &joined,
                    t_kill + 3 * o.ttl_ms + 30000);
        if (r < 0) {
            fprintf(stderr, "rdzv-sim: phase 2: %d/%d saw the next round: %s\n", p2.seen,
                    o.nodes - 1, strerror(-r));
            rc = 1;
            goto out;
        }
        printf("kill_to_commit_ms=%" PRId64 "\n", p2.commit - t_kill);
        printf("kill_to_all_seen_ms=%" PRId64 "\n", p2.last_seen - t_kill);
    }
out:
    for (int p = 0; p < o.procs; p++)
        if (write(ctl[p], "q", 1) != 1)
            kill(pids[p], SIGKILL);
    for (int p = 0; p < o.procs; p++)
        waitpid(pids[p], NULL, 0);
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    printf("cpu_s=%.2f maxrss_mib_per_proc=%.1f\n",
           (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
           (double)ru.ru_maxrss / 1024);
    free(pids);
    free(ctl);
    return rc;
}
