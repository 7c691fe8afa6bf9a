// SPDX-License-Identifier: Apache-2.0
/* status: the run's view as a table or as JSON (status.h); reading the store is status_cmd.c. */
#include "status.h"
#include "health_view.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <time.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "ea_escape.h"
#include "ea_time.h"
#include "kv.h"
#include "status_node.h"
#include "straggler.h"

/* ---- what the view says ---------------------------------------------------------------- */

/* A running round whose master address is not published yet: group rank 0 publishes it once its
 * own workers of the previous round have stopped, and every member starts only after that. */
static bool between_rounds(const struct rdzv_run_view *v)
{
    return v->have_state && v->state.status == RDZV_RUNNING && !v->master[0];
}

/* The stored status, except "starting" (round 1) and "restarting" (a later round) while the
 * round's workers cannot have started yet (between_rounds). */
static const char *status_word(const struct rdzv_run_view *v)
{
    if (!v->have_state)
        return "forming";
    if (between_rounds(v))
        return v->state.round > 1 ? "restarting" : "starting";
    return rdzv_status_name(v->state.status);
}

/* Live nodes waiting for a round: all of them while no round runs, the spares while one does,
 * nobody once the run has ended. */
static bool is_waiting(const struct rdzv_run_view *v, const struct rdzv_node *n)
{
    if (!v->have_state || v->state.status == RDZV_WAITING)
        return true;
    return v->state.status == RDZV_RUNNING && rdzv_state_find(&v->state, n->node_id) < 0;
}

static size_t count_waiting(const struct rdzv_run_view *v)
{
    size_t k = 0;
    for (size_t i = 0; i < v->n_nodes; i++)
        k += is_waiting(v, &v->nodes[i]);
    return k;
}

/* The failure worth showing: the one that failed the run, else the most recent one. */
static const struct rdzv_view_failure *shown_failure(const struct rdzv_run_view *v)
{
    if (v->have_state && v->state.failure_round > 0) {
        const struct rdzv_view_failure *f = rdzv_run_view_failure(v, v->state.failure_round);
        if (f)
            return f;
    }
    return v->n_failures ? &v->failures[v->n_failures - 1] : NULL;
}

/* True when `vf` is the failure the state names as the one that failed the run. */
static bool failure_ended_run(const struct rdzv_run_view *v, const struct rdzv_view_failure *vf)
{
    return v->have_state && v->state.status == RDZV_FAILED && v->state.failure_round > 0 &&
           v->state.failure_round == vf->round;
}

static const char *member_state(const struct rdzv_run_view *v, const struct rdzv_member *m)
{
    if (rdzv_run_view_is_done(v, m->node_id))
        return "done";
    if (!rdzv_run_view_node(v, m->node_id))
        return "gone";
    if (between_rounds(v))
        return "starting";
    return v->state.status == RDZV_RUNNING ? "running" : "live";
}

static void utc_time(int64_t ms, char *buf, size_t size)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (ms <= 0 || !gmtime_r(&t, &tm)) {
        snprintf(buf, size, "?");
        return;
    }
    snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

/* ---- the table ------------------------------------------------------------------------- */

static int width(const char *s, int w)
{
    int n = (int)strlen(s);
    return n > w ? n : w;
}

/* Since when a member is in the run, as far as the store knows: the create_revision of its live
 * `nodes/<id>` record (the store revision at which this incarnation of its agent joined). The
 * store keeps no wall-clock time for it, and a gone member's record went with its lease: 0. */
static int64_t member_since(const struct rdzv_run_view *v, const struct rdzv_member *m)
{
    const struct rdzv_node *n = rdzv_run_view_node(v, m->node_id);
    return n ? n->create_revision : 0;
}

/* The wall-clock time the member's agent joined, from its node record (0: unknown). */
static int64_t member_joined_ms(const struct rdzv_run_view *v, const struct rdzv_member *m)
{
    const struct rdzv_node *n = rdzv_run_view_node(v, m->node_id);
    return n ? n->joined_ms : 0;
}

/* "MM-DD HH:MM:SSZ" when the record says when its agent joined (UTC), else "rev N" (a record of
 * an agent that did not say), "-" for a gone member. */
static void since_text(const struct rdzv_run_view *v, const struct rdzv_member *m, char *buf,
                       size_t size)
{
    int64_t rev = member_since(v, m), ms = member_joined_ms(v, m);
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (ms > 0 && gmtime_r(&t, &tm) && strftime(buf, size, "%m-%d %H:%M:%SZ", &tm) > 0)
        return;
    if (rev > 0)
        snprintf(buf, size, "rev %" PRId64, rev);
    else
        snprintf(buf, size, "-");
}

/* Each member's compute time (compute/<node>, 0 none) and straggler score (straggler.h: over the
 * other members' median) into t[] and sc[] (s->n_members each, or NULL: none published). */
static bool member_scores(const struct rdzv_run_view *v, double **ret_t, double **ret_sc)
{
    size_t n = v->state.n_members;
    double *t = NULL, *sc = NULL;
    if (v->n_compute && n && (t = calloc(n, sizeof(*t))) && (sc = calloc(n, sizeof(*sc)))) {
        for (size_t i = 0; i < n; i++)
            t[i] = rdzv_run_view_compute(v, v->state.members[i].node_id);
        sg_scores(t, n, sc);
    }
    *ret_t = sc ? t : NULL;
    *ret_sc = sc;
    if (!sc)
        free(t);
    return sc != NULL;
}

static void print_members(FILE *out, const struct rdzv_run_view *v)
{
    const struct rdzv_state *s = &v->state;
    int wn = 4, wh = 4, wr = 5, ws = 5;
    char ranks[64], since[32];
    double *t, *sc;
    bool timed = member_scores(v, &t, &sc);
    for (size_t i = 0; i < s->n_members; i++) {
        const struct rdzv_member *m = &s->members[i];
        wn = width(m->node_id, wn);
        wh = width(m->host, wh);
        snprintf(ranks, sizeof(ranks), "%d-%d", m->rank_base, m->rank_base + m->nproc - 1);
        wr = width(ranks, wr);
        since_text(v, m, since, sizeof(since));
        ws = width(since, ws);
    }
    int wst = timed ? 8 : 0; /* STATE is the last column unless COMPUTE follows */
    ea_fprintf(out, "\n  %-5s  %-*s  %-*s  %-*s  %-*s  %-*s%s\n", "GROUP", wn, "NODE", wh, "HOST",
               wr, "RANKS", ws, "SINCE", wst, "STATE", timed ? "  COMPUTE" : "");
    for (size_t i = 0; i < s->n_members; i++) {
        const struct rdzv_member *m = &s->members[i];
        snprintf(ranks, sizeof(ranks), "%d-%d", m->rank_base, m->rank_base + m->nproc - 1);
        since_text(v, m, since, sizeof(since));
        char compute[48] = "";
        if (timed) /* straggler detection: its median, its score */
            snprintf(compute, sizeof(compute), t[i] > 0 ? "  %.3f s x%.2f" : "  -", t[i], sc[i]);
        ea_fprintf(out, "  %-5d  %-*s  %-*s  %-*s  %-*s  %-*s%s\n", m->group_rank, wn, m->node_id,
                   wh, m->host, wr, ranks, ws, since, wst, member_state(v, m), compute);
    }
    free(t);
    free(sc);
}

static void print_failure(FILE *out, const struct rdzv_run_view *v)
{
    const struct rdzv_view_failure *vf = shown_failure(v);
    if (!vf)
        return;
    const struct rdzv_failure *f = &vf->f;
    char when[40], how[64];
    utc_time(f->time_ms, when, sizeof(when));
    if (f->signal > 0)
        snprintf(how, sizeof(how), "signal %d (SIG%s)", f->signal,
                 sigabbrev_np(f->signal) ? sigabbrev_np(f->signal) : "?");
    else
        snprintf(how, sizeof(how), "exit code %d", f->exit_code);
    /* failures/<r> holds the first failure *of round r*; the run's first is the lowest r */
    int64_t first_round = v->failures[0].round;
    ea_fprintf(out, "\n%s (round %" PRId64 ", %zu recorded",
               failure_ended_run(v, vf) ? "failure that ended the run" : "last failure", vf->round,
               v->n_failures);
    if (first_round != vf->round)
        ea_fprintf(out, ", the first in round %" PRId64, first_round);
    fputs("):\n", out);
    ea_fprintf(out,
               "  rank %d (local rank %d) on node '%s', host '%s', pid %" PRId64 ": %s at %s\n",
               f->rank, f->local_rank, f->node_id, f->host, f->pid, how, when);
    const char *p = f->message;
    for (int line = 0; *p && line < 12; line++) {
        size_t len = strcspn(p, "\n");
        ea_fprintf(out, "    %.*s\n", (int)len, p);
        p += len + (p[len] == '\n');
    }
    if (*p)
        ea_fprintf(out, "    ...\n");
}

/* Where the run was at its last failure (its record's progress, issue 40), or NULL when that
 * record says nothing about it (no rank beat a step, or --max-restarts-without-progress 0). */
static const struct rdzv_progress *last_progress(const struct rdzv_run_view *v, int64_t *ret_round)
{
    if (!v->have_state || v->state.last_failure <= 0)
        return NULL;
    const struct rdzv_view_failure *vf = rdzv_run_view_failure(v, v->state.last_failure);
    if (!vf || vf->f.progress.repeat <= 0)
        return NULL;
    *ret_round = vf->round;
    return &vf->f.progress;
}

static void print_progress(FILE *out, const struct rdzv_run_view *v)
{
    int64_t round = 0;
    const struct rdzv_progress *p = last_progress(v, &round);
    if (p)
        fprintf(out,
                "progress      best step %" PRId64 " at the failure of round %" PRId64 "; %d "
                "restart(s) in a row without progress, the same failure %d time(s) in a row%s\n",
                p->best, round, p->no_progress, p->repeat,
                p->stop ? " (the run ended: no progress)" : "");
}

/*
 * restart_count counts the worker failures charged to the budget (rendezvous/plan.c): the one
 * that exhausts it is charged too, so a failed run holds max_restarts + 1 (or more) and "N of M"
 * would overstate the restarts. A charge above the budget while the run still runs is
 * provisional: it fails the run once final, unless a lost node refunds it.
 */
static void print_restarts(FILE *out, const struct rdzv_state *s)
{
    if (s->status == RDZV_FAILING)
        fprintf(out,
                "restarts      %d of %d (job-wide; a worker failed with the budget spent: the "
                "run fails unless a lost node explains the failure)\n",
                s->restart_count, s->max_restarts);
    else if (s->restart_count <= s->max_restarts)
        fprintf(out, "restarts      %d of %d (job-wide)\n", s->restart_count, s->max_restarts);
    else if (s->status == RDZV_FAILED)
        fprintf(out,
                "restarts      budget of %d exhausted: %d worker failure(s) charged (job-wide)\n",
                s->max_restarts, s->restart_count);
    else if (s->charge_round > 0 && s->charge_round == s->round)
        fprintf(out,
                "restarts      %d of %d (job-wide; the last charge is provisional: the run fails "
                "unless a lost node refunds it)\n",
                s->restart_count, s->max_restarts);
    else
        fprintf(out, "restarts      %d of %d, over budget (job-wide)\n", s->restart_count,
                s->max_restarts);
}

void status_print_text(FILE *out, const char *run_id, const struct rdzv_run_view *v)
{
    const struct rdzv_state *s = &v->state;
    size_t waiting = count_waiting(v);
    ea_fprintf(out, "run           %s\n", run_id);
    ea_fprintf(out, "status        %s\n", status_word(v));
    if (!v->have_state) {
        ea_fprintf(out, "round         none yet\n");
    } else {
        ea_fprintf(out, "round         %" PRId64 " (generation %" PRId64 ")\n", s->round,
                   v->generation);
        ea_fprintf(out, "world size    %d on %zu node(s) (min %d, max %d)\n", s->world_size,
                   s->n_members, s->min_nodes, s->max_nodes);
        print_restarts(out, s);
        print_progress(out, v);
        ea_fprintf(out, "scale events  %d\n", s->scale_events);
        if (v->master[0])
            ea_fprintf(out, "master        %s\n", v->master);
    }
    ea_fprintf(out, "live nodes    %zu", v->n_nodes);
    if (waiting)
        ea_fprintf(out, ", %zu waiting", waiting);
    if (v->have_state && s->status == RDZV_WAITING)
        ea_fprintf(out, " (a round needs at least %d)", s->min_nodes);
    fputc('\n', out);
    if (v->have_state && s->n_members)
        print_members(out, v);
    size_t spares = rdzv_run_view_spares(v);
    if (spares) {
        ea_fprintf(out, "\n%s:\n",
                   v->have_state ? "spares (live, not in the round)" : "joined (no round yet)");
        for (size_t i = 0; i < v->n_nodes; i++) {
            const struct rdzv_node *n = &v->nodes[i];
            if (!v->have_state || rdzv_state_find(s, n->node_id) < 0)
                ea_fprintf(out, "  %s (host '%s', %d slot(s))\n", n->node_id, n->host, n->nproc);
        }
    }
    print_failure(out, v);
    if (v->n_ignored)
        ea_fprintf(out, "\n(%zu record(s) in the store could not be read and were skipped)\n",
                   v->n_ignored);
}

/* ---- JSON ------------------------------------------------------------------------------ */

/* json_object_set_new for a value that may be NULL (allocation failure): remembered in *ok. */
static void set(json_t *o, const char *k, json_t *val, bool *ok)
{
    if (!val || json_object_set_new(o, k, val) < 0)
        *ok = false;
}

static json_t *failure_json(const struct rdzv_run_view *v, const struct rdzv_view_failure *vf)
{
    const struct rdzv_failure *f = &vf->f;
    char when[40];
    utc_time(f->time_ms, when, sizeof(when));
    return json_pack("{s:I, s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:s, s:s, s:b}", "round",
                     (json_int_t)vf->round, "node", f->node_id, "host", f->host, "rank", f->rank,
                     "local_rank", f->local_rank, "exit_code", f->exit_code, "signal", f->signal,
                     "pid", (json_int_t)f->pid, "time", when, "message", f->message, "ended_run",
                     failure_ended_run(v, vf));
}

static json_t *members_json(const struct rdzv_run_view *v, bool *ok)
{
    double *t, *sc;
    bool timed = member_scores(v, &t, &sc);
    json_t *a = json_array();
    for (size_t i = 0; a && v->have_state && i < v->state.n_members; i++) {
        const struct rdzv_member *m = &v->state.members[i];
        int64_t since = member_since(v, m), joined = member_joined_ms(v, m);
        /* the assignment carries no address (every node reads it): a live member's record has */
        const struct rdzv_node *rec = rdzv_run_view_node(v, m->node_id);
        json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:b, s:b, s:s, s:o, s:o}", "node",
                              m->node_id, "host", m->host, "addr", rec ? rec->addr : "", "group_rank",
                              m->group_rank, "nproc", m->nproc, "rank_first", m->rank_base,
                              "rank_last", m->rank_base + m->nproc - 1, "live",
                              rdzv_run_view_node(v, m->node_id) != NULL, "done",
                              rdzv_run_view_is_done(v, m->node_id), "state", member_state(v, m),
                              "since_revision", since > 0 ? json_integer(since) : json_null(),
                              "since_ms", joined > 0 ? json_integer(joined) : json_null());
        if (o && timed && t[i] > 0 &&
            (json_object_set_new(o, "compute_s", json_real(t[i])) < 0 ||
             json_object_set_new(o, "straggler_score", json_real(sc[i])) < 0))
            *ok = false;
        if (!o || json_array_append_new(a, o) < 0)
            *ok = false;
    }
    free(t);
    free(sc);
    return a;
}

static json_t *spares_json(const struct rdzv_run_view *v, bool *ok)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < v->n_nodes; i++) {
        const struct rdzv_node *n = &v->nodes[i];
        if (v->have_state && rdzv_state_find(&v->state, n->node_id) >= 0)
            continue;
        json_t *o = json_pack("{s:s, s:s, s:s, s:i}", "node", n->node_id, "host", n->host, "addr",
                              n->addr, "nproc", n->nproc);
        if (!o || json_array_append_new(a, o) < 0)
            *ok = false;
    }
    return a;
}

json_t *status_to_json(const char *run_id, const struct rdzv_run_view *v)
{
    const struct rdzv_state *s = &v->state;
    bool ok = true;
    json_t *o = json_object();
    if (!o)
        return NULL;
    const struct rdzv_view_failure *f = shown_failure(v);
    set(o, "run_id", json_string(run_id), &ok);
    set(o, "status", json_string(status_word(v)), &ok);
    set(o, "round", json_integer(s->round), &ok);
    set(o, "generation", json_integer(v->generation), &ok);
    set(o, "world_size", json_integer(s->world_size), &ok);
    set(o, "min", v->have_state ? json_integer(s->min_nodes) : json_null(), &ok);
    set(o, "max", v->have_state ? json_integer(s->max_nodes) : json_null(), &ok);
    set(o, "restart_count", json_integer(s->restart_count), &ok);
    set(o, "max_restarts", v->have_state ? json_integer(s->max_restarts) : json_null(), &ok);
    set(o, "scale_events", json_integer(s->scale_events), &ok);
    set(o, "master", v->master[0] ? json_string(v->master) : json_null(), &ok);
    set(o, "live_nodes", json_integer((json_int_t)v->n_nodes), &ok);
    set(o, "nodes_waiting", json_integer((json_int_t)count_waiting(v)), &ok);
    set(o, "members", members_json(v, &ok), &ok);
    set(o, "spares", spares_json(v, &ok), &ok);
    set(o, "failure", f ? failure_json(v, f) : json_null(), &ok);
    set(o, "failures_recorded", json_integer((json_int_t)v->n_failures), &ok);
    int64_t pround = 0;
    const struct rdzv_progress *p = last_progress(v, &pround);
    if (p) /* only when the last failure's record knows it (issue 40) */
        set(o, "progress",
            json_pack("{s:I, s:I, s:I, s:i, s:i, s:b}", "failure_round", (json_int_t)pround,
                      "step", (json_int_t)p->step, "best_step", (json_int_t)p->best,
                      "restarts_without_progress", p->no_progress, "repeat", p->repeat, "stopped",
                      p->stop),
            &ok);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}
