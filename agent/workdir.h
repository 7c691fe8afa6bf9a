// SPDX-License-Identifier: Apache-2.0
/*
 * workdir: the agent's private scratch directory (workers' error files, topology files), created
 * 0700 under $TMPDIR (or /tmp) and removed with everything in it when the agent exits.
 */
#ifndef EA_AGENT_WORKDIR_H
#define EA_AGENT_WORKDIR_H

#include <stddef.h>

/* Create "<tmp>/elastic-agent-<run>-<node>-XXXXXX" into buf. 0, or -1 with errno. */
int workdir_create(const char *run_id, const char *node_id, char *buf, size_t size);

/* Remove the directory tree (never follows symlinks). */
void workdir_remove(const char *path);

#endif
