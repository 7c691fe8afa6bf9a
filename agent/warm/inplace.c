// SPDX-License-Identifier: Apache-2.0
/*
 * inplace: --in-place (docs/warm.md, "In-place re-assignment"). A warm worker whose ready line
 * said "inplace":1 keeps its socket once it runs. At a membership change the group lets go of it
 * (warm_hold): it runs on, held, until the next round's warm_assign sends it that round's
 * assignment on the same socket; it must answer {"ack":G} within inplace_timeout_ms. Late, a
 * malformed or foreign ack, or a closed socket: a fault of an assigned worker (the caller fails
 * it; it is restarted the normal way). The generation check is warm_assign's: forward only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ea_time.h"
#include "warm_internal.h"

int warm_hold(struct warm *w, struct launch_proc *proc)
{
    for (size_t i = 0; w && i < w->n; i++) {
        struct spare *s = w->v[i];
        if (s->proc != proc)
            continue;
        /* only a settled worker: its socket open, its last assignment acknowledged */
        if (s->state != SP_RUNNING || s->fd < 0 || s->out)
            return 0;
        s->state = SP_HELD;
        return 1;
    }
    return 0;
}

void warm_forget(struct warm *w, struct launch_proc *proc)
{
    for (size_t i = 0; w && i < w->n; i++) {
        struct spare *s = w->v[i];
        if (s->proc == proc &&
            (s->state == SP_TAKEN || s->state == SP_RUNNING || s->state == SP_REASSIGNED)) {
            warm_taken_done(w, s);
            warm_remove_spare(w, s); /* its socket closed: no ack is awaited from it any more */
            return;
        }
    }
}

int warm_held(const struct warm *w)
{
    int n = 0;
    for (size_t i = 0; w && i < w->n; i++)
        n += w->v[i]->state == SP_HELD;
    return n;
}

struct spare *warm_inplace_held(const struct warm *w, int local_rank)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->v[i]->state == SP_HELD && w->v[i]->local_rank == local_rank)
            return w->v[i];
    return NULL;
}

int warm_inplace_reassign(struct warm *w, struct spare *s, const struct warm_take *t,
                          struct ea_error *err)
{
    int lr = s->local_rank;
    /* the generation check: an assignment only moves a worker forward (never to the generation
     * it runs, nor to one older than the last its local rank got) */
    if (t->generation <= s->gen || t->generation <= w->last_gen[lr]) {
        int64_t floor = s->gen > w->last_gen[lr] ? s->gen : w->last_gen[lr];
        warm_stop_spare(w, s);
        return ea_errorf(err, -ESTALE,
                         "generation %lld is not newer than %lld: the in-place worker (pid %ld) "
                         "is not re-assigned, it is stopped",
                         (long long)t->generation, (long long)floor, (long)spare_pid(w, s));
    }
    char *line = NULL;
    size_t len = 0;
    int r = warm_format_assignment(t->generation, t->round, t->env, &line, &len);
    if (r < 0) {
        warm_stop_spare(w, s);
        return ea_errorf(err, r, "cannot encode the assignment: %s", strerror(-r));
    }
    if (s->fd >= 0) { /* the line is the spare's to send now */
        s->out = line;
        s->out_len = len;
        s->out_off = 0;
        line = NULL;
    }
    if (s->fd < 0 || warm_flush_out(w, s) < 0) {
        free(line);
        warm_stop_spare(w, s);
        return ea_errorf(err, -EPIPE,
                         "the in-place worker (pid %ld) closed ELASTIC_ASSIGN_FD; "
                         "it is stopped",
                         (long)spare_pid(w, s));
    }
    s->state = SP_REASSIGNED;
    s->acked = false;
    s->gen = t->generation;
    s->deadline_ms = ea_now_ms() + w->c.inplace_timeout_ms;
    w->last_gen[lr] = t->generation;
    warm_count_assigned(w, t->generation);
    if (t->label)
        launch_relabel(w->c.launcher, s->proc, t->label);
    return 0;
}

int warm_inplace_line(struct warm *w, struct spare *s, const char *line, size_t len)
{
    struct ea_error perr = {0};
    int64_t gen = 0;
    int n = (int)(len < 120 ? len : 120);
    if (warm_parse_ack(line, len, &gen, &perr) < 0) {
        warm_add_fault(w, s,
                       "sent a malformed line on ELASTIC_ASSIGN_FD: %s: '%.*s' (expected "
                       "{\"ack\":G} after a re-assignment)",
                       perr.msg, n, line);
        warm_fault_spare(w, s);
        return -1;
    }
    /* an ack names the generation the worker was sent last: another one is a worker acting on
     * an assignment it does not hold (or an old one) */
    bool assigned = s->state == SP_TAKEN || s->state == SP_RUNNING || s->state == SP_REASSIGNED ||
                    s->state == SP_HELD;
    if (!assigned || gen != s->gen) {
        warm_add_fault(w, s,
                       "acknowledged generation %lld on ELASTIC_ASSIGN_FD, but its last "
                       "assignment is generation %lld",
                       (long long)gen, (long long)s->gen);
        warm_fault_spare(w, s);
        return -1;
    }
    if (s->state == SP_REASSIGNED)
        s->acked = true; /* maybe_done settles it once the whole line went out */
    return 0;            /* an ack of the first assignment, or again: nothing to do */
}

void warm_inplace_tick(struct warm *w, int64_t now)
{
    for (size_t i = 0; i < w->n; i++) {
        struct spare *s = w->v[i];
        if (s->state != SP_REASSIGNED || s->acked || now < s->deadline_ms)
            continue;
        warm_add_fault(w, s,
                       "did not acknowledge its re-assignment to generation %lld on "
                       "ELASTIC_ASSIGN_FD within --in-place-timeout %.1f s (it must call "
                       "elastic_agent.reassignment() at a safe point: docs/warm.md); it is "
                       "stopped and restarted the normal way",
                       (long long)s->gen, (double)w->c.inplace_timeout_ms / 1000.0);
        warm_fault_spare(w, s);
        i = (size_t)-1; /* the list changed */
    }
}
