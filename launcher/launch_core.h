// SPDX-License-Identifier: Apache-2.0
/*
 * launcher/launch_core: what every launcher does the same way — the process record (pid, label,
 * state, exit, stop deadline, stderr tail), stop with grace (SIGTERM to the group now, SIGKILL
 * when the grace has passed), exit collection for dispatch(), release. An implementation (local,
 * ssh, fake) only spawns, signals and reaps, through a small const ops table. The core's
 * decisions read no clock: every time is an argument (`now_ms`, monotonic), so a test decides it;
 * only the launcher-op wrappers (launch_core_op_*) ask ops->now. Not a public interface
 * (launcher.h is; tests may look inside); never logs.
 */
#ifndef EA_LAUNCHER_LAUNCH_CORE_H
#define EA_LAUNCHER_LAUNCH_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "launcher.h"

struct launch_core;

/* What an implementation does for the core. */
struct launch_core_ops {
    size_t impl_size; /* of the implementation's part of a record (launch_proc.impl) */
    /* Start the process of record p (listed in the core already; p->label is the spec's):
     * set p->pid. On failure the core frees p, unless the implementation gave it up with
     * launch_core_drop() (it may still start: it is then killed and freed quietly). */
    int (*spawn)(struct launch_proc *p, const struct launch_spec *spec, struct ea_error *err);
    /* Send `sig` to the process's whole group: 0, or -ESRCH when it has already ended (or can
     * no longer be vouched for). Never blocks for long. */
    int (*signal)(struct launch_proc *p, int sig);
    /* Non-blocking: take what has happened (output, reaped children, the helper's reports) and
     * mark each ended process with launch_core_exit(). */
    void (*reap)(struct launch_core *c);
    /* Kill and reap what still runs, close the implementation's fds, launch_core_fini(), free
     * the launcher (launcher_ops.destroy, never called with NULL). */
    void (*destroy)(struct launch_core *c);
    /* The monotonic clock in ms. NULL: the real one (ea_now_ms); the fake has its own. */
    int64_t (*now)(struct launch_core *c);
    /* Let go of what the implementation's part of a record (p->impl) holds (fds, copies); the
     * core frees the part itself. NULL: it holds nothing. */
    void (*free)(struct launch_proc *p);
    /* The implementation's own next deadline (an ssh connection being set up), -1: none; the
     * core wakes the loop then (its timerfd), and reap() acts on it. NULL: none. */
    int64_t (*wake)(struct launch_core *c);
    /* A starting process's confirmation did not come by its start_by (the core has recorded the
     * start error): end it, so that its exit is reported — at once when nothing of it runs
     * here, else once what runs has been killed and reaped. NULL: launch_core_exit at once. */
    void (*abort_start)(struct launch_proc *p, int64_t now_ms);
};

/* The process record, shared by every launcher. */
struct launch_proc {
    struct launch_core *core;
    void *impl;      /* the implementation's part (impl_size bytes; freed by the core) */
    pid_t pid;       /* what launch_pid() reports: the worker, 0 until known */
    char label[64];  /* the "[<label>]:" tag of tee'd output */
    int64_t kill_at; /* monotonic ms of the pending SIGKILL, -1 = none */
    bool stopping, exited, reported;
    bool released; /* released while running: freed quietly once it has exited */
    int exit_code, term_signal;
    int64_t end_ms;
    char *tail; /* the last tail_cap bytes of stderr (NUL-terminated), or NULL */
    size_t tail_cap, tail_len;
    /* the start (launcher_ops.start never waits): starting until the implementation confirms it
     * (launch_core_started) or it fails (launch_core_start_failed); start_by: when the core gives
     * up on the confirmation (-1: no limit) */
    bool starting;
    int64_t start_by;
    char *start_error; /* why it never started, or NULL; its exit then reports start_code */
    int start_code;
    char prog[128]; /* argv[0], for messages */
};

/* The head of every launcher built on the core (struct local, struct sshl, struct fake start with
 * it, so a struct launcher * is a struct launch_core *). */
struct launch_core {
    struct launcher base;
    const struct launch_core_ops *ops;
    int fd;  /* what launcher_fd() returns: launch_core_open()'s epoll fd, or the fake's own */
    int tfd; /* timerfd of the pending SIGKILLs (launch_core_open), -1: none (the fake's test
                calls dispatch when its clock has moved) */
    struct launch_proc **v; /* every record not yet freed, in start order */
    size_t n, cap;
};

void launch_core_init(struct launch_core *c, const struct launcher_ops *lops,
                      const struct launch_core_ops *ops);
/* The event fds of a real launcher: c->fd an epoll fd watching `sigfd` (the child table's
 * SIGCHLD signalfd) and c->tfd, a monotonic timerfd. On failure, a message and -errno. */
int launch_core_open(struct launch_core *c, int sigfd, struct ea_error *err);
/* Add `fd` (>= 0; < 0 is ignored) to the epoll fd, with `ptr` as its event data. 0 or -errno. */
int launch_core_watch(struct launch_core *c, int fd, void *ptr);
/* Free every record (the caller has killed and reaped what ran), close c->fd and c->tfd. */
void launch_core_fini(struct launch_core *c);

/* Free a record (ops->free, then the memory) and take it out of the core when it is there. */
void launch_core_free(struct launch_proc *p);

/* Keep `data` in p's stderr tail (no-op without one). */
void launch_core_tail(struct launch_proc *p, const char *data, size_t n);

/* The process ended at end_ms (exit_code 0..255 and term_signal 0, or -1 and the signal): it is
 * reported by the next launch_core_dispatch(). Only the first call counts. */
void launch_core_exit(struct launch_proc *p, int exit_code, int term_signal, int64_t end_ms);
/* The same from a wait status. */
void launch_core_exit_status(struct launch_proc *p, int status, int64_t end_ms);

/* launcher_ops.stop at now_ms: SIGTERM to the group on the first call, SIGKILL due at now_ms +
 * grace_ms; a later call may only shorten the grace. */
int launch_core_stop(struct launch_proc *p, int64_t grace_ms, int64_t now_ms);
/* Pure: the earliest pending SIGKILL of a running process, -1 when none. */
int64_t launch_core_next_kill(const struct launch_core *c);
/* ops->reap, then SIGKILL every running process whose grace has passed at now_ms, give up on the
 * starts whose confirmation is overdue (ops->abort_start), then re-arm the timerfd for the next
 * deadline. */
void launch_core_poll(struct launch_core *c, int64_t now_ms);
/* launcher_ops.dispatch at now_ms: launch_core_poll, free the released processes that have
 * exited, return the exits not reported yet. */
int launch_core_dispatch(struct launch_core *c, int64_t now_ms, struct launch_exit **ret_exits,
                         size_t *ret_n, struct ea_error *err);
/* Give p up (a start that was not confirmed in time): SIGKILL due at now_ms, and no exit
 * reported; freed once it has exited. */
void launch_core_drop(struct launch_proc *p, int64_t now_ms);
/* p is starting: its confirmation is due by start_by (monotonic ms; -1: no limit). */
void launch_core_starting(struct launch_proc *p, int64_t start_by);
/* p's start is confirmed (p->pid is the process now). */
void launch_core_started(struct launch_proc *p);
/* p never started, for the reason `code` (a negative errno: -ENOENT is reported as exit code
 * 127, anything else as 126) and the message (printf-style). Its exit, when the implementation
 * reports it (launch_core_exit), carries that code and launch_exit.start_error. Only the first
 * call counts. */
void launch_core_start_failed(struct launch_proc *p, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Pure: whether a starting process's confirmation is overdue at now_ms. */
bool launch_core_start_overdue(const struct launch_proc *p, int64_t now_ms);
/* Pure: the earliest of the pending SIGKILLs, the starting processes' start_by and the
 * implementation's own deadline (ops->wake): when the loop must come back, -1: never. */
int64_t launch_core_next_wake(const struct launch_core *c);
/* launcher_ops.release: free an exited process; a running one is SIGKILLed and freed quietly
 * once it has exited. */
void launch_core_release(struct launch_proc *p);
/* launcher_ops.relabel */
void launch_core_relabel(struct launch_proc *p, const char *label);
/* The number of records whose process has not exited. */
size_t launch_core_live(const struct launch_core *c);

/* Send `sig` to every record's group (ops->signal; errors ignored): destroy's first step. */
void launch_core_signal_all(struct launch_core *c, int sig);
/* The launcher ops every implementation takes from the core (at ops->now). start: a record for
 * `spec` (label, stderr tail, a zeroed implementation part; -EINVAL without argv[0], -ENOMEM),
 * listed, then ops->spawn; without a label in the spec, the label is the pid. */
int launch_core_op_start(struct launcher *l, const struct launch_spec *spec,
                         struct launch_proc **ret, struct ea_error *err);
void launch_core_op_destroy(struct launcher *l);
int launch_core_op_signal(struct launch_proc *p, int sig);
int launch_core_op_stop(struct launch_proc *p, int64_t grace_ms);
int launch_core_op_fd(struct launcher *l);
int launch_core_op_dispatch(struct launcher *l, struct launch_exit **ret_exits, size_t *ret_n,
                            struct ea_error *err);
pid_t launch_core_op_pid(const struct launch_proc *p);
#define LAUNCH_CORE_OPS                                                                            \
    .start = launch_core_op_start, .destroy = launch_core_op_destroy,                              \
    .signal = launch_core_op_signal, .stop = launch_core_op_stop, .fd = launch_core_op_fd,         \
    .dispatch = launch_core_op_dispatch, .pid = launch_core_op_pid, .release = launch_core_release

#endif
