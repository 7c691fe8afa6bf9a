// SPDX-License-Identifier: Apache-2.0
/*
 * test_launch_support: shared helpers of the launcher, guard and proc tests. Everything waits on
 * real events (pidfd, FIFO, the launcher's fd) with a deadline; nothing sleeps.
 */
#ifndef EA_TESTS_UNIT_TEST_LAUNCH_SUPPORT_H
#define EA_TESTS_UNIT_TEST_LAUNCH_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "launcher.h"

#define TW EA_HELPERS_DIR "/ea-testworker"
#define TG EA_AGENT_BIN

/* A fresh directory under /tmp; tl_rmrf removes it and everything in it. */
void tl_mkdtemp(char *buf, size_t size);
void tl_rmrf(const char *dir);

/* Create a FIFO at `path` and open its read end (non-blocking, CLOEXEC), so that writers can
 * open it without blocking, and a write end kept by the test (*ret_keep_fd) so that the reader
 * never sees EOF between writers. Returns the read end. */
int tl_fifo(const char *path, int *ret_keep_fd);
/* Read "ready <pid>" lines from `fd` until `n` pids are collected or the deadline passes;
 * returns how many were read. */
int tl_read_ready(int fd, pid_t *pids, int n, int timeout_ms);

/* True once `pid` has terminated (pidfd + poll), false if it still runs after timeout_ms. A pid
 * that no longer exists counts as terminated. Does not reap. */
bool tl_pid_gone(pid_t pid, int timeout_ms);
/* Same for several pidfds opened earlier with tl_pidfd (-1 entries are taken as gone). */
int tl_pidfd(pid_t pid);
bool tl_pidfds_gone(const int *fds, int n, int timeout_ms);
/* True when kill(pid, 0) fails with ESRCH: not even a zombie is left. */
bool tl_no_such_pid(pid_t pid);

/* Parent pid from /proc/<pid>/stat, -1 when unknown. */
pid_t tl_ppid(pid_t pid);
/* First line of `path` as a pid, -1 when absent. */
pid_t tl_read_pid(const char *path);
/* Whole file into buf (NUL-terminated); length, or -1. */
ssize_t tl_read_file(const char *path, char *buf, size_t size);
/* Number of children this process has (zombies included), from /proc. */
int tl_child_count(void);

/* Poll the launcher's fd and dispatch until `want` exits are collected into out[] or the
 * deadline passes; returns the number collected. */
size_t tl_wait_exits(struct launcher *l, struct launch_exit *out, size_t want, int timeout_ms);
/* launch_start, then dispatch until the launcher confirmed the start (launch_pid known) or the
 * process ended: 0 when it started, 1 when it never did (its exit, with start_error, is the
 * next tl_wait_exits hands out), the start's negative errno, or -ETIMEDOUT. Exits dispatched
 * meanwhile wait for tl_wait_exits. */
int tl_start(struct launcher *l, const struct launch_spec *spec, struct launch_proc **ret,
             struct ea_error *err, int timeout_ms);
/* The exit in ex[0..n) of process p, or NULL. */
const struct launch_exit *tl_find_exit(const struct launch_exit *ex, size_t n,
                                       const struct launch_proc *p);

/* A launcher using the test build's elastic-agent as its exec-guard. */
struct launcher *tl_launcher(void);

int64_t tl_now_ms(void);

#endif
