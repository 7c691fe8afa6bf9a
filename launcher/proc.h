// SPDX-License-Identifier: Apache-2.0
/*
 * proc: the one audited spawn recipe (fork/exec with named flags, argv arrays, a CLOEXEC error
 * pipe that turns exec failure into a negative errno) and the process-wide child table fed by a
 * SIGCHLD signalfd. Used by the local launcher in the agent and by exec-guard for its worker.
 * Not a process manager: no restarts, no output handling, no policy; never logs.
 */
#ifndef EA_LAUNCHER_PROC_H
#define EA_LAUNCHER_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ea_error.h"

/* What the child does between fork and exec, in this order. Signal dispositions are always reset
 * to SIG_DFL and the signal mask emptied first, whatever the flags. */
enum proc_flags {
    PROC_NEW_SESSION = 1u << 0, /* setsid(): own session and process group (pgid == pid) */
    PROC_NEW_PGROUP = 1u << 1,  /* setpgid(0, 0): own process group in the caller's session */
    PROC_DEATHSIG = 1u << 2,    /* PR_SET_PDEATHSIG(deathsig), then give up if the parent has
                                   already gone. Fires when the *thread* that called
                                   proc_spawn() exits: spawn from a long-lived thread. */
    PROC_SEARCH_PATH = 1u << 3, /* argv[0] without '/' is looked up in the PATH of envp (not of
                                   the caller), like execvpe with Python's semantics */
    PROC_CLOSE_FDS = 1u << 4,   /* every fd >= 3 (except report_fd) is closed on exec, so fds
                                   that other code forgot to make CLOEXEC do not leak */
};

struct proc_spawn_opts {
    const char *const *argv; /* NULL-terminated; argv[0] is the program */
    const char *const *envp; /* NULL-terminated; NULL = the caller's environ */
    const char *cwd;         /* NULL = the caller's */
    int stdin_fd;            /* dup2'ed onto 0/1/2 in the child; -1 = inherit */
    int stdout_fd;
    int stderr_fd;
    unsigned flags; /* enum proc_flags */
    int deathsig;   /* with PROC_DEATHSIG */
    /* >= 3: hand the error pipe's write end to the program as this fd (inherited, not CLOEXEC)
     * so that a middleman (exec-guard) can report its own child through it: the spawn then
     * waits for a PROC_REPORT_TARGET_PID or a failure record before returning. -1 = no. */
    int report_fd;
    const char *target; /* with report_fd: the middleman's program, for messages */
    /* >= 3: this fd of the caller stays open in the program at the same number (CLOEXEC is
     * cleared in the child only); must not be report_fd. < 3 (zero-initialised) = none. */
    int keep_fd;
    int keep_fd2; /* a second such fd (the local launcher: the fence page and a passed fd) */
    /* >= 3: a cgroup v2 directory (runcg_create) the child moves itself into before its exec,
     * so that all it starts is there; < 3 (zero-initialised) = stay in the caller's */
    int cgroup_fd;
};

/*
 * What travels on the error pipe: fixed 8-byte records (atomic on a pipe), host byte order.
 * The spawning child writes PROC_REPORT_SETUP/CHDIR/EXEC before _exit(127); a middleman given
 * report_fd writes PROC_REPORT_TARGET_PID once its own child has exec'd, or
 * PROC_REPORT_TARGET_EXEC/TARGET_SETUP when it could not start it, then closes the fd.
 */
enum proc_report_kind {
    PROC_REPORT_SETUP = 1,        /* value: errno of a failed dup2/setsid/... in the child */
    PROC_REPORT_CHDIR = 2,        /* value: errno of chdir(cwd) */
    PROC_REPORT_EXEC = 3,         /* value: errno of execve(argv[0]) */
    PROC_REPORT_TARGET_EXEC = 4,  /* value: errno of the middleman's exec of the target */
    PROC_REPORT_TARGET_SETUP = 5, /* value: errno of the middleman's own set-up */
    PROC_REPORT_TARGET_PID = 6,   /* value: pid of the target, which has exec'd */
};

struct proc_report {
    int32_t kind;
    int32_t value;
};

/* Write one record to `fd` (async-signal-safe; retries EINTR). 0 or -errno. */
int proc_report_write(int fd, int kind, int value);

/*
 * fork + exec `o->argv` with the set-up described by `o`. Returns once the program has exec'd
 * (and, with report_fd, once the middleman reported its target's pid): 0 with *ret_pid (and
 * *ret_target_pid, may be NULL; equal to *ret_pid without report_fd). On failure the child has
 * been reaped and nothing is left behind: -ENOENT/-EACCES/... with a message naming the program
 * (or the directory, for a failed chdir). The caller reaps the child on success.
 */
int proc_spawn(const struct proc_spawn_opts *o, pid_t *ret_pid, pid_t *ret_target_pid,
               struct ea_error *err);

/*
 * The same in two halves, for a caller that must not wait (the agent's loop): begin forks and
 * returns at once with the child's pid and the read end of its report pipe (non-blocking,
 * CLOEXEC), which the caller watches; feed, when that fd is readable (or the caller's deadline
 * for it passed: set timed_out first), reads what it holds: 0 while more is to come, 1 once the
 * program (and, with report_fd, the middleman's target: s->target) has exec'd, or a negative
 * errno with the message proc_spawn gives, after SIGKILLing the child. Either way the fd is
 * closed once feed returned non-zero. The caller registers and reaps the child (proc_table_add
 * right after begin). end closes the fd (a caller giving up). PROC_START_TIMEOUT_MS is the
 * bound proc_spawn uses.
 */
#define PROC_START_TIMEOUT_MS 30000 /* a middleman that never reports is not a guard */
struct proc_start {
    pid_t pid;         /* the child */
    int fd;            /* the report pipe, -1 once done */
    pid_t target;      /* the target's pid (the child's own without report_fd), once done */
    bool want_target;  /* report_fd was given */
    bool timed_out;    /* set by the caller when it gives up waiting */
    int kind, value;   /* the first failure record, 0 = none */
    char buf[sizeof(struct proc_report) * 8];
    size_t have;
    char prog[256], target_name[256], cwd[1024]; /* for messages */
};
int proc_spawn_begin(const struct proc_spawn_opts *o, struct proc_start *s, struct ea_error *err);
int proc_spawn_feed(struct proc_start *s, struct ea_error *err);
void proc_spawn_end(struct proc_start *s);

/* Make this process a child subreaper, so orphaned descendants are re-parented to it. */
int proc_set_subreaper(struct ea_error *err);

/*
 * The child table (process-wide, reference-counted). Opening blocks SIGCHLD in the calling
 * thread (threads created later inherit the mask; threads that exist already must block it
 * themselves, or their SIGCHLDs are lost to the signalfd) and returns the shared SIGCHLD
 * signalfd (non-blocking, CLOEXEC; owned by the table: do not close it). Other signalfds with
 * disjoint masks (SIGTERM/SIGINT/...) coexist with it. The last close releases it.
 */
int proc_table_open(int *ret_sigfd, struct ea_error *err);
void proc_table_close(void);

/* Register a child whose exit proc_reap() should record. -ENOMEM. */
int proc_table_add(pid_t pid);
/* Forget a child (its exit, if it comes later, is reaped silently). */
void proc_table_remove(pid_t pid);

/*
 * Non-blocking: drain the SIGCHLD signalfd, then waitpid(-1, WNOHANG) until nothing is left:
 * exits of registered children are recorded, unknown children (orphaned descendants
 * re-parented to this subreaper) are reaped silently. Every child of the process must be
 * spawned through here: a child waited for elsewhere may be reaped by this loop first.
 */
int proc_reap(void); /* how many children it reaped (registered or not) */

/*
 * SIGKILL every child of this process that is not in the table (zombies included: harmless).
 * With the subreaper flag, what comes here without being spawned by us is what escaped a dead
 * middleman — a worker's setsid()'ed daemon whose exec-guard was SIGKILLed — and nothing a run
 * started may outlive it (docs/security.md). A killed stray's own children come here in turn,
 * with its SIGCHLD: call again after each proc_reap() that reaped something. A child that is
 * still ours cannot have its pid reused, so the kill hits no stranger. Call it from the thread
 * that spawns and registers children (one forked but not yet in the table would be killed);
 * every child of the process must be spawned and registered through here (see proc_reap).
 * Returns how many were signalled, or -errno when /proc cannot be read.
 */
int proc_kill_strays(void);
/* proc_kill_strays() and proc_reap() in turn until no stray is left or `deadline_ms`
 * (monotonic) passes, waiting on the table's SIGCHLD signalfd in between: what a run left
 * behind, its children included, at the run's end. The table must be open. 0, or -ETIMEDOUT
 * when strays were still there at the deadline. */
int proc_kill_strays_until(int64_t deadline_ms);

/* 1 with the wait status and the monotonic time it was reaped when `pid` has exited, 0 while it
 * runs, -ESRCH when it is not in the table. */
int proc_exit_status(pid_t pid, int *ret_status, int64_t *ret_end_ms);

#endif
