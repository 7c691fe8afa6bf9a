// SPDX-License-Identifier: Apache-2.0
/*
 * workdir: the agent's private scratch directory (workers' error files, topology files), created
 * 0700 under $TMPDIR (or /tmp) and removed with everything in it when the agent exits; and the
 * directories the agent creates for the user (--log-dir), checked at start.
 */
#ifndef EA_AGENT_WORKDIR_H
#define EA_AGENT_WORKDIR_H

#include <stddef.h>

#include "ea_error.h"

/* Create "<tmp>/elastic-agent-<run>-<node>-XXXXXX" into buf. 0, or -1 with errno. */
int workdir_create(const char *run_id, const char *node_id, char *buf, size_t size);

/* Remove the directory tree (never follows symlinks). */
void workdir_remove(const char *path);

/* Directories and log files the agent creates hold the workers' output (which may carry tokens,
 * paths, data): only the agent's user reads them. An existing directory keeps its mode. */
#define WORKDIR_MODE 0700
#define WORKDIR_FILE_MODE 0600

/* mkdir -p with mode WORKDIR_MODE (an existing directory is fine). 0 or -errno. */
int workdir_mkdirs(const char *path);

/* Create the log file `path` (or take an existing one, never through a symlink) with mode
 * WORKDIR_FILE_MODE, before a launcher opens it for appending. 0 or -errno with the reason. */
int workdir_log_file(const char *path, struct ea_error *err);

/*
 * --log-dir at start: create `log_dir` and `log_dir/run_id` and create (then remove) a file in the
 * latter, so that a directory workers could never log to is a configuration error before any
 * worker starts. 0, or -errno with the path and the reason in err.
 */
int workdir_check_log_dir(const char *log_dir, const char *run_id, struct ea_error *err);

#endif
