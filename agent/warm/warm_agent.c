// SPDX-License-Identifier: Apache-2.0
/* agent warm hooks: --warm-workers' spares (warm/warm.h) tied to the agent's round lifecycle:
 * when a set is parked, which spares a round takes, what a fault does; kept out of agent.c. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_internal.h"
#include "keys.h"
#include "ea_time.h"
#include "log.h"
#include "workdir.h"
#include "workerenv.h"

/* The ready line's deadline when --worker-startup-timeout is 0 (docs/warm.md). */
#define AGENT_WARM_READY_DEFAULT_MS (300 * 1000)

static int create(struct agent *a)
{
    const struct cfg *c = a->cfg;
    struct wenv_parked wp = {.base_env = a->env.envp, .nproc = c->nproc_per_node,
                             .node_id = c->node_id};
    if (c->env_style && wenv_parse_styles(c->env_style, &wp.styles, NULL) < 0)
        wp.styles = WENV_TORCH; /* validated by cfg; never reached */
    char cks[PATH_MAX];
    if (c->checkpoint_memory_mb > 0) {
        snprintf(cks, sizeof(cks), WENV_CHECKPOINT_SOCKET_FMT, a->me.workdir);
        wp.checkpoint_socket = cks;
    }
    char **env = NULL;
    bool *shown = calloc((size_t)c->nproc_per_node, sizeof(*shown));
    char logdir[PATH_MAX];
    int r = shown && wenv_build_parked(&wp, &env) == 0 ? 0 : -ENOMEM;
    struct ea_error err = {0};
    if (r < 0)
        ea_errorf(&err, r, "out of memory");
    for (int i = 0; shown && i < c->nproc_per_node; i++)
        shown[i] = group_rank_shown(c->local_ranks_filter, i);
    if (r == 0 && c->log_dir) {
        snprintf(logdir, sizeof(logdir), "%s/%s/warm", c->log_dir, c->run_id);
        if ((r = workdir_mkdirs(logdir)) < 0)
            ea_errorf(&err, r, "--log-dir: cannot create '%s': %s", logdir, strerror(-r));
    }
    if (r == 0) {
        struct warm_config wc = {
            .launcher = a->launcher,
            .command = c->command,
            .nproc = c->nproc_per_node,
            .env = env,
            .log_dir = c->log_dir ? logdir : NULL,
            .shown = shown,
            .tee = c->tee,
            .stderr_tail = GROUP_STDERR_TAIL,
            .ready_timeout_ms = c->startup_timeout_ms > 0 ? c->startup_timeout_ms
                                                          : AGENT_WARM_READY_DEFAULT_MS,
            .stop_grace_ms = c->stop_timeout_ms,
            .inplace_timeout_ms = c->in_place ? c->in_place_timeout_ms : 0,
        };
        r = warm_create(&wc, &a->warm.spares, &err);
    }
    wenv_free(env);
    free(shown);
    if (r < 0) {
        log_error("--warm-workers: %s; every worker starts cold", err.msg);
        a->warm.off = true;
    }
    return r;
}

/* A parked set's fault: the set is gone, the next round starts its workers cold. A held in-place
 * worker's: it is stopped, its local rank starts from a spare or cold. */
static void parked_fault(struct agent *a, const struct warm_fault *f)
{
    if (f->held)
        log_warn("%s: its local rank starts from a warm spare or cold", f->message);
    else
        log_error("%s; the next round starts this node's workers cold", f->message);
    agent_emit(a, "warm_fault", "{s:i, s:I, s:b, s:s}", "local_rank", f->local_rank, "pid",
               (json_int_t)f->pid, "assigned", false, "message", f->message);
}

int agent_warm_check(struct agent *a, int64_t now, struct warm_fault *ret)
{
    struct warm_fault f;
    while (a->warm.spares && warm_tick(a->warm.spares, now, &f) > 0) {
        if (!f.assigned) {
            parked_fault(a, &f);
            continue;
        }
        agent_emit(a, "warm_fault", "{s:i, s:I, s:b, s:s}", "local_rank", f.local_rank, "pid",
                   (json_int_t)f.pid, "assigned", true, "message", f.message);
        *ret = f;
        return 1;
    }
    return 0;
}

void agent_warm_tick(struct agent *a)
{
    if (!a->cfg->warm_workers || a->warm.off)
        return;
    if (!a->warm.spares && create(a) < 0)
        return;
    if (a->quit.term_signal || a->quit.exiting) {
        warm_stop(a->warm.spares);
        return;
    }
    if (a->node.lease_lost || a->health.pf_out) {
        warm_drop_held(a->warm.spares); /* fenced out or held out: no worker of ours goes on */
        return; /* rejoin first; spares already parked stay for the next round */
    }
    int64_t gen = 0;
    const struct rdzv_state *s = rdzv_current(a->node.rdzv, &gen);
    if (!s || s->status != RDZV_RUNNING || rdzv_my_index(a->node.rdzv) < 0)
        warm_drop_held(a->warm.spares); /* the run goes on without this node, or does not go on */
    struct ea_error err = {0};
    int r = warm_park(a->warm.spares, a->group.generation, &err);
    if (r < 0)
        log_error("--warm-workers: cannot park a warm spare: %s; the next round starts this "
                  "node's workers cold",
                  err.msg);
    else if (r > 0)
        log_debug("parked %d warm spare(s) for the round after generation %" PRId64,
                  a->cfg->nproc_per_node, a->group.generation);
}

struct warm *agent_warm_for_round(struct agent *a)
{
    return a->warm.spares;
}

void agent_warm_started(struct agent *a, const struct rdzv_state *s)
{
    if (!a->warm.spares)
        return;
    if (a->group.warm > a->group.inplace)
        log_info("round %" PRId64 ": %d of %d local worker(s) are warm spares, assigned their "
                 "ranks",
                 s->round, a->group.warm - a->group.inplace, a->group.n);
    if (a->group.inplace > 0)
        log_info("round %" PRId64 ": %d of %d local worker(s) re-assigned in place (same "
                 "process, ack due within --in-place-timeout)",
                 s->round, a->group.inplace, a->group.n);
    warm_round_started(a->warm.spares);
}

int agent_warm_hold(struct agent *a, const struct rdzv_state *s)
{
    if (!a->warm.spares)
        return 0;
    /* only at a new round this node takes part in, its workers running well */
    bool hold = a->cfg->in_place && !a->quit.term_signal && !a->node.lease_lost && !a->quit.exiting &&
                a->state == LC_RUNNING && s && s->status == RDZV_RUNNING &&
                s->round != a->group.round && rdzv_my_index(a->node.rdzv) >= 0;
    int held = 0;
    for (int i = 0; i < a->group.n; i++) {
        if (!a->group.w[i].alive)
            continue;
        if (hold && warm_hold(a->warm.spares, a->group.w[i].proc) > 0) {
            group_detach(&a->group, i);
            held++;
        } else {
            warm_forget(a->warm.spares, a->group.w[i].proc); /* stopped as usual */
        }
    }
    if (held > 0)
        log_info("round %" PRId64 " -> %" PRId64 ": %d of %d local worker(s) keep running, to be "
                 "re-assigned in place (--in-place)",
                 a->group.round, s->round, held, a->group.n);
    return held;
}

int agent_warm_on_exit(struct agent *a, const struct launch_exit *e)
{
    return warm_on_exit(a->warm.spares, e);
}


int64_t agent_warm_wake_ms(const struct agent *a)
{
    return warm_wake_ms(a->warm.spares);
}

void agent_warm_stop(struct agent *a)
{
    warm_stop(a->warm.spares);
}

/* ---- warm before joining ------------------------------------------------------------------ */

/* Is a round of the run running (this node would join it at its next round)? false when the
 * run has not formed yet, is over, or the store cannot say (the join finds out). */
static bool run_is_running(struct agent *a)
{
    bool running = false;
    struct ea_error err = {0};
    rdzv_peek_running(a->node.kv, a->me.prefix, &running, &err);
    return running;
}

/* AP_WARMING's state. */
struct warming {
    int n;               /* spares parked */
    int64_t start;       /* monotonic */
    int64_t progress_at; /* the next progress line */
};

static void warming_end(struct agent *a, int code)
{
    log_progress_end();
    free(a->stage.data);
    a->stage.data = NULL;
    agent_phase_over(a, code);
}

void agent_warming_enter(struct agent *a)
{
    const struct cfg *c = a->cfg;
    if (!c->warm_workers || a->warm.off || !run_is_running(a)) {
        agent_phase_over(a, 0); /* a run that has not formed: nobody waits for us, join now */
        return;
    }
    if (!a->warm.spares && create(a) < 0) {
        agent_phase_over(a, 0);
        return;
    }
    struct ea_error err = {0};
    if (warm_park(a->warm.spares, a->group.generation, &err) < 0) {
        log_error("--warm-workers: cannot park a warm spare: %s; joining run '%s' now, its "
                  "first round starts this node's workers cold",
                  err.msg, c->run_id);
        agent_phase_over(a, 0);
        return;
    }
    int n = warm_parked(a->warm.spares);
    struct warming *w = NULL;
    if (n == 0 || warm_parked_ready(a->warm.spares) == n || !(w = calloc(1, sizeof(*w)))) {
        agent_phase_over(a, 0); /* none (parking suspended after a fault), or ready already */
        return;
    }
    int64_t timeout = c->startup_timeout_ms > 0 ? c->startup_timeout_ms
                                                : AGENT_WARM_READY_DEFAULT_MS;
    *w = (struct warming){.n = n, .start = ea_now_ms()};
    w->progress_at = w->start + 5000;
    a->stage.data = w;
    log_info("run '%s' is running: warming %d worker(s) before joining it (their set-up, until "
             "each has called elastic_agent.wait_for_assignment(); at most "
             "--worker-startup-timeout %.0f s), so that its next round does not wait for them",
             c->run_id, n, (double)timeout / 1000.0);
}

void agent_warming_step(struct agent *a, int64_t now)
{
    const struct cfg *c = a->cfg;
    struct warming *w = a->stage.data;
    if (a->quit.term_signal) {
        log_progress_end();
        log_info("interrupted while warming this node's workers: stopping them, not joining");
        warm_stop(a->warm.spares);
        warming_end(a, 128 + a->quit.term_signal);
        return;
    }
    struct warm_fault f;
    if (warm_tick(a->warm.spares, now, &f) > 0) { /* the set is gone (exit, bad line, too late) */
        log_progress_end();
        log_warn("%s; joining run '%s' anyway: its next round starts this node's workers cold",
                 f.message, c->run_id);
        agent_emit(a, "warm_fault", "{s:i, s:I, s:b, s:s}", "local_rank", f.local_rank, "pid",
                   (json_int_t)f.pid, "assigned", false, "message", f.message);
        while (warm_tick(a->warm.spares, now, &f) > 0) /* the rest of the set: stopped with it */
            ;
        warming_end(a, 0);
        return;
    }
    int ready = warm_parked_ready(a->warm.spares);
    if (ready == w->n) {
        log_progress_end();
        log_info("%d of %d warm spare(s) ready after %.1f s: joining run '%s'", ready, w->n,
                 (double)(now - w->start) / 1000.0, c->run_id);
        warming_end(a, 0);
        return;
    }
    if (now >= w->progress_at) {
        log_progress("warming this node's workers before joining run '%s': %d of %d ready "
                     "after %.0f s",
                     c->run_id, ready, w->n, (double)(now - w->start) / 1000.0);
        w->progress_at = now + 5000;
    }
}

int64_t agent_warming_wake_ms(const struct agent *a)
{
    const struct warming *w = a->stage.data;
    if (!w)
        return -1;
    int64_t wake = warm_wake_ms(a->warm.spares);
    return wake < 0 || wake > w->progress_at ? w->progress_at : wake;
}

/* ---- the component ----------------------------------------------------------------------- */

static void warming_step(void *c, int64_t now)
{
    struct agent *a = c;
    if (a->stage.id == AP_WARMING && !a->stage.over)
        agent_warming_step(a, now);
}

static int64_t warming_wake(void *c)
{
    const struct agent *a = c;
    return a->stage.id == AP_WARMING && !a->stage.over ? agent_warming_wake_ms(a) : -1;
}

static int64_t spares_wake(void *c) /* their ready lines' deadlines */
{
    return agent_in_run(c) ? agent_warm_wake_ms(c) : -1;
}

static void park(void *c, int64_t now)
{
    (void)now;
    if (agent_in_run(c))
        agent_warm_tick(c);
}

/* The spares' sockets, while they are in use: running, and warming before the join. */
static size_t fds_spares(void *c, struct pollfd *fds, size_t max)
{
    const struct agent *a = c;
    bool on = agent_in_run(c) || a->stage.id == AP_WARMING;
    return on ? warm_pollfds(a->warm.spares, fds, max) : 0;
}

static void on_spares(void *c, const struct pollfd *fds, size_t n, int64_t now)
{
    (void)now;
    warm_on_poll(((struct agent *)c)->warm.spares, fds, n);
}

static void warm_enter(struct agent *a, int phase)
{
    if (phase == AP_WARMING)
        agent_warming_enter(a); /* --warm-workers: its spares first */
}

static void warm_starting(struct agent *a, const struct rdzv_state *s, struct group_start *gs)
{
    (void)s;
    gs->warm = agent_warm_for_round(a);
}

static void warm_stopping(struct agent *a, const struct rdzv_state *s)
{
    agent_warm_hold(a, s); /* --in-place: capable workers run on, re-assigned next round */
}

static bool warm_take_exit(struct agent *a, const struct launch_exit *e)
{
    return agent_warm_on_exit(a, e) > 0; /* a parked spare the group never took */
}

/* A warm spare this round took never sent its ready line, or a bad one: a failed start. */
static size_t warm_check(struct agent *a, int64_t now, struct agent_fault *ret, size_t max)
{
    size_t n = 0;
    struct warm_fault f;
    while (n < max && agent_warm_check(a, now, &f) > 0) {
        ret[n] = (struct agent_fault){.local_rank = f.local_rank, .pid = f.pid,
                                      .began_wall = ea_wall_ms(), .cause = "failure"};
        snprintf(ret[n].message, sizeof(ret[n].message), "%s", f.message);
        int rank = f.local_rank < a->group.n ? a->group.w[f.local_rank].rank : -1;
        snprintf(ret[n].what, sizeof(ret[n].what), "rank %d: %s", rank, f.message);
        n++;
    }
    return n;
}

static const struct agent_step warm_steps[] = {
    {AGENT_AT_PHASE, {"warming", warming_step, warming_wake, true}},
    /* a spare that never took its rank cannot beat either: before the hang check */
    {AGENT_AT_CHECK, {"warm-check", NULL, spares_wake, false}}, /* its check: warm_check */
    {AGENT_AT_DECIDE, {"warm-park", park, NULL, false}}, /* spares parked before the first round */
    {AGENT_AT_DECIDED, {"warm-refill", park, NULL, true}}, /* after a round took the spares */
};

static const struct ea_loop_source warm_sources[] = {
    {"warm", WARM_POLL_MAX, fds_spares, on_spares, false}, /* the spares' sockets */
};

const struct agent_component agent_warm_component = {
    .name = "warm",
    AGENT_STEPS(warm_steps),
    AGENT_SOURCES(warm_sources),
    .enter = warm_enter,
    .starting = warm_starting,
    .started = agent_warm_started,
    .stopping = warm_stopping,
    .take_exit = warm_take_exit,
    .check = warm_check,
    .leaving = agent_warm_stop,
};
