// SPDX-License-Identifier: Apache-2.0
/*
 * Rendezvous sessions on a real etcd after its history was compacted and etcd restarted
 * (issue 30): two idle nodes of a running round (a node that does not coordinate mirrors only
 * `state`, `coord`, `rounds/` and its own assignment chunk: the path of every node of a run over
 * 16 nodes) must go back to the store's steady level, a lease renewal now and then, instead of
 * re-reading the run in a loop. Counted on both sides: the sessions' own requests and re-syncs,
 * and the gRPC messages etcd received (its /metrics).
 */
#include <criterion/criterion.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "ea_time.h"
#include "etcd.h"
#include "etcd_harness.h"
#include "session.h"

#define N 2
#define PREFIX "/elastic/c/"

static struct etcd_harness h;
static struct kv *kvs[N];
static struct rdzv_session *ss[N];
static int64_t retry_at[N]; /* a node whose store request failed waits (the agent backs off) */
static int failures;

static void teardown(void)
{
    for (int i = 0; i < N; i++) {
        rdzv_session_destroy(ss[i]);
        kv_close(kvs[i]);
    }
    etcd_harness_stop(&h);
}

TestSuite(rdzv_compaction, .fini = teardown, .timeout = 90);

/* One pass of node i's loop, as the agent makes it: the store's events, the lease, the tick;
 * a failed request (etcd down) backs off 200 ms, as the agent's first retry does. */
static void pass(int i, bool readable)
{
    int64_t now = ea_now_ms();
    struct ea_error err = {0};
    int r = readable ? rdzv_on_events(ss[i], &err) : 0;
    if (r == 0 && now >= retry_at[i]) {
        if ((r = rdzv_keepalive(ss[i], now, &err)) > 0)
            r = 0;
        if (r == 0 && (r = rdzv_tick(ss[i], now, &err)) > 0)
            r = 0; /* the coordinator wrote */
    }
    cr_assert(r == 0 || r == KV_ECONN || r == KV_ECOMPACTED, "node %d: %d %s", i, r, err.msg);
    if (r < 0) {
        failures++;
        retry_at[i] = now + 200;
    }
}

/* Run both nodes' loops until pred() holds or `ms` pass (pred NULL: for `ms`). */
static bool run(bool (*pred)(void), int ms)
{
    int64_t deadline = ea_now_ms() + ms;
    for (;;) {
        if (pred && pred())
            return true;
        int64_t now = ea_now_ms();
        if (now >= deadline)
            return pred == NULL;
        int64_t wake = deadline;
        for (int i = 0; i < N; i++) {
            int64_t w = rdzv_wake_ms(ss[i]);
            if (w >= 0 && w < wake)
                wake = w;
            if (retry_at[i] > now && retry_at[i] < wake)
                wake = retry_at[i];
        }
        struct pollfd p[N];
        for (int i = 0; i < N; i++)
            p[i] = (struct pollfd){.fd = kv_event_fd(kvs[i]), .events = POLLIN};
        int64_t t = wake - now;
        poll(p, N, (int)(t < 0 ? 0 : t > 100 ? 100 : t));
        for (int i = 0; i < N; i++)
            pass(i, p[i].revents & POLLIN);
    }
}

static bool running(void)
{
    for (int i = 0; i < N; i++) {
        const struct rdzv_state *s = rdzv_current(ss[i], NULL);
        if (!s || s->status != RDZV_RUNNING || !rdzv_self_member(ss[i]))
            return false;
    }
    return true;
}

static bool master_known(void)
{
    return rdzv_master(ss[0], 1) && rdzv_master(ss[1], 1);
}

static bool both_resynced(void)
{
    return rdzv_resync_count(ss[0]) > 0 && rdzv_resync_count(ss[1]) > 0 &&
           rdzv_self_member(ss[1]) != NULL;
}

static uint64_t requests(void)
{
    uint64_t n = 0;
    for (int i = 0; i < N; i++) {
        struct rdzv_stats st;
        rdzv_stats_get(ss[i], &st);
        n += st.requests;
    }
    return n;
}

/* Mutation (scripts/test.sh): fetch_self watching the chunk from its own mod_revision again ->
 * the light node re-syncs in a loop, hundreds of requests in the window. */
Test(rdzv_compaction, compaction_and_restart_leave_idle_nodes_quiet)
{
    cr_assert_eq(etcd_harness_start(&h, 1), 0);
    for (int i = 0; i < N; i++) {
        struct ea_error err = {0};
        cr_assert_eq(etcd_harness_open(h.endpoints, 5000, NULL, NULL, &kvs[i], &err), 0, "%s",
                     err.msg);
        struct rdzv_config rc = {.prefix = PREFIX,
                                 .params = {.min_nodes = 2, .max_nodes = 2, .settle_ms = 0,
                                            .last_call_ms = 1000, .max_restarts = 1},
                                 .lease_ttl_ms = 15000};
        snprintf(rc.self.node_id, sizeof(rc.self.node_id), "n%d", i);
        snprintf(rc.self.host, sizeof(rc.self.host), "h%d", i);
        snprintf(rc.self.addr, sizeof(rc.self.addr), "127.0.0.1");
        rc.self.nproc = 1;
        cr_assert_eq(rdzv_session_create(kvs[i], &rc, &ss[i], &err), 0, "%s", err.msg);
        cr_assert_eq(rdzv_join(ss[i], &err), 0, "%s", err.msg);
    }
    /* round 1 runs; its group rank 0 publishes the master, as the agent does (so the store's
     * revision moves past the commit: compacting there compacts the chunk's revision + 1) */
    struct ea_error err = {0};
    cr_assert(run(running, 10000), "round 1 at both nodes");
    cr_assert(rdzv_is_coordinator(ss[0]) && !rdzv_is_coordinator(ss[1]),
              "n1 mirrors only what a node needs");
    cr_assert_eq(rdzv_my_index(ss[0]), 0);
    cr_assert_eq(rdzv_publish_master(ss[0], 1, "127.0.0.1:1", &err), 0, "%s", err.msg);
    cr_assert(run(master_known, 5000));
    cr_assert(run(NULL, 300)); /* n1 starts its chunk watch */

    struct kv_list l = {0};
    cr_assert_eq(kv_list(kvs[0], PREFIX, &l, &err), 0, "%s", err.msg);
    cr_assert_eq(etcd_compact(kvs[0], l.revision, &err), 0, "%s", err.msg);
    kv_list_clear(&l);
    cr_assert_eq(etcd_harness_kill(&h, 0), 0);
    cr_assert_eq(etcd_harness_restart(&h, 0), 0);
    cr_assert(run(both_resynced, 15000), "both nodes re-sync after etcd restarted");
    cr_assert(run(NULL, 500)); /* settle: the light node re-aims its chunk watch */

    const int window_ms = 6000;
    uint64_t req0 = requests(), rs0 = rdzv_resync_count(ss[0]) + rdzv_resync_count(ss[1]);
    long msg0 = etcd_harness_metric(&h, 0, "grpc_server_msg_received_total", "");
    int64_t t0 = ea_now_ms();
    cr_assert(run(NULL, window_ms));
    double secs = (double)(ea_now_ms() - t0) / 1000.0;
    long msgs = etcd_harness_metric(&h, 0, "grpc_server_msg_received_total", "") - msg0;
    uint64_t reqs = requests() - req0;
    uint64_t resyncs = rdzv_resync_count(ss[0]) + rdzv_resync_count(ss[1]) - rs0;
    cr_log_info("idle after compaction + restart: %llu session requests, %llu re-syncs, %ld gRPC "
                "messages at etcd in %.1f s (%.1f/s)",
                (unsigned long long)reqs, (unsigned long long)resyncs, msgs, secs,
                (double)msgs / secs);
    cr_assert_geq(msg0, 0, "etcd's /metrics");
    cr_assert_eq(resyncs, 0, "a re-sync loop: %llu re-syncs in %.1f s", (unsigned long long)resyncs,
                 secs);
    cr_assert_leq((double)reqs, 2.0 * secs, "%llu requests in %.1f s (steady: <= 2/s)",
                  (unsigned long long)reqs, secs);
    cr_assert_leq((double)msgs, 2.0 * secs, "etcd received %ld messages in %.1f s (<= 2/s)", msgs,
                  secs);
    char warning[EA_ERROR_MSG_MAX];
    cr_assert(rdzv_take_warning(ss[1], warning, sizeof(warning)), "the re-sync is reported");
    cr_assert(strstr(warning, "re-sync"), "%s", warning);
    cr_log_info("n1: %s", warning);
}
