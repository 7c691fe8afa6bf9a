// SPDX-License-Identifier: Apache-2.0
/*
 * pf: the pre-admission health check (--preflight CMD). Runs `sh -c CMD` through the launcher
 * (its own process group, output to one file), bounded by a timeout after which the whole group
 * is stopped and the check counts as failed, and says why a check failed: its exit code or
 * signal, or the timeout, and its last lines of output. Event-driven: the caller polls the
 * launcher's fd, hands exits to pf_on_exit and calls pf_tick at pf_wake_ms. No logging.
 */
#ifndef EA_AGENT_HEALTH_PREFLIGHT_H
#define EA_AGENT_HEALTH_PREFLIGHT_H

#include <stdbool.h>
#include <stdint.h>

#include "ea_error.h"
#include "launcher.h"

enum pf_state { PF_IDLE, PF_RUNNING, PF_PASSED, PF_FAILED };

struct pf;

/* `cmd`, `workdir` and `envp` are borrowed; `l` too (it must outlive the check). */
int pf_create(const char *cmd, int64_t timeout_ms, struct launcher *l, const char *workdir,
              char *const *envp, struct pf **ret, struct ea_error *err);
/* Stops a running check (SIGKILL to its group) and frees. NULL is a no-op. */
void pf_destroy(struct pf *p);

/* Start the check at monotonic now_ms. A check that cannot even start is PF_FAILED at once
 * (the reason says why); returns 0 either way, -ENOMEM only when out of memory. */
int pf_start(struct pf *p, int64_t now_ms);
/* An exit the launcher reported: true when it was the check's (its state is then final). */
bool pf_on_exit(struct pf *p, const struct launch_exit *e);
/* Past the timeout: stop the check's process group (once). */
void pf_tick(struct pf *p, int64_t now_ms);
/* When pf_tick needs to run next (monotonic), -1 for never. */
int64_t pf_wake_ms(const struct pf *p);

enum pf_state pf_state(const struct pf *p);
/* Why the last check failed: "exit code 1: <last line>; <last line>" (static storage in p). */
const char *pf_reason(const struct pf *p);
/* How long the last check ran (ms). */
int64_t pf_duration_ms(const struct pf *p);

#endif
