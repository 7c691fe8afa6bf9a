// SPDX-License-Identifier: Apache-2.0
/* serve's rescan gap (agent/daemon/serve_runs.c, issue 37): an idle daemon whose `next` names a
 * run it cannot join scans the queue at most once per POOL_RESCAN_GAP_MS, however often `next` is
 * written; the decision is taken on the loop's clock, here a fake one, so the verdict does not
 * depend on the machine's load (the end-to-end test_e2e_queue_flood's bound grows with it). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "ea_loop.h"
#include "kv.h"
#include "pool.h"
#include "runspec.h"
#include "serve_internal.h"

static struct ea_fake_clock fc;
static struct daemon d;

static void setup(void)
{
    ea_fake_clock_init(&fc, 100000);
    memset(&d, 0, sizeof(d));
    d.clock = &fc.clock;
    d.retry_at = d.keepalive_at = -1;
    struct ea_error err = {0};
    struct kv_config cfg = {.backend = "memory"};
    cr_assert_eq(kv_open(&cfg, &d.kv, &err), 0, "%s", err.msg);
    cr_assert_eq(pool_init(&d.pool, d.kv, "/t/", "default", &err), 0, "%s", err.msg);
    d.hooks = (struct pool_hooks){.ctx = &d, .node = "n1"};
}

static void teardown(void)
{
    kv_close(d.kv);
}

/* `next` names a run whose spec is gone (taken and ended): the daemon must scan to move on */
static void next_names_a_gone_run(void)
{
    json_t *j = json_pack("{s:s, s:s}", "schema", RUNSPEC_SCHEMA, "run", "gone");
    char *v = json_dumps(j, JSON_COMPACT);
    struct ea_error err = {0};
    cr_assert_eq(kv_put(d.kv, d.pool.next_key, v, strlen(v), 0, NULL, &err), 0, "%s", err.msg);
    free(v);
    json_decref(j);
}

TestSuite(serve_rescan, .init = setup, .fini = teardown);

Test(serve_rescan, a_write_of_next_within_the_gap_waits_for_it_then_scans)
{
    next_names_a_gone_run();
    int64_t last = fc.now - 10; /* the last scan, 10 ms ago on the loop's clock */
    d.scan_ms = last;
    d.pick = true;
    serve_pick(&d);
    cr_assert_eq(d.scan_ms, last, "scanned again 10 ms after the last scan (gap %d ms)",
                 POOL_RESCAN_GAP_MS);
    cr_assert_eq(d.rescan_at, last + POOL_RESCAN_GAP_MS, "the rescan is armed at the gap's end");
    cr_assert(!d.pick);

    /* more writes of `next` inside the gap: still no scan, the rescan stays where it was */
    fc.now = last + POOL_RESCAN_GAP_MS - 1;
    d.pick = true;
    serve_pick(&d);
    cr_assert_eq(d.scan_ms, last);
    cr_assert_eq(d.rescan_at, last + POOL_RESCAN_GAP_MS);

    /* the gap over: the loop's rescan step arms a full scan, which runs at once */
    fc.now = last + POOL_RESCAN_GAP_MS;
    d.rescan_at = 0;
    d.pick = d.full_scan = true;
    serve_pick(&d);
    cr_assert_eq(d.scan_ms, fc.now, "the scan ran when the gap was over");
    cr_assert(!d.pick && !d.full_scan);
}

Test(serve_rescan, a_write_of_next_after_the_gap_scans_at_once)
{
    next_names_a_gone_run();
    d.scan_ms = fc.now - POOL_RESCAN_GAP_MS;
    d.pick = true;
    serve_pick(&d);
    cr_assert_eq(d.scan_ms, fc.now, "no scan although the gap was over");
    cr_assert_eq(d.rescan_at, 0);
}

/* The same decision through the daemon's own loop: a write of `next` 0 ms after a scan is
 * answered by a scan when the loop's clock reaches the gap's end — the loop wakes for it — and
 * not before. No real time passes: the fake clock jumps to each wake. */
Test(serve_rescan, the_loop_wakes_at_the_gaps_end_to_scan)
{
    d.cfg.node_id = "n1";
    d.cfg.lease_ttl_ms = 30000;
    d.sigfd = d.chldfd = -1;
    struct ea_loop *l = ea_loop_create(&fc.clock, serve_done, &d);
    cr_assert(l);
    cr_assert_eq(serve_loop_add(l, &d), 0);
    /* the first pass registers, watches `next` and scans the (empty) queue */
    for (int i = 0; i < 4 && !d.scan_ms; i++)
        cr_assert_geq(ea_loop_run_once(l), 0);
    int64_t first = d.scan_ms;
    cr_assert_gt(first, 0, "the daemon never scanned its queue");
    cr_assert(d.lease && d.watch_id);

    fc.now += 1;
    next_names_a_gone_run(); /* 1 ms after the scan; the watch's event wakes the loop at once */
    int64_t scans_at[4];
    int n = 0;
    for (int pass = 0; pass < 40 && n < 1; pass++) {
        int64_t before = d.scan_ms;
        cr_assert_geq(ea_loop_run_once(l), 0);
        if (d.scan_ms != before)
            scans_at[n++] = d.scan_ms;
    }
    cr_assert_eq(n, 1, "no scan after the write of `next`");
    cr_assert_eq(scans_at[0], first + POOL_RESCAN_GAP_MS,
                 "scanned at +%lld ms, not at the gap's end (+%d ms)",
                 (long long)(scans_at[0] - first), POOL_RESCAN_GAP_MS);
    if (d.lease)
        kv_lease_revoke(d.kv, d.lease, NULL);
    ea_loop_destroy(l);
}
