// SPDX-License-Identifier: Apache-2.0
/*
 * fleet_host: one process hosting many simulated nodes for bench/fleet_faults.c (issue 30). Each
 * node is a real rendezvous session (rendezvous/session.h) with its own lease, node key, watches
 * and assignment, as in bench/rdzv_sim.c; the process runs one poll() loop over them and shares
 * one store handle among them. Unlike rdzv-sim, a node whose lease is lost is reported and joins
 * again (what an agent does), so the driver can count lease losses instead of dying on the first.
 *
 * The driver talks to a host over two pipes: commands in (one byte, some with a payload), records
 * out (struct ff_rec, written atomically).
 */
#ifndef EA_BENCH_FLEET_HOST_H
#define EA_BENCH_FLEET_HOST_H

#include <stdint.h>

enum ff_rec_type {
    FF_JOINED = 1, /* the node's first join is done */
    FF_VIEW,       /* the node's view changed: generation, round, group rank, world size */
    FF_LEASE_LOST, /* rdzv_keepalive said KV_ENOLEASE: the node joins again */
    FF_KILLED,     /* the node was killed on command (no leave: its lease expires) */
    FF_ACK,        /* a command is done (members: nodes it killed) */
    FF_FATAL,      /* the host cannot go on */
};

struct ff_rec {
    int type;
    int node;
    int64_t gen;   /* mod_revision of `state` (the round's commit while it runs); 0 if none */
    int64_t round; /* 0: not running (no state, waiting, or this node not in the round) */
    int rank;      /* group rank, -1: none */
    int world;     /* group world size of the round */
    int coord;     /* the node holds `coord` */
    uint64_t claims, resyncs, requests; /* rdzv_stats / rdzv_resync_count, since creation */
    int64_t t_ms;                       /* CLOCK_MONOTONIC */
};

/* Commands (driver -> host). */
#define FF_CMD_GO 'g'    /* start joining */
#define FF_CMD_QUIT 'q'  /* leave gracefully and exit */
#define FF_CMD_RACK 'r'  /* kill the coordinator and group ranks 1-7 of this host's nodes */
#define FF_CMD_KILL 'x'  /* + uint32 count + count uint32 node ids: kill those (if hosted here) */
#define FF_CMD_LEAVE 'l' /* the same payload: those leave gracefully (rdzv_leave), then die */

struct ff_host_opts {
    const char *endpoints, *prefix;
    int nodes; /* in the whole fleet: min = nodes / 2, max = nodes */
    int64_t ttl_ms;
};

/* Run the nodes [first, first + count): create their sessions (before any other gRPC use in
 * this process), wait for FF_CMD_GO on `ctl`, join them one per loop turn and serve them until
 * FF_CMD_QUIT. Returns the process's exit status. */
int ff_host_main(const struct ff_host_opts *o, int first, int count, int out, int ctl);

#endif
