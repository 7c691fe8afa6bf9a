// SPDX-License-Identifier: Apache-2.0
/*
 * Progress requests as a silent-stream detector (backends/etcd_watch.c watch_on_idle): an idle
 * watch on a healthy etcd stays up however long nothing happens (the on-demand progress requests
 * are answered), while a watch on a member that stops answering (SIGSTOP: the TCP connection
 * stays open, nothing comes back) ends with KV_EVENT_ERROR/KV_ECONN within about two request
 * timeouts — long before gRPC keepalive (10 s + 5 s) would notice — and a re-watch goes to the
 * next endpoint. Handles use a 300 ms request timeout so the detector runs in test time.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "ea_time.h"
#include "etcd.h"
#include "etcd_harness.h"
#include "etcd_testutil.h"

#define TIMEOUT_MS 300

static struct etcd_harness h;
static struct kv *kv;
static struct kv_event *evs;
static size_t nevs;

static void teardown(void)
{
    for (int i = 0; i < h.n; i++)
        if (h.m[i].pid > 0)
            kill(h.m[i].pid, SIGCONT);
    kv_events_free(evs, nevs);
    kv_close(kv);
    etcd_harness_stop(&h);
}

TestSuite(etcd_progress, .fini = teardown, .timeout = 60);

static void open_kv(const char *endpoints)
{
    struct ea_error err = {0};
    cr_assert_eq(etcd_harness_open(endpoints, TIMEOUT_MS, NULL, NULL, &kv, &err), 0, "%s", err.msg);
}

/* The next event must be a PUT of `key` on watch `id`. */
static void expect_put(int64_t id, const char *key, int timeout_ms)
{
    size_t before = nevs;
    cr_assert_gt(etcd_harness_wait_events(kv, &evs, &nevs, before + 1, timeout_ms), before,
                 "no event for %s", key);
    cr_assert_eq(evs[before].type, KV_EVENT_PUT, "event %d (%s)", (int)evs[before].type,
                 evs[before].message);
    cr_assert_eq(evs[before].watch_id, id);
    cr_assert_str_eq(evs[before].entry.key, key);
}

Test(etcd_progress, idle_watch_on_a_healthy_member_stays_up)
{
    cr_assert_eq(etcd_harness_start(&h, 1), 0);
    open_kv(h.endpoints);
    int64_t id = etcdt_watch(kv, "/p/", 0);
    /* Ten request timeouts of silence: five progress requests asked and answered, no error. */
    cr_assert_eq(etcd_harness_wait_events(kv, &evs, &nevs, 1, 10 * TIMEOUT_MS), 0,
                 "an idle watch ended: %s", nevs ? evs[0].message : "");
    etcdt_put(kv, "/p/k", "v", 0);
    expect_put(id, "/p/k", 4000);
}

Test(etcd_progress, stopped_member_ends_the_watch_with_econn)
{
    cr_assert_eq(etcd_harness_start(&h, 1), 0);
    open_kv(h.endpoints);
    int64_t id = etcdt_watch(kv, "/p/", 0);
    int64_t rev = etcdt_put(kv, "/p/a", "1", 0);
    expect_put(id, "/p/a", 4000);

    cr_assert_eq(kill(h.m[0].pid, SIGSTOP), 0);
    int64_t t0 = ea_now_ms();
    long i = etcd_harness_wait_type(kv, &evs, &nevs, id, KV_EVENT_ERROR, 5000);
    int64_t took = ea_now_ms() - t0;
    cr_assert_geq(i, 0, "no error %lld ms after the member stopped", (long long)took);
    cr_log_info("silent stream noticed %lld ms after SIGSTOP (timeout %d ms): %s", (long long)took,
                TIMEOUT_MS, evs[i].message);
    cr_assert_eq(evs[i].error, KV_ECONN, "%s", evs[i].message);
    cr_assert(strstr(evs[i].message, "progress"), "says why: %s", evs[i].message);
    cr_assert_geq(took, TIMEOUT_MS, "not before one timeout of silence");
    cr_assert_leq(took, 3 * TIMEOUT_MS + 1000, "%lld ms", (long long)took);

    /* Back again: re-watching from after the last seen revision misses nothing. */
    cr_assert_eq(kill(h.m[0].pid, SIGCONT), 0);
    int64_t id2 = etcdt_watch(kv, "/p/", rev + 1);
    etcdt_put(kv, "/p/b", "2", 0);
    expect_put(id2, "/p/b", 4000);
}

Test(etcd_progress, silent_member_of_a_cluster_is_left_for_another)
{
    cr_assert_eq(etcd_harness_start(&h, 3), 0);
    open_kv(h.endpoints); /* member 0 first: the watch stream goes there */
    int64_t id = etcdt_watch(kv, "/p/", 0);
    int64_t rev = etcdt_put(kv, "/p/a", "1", 0);
    expect_put(id, "/p/a", 4000);

    cr_assert_eq(kill(h.m[0].pid, SIGSTOP), 0);
    long i = etcd_harness_wait_type(kv, &evs, &nevs, id, KV_EVENT_ERROR, 5000);
    cr_assert_geq(i, 0, "the watch on the stopped member never ended");
    cr_assert_eq(evs[i].error, KV_ECONN, "%s", evs[i].message);
    cr_assert(strstr(evs[i].message, h.m[0].endpoint), "names the member: %s", evs[i].message);

    /* Member 0 is still stopped: the re-watch and the writes go to the others (the handle
     * moved on), and events flow again. Unary calls may need a few tries while the two
     * remaining members elect a leader. */
    struct ea_error err = {0};
    int64_t id2 = -1;
    int64_t deadline = ea_now_ms() + 10000;
    int rc;
    while ((rc = kv_watch(kv, "/p/", rev + 1, &id2, &err)) == KV_ECONN && ea_now_ms() < deadline)
        ea_error_clear(&err);
    cr_assert_eq(rc, 0, "re-watch: %s", err.msg);
    int64_t r2 = 0;
    while ((rc = kv_put(kv, "/p/b", "2", 1, 0, &r2, &err)) == KV_ECONN && ea_now_ms() < deadline)
        ea_error_clear(&err);
    cr_assert_eq(rc, 0, "put: %s", err.msg);
    expect_put(id2, "/p/b", 4000);
}
