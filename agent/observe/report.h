// SPDX-License-Identifier: Apache-2.0
/*
 * report: what a failed worker left behind, for humans: reading torch's error-file JSON
 * (TORCHELASTIC_ERROR_FILE) as the root cause, and printing the first-failure table in the shape
 * torchrun's ChildFailedError prints (tools grep it).
 */
#ifndef EA_AGENT_REPORT_H
#define EA_AGENT_REPORT_H

#include <stdio.h>
#include <stddef.h>

#include "state.h"

/* Read the message a worker wrote to its error file (torch's format: {"message": "..."} or
 * {"message": {"message": ..., "extraInfo": {"py_callstack": ...}}}). Returns 0 and fills `buf`,
 * -ENOENT when there is no file, -EBADMSG when it is not in that format. */
int report_read_error_file(const char *path, char *buf, size_t size);
/* Error files larger than this are not torch's (a worker controls the file): -EBADMSG. */
#define REPORT_ERROR_FILE_MAX (4u << 20)
/* The same for the file's contents in memory (len bytes, no NUL needed). */
int report_parse_error(const char *data, size_t len, char *buf, size_t size);

/* The generated message when there is no error file: signal name or exit code. */
void report_default_message(int exit_code, int signal, long pid, char *buf, size_t size);

/*
 * Append the last REPORT_TAIL_LINES lines of a worker's stderr `tail` (as kept by the launcher, up
 * to `tail_cap` bytes: a full buffer's cut first line is dropped) to the message in `buf`, under a
 * "last lines of stderr:" line; a carriage return inside a line keeps only what follows it (a
 * progress bar's last state), other bytes that are not valid UTF-8 or are control characters
 * become '?'. Cut to `size`. NULL or empty tail: nothing.
 */
void report_append_stderr_tail(char *buf, size_t size, const char *tail, size_t tail_cap);
#define REPORT_TAIL_LINES 10

/* Print the first-failure table for a run whose command is `entry` (e.g. "train.py"). */
void report_print_failure(FILE *out, const char *entry, const struct rdzv_failure *f);

#endif
