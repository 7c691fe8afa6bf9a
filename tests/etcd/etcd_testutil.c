// SPDX-License-Identifier: Apache-2.0
/*
 * etcd_testutil: helpers shared by the etcd and etcd-gateway tests (see etcd_testutil.h).
 */
#include "etcd_testutil.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ea_time.h"

#define BENCH_OPS 1000
#define BENCH_WATCH_OPS 200

int64_t etcdt_put(struct kv *kv, const char *key, const char *value, int64_t lease)
{
    int64_t rev = 0;
    struct ea_error err = {0};
    cr_assert_eq(kv_put(kv, key, value, strlen(value), lease, &rev, &err), 0, "%s", err.msg);
    cr_assert_gt(rev, 0);
    return rev;
}

int64_t etcdt_watch(struct kv *kv, const char *prefix, int64_t from_revision)
{
    int64_t id = -1;
    struct ea_error err = {0};
    cr_assert_eq(kv_watch(kv, prefix, from_revision, &id, &err), 0, "%s", err.msg);
    return id;
}

/* ---- watch scenarios ---- */

void etcdt_watches_routed_by_id(struct kv *kv, struct kv_event **evs, size_t *nevs, int64_t *ret_a,
                                int64_t *ret_b, int64_t *ret_all)
{
    int64_t a = etcdt_watch(kv, "/x/", 0);
    int64_t b = etcdt_watch(kv, "/y/", 0);
    int64_t all = etcdt_watch(kv, "", 0);
    cr_assert(a != b && b != all && a != all, "ids %lld %lld %lld", (long long)a, (long long)b,
              (long long)all);
    etcdt_put(kv, "/x/1", "x", 0);
    etcdt_put(kv, "/y/1", "y", 0);
    cr_assert_eq(etcd_harness_wait_events(kv, evs, nevs, 4, 4000), 4);
    int na = 0, nb = 0, nall = 0;
    for (size_t i = 0; i < *nevs; i++) {
        const struct kv_event *ev = &(*evs)[i];
        if (ev->watch_id == a) {
            na++;
            cr_assert_str_eq(ev->entry.key, "/x/1");
        } else if (ev->watch_id == b) {
            nb++;
            cr_assert_str_eq(ev->entry.key, "/y/1");
        } else {
            cr_assert_eq(ev->watch_id, all);
            nall++;
        }
    }
    cr_assert_eq(na, 1);
    cr_assert_eq(nb, 1);
    cr_assert_eq(nall, 2);
    *ret_a = a;
    *ret_b = b;
    *ret_all = all;
}

void etcdt_compacted_watch(struct kv *kv, struct kv_event **evs, size_t *nevs,
                           int (*compact)(struct kv *kv, int64_t revision, struct ea_error *err))
{
    int64_t first = etcdt_put(kv, "/k/a", "1", 0);
    etcdt_put(kv, "/k/a", "2", 0);
    int64_t last = etcdt_put(kv, "/k/a", "3", 0);
    struct ea_error err = {0};
    cr_assert_eq(compact(kv, last, &err), 0, "%s", err.msg);
    cr_assert_eq(compact(kv, last, &err), KV_ECOMPACTED, "compacting again");

    int64_t id = -1;
    int rc = kv_watch(kv, "/k/", first, &id, &err);
    if (rc == 0) {
        long i = etcd_harness_wait_type(kv, evs, nevs, id, KV_EVENT_ERROR, 4000);
        cr_assert_geq(i, 0, "no error event for a compacted watch");
        cr_assert_eq((*evs)[i].error, KV_ECOMPACTED, "%s", (*evs)[i].message);
        cr_assert(strstr((*evs)[i].message, "compacted"), "%s", (*evs)[i].message);
        cr_log_info("%s", (*evs)[i].message);
    } else {
        cr_assert_eq(rc, KV_ECOMPACTED, "%s", err.msg);
    }
    /* From the compaction point on, the history is still there. */
    int64_t id2 = etcdt_watch(kv, "/k/", last);
    long j = etcd_harness_wait_type(kv, evs, nevs, id2, KV_EVENT_PUT, 4000);
    cr_assert_geq(j, 0);
    cr_assert_eq((*evs)[j].entry.mod_revision, last);
}

/* ---- bench ---- */

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

long etcdt_rss_kib(void)
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

void etcdt_bench_latencies(struct kv *kv, const char *backend)
{
    struct ea_error err = {0};
    static int64_t us[BENCH_OPS];
    char value[128];
    memset(value, 'v', sizeof(value));

    for (int i = 0; i < BENCH_OPS; i++) {
        int64_t t0 = now_us();
        cr_assert_eq(kv_put(kv, "/bench/put", value, sizeof(value), 0, NULL, &err), 0, "%s",
                     err.msg);
        us[i] = now_us() - t0;
    }
    report(backend, "put", us, BENCH_OPS);

    int64_t rev = 0;
    cr_assert_eq(kv_put(kv, "/bench/cas", "0", 1, 0, &rev, &err), 0, "%s", err.msg);
    for (int i = 0; i < BENCH_OPS; i++) {
        int64_t t0 = now_us();
        cr_assert_eq(kv_cas(kv, "/bench/cas", value, sizeof(value), rev, 0, &rev, NULL, &err), 0,
                     "%s", err.msg);
        us[i] = now_us() - t0;
    }
    report(backend, "cas", us, BENCH_OPS);

    for (int i = 0; i < BENCH_OPS; i++) {
        struct kv_entry e;
        int64_t t0 = now_us();
        cr_assert_eq(kv_get(kv, "/bench/cas", &e, &err), 0, "%s", err.msg);
        us[i] = now_us() - t0;
        kv_entry_clear(&e);
    }
    report(backend, "get", us, BENCH_OPS);

    int64_t lease = 0, id = 0;
    cr_assert_eq(kv_lease_grant(kv, 10000, &lease, &err), 0, "%s", err.msg);
    for (int i = 0; i < BENCH_OPS; i++) {
        int64_t t0 = now_us();
        cr_assert_eq(kv_lease_keepalive(kv, lease, NULL, &err), 0, "%s", err.msg);
        us[i] = now_us() - t0;
    }
    report(backend, "keepalive", us, BENCH_OPS);

    cr_assert_eq(kv_watch(kv, "/bench/w/", 0, &id, &err), 0, "%s", err.msg);
    static int64_t wus[BENCH_WATCH_OPS];
    for (int i = 0; i < BENCH_WATCH_OPS; i++) {
        struct kv_event *evs = NULL;
        size_t n = 0;
        int64_t t0 = now_us();
        cr_assert_eq(kv_put(kv, "/bench/w/k", value, sizeof(value), 0, NULL, &err), 0, "%s",
                     err.msg);
        cr_assert_eq(etcd_harness_wait_events(kv, &evs, &n, 1, 4000), 1);
        wus[i] = now_us() - t0;
        kv_events_free(evs, n);
    }
    report(backend, "put->event", wus, BENCH_WATCH_OPS);
}

/* ---- cluster ---- */

void etcdt_failover_scenario(struct etcd_harness *h, struct kv *kv, struct kv_event **evs,
                             size_t *nevs)
{
    struct ea_error err = {0};
    int64_t id = 0, lease = 0, rev = 0;
    cr_assert_eq(kv_put(kv, "/f/a", "1", 1, 0, &rev, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_watch(kv, "/f/", 0, &id, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_lease_grant(kv, 10000, &lease, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_lease_keepalive(kv, lease, NULL, &err), 0, "%s", err.msg);

    /* The client starts on the first endpoint, member 0. */
    cr_assert_eq(etcd_harness_kill(h, 0), 0);
    struct kv_entry e = {0};
    int64_t t0 = ea_now_ms();
    cr_assert_eq(kv_get(kv, "/f/a", &e, &err), 0, "read fails over: %s", err.msg);
    cr_assert_str_eq(e.value, "1");
    kv_entry_clear(&e);
    cr_log_info("first read after the kill took %lld ms", (long long)(ea_now_ms() - t0));
    int64_t rev2 = 0;
    cr_assert_eq(kv_cas(kv, "/f/a", "2", 1, rev, lease, &rev2, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_put(kv, "/f/b", "x", 1, 0, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_lease_keepalive(kv, lease, NULL, &err), 0, "%s", err.msg);

    long i = etcd_harness_wait_type(kv, evs, nevs, id, KV_EVENT_ERROR, 4000);
    cr_assert_geq(i, 0, "the watch on the dead member ends");
    cr_assert_eq((*evs)[i].error, KV_ECONN, "%s", (*evs)[i].message);
    cr_assert(strstr((*evs)[i].message, h->m[0].endpoint), "%s", (*evs)[i].message);

    /* Re-list and re-watch from the list's revision, as the agent does. */
    struct kv_list l = {0};
    cr_assert_eq(kv_list(kv, "/f/", &l, &err), 0, "%s", err.msg);
    cr_assert_eq(l.n, 2);
    int64_t id2 = 0;
    cr_assert_eq(kv_watch(kv, "/f/", l.revision + 1, &id2, &err), 0, "%s", err.msg);
    kv_list_clear(&l);
    cr_assert_eq(kv_put(kv, "/f/c", "y", 1, 0, NULL, &err), 0, "%s", err.msg);
    long j = etcd_harness_wait_type(kv, evs, nevs, id2, KV_EVENT_PUT, 4000);
    cr_assert_geq(j, 0);
    cr_assert_str_eq((*evs)[j].entry.key, "/f/c");

    /* A second member down: no quorum. Requests fail within the timeout instead of hanging. */
    cr_assert_eq(etcd_harness_kill(h, 1), 0);
    t0 = ea_now_ms();
    int rc = kv_put(kv, "/f/d", "z", 1, 0, NULL, &err);
    cr_assert_eq(rc, KV_ECONN, "no quorum: %d %s", rc, err.msg);
    cr_assert_lt(ea_now_ms() - t0, 2000 + 1000);
    cr_log_info("no quorum: %s", err.msg);

    /* Quorum back (member 0 restarted): service resumes. */
    cr_assert_eq(etcd_harness_restart(h, 0), 0);
    int64_t deadline = ea_now_ms() + 8000;
    while ((rc = kv_get(kv, "/f/c", &e, &err)) == KV_ECONN && ea_now_ms() < deadline)
        poll(NULL, 0, 50); /* the caller's backoff */
    cr_assert_eq(rc, 0, "%s", err.msg);
    kv_entry_clear(&e);
}

void etcdt_expired_token_is_renewed(struct etcd_harness *h, struct kv *kv, const char *user)
{
    struct ea_error err = {0};
    etcdt_put(kv, "/t/a", "1", 0);
    cr_assert_eq(etcd_harness_wait_token_dropped(h, 0, user, 10000), 0,
                 "etcd did not drop the token within 10 s");
    long logins0, refused0, logins1, refused1;
    cr_assert_eq(etcd_harness_auth_counts(h, 0, &logins0, &refused0), 0);
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/t/a", &e, &err), 0, "with an expired token: %s", err.msg);
    kv_entry_clear(&e);
    cr_assert_eq(etcd_harness_auth_counts(h, 0, &logins1, &refused1), 0);
    cr_assert_gt(refused1, refused0, "the old token was not refused");
    cr_assert_gt(logins1, logins0, "no new login");
}
