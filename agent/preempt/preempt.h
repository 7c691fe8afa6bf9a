// SPDX-License-Identifier: Apache-2.0
/*
 * preempt: the preemption notice file (--preemption-file). Cloud preemption handlers and
 * autoscaling lifecycle hooks create a file; the agent watches its directory with inotify (no
 * polling) and leaves the run gracefully when it appears, exactly as on SIGTERM.
 */
#ifndef EA_AGENT_PREEMPT_H
#define EA_AGENT_PREEMPT_H

#include <limits.h>
#include <stdbool.h>

#include "ea_error.h"

struct preempt {
    int fd; /* inotify fd, -1 when no file is configured */
    char path[PATH_MAX];
};

/* Watch `path` (NULL: nothing to watch, fd = -1). The directory must exist. */
int preempt_open(struct preempt *p, const char *path, struct ea_error *err);

/* Drain pending notifications; true when the notice file exists now. */
bool preempt_check(struct preempt *p);

void preempt_close(struct preempt *p);

#endif
