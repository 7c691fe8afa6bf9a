// SPDX-License-Identifier: Apache-2.0
/*
 * ssh_fixture: what the ssh-launcher test files share (ssh_fixture.c). Every test of suite `ssh`
 * gets a fresh sshd (`sshd`) and scratch directory (`dir`); the helpers assert with criterion.
 */
#ifndef EA_TESTS_SSH_FIXTURE_H
#define EA_TESTS_SSH_FIXTURE_H

#include <stdbool.h>
#include <sys/types.h>

#include "launcher.h"
#include "sshd_harness.h"
#include "test_launch_support.h"

extern struct sshd_h sshd;
extern bool agent_guard; /* guard mode through the agent binary's own exec-guard subcommand */
extern char dir[64];
extern const char *const base_env[]; /* PATH only */

/* `name` inside the test's directory (one of 8 rotating buffers). */
char *path_in(const char *name);
/* sh = the POSIX-sh fallback; identity NULL = the harness's key; parallel = connection slots. */
struct launcher *mk_full(bool sh, const char *identity, int parallel, struct ea_error *err,
                         int *ret);
/* mk_full with the harness's key and 8 slots; asserts success. */
struct launcher *mk(bool sh);
/* launch_start that must succeed. */
struct launch_proc *start_spec(struct launcher *l, const struct launch_spec *spec);
/* launch_start of a start that fails: it returns at once, and the process's exit (the next one
 * dispatched) carries start_error and `code` (127 not found, 126 otherwise): that exit. */
struct launch_exit start_fails(struct launcher *l, const struct launch_spec *spec, int code);
/* start_spec of argv with base_env, cwd `dir`, stdout to path_in("stdout"). */
struct launch_proc *start(struct launcher *l, const char *const *argv);
/* The next exit, which must come within timeout_ms. */
struct launch_exit wait_one(struct launcher *l, int timeout_ms);
/* The comm of pid's parent: "elastic-agent-g" under the guard, "sh" under the fallback. */
void parent_comm(pid_t pid, char *buf, size_t size);

#endif
