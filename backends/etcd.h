// SPDX-License-Identifier: Apache-2.0
/*
 * etcd: the etcd v3 backend (gRPC core C API + protobuf-c), reached through kv.h as
 * `kv_etcd_ops` ("etcd"). This header only adds what kv.h has no place for: store maintenance
 * that tests and operators need (compaction). The agent never needs it to run a rendezvous.
 */
#ifndef EA_BACKENDS_ETCD_H
#define EA_BACKENDS_ETCD_H

#include <stdint.h>

#include "kv.h"

extern const struct kv_ops kv_etcd_ops;

/*
 * Compact the store's history up to `revision` (physically, before returning): watches from an
 * older revision then fail with KV_ECOMPACTED. `kv` must be an etcd handle (else KV_EINVAL).
 * Compacting at or below the current compaction point: KV_ECOMPACTED.
 */
int etcd_compact(struct kv *kv, int64_t revision, struct ea_error *err);

/*
 * The index (in the configured endpoint list) of the member the lease keepalive stream is on,
 * or -1 when none is open or `kv` is not an etcd handle. For tests that stop one member and
 * must first know the keepalive is on it.
 */
int etcd_keepalive_endpoint(struct kv *kv);

#endif
