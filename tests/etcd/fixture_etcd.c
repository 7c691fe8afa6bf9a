// SPDX-License-Identifier: Apache-2.0
/*
 * KV conformance fixture (tests/kv_conformance/kvtest.h) for the etcd backend: a real
 * single-member etcd per test from the etcd harness, compaction through the Compact RPC.
 * `shared` is false although every handle sees the same store: the suite's shared mode forks
 * writers after the parent opened its handle, and gRPC cannot run in such a child (the backend
 * refuses with KV_EINVAL, see test_etcd_cluster.c); the threaded mode races CAS writers on one
 * handle instead, and test_etcd_cluster.c covers forked writers (forking before opening).
 */

#include "etcd.h"
#include "etcd_harness.h"
#include "kvtest.h"

static int etcd_fixture_setup(struct kvt_ctx *ctx)
{
    struct etcd_harness *h = NULL;
    int rc = etcd_harness_create(1, &h);
    if (rc)
        return rc;
    ctx->priv = h;
    ctx->cfg.backend = "etcd";
    ctx->cfg.endpoints = h->endpoints;
    return 0;
}

static void etcd_fixture_teardown(struct kvt_ctx *ctx)
{
    etcd_harness_destroy(ctx->priv);
    ctx->priv = NULL;
}

/* kvtest wants `rev` itself gone; etcd keeps the compaction revision's own changes, so move
 * the store on by one write (outside every test's prefix) and compact just past `rev`. */
static int etcd_fixture_compact(struct kvt_ctx *ctx, struct kv *kv, int64_t rev)
{
    (void)ctx;
    int rc = kv_put(kv, "/.etcd-fixture/compact", "", 0, 0, NULL, NULL);
    return rc ? rc : etcd_compact(kv, rev + 1, NULL);
}

const struct kv_fixture kv_fixture = {
    .name = "etcd",
    .shared = false,
    .bounded_log = false,
    .min_ttl_ms = 1000, /* whole seconds */
    .late_ms = 1000,    /* etcd's lessor checks expiry every 500 ms */
    .setup = etcd_fixture_setup,
    .teardown = etcd_fixture_teardown,
    .compact = etcd_fixture_compact,
};
