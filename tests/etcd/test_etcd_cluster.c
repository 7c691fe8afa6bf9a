// SPDX-License-Identifier: Apache-2.0
/*
 * The etcd backend with several writers and several members: concurrent CAS increments from
 * forked processes (exactly one winner per revision, counter == number of successes), endpoint
 * failover in a 3-member cluster when the member in use is killed (requests, keepalive and a new
 * watch continue on another member; the old watch ends with KV_ECONN), and no quorum → KV_ECONN
 * within the request timeout. And a fork child of a process with an open handle is refused
 * cleanly (gRPC cannot run there) without disturbing the parent.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etcd.h"
#include "etcd_harness.h"
#include "etcd_testutil.h"

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

TestSuite(etcd_cluster, .fini = teardown, .timeout = 50);

#define WRITERS 4
#define ATTEMPTS 40

struct win {
    int64_t expected; /* the revision this writer won against */
    long value;       /* the counter value it wrote */
};

/* A writer process: ATTEMPTS read-modify-CAS rounds on /cas/counter; reports each win on fd.
 * Uses the loser's ret_current to retry without another read, as the rendezvous does. */
static int writer(const char *endpoints, int fd)
{
    struct kv *k = NULL;
    if (etcd_harness_open(endpoints, 0, NULL, NULL, &k, NULL))
        return 2;
    struct kv_entry cur = {0};
    int have = 0, rc = 0;
    for (int i = 0; i < ATTEMPTS && rc == 0; i++) {
        if (!have) {
            int g = kv_get(k, "/cas/counter", &cur, NULL);
            if (g == KV_ENOTFOUND) {
                cur.mod_revision = 0;
                cur.value = NULL;
            } else if (g) {
                rc = 3;
                break;
            }
        }
        long next = (cur.value ? strtol(cur.value, NULL, 10) : 0) + 1;
        char buf[32];
        int len = snprintf(buf, sizeof(buf), "%ld", next);
        struct win w = {cur.mod_revision, next};
        kv_entry_clear(&cur);
        int c = kv_cas(k, "/cas/counter", buf, (size_t)len, w.expected, 0, NULL, &cur, NULL);
        if (c == 0) {
            have = 0;
            if (write(fd, &w, sizeof(w)) != sizeof(w))
                rc = 4;
        } else if (c == KV_ECONFLICT) {
            have = 1; /* the current entry came back with the conflict */
            if (cur.mod_revision == 0) {
                kv_entry_clear(&cur); /* absent: create from 0 */
            }
        } else {
            rc = 5;
        }
    }
    kv_entry_clear(&cur);
    kv_close(k);
    return rc;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

Test(etcd_cluster, concurrent_cas_writers_one_winner_per_revision)
{
    cr_assert_eq(etcd_harness_start(&h, 1), 0);
    /* Fork before this process touches gRPC: each writer has its own gRPC. */
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    pid_t pids[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        pids[i] = fork();
        cr_assert_geq(pids[i], 0);
        if (pids[i] == 0) {
            close(p[0]);
            _exit(writer(h.endpoints, p[1]));
        }
    }
    close(p[1]);
    struct win wins[WRITERS * ATTEMPTS];
    size_t nwins = 0;
    ssize_t r;
    char *dst = (char *)wins;
    size_t got = 0;
    while ((r = read(p[0], dst + got, sizeof(wins) - got)) > 0 || (r < 0 && errno == EINTR))
        got += r > 0 ? (size_t)r : 0;
    close(p[0]);
    nwins = got / sizeof(struct win);
    for (int i = 0; i < WRITERS; i++) {
        int status;
        cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d failed: %d", i, status);
    }

    cr_assert_geq(nwins, ATTEMPTS, "at least one writer's worth of progress");
    int64_t expected[WRITERS * ATTEMPTS] = {0};
    int seen_value[WRITERS * ATTEMPTS + 1] = {0};
    for (size_t i = 0; i < nwins; i++) {
        expected[i] = wins[i].expected;
        cr_assert(wins[i].value >= 1 && (size_t)wins[i].value <= nwins, "value %ld", wins[i].value);
        cr_assert_eq(seen_value[wins[i].value]++, 0, "value %ld written twice", wins[i].value);
    }
    qsort(expected, nwins, sizeof(expected[0]), cmp_i64);
    for (size_t i = 1; i < nwins; i++)
        cr_assert_neq(expected[i], expected[i - 1], "two winners against revision %lld",
                      (long long)expected[i]);

    struct ea_error err = {0};
    cr_assert_eq(etcd_harness_open(h.endpoints, 0, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/cas/counter", &e, &err), 0, "%s", err.msg);
    cr_assert_eq(strtol(e.value, NULL, 10), (long)nwins, "counter == successes");
    cr_log_info("%zu wins out of %d attempts by %d writers", nwins, WRITERS * ATTEMPTS, WRITERS);
    kv_entry_clear(&e);
}

Test(etcd_cluster, failover_when_the_member_in_use_dies)
{
    cr_assert_eq(etcd_harness_start(&h, 3), 0);
    struct ea_error err = {0};
    cr_assert_eq(etcd_harness_open(h.endpoints, 2000, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    etcdt_failover_scenario(&h, kv, &evs, &nevs);
}

Test(etcd_cluster, fork_child_of_an_open_handle_is_refused_cleanly)
{
    cr_assert_eq(etcd_harness_start(&h, 1), 0);
    struct ea_error err = {0};
    cr_assert_eq(etcd_harness_open(h.endpoints, 2000, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    int64_t id = 0;
    cr_assert_eq(kv_watch(kv, "/fork/", 0, &id, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_put(kv, "/fork/a", "1", 1, 0, NULL, &err), 0, "%s", err.msg);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        struct kv *k2 = NULL;
        struct kv_entry e = {0};
        struct ea_error cerr = {0};
        int bad = 0;
        bad |= etcd_harness_open(h.endpoints, 2000, NULL, NULL, &k2, &cerr) != KV_EINVAL;
        bad |= strstr(cerr.msg, "fork") == NULL;
        bad |= kv_get(kv, "/fork/a", &e, NULL) != KV_EINVAL; /* the inherited handle */
        kv_close(kv); /* must neither hang nor touch the parent's connections */
        _exit(bad);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    cr_assert_eq(kv_put(kv, "/fork/b", "2", 1, 0, NULL, &err), 0, "parent unharmed: %s", err.msg);
    cr_assert_geq(etcd_harness_wait_type(kv, &evs, &nevs, id, KV_EVENT_PUT, 4000), 0);
}
