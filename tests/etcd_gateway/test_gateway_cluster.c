// SPDX-License-Identifier: Apache-2.0
/*
 * The etcd-gateway backend with several members and alongside the gRPC backend: in a 3-member
 * cluster, killing the member in use fails requests, keepalive and new watches over to another
 * member (the old watch ends with KV_ECONN), no quorum is KV_ECONN within the timeout, and
 * service resumes when quorum is back. A mixed fleet — a gRPC ("etcd") handle and a gateway
 * handle on the same etcd — sees each other's writes, watch events and leases, and a CAS from
 * one conflicts correctly with the other's, with the winner's value in the conflict answer.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "etcd_harness.h"
#include "etcd_testutil.h"
#include "gw_test.h"

static struct etcd_harness h;
static struct kv *kv, *grpc;
static struct kv_event *evs, *gevs;
static size_t nevs, ngevs;

static void teardown(void)
{
    kv_events_free(evs, nevs);
    kv_events_free(gevs, ngevs);
    kv_close(kv);
    kv_close(grpc);
    etcd_harness_stop(&h);
}

TestSuite(gateway_cluster, .fini = teardown, .timeout = 50);

Test(gateway_cluster, failover_when_the_member_in_use_dies)
{
    cr_assert_eq(etcd_harness_start(&h, 3), 0);
    char urls[256];
    gwt_urls(&h, urls, sizeof(urls));
    struct ea_error err = {0};
    cr_assert_eq(gwt_open(&h, urls, 2000, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    etcdt_failover_scenario(&h, kv, &evs, &nevs);
}

static void open_both(void)
{
    if (!kv_backend_find("etcd"))
        cr_skip_test("the gRPC etcd backend is not built in");
    cr_assert_eq(etcd_harness_start(&h, 1), 0);
    char urls[128];
    gwt_urls(&h, urls, sizeof(urls));
    struct ea_error err = {0};
    cr_assert_eq(gwt_open(&h, urls, 0, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    cr_assert_eq(etcd_harness_open(h.endpoints, 0, NULL, NULL, &grpc, &err), 0, "%s", err.msg);
}

Test(gateway_cluster, mixed_fleet_sees_each_others_writes_and_watches)
{
    open_both();
    struct ea_error err = {0};
    int64_t gw_watch = 0, grpc_watch = 0, r1 = 0, r2 = 0;
    cr_assert_eq(kv_watch(kv, "/mix/", 0, &gw_watch, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_watch(grpc, "/mix/", 0, &grpc_watch, &err), 0, "%s", err.msg);

    const char bin[] = {'x', 0, (char)0xff, '"', '\n'};
    cr_assert_eq(kv_put(grpc, "/mix/from-grpc", bin, sizeof(bin), 0, &r1, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_put(kv, "/mix/from-gw", "{\"v\":1}", 7, 0, &r2, &err), 0, "%s", err.msg);

    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/mix/from-grpc", &e, &err), 0, "%s", err.msg);
    cr_assert_eq(e.value_len, sizeof(bin));
    cr_assert_eq(memcmp(e.value, bin, sizeof(bin)), 0, "bytes survive base64 and protobuf");
    cr_assert_eq(e.mod_revision, r1);
    kv_entry_clear(&e);
    cr_assert_eq(kv_get(grpc, "/mix/from-gw", &e, &err), 0, "%s", err.msg);
    cr_assert_str_eq(e.value, "{\"v\":1}");
    cr_assert_eq(e.mod_revision, r2);
    kv_entry_clear(&e);

    /* Both watches see both writes, in the same order, with the same revisions. */
    cr_assert_eq(etcd_harness_wait_events(kv, &evs, &nevs, 2, 4000), 2);
    cr_assert_eq(etcd_harness_wait_events(grpc, &gevs, &ngevs, 2, 4000), 2);
    for (size_t i = 0; i < 2; i++) {
        cr_assert_str_eq(evs[i].entry.key, gevs[i].entry.key);
        cr_assert_eq(evs[i].entry.mod_revision, gevs[i].entry.mod_revision);
        cr_assert_eq(evs[i].entry.value_len, gevs[i].entry.value_len);
        cr_assert_eq(memcmp(evs[i].entry.value, gevs[i].entry.value, evs[i].entry.value_len), 0);
    }
    cr_assert_eq(evs[0].entry.mod_revision, r1);

    /* A lease granted by one is kept alive and revoked by the other; deletes reach both. */
    int64_t lease = 0, ttl = 0;
    cr_assert_eq(kv_lease_grant(kv, 10000, &lease, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_put(grpc, "/mix/leased", "1", 1, lease, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_lease_keepalive(grpc, lease, &ttl, &err), 0, "%s", err.msg);
    cr_assert_eq(ttl, 10000);
    cr_assert_eq(kv_get(kv, "/mix/leased", &e, &err), 0, "%s", err.msg);
    cr_assert_eq(e.lease, lease, "lease ids > 2^53 survive JSON");
    kv_entry_clear(&e);
    cr_assert_eq(kv_lease_revoke(grpc, lease, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_lease_keepalive(kv, lease, NULL, &err), KV_ENOLEASE, "%s", err.msg);
    long d = etcd_harness_wait_type(kv, &evs, &nevs, gw_watch, KV_EVENT_DELETE, 4000);
    cr_assert_geq(d, 0, "gateway watch sees the revoke's delete");
    cr_assert_geq(etcd_harness_wait_type(grpc, &gevs, &ngevs, grpc_watch, KV_EVENT_DELETE, 4000),
                  0);
}

Test(gateway_cluster, mixed_fleet_cas_conflicts_across_backends)
{
    open_both();
    struct ea_error err = {0};
    int64_t r0 = 0, r1 = 0, r2 = 0, rev = 77;
    struct kv_entry cur = {0};

    /* Create-only race: the gateway wins, gRPC loses and learns the gateway's value. */
    cr_assert_eq(kv_cas(kv, "/cas/lock", "gw", 2, 0, 0, &r0, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_cas(grpc, "/cas/lock", "grpc", 4, 0, 0, &rev, &cur, &err), KV_ECONFLICT, "%s",
                 err.msg);
    cr_assert_eq(rev, 77);
    cr_assert_str_eq(cur.value, "gw");
    cr_assert_eq(cur.mod_revision, r0);
    kv_entry_clear(&cur);

    /* Both read r0; gRPC writes first; the gateway's stale CAS loses with gRPC's value. */
    cr_assert_eq(kv_cas(grpc, "/cas/lock", "grpc-1", 6, r0, 0, &r1, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_cas(kv, "/cas/lock", "gw-1", 4, r0, 0, &rev, &cur, &err), KV_ECONFLICT, "%s",
                 err.msg);
    cr_assert_str_eq(cur.value, "grpc-1");
    cr_assert_eq(cur.mod_revision, r1);
    cr_assert_eq(cur.create_revision, r0);
    /* The loser retries on what it learned, and now wins; gRPC's stale retry loses. */
    cr_assert_eq(kv_cas(kv, "/cas/lock", "gw-2", 4, cur.mod_revision, 0, &r2, NULL, &err), 0, "%s",
                 err.msg);
    kv_entry_clear(&cur);
    cr_assert_gt(r2, r1);
    cr_assert_eq(kv_cas(grpc, "/cas/lock", "grpc-2", 6, r1, 0, NULL, &cur, &err), KV_ECONFLICT);
    cr_assert_str_eq(cur.value, "gw-2");
    cr_assert_eq(cur.mod_revision, r2);
    kv_entry_clear(&cur);

    /* Deleted by one: the other's CAS on the old revision conflicts with an empty current. */
    cr_assert_eq(kv_del(grpc, "/cas/lock", &err), 0, "%s", err.msg);
    cr_assert_eq(kv_cas(kv, "/cas/lock", "x", 1, r2, 0, NULL, &cur, &err), KV_ECONFLICT);
    cr_assert_eq(cur.mod_revision, 0);
    cr_assert_str_eq(cur.value, "");
    kv_entry_clear(&cur);
}
