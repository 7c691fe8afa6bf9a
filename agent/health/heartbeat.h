// SPDX-License-Identifier: Apache-2.0
/*
 * hb: hang detection for one node's workers (--worker-heartbeat-timeout, --worker-startup-timeout).
 * Each worker beats by writing or touching its own file (ELASTIC_HEARTBEAT_FILE); the agent never
 * reads it at a high rate: an inotify watch on the round's heartbeat directory sees each rank's
 * first beat (and is dropped once every rank has beaten), after that a rank's file is stat()ed
 * only when its deadline (last beat + timeout) comes, which the agent's poll timeout provides.
 * Off (both timeouts 0): hb_create gives NULL and every call is a cheap no-op. No logging.
 */
#ifndef EA_AGENT_HEALTH_HEARTBEAT_H
#define EA_AGENT_HEALTH_HEARTBEAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"

struct hb;

/* A rank that missed its deadline. */
struct hb_hang {
    int local_rank, rank;
    bool first;        /* it never beat: the startup timeout */
    int64_t silent_ms; /* since its last beat (or its start) */
    char message[256]; /* "rank 3 hung: no heartbeat for 60 s (last: step 1234)" */
};

/* Create the monitor; *ret is NULL (off, nothing to free) when both timeouts are 0.
 * startup_ms 0: the first beat is bounded by timeout_ms too. */
int hb_create(int64_t timeout_ms, int64_t startup_ms, struct hb **ret, struct ea_error *err);
void hb_destroy(struct hb *h);

/* Prepare the heartbeat directory `dir` (created, emptied) for `n` local ranks whose global ranks
 * are rank_base..rank_base+n-1, started at monotonic `now_ms`, and watch it. */
int hb_arm(struct hb *h, const char *dir, int n, int rank_base, int64_t now_ms,
           struct ea_error *err);
/* Stop checking (the workers are being stopped or have finished). */
void hb_disarm(struct hb *h);

/* Local rank `local_rank` exited: no more deadlines for it (it counts as ready). */
void hb_forget(struct hb *h, int local_rank, int64_t now_ms);

/* The heartbeat file of local rank `local_rank` of the armed round, into buf. NULL when off. */
const char *hb_file(const struct hb *h, int local_rank, char *buf, size_t size);

/* The inotify fd to poll (readable: call hb_on_events), -1 when there is nothing to watch. */
int hb_fd(const struct hb *h);
/* Drain the inotify fd at monotonic `now_ms`. */
void hb_on_events(struct hb *h, int64_t now_ms);

/* Monotonic time of the next deadline, -1 for none. */
int64_t hb_wake_ms(const struct hb *h);
/* Check deadlines due at `now_ms` (one stat() per rank whose deadline passed): 1 and *ret when a
 * rank hung (the monitor disarms itself), else 0. */
int hb_check(struct hb *h, int64_t now_ms, struct hb_hang *ret);

/* Monotonic time at which every rank of the armed round had beaten once, -1 until then. */
int64_t hb_ready_ms(const struct hb *h);

#endif
