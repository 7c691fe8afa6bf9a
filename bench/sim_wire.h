// SPDX-License-Identifier: Apache-2.0
/*
 * sim_wire: what rdzv-sim needs to measure a round as it arrives on the wire (issue 30): node
 * names as a fleet has them (`<hostname>-<pid>`, EC2-style hostnames), unrelated keys written
 * into the store between joins (another run's, another program's: slots are not consecutive and
 * chunk sizes spread), a network interface's received bytes (the simulated nodes in a network
 * namespace of their own, etcd in another: bench/wire_bytes.sh) and a counter from etcd's
 * /metrics. Bench only.
 */
#ifndef EA_BENCH_SIM_WIRE_H
#define EA_BENCH_SIM_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv.h"

/* Node `id`'s names: with `real`, host "ip-10-A-B-C.ec2.internal" (26-27 bytes) and node id
 * "<host>-<pid>" (a 6-digit pid); else today's short "sim-%05d" / "simhost-%05d". */
void sim_names(int id, bool real, char *node_id, size_t node_size, char *host, size_t host_size);

/* Write 0..max unrelated keys (a pseudo-random count from `seed`) under other prefixes, ~100-byte
 * values; returns how many, or a negative errno. */
int sim_noise(struct kv *kv, const char *run_id, unsigned *seed, int max, struct ea_error *err);

/* Bytes received so far on interface `iface` in this process's network namespace
 * (/proc/self/net/dev), or -1. */
int64_t sim_rx_bytes(const char *iface);

/* The sum of the samples of metric `name` at `url` (a Prometheus text page, fetched with curl),
 * or -1. */
double sim_metric(const char *url, const char *name);

/* A measurement window: etcd's grpc sent bytes and the interface's received bytes at its start
 * (the counter first, the interface last; the other way round at its end, so that the metrics
 * page itself is not counted). Either may be NULL (not measured). */
struct sim_wire_mark {
    double grpc;
    int64_t rx, t_ms;
};
void sim_wire_begin(const char *iface, const char *url, struct sim_wire_mark *ret);
/* Print `<tag>_wire_rx_bytes_per_node`, `<tag>_wire_window_ms` and
 * `<tag>_etcd_grpc_sent_bytes_per_node` (over `nodes`) since `m0`. */
void sim_wire_end(const char *iface, const char *url, const struct sim_wire_mark *m0,
                  const char *tag, int nodes);

#endif
