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

/* The generated message when there is no error file: signal name or exit code. */
void report_default_message(int exit_code, int signal, long pid, char *buf, size_t size);

/* Print the first-failure table for a run whose command is `entry` (e.g. "train.py"). */
void report_print_failure(FILE *out, const char *entry, const struct rdzv_failure *f);

#endif
