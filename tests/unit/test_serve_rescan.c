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
