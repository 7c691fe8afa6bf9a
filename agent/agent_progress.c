// SPDX-License-Identifier: Apache-2.0
/* agent progress glue: progress-aware restarts (progress/progress.h) tied to the loop: the
 * heartbeat files armed with each round (hang detection on or off), the step a failure happened
 * at carried in its record, the run's no-progress count for /metrics and the events, and the one
 * message when the rule ends the run. Kept out of agent.c. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_internal.h"
#include "ea_time.h"
#include "log.h"
#include "progress.h"

int agent_progress_open(struct agent *a, const char *launcher)
{
    /* the ranks' files are read on this machine: not for workers over ssh */
    if (strcmp(launcher, "ssh") == 0)
        return 0;
    struct ea_error err = {0};
    if (pg_create(a->cfg->max_restarts_without_progress, &a->pg, &err) < 0) {
        log_error("%s", err.msg);
        return -ENOMEM;
    }
    return 0;
}

void agent_progress_close(struct agent *a)
{
    pg_destroy(a->pg);
    a->pg = NULL;
}

const char *agent_progress_arm(struct agent *a, const char *hb_dir, int n, int rank_base,
                               char *buf, size_t size)
{
    if (!a->pg)
        return hb_dir;
    const char *dir = hb_dir;
    if (!dir) { /* hang detection off: the files exist for the step alone */
        snprintf(buf, size, "%s/heartbeat", a->workdir);
        dir = buf;
    }
    struct ea_error err = {0};
    if (pg_arm(a->pg, dir, hb_dir == NULL, n, rank_base, ea_now_ms(), &err) < 0) {
        log_warn("%s: the run's progress is unknown for this round", err.msg);
        return hb_dir;
    }
    return dir;
}

/* The run's previous failure record (state.last_failure): 0, or negative when there is none or
 * it cannot be read (then this failure starts the counts again: never a stop by mistake). */
static int previous_failure(struct agent *a, struct rdzv_failure *ret)
{
    int64_t gen = 0;
    const struct rdzv_state *s = rdzv_current(a->rdzv, &gen);
    if (!s || s->last_failure <= 0)
        return -ENOENT;
    struct ea_error err = {0};
    int r = rdzv_get_failure(a->rdzv, s->last_failure, ret, &err);
    if (r < 0)
        log_warn("cannot read round %" PRId64 "'s failure record (%s): this failure starts the "
                 "no-progress count again",
                 s->last_failure, err.msg);
    return r;
}

void agent_progress_failed(struct agent *a, struct rdzv_failure *f)
{
    struct pg *p = a->pg;
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
    events_emit(a->events, "failure_progress", a->group.round, a->group.generation,
                "{s:I, s:I, s:i, s:i, s:i, s:b}", "step", (json_int_t)g->step, "best_step",
                (json_int_t)g->best, "no_progress", g->no_progress, "repeat", g->repeat,
                "max_restarts_without_progress", p->limit, "stop", g->stop);
}

bool agent_progress_ended(struct agent *a, const struct rdzv_state *s,
                          const struct rdzv_failure *f)
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

void agent_progress_step(struct agent *a, int64_t now)
{
    struct pg *p = a->pg;
    a->m.progress_step = p ? p->step : -1;
    a->m.progress_best = p ? p->run.best : -1;
    a->m.restarts_without_progress = pg_no_progress(p);
    if (!p)
        return;
    int64_t gen = 0;
    const struct rdzv_state *s = rdzv_current(a->rdzv, &gen);
    if (s && s->last_failure > p->run_round) {
        /* another node's failure moved the run on: its record has the run's counts (one read
         * per failed round, not per step) */
        struct rdzv_failure *f = malloc(sizeof(*f));
        struct ea_error err = {0};
        if (f && rdzv_get_failure(a->rdzv, s->last_failure, f, &err) == 0 && f->progress.repeat)
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
    a->m.progress_step = p->step;
    a->m.restarts_without_progress = pg_no_progress(p);
}

int64_t agent_progress_wake_ms(const struct agent *a)
{
    return pg_wake_ms(a->pg);
}
