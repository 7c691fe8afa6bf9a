// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv-sim: many rendezvous participants against one etcd, cheaply (bench issue, metric 7).
 * Each simulated node is a real rdzv session (rendezvous/session.c) with its own lease, node key,
 * watches and assignment, exactly as an agent's; only the worker launching is left out. The
 * nodes are spread over --procs processes (bench/sim_child.c), each running one poll() loop over
 * its sessions, which share one store connection per process (each session still has its own
 * lease, renewed with the process's other due leases in one batch, and its own watches), so
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
