// SPDX-License-Identifier: Apache-2.0
/*
 * launcher/fake: the "fake" launcher, a stand-in for tests (flux-core's testexec). start() records
 * the request and hands out a fake pid; nothing runs and no clock is read: the test decides when
 * a "worker" exits and with which status, and what time it is. Stop with grace, exit collection
 * and release are the core's (launch_core.c), the same as local and ssh. Not for production: the
 * agent's --launcher does not accept "fake".
 */
#ifndef EA_LAUNCHER_FAKE_H
#define EA_LAUNCHER_FAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "launcher.h"

#define LAUNCH_FAKE_SIGNALS_MAX 16 /* signals recorded per process; later ones are counted only */

/* The fake's clock (monotonic ms; 0 at create()): stop() deadlines and end_ms use it. Setting it
 * raises the launcher's fd, so that a loop calls dispatch() and sends the SIGKILLs now due. */
void launch_fake_set_now(struct launcher *l, int64_t now_ms);

/* The worker behind `p` ends with exit_code (0..255, term_signal 0) or by term_signal
 * (exit_code -1): reported by the next dispatch() with end_ms = the fake clock. -ESRCH when it
 * has already ended. A SIGKILL (from stop's grace, release or signal) ends it by itself. */
int launch_fake_exit(struct launcher *l, struct launch_proc *p, int exit_code, int term_signal);

/* The next start() fails with `code` (a negative errno) and the message exec failures carry, as
 * a real launcher's does: start() returns 0, and the next dispatch() reports the process's exit
 * with launch_exit.start_error (exit code 127 for -ENOENT, else 126); 0 = succeed again. */
void launch_fake_fail_next(struct launcher *l, int code);

/* The next start() stays "starting" (pid 0), as behind an ssh connection being set up, until
 * launch_fake_confirm(), or until timeout_ms on the fake clock have passed (-1: never): then the
 * core gives it up and dispatch() reports a start failure (exit code 126). */
void launch_fake_hold_next(struct launcher *l, int64_t timeout_ms);
/* Confirm a held start: p gets its fake pid. -ESRCH when it is not starting. */
int launch_fake_confirm(struct launcher *l, struct launch_proc *p);
bool launch_fake_starting(const struct launch_proc *p);

/* Append `data` to p's stderr (kept in its tail when the spec asked for one). */
void launch_fake_stderr(struct launch_proc *p, const char *data);

/* How many starts succeeded so far, and the argv (NULL-terminated copy; owned by the record)
 * and label of a process. */
size_t launch_fake_started(const struct launcher *l);
const char *const *launch_fake_argv(const struct launch_proc *p);
const char *launch_fake_label(const struct launch_proc *p);
/* The value of `name` in the environment p was started with, or NULL. */
const char *launch_fake_env(const struct launch_proc *p, const char *name);

/* The signals sent to p's group so far, in order (at most LAUNCH_FAKE_SIGNALS_MAX in sigs;
 * the return value counts them all). */
size_t launch_fake_signals(const struct launch_proc *p, const int **ret_sigs);

/* The last fence() deadline (0 = none). */
int64_t launch_fake_fence(const struct launcher *l);

/* The i-th process record not yet freed, in start order (NULL past the end): a test's script
 * finds the workers the agent started. */
struct launch_proc *launch_fake_proc(struct launcher *l, size_t i);
/* Whether p has ended (exited, or ended by the test or a SIGKILL, not yet reported). */
bool launch_fake_ended(const struct launch_proc *p);
/* When the earliest pending SIGKILL of a stop's grace, or a held start's deadline, is due on the
 * fake clock, -1: none (a script's step wakes the loop then, and sets the clock:
 * launch_fake_set_now). */
int64_t launch_fake_next_kill(const struct launcher *l);

#endif
