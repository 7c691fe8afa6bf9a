// SPDX-License-Identifier: Apache-2.0
/*
 * log: the agent's only way to print diagnostics (rendezvous/, backends/ and launcher/ never
 * log; they return errors with text). One line per message on stderr with a UTC timestamp, the
 * level and the node id — or, with --log-format json, one JSON object per line. Its settings are
 * the one process-wide piece of state besides the signal fd and the child table, because every
 * message needs them.
 */
#ifndef EA_AGENT_LOG_H
#define EA_AGENT_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Set the threshold ("debug", "info", "warn", "error") and the tag printed on every line. */
void log_init(const char *level, const char *tag);

/* Print every line as a JSON object {"time","level","run_id","node","round","generation","msg"}
 * from now on; `run_id` is copied. */
void log_set_json(const char *run_id);

/* The round and generation that JSON lines carry (0 before the first round). */
void log_set_round(int64_t round, int64_t generation);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * A progress message at info level ("waiting for nodes: 3/8 ..."). On a terminal (text format)
 * it is one line updated in place, kept below ordinary messages until log_progress_end();
 * otherwise an ordinary info line. True when the line is updated in place.
 */
bool log_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The progress is over: erase the updating line (a no-op when there is none). */
void log_progress_end(void);

/* Text log lines pass through ea_escape (common/ea_escape.h): a value in a message cannot start
 * a line or drive the terminal. */

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
