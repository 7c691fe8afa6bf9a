// SPDX-License-Identifier: Apache-2.0
/*
 * ea_time: monotonic milliseconds and helpers for deadlines. All timing in the project is on
 * CLOCK_MONOTONIC (never wall time) unless a value is shown to a human or shared between hosts.
 */
#ifndef EA_COMMON_EA_TIME_H
#define EA_COMMON_EA_TIME_H

#include <stdint.h>

/* Milliseconds on CLOCK_MONOTONIC. */
int64_t ea_now_ms(void);

/* Milliseconds since the Unix epoch (CLOCK_REALTIME), for records humans read. */
int64_t ea_wall_ms(void);

/* Remaining milliseconds until `deadline_ms` (monotonic), clamped to [0, INT32_MAX]; -1 when
 * deadline_ms < 0 (no deadline), suitable as a poll() timeout. */
int ea_timeout_until(int64_t deadline_ms);

/* A backoff: base_ms after the first of `strikes` consecutive failures (0 or 1: base_ms), doubled
 * for each further one, up to cap_ms (or base_ms, when that is longer). Pure; never overflows. */
int64_t ea_backoff_ms(int64_t base_ms, int strikes, int64_t cap_ms);

#endif
