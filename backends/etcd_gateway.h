// SPDX-License-Identifier: Apache-2.0
/*
 * etcd_gateway: the etcd v3 backend over etcd's JSON gateway (/v3/... on the client port) with
 * libcurl, reached through kv.h as `kv_etcd_gateway_ops` ("etcd-gateway"). For sites where gRPC
 * is unavailable or an HTTP proxy sits in front of etcd. This header only adds what kv.h has no
 * place for: compaction, which tests and operators need and the agent never does.
 */
#ifndef EA_BACKENDS_ETCD_GATEWAY_H
#define EA_BACKENDS_ETCD_GATEWAY_H

#include <stdint.h>

#include "kv.h"

extern const struct kv_ops kv_etcd_gateway_ops;

/*
 * Compact the store's history up to `revision` (physically, before returning): watches from an
 * older revision then fail with KV_ECOMPACTED. `kv` must be an etcd-gateway handle (else
 * KV_EINVAL). Compacting at or below the current compaction point: KV_ECOMPACTED.
 */
int etcd_gateway_compact(struct kv *kv, int64_t revision, struct ea_error *err);

#endif
