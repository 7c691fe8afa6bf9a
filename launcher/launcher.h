// SPDX-License-Identifier: Apache-2.0
/*
 * launcher: starts, signals and stops worker processes and reports their exits to the agent's
 * event loop through one pollable fd (DESIGN.md §6). Implementations: local (fork/exec through the
 * exec-guard middleman), ssh and fake (tests); they share one core (launch_core.h). Knows nothing
 * about rendezvous or ranks beyond the label it is given; never logs (errors carry text in struct
 * ea_error).
 */
#ifndef EA_LAUNCHER_LAUNCHER_H
#define EA_LAUNCHER_LAUNCHER_H

#include <stdint.h>
#include <sys/types.h>

#include "ea_error.h"

struct launcher;
struct launch_proc;

/* Settings that hold for every process a launcher starts. Only read during create(). */
struct launcher_config {
    const char *name;       /* "local", "ssh" ("fake": tests only, see fake.h) */
    const char *guard_path; /* executable with the hidden `exec-guard` subcommand (normally
                               /proc/self/exe of elastic-agent); NULL = the running binary */
    /* ssh only (ignored by local) */
    const char *host, *user, *identity;
    int port;
    const char *const *ssh_options; /* NULL-terminated extra `-o` values, may be NULL */
    /* bound on ssh connections being set up at once by every process sharing the directory:
       one of conn_parallel flock'ed slot files in conn_lock_dir (created 0700) is held while
       connecting; NULL or conn_parallel <= 0 = no bound */
    const char *conn_lock_dir;
    int conn_parallel;
    /* how long setting up the connection may take once it has a slot (ssh, the helper's "R");
       <= 0 = 60 s. Starts queued behind it then fail (launch_exit.start_error) */
    int64_t connect_timeout_ms;
    /* local only: how long a worker gets between SIGTERM and SIGKILL when its middleman fences
       it on its own (see fence() below); <= 0 = the guard's default (500 ms) */
    int64_t fence_grace_ms;
};

/* One process to start. Only read during start(). */
struct launch_spec {
    const char *const *argv; /* argv[0] is looked up in PATH when it has no '/'; NULL-terminated */
    const char *const *envp; /* complete environment of the worker, NULL-terminated */
    const char *cwd;         /* NULL = the agent's */
    const char *label;       /* short tag for messages and tee, e.g. "3" for global rank 3 */
    const char *stdout_path; /* file to append stdout to (created 0644, parents must exist);
                                NULL = the agent's stdout */
    const char *stderr_path; /* likewise for stderr */
    int tee;                 /* nonzero: also copy each output line to the agent's stdout/stderr,
                                prefixed "[<label>]:" (requires the launcher to pump the output) */
    size_t stderr_tail;      /* nonzero: keep the last this many bytes of stderr (at most
                                LAUNCH_TAIL_MAX) for launch_exit.stderr_tail; stderr is then pumped
                                even without tee (to stderr_path, else raw to the agent's stderr) */
    int pass_fd;             /* >= 3: an fd of the caller the process gets open at the same
                                number (through its middleman, which closes its own copy once the
                                process started); < 3 (zero-initialised) = none. Only the local
                                launcher can (others: -EOPNOTSUPP) */
};

#define LAUNCH_TAIL_MAX 8192

/* How a process ended: exactly one of exit_code >= 0 or term_signal > 0. */
struct launch_exit {
    struct launch_proc *proc; /* still owned by the launcher until launch_release() */
    int exit_code;            /* 0..255, or -1 when killed by a signal */
    int term_signal;          /* signal number, or 0 */
    int64_t end_ms;           /* monotonic time the exit was observed */
    const char *stderr_tail;  /* the last bytes of stderr when spec.stderr_tail asked for them
                                 (NUL-terminated, may start mid-line), else NULL; owned by the
                                 launcher until launch_release() */
    const char *start_error;  /* the process never started (its program is missing, not
                                 executable, the connection to its host failed, its start was
                                 not confirmed in time): why, naming the program; exit_code is
                                 then 127 (not found) or 126. NULL when it started. Owned like
                                 stderr_tail */
};

struct launcher_ops {
    const char *name;
    int (*create)(const struct launcher_config *cfg, struct launcher **ret,
                  struct ea_error *err);
    /* Kill (SIGKILL to every group) and reap everything still running, then free. NULL: no-op. */
    void (*destroy)(struct launcher *l);
    /*
     * Start one process in its own process group, guarded so that it and all of its descendants
     * die when the agent dies or when it is stopped. Never waits: the process is "starting" until
     * the launcher confirms it (an ssh connection being set up, a middleman that has not yet
     * reported its exec), which dispatch() takes in through the launcher's fd. A start that then
     * fails (missing program, not executable, no connection, no confirmation in time) is
     * reported by dispatch() as an exit with launch_exit.start_error. An error here is what can
     * be known at once (bad spec, no memory, no fork).
     */
    int (*start)(struct launcher *l, const struct launch_spec *spec, struct launch_proc **ret,
                 struct ea_error *err);
    /* Send `sig` to the process's whole group. 0, or -ESRCH when it has already ended. */
    int (*signal)(struct launch_proc *p, int sig);
    /* Begin stopping: SIGTERM to the group now, SIGKILL to the group `grace_ms` later (driven by
     * the launcher's fd, so the event loop never blocks). Idempotent. */
    int (*stop)(struct launch_proc *p, int64_t grace_ms);
    /* A pollable fd, readable when dispatch() has work: an exit, output to pump, a due SIGKILL,
     * a start confirmed or failed, a start or connection deadline passed. */
    int (*fd)(struct launcher *l);
    /* Non-blocking: pump output, send due SIGKILLs, reap children (including orphaned
     * descendants re-parented to the agent), and return the exits of started processes observed
     * since the last call. *ret_exits is malloc'ed (free()), possibly NULL with *ret_n = 0. */
    int (*dispatch)(struct launcher *l, struct launch_exit **ret_exits, size_t *ret_n,
                    struct ea_error *err);
    /* pid of the process (for messages and error files); 0 while its start is not confirmed. */
    pid_t (*pid)(const struct launch_proc *p);
    /* Forget an exited process and free it. NULL is a no-op. Releasing a running process is a
     * programming error (it is killed first). */
    void (*release)(struct launch_proc *p);
    /* Fencing: the caller's authority to run its processes ends at `valid_until_ms` (monotonic;
     * 0 = no limit). Processes started before or after the call that are still running then are
     * stopped by their middleman without the caller (SIGTERM, SIGKILL after fence_grace_ms), so
     * that a caller that cannot act (frozen, paused) never keeps workers running past its lease.
     * Called at every lease renewal; must be cheap. NULL: not supported (a no-op). */
    void (*fence)(struct launcher *l, int64_t valid_until_ms);
    /* Change the "[<label>]:" tag of the process's tee'd output from now on (a warm spare that
     * got its rank). NULL: not supported (a no-op). */
    void (*relabel)(struct launch_proc *p, const char *label);
};

struct launcher {
    const struct launcher_ops *ops;
};

/* Registry of compiled-in launchers, NULL-terminated; lookup by name (NULL when unknown). */
extern const struct launcher_ops *const launcher_impls[];
const struct launcher_ops *launcher_find(const char *name);

/* Create the launcher named by cfg->name (unknown: -EINVAL naming the known ones). */
int launcher_create(const struct launcher_config *cfg, struct launcher **ret, struct ea_error *err);

/* Thin wrappers with the contracts above. */
void launcher_destroy(struct launcher *l);
int launch_start(struct launcher *l, const struct launch_spec *spec, struct launch_proc **ret,
                 struct ea_error *err);
int launch_signal(struct launcher *l, struct launch_proc *p, int sig);
int launch_stop(struct launcher *l, struct launch_proc *p, int64_t grace_ms);
int launcher_fd(struct launcher *l);
int launcher_dispatch(struct launcher *l, struct launch_exit **ret_exits, size_t *ret_n,
                      struct ea_error *err);
pid_t launch_pid(struct launcher *l, const struct launch_proc *p);
void launch_release(struct launcher *l, struct launch_proc *p);
void launcher_fence(struct launcher *l, int64_t valid_until_ms);
void launch_relabel(struct launcher *l, struct launch_proc *p, const char *label);

/*
 * The hidden `elastic-agent exec-guard` subcommand: the middleman between the agent and a worker.
 * It leads the worker's process group, is a child subreaper for the worker's descendants, forwards
 * SIGTERM/SIGINT/SIGHUP to the group, kills the group when its parent (the agent, or sshd) dies or
 * its stdin closes (when asked to watch it), and exits with the worker's status (re-raising the
 * worker's fatal signal). Returns the process exit code; argv[0] is "exec-guard".
 */
int launch_guard_main(int argc, char **argv);

#endif
