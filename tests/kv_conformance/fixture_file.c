// SPDX-License-Identifier: Apache-2.0
/* KV conformance fixture: the file backend on a fresh state directory per test. The directory
 * is nested below the scratch dir so that open has to create it (with its parents). */
#include <stdio.h>

#include "kvstore.h"
#include "kvtest.h"

static int file_setup(struct kvt_ctx *ctx)
{
    snprintf(ctx->path, sizeof(ctx->path), "%s/state/kv", ctx->dir);
    ctx->cfg.backend = "file";
    ctx->cfg.state_dir = ctx->path;
    return 0;
}

static int file_compact(struct kvt_ctx *ctx, struct kv *kv, int64_t rev)
{
    return kvt_overflow_log(ctx, kv, rev, 4 * KVS_FILE_LOG_EVENTS);
}

const struct kv_fixture kv_fixture = {
    .name = "file",
    .shared = true,
    .bounded_log = true,
    .min_ttl_ms = 0,
    .late_ms = 200,
    .setup = file_setup,
    .compact = file_compact,
};
