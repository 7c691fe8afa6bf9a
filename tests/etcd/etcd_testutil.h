// SPDX-License-Identifier: Apache-2.0
/*
 * etcd_testutil: criterion helpers shared by the etcd (gRPC) and etcd-gateway tests — writes and
 * watches that must succeed, the latency/RSS bench both backends report in the same shape, and
 * the failover scenario both run against a 3-member cluster. Each asserts with criterion, so it
 * is called from a test only. Starting etcd and opening handles stay in etcd_harness.h/gw_test.h.
 */
#ifndef EA_TESTS_ETCD_TESTUTIL_H
#define EA_TESTS_ETCD_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "etcd_harness.h"
#include "kv.h"

/* kv_put of the string `value` (lease 0 = none): asserts success and a revision > 0, returns
 * the revision. */
int64_t etcdt_put(struct kv *kv, const char *key, const char *value, int64_t lease);
/* kv_watch: asserts success, returns the watch id. */
int64_t etcdt_watch(struct kv *kv, const char *prefix, int64_t from_revision);

/* Watches on "/x/", "/y/" and "" (distinct ids into *ret_a, *ret_b, *ret_all), one put under
 * each prefix: each watch gets exactly its events (4 in (*evs, *nevs), caller frees). */
void etcdt_watches_routed_by_id(struct kv *kv, struct kv_event **evs, size_t *nevs, int64_t *ret_a,
                                int64_t *ret_b, int64_t *ret_all);
/* Three puts of "/k/a", `compact` (the backend's etcd_compact/etcd_gateway_compact) to the last
 * one, which a second time is KV_ECOMPACTED; a watch from the first revision then ends with
 * KV_ECOMPACTED (from watch() or as an error event), one from the compaction point still sees
 * the last put. */
void etcdt_compacted_watch(struct kv *kv, struct kv_event **evs, size_t *nevs,
                           int (*compact)(struct kv *kv, int64_t revision, struct ea_error *err));

/* VmRSS of this process in KiB, -1 when unknown. */
long etcdt_rss_kib(void);
/* On an open handle to a fresh store: median and p99 of put, CAS, get and keepalive over 1000
 * operations each and of put→watch-event over 200 puts, logged as "<backend> <op> ...". Asserts
 * every operation succeeds and each median stays under 50 ms (a backoff or timeout on the hot
 * path), nothing finer. */
void etcdt_bench_latencies(struct kv *kv, const char *backend);

/* A 3-member cluster `h`, `kv` open on all of it (request timeout 2000 ms, member 0 first):
 * kill member 0 — reads, CAS, puts and keepalives fail over, the watch ends with KV_ECONN naming
 * member 0; re-list and re-watch work; kill member 1 — no quorum is KV_ECONN within the timeout;
 * restart member 0 — service resumes. Events collect in (*evs, *nevs) (caller frees). */
void etcdt_failover_scenario(struct etcd_harness *h, struct kv *kv, struct kv_event **evs,
                             size_t *nevs);

/* On `h` started with auth_token_ttl and `kv` logged in as `user`: a put, then etcd drops the
 * unused token; the next get must succeed, through one refused call and one more login (from
 * etcd's counters), without the caller noticing. */
void etcdt_expired_token_is_renewed(struct etcd_harness *h, struct kv *kv, const char *user);

#endif
