// SPDX-License-Identifier: Apache-2.0
/*
 * coord-bench: the coordinator's CPU per event at fleet scale (issue 30, part 3). One real
 * coordinator session on the memory store; the rest of the fleet are node records written
 * straight to the store. N nodes join, round 1 commits; then K of them are lost, `batch` at a
 * time every `gap` ms of simulated time (etcd revokes at most 1,000 leases a second), and the
 * coordinator applies each batch's events and ticks, as the agent's loop does, until a round of
 * N - K members is committed. Measured: the coordinator's thread CPU in rdzv_apply_events_at()
 * and rdzv_tick() (the memory store's work in its own transactions included), for the cold start
 * and for the loss, the part of it in the ticks that wrote a round (O(N) each: assignment,
 * chunks), what is left per lost node (the events), and the number of rounds the loss took.
 *
 * With --suspicions S (the liveness ring, issue 31): after round 1, S suspicion keys arrive one
 * per event batch (each naming another member, none confirmed, so all of them stay present), and
 * the coordinator lists its suspicions after each batch as the agent's loop does; measured: the
 * time per batch (apply, tick and rdzv_suspects()) and of it in rdzv_suspects(). Then the loss.
 *
 * Usage: coord-bench [--nodes N] [--lose K] [--batch B] [--gap MS] [--suspicions S]
 *        (defaults 20000, 4000, 100, 100, 0: 20% of 20,000 at 1,000 a second)
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ea_time.h"
#include "kv.h"
#include "session.h"
#include "suspect.h"

#define PREFIX "/elastic/bench/"

static struct kv *kv;
static struct rdzv_session *coord;
static double cpu_s;        /* the coordinator's CPU so far */
static double commit_cpu_s; /* ... of it in the steps whose tick wrote a round */
static int64_t skew;        /* simulated clock: ea_now_ms() + skew */

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int64_t now(void)
{
    return ea_now_ms() + skew;
}

static void die(const char *what, const struct ea_error *err)
{
    fprintf(stderr, "coord-bench: %s: %s\n", what, err->msg);
    exit(1);
}

/* Hand the coordinator what the store delivered, then tick: timed. */
static void step(void)
{
    struct kv_event *ev = NULL;
    size_t n = 0;
    struct ea_error err = {0};
    if (kv_read_events(kv, &ev, &n, &err) < 0)
        die("events", &err);
    double t0 = thread_cpu();
    if (n && rdzv_apply_events_at(coord, ev, n, now(), &err) < 0)
        die("apply", &err);
    int r = rdzv_tick(coord, now(), &err);
    if (r < 0)
        die("tick", &err);
    double used = thread_cpu() - t0;
    cpu_s += used;
    commit_cpu_s += r > 0 ? used : 0;
    kv_events_free(ev, n);
}

/* S suspicions, one per event batch, each listed by the coordinator (--suspicions). */
static void suspicion_events(int n, int count)
{
    double total = 0, listing = 0;
    struct ea_error err = {0};
    for (int i = 0; i < count; i++) {
        struct rdzv_suspicion x = {.fault_ms = 1, .detected_ms = 2};
        snprintf(x.by, sizeof(x.by), "f%06d", 1 + (i + 1) % (n - 1));
        snprintf(x.cause, sizeof(x.cause), "connection closed");
        char key[128], *json = NULL;
        snprintf(key, sizeof(key), PREFIX "suspect/1/f%06d", 1 + i % (n - 1));
        if (rdzv_suspicion_encode(&x, &json, &err) < 0 ||
            kv_put(kv, key, json, strlen(json), 0, NULL, &err) < 0)
            die("suspicion", &err);
        free(json);
        double t0 = thread_cpu();
        step();
        double t1 = thread_cpu();
        struct rdzv_suspect_case c[64];
        size_t got = 0;
        if (rdzv_suspects(coord, c, 64, &got, &err) < 0)
            die("suspects", &err);
        double t2 = thread_cpu();
        total += t2 - t0;
        listing += t2 - t1;
    }
    printf("suspicions=%d (present, one per event) per_event_us=%.1f of_which_suspects_us=%.1f\n",
           count, total * 1e6 / count, listing * 1e6 / count);
}

static void node_key(char *buf, size_t size, int i)
{
    snprintf(buf, size, PREFIX "nodes/f%06d", i);
}

static int members(void)
{
    const struct rdzv_state *st = rdzv_current(coord, NULL);
    return st && st->status == RDZV_RUNNING ? st->group_world_size : 0;
}

int main(int argc, char **argv)
{
    int n = 20000, lose = 4000, batch = 100, gap = 100, sus = 0;
    static const struct option lo[] = {{"nodes", required_argument, 0, 'n'},
                                       {"lose", required_argument, 0, 'k'},
                                       {"batch", required_argument, 0, 'b'},
                                       {"gap", required_argument, 0, 'g'},
                                       {"suspicions", required_argument, 0, 's'},
                                       {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
        if (c == 'n')
            n = atoi(optarg);
        else if (c == 'k')
            lose = atoi(optarg);
        else if (c == 'b')
            batch = atoi(optarg);
        else if (c == 'g')
            gap = atoi(optarg);
        else if (c == 's')
            sus = atoi(optarg);
        else
            return 2;
    }
    if (n < 2 || lose < 1 || lose >= n || batch < 1 || gap < 0 || sus < 0 || sus >= n) {
        fprintf(stderr, "coord-bench: need --nodes >= 2, 1 <= --lose < nodes, --batch >= 1, "
                        "0 <= --suspicions < nodes\n");
        return 2;
    }
    struct kv_config kc = {.backend = "memory"};
    struct ea_error err = {0};
    if (kv_open(&kc, &kv, &err) < 0)
        die("open", &err);
    struct rdzv_config rc = {.prefix = PREFIX,
                             .params = {.min_nodes = 1,
                                        .max_nodes = n,
                                        .settle_ms = 3600000,
                                        .last_call_ms = 3600000,
                                        .max_restarts = 10,
                                        .ring = sus > 0},
                             .lease_ttl_ms = 3600000};
    snprintf(rc.self.node_id, sizeof(rc.self.node_id), "coordinator");
    snprintf(rc.self.host, sizeof(rc.self.host), "host-coordinator");
    snprintf(rc.self.addr, sizeof(rc.self.addr), "127.0.0.1");
    rc.self.nproc = 1;
    if (rdzv_session_create(kv, &rc, &coord, &err) < 0 || rdzv_join(coord, &err) < 0)
        die("join", &err);
    /* the fleet joins (the coordinator keeps up: the store's history is bounded) */
    char key[128];
    for (int i = 1; i < n; i++) {
        struct rdzv_node nd = {.nproc = 1, .pid = 1, .live_port = sus > 0 ? 29400 : 0};
        snprintf(nd.node_id, sizeof(nd.node_id), "f%06d", i);
        snprintf(nd.host, sizeof(nd.host), "host-f%06d", i);
        snprintf(nd.addr, sizeof(nd.addr), "10.0.%d.%d", i / 256, i % 256);
        char *json = NULL;
        if (rdzv_node_encode(&nd, &json, &err) < 0)
            die("encode", &err);
        node_key(key, sizeof(key), i);
        if (kv_put(kv, key, json, strlen(json), 0, NULL, &err) < 0)
            die("put", &err);
        free(json);
        if (i % 500 == 0)
            step();
    }
    for (int k = 0; k < 100 && members() != n; k++)
        step();
    if (members() != n) {
        fprintf(stderr, "coord-bench: round 1 did not commit (%d members)\n", members());
        return 1;
    }
    printf("nodes=%d cold_start_cpu_s=%.3f\n", n, cpu_s);
    skew += 5000; /* the round has run a while: the loss window of its commit has passed */
    step();
    if (sus > 0)
        suspicion_events(n, sus);
    cpu_s = commit_cpu_s = 0;
    int64_t t0 = now(), first = members();
    int rounds = 0;
    for (int lost = 0; lost < lose || members() != n - lose;) {
        for (int k = 0; k < batch && lost < lose; k++) {
            node_key(key, sizeof(key), n - 1 - lost++);
            if (kv_del(kv, key, &err) < 0)
                die("del", &err);
        }
        int before = members();
        step();
        rounds += members() != before;
        /* until the next batch of expiries, or the coordinator's own wake-up */
        int64_t next = now() + gap, w = rdzv_wake_ms(coord);
        if (lost >= lose && w > now())
            next = w;
        else if (lost >= lose)
            next = now() + 100;
        skew += next - now();
        if (now() - t0 > 600000) {
            fprintf(stderr, "coord-bench: no round of %d after 600 s\n", n - lose);
            return 1;
        }
    }
    printf("lost=%d batch=%d gap_ms=%d rounds=%d (from %d members to %d) loss_cpu_s=%.3f "
           "of_which_commits_s=%.3f per_event_us=%.1f\n",
           lose, batch, gap, rounds, (int)first, members(), cpu_s, commit_cpu_s,
           (cpu_s - commit_cpu_s) * 1e6 / lose);
    rdzv_session_destroy(coord);
    kv_close(kv);
    return 0;
}
