// SPDX-License-Identifier: Apache-2.0
/*
 * Latency of the etcd-gateway backend against a local single-member etcd, logged for the record
 * in the same shape as tests/etcd/test_etcd_bench.c: median and p99 of put, CAS, get and
 * keepalive over 1000 operations each, put→watch-event delivery over 200 puts, and the RSS of
 * this process with one open handle (a watch stream running). The same run is repeated with the
 * gRPC backend ("etcd", when built in), each in its own test process, so the two columns come
 * from one session on one machine. Asserts only generous bounds that catch a pathological
 * regression (a backoff or a timeout on the hot path), not performance.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etcd_harness.h"
#include "gw_test.h"

#define OPS 1000
#define WATCH_OPS 200

static struct etcd_harness h;
static struct kv *kv;

static void teardown(void)
{
    kv_close(kv);
    etcd_harness_stop(&h);
}

TestSuite(gateway_bench, .fini = teardown, .timeout = 60);

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void report(const char *backend, const char *what, int64_t *us, size_t n)
{
    qsort(us, n, sizeof(us[0]), cmp_i64);
    int64_t med = us[n / 2], p99 = us[n * 99 / 100];
    cr_log_info("%-12s %-12s median %6.3f ms   p99 %6.3f ms   (n=%zu)", backend, what, med / 1000.0,
                p99 / 1000.0, n);
    cr_assert_lt(med, 50 * 1000, "%s %s median %lld us", backend, what, (long long)med);
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

static void bench(const char *backend)
{
    cr_assert_eq(etcd_harness_start(&h, 1), 0);
    long rss0 = rss_kib();
    struct ea_error err = {0};
    if (strcmp(backend, "etcd") == 0) {
        cr_assert_eq(etcd_harness_open(h.endpoints, 0, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    } else {
        char urls[128];
        gwt_urls(&h, urls, sizeof(urls));
        cr_assert_eq(gwt_open(&h, urls, 0, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    }
    static int64_t us[OPS];
    char value[128];
    memset(value, 'v', sizeof(value));

    for (int i = 0; i < OPS; i++) {
        int64_t t0 = now_us();
        cr_assert_eq(kv_put(kv, "/bench/put", value, sizeof(value), 0, NULL, &err), 0, "%s",
                     err.msg);
        us[i] = now_us() - t0;
    }
    report(backend, "put", us, OPS);

    int64_t rev = 0;
    cr_assert_eq(kv_put(kv, "/bench/cas", "0", 1, 0, &rev, &err), 0, "%s", err.msg);
    for (int i = 0; i < OPS; i++) {
        int64_t t0 = now_us();
        cr_assert_eq(kv_cas(kv, "/bench/cas", value, sizeof(value), rev, 0, &rev, NULL, &err), 0,
                     "%s", err.msg);
        us[i] = now_us() - t0;
    }
    report(backend, "cas", us, OPS);

    for (int i = 0; i < OPS; i++) {
        struct kv_entry e;
        int64_t t0 = now_us();
        cr_assert_eq(kv_get(kv, "/bench/cas", &e, &err), 0, "%s", err.msg);
        us[i] = now_us() - t0;
        kv_entry_clear(&e);
    }
    report(backend, "get", us, OPS);

    int64_t lease = 0, id = 0;
    cr_assert_eq(kv_lease_grant(kv, 10000, &lease, &err), 0, "%s", err.msg);
    for (int i = 0; i < OPS; i++) {
        int64_t t0 = now_us();
        cr_assert_eq(kv_lease_keepalive(kv, lease, NULL, &err), 0, "%s", err.msg);
        us[i] = now_us() - t0;
    }
    report(backend, "keepalive", us, OPS);

    cr_assert_eq(kv_watch(kv, "/bench/w/", 0, &id, &err), 0, "%s", err.msg);
    static int64_t wus[WATCH_OPS];
    for (int i = 0; i < WATCH_OPS; i++) {
        struct kv_event *evs = NULL;
        size_t n = 0;
        int64_t t0 = now_us();
        cr_assert_eq(kv_put(kv, "/bench/w/k", value, sizeof(value), 0, NULL, &err), 0, "%s",
                     err.msg);
        cr_assert_eq(etcd_harness_wait_events(kv, &evs, &n, 1, 4000), 1);
        wus[i] = now_us() - t0;
        kv_events_free(evs, n);
    }
    report(backend, "put->event", wus, WATCH_OPS);

    long rss1 = rss_kib();
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
