// SPDX-License-Identifier: Apache-2.0
/*
 * Watches of the etcd backend against a real single-member etcd: events from "now", replay from
 * an old revision in revision order, DELETE events (explicit and by lease expiry), several
 * watches routed by id, cancel drops events, compaction ends a watch with KV_ECOMPACTED.
 */
#include <criterion/criterion.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "ea_time.h"
#include "etcd.h"
#include "etcd_harness.h"
#include "etcd_testutil.h"

static struct etcd_harness h;
static struct kv *kv;
static struct kv_event *evs;
static size_t nevs;

static void setup(void)
{
    cr_assert_eq(etcd_harness_start(&h, 1), 0, "etcd did not start");
    struct ea_error err = {0};
    cr_assert_eq(etcd_harness_open(h.endpoints, 0, NULL, NULL, &kv, &err), 0, "%s", err.msg);
}

static void teardown(void)
{
    kv_events_free(evs, nevs);
    kv_close(kv);
    etcd_harness_stop(&h);
}

TestSuite(etcd_watch, .init = setup, .fini = teardown, .timeout = 30);

Test(etcd_watch, from_now_sees_next_put)
{
    etcdt_put(kv, "/w/before", "x", 0);
    int64_t id = etcdt_watch(kv, "/w/", 0);
    /* watch() returns once etcd has registered the watcher: nothing can slip in between. */
    int64_t rev = etcdt_put(kv, "/w/k", "v", 0);
    cr_assert_geq(etcd_harness_wait_events(kv, &evs, &nevs, 1, 4000), 1, "no event");
    cr_assert_eq(nevs, 1, "only the put after the watch");
    cr_assert_eq(evs[0].type, KV_EVENT_PUT);
    cr_assert_eq(evs[0].watch_id, id);
    cr_assert_str_eq(evs[0].entry.key, "/w/k");
    cr_assert_str_eq(evs[0].entry.value, "v");
    cr_assert_eq(evs[0].entry.mod_revision, rev);
    cr_assert_eq(evs[0].entry.create_revision, rev);

    /* Nothing else pending: read_events hands over zero events without blocking. */
    struct kv_event *none = NULL;
    size_t n = 9;
    struct ea_error err = {0};
    cr_assert_eq(kv_read_events(kv, &none, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 0);
    kv_events_free(none, n);
}

Test(etcd_watch, replay_from_old_revision_in_order)
{
    int64_t r1 = etcdt_put(kv, "/r/a", "1", 0);
    int64_t r2 = etcdt_put(kv, "/r/b", "2", 0);
    int64_t r3 = etcdt_put(kv, "/r/a", "3", 0);
    struct ea_error err = {0};
    cr_assert_eq(kv_del(kv, "/r/b", &err), 0, "%s", err.msg);
    etcdt_put(kv, "/other", "not watched", 0);

    int64_t id = etcdt_watch(kv, "/r/", r1);
    cr_assert_eq(etcd_harness_wait_events(kv, &evs, &nevs, 4, 4000), 4);
    int64_t revs[] = {r1, r2, r3};
    const char *vals[] = {"1", "2", "3"};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(evs[i].type, KV_EVENT_PUT);
        cr_assert_eq(evs[i].watch_id, id);
        cr_assert_eq(evs[i].entry.mod_revision, revs[i]);
        cr_assert_str_eq(evs[i].entry.value, vals[i]);
    }
    cr_assert_eq(evs[2].entry.create_revision, r1);
    cr_assert_eq(evs[3].type, KV_EVENT_DELETE);
    cr_assert_str_eq(evs[3].entry.key, "/r/b");
    cr_assert_str_eq(evs[3].entry.value, "");
    cr_assert_eq(evs[3].entry.mod_revision, r3 + 1, "DELETE carries the delete's revision");
}

Test(etcd_watch, several_watches_routed_by_id)
{
    int64_t a, b, all;
    etcdt_watches_routed_by_id(kv, &evs, &nevs, &a, &b, &all);
}

Test(etcd_watch, cancel_drops_pending_and_future_events)
{
    int64_t a = etcdt_watch(kv, "/c/", 0);
    int64_t b = etcdt_watch(kv, "/c/", 0);
    etcdt_put(kv, "/c/1", "1", 0);
    /* b's event is the marker that a's is queued too (same revision, same stream). */
    cr_assert_geq(etcd_harness_wait_type(kv, &evs, &nevs, b, KV_EVENT_PUT, 4000), 0);
    kv_events_free(evs, nevs);
    evs = NULL;
    nevs = 0;

    etcdt_put(kv, "/c/2", "2", 0);
    cr_assert_geq(etcd_harness_wait_type(kv, &evs, &nevs, b, KV_EVENT_PUT, 4000), 0);
    kv_watch_cancel(kv, a);     /* a's event for /c/2 may be queued or read already: drop queued */
    kv_watch_cancel(kv, 12345); /* unknown id: no-op */
    kv_events_free(evs, nevs);
    evs = NULL;
    nevs = 0;

    etcdt_put(kv, "/c/3", "3", 0);
    cr_assert_geq(etcd_harness_wait_type(kv, &evs, &nevs, b, KV_EVENT_PUT, 4000), 0);
    for (size_t i = 0; i < nevs; i++)
        cr_assert_neq(evs[i].watch_id, a, "no event for a cancelled watch");
}

Test(etcd_watch, lease_expiry_deletes_key_and_watcher_sees_delete)
{
    struct ea_error err = {0};
    int64_t lease = 0;
    cr_assert_eq(kv_lease_grant(kv, 1000, &lease, &err), 0, "%s", err.msg);
    int64_t id = etcdt_watch(kv, "/alive/", 0);
    etcdt_put(kv, "/alive/node1", "{}", lease);
    cr_assert_geq(etcd_harness_wait_type(kv, &evs, &nevs, id, KV_EVENT_PUT, 4000), 0);

    int64_t t0 = ea_now_ms();
    long i = etcd_harness_wait_type(kv, &evs, &nevs, id, KV_EVENT_DELETE, 4000);
    cr_assert_geq(i, 0, "no DELETE within 4 s of a 1 s lease");
    cr_assert_str_eq(evs[i].entry.key, "/alive/node1");
    cr_log_info("lease expiry seen after %lld ms", (long long)(ea_now_ms() - t0));
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/alive/node1", &e, &err), KV_ENOTFOUND);
    cr_assert_eq(kv_lease_keepalive(kv, lease, NULL, &err), KV_ENOLEASE);
}

Test(etcd_watch, compacted_revision_ends_watch_with_ecompacted)
{
    etcdt_compacted_watch(kv, &evs, &nevs, etcd_compact);
    struct ea_error err = {0};
    cr_assert_eq(etcd_compact(NULL, 1, &err), KV_EINVAL, "not an etcd handle");
}

Test(etcd_watch, event_fd_is_pollable_and_quiet_when_drained)
{
    int fd = kv_event_fd(kv);
    cr_assert_geq(fd, 0);
    cr_assert_eq(fd, kv_event_fd(kv), "stable for the handle's lifetime");
    int64_t id = etcdt_watch(kv, "/p/", 0);
    etcdt_put(kv, "/p/1", "1", 0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    cr_assert_eq(poll(&p, 1, 4000), 1, "event fd readable after a change");
    cr_assert_geq(etcd_harness_wait_type(kv, &evs, &nevs, id, KV_EVENT_PUT, 4000), 0);
    cr_assert_eq(poll(&p, 1, 0), 0, "drained: not readable any more");
}
