// SPDX-License-Identifier: Apache-2.0
/*
 * KV conformance suite, part 2: leases, watches, the event fd, concurrent CAS writers. Same
 * fixture mechanism as part 1 (conformance.c, which says how to add a backend). Every wait is a
 * poll() on the backend's event fd with a deadline; nothing sleeps.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ea_time.h"
#include "kvtest.h"

#define C kvt_suite_ctx
#define KV kvt_suite_kv
#define K(name) kvt_key(&C, name)

TestSuite(kv_watch, .init = kvt_suite_init, .fini = kvt_suite_fini, .timeout = 30);

static int64_t ttl(int64_t want)
{
    return want > kv_fixture.min_ttl_ms ? want : kv_fixture.min_ttl_ms;
}

static int64_t grant(int64_t ttl_ms)
{
    int64_t lease = 0;
    struct ea_error err = {0};
    int r = kv_lease_grant(KV, ttl_ms, &lease, &err);
    cr_assert_eq(r, 0, "lease_grant: %s (%s)", kv_strerror(r), err.msg);
    cr_assert_neq(lease, 0);
    return lease;
}

static int64_t watch(const char *prefix, int64_t from)
{
    int64_t w = 0;
    struct ea_error err = {0};
    int r = kv_watch(KV, prefix, from, &w, &err);
    cr_assert_eq(r, 0, "watch %s from %lld: %s (%s)", prefix, (long long)from, kv_strerror(r),
                 err.msg);
    return w;
}

static bool present(const char *key)
{
    struct kv_entry e = {0};
    int r = kv_get(KV, key, &e, NULL);
    cr_assert(r == 0 || r == KV_ENOTFOUND, "get %s: %s", key, kv_strerror(r));
    kv_entry_clear(&e);
    return r == 0;
}

Test(kv_watch, lease_grant_keepalive_revoke)
{
    int64_t t = ttl(5000);
    int64_t l1 = grant(t), l2 = grant(t);
    cr_assert_neq(l1, l2, "two leases share an id");
    int64_t granted = 0;
    struct ea_error err = {0};
    cr_assert_eq(kv_lease_keepalive(KV, l1, &granted, &err), 0, "%s", err.msg);
    cr_assert_geq(granted, t, "keepalive granted %lld ms < %lld", (long long)granted, (long long)t);
    cr_assert_eq(kv_lease_keepalive(KV, l1, NULL, NULL), 0, "NULL ret_ttl_ms");

    kvt_put_lease(KV, K("a"), "leased", l1);
    kvt_put_lease(KV, K("b"), "other lease", l2);
    kvt_put(KV, K("c"), "no lease");
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(KV, K("a"), &e, NULL), 0);
    cr_assert_eq(e.lease, l1);
    kv_entry_clear(&e);

    int64_t w = watch(C.prefix, 0);
    cr_assert_eq(kv_lease_revoke(KV, l1, &err), 0, "%s", err.msg);
    cr_assert(!present(K("a")), "revoke must delete the lease's keys at once");
    cr_assert(present(K("b")) && present(K("c")), "revoke deleted unrelated keys");

    struct kvt_events acc = {0};
    kvt_wait_events(KV, w, &acc, 1, 3000);
    cr_assert_eq(acc.n, 1);
    cr_assert_eq(acc.ev[0].type, KV_EVENT_DELETE);
    cr_assert_str_eq(acc.ev[0].entry.key, K("a"));
    kvt_events_clear(&acc);

    cr_assert_eq(kv_lease_revoke(KV, l1, NULL), KV_ENOLEASE, "revoking twice");
    cr_assert_eq(kv_lease_keepalive(KV, l1, NULL, NULL), KV_ENOLEASE, "renewing a revoked lease");
    cr_assert_eq(kv_lease_revoke(KV, 987654321, NULL), KV_ENOLEASE, "revoking an unknown lease");
    cr_assert_eq(kv_put(KV, K("d"), "v", 1, l1, NULL, NULL), KV_ENOLEASE, "put on revoked lease");
    cr_assert_eq(kv_lease_revoke(KV, l2, NULL), 0); /* leave a shared store quiet */
}

/* The liveness ring's coordinator revokes another agent's lease (rendezvous/suspect.c): a lease
 * granted on one handle, learnt from a key's entry on another handle, is revoked from there. */
Test(kv_watch, a_lease_is_revoked_from_another_handle)
{
    if (!kv_fixture.shared)
        kvt_skip("%s: one store per handle", kv_fixture.name);
    int64_t l1 = grant(ttl(5000));
    kvt_put_lease(KV, K("node"), "held by handle 1", l1);
    struct kv *other = NULL;
    struct ea_error err = {0};
    cr_assert_eq(kv_open(&C.cfg, &other, &err), 0, "%s", err.msg);
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(other, K("node"), &e, &err), 0, "%s", err.msg);
    cr_assert_eq(e.lease, l1, "another handle reads which lease a key is on");
    kv_entry_clear(&e);
    cr_assert_eq(kv_lease_revoke(other, l1, &err), 0, "%s", err.msg);
    cr_assert(!present(K("node")), "the revoke from the other handle deleted the key");
    cr_assert_eq(kv_lease_keepalive(KV, l1, NULL, NULL), KV_ENOLEASE,
                 "the owner finds its lease gone");
    kv_close(other);
}

/* A burst of evictions (rendezvous/suspect.c rdzv_evict_each): many leases revoked in one call,
 * each answered as lease_revoke would, an unknown one among them not failing the rest; more
 * than one batch of the etcd backend's (ETCD_EACH_MAX, 128) in flight. */
Test(kv_watch, many_leases_are_revoked_in_one_call)
{
    enum { M = 140 };
    int64_t ls[M + 1];
    static char key[M][256];
    for (int i = 0; i < M; i++) {
        ls[i] = grant(ttl(10000));
        char name[16];
        snprintf(name, sizeof(name), "r%03d", i);
        snprintf(key[i], sizeof(key[i]), "%s", K(name));
        kvt_put_lease(KV, key[i], "v", ls[i]);
    }
    ls[M] = 1; /* unknown: a positive id none of the granted has */
    for (int i = 0; i < M; i++)
        if (ls[i] >= ls[M])
            ls[M] = ls[i] + 1;
    int codes[M + 1];
    memset(codes, 0x7f, sizeof(codes));
    struct ea_error err = {0};
    cr_assert_eq(kv_lease_revoke_each(KV, ls, M + 1, codes, &err), 0, "%s", err.msg);
    for (int i = 0; i < M; i++) {
        cr_assert_eq(codes[i], 0, "lease %d: %d", i, codes[i]);
        cr_assert(!present(key[i]), "%s went with its lease", key[i]);
    }
    cr_assert_eq(codes[M], KV_ENOLEASE, "the unknown lease: %d", codes[M]);
    cr_assert(strlen(err.msg) > 0, "the failure is named");
    memset(codes, 0, sizeof(codes));
    cr_assert_eq(kv_lease_revoke_each(KV, ls, 2, codes, &err), 0, "%s", err.msg);
    cr_assert_eq(codes[0], KV_ENOLEASE, "revoked already");
    cr_assert_eq(kv_lease_revoke_each(KV, ls, 0, codes, &err), 0, "nothing to do");
}

/* Many leases renewed in one call (bench/rdzv_sim.c: a process's 625 sessions): each answered as
 * lease_keepalive would, more than one batch of the etcd backend's in flight; a revoked lease
 * and an unknown one are reported lost (etcd answers them with TTL 0), not renewed. */
Test(kv_watch, many_leases_are_renewed_in_one_call)
{
    enum { M = 140 };
    int64_t ls[M + 2];
    for (int i = 0; i < M + 1; i++)
        ls[i] = grant(ttl(10000));
    kvt_put_lease(KV, K("kept"), "v", ls[0]);
    struct ea_error err = {0};
    cr_assert_eq(kv_lease_revoke(KV, ls[M], &err), 0, "%s", err.msg);
    ls[M + 1] = 1; /* unknown: a positive id none of the granted has */
    for (int i = 0; i <= M; i++)
        if (ls[i] >= ls[M + 1])
            ls[M + 1] = ls[i] + 1;
    int codes[M + 2];
    memset(codes, 0x7f, sizeof(codes));
    cr_assert_eq(kv_lease_keepalive_each(KV, ls, M + 2, codes, &err), 0, "%s", err.msg);
    for (int i = 0; i < M; i++)
        cr_assert_eq(codes[i], 0, "lease %d: %d", i, codes[i]);
    cr_assert_eq(codes[M], KV_ENOLEASE, "the revoked lease: %d", codes[M]);
    cr_assert_eq(codes[M + 1], KV_ENOLEASE, "the unknown lease: %d", codes[M + 1]);
    cr_assert(strlen(err.msg) > 0, "the failure is named");
    cr_assert(present(K("kept")), "a renewed lease keeps its key");
    cr_assert_eq(kv_lease_keepalive(KV, ls[0], NULL, &err), 0, "still alive: %s", err.msg);
    cr_assert_eq(kv_lease_keepalive_each(KV, ls, 0, codes, &err), 0, "nothing to do");
}

Test(kv_watch, lease_expiry_deletes_keys_and_notifies_watchers)
{
    int64_t t = ttl(300);
    int64_t w = watch(C.prefix, 0);
    int64_t t0 = ea_now_ms();
    int64_t lease = grant(t);
    kvt_put_lease(KV, K("a"), "1", lease);
    kvt_put_lease(KV, K("b"), "1", lease);
    kvt_put(KV, K("c"), "no lease");
    cr_assert(present(K("a")), "leased key gone before its TTL");

    struct kvt_events acc = {0};
    kvt_wait_events(KV, w, &acc, 5, (int)(t + kv_fixture.late_ms + 3000));
    int64_t seen = ea_now_ms() - t0;
    cr_assert_eq(acc.n, 5, "expected 3 PUT + 2 DELETE events, got %zu", acc.n);
    long da = kvt_find_event(&acc, KV_EVENT_DELETE, K("a"));
    long db = kvt_find_event(&acc, KV_EVENT_DELETE, K("b"));
    cr_assert(da >= 3 && db >= 3, "DELETE events missing or out of order (%ld, %ld)", da, db);
    cr_assert_geq(seen, t - 5, "expired after %lld ms, TTL %lld", (long long)seen, (long long)t);
    cr_assert_gt(acc.ev[da].entry.mod_revision, acc.ev[2].entry.mod_revision);
    kvt_events_clear(&acc);

    cr_assert(!present(K("a")) && !present(K("b")));
    cr_assert(present(K("c")));
    cr_assert_eq(kv_lease_keepalive(KV, lease, NULL, NULL), KV_ENOLEASE,
                 "keepalive on an expired lease");
    cr_assert_eq(kv_put(KV, K("d"), "v", 1, lease, NULL, NULL), KV_ENOLEASE);
}

Test(kv_watch, keepalive_keeps_keys_alive_past_the_ttl)
{
    int64_t t = ttl(400);
    int64_t w = watch(C.prefix, 0);
    int64_t lease = grant(t);
    kvt_put_lease(KV, K("a"), "1", lease);
    struct kvt_events acc = {0};
    int64_t until = ea_now_ms() + 3 * t;
    while (ea_now_ms() < until) {
        /* the wait is the event loop's: anything arriving now would be a premature DELETE */
        kvt_wait_events(KV, w, &acc, 2, (int)(t / 4));
        cr_assert_eq(kvt_find_event(&acc, KV_EVENT_DELETE, K("a")), -1,
                     "key expired although renewed every TTL/4");
        struct ea_error err = {0};
        cr_assert_eq(kv_lease_keepalive(KV, lease, NULL, &err), 0, "%s", err.msg);
    }
    cr_assert(present(K("a")));
    kvt_wait_events(KV, w, &acc, 2, (int)(t + kv_fixture.late_ms + 3000));
    cr_assert_geq(kvt_find_event(&acc, KV_EVENT_DELETE, K("a")), 0, "no expiry once renewal stops");
    kvt_events_clear(&acc);
}

Test(kv_watch, watch_from_now_sees_later_changes_only)
{
    kvt_put(KV, K("a"), "old");
    int64_t w = watch(C.prefix, 0);
    int64_t rb = kvt_put(KV, K("b"), "1");
    int64_t ra = kvt_put(KV, K("a"), "new");
    cr_assert_eq(kv_del(KV, K("b"), NULL), 0);
    struct kvt_events acc = {0};
    kvt_wait_events(KV, w, &acc, 3, 3000);
    kvt_wait_events(KV, w, &acc, 4, 200);
    cr_assert_eq(acc.n, 3, "got %zu events", acc.n);
    cr_assert_eq(acc.ev[0].type, KV_EVENT_PUT);
    cr_assert_str_eq(acc.ev[0].entry.key, K("b"));
    cr_assert_eq(acc.ev[0].entry.mod_revision, rb);
    cr_assert_eq(acc.ev[1].type, KV_EVENT_PUT);
    cr_assert_str_eq(acc.ev[1].entry.value, "new");
    cr_assert_eq(acc.ev[1].entry.mod_revision, ra);
    cr_assert_eq(acc.ev[2].type, KV_EVENT_DELETE);
    cr_assert_str_eq(acc.ev[2].entry.key, K("b"));
    cr_assert_gt(acc.ev[2].entry.mod_revision, ra);
    cr_assert_not_null(acc.ev[2].entry.value);
    for (size_t i = 0; i < acc.n; i++)
        cr_assert_eq(acc.ev[i].watch_id, w);
    kvt_events_clear(&acc);
}

Test(kv_watch, watch_from_old_revision_replays_everything_in_order)
{
    int64_t r1 = kvt_put(KV, K("a"), "1");
    int64_t r2 = kvt_put(KV, K("b"), "1");
    int64_t r3 = kvt_put(KV, K("a"), "2");
    cr_assert_eq(kv_del(KV, K("b"), NULL), 0);
    int64_t r5 = kvt_put(KV, K("c"), "1");
    int64_t w = watch(C.prefix, r2);
    struct kvt_events acc = {0};
    kvt_wait_events(KV, w, &acc, 4, 3000);
    kvt_wait_events(KV, w, &acc, 5, 200);
    cr_assert_eq(acc.n, 4, "replay from %lld delivered %zu events", (long long)r2, acc.n);
    cr_assert(acc.ev[0].type == KV_EVENT_PUT && acc.ev[0].entry.mod_revision == r2);
    cr_assert_str_eq(acc.ev[0].entry.key, K("b"));
    cr_assert(acc.ev[1].type == KV_EVENT_PUT && acc.ev[1].entry.mod_revision == r3);
    cr_assert_str_eq(acc.ev[1].entry.value, "2");
    cr_assert_eq(acc.ev[1].entry.create_revision, r1);
    cr_assert(acc.ev[2].type == KV_EVENT_DELETE && acc.ev[2].entry.mod_revision > r3);
    cr_assert_str_eq(acc.ev[2].entry.key, K("b"));
    cr_assert(acc.ev[3].type == KV_EVENT_PUT && acc.ev[3].entry.mod_revision == r5);
    /* and it goes on live */
    int64_t r6 = kvt_put(KV, K("d"), "1");
    kvt_wait_events(KV, w, &acc, 5, 3000);
    cr_assert_eq(acc.n, 5);
    cr_assert_eq(acc.ev[4].entry.mod_revision, r6);
    kvt_events_clear(&acc);
}

Test(kv_watch, watch_delivers_only_its_prefix)
{
    int64_t w = watch(K("dir/"), 0);
    kvt_put(KV, K("dir/x"), "1");
    kvt_put(KV, K("dirx"), "1");
    kvt_put(KV, K("other"), "1");
    kvt_put(KV, K("dir/y"), "1");
    struct kvt_events acc = {0};
    kvt_wait_events(KV, w, &acc, 2, 3000);
    kvt_wait_events(KV, w, &acc, 3, 200);
    cr_assert_eq(acc.n, 2);
    cr_assert_str_eq(acc.ev[0].entry.key, K("dir/x"));
    cr_assert_str_eq(acc.ev[1].entry.key, K("dir/y"));
    kvt_events_clear(&acc);
}

Test(kv_watch, watch_from_compacted_revision_is_ecompacted)
{
    int64_t r1 = kvt_put(KV, K("a"), "1");
    cr_assert_eq(kv_fixture.compact(&C, KV, r1), 0, "fixture could not compact");
    int64_t w = 0;
    struct ea_error err = {0};
    int r = kv_watch(KV, C.prefix, r1, &w, &err);
    if (r == 0) {
        struct kvt_events acc = {0};
        kvt_wait_events(KV, w, &acc, 1, 3000);
        cr_assert_eq(acc.n, 1);
        cr_assert_eq(acc.ev[0].type, KV_EVENT_ERROR, "replayed a compacted revision");
        cr_assert_eq(acc.ev[0].error, KV_ECOMPACTED);
        cr_assert_neq(acc.ev[0].message[0], '\0');
        kvt_events_clear(&acc);
    } else {
        cr_assert_eq(r, KV_ECOMPACTED, "got %s", kv_strerror(r));
        cr_assert_neq(err.msg[0], '\0');
    }
    /* the way out: re-list and watch after the listed revision */
    struct kv_list l = {0};
    cr_assert_eq(kv_list(KV, C.prefix, &l, NULL), 0);
    watch(C.prefix, l.revision + 1);
    kv_list_clear(&l);
}

Test(kv_watch, watcher_that_falls_behind_gets_one_compacted_error)
{
    if (!kv_fixture.bounded_log)
        kvt_skip("%s keeps history for live watches", kv_fixture.name);
    int64_t w = watch(C.prefix, 0);
    int64_t r1 = kvt_put(KV, K("a"), "1");
    cr_assert_eq(kv_fixture.compact(&C, KV, r1), 0);
    struct kvt_events acc = {0};
    kvt_wait_events(KV, w, &acc, 1, 3000);
    kvt_put(KV, K("b"), "1");
    kvt_wait_events(KV, w, &acc, 2, 300);
    cr_assert_eq(acc.n, 1, "a broken watch must deliver exactly one error, got %zu", acc.n);
    cr_assert_eq(acc.ev[0].type, KV_EVENT_ERROR);
    cr_assert_eq(acc.ev[0].error, KV_ECOMPACTED);
    kvt_events_clear(&acc);
}

Test(kv_watch, watch_cancel_drops_undelivered_events)
{
    int64_t w1 = watch(C.prefix, 0), w2 = watch(C.prefix, 0);
    cr_assert_neq(w1, w2);
    kvt_put(KV, K("a"), "1");
    kv_watch_cancel(KV, w1);
    kv_watch_cancel(KV, 987654321); /* unknown: no-op */
    kvt_put(KV, K("b"), "1");
    struct kvt_events acc = {0};
    kvt_wait_events(KV, 0, &acc, 2, 3000);
    kvt_wait_events(KV, 0, &acc, 3, 200);
    cr_assert_eq(acc.n, 2, "got %zu events", acc.n);
    for (size_t i = 0; i < acc.n; i++)
        cr_assert_eq(acc.ev[i].watch_id, w2, "cancelled watch %lld delivered", (long long)w1);
    kvt_events_clear(&acc);
}

Test(kv_watch, event_fd_is_stable_and_quiet_when_idle)
{
    int fd = kv_event_fd(KV);
    cr_assert_geq(fd, 0);
    int64_t w = watch(C.prefix, 0);
    int64_t lease = grant(ttl(60000)); /* a pending lease must not make the fd spin */
    kvt_put(KV, K("a"), "1");
    struct kvt_events acc = {0};
    kvt_wait_events(KV, w, &acc, 1, 3000);
    cr_assert_eq(acc.n, 1);
    kvt_events_clear(&acc);
    kvt_wait_events(KV, w, &acc, 0, 0); /* housekeeping done, nothing left */
    cr_assert(kvt_fd_quiet(fd, 200), "event fd readable with nothing to deliver (busy loop)");
    cr_assert_eq(kv_event_fd(KV), fd);
    kvt_events_clear(&acc);
    cr_assert_eq(kv_lease_revoke(KV, lease, NULL), 0);
}

static bool readable_within(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1;
}

Test(kv_watch, event_fd_becomes_readable_when_events_are_due)
{
    int fd = kv_event_fd(KV);
    int64_t r1 = kvt_put(KV, K("a"), "1");
    int64_t w = watch(C.prefix, 0);
    struct kvt_events acc = {0};
    kvt_wait_events(KV, w, &acc, 0, 0);
    cr_assert(kvt_fd_quiet(fd, 50));
    /* a write: the fd must wake the loop before anyone calls read_events */
    kvt_put(KV, K("b"), "1");
    cr_assert(readable_within(fd, 3000), "event fd not readable after a watched write");
    kvt_wait_events(KV, w, &acc, 1, 3000);
    cr_assert_eq(acc.n, 1);
    kvt_events_clear(&acc);
    cr_assert(kvt_fd_quiet(fd, 50), "event fd still readable after read_events");
    /* a watch from the past has events due at once */
    int64_t w2 = watch(C.prefix, r1);
    cr_assert(readable_within(fd, 3000), "event fd not readable for a replaying watch");
    kvt_wait_events(KV, w2, &acc, 2, 3000);
    cr_assert_eq(acc.n, 2);
    kvt_events_clear(&acc);
}

Test(kv_watch, closing_a_handle_does_not_revoke_its_leases)
{
    if (!kv_fixture.shared)
        kvt_skip("%s: one store per handle", kv_fixture.name);
    struct kv *other = NULL;
    cr_assert_eq(kv_open(&C.cfg, &other, NULL), 0);
    int64_t lease = 0;
    cr_assert_eq(kv_lease_grant(other, ttl(60000), &lease, NULL), 0);
    cr_assert_eq(kv_put(other, K("a"), "1", 1, lease, NULL, NULL), 0);
    kv_close(other);
    cr_assert(present(K("a")));
    cr_assert_eq(kv_lease_keepalive(KV, lease, NULL, NULL), 0, "lease visible to other handles");
    cr_assert_eq(kv_lease_revoke(KV, lease, NULL), 0);
}

/* ---- many writers: read, increment, CAS; exactly one winner per revision ---- */

#define WRITERS 4
#define INCREMENTS 50

/* Increment the counter `n` times; report each winning revision. 0 or a negative code. */
static int cas_increments(struct kv *kv, const char *key, int n, int64_t *revs)
{
    struct kv_entry cur = {0};
    int r = kv_get(kv, key, &cur, NULL);
    if (r < 0)
        return r;
    for (int done = 0; done < n;) {
        char buf[32];
        int len = snprintf(buf, sizeof(buf), "%ld", strtol(cur.value, NULL, 10) + 1);
        int64_t rev = 0;
        struct kv_entry now = {0};
        r = kv_cas(kv, key, buf, (size_t)len, cur.mod_revision, 0, &rev, &now, NULL);
        if (r == 0) {
            revs[done++] = rev;
            kv_entry_clear(&cur);
            cur = (struct kv_entry){.key = strdup(key), .value = strdup(buf), .mod_revision = rev};
        } else if (r == KV_ECONFLICT) {
            kv_entry_clear(&cur);
            cur = now;
        } else {
            break;
        }
    }
    kv_entry_clear(&cur);
    return r;
}

struct writer {
    const char *key;
    int64_t revs[INCREMENTS];
    int result;
};

static void *writer_thread(void *arg)
{
    struct writer *w = arg;
    w->result = cas_increments(KV, w->key, INCREMENTS, w->revs);
    return NULL;
}

/* Each child opens its own handle, waits for the start signal, reports revisions on out_fd. */
static void writer_process(const char *key, int go_fd, int out_fd)
{
    struct kv *kv = NULL;
    char c;
    if (kv_open(&C.cfg, &kv, NULL) < 0 || read(go_fd, &c, 1) != 0)
        _exit(2);
    int64_t revs[INCREMENTS];
    int r = cas_increments(kv, key, INCREMENTS, revs);
    kv_close(kv);
    if (r < 0 || write(out_fd, revs, sizeof(revs)) != (ssize_t)sizeof(revs))
        _exit(3);
    _exit(0);
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

Test(kv_watch, concurrent_cas_writers_lose_no_update, .timeout = 60)
{
    const char *key = K("counter");
    int64_t start = 0;
    cr_assert_eq(kv_cas(KV, key, "0", 1, 0, 0, &start, NULL, NULL), 0);
    int64_t revs[WRITERS * INCREMENTS];
    if (kv_fixture.shared) {
        int go[2], out[2];
        cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
        pid_t pids[WRITERS];
        for (int i = 0; i < WRITERS; i++) {
            pids[i] = fork();
            cr_assert_geq(pids[i], 0);
            if (pids[i] == 0) {
                close(go[1]);
                close(out[0]);
                writer_process(key, go[0], out[1]);
            }
        }
        close(go[0]);
        close(out[1]);
        close(go[1]); /* EOF on go: everyone starts at once */
        for (int i = 0; i < WRITERS; i++) {
            int st = 0;
            cr_assert_eq(waitpid(pids[i], &st, 0), pids[i]);
            cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %d failed (status %d)", i, st);
        }
        size_t got = 0;
        ssize_t n;
        while ((n = read(out[0], (char *)revs + got, sizeof(revs) - got)) > 0)
            got += (size_t)n;
        close(out[0]);
        cr_assert_eq(got, sizeof(revs), "writers reported %zu bytes", got);
    } else {
        struct writer w[WRITERS];
        pthread_t th[WRITERS];
        for (int i = 0; i < WRITERS; i++) {
            w[i] = (struct writer){.key = key};
            cr_assert_eq(pthread_create(&th[i], NULL, writer_thread, &w[i]), 0);
        }
        for (int i = 0; i < WRITERS; i++) {
            pthread_join(th[i], NULL);
            cr_assert_eq(w[i].result, 0, "writer %d: %s", i, kv_strerror(w[i].result));
            memcpy(&revs[i * INCREMENTS], w[i].revs, sizeof(w[i].revs));
        }
    }
    size_t total = WRITERS * INCREMENTS;
    qsort(revs, total, sizeof(revs[0]), cmp64);
    for (size_t i = 1; i < total; i++)
        cr_assert_neq(revs[i], revs[i - 1], "two CAS winners at revision %lld", (long long)revs[i]);
    cr_assert_gt(revs[0], start);

    struct kv_entry e = {0};
    cr_assert_eq(kv_get(KV, key, &e, NULL), 0);
    cr_assert_eq(strtol(e.value, NULL, 10), (long)total, "counter %s after %zu winning CAS",
                 e.value, total);
    cr_assert_eq(e.mod_revision, revs[total - 1]);
    kv_entry_clear(&e);

    /* the history: one PUT per winner, values 1..total at exactly the winners' revisions */
    int64_t w = watch(key, start + 1);
    struct kvt_events acc = {0};
    kvt_wait_events(KV, w, &acc, total, 5000);
    cr_assert_eq(acc.n, total);
    for (size_t i = 0; i < total; i++) {
        cr_assert_eq(acc.ev[i].entry.mod_revision, revs[i]);
        cr_assert_eq(strtol(acc.ev[i].entry.value, NULL, 10), (long)i + 1, "lost update");
    }
    kvt_events_clear(&acc);
}
