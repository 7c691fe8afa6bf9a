// SPDX-License-Identifier: Apache-2.0
/*
 * events: the agent's machine-readable event stream (--events FILE, and stderr with --log-format
 * json). One JSON object per line per event, each with time (RFC 3339 UTC, milliseconds), event,
 * run_id, node, round and generation, plus the event's own fields. Events about the run as a whole
 * (round committed, restart charged, node lost, status changed) are derived here by comparing
 * successive states; the agent reports what only it sees (joined, workers started/exited, ...).
 * Not a logger: human messages stay in log.c.
 */
#ifndef EA_AGENT_EVENTS_H
#define EA_AGENT_EVENTS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"
#include "state.h"

struct events;

/*
 * Open the stream: append to `path` (created 0644; NULL: no file) and, with `to_stderr`, also
 * write every event to stderr. `run_id` and `node_id` are copied. With neither a file nor stderr,
 * *ret is NULL and every call below is a no-op. -errno with a message when the file cannot be
 * opened.
 */
int events_open(const char *path, bool to_stderr, const char *run_id, const char *node_id,
                struct events **ret, struct ea_error *err);

/* Close; NULL is a no-op. */
void events_close(struct events *ev);

/*
 * Emit event `name` for `round` and `generation`, with extra fields built by jansson's json_pack
 * from `fmt` (an object format such as "{s:i, s:s}"; NULL: none). One write(2) per line, so
 * agents sharing one file never interleave within a line. A failed write is dropped, never fatal.
 */
void events_emit(struct events *ev, const char *name, int64_t round, int64_t generation,
                 const char *fmt, ...);
void events_emitv(struct events *ev, const char *name, int64_t round, int64_t generation,
                  const char *fmt, va_list ap);

/*
 * Compare the run's state `s` (NULL: none yet) of generation `gen` with the one seen last and emit
 * what changed: round_committed (a new running round: members, world size, this node's group
 * rank or -1, cause first | already_running | failure | node_lost | scale_up | reform,
 * added, removed),
 * node_lost (per member dropped from the round: its lease expired or it left — the store does
 * not say which), restart (restart_count went up; `provisional` while the charge may still be
 * refunded), restart_refunded, status (to waiting, succeeded, failed, closed). Cheap when nothing
 * changed.
 */
void events_observe(struct events *ev, const struct rdzv_state *s, int64_t gen);
/* This node's group rank in the state observed next (-1: none), for `round_committed` when the
 * state does not list its members (a node's O(1) view). */
void events_set_group_rank(struct events *ev, int group_rank);

/* RFC 3339 UTC with milliseconds ("2024-05-01T12:00:00.123Z") of the wall clock now. */
void events_time_now(char *buf, size_t size);

#endif
