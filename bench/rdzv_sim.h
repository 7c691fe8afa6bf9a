// SPDX-License-Identifier: Apache-2.0
/* rdzv-sim's options (bench/rdzv_sim.c's header says what each does); parsed in sim_opts.c. */
#ifndef EA_BENCH_RDZV_SIM_H
#define EA_BENCH_RDZV_SIM_H

#include <stdbool.h>
#include <stdint.h>

struct opts {
    const char *endpoints, *run_id;
    int nodes, procs;
    int64_t ttl_ms, timeout_ms;
    bool kill_one, kill_coord, kill_tenth, kill_rack;
    int rack_size;            /* --rack-size K: --kill-rack kills K consecutive group ranks (8) */
    bool rack_spares_coord;   /* --rack-spares-coordinator: the rack is ranks 1..K, not 0..K-1 */
    int domains;              /* --domains D: node i's failure domain is d<i*D/nodes> (0: none) */
    bool kill_domain;         /* --kill-domain: every node of the coordinator's domain at once */
    long max_bytes;
    bool ring;                /* --ring: every node in the liveness ring (agent/node/node.h, on bench/ring_host.h) */
    int64_t ring_interval_ms; /* --ring-interval (the agent's --liveness-interval) */
    int64_t ring_pass_ms;     /* how often a process serves its nodes' ring sockets */
    bool ring_no_await;       /* --ring-no-await: no suspicion of a predecessor that never
                                 linked (a diagnosis: the agent suspects it) */
    bool real_names;          /* --names real: `<hostname>-<pid>` (sim_wire.h) */
    int noise;                /* --noise K: 0..K unrelated keys written before each join */
    const char *rx_iface, *metrics_url; /* --rx-iface, --metrics-url: bytes on the wire */
    int64_t hold_ms; /* --hold SEC: a steady run this long after the first round (nobody killed):
                        every round committed in it is a false eviction's */
};

enum rec_type {
    REC_JOINING = 1,
    REC_JOINED,
    REC_WROTE,
    REC_SEEN,
    REC_FATAL,
    REC_KILLED,
    REC_READY, /* the node could start its workers: it has its assignment and the round's master */
    REC_RING,  /* at a child's end, its nodes' ring counters: bytes = suspicions written or held,
                  keys = evictions, claims = false alarms */
};

/* One report from a child to the parent (written atomically: < PIPE_BUF). */
struct rec {
    int type;
    int node;
    int64_t round;
    int members;
    int coord;       /* the node coordinates */
    int64_t t_ms;    /* CLOCK_MONOTONIC, the same clock in every process */
    int64_t ev_ms;   /* REC_SEEN: when the store's events that brought the round were read */
    uint64_t bytes;  /* rdzv_stats: bytes received so far */
    uint64_t keys;   /* rdzv_stats: keys written so far */
    uint64_t claims; /* rdzv_stats: claims of `coord` so far */
};

/* The "agent" of nodes [first, first+count): join all, then serve them until told to stop
 * (sim_child.c). Its reports go to `out` (struct rec), its commands come from `ctl`. */
int child_main(const struct opts *o, int first, int count, int out, int ctl);

/* Parse argv into *o (which holds the defaults): -1 to go on, else the exit code (0 after
 * --help, 2 for a usage error, with the usage printed). */
int sim_parse_opts(int argc, char **argv, struct opts *o);

#endif
