// SPDX-License-Identifier: Apache-2.0
/*
 * KV conformance fixture (tests/kv_conformance/kvtest.h) for the etcd-gateway backend: a real
 * single-member etcd per test from the etcd harness, reached through its JSON gateway on the
 * client port; compaction through the gateway's kv/compaction. `shared` is true: curl has no
 * threads of its own, so a handle opened in a forked child (after the parent opened one) works,
 * and the suite races CAS writers as separate processes, each with its own connection.
 */
#include <stdio.h>

#include "etcd_gateway.h"
#include "etcd_harness.h"
#include "gw_test.h"
#include "kvtest.h"

static int gw_fixture_setup(struct kvt_ctx *ctx)
{
    struct etcd_harness *h = NULL;
    int rc = etcd_harness_create(1, &h);
    if (rc)
        return rc;
    ctx->priv = h;
    gwt_urls(h, ctx->path, sizeof(ctx->path));
    ctx->cfg.backend = "etcd-gateway";
    ctx->cfg.endpoints = ctx->path;
    return 0;
}

static void gw_fixture_teardown(struct kvt_ctx *ctx)
{
    etcd_harness_destroy(ctx->priv);
    ctx->priv = NULL;
}

/* kvtest wants `rev` itself gone; etcd keeps the compaction revision's own changes, so move
 * the store on by one write (outside every test's prefix) and compact just past `rev`. */
static int gw_fixture_compact(struct kvt_ctx *ctx, struct kv *kv, int64_t rev)
{
    (void)ctx;
    int rc = kv_put(kv, "/.gw-fixture/compact", "", 0, 0, NULL, NULL);
    return rc ? rc : etcd_gateway_compact(kv, rev + 1, NULL);
}

const struct kv_fixture kv_fixture = {
    .name = "etcd-gateway",
    .shared = true,
    .bounded_log = false,
    .min_ttl_ms = 1000, /* whole seconds */
    .late_ms = 1000,    /* etcd's lessor checks expiry every 500 ms */
    .setup = gw_fixture_setup,
    .teardown = gw_fixture_teardown,
    .compact = gw_fixture_compact,
};
