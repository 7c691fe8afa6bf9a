// SPDX-License-Identifier: Apache-2.0
/* KV conformance fixture: the in-process memory backend (one store per handle). */
#include "kvstore.h"
#include "kvtest.h"

static int memory_setup(struct kvt_ctx *ctx)
{
    ctx->cfg.backend = "memory";
    return 0;
}

static int memory_compact(struct kvt_ctx *ctx, struct kv *kv, int64_t rev)
{
    return kvt_overflow_log(ctx, kv, rev, 4 * KVS_MEMORY_LOG_EVENTS);
}

const struct kv_fixture kv_fixture = {
    .name = "memory",
    .shared = false,
    .bounded_log = true,
    .min_ttl_ms = 0,
    .late_ms = 200,
    .setup = memory_setup,
    .compact = memory_compact,
};
