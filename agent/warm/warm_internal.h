// SPDX-License-Identifier: Apache-2.0
/*
 * warm internals, shared by warm.c (parked spares, their sockets, the hand-over) and inplace.c
 * (--in-place: running workers that keep their socket and get the next round's assignment).
 * Not for other modules: warm.h is the interface.
 */
#ifndef EA_AGENT_WARM_INTERNAL_H
#define EA_AGENT_WARM_INTERNAL_H

#include "warm.h"
#include "warm_proto.h"

#define WARM_FD_MIN 10 /* the worker's end lives above the fds the spawn rearranges (0-3) */

enum spare_state {
    SP_PARKED,     /* started, no assignment yet */
    SP_TAKEN,      /* handed over; its ready line or the rest of its assignment still due */
    SP_STOPPING,   /* stopped by us: its exit is accounted for silently */
    SP_RUNNING,    /* in-place capable, handed over and settled: the group's worker; the socket
                      stays open for the next assignment */
    SP_HELD,       /* in-place: the group let go of it at a membership change; it runs on,
                      ours again, until the next round re-assigns it (or it is stopped) */
    SP_REASSIGNED, /* in-place: the group's worker again, sent a new assignment; its ack due */
};

struct spare {
    enum spare_state state;
    struct launch_proc *proc;
    pid_t pid; /* 0 until the launcher confirmed its start: read it through spare_pid() */
    int fd; /* our end of the socket, -1 once closed */
    bool want_out; /* the rest of an assignment waits for room: poll for POLLOUT too */
    int local_rank;
    int64_t deadline_ms; /* its ready line (or, re-assigned, its ack) is due */
    int64_t floor_gen;   /* it is for a generation after this one */
    int64_t gen;         /* taken: the generation it was assigned last */
    bool ready, eof;
    bool inplace; /* its ready line said "inplace":1 and --in-place is on */
    bool acked;   /* re-assigned: the ack of `gen` came */
    char line[WARM_LINE_MAX];
    size_t len;
    char *out; /* assignment bytes still to write, or NULL */
    size_t out_len, out_off;
    char out_path[PATH_MAX], err_path[PATH_MAX]; /* its log files, "" without log_dir */
};

struct warm {
    struct warm_config c;
    char **env; /* copy of c.env */
    char *log_dir;
    bool *shown;
    struct spare **v;
    size_t n, cap;
    int64_t *last_gen; /* per local rank: the generation of its last assignment */
    bool suspended;
    unsigned long sets; /* sets parked so far (log file names) */
    struct warm_fault *faults;
    size_t n_faults, cap_faults;
    int64_t cur_gen, cur_done_ms; /* warm_assigned_ms */
    int cur_pending;
};

/* warm.c */
void warm_close_fd(struct warm *w, struct spare *s);
void warm_remove_spare(struct warm *w, struct spare *s);
void warm_stop_spare(struct warm *w, struct spare *s);
void warm_taken_done(struct warm *w, struct spare *s);
/* The spare's pid: the launcher confirms a start after launch_start returned (0 until then). */
pid_t spare_pid(const struct warm *w, struct spare *s);
void warm_add_fault(struct warm *w, struct spare *s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void warm_fault_spare(struct warm *w, struct spare *s);
int warm_flush_out(struct warm *w, struct spare *s);
void warm_count_assigned(struct warm *w, int64_t gen);

/* inplace.c */
/* A line from a worker after its ready line (an in-place worker's ack). 0, or -1 when the spare
 * faulted (it may be gone). */
int warm_inplace_line(struct warm *w, struct spare *s, const char *line, size_t len);
/* The held worker of `local_rank`, or NULL. */
struct spare *warm_inplace_held(const struct warm *w, int local_rank);
/* Send a held worker the assignment (warm_assign's in-place path): 0, or -ESTALE / -EPIPE /
 * -errno with err (the worker is stopped). */
int warm_inplace_reassign(struct warm *w, struct spare *s, const struct warm_take *t,
                          struct ea_error *err);
/* Deadlines of re-assigned workers' acks. */
void warm_inplace_tick(struct warm *w, int64_t now);

#endif
