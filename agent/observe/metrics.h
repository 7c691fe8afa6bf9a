// SPDX-License-Identifier: Apache-2.0
/*
 * metrics: what the agent exposes on /metrics, /healthz and /readyz — a plain snapshot struct the
 * agent fills on its own thread and hands to the HTTP thread by copy (http.h), its rendering in
 * Prometheus text format, and a timing wrapper around a kv handle that feeds the store request
 * latency histogram. No locking here and no I/O: the snapshot is data.
 */
#ifndef EA_AGENT_METRICS_H
#define EA_AGENT_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "kv.h"
#include "phases.h"

/* Upper bounds (seconds) of the store request latency buckets; +Inf is implied. */
#define METRICS_N_BUCKETS 12
extern const double metrics_buckets[METRICS_N_BUCKETS];

struct metrics_latency {
    uint64_t bucket[METRICS_N_BUCKETS]; /* cumulative is computed when rendering */
    uint64_t count;
    uint64_t errors; /* requests that failed with KV_ECONN (unreachable or timed out) */
    double sum;      /* seconds */
};

struct metrics_snapshot {
    char run_id[128], node_id[128];
    /* health */
    bool joined;        /* holds a lease in the run */
    bool exiting;       /* the agent is leaving (signal, end of run, fatal error) */
    bool lease_lost;    /* fenced out: stopping workers, about to rejoin */
    bool store_down;    /* the last store request failed; retrying */
    bool workers_ready; /* workers of the current round are running here */
    /* the run, as last seen */
    char run_status[16];  /* waiting, running, ... or "none" */
    char group_state[16]; /* idle, running, stopping, finished, failed */
    int64_t round, generation;
    int world_size, members, live_nodes, restart_count, max_restarts, scale_events;
    int group_rank; /* -1: not a member (spare or waiting) */
    int workers_running;
    /* progress (agent/progress/, issue 40): -1 / 0 when off or unknown */
    int64_t progress_step;         /* highest step this node's ranks beat in the running round */
    int64_t progress_best;         /* the run's best step before its last failure */
    int restarts_without_progress; /* in a row, reset by progress */
    double compute_seconds;        /* median compute time of this node's ranks (0: none) */
    uint64_t stragglers_reported;  /* coordinator: straggler reports it made */
    /* counters since the agent started */
    uint64_t rounds_started;        /* rounds this node started workers for */
    uint64_t worker_failures;       /* local workers that failed */
    uint64_t lease_renew_failures;  /* keepalives that failed */
    uint64_t rejoins;               /* joins after a lost lease */
    uint64_t store_resyncs;         /* store watches re-established by reading again
                                       (rdzv_resync_count) */
    uint64_t coord_claims;          /* tries to take `coord` after it vanished (rdzv_stats) */
    double last_rendezvous_seconds; /* from stopping (or joining) to the next workers started */
    /* the liveness ring (agent/liveness/) */
    uint64_t liveness_suspicions;   /* this node's links that broke (suspicions it reported) */
    uint64_t liveness_confirmed;    /* suspicions it confirmed with its own probe: lease revoked */
    uint64_t liveness_false_alarms; /* suspicions its probe found answered */
    uint64_t liveness_no_route;     /* ring connects/probes it could not start (no route here):
                                       no suspicion, no confirmation came of them */
    int liveness_links_up;          /* 0..2, as last seen */
    /* this node's two ring links as last seen (status: http /status); "" peer: none */
    struct metrics_link {
        char peer[128];
        char state[16];         /* none, connecting, up, down, waiting, retrying, ... */
        double heartbeat_age_s; /* since the last heartbeat heard on it; -1 when not up */
    } liveness_out, liveness_in; /* to the successor, from the predecessor */
    struct metrics_latency store;
    struct ph_hist phases[PH_N]; /* recovery phase durations (observe/phases.h) */
};

/* The snapshot in Prometheus text exposition format (version 0.0.4), malloc'ed; NULL on OOM. */
char *metrics_render(const struct metrics_snapshot *m);

/* Why the agent is not healthy ("" when it is): for /healthz. */
const char *metrics_unhealthy(const struct metrics_snapshot *m);

/*
 * Wrap `inner` so that every synchronous request (get, list, cas, put, del, lease and watch
 * calls) is timed into `lat`. The wrapper owns `inner` (kv_close closes both); `lat` is borrowed
 * and must outlive it. Only the thread making the requests may read `lat`.
 */
int metrics_kv_wrap(struct kv *inner, struct metrics_latency *lat, struct kv **ret,
                    struct ea_error *err);

#endif
