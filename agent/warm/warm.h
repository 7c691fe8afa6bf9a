// SPDX-License-Identifier: Apache-2.0
/*
 * warm: this node's warm spares (--warm-workers, docs/warm.md). While a round runs (and before
 * the first), a set of nproc worker processes is started ahead of time, parked: each has
 * ELASTIC_ASSIGN_FD, one end of a socketpair whose other end warm holds, and no rank. The worker
 * does its expensive set-up, sends a `ready` line and blocks reading the fd. When a round
 * commits, the group takes the parked spares (warm_assign: the assignment line, the process
 * handed over), and the loop parks a new set. Spares are started through the launcher (under
 * the exec-guard, fenced like any worker). Whatever a spare sends is hostile input: bounded,
 * checked, and a fault (a clear message), never a crash. No logging (the glue, warm/warm_agent.c,
 * logs each fault once).
 */
#ifndef EA_AGENT_WARM_H
#define EA_AGENT_WARM_H

#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ea_error.h"
#include "launcher.h"

struct warm;

/* How spares are started; read during warm_create only (strings and env are copied). */
struct warm_config {
    struct launcher *launcher; /* borrowed: must outlive the warm */
    char *const *command;      /* the worker's argv, borrowed (the config's) */
    int nproc;                 /* spares per set: local ranks 0..nproc-1 */
    char *const *env;          /* a spare's environment without ELASTIC_ASSIGN_FD (warm adds it) */
    const char *log_dir;       /* spares' output to <log_dir>/<set>.local_<i>.{out,err} (the
                                  directory exists), linked to the round's files at assignment;
                                  NULL: the console, as a worker's */
    const bool *shown;         /* nproc flags: local rank i on the console (without log_dir);
                                  NULL: every rank */
    bool tee;                  /* with log_dir: also "[label]:" lines on the console */
    size_t stderr_tail;        /* bytes of stderr kept for the failure report */
    int64_t ready_timeout_ms;  /* a spare's ready line is due this long after its start */
    int64_t stop_grace_ms;     /* SIGTERM to SIGKILL when spares are stopped */
    int64_t inplace_timeout_ms; /* --in-place: a re-assigned worker's ack is due this long after
                                   the assignment was sent; 0: in-place off (an "inplace":1 in a
                                   ready line is ignored, the socket closed after hand-over) */
};

/* A spare that broke the protocol, died while parked, or missed its deadline. */
struct warm_fault {
    int local_rank;
    pid_t pid;
    bool held;         /* an in-place worker held for the next round (it exited or broke the
                          protocol): stopped; its local rank starts from a spare or cold */
    bool assigned;     /* it had its assignment (it is a worker of the round: the caller fails
                          it like a failed start); else it was parked (the set is gone; the next
                          round starts cold) */
    char message[512]; /* "local rank 0's warm spare (pid 42) exited while parked (exit code 3)" */
};

int warm_create(const struct warm_config *c, struct warm **ret, struct ea_error *err);
/* Kill (SIGKILL to their process groups) every spare not handed over; NULL is a no-op. */
void warm_destroy(struct warm *w);

/*
 * Park a set of nproc spares unless one is parked or parking is suspended (after a fault, until
 * warm_round_started). `floor_gen`: the generation of the workers started last (0: none): the
 * spares are for a later one. 1 when a set was started, 0 nothing to do, or -errno with err (the
 * spares started so far are stopped, parking is suspended).
 */
int warm_park(struct warm *w, int64_t floor_gen, struct ea_error *err);
/* Spares parked now (not handed over, not stopping). */
int warm_parked(const struct warm *w);
/* Of those, the ones whose ready line came (their set-up is done: a round takes them at once). */
int warm_parked_ready(const struct warm *w);
/* A round's workers started: parking is no longer suspended; held in-place workers the round
 * did not take (a local rank it does not have) are stopped. */
void warm_round_started(struct warm *w);
/* Stop every parked spare and held in-place worker (SIGTERM to its group, SIGKILL after the
 * grace): leaving, exiting. */
void warm_stop(struct warm *w);

/* What the worker of local rank `local_rank` gets. */
struct warm_take {
    char *const *env;        /* its complete environment, as a cold worker's */
    int64_t generation, round;
    const char *label;       /* its tee label from now on (the global rank) */
    const char *stdout_path; /* the round's log files, linked to the spare's, or NULL */
    const char *stderr_path;
};

/*
 * Hand the parked spare of `local_rank` its assignment: the line is written (the rest when the
 * socket takes it) and the process is the caller's from now on (*ret_proc, *ret_pid; stop and
 * release it through the launcher); its ready line is still awaited (a fault when late or bad).
 * -ENOENT: no spare parked for that rank. -ESTALE: the generation is not newer than the spare's
 * floor or than the last assignment of that rank (the spare is stopped). -EPIPE: its socket is
 * closed (it is dying; stopped). The caller starts a cold worker on any error.
 */
/*
 * --in-place: the worker first looked for is the in-place worker held for `local_rank`
 * (warm_hold): it is sent the assignment on its socket and stays the same process; 1. Its ack is
 * due within inplace_timeout_ms (a fault, `assigned`, when late, malformed or of another
 * generation). The generation check is the same: not newer than the worker's last -> -ESTALE,
 * the worker is stopped. On an error the held worker is gone: calling again tries the parked
 * spare.
 */
int warm_assign(struct warm *w, int local_rank, const struct warm_take *t,
                struct launch_proc **ret_proc, pid_t *ret_pid, struct ea_error *err);

/*
 * --in-place: the group lets go of a running worker at a membership change. 1 when `proc` is an
 * in-place capable worker (its ready line said so, its socket is open, it acknowledged its last
 * assignment): warm holds it, running, for the next round's warm_assign of its local rank, and
 * the caller forgets it. 0: not one (the caller stops it as usual).
 */
int warm_hold(struct warm *w, struct launch_proc *proc);
/* The group stops `proc` (a worker it took from warm): no line of it matters any more. */
void warm_forget(struct warm *w, struct launch_proc *proc);
/* In-place workers held now. */
int warm_held(const struct warm *w);
/* Stop every held worker (the node left the run, is leaving, or was fenced out). */
void warm_drop_held(struct warm *w);

/* The spares' sockets to poll (for a line, or room for the rest of an assignment): at most max
 * of them into fds, how many (0 for NULL). WARM_POLL_MAX holds every one. */
#define WARM_POLL_MAX 8192 /* a parked and a held one for each of --nproc-per-node's 4096 */
size_t warm_pollfds(const struct warm *w, struct pollfd *fds, size_t max);
/* The poll's answer for those fds: read lines and write assignments, non-blocking. */
void warm_on_poll(struct warm *w, const struct pollfd *fds, size_t n);
/* A process exit the launcher reported: 1 when it was a spare not handed over (accounted for,
 * released: a parked one that exited is a fault), 0 otherwise (a handed-over spare is forgotten
 * here: the caller's). */
int warm_on_exit(struct warm *w, const struct launch_exit *e);
/* Deadlines at monotonic `now`, then the oldest fault not yet taken: 1 and *ret, else 0. */
int warm_tick(struct warm *w, int64_t now, struct warm_fault *ret);
/* The next ready deadline (monotonic ms), -1 none. */
int64_t warm_wake_ms(const struct warm *w);
/* Monotonic time at which every spare assigned generation `gen` had both its assignment and
 * sent its ready line (the worker holds its rank), -1 until then or when none was. */
int64_t warm_assigned_ms(const struct warm *w, int64_t gen);

#endif
