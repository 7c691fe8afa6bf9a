// SPDX-License-Identifier: Apache-2.0
/* agent progress glue: progress-aware restarts (progress/progress.h) and straggler detection
 * (straggler/straggler.h) tied to the loop: the heartbeat files armed with each round (hang
 * detection on or off), the step a failure happened at carried in its record, the run's
 * no-progress count for /metrics and the events, the one message when the rule ends the run;
 * the ranks' compute times sampled from the same files, this node's median published at a
 * bounded rate (compute/<node>), and the coordinator's scoring; --straggler-action evict: the
 * coordinator's rounds/<r>/evict when a spare waits, and the named node's leave and cooldown
 * (the preflight gate holds it out). Kept out of agent.c. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "agent_internal.h"
#include "component.h"
#include "ea_time.h"
#include "evict.h"
#include "log.h"
#include "progress.h"
#include "straggler.h"

/* Straggler detection: samples are read every SG_READ_MS, this node's median put into the store
 * at most every SG_PUBLISH_MS (the coordinator scores the nodes as often). */
#define SG_READ_MS 1000
#define SG_PUBLISH_MS 5000

/* One put per node every SG_PUBLISH_MS, slower in a large run, so that the store takes at most
 * ~200 of them a second whatever the run's size (10,000 members: one every 50 s each). */
static int64_t publish_every_ms(int members)
{
    int64_t ms = (int64_t)members * 5;
    return ms > SG_PUBLISH_MS ? ms : SG_PUBLISH_MS;
}

/* The coordinator's verdict on one node. */
struct sg_node_track {
    char node[RDZV_ID_MAX];
    struct sg_track t;
    double score;
};

struct agent_progress {
    struct pg *pg;         /* the ranks' files; NULL when both features are off */
    bool straggler;        /* --straggler-threshold > 0 */
    struct sg_rank *ranks; /* per local rank: recent compute times */
    int n_ranks;
    int64_t publish_at;           /* next put of compute/<self> and, coordinating, the scoring */
    struct sg_node_track *tracks; /* coordinator: per member of the round */
    size_t n_tracks;
    int64_t tracks_round;
    int64_t evict_round; /* coordinator: the round whose evict key it wrote */
    bool evicting;       /* this node was evicted: its workers are stopping, then it leaves */
    char dir[PATH_MAX];  /* the round's heartbeat directory when hang detection is off */
};

static int agent_progress_open(struct agent *a, const char *launcher)
{
    /* the ranks' files are read on this machine: not for workers over ssh */
    if (strcmp(launcher, "ssh") == 0)
        return 0;
    bool straggler = a->cfg->straggler_threshold > 0;
    int limit = a->cfg->max_restarts_without_progress;
    if (limit <= 0 && !straggler)
        return 0;
    struct agent_progress *ap = calloc(1, sizeof(*ap));
    struct ea_error err = {0};
    if (!ap || pg_create(limit, straggler, straggler ? SG_READ_MS : 0, &ap->pg, &err) < 0) {
        free(ap);
        log_error("%s", err.msg[0] ? err.msg : "out of memory");
        return AGENT_EXIT_RDZV;
    }
    ap->straggler = straggler;
    a->progress = ap;
    return 0;
}

static void agent_progress_close(struct agent *a)
{
    struct agent_progress *ap = a->progress;
    if (!ap)
        return;
    pg_destroy(ap->pg);
    free(ap->ranks);
    free(ap->tracks);
    free(ap);
    a->progress = NULL;
}

static const char *agent_progress_arm(struct agent *a, const char *hb_dir, int n, int rank_base, char *buf,
                               size_t size)
{
    struct agent_progress *ap = a->progress;
    if (!ap)
        return hb_dir;
    const char *dir = hb_dir;
    if (!dir) { /* hang detection off: the files exist for the step alone */
        snprintf(buf, size, "%s/heartbeat", a->me.workdir);
        dir = buf;
    }
    struct ea_error err = {0};
    if (pg_arm(ap->pg, dir, hb_dir == NULL, n, rank_base, ea_now_ms(), &err) < 0) {
        log_warn("%s: the run's progress is unknown for this round", err.msg);
        return hb_dir;
    }
    free(ap->ranks); /* a new round's ranks: no samples of the last one */
    ap->ranks = calloc((size_t)(n > 0 ? n : 1), sizeof(*ap->ranks));
    ap->n_ranks = ap->ranks ? n : 0;
    return dir;
}

/* The run's previous failure record (state.last_failure): 0, or negative when there is none or
 * it cannot be read (then this failure starts the counts again: never a stop by mistake). */
static int previous_failure(struct agent *a, struct rdzv_failure *ret)
{
    int64_t gen = 0;
    const struct rdzv_state *s = rdzv_current(a->node.rdzv, &gen);
    if (!s || s->last_failure <= 0)
        return -ENOENT;
    struct ea_error err = {0};
    int r = rdzv_get_failure(a->node.rdzv, s->last_failure, ret, &err);
    if (r < 0)
        log_warn("cannot read round %" PRId64 "'s failure record (%s): this failure starts the "
                 "no-progress count again",
                 s->last_failure, err.msg);
    return r;
}

static void agent_progress_failed(struct agent *a, struct rdzv_failure *f)
{
    struct pg *p = a->progress ? a->progress->pg : NULL;
    if (!p)
        return;
    int64_t step = pg_read(p, ea_now_ms());
    struct rdzv_failure *prev = malloc(sizeof(*prev));
    bool have = prev && previous_failure(a, prev) == 0;
    pg_next(have ? prev : NULL, f, step, p->limit, &f->progress);
    free(prev);
    /* run_round stays: the record that counts is the one the store kept (another node's may
     * have come first), read once state.last_failure names this round (agent_progress_step) */
    p->run = f->progress;
    p->passed = false;
    const struct rdzv_progress *g = &f->progress;
    if (g->no_progress > 0)
        log_warn("round %" PRId64 ": no progress: the run failed again without getting past "
                 "step %" PRId64 " (restarts without progress: %d, the same failure %d time(s) "
                 "in a row; --max-restarts-without-progress %d)",
                 a->group.round, g->best, g->no_progress, g->repeat, p->limit);
    events_emit(a->obs.events, "failure_progress", a->group.round, a->group.generation,
                "{s:I, s:I, s:i, s:i, s:i, s:b}", "step", (json_int_t)g->step, "best_step",
                (json_int_t)g->best, "no_progress", g->no_progress, "repeat", g->repeat,
                "max_restarts_without_progress", p->limit, "stop", g->stop);
}

static bool agent_progress_ended(struct agent *a, const struct rdzv_state *s, const struct rdzv_failure *f)
{
    if (!f->progress.stop)
        return false;
    char msg[sizeof(f->message) + 512];
    pg_stop_message(f, msg, sizeof(msg));
    log_error("run '%s' failed: %s", a->cfg->run_id, msg);
    agent_emit(a, "run_failed", "{s:i, s:i, s:I, s:s, s:i, s:s, s:I, s:i, s:i}", "restart_count",
               s->restart_count, "max_restarts", s->max_restarts, "failure_round",
               (json_int_t)s->failure_round, "failed_node", f->node_id, "failed_rank", f->rank,
               "reason", "no_progress", "step", (json_int_t)f->progress.best, "no_progress",
               f->progress.no_progress, "repeat", f->progress.repeat);
    return true;
}

static void straggler_step(struct agent *a, struct agent_progress *ap, int64_t now);
static void evict_follow(struct agent *a, struct agent_progress *ap, const struct rdzv_state *s,
                         int64_t now);

static void agent_progress_step(struct agent *a, int64_t now)
{
    struct agent_progress *ap = a->progress;
    struct pg *p = ap ? ap->pg : NULL;
    a->obs.m.progress_step = p ? p->step : -1;
    a->obs.m.progress_best = p ? p->run.best : -1;
    a->obs.m.restarts_without_progress = pg_no_progress(p);
    if (!p)
        return;
    int64_t gen = 0;
    const struct rdzv_state *s = rdzv_current(a->node.rdzv, &gen);
    if (ap->straggler)
        evict_follow(a, ap, s, now);
    if (s && s->last_failure > p->run_round) {
        /* another node's failure moved the run on: its record has the run's counts (one read
         * per failed round, not per step) */
        struct rdzv_failure *f = malloc(sizeof(*f));
        struct ea_error err = {0};
        if (f && rdzv_get_failure(a->node.rdzv, s->last_failure, f, &err) == 0 && f->progress.repeat)
            p->run = f->progress;
        free(f);
        p->run_round = s->last_failure;
        p->passed = false;
    }
    if (!pg_due(p, now))
        return;
    pg_read(p, now);
    if (pg_passed(p)) {
        log_info("round %" PRId64 ": progress: the run got past step %" PRId64 ", where it "
                 "failed before (step %" PRId64 " now): the no-progress count starts again",
                 a->group.round, p->run.best, p->step);
        agent_emit(a, "progress", "{s:I, s:I, s:i}", "step", (json_int_t)p->step, "best_step",
                   (json_int_t)p->run.best, "no_progress_before", p->run.no_progress);
    }
    a->obs.m.progress_step = p->step;
    a->obs.m.restarts_without_progress = pg_no_progress(p);
    if (ap->straggler)
        straggler_step(a, ap, now);
}

static int64_t agent_progress_wake_ms(const struct agent *a)
{
    return a->progress ? pg_wake_ms(a->progress->pg) : -1;
}

/* compute/<node>: {"round", "median_s"} of the round `round`, else 0. */
static double node_compute(const char *v, int64_t round)
{
    json_t *o = v ? json_loads(v, 0, NULL) : NULL;
    json_int_t r = 0;
    double m = 0;
    if (!o || json_unpack(o, "{s:I, s:F}", "round", &r, "median_s", &m) < 0 || r != round ||
        !(m > 0) || m > 86400)
        m = 0;
    json_decref(o);
    return m;
}

/* The coordinator: score every member of the round from its compute/<node> (the store's watch
 * brings them to the coordinator only), report the ones above the threshold for the window. */
static void straggler_score(struct agent *a, struct agent_progress *ap, const struct rdzv_state *s,
                            int64_t now)
{
    size_t n = s->n_members;
    if (!s->members || n == 0)
        return;
    if (ap->tracks_round != s->round || ap->n_tracks != n) { /* a new round: new windows */
        free(ap->tracks);
        ap->tracks = calloc(n, sizeof(*ap->tracks));
        ap->n_tracks = ap->tracks ? n : 0;
        ap->tracks_round = s->round;
        for (size_t i = 0; i < ap->n_tracks; i++) {
            snprintf(ap->tracks[i].node, sizeof(ap->tracks[i].node), "%s", s->members[i].node_id);
            ap->tracks[i].t.above_since = -1;
        }
    }
    double *t = calloc(n, sizeof(*t)), *sc = calloc(n, sizeof(*sc)), *all = calloc(n, sizeof(*t));
    if (!t || !sc || !all || ap->n_tracks != n)
        goto out;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if ((t[i] = node_compute(rdzv_compute(a->node.rdzv, s->members[i].node_id), s->round)) > 0)
            all[k++] = t[i];
    double run = sg_median(all, k);
    sg_scores(t, n, sc);
    const struct cfg *c = a->cfg;
    size_t live = rdzv_live_count(a->node.rdzv);
    for (size_t i = 0; i < n; i++) {
        struct sg_node_track *tk = &ap->tracks[i];
        tk->score = sc[i];
        bool report =
            sg_observe(&tk->t, sc[i], c->straggler_threshold, c->straggler_window_ms, now) == 1;
        bool still = tk->t.reported && tk->t.above_since >= 0;
        if (!report && !(still && c->straggler_evict && ap->evict_round != s->round))
            continue;
        enum sg_action act =
            sg_evict_decide(c->straggler_evict, live, n, strcmp(tk->node, c->node_id) == 0);
        if (report) {
            a->obs.m.stragglers_reported++;
            log_warn("round %" PRId64 ": straggler: node '%s' (group rank %zu) computes %.2fx "
                     "as long as the other nodes (%.3f s a step against %.3f s, the run's "
                     "median) for %.0f s (--straggler-threshold %.2f)%s",
                     s->round, tk->node, i, sc[i], t[i], run,
                     (double)(now - tk->t.above_since) / 1000.0, c->straggler_threshold,
                     act == SG_REPORT_NO_SPARE ? "; no spare node waits (live nodes: the "
                                                 "round's members): reported only, not evicted"
                     : act == SG_REPORT_SELF   ? "; it coordinates the run: reported only, not "
                                                 "evicted"
                                               : "");
            agent_emit(a, "straggler", "{s:s, s:i, s:f, s:f, s:f, s:f, s:s}", "straggler_node",
                       tk->node, "group_rank", (int)i, "score", sc[i], "window_s",
                       (double)(now - tk->t.above_since) / 1000.0, "compute_s", t[i],
                       "run_compute_s", run, "action", sg_action_name(act));
        }
        if (act != SG_EVICT || ap->evict_round == s->round)
            continue; /* one eviction a round: the next round scores its members anew */
        struct ea_error err = {0};
        if (rdzv_straggler_evict(a->node.rdzv, s->round, tk->node, &err) < 0) {
            log_warn("round %" PRId64 ": cannot evict straggler '%s': %s; trying again at the "
                     "next scoring",
                     s->round, tk->node, err.msg);
            continue;
        }
        ap->evict_round = s->round;
        log_warn("round %" PRId64 ": evicting straggler '%s' (%.2fx): a spare node waits (%zu "
                 "live, %zu in the round); it leaves the run for --straggler-cooldown %.0f s and "
                 "the next round takes the spare (a scale event, no restart spent)",
                 s->round, tk->node, sc[i], live, n, (double)c->straggler_cooldown_ms / 1000.0);
        agent_emit(a, "straggler_evict", "{s:s, s:f, s:i, s:i, s:f}", "straggler_node", tk->node,
                   "score", sc[i], "live", (int)live, "members", (int)n, "cooldown_s",
                   (double)c->straggler_cooldown_ms / 1000.0);
    }
out:
    free(t);
    free(sc);
    free(all);
}

/* This node: named by the coordinator's rounds/<r>/evict of its round? Then it leaves the run
 * at once (the others' next round takes the spare: a scale event), stops its workers and, once
 * they are gone, ends its part of the run; the preflight gate holds it out for the cooldown and
 * it joins again as a spare. */
static void evict_follow(struct agent *a, struct agent_progress *ap, const struct rdzv_state *s,
                         int64_t now)
{
    const struct cfg *c = a->cfg;
    if (ap->evicting) {
        if (a->group.live > 0)
            return; /* its workers' exits wake the loop */
        struct sg_hold h = {0};
        sg_hold_start(&h, now, c->straggler_cooldown_ms);
        a->health.out_until = h.until;
        snprintf(a->health.out_reason, sizeof(a->health.out_reason),
                 "evicted as a straggler in round %" PRId64 " (--straggler-action evict)",
                 a->group.round);
        a->health.pf_out = a->quit.exiting = true; /* next: the gate, then the join */
        ap->evicting = false;
        return;
    }
    if (!c->straggler_evict || !s || s->status != RDZV_RUNNING || a->group.round != s->round ||
        rdzv_my_index(a->node.rdzv) < 0)
        return;
    char node[RDZV_ID_MAX];
    if (rdzv_straggler_evicted(a->node.rdzv, s->round, node) < 0 || strcmp(node, c->node_id) != 0)
        return;
    log_warn("round %" PRId64 ": the coordinator evicted this node as a straggler: leaving run "
             "'%s' (a spare takes its place), stopping %d worker(s), then staying out for %.0f s "
             "(--straggler-cooldown)",
             s->round, c->run_id, a->group.live, (double)c->straggler_cooldown_ms / 1000.0);
    agent_emit(a, "evicted", "{s:s, s:f}", "reason", "straggler", "cooldown_s",
               (double)c->straggler_cooldown_ms / 1000.0);
    struct ea_error err = {0};
    if (rdzv_leave(a->node.rdzv, &err) < 0) /* first: the run moves on without waiting for us */
        log_warn("leaving the run: %s", err.msg);
    a->quit.stop_reason = "evicted";
    AGENT_EACH(stopping, a, s);
    if (a->group.live > 0 && a->state != LC_STOPPING) {
        group_stop(&a->group);
        a->state = LC_STOPPING;
    }
    ap->evicting = true;
}

static void straggler_step(struct agent *a, struct agent_progress *ap, int64_t now)
{
    struct pg *p = ap->pg;
    for (int i = 0; i < ap->n_ranks && i < p->n; i++) /* a new value: a new beat's sample */
        if (p->compute[i] > 0 && p->compute[i] != ap->ranks[i].last)
            sg_rank_add(&ap->ranks[i], p->compute[i]);
    if (now < ap->publish_at)
        return;
    int64_t gen = 0;
    const struct rdzv_state *s = rdzv_current(a->node.rdzv, &gen);
    ap->publish_at = now + publish_every_ms(s ? s->group_world_size : 0);
    if (!s || s->status != RDZV_RUNNING || a->state != LC_RUNNING || a->group.round != s->round)
        return;
    double t = sg_node_time(ap->ranks, ap->n_ranks);
    a->obs.m.compute_seconds = t;
    if (t > 0 && a->node.store_down_since_ms < 0) {
        /* bounded rate: one small put every SG_PUBLISH_MS, never per step */
        char v[96];
        snprintf(v, sizeof(v), "{\"round\":%" PRId64 ",\"median_s\":%.6f}", s->round, t);
        struct ea_error err = {0};
        if (rdzv_publish_compute(a->node.rdzv, v, &err) < 0)
            log_debug("could not publish this node's compute time: %s", err.msg);
    }
    if (rdzv_is_coordinator(a->node.rdzv))
        straggler_score(a, ap, s, now);
}

/* ---- the component ----------------------------------------------------------------------- */

static void progress_tick(void *c, int64_t now)
{
    if (agent_in_run(c))
        agent_progress_step(c, now);
}

static int64_t progress_wake(void *c)
{
    return agent_in_run(c) ? agent_progress_wake_ms(c) : -1;
}

/* After health's: hang detection's heartbeat directory, or one of its own for the step alone. */
static void progress_starting(struct agent *a, const struct rdzv_state *s, struct group_start *gs)
{
    (void)s;
    if (a->progress)
        gs->heartbeat_dir = agent_progress_arm(a, gs->heartbeat_dir, gs->self->nproc,
                                               gs->self->rank_base, a->progress->dir,
                                               sizeof(a->progress->dir));
}

static const struct agent_step progress_steps[] = {
    {AGENT_AT_CHECK, {"progress", progress_tick, progress_wake, false}},
};

const struct agent_component agent_progress_component = {
    .name = "progress",
    AGENT_STEPS(progress_steps),
    .open = agent_progress_open,
    .close = agent_progress_close,
    .starting = progress_starting,
    .failing = agent_progress_failed,
    .run_failed = agent_progress_ended,
};
