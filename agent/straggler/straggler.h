// SPDX-License-Identifier: Apache-2.0
/*
 * sg: straggler scoring (issue 40, part 2). In synchronous training every rank runs at the pace
 * of the slowest, so the step rate says nothing; each rank's time *outside* the collective (its
 * compute time, timed by the helpers: elastic_agent.compute(), beat(step, compute_s=...)) does.
 * A node's compute time is the median of its ranks' recent samples; its score is that over the
 * median of the other nodes' (leave-one-out: with two nodes the slow one is not hidden in a
 * median it moves itself). A node whose score stays at or above the threshold for the whole
 * window is a straggler, reported once until it falls below again. Pure: no I/O, no clock.
 */
#ifndef EA_AGENT_STRAGGLER_STRAGGLER_H
#define EA_AGENT_STRAGGLER_STRAGGLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Samples kept per rank (the most recent ones). */
#define SG_SAMPLES 16

/* One rank's recent compute times (seconds), a ring of SG_SAMPLES. */
struct sg_rank {
    double s[SG_SAMPLES];
    int n, next;
    double last; /* the last value added (a file read again before a new beat adds nothing) */
};

/* Add a sample (> 0; others are ignored). */
void sg_rank_add(struct sg_rank *r, double seconds);

/* The median of v[0..n) (sorted in place); 0 when n is 0. */
double sg_median(double *v, size_t n);

/* A node's compute time: the median of every sample of its n ranks; 0 when none has any. */
double sg_node_time(const struct sg_rank *ranks, int n);

/* Scores of n nodes from their compute times t[i] (0: no samples): t[i] over the median of the
 * other nodes' non-zero times; 0 for a node without samples or when no other node has any. */
void sg_scores(const double *t, size_t n, double *ret_scores);

/* One node's verdict over time. */
struct sg_track {
    int64_t above_since; /* when its score last went to or above the threshold, -1 below */
    bool reported;       /* reported for the current stretch above */
};

/* A new score for the node at `now` (ms): 1 when it has now been at or above `threshold` for
 * `window_ms` and was not reported for this stretch (report it), 0 otherwise. A stretch begins
 * at `threshold` and ends below 1 + (threshold - 1) / 2 (halfway back: one noisy sample does
 * not restart the window), or at a score of 0 (no samples). */
int sg_observe(struct sg_track *t, double score, double threshold, int64_t window_ms, int64_t now);

/* Parse a rank file's "STEP COMPUTE_S" line: the compute time in seconds (> 0), else 0. */
double sg_parse_compute(const char *buf, size_t len);

/* --straggler-action evict (docs/restarts.md): what the coordinator does about a node reported
 * as a straggler. */
enum sg_action {
    SG_REPORT,          /* --straggler-action report */
    SG_EVICT,           /* evict: it leaves, a spare takes its place in the next round */
    SG_REPORT_NO_SPARE, /* evict, but no spare waits: the run would shrink; reported only */
    SG_REPORT_SELF,     /* evict, but the straggler coordinates: reported only */
};

/* The decision (pure): `evict` (--straggler-action evict), `live` nodes in the run (the
 * coordinator's count), `members` in the round, `is_coordinator` (the straggler is the node
 * deciding). A spare waits when more nodes are live than the round has members. */
enum sg_action sg_evict_decide(bool evict, size_t live, size_t members, bool is_coordinator);
const char *sg_action_name(enum sg_action a);

/* An evicted node's cooldown: held out from `since` (monotonic ms) for `cooldown_ms`. */
struct sg_hold {
    int64_t until; /* monotonic; 0: not held */
};
void sg_hold_start(struct sg_hold *h, int64_t now, int64_t cooldown_ms);
/* Still held at `now`? */
bool sg_hold_active(const struct sg_hold *h, int64_t now);

#endif
