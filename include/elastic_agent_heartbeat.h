// SPDX-License-Identifier: Apache-2.0
/*
 * elastic_agent_heartbeat.h: a worker written in C beats its step (hang detection, progress-aware
 * restarts) and times its compute section (straggler detection), as Python's elastic_agent.beat()
 * and elastic_agent.compute() do. Header only, libc only (docs/restarts.md):
 *
 *     for (long long step = 0; ...; step++) {
 *         ea_compute_begin();
 *         forward_backward();                 // this rank's own work
 *         ea_compute_end();
 *         all_reduce();                       // the collective: not timed
 *         ea_beat(step);                      // writes "1234 0.052341\n" to ELASTIC_HEARTBEAT_FILE
 *     }
 *
 * Without ELASTIC_HEARTBEAT_FILE every call is a no-op but for two clock reads. A write that
 * fails is dropped (a beat must never break training). The state (the file, the last compute
 * time) is this translation unit's: call them from one .c file. Not thread-safe.
 */
#ifndef ELASTIC_AGENT_HEARTBEAT_H
#define ELASTIC_AGENT_HEARTBEAT_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int ea_hb__fd = -2; /* -2: not opened yet; -1: no file */
static double ea_hb__t0, ea_hb__compute_s = -1;

static inline double ea_hb__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Start / end the compute section of this step; the next ea_beat() carries its time. */
static inline void ea_compute_begin(void)
{
    ea_hb__t0 = ea_hb__now();
}

static inline void ea_compute_end(void)
{
    ea_hb__compute_s = ea_hb__now() - ea_hb__t0;
}

/* Beat `step` with `compute_s` seconds of compute (<= 0: none). */
static inline void ea_beat_compute(long long step, double compute_s)
{
    if (ea_hb__fd == -2) {
        const char *p = getenv("ELASTIC_HEARTBEAT_FILE");
        ea_hb__fd = p && p[0] ? open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644) : -1;
    }
    if (ea_hb__fd < 0)
        return;
    char line[64];
    int n = compute_s > 0 ? snprintf(line, sizeof(line), "%lld %.6f\n", step, compute_s)
                          : snprintf(line, sizeof(line), "%lld\n", step);
    if (n > 0 && pwrite(ea_hb__fd, line, (size_t)n, 0) == n) /* the mtime is the beat */
        (void)!ftruncate(ea_hb__fd, n);
}

/* Beat `step`, with the last ea_compute_begin/end section's time (used once). */
static inline void ea_beat(long long step)
{
    double c = ea_hb__compute_s;
    ea_hb__compute_s = -1;
    ea_beat_compute(step, c);
}

#endif
