// SPDX-License-Identifier: Apache-2.0
/* status: read a run from the store and print it; --watch follows the store's watch. */
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

#include "agent.h"
#include "config.h"
#include "ea_escape.h"
#include "ea_time.h"
#include "kv.h"
#include "status_node.h"
#include "straggler.h"

/* --agent: how long the node's agent has to answer /status. */
#define NODE_TIMEOUT_MS 2000
/* A one-shot status that catches a commit half-way waits this long for its `state`. */
#define COMMIT_WAIT_MS 5000
#define COMMIT_POLL_MS 20

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

/* ---- reading the store ----------------------------------------------------------------- */

struct status_cmd {
    const struct cfg *cfg;
    struct kv *kv;
    char prefix[512];
    struct kv_entry *keys; /* mirror of the run's keys (order irrelevant) */
    size_t n_keys, cap_keys;
    int64_t watch_id;
    char *last; /* the last view printed, to print only changes */
    bool tty;
};

/* A store error as an exit code, with one line on stderr. */
static int fail(int code, const struct ea_error *err, const char *what)
{
    ea_fprintf(stderr, "elastic-agent status: %s: %s\n", what,
               err->msg[0] ? err->msg : kv_strerror(code));
    if (code == KV_EINVAL || code == KV_EAUTH)
        return AGENT_EXIT_USAGE;
    if (code == KV_ECORRUPT || code == -EBADMSG)
        return AGENT_EXIT_RDZV;
    return AGENT_EXIT_STORE;
}

static void mirror_clear(struct status_cmd *sc)
{
    for (size_t i = 0; i < sc->n_keys; i++)
        kv_entry_clear(&sc->keys[i]);
    sc->n_keys = 0;
}

/* Insert or replace `e` (its strings are taken over), or delete its key. */
static int mirror_apply(struct status_cmd *sc, struct kv_entry *e, bool del)
{
    size_t i = 0;
    while (i < sc->n_keys && strcmp(sc->keys[i].key, e->key) != 0)
        i++;
    if (del) {
        if (i < sc->n_keys) {
            kv_entry_clear(&sc->keys[i]);
            sc->keys[i] = sc->keys[--sc->n_keys];
        }
        return 0;
    }
    if (i == sc->n_keys) {
        if (sc->n_keys == sc->cap_keys) {
            size_t cap = sc->cap_keys ? sc->cap_keys * 2 : 32;
            struct kv_entry *k = realloc(sc->keys, cap * sizeof(*k));
            if (!k)
                return -ENOMEM;
            sc->keys = k;
            sc->cap_keys = cap;
        }
        sc->n_keys++;
    } else {
        kv_entry_clear(&sc->keys[i]);
    }
    sc->keys[i] = *e;
    memset(e, 0, sizeof(*e));
    return 0;
}

/* List the run into the mirror; with `watch`, (re)start the watch just after the listing. */
static int resync(struct status_cmd *sc, bool watch, struct ea_error *err)
{
    if (sc->watch_id) {
        kv_watch_cancel(sc->kv, sc->watch_id);
        sc->watch_id = 0;
    }
    struct kv_list l = {0};
    int r = kv_list(sc->kv, sc->prefix, &l, err);
    if (r < 0)
        return r;
    mirror_clear(sc);
    for (size_t i = 0; i < l.n && r == 0; i++)
        r = mirror_apply(sc, &l.entries[i], false);
    int64_t rev = l.revision;
    kv_list_clear(&l);
    if (r < 0)
        return ea_errorf(err, r, "out of memory");
    return watch ? kv_watch(sc->kv, sc->prefix, rev + 1, &sc->watch_id, err) : 0;
}

/* Print the mirrored run when it differs from the last print. -EPIPE when stdout is gone. */
static int show(struct status_cmd *sc, struct ea_error *err)
{
    struct rdzv_run_view v;
    int r = rdzv_run_view_decode(sc->prefix, sc->keys, sc->n_keys, &v, err);
    /* a commit caught half-way (chunks written, `state` not yet): --watch shows the next view,
     * which its `state` event brings; a one-shot read lists again, every COMMIT_POLL_MS for up to
     * COMMIT_WAIT_MS (the commit record follows its chunks in the coordinator's next request, but
     * a loaded coordinator can take a while: a count of quick retries ran out on a busy machine) */
    for (int64_t until = ea_now_ms() + COMMIT_WAIT_MS;
         r == -EAGAIN && !sc->cfg->watch && ea_now_ms() < until;) {
        ea_error_clear(err);
        poll(NULL, 0, COMMIT_POLL_MS);
        if ((r = resync(sc, false, err)) == 0)
            r = rdzv_run_view_decode(sc->prefix, sc->keys, sc->n_keys, &v, err);
    }
    if (r == -EAGAIN && sc->cfg->watch) {
        ea_error_clear(err);
        return 0;
    }
    if (r < 0)
        return r;
    struct hview hv = {0}; /* held-out nodes and the last recovery (observe/health_view.h) */
    if (hview_decode(sc->prefix, sc->keys, sc->n_keys, &hv) < 0) {
        rdzv_run_view_clear(&v);
        return ea_errorf(err, -ENOMEM, "out of memory");
    }
    char *text = NULL;
    /* --agent: one node's own view, which the store does not hold (observe/status_node.h); an
     * agent that does not answer is shown as such, not an error: it may be the one that died */
    json_t *node = NULL;
    struct ea_error nerr = {0};
    if (sc->cfg->agent_http &&
        status_node_fetch(sc->cfg->agent_http, NODE_TIMEOUT_MS, &node, &nerr) < 0)
        node = json_pack("{s:s}", "error", nerr.msg);
    if (sc->cfg->json) {
        json_t *j = status_to_json(sc->cfg->run_id, &v);
        if (j)
            hview_add_json(j, &hv);
        if (j && node)
            json_object_set(j, "agent", node);
        text = j ? json_dumps(j, sc->cfg->watch ? JSON_COMPACT : JSON_INDENT(2)) : NULL;
        json_decref(j);
    } else {
        size_t len = 0;
        FILE *m = open_memstream(&text, &len);
        if (m) {
            status_print_text(m, sc->cfg->run_id, &v);
            hview_print_text(m, &hv);
            if (node && json_object_get(node, "error"))
                ea_fprintf(m, "\nthis node: its agent at %s: %s\n", sc->cfg->agent_http,
                           json_string_value(json_object_get(node, "error")));
            else if (node)
                status_node_print_text(m, sc->cfg->agent_http, node);
            fclose(m);
        }
    }
    rdzv_run_view_clear(&v);
    hview_clear(&hv);
    json_decref(node);
    if (!text)
        return ea_errorf(err, -ENOMEM, "out of memory");
    if (sc->last && strcmp(sc->last, text) == 0) {
        free(text);
        return 0;
    }
    if (sc->cfg->watch && sc->tty)
        fputs("\033[H\033[2J", stdout); /* redraw in place */
    else if (sc->last && !sc->cfg->json)
        fputc('\n', stdout);
    fputs(text, stdout);
    if (sc->cfg->json)
        fputc('\n', stdout);
    free(sc->last);
    sc->last = text;
    if (fflush(stdout) == EOF)
        return ea_errorf(err, -EPIPE, "cannot write to stdout: %s", strerror(errno));
    return 0;
}

/* Apply what the watch delivered; a broken watch is repaired by listing again. */
static int on_events(struct status_cmd *sc, struct ea_error *err)
{
    struct kv_event *ev = NULL;
    size_t n = 0;
    int r = kv_read_events(sc->kv, &ev, &n, err);
    if (r < 0)
        return r;
    bool broken = false;
    for (size_t i = 0; i < n && r == 0; i++) {
        if (ev[i].watch_id != sc->watch_id)
            continue;
        if (ev[i].type == KV_EVENT_ERROR)
            broken = true;
        else
            r = mirror_apply(sc, &ev[i].entry, ev[i].type == KV_EVENT_DELETE);
    }
    kv_events_free(ev, n);
    if (r < 0)
        return ea_errorf(err, r, "out of memory");
    return broken ? resync(sc, true, err) : 0;
}

/* Follow the store until SIGINT/SIGTERM (0), or a store error (its code). */
static int watch_loop(struct status_cmd *sc, int sigfd, struct ea_error *err)
{
    struct pollfd fds[2] = {{.fd = sigfd, .events = POLLIN},
                            {.fd = kv_event_fd(sc->kv), .events = POLLIN}};
    for (;;) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return ea_errorf(err, -errno, "poll: %s", strerror(errno));
        }
        if (fds[0].revents & POLLIN)
            return 0;
        if (!(fds[1].revents & POLLIN))
            continue;
        int r = on_events(sc, err);
        if (r == 0)
            r = show(sc, err);
        if (r < 0)
            return r;
    }
}

/*
 * --watch on a file store that does not exist yet: wait (inotify on the nearest existing
 * ancestor) until `path` exists, without creating anything. 0 when it does, 1 on SIGINT/SIGTERM,
 * or a negative errno.
 */
static int wait_for_dir(const char *path, int sigfd, struct ea_error *err)
{
    int ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (ifd < 0)
        return ea_errorf(err, -errno, "inotify: %s", strerror(errno));
    int r = 0;
    struct stat st;
    while (stat(path, &st) < 0) {
        char anc[PATH_MAX];
        snprintf(anc, sizeof(anc), "%s", path);
        int wd = -1;
        for (;;) { /* cut components until an existing directory takes the watch */
            char *slash = strrchr(anc, '/');
            if (slash == anc)
                slash[1] = '\0';
            else if (slash)
                *slash = '\0';
            else
                snprintf(anc, sizeof(anc), ".");
            if ((wd = inotify_add_watch(ifd, anc, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR)) >= 0 ||
                (errno != ENOENT && errno != ENOTDIR) || !slash || slash == anc)
                break;
        }
        if (wd < 0) {
            r = ea_errorf(err, -errno, "cannot watch '%s' for '%s' to appear: %s", anc, path,
                          strerror(errno));
            break;
        }
        /* something may have been created between the stat and the watch: look again first */
        char next[PATH_MAX];
        size_t alen = strlen(anc);
        size_t nlen = strcspn(path + alen + (path[alen] == '/'), "/");
        snprintf(next, sizeof(next), "%.*s", (int)(alen + (path[alen] == '/') + nlen), path);
        if (stat(next, &st) < 0) {
            struct pollfd fds[2] = {{.fd = sigfd, .events = POLLIN}, {.fd = ifd, .events = POLLIN}};
            while (poll(fds, 2, -1) < 0 && errno == EINTR)
                ;
            if (fds[0].revents & POLLIN) {
                r = 1;
                break;
            }
            char buf[4096];
            while (read(ifd, buf, sizeof(buf)) > 0)
                ;
        }
        inotify_rm_watch(ifd, wd);
    }
    close(ifd);
    return r;
}

static int run(struct status_cmd *sc, int sigfd)
{
    const struct cfg *c = sc->cfg;
    struct ea_error err = {0};
    struct stat st;
    bool announced = false;
    /* a file store that does not exist holds no run; opening it would create it */
    if (strcmp(c->backend, "file") == 0 && stat(c->state_dir, &st) < 0) {
        if (!c->watch) {
            ea_fprintf(stderr,
                       "elastic-agent status: no run '%s': the file store '%s' does not exist\n",
                       c->run_id, c->state_dir);
            return AGENT_EXIT_RDZV;
        }
        ea_fprintf(stderr,
                   "elastic-agent status: waiting for run '%s' to appear (the file store "
                   "'%s' does not exist yet)\n",
                   c->run_id, c->state_dir);
        announced = true;
        int r = wait_for_dir(c->state_dir, sigfd, &err);
        if (r != 0)
            return r > 0 ? AGENT_EXIT_OK : fail(r, &err, "cannot wait for the store");
    }
    struct kv_config kc = cfg_kv_config(c, 0);
    int r = kv_open(&kc, &sc->kv, &err);
    if (r < 0)
        return fail(r, &err, "cannot open the store");
    snprintf(sc->prefix, sizeof(sc->prefix), "%s%s/", c->prefix, c->run_id);
    if ((r = resync(sc, c->watch, &err)) < 0)
        return fail(r, &err, "cannot read the run");
    if (sc->n_keys == 0 && !c->watch) {
        ea_fprintf(stderr,
                   "elastic-agent status: no run '%s' in the %s store (no keys under '%s')\n",
                   c->run_id, c->backend, sc->prefix);
        return AGENT_EXIT_RDZV;
    }
    if (sc->n_keys == 0 && !announced)
        ea_fprintf(stderr,
                   "elastic-agent status: waiting for run '%s' to appear in the %s store "
                   "(no keys under '%s' yet)\n",
                   c->run_id, c->backend, sc->prefix);
    /* --watch on a run that does not exist yet: the first view comes with its first key */
    if (sc->n_keys > 0)
        r = show(sc, &err);
    if (r == 0 && c->watch)
        r = watch_loop(sc, sigfd, &err);
    if (r == -EPIPE)
        return AGENT_EXIT_OK; /* the reader went away (| head): nothing more to say */
    return r < 0 ? fail(r, &err, "cannot show the run") : AGENT_EXIT_OK;
}

int status_main(int argc, char **argv, char **envp)
{
    struct cfg cfg;
    struct ea_error err = {0};
    if (cfg_parse_cmd(CFG_STATUS, argc, argv, envp, &cfg, &err) < 0) {
        ea_fprintf(stderr, "elastic-agent status: %s\n", err.msg);
        return AGENT_EXIT_USAGE;
    }
    if (cfg.help) {
        cfg_print_help_cmd(CFG_STATUS, stdout);
        return AGENT_EXIT_OK;
    }
    if (cfg.agent_http && status_node_check_addr(cfg.agent_http, &err) < 0) {
        ea_fprintf(stderr, "elastic-agent status: %s\n", err.msg);
        return AGENT_EXIT_USAGE;
    }
    /* blocked before the backend starts any thread, so SIGINT ends --watch through the fd */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sigfd < 0) {
        ea_fprintf(stderr, "elastic-agent status: signalfd: %s\n", strerror(errno));
        return AGENT_EXIT_STORE;
    }
    struct status_cmd sc = {.cfg = &cfg, .tty = isatty(STDOUT_FILENO) == 1};
    int code = run(&sc, sigfd);
    if (sc.watch_id)
        kv_watch_cancel(sc.kv, sc.watch_id);
    mirror_clear(&sc);
    free(sc.keys);
    free(sc.last);
    kv_close(sc.kv);
    close(sigfd);
    explicit_bzero(cfg.password_buf, sizeof(cfg.password_buf));
    return code;
}
