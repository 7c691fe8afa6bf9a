// SPDX-License-Identifier: Apache-2.0
/*
 * Latency of the etcd-gateway backend against a local single-member etcd, logged for the record
 * in the same shape as tests/etcd/test_etcd_bench.c (both run etcdt_bench_latencies()): median
 * and p99 of put, CAS, get and keepalive over 1000 operations each, put→watch-event delivery
 * over 200 puts, and the RSS of this process with one open handle (a watch stream running). The
 * same run is repeated with the gRPC backend ("etcd", when built in), each in its own test process,
 * so the two columns come from one session on one machine. Asserts only generous bounds that catch
 * a pathological regression (a backoff or a timeout on the hot path), not performance.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "etcd_harness.h"
#include "etcd_testutil.h"
#include "gw_test.h"

static struct etcd_harness h;
static struct kv *kv;

static void teardown(void)
{
    kv_close(kv);
    etcd_harness_stop(&h);
}

TestSuite(gateway_bench, .fini = teardown, .timeout = 60);

static void bench(const char *backend)
{
    cr_assert_eq(etcd_harness_start(&h, 1), 0);
    long rss0 = etcdt_rss_kib();
    struct ea_error err = {0};
    if (strcmp(backend, "etcd") == 0) {
        cr_assert_eq(etcd_harness_open(h.endpoints, 0, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    } else {
        char urls[128];
        gwt_urls(&h, urls, sizeof(urls));
        cr_assert_eq(gwt_open(&h, urls, 0, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    }
    etcdt_bench_latencies(kv, backend);
    long rss1 = etcdt_rss_kib();
    cr_log_info("%-12s RSS %ld KiB with one handle (watch running); %ld KiB before opening it "
                "(+%ld KiB)",
                backend, rss1, rss0, rss1 - rss0);
}

Test(gateway_bench, latencies_and_rss_gateway)
{
    bench("etcd-gateway");
}

Test(gateway_bench, latencies_and_rss_grpc_for_comparison)
{
    if (!kv_backend_find("etcd"))
        cr_skip_test("the gRPC etcd backend is not built in");
    bench("etcd");
}
