// SPDX-License-Identifier: Apache-2.0
/*
 * ea_time: monotonic milliseconds and helpers for deadlines. All timing in the project is on
 * CLOCK_MONOTONIC (never wall time) unless a value is shown to a human or shared between hosts.
 */
#ifndef EA_COMMON_EA_TIME_H
#define EA_COMMON_EA_TIME_H

#include <stdint.h>

/* Milliseconds on CLOCK_MONOTONIC (or the test's clock: ea_time_override). */
int64_t ea_now_ms(void);

/* Tests only: ea_now_ms() returns now(ctx) instead of CLOCK_MONOTONIC (now NULL: the real clock
 * again). One process-wide seam, so that everything that reads the time — the loop, the
 * session's timers, the lease's renewal — follows a fake clock the test drives (ea_loop.h's
 * ea_fake_clock) and a decision that waits on a deadline is tested without waiting for it. */
void ea_time_override(int64_t (*now)(void *ctx), void *ctx);

/* Milliseconds since the Unix epoch (CLOCK_REALTIME), for records humans read. */
int64_t ea_wall_ms(void);

/* Remaining milliseconds until `deadline_ms` (monotonic), clamped to [0, INT32_MAX]; -1 when
 * deadline_ms < 0 (no deadline), suitable as a poll() timeout. */
int ea_timeout_until(int64_t deadline_ms);

/* A backoff: base_ms after the first of `strikes` consecutive failures (0 or 1: base_ms), doubled
 * for each further one, up to cap_ms (or base_ms, when that is longer). Pure; never overflows. */
int64_t ea_backoff_ms(int64_t base_ms, int strikes, int64_t cap_ms);

/* The retry after a failed store request (the join, and every request after it: one schedule for
 * the agent). `prev_ms` is the delay of the previous retry (0: this is the first); the delay
 * doubles from base_ms up to cap_ms and is returned; *ret_wait_ms is the wait before the retry,
 * spread by `seed` over [delay/2, delay*3/2) so that a thousand agents that lost the store at
 * once do not retry in lockstep. Pure: the caller brings the seed (ea_retry_seed). */
int64_t ea_retry_next(int64_t prev_ms, int64_t base_ms, int64_t cap_ms, uint64_t seed,
                      int64_t *ret_wait_ms);

/* A seed for ea_retry_next that differs between processes and between calls. */
uint64_t ea_retry_seed(int64_t now_ms);

#endif
