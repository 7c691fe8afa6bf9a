// SPDX-License-Identifier: Apache-2.0
/*
 * log: the agent's only way to print diagnostics (rendezvous/, backends/ and launcher/ never
 * log; they return errors with text). One line per message on stderr with a UTC timestamp, the
 * level and the node id. Its settings are the one process-wide piece of state besides the signal
 * fd and the child table, because every message needs them.
 */
#ifndef EA_AGENT_LOG_H
#define EA_AGENT_LOG_H

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Set the threshold ("debug", "info", "warn", "error") and the tag printed on every line. */
void log_init(const char *level, const char *tag);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
