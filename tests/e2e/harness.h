// SPDX-License-Identifier: Apache-2.0
/*
 * harness: end-to-end test support. Starts elastic-agent processes with their stderr in files,
 * waits on real events with deadlines (pidfd for exits, inotify for files) — never sleeps.
 */
#ifndef EA_TESTS_E2E_HARNESS_H
#define EA_TESTS_E2E_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct h_agent {
    pid_t pid;
    int pidfd;
    char log[512]; /* the agent's stderr */
    char out[512]; /* the agent's stdout */
    int status;    /* wait status once reaped */
    bool reaped;
};

/* A fresh temp directory (removed by h_rmdir). */
void h_mkdtemp(char *buf, size_t size, const char *tag);
void h_rmdir(const char *dir);

/* Suite set-up shared by the e2e suites: a fresh temp dir (tag), `state` = dir/state and
 * `envdir` = dir/env (created), and this test process made a child subreaper so orphans of
 * killed agents come to it (to be seen and reaped). Buffers are 256/300/300 bytes. */
void h_suite_dirs(const char *tag, char *dir, char *state, char *envdir);

/* Start `EA_AGENT_BIN args...` (NULL-terminated); logs go to dir/<name>.{log,out}. */
void h_agent_start(struct h_agent *a, const char *dir, const char *name, const char *const *args);
/* h_agent_start with argv `base` (NULL-terminated), then `extra` (NULL-terminated, or NULL), then
 * "--" and the worker command `cmd` (NULL-terminated): what most e2e tests start. */
void h_agent_start_argv(struct h_agent *a, const char *dir, const char *name,
                        const char *const *base, const char *const *extra, const char *const *cmd);

/* SIGKILL and reap every agent this process started and has not reaped: call it first in each
 * suite's teardown, so a failed assertion never leaves agents (and their workers) running. */
void h_kill_agents(void);

/* Wait for the agent to exit within timeout_ms: its exit code (128+sig when killed), or -1 on
 * timeout (the agent is then SIGKILLed and reaped). */
int h_agent_wait(struct h_agent *a, int timeout_ms);

/* Send a signal to the agent. */
void h_agent_signal(struct h_agent *a, int sig);
/* SIGSTOP the agent (a paused VM, a swap storm) at a moment it holds no file lock: the file
 * backend's store lock, held by a stopped agent, would stall every other agent of the host, which
 * is a limit of that backend, not what a freeze test is about. Returns once it is stopped. */
void h_agent_freeze(struct h_agent *a);

/* True once the agent's log contains `needle`; waits up to timeout_ms for it (inotify). */
bool h_log_wait(const struct h_agent *a, const char *needle, int timeout_ms);
bool h_file_contains(const char *path, const char *needle);
/* The whole file at `path`, NUL-terminated ("" when empty; free it), its length in *ret_len (may
 * be NULL); a failed assertion when it cannot be opened. */
char *h_slurp(const char *path, size_t *ret_len);
/* How many times `needle` stands in the file at `path` (0 when there is no such file). */
int h_count_in(const char *path, const char *needle);
/* Fail (never skip) unless /usr/bin/python3 imports torch with gloo (Debian's python3-torch,
 * which scripts/install-deps.sh --test installs); logs the torch version. */
void h_require_torch(void);
/* Wait until a's log (with `out`: its stdout) holds `needle`; else show both and fail. */
void h_wait_in(const struct h_agent *a, bool out, const char *needle, int timeout_ms);

/* Number of regular files in dir whose name starts with prefix. */
int h_count_files(const char *dir, const char *prefix);
/* Wait until at least `count` such files exist (inotify on dir); returns the final count. */
int h_wait_files(const char *dir, const char *prefix, int count, int timeout_ms);

/* Value of NAME in a KEY=VALUE-per-line env file written by `ea-testworker record`; static. */
const char *h_env_value(const char *path, const char *name);

/* Wait until process `pid` (not necessarily our child) has terminated; true if in time. */
bool h_pid_gone(pid_t pid, int timeout_ms);
/* Read a pid from a file; -1 if absent (one there but still empty is waited for, at most 5 s). */
pid_t h_read_pid(const char *path);

/* printf into one of 16 rotating static buffers (valid until 16 more calls): for building
 * paths and arguments inline in tests. */
char *h_fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));

/* Copy the agent's log to stderr, framed, so a failing test shows what the agent said. */
void h_show_log(const struct h_agent *a);

/* Assert the agent exits with `code` within timeout_ms (showing its log when it does not). */
void h_expect_exit(struct h_agent *a, int code, int timeout_ms);

/* Monotonic milliseconds. */
int64_t h_now_ms(void);

#endif
