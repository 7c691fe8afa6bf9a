// SPDX-License-Identifier: Apache-2.0
/*
 * runcg: a cgroup (v2) per run, where this process may make child cgroups of its own (root, or a
 * delegated subtree): what a run started stays in its cgroup however it detached, and
 * `cgroup.kill` ends all of it at once. Not resource control, not cgroup v1; where cgroups are
 * not writable the callers fall back to the subreaper (proc_kill_strays). Never logs.
 */
#ifndef EA_LAUNCHER_RUNCG_H
#define EA_LAUNCHER_RUNCG_H

#include <stdint.h>

#include "ea_error.h"

/* This process's own cgroup v2 directory (/proc/self/cgroup "0::PATH" under the cgroup2 mount of
 * /proc/self/mountinfo), opened O_DIRECTORY and close-on-exec: 0 and *ret_fd, or -errno
 * (-ENOENT: no cgroup v2). */
int runcg_self(int *ret_fd, struct ea_error *err);

/* Make the child cgroup `name` of `parent_fd` (an existing one of that name is killed and
 * made again) and open it: 0 and *ret_fd (hand it to proc_spawn's cgroup_fd), or -errno
 * (-EACCES/-EROFS/-EPERM: not delegated to us). */
int runcg_create(int parent_fd, const char *name, int *ret_fd, struct ea_error *err);

/* SIGKILL every process in cgroup `name` of `parent_fd` (cgroup.kill; before Linux 5.14,
 * cgroup.procs read and killed until empty), wait until it is empty (deadline_ms, monotonic) and
 * remove it. 0, -ETIMEDOUT (still populated: left in place), or -errno. */
int runcg_kill(int parent_fd, const char *name, int64_t deadline_ms, struct ea_error *err);

/* Kill and remove the children of `parent_fd` named `prefix`<anything>-<pid>-<n> whose <pid> no
 * longer runs: runs of an earlier process that was killed before it could end them. Returns how
 * many were removed. */
int runcg_reap_stale(int parent_fd, const char *prefix, int64_t deadline_ms);

#endif
