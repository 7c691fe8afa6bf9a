// SPDX-License-Identifier: Apache-2.0
/*
 * ph: the per-phase recovery clock. For every round this node runs workers in, the time spent
 * in detect (the fault began → it was observed), rendezvous (observed → round committed),
 * spawn (committed → local workers started), or for warm spares (--warm-workers) assigned
 * (committed → every local worker took its assignment), and ready (started or assigned → every
 * local rank's first heartbeat; only with heartbeats on). Kept as Prometheus histograms (rendered here for
 * metrics.c), one record per round (for the `recovery` event and the round's `recovery` key
 * that `status` shows) and one line of text. Pure bookkeeping: the agent says when each mark
 * happens; no I/O, no logging.
 */
#ifndef EA_AGENT_OBSERVE_PHASES_H
#define EA_AGENT_OBSERVE_PHASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* PH_ASSIGNED comes last for the records' layout; it is shown between spawn and ready */
enum ph_phase { PH_DETECT, PH_RENDEZVOUS, PH_SPAWN, PH_READY, PH_ASSIGNED, PH_N };

#define PH_N_BUCKETS 14
extern const double ph_buckets[PH_N_BUCKETS]; /* seconds; +Inf implied */

struct ph_hist {
    uint64_t bucket[PH_N_BUCKETS];
    uint64_t count;
    double sum;
};

/* One round's phases, in seconds; < 0 where unknown (detect for a cold start or a lost node,
 * ready without heartbeats, spawn for warm spares, assigned for a cold start). */
struct ph_record {
    int64_t round;
    char cause[16]; /* first, failure, hang, membership */
    double s[PH_N];
};

struct ph {
    /* the recovery being timed (wall ms, as they may come from another node; -1 unset) */
    int64_t fault_wall, detect_wall, commit_wall, spawn_wall;
    int64_t rdzv_start_wall; /* detect, else when the wait for a round began */
    int64_t spawn_mono;
    int64_t assigned_wall, ready_mono; /* warm: every worker took its rank; the first beats */
    int64_t round;
    char cause[16];
    bool waiting_ready;
    bool warm, waiting_assigned;
    struct ph_hist hist[PH_N];
    struct ph_record last; /* last completed round; last.round 0: none */
};

void ph_init(struct ph *p);

/* A fault observed here now (wall `now_wall`) that began at `fault_wall` (-1: unknown). The first
 * mark of a recovery wins; later ones (the stop that follows) do not move it. A round still
 * waiting for its first beats is closed first, without a ready phase. */
void ph_detect(struct ph *p, int64_t fault_wall, int64_t now_wall, const char *cause);
/* The same, reported by another node through the failed round's `detect` key (its JSON value:
 * {"fault_ms","detected_ms","cause"}): it replaces this node's own mark when it was observed
 * earlier (this node's was a symptom); ignored when bad. */
void ph_detect_remote(struct ph *p, const char *json);
/* The value of a `detect` key for a fault at fault_wall observed at now_wall, into buf. */
void ph_detect_json(int64_t fault_wall, int64_t now_wall, const char *cause, const char *node,
                    int rank, char *buf, size_t size);

/* This node saw round `round` committed with itself in it at wall `now_wall`; `since_wall` is
 * when its wait for a round began (joined, or workers stopped), used without a detect mark. */
void ph_committed(struct ph *p, int64_t round, int64_t now_wall, int64_t since_wall);
/* Its workers started (`warm`: warm spares were handed their assignments instead); the record
 * completes once nothing is awaited: the first beats with `wait_ready` (ph_ready), every
 * assignment taken when `warm` (ph_assigned). Returns true when the record completed now. */
bool ph_spawned(struct ph *p, int64_t now_wall, int64_t now_mono, bool wait_ready, bool warm);
/* Every local rank beat once at monotonic `ready_mono`. True when the record completed. */
bool ph_ready(struct ph *p, int64_t ready_mono);
/* Every warm spare of the round took its assignment at wall `assigned_wall`. True when the
 * record completed. */
bool ph_assigned(struct ph *p, int64_t assigned_wall);
/* Whether the current round still waits for its first beats / for its spares' ready lines. */
bool ph_waiting_ready(const struct ph *p);
bool ph_waiting_assigned(const struct ph *p);

/* "detect 0.9 s, rendezvous 12 ms, spawn 8 ms, ready 3.1 s" (unknown phases left out; a warm
 * round: "..., rendezvous 12 ms, assigned 3 ms, ready 0.4 s"). */
void ph_format(const struct ph_record *r, char *buf, size_t size);
/* {"round","cause","detect_s","rendezvous_s","spawn_s","ready_s"} (null where unknown), and
 * "assigned_s" for a warm round; malloc'ed; NULL on OOM. */
char *ph_record_json(const struct ph_record *r);
/* Parse ph_record_json's output ("assigned_s" optional); 0 or -EBADMSG. */
int ph_record_parse(const char *json, struct ph_record *ret);

/* The histogram elastic_agent_recovery_phase_seconds{phase=...} in Prometheus text format. */
void ph_render_metrics(FILE *f, const struct ph_hist hist[PH_N]);

#endif
