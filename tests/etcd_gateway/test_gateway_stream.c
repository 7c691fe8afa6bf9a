// SPDX-License-Identifier: Apache-2.0
/*
 * Watch streams of the etcd-gateway backend against a real etcd: a stream cut by killing etcd
 * ends the watch with KV_EVENT_ERROR/KV_ECONN naming the endpoint, requests fail with KV_ECONN
 * within the timeout, and after a restart the same handle re-lists and re-watches; an idle
 * stream to a stopped etcd (SIGSTOP: its kernel still answers TCP) ends with KV_ECONN through
 * the liveness probe, while idle streams to a live one are left alone; compaction
 * ends a watch with KV_ECOMPACTED; several watches each get their own events; the helper thread
 * blocks every signal; every descriptor the handle makes (sockets, curl's own) is CLOEXEC;
 * closing a handle with live watches and queued events neither hangs nor leaks.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ea_time.h"
#include "etcd_gateway.h"
#include "etcd_harness.h"
#include "etcd_testutil.h"
#include "gw_test.h"

static struct etcd_harness h;
static struct kv *kv;
static struct kv_event *evs;
static size_t nevs;

static void teardown(void)
{
    kv_events_free(evs, nevs);
    kv_close(kv);
    etcd_harness_stop(&h);
}

TestSuite(gateway_stream, .fini = teardown, .timeout = 40);

static void start(int timeout_ms)
{
    cr_assert_eq(etcd_harness_start(&h, 1), 0);
    char urls[128];
    gwt_urls(&h, urls, sizeof(urls));
    struct ea_error err = {0};
    cr_assert_eq(gwt_open(&h, urls, timeout_ms, NULL, NULL, &kv, &err), 0, "%s", err.msg);
}

Test(gateway_stream, cut_by_restart_then_relist_and_rewatch_on_the_same_handle)
{
    start(1000);
    int64_t id = etcdt_watch(kv, "/s/", 0);
    etcdt_put(kv, "/s/1", "a", 0);
    cr_assert_geq(etcd_harness_wait_type(kv, &evs, &nevs, id, KV_EVENT_PUT, 4000), 0);

    cr_assert_eq(etcd_harness_kill(&h, 0), 0);
    long i = etcd_harness_wait_type(kv, &evs, &nevs, id, KV_EVENT_ERROR, 4000);
    cr_assert_geq(i, 0, "no error event after etcd died");
    cr_assert_eq(evs[i].error, KV_ECONN, "%s", evs[i].message);
    cr_assert(strstr(evs[i].message, h.m[0].endpoint), "%s", evs[i].message);
    cr_log_info("stream cut: %s", evs[i].message);

    int64_t t0 = ea_now_ms(), id2 = 0;
    struct ea_error err = {0};
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/s/1", &e, &err), KV_ECONN);
    cr_assert_eq(kv_put(kv, "/s/2", "b", 1, 0, NULL, &err), KV_ECONN);
    cr_assert_eq(kv_watch(kv, "/s/", 0, &id2, &err), KV_ECONN);
    cr_assert_lt(ea_now_ms() - t0, 3 * 1000 + 500, "each within the 1 s request timeout");

    cr_assert_eq(etcd_harness_restart(&h, 0), 0);
    int64_t deadline = ea_now_ms() + 5000;
    int rc;
    struct kv_list l = {0};
    while ((rc = kv_list(kv, "/s/", &l, &err)) == KV_ECONN && ea_now_ms() < deadline)
        poll(NULL, 0, 50); /* the caller's backoff */
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_eq(l.n, 1);
    int64_t from = l.revision + 1;
    kv_list_clear(&l);
    id2 = etcdt_watch(kv, "/s/", from);
    cr_assert_neq(id2, id);
    int64_t rev = etcdt_put(kv, "/s/3", "c", 0);
    long j = etcd_harness_wait_type(kv, &evs, &nevs, id2, KV_EVENT_PUT, 4000);
    cr_assert_geq(j, 0, "the new watch delivers");
    cr_assert_str_eq(evs[j].entry.key, "/s/3");
    cr_assert_eq(evs[j].entry.mod_revision, rev);
    for (size_t k = (size_t)i + 1; k < nevs; k++)
        cr_assert_neq(evs[k].watch_id, id, "the ended watch delivered again");
}

Test(gateway_stream, idle_stream_to_a_stopped_etcd_ends_with_econn)
{
    start(500); /* probes after 1 s of silence, 500 ms for the answer */
    int64_t id = etcdt_watch(kv, "/z/", 0);
    etcdt_put(kv, "/z/1", "a", 0);
    cr_assert_geq(etcd_harness_wait_type(kv, &evs, &nevs, id, KV_EVENT_PUT, 4000), 0);
    /* Idle but alive: probed (and answered) twice or more, the watch stays. */
    etcd_harness_wait_events(kv, &evs, &nevs, nevs + 1, 2500);
    cr_assert_eq(nevs, 1, "an idle watch on a live etcd ended: %s", nevs > 1 ? evs[1].message : "");
    etcdt_put(kv, "/z/2", "b", 0);
    cr_assert_eq(etcd_harness_wait_events(kv, &evs, &nevs, 2, 4000), 2);
    cr_assert(evs[1].type == KV_EVENT_PUT && evs[1].watch_id == id, "still delivering");

    cr_assert_eq(kill(h.m[0].pid, SIGSTOP), 0);
    int64_t t0 = ea_now_ms();
    long i = etcd_harness_wait_type(kv, &evs, &nevs, id, KV_EVENT_ERROR, 5000);
    int64_t took = ea_now_ms() - t0;
    kill(h.m[0].pid, SIGCONT);
    cr_assert_geq(i, 0, "no error event for a stream to a stopped etcd");
    cr_assert_eq(evs[i].error, KV_ECONN, "%s", evs[i].message);
    cr_assert(strstr(evs[i].message, "liveness"), "%s", evs[i].message);
    cr_assert_lt(took, 1000 + 500 + 1000, "ended after %lld ms", (long long)took);
    cr_log_info("stopped etcd noticed after %lld ms: %s", (long long)took, evs[i].message);

    /* Running again: watch anew. */
    int64_t id2 = etcdt_watch(kv, "/z/", 0);
    etcdt_put(kv, "/z/3", "c", 0);
    cr_assert_geq(etcd_harness_wait_type(kv, &evs, &nevs, id2, KV_EVENT_PUT, 4000), 0);
}

Test(gateway_stream, compaction_ends_a_watch_with_ecompacted)
{
    start(0);
    etcdt_compacted_watch(kv, &evs, &nevs, etcd_gateway_compact);
    struct ea_error err = {0};
    cr_assert_eq(etcd_gateway_compact(NULL, 1, &err), KV_EINVAL, "not a gateway handle");
}

Test(gateway_stream, several_watches_routed_by_id)
{
    start(0);
    int64_t a, b, all;
    etcdt_watches_routed_by_id(kv, &evs, &nevs, &a, &b, &all);
    kv_watch_cancel(kv, b);
    etcdt_put(kv, "/y/2", "y", 0);
    etcdt_put(kv, "/x/2", "x", 0);
    cr_assert_geq(etcd_harness_wait_type(kv, &evs, &nevs, a, KV_EVENT_PUT, 4000), 0);
    etcd_harness_wait_events(kv, &evs, &nevs, nevs + 3, 300);
    for (size_t i = 4; i < nevs; i++)
        cr_assert_neq(evs[i].watch_id, b, "cancelled watch delivered");
}

/* The threads of this process: tids and their blocked-signal masks (SigBlk). */
struct threads {
    pid_t tid[64];
    unsigned long long blk[64];
    size_t n;
};

static void list_threads(struct threads *t)
{
    DIR *d = opendir("/proc/self/task");
    cr_assert_not_null(d);
    struct dirent *de;
    t->n = 0;
    while ((de = readdir(d)) && t->n < 64) {
        if (de->d_name[0] == '.')
            continue;
        char path[300], line[256];
        snprintf(path, sizeof(path), "/proc/self/task/%s/status", de->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        unsigned long long blk = 0;
        while (fgets(line, sizeof(line), f))
            if (sscanf(line, "SigBlk: %llx", &blk) == 1)
                break;
        fclose(f);
        t->tid[t->n] = (pid_t)atoi(de->d_name);
        t->blk[t->n++] = blk;
    }
    closedir(d);
}

Test(gateway_stream, helper_thread_blocks_all_signals)
{
    start(0);
    struct threads before, after;
    list_threads(&before);
    etcdt_watch(kv, "/sig/", 0);
    list_threads(&after);
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE, SIGUSR1, SIGUSR2, SIGALRM, SIGQUIT};
    size_t fresh = 0;
    for (size_t i = 0; i < after.n; i++) {
        int old = 0;
        for (size_t j = 0; j < before.n; j++)
            old |= before.tid[j] == after.tid[i];
        if (old)
            continue;
        fresh++;
        for (size_t k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++)
            cr_assert(after.blk[i] & (1ull << (sigs[k] - 1)), "helper thread %d: signal %d open",
                      (int)after.tid[i], sigs[k]);
    }
    cr_assert_eq(fresh, 1, "one helper thread for the watch (%zu new threads)", fresh);
    /* The caller's own mask is as before. */
    sigset_t cur;
    pthread_sigmask(SIG_SETMASK, NULL, &cur);
    cr_assert_eq(sigismember(&cur, SIGTERM), 0);
    /* A second watch reuses the same thread. */
    etcdt_watch(kv, "/sig2/", 0);
    list_threads(&before);
    cr_assert_eq(before.n, after.n);
}

Test(gateway_stream, close_with_live_watches_and_queued_events)
{
    start(0);
    for (int i = 0; i < 4; i++)
        etcdt_watch(kv, "/q/", 0);
    for (int i = 0; i < 5; i++)
        etcdt_put(kv, "/q/k", "v", 0);
    struct pollfd p = {.fd = kv_event_fd(kv), .events = POLLIN};
    cr_assert_eq(poll(&p, 1, 4000), 1, "events queued");
    int64_t t0 = ea_now_ms();
    kv_close(kv); /* queued events, live transfers: freed (ASan/LSan check), no hang */
    kv = NULL;
    cr_assert_lt(ea_now_ms() - t0, 1000);
}

/* Open descriptors of this process into fds[] (ascending); how many. */
static size_t open_fds(int *fds, size_t cap)
{
    DIR *d = opendir("/proc/self/fd");
    cr_assert_not_null(d);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < cap)
        if (de->d_name[0] != '.' && atoi(de->d_name) != dirfd(d))
            fds[n++] = atoi(de->d_name);
    closedir(d);
    return n;
}

Test(gateway_stream, every_descriptor_of_the_handle_is_cloexec)
{
    cr_assert_eq(etcd_harness_start(&h, 1), 0);
    static int before[1024], after[1024];
    size_t nb = open_fds(before, 1024);
    char urls[256];
    gwt_urls(&h, urls, sizeof(urls));
    /* Two endpoints (the first refuses), so failover opens more than one connection. */
    char eps[320];
    snprintf(eps, sizeof(eps), "http://127.0.0.1:%d,%s", gwt_dead_port(), urls);
    struct ea_error err = {0};
    cr_assert_eq(gwt_open(&h, eps, 0, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    int64_t id = etcdt_watch(kv, "/fd/", 0);
    etcdt_put(kv, "/fd/a", "1", 0);
    cr_assert_geq(etcd_harness_wait_type(kv, &evs, &nevs, id, KV_EVENT_PUT, 4000), 0);
    size_t na = open_fds(after, 1024), fresh = 0;
    for (size_t i = 0; i < na; i++) {
        int old = 0;
        for (size_t j = 0; j < nb; j++)
            old |= before[j] == after[i];
        if (old)
            continue;
        fresh++;
        char path[64], target[128] = "";
        snprintf(path, sizeof(path), "/proc/self/fd/%d", after[i]);
        ssize_t n = readlink(path, target, sizeof(target) - 1);
        target[n > 0 ? n : 0] = '\0';
        int fl = fcntl(after[i], F_GETFD);
        cr_assert(fl >= 0 && (fl & FD_CLOEXEC), "fd %d (%s) is not CLOEXEC", after[i], target);
    }
    cr_assert_geq(fresh, 3, "eventfd, connections, curl's own: %zu new descriptors", fresh);
}
