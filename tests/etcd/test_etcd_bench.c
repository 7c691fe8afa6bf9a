// SPDX-License-Identifier: Apache-2.0
/*
 * Latency of the etcd backend against a local single-member etcd, logged for the record: median
 * and p99 of put, CAS, get and keepalive over 1000 operations each, put→watch-event delivery over
 * 200 puts (etcd_testutil.c, shared with the gateway bench), and the RSS of this process with one
 * open handle (watch and keepalive streams running).
 * Asserts only generous bounds that catch a pathological regression (a backoff or a timeout on
 * the hot path), not performance.
 */
#include <criterion/criterion.h>

#include "etcd_harness.h"
#include "etcd_testutil.h"

static struct etcd_harness h;
static struct kv *kv;

static void teardown(void)
{
    kv_close(kv);
    etcd_harness_stop(&h);
}

TestSuite(etcd_bench, .fini = teardown, .timeout = 60);

Test(etcd_bench, latencies_and_rss)
{
    cr_assert_eq(etcd_harness_start(&h, 1), 0);
    long rss0 = etcdt_rss_kib();
    struct ea_error err = {0};
    cr_assert_eq(etcd_harness_open(h.endpoints, 0, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    etcdt_bench_latencies(kv, "etcd");
    long rss1 = etcdt_rss_kib();
    cr_log_info("RSS %ld KiB with one handle (watch + keepalive streams open); %ld KiB before "
                "opening it",
                rss1, rss0);
}
