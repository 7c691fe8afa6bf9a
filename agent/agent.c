// SPDX-License-Identifier: Apache-2.0
/* agent: the event loop, and carrying out the lifecycle's decisions. */
#include "agent.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_internal.h"
#include "ea_loop.h"
#include "ea_time.h"
#include "log.h"
#include "report.h"

static void exit_with(struct agent *a, int code);

/* ---- store trouble ---------------------------------------------------------------------- */



/* ---- actions -------------------------------------------------------------------------- */








static void fill_failure(struct agent *a, const struct group_worker *w, const char *message)
{
    struct rdzv_failure *f = &a->node.failure;
    memset(f, 0, sizeof(*f));
    snprintf(f->node_id, sizeof(f->node_id), "%s", a->cfg->node_id);
    snprintf(f->host, sizeof(f->host), "%s", a->me.host);
    f->rank = w->rank;
    f->local_rank = w->local_rank;
    f->exit_code = w->term_signal ? -1 : w->exit_code;
    f->signal = w->term_signal;
    f->pid = w->pid;
    f->time_ms = ea_wall_ms();
    if (message)
        snprintf(f->message, sizeof(f->message), "%s", message);
    else if (report_read_error_file(w->error_file, f->message, sizeof(f->message)) < 0) {
        report_default_message(w->exit_code, w->term_signal, (long)w->pid, f->message,
                               sizeof(f->message));
        report_append_stderr_tail(f->message, sizeof(f->message), w->stderr_tail,
                                  GROUP_STDERR_TAIL);
    }
    AGENT_EACH(failing, a, f); /* e.g. the run's progress */
    a->node.failure_generation = a->group.generation;
    a->node.failure_pending = true;
    a->obs.m.worker_failures++;
    events_emit(a->obs.events, "failure", a->group.round, a->group.generation,
                "{s:i, s:i, s:i, s:i, s:I, s:s}", "rank", f->rank, "local_rank", f->local_rank,
                "exit_code", f->exit_code, "signal", f->signal, "pid", (json_int_t)f->pid,
                "message", f->message);
}

/* Every worker of the round is gone (or held for the next one, --in-place). */
static void workers_stopped(struct agent *a)
{
    a->state = LC_IDLE;
    a->obs.rdzv_since_ms = ea_now_ms();
    events_emit(a->obs.events, "workers_stopped", a->group.round, a->group.generation, "{s:i, s:s}",
                "workers", a->group.n, "reason", a->quit.stop_reason ? a->quit.stop_reason : "?");
}

static void start_workers(struct agent *a, const struct rdzv_state *s, int64_t gen)
{
    const char *master = rdzv_master(a->node.rdzv, s->round);
    const char *colon = strrchr(master, ':');
    char maddr[128] = "";
    int mport = colon ? atoi(colon + 1) : 0;
    if (colon && (size_t)(colon - master) < sizeof(maddr))
        memcpy(maddr, master, (size_t)(colon - master));
    if (!maddr[0] || mport <= 0 || mport > 65535) {
        log_error("round %" PRId64 ": master '%s' is not ADDR:PORT; waiting for the next round",
                  s->round, master);
        a->state = LC_FAILED;
        a->group.generation = gen;
        return;
    }
    const struct rdzv_member *m = rdzv_self_member(a->node.rdzv);
    struct group_start gs = {.state = s, .self = m, .topology = cfg_topology(a->cfg),
                             .generation = gen,
                             .master_addr = maddr, .master_port = mport,
                             .envp = a->env.worker_envp ? a->env.worker_envp : a->env.envp};
    AGENT_EACH(starting, a, s, &gs); /* interfaces, tracker, heartbeat directory, spares, ... */
    struct ea_error err = {0};
    int failed_rank = -1;
    int r = group_start(&a->group, &gs, &failed_rank, &err);
    a->group.generation = gen;
    if (r < 0) {
        if (failed_rank < 0) /* before any worker (e.g. --log-dir): charge it to local rank 0 */
            failed_rank = 0;
        log_error("round %" PRId64 ": cannot start local rank %d: %s", s->round, failed_rank,
                  err.msg);
        a->state = LC_FAILED;
        if (failed_rank >= 0) {
            struct group_worker w = {.local_rank = failed_rank,
                                     .rank = m->rank_base + failed_rank,
                                     .exit_code = r == -ENOENT ? 127 : 126};
            fill_failure(a, &w, err.msg);
            agent_report_failure(a);
        }
        return;
    }
    a->state = LC_RUNNING;
    int64_t now = ea_now_ms();
    AGENT_EACH(started, a, s);
    a->obs.m.rounds_started++;
    a->obs.m.last_rendezvous_seconds = (double)(now - a->obs.rdzv_since_ms) / 1000.0;
    events_emit(a->obs.events, "workers_started", s->round, gen,
                "{s:i, s:i, s:i, s:i, s:i, s:s, s:f, s:i}", "workers", m->nproc, "rank_first",
                m->rank_base, "rank_last", m->rank_base + m->nproc - 1, "world_size",
                s->world_size, "group_rank", m->group_rank, "master", master,
                "rendezvous_seconds", a->obs.m.last_rendezvous_seconds, "warm", a->group.warm);
    log_info("round %" PRId64 " (generation %" PRId64 "): started %d worker(s), ranks %d-%d of "
             "world %d, group rank %d of %d, master %s; restarts %d/%d, scale events %d",
             s->round, gen, m->nproc, m->rank_base, m->rank_base + m->nproc - 1, s->world_size,
             m->group_rank, s->group_world_size, master, s->restart_count, s->max_restarts,
             s->scale_events);
}

static void exit_with(struct agent *a, int code)
{
    a->quit.exiting = true;
    a->quit.exit_code = code;
}

/* The run failed with record f: a component that knows why said so (true). */
static bool run_failed_said(struct agent *a, const struct rdzv_state *s,
                            const struct rdzv_failure *f)
{
    for (size_t i = 0; i < agent_n_components; i++)
        if (agent_components[i]->run_failed && agent_components[i]->run_failed(a, s, f))
            return true;
    return false;
}

static void act(struct agent *a, enum lc_action action, const struct rdzv_state *s, int64_t gen)
{
    switch (action) {
    case LC_NOTHING:
        return;
    case LC_STOP_WORKERS:
        a->quit.stop_reason = a->quit.term_signal                  ? "interrupted"
                         : a->node.lease_lost                 ? "lease_lost"
                         : a->state == LC_FAILED         ? "local_failure"
                         : !s                            ? "no_state"
                         : s->round != a->group.round    ? "new_round"
                         : s->status != RDZV_RUNNING     ? rdzv_status_name(s->status)
                                                         : "not_a_member";
        AGENT_EACH(stopping, a, s); /* --in-place: capable workers run on (warm) */
        if (a->group.live == 0) {
            a->state = LC_STOPPING;
            workers_stopped(a);
            return;
        }
        log_info("stopping %d worker(s) of round %" PRId64 "%s", a->group.live, a->group.round,
                 a->quit.term_signal    ? " (interrupted)"
                 : a->node.lease_lost   ? " (lease lost: fenced out)"
                 : !s              ? ""
                 : s->round != a->group.round ? " (the run moved to a new round)"
                 : s->status == RDZV_FAILING
                     ? " (a worker failed with --max-restarts spent, or without progress: the "
                       "run fails unless a lost node explains the failure)"
                     : "");
        group_stop(&a->group);
        a->state = LC_STOPPING;
        return;
    case LC_PUBLISH_MASTER:
        agent_publish_master(a, s);
        return;
    case LC_START_WORKERS:
        start_workers(a, s, gen);
        return;
    case LC_EXIT_SUCCESS:
        if (a->group.generation == 0)
            log_info("run '%s' already finished (succeeded in round %" PRId64 "); nothing to "
                     "do — use a new --run-id for a new run",
                     a->cfg->run_id, s->round);
        else
            log_info("run '%s' succeeded (round %" PRId64 ", %d restart(s))", a->cfg->run_id,
                     s->round, s->restart_count);
        agent_emit(a, "success", "{s:i, s:b}", "restart_count", s->restart_count,
                   "already_finished", a->group.generation == 0);
        exit_with(a, AGENT_EXIT_OK);
        return;
    case LC_EXIT_FAILED: {
        struct rdzv_failure f;
        struct ea_error err = {0};
        bool have = rdzv_get_failure(a->node.rdzv, s->failure_round, &f, &err) == 0;
        if (have && run_failed_said(a, s, &f)) { /* e.g. --max-restarts-without-progress */
            exit_with(a, AGENT_EXIT_FAILED);
            return;
        }
        log_error("run '%s' failed: worker failures exceeded --max-restarts %d", a->cfg->run_id,
                  s->max_restarts);
        agent_emit(a, "run_failed", "{s:i, s:i, s:I, s:s?, s:i}", "restart_count",
                   s->restart_count, "max_restarts", s->max_restarts, "failure_round",
                   (json_int_t)s->failure_round, "failed_node", have ? f.node_id : NULL,
                   "failed_rank", have ? f.rank : -1);
        if (have) {
            const char *entry = a->cfg->command[0];
            const char *slash = strrchr(entry, '/');
            report_print_failure(stderr, slash ? slash + 1 : entry, &f);
        } else {
            log_error("no failure record for round %" PRId64 ": %s", s->failure_round, err.msg);
        }
        exit_with(a, AGENT_EXIT_FAILED);
        return;
    }
    case LC_EXIT_CLOSED:
        log_error("run '%s' was closed", a->cfg->run_id);
        agent_emit(a, "closed", NULL);
        exit_with(a, AGENT_EXIT_RDZV);
        return;
    case LC_EXIT_INTERRUPTED:
        log_info("interrupted by signal %d (SIG%s): workers stopped, leaving", a->quit.term_signal,
                 sigabbrev_np(a->quit.term_signal));
        agent_emit(a, "interrupted", "{s:i, s:s}", "signal", a->quit.term_signal, "signal_name",
                   sigabbrev_np(a->quit.term_signal));
        exit_with(a, 128 + a->quit.term_signal);
        return;
    }
}

/* May the workers of the committed round `s` start here? Every component is asked on every
 * pass (NIC discovery probes meanwhile), so that none waits for another. */
static bool round_ready(struct agent *a, const struct rdzv_state *s, int64_t gen)
{
    bool ok = true;
    for (size_t i = 0; i < agent_n_components && !a->quit.exiting; i++)
        if (agent_components[i]->round_ready)
            ok &= agent_components[i]->round_ready(a, s, gen);
    return ok;
}

static bool may_start(struct agent *a, int64_t gen)
{
    for (size_t i = 0; i < agent_n_components; i++)
        if (agent_components[i]->may_start && !agent_components[i]->may_start(a, gen))
            return false;
    return true;
}

static bool published(const struct agent *a, const struct rdzv_state *s)
{
    for (size_t i = 0; i < agent_n_components; i++)
        if (agent_components[i]->published && !agent_components[i]->published(a, s))
            return false;
    return true;
}

/* Ask the lifecycle what to do next, and do it, until it says nothing. */
static void reconcile(struct agent *a)
{
    for (int guard = 0; guard < 8 && !a->quit.exiting; guard++) {
        int64_t gen = 0;
        const struct rdzv_state *s = rdzv_current(a->node.rdzv, &gen);
        struct lc_input in = {
            .group = a->state,
            .group_generation = a->group.generation,
            .live_workers = a->group.live,
            .terminating = a->quit.term_signal != 0 || a->node.lease_lost,
            .have_state = s != NULL,
            .status = s ? s->status : RDZV_WAITING,
            .generation = gen,
            .my_index = rdzv_my_index(a->node.rdzv),
            .master_known = s && rdzv_master(a->node.rdzv, s->round) != NULL && published(a, s),
        };
        if (a->node.lease_lost && in.live_workers == 0 && !a->quit.term_signal)
            return; /* the loop rejoins first (unless we are leaving anyway) */
        /* every member probes as soon as the round is committed (group rank 0 publishes the
         * master only afterwards), overlapping the stop of the previous round's workers */
        bool ready = !(s && s->status == RDZV_RUNNING && in.my_index >= 0 &&
                       a->group.generation != gen) ||
                     round_ready(a, s, gen);
        if (a->quit.exiting)
            return;
        enum lc_action action = lc_decide(&in);
        if (action == LC_NOTHING)
            return;
        if ((action == LC_PUBLISH_MASTER || action == LC_START_WORKERS) &&
            (!ready || !may_start(a, gen)))
            return;
        log_debug("lifecycle: %s", lc_action_name(action));
        act(a, action, s, gen);
        if (action == LC_PUBLISH_MASTER && a->node.retry_at_ms >= 0)
            return;
    }
}

/* ---- fencing ---------------------------------------------------------------------------- */

/* Past the deadline handed to the guards, they may be stopping the workers on their own: this
 * agent could not renew its lease in time (it was frozen, starved or swapped out). */
static bool fence_lapsed(const struct agent *a, int64_t now)
{
    int64_t until = agent_liveness_fence_held(a, a->ring.fence_until); /* the ring's thread moves it */
    return until > 0 && now >= until;
}

static void fenced_out(struct agent *a, int64_t now)
{
    log_error("the workers' deadline (the lease's, or the liveness ring's) passed %.1f s ago "
              "(was this agent stopped or starved?): this node is fenced out; the workers' "
              "guards stop them; rejoining",
              (double)(now - agent_liveness_fence_held(a, a->ring.fence_until)) / 1000.0);
    a->node.lease_lost = true;
    agent_emit(a, "lease_lost", "{s:s, s:i}", "reason", "agent stalled past its lease",
               "workers_running", a->group.live);
}

/* Hand the lease's deadline to the guards (after agent_store_step renewed or rejoined). */
static void fence_refresh(struct agent *a, int64_t now)
{
    if (fence_lapsed(a, now) && a->group.live > 0 && !a->node.lease_lost)
        fenced_out(a, now);
    a->ring.fence_until = agent_liveness_fence(a, rdzv_lease_valid_until(a->node.rdzv));
}

/* ---- events ---------------------------------------------------------------------------- */

/* A process exit that is a component's (it took it), not a worker's. */
static bool taken_by_component(struct agent *a, const struct launch_exit *e)
{
    for (size_t i = 0; i < agent_n_components; i++)
        if (agent_components[i]->take_exit && agent_components[i]->take_exit(a, e))
            return true;
    return false;
}

void agent_on_worker_exits(struct agent *a)
{
    struct launch_exit *ex = NULL;
    size_t n = 0;
    struct ea_error err = {0};
    if (launcher_dispatch(a->launcher, &ex, &n, &err) < 0) {
        log_error("launcher: %s", err.msg);
        return;
    }
    group_sync_pids(&a->group);
    for (size_t i = 0; i < n; i++) {
        if (taken_by_component(a, &ex[i])) /* a parked spare, --preflight-every-round's check */
            continue;
        struct group_worker *w = group_on_exit(&a->group, &ex[i]);
        if (!w)
            continue;
        bool ok = w->exit_code == 0 && w->term_signal == 0;
        AGENT_EACH(worker_exited, a, w);
        events_emit(a->obs.events, "worker_exited", a->group.round, a->group.generation,
                    "{s:i, s:i, s:I, s:i, s:i, s:b, s:b}", "rank", w->rank, "local_rank",
                    w->local_rank, "pid", (json_int_t)w->pid, "exit_code", w->exit_code,
                    "signal", w->term_signal, "ok", ok, "stopped", a->state == LC_STOPPING);
        if (a->state == LC_RUNNING && !ok && fence_lapsed(a, ea_now_ms())) {
            if (!a->node.lease_lost) /* its guard stopped it (and its siblings): not a failure */
                fenced_out(a, ea_now_ms());
        } else if (a->state == LC_RUNNING && ex[i].start_error) { /* 127 or 126: as at start */
            log_error("round %" PRId64 ": cannot start local rank %d: %s", a->group.round,
                      w->local_rank, ex[i].start_error);
            fill_failure(a, w, ex[i].start_error);
            a->state = LC_FAILED;
            agent_report_failure(a);
        } else if (a->state == LC_RUNNING && !ok) {
            fill_failure(a, w, NULL);
            log_error("worker rank %d (local rank %d, pid %ld) failed: %.*s", w->rank,
                      w->local_rank, (long)w->pid, (int)strcspn(a->node.failure.message, "\n"),
                      a->node.failure.message);
            a->state = LC_FAILED;
            AGENT_EACH(fault, a, ea_wall_ms(), "failure", w->rank);
            agent_report_failure(a);
        } else if (a->state == LC_RUNNING || a->state == LC_STOPPING) {
            log_debug("worker rank %d (pid %ld) exited: code %d signal %d", w->rank, (long)w->pid,
                      w->exit_code, w->term_signal);
        }
    }
    free(ex);
    if (a->state == LC_RUNNING && group_all_succeeded(&a->group)) {
        log_info("round %" PRId64 ": all %d local worker(s) finished; waiting for the other nodes",
                 a->group.round, a->group.n);
        a->state = LC_FINISHED;
        a->node.done_pending = true;
        agent_report_done(a);
    }
    if (a->state == LC_STOPPING && a->group.live == 0)
        workers_stopped(a);
}


static void on_store_events(struct agent *a)
{
    struct ea_error err = {0};
    int r = rdzv_on_events(a->node.rdzv, &err);
    if (r < 0)
        agent_store_problem(a, r, &err);
    int64_t gen = 0;
    const struct rdzv_state *s = rdzv_current(a->node.rdzv, &gen);
    log_debug("store: %zu live node(s); state %s, round %" PRId64 ", generation %" PRId64,
              rdzv_live_count(a->node.rdzv), s ? rdzv_status_name(s->status) : "(none)",
              s ? s->round : 0, gen);
    char warning[EA_ERROR_MSG_MAX];
    if (rdzv_take_warning(a->node.rdzv, warning, sizeof(warning)))
        log_warn("%s", warning);
}

/* Progress while not running, and --join-timeout. */
static void check_waiting(struct agent *a, int64_t now)
{
    int64_t gen = 0;
    const struct rdzv_state *s = rdzv_current(a->node.rdzv, &gen);
    bool run_going = s && s->status == RDZV_RUNNING;
    if (run_going || (s && s->status != RDZV_WAITING)) {
        if (run_going && rdzv_my_index(a->node.rdzv) < 0 && a->wait.progress_count != (size_t)-1) {
            if (s->group_world_size >= s->max_nodes)
                log_info("spare: run '%s' is at its maximum of %d node(s); waiting for a slot",
                         a->cfg->run_id, s->max_nodes);
            else
                log_info("run '%s' is running round %" PRId64 " without this node; joining at "
                         "its next round",
                         a->cfg->run_id, s->round);
            a->wait.progress_count = (size_t)-1;
        }
        if (run_going && gen != a->wait.last_generation_logged && rdzv_my_index(a->node.rdzv) >= 0)
            a->wait.progress_count = 0;
        a->wait.since_ms = -1;
        log_progress_end();
        return;
    }
    if (a->wait.since_ms < 0)
        a->wait.since_ms = now;
    size_t live = rdzv_live_count(a->node.rdzv);
    if (live != a->wait.progress_count || now >= a->wait.progress_at_ms) {
        /* below min: how long until --join-timeout; at min or more: until the last call, when
         * the round commits with whoever is there */
        int64_t last_call = rdzv_last_call_ms(a->node.rdzv);
        bool quorum = last_call >= 0 && live >= (size_t)a->cfg->min_nodes;
        int64_t left = quorum ? last_call - now : a->wait.since_ms + a->cfg->join_timeout_ms - now;
        bool in_place = log_progress("waiting for nodes: %zu/%d (min %d, max %d), %s in %.0f s",
                                     live, a->cfg->max_nodes, a->cfg->min_nodes,
                                     a->cfg->max_nodes, quorum ? "last call" : "giving up",
                                     (double)(left > 0 ? left : 0) / 1000.0);
        a->wait.progress_count = live;
        a->wait.progress_at_ms = now + (in_place ? 1000 : 5000); /* a terminal line counts down */
    }
    if (now - a->wait.since_ms >= a->cfg->join_timeout_ms) {
        log_error("rendezvous timed out: %zu of at least %d node(s) present after %.1f s "
                  "(--join-timeout)",
                  live, a->cfg->min_nodes, (double)a->cfg->join_timeout_ms / 1000.0);
        exit_with(a, AGENT_EXIT_RDZV);
    }
}

/* Derive run-level events, and hand the HTTP thread a fresh snapshot. */
void agent_publish(struct agent *a)
{
    int64_t gen = 0;
    const struct rdzv_state *s = rdzv_current(a->node.rdzv, &gen);
    events_set_group_rank(a->obs.events, rdzv_my_index(a->node.rdzv));
    events_observe(a->obs.events, s, gen);
    AGENT_EACH(observe, a, s, gen);
    log_set_round(s ? s->round : 0, gen);
    if (!a->obs.http)
        return;
    static const char *const group_names[] = {[LC_IDLE] = "idle", [LC_RUNNING] = "running",
                                              [LC_STOPPING] = "stopping",
                                              [LC_FINISHED] = "finished", [LC_FAILED] = "failed"};
    struct metrics_snapshot *m = &a->obs.m;
    m->joined = a->obs.joined;
    m->exiting = a->quit.exiting;
    m->lease_lost = a->node.lease_lost;
    m->store_down = a->node.store_down_since_ms >= 0;
    snprintf(m->run_status, sizeof(m->run_status), "%s", s ? rdzv_status_name(s->status) : "none");
    snprintf(m->group_state, sizeof(m->group_state), "%s", group_names[a->state]);
    m->round = s ? s->round : 0;
    m->generation = gen;
    m->world_size = s ? s->world_size : 0;
    m->members = s ? s->group_world_size : 0;
    m->restart_count = s ? s->restart_count : 0;
    m->max_restarts = s ? s->max_restarts : a->cfg->max_restarts;
    m->scale_events = s ? s->scale_events : 0;
    m->live_nodes = (int)rdzv_live_count(a->node.rdzv);
    m->store_resyncs = rdzv_resync_count(a->node.rdzv);
    struct rdzv_stats st;
    rdzv_stats_get(a->node.rdzv, &st);
    m->coord_claims = st.claims;
    m->group_rank = rdzv_my_index(a->node.rdzv);
    m->workers_running = a->state == LC_RUNNING ? a->group.live : 0;
    m->workers_ready = s && s->status == RDZV_RUNNING && a->state == LC_RUNNING &&
                       a->group.live > 0 && a->group.generation == gen && !a->quit.exiting;
    http_publish(a->obs.http, m);
}

/* The faults the components' checks found (a missed heartbeat, a spare that never took its
 * rank): a failure like a worker's exit, charged the same way. */
static void check_faults(struct agent *a, int64_t now)
{
    struct agent_fault f[8];
    for (size_t c = 0; c < agent_n_components; c++) {
        if (!agent_components[c]->check)
            continue;
        size_t n = agent_components[c]->check(a, now, f, sizeof(f) / sizeof(f[0]));
        for (size_t i = 0; i < n; i++) {
            if (a->state != LC_RUNNING || f[i].local_rank < 0 || f[i].local_rank >= a->group.n)
                continue;
            struct group_worker w = a->group.w[f[i].local_rank];
            if (f[i].pid && (w.pid != f[i].pid || !w.alive))
                continue; /* not (or no longer) a worker of the running round */
            w.exit_code = -1; /* still running: there is no exit code */
            fill_failure(a, &w, f[i].message);
            log_error("worker %s; stopping its group", f[i].what);
            a->state = LC_FAILED;
            AGENT_EACH(fault, a, f[i].began_wall, f[i].cause, w.rank);
            agent_report_failure(a);
        }
    }
}


/* ---- the loop: the agent's own steps and sources (agent_setup.c registers them) ------------ */

/* AP_RUNNING's steps: each acts only in that phase, with the deadline it waits for. */
#define STEP_NOW(fn)                                                                           \
    static void step_##fn(void *c, int64_t now)                                                \
    {                                                                                          \
        if (agent_in_run(c))                                                                   \
            fn((struct agent *)c, now);                                                        \
    }
#define STEP(fn)                                                                               \
    static void step_##fn(void *c, int64_t now)                                                \
    {                                                                                          \
        (void)now;                                                                             \
        if (agent_in_run(c))                                                                   \
            fn((struct agent *)c);                                                             \
    }
#define WAKE(fn)                                                                               \
    static int64_t wake_##fn(void *c)                                                          \
    {                                                                                          \
        return agent_in_run(c) ? fn((const struct agent *)c) : -1;                             \
    }
STEP_NOW(agent_liveness_step)
STEP_NOW(agent_store_step)
STEP_NOW(fence_refresh)
STEP_NOW(check_faults)
STEP(agent_publish)
STEP(reconcile)
STEP_NOW(check_waiting)
WAKE(agent_liveness_wake_ms)

static int64_t earliest(int64_t x, int64_t y)
{
    return x < 0 ? y : y < 0 ? x : x < y ? x : y;
}

static int64_t store_wake(const struct agent *a) /* the session's timers, a store retry */
{
    return node_wake_ms(&a->node);
}
WAKE(store_wake)

static int64_t waiting_wake(const struct agent *a) /* the progress line, --join-timeout */
{
    if (a->wait.since_ms < 0)
        return -1;
    return earliest(a->wait.progress_at_ms, a->wait.since_ms + a->cfg->join_timeout_ms);
}
WAKE(waiting_wake)

/* In slot order; the components' steps of a slot run after these (component.h). */
const struct agent_step agent_running_steps[] = {
    {AGENT_AT_STORE, {"liveness", step_agent_liveness_step, wake_agent_liveness_wake_ms, false}},
    {AGENT_AT_STORE, {"store", step_agent_store_step, wake_store_wake, false}}, /* lease, rejoin,
                                                                        reports, session */
    {AGENT_AT_STORE, {"fence", step_fence_refresh, NULL, false}},
    {AGENT_AT_CHECK, {"faults", step_check_faults, NULL, false}},
    {AGENT_AT_DECIDE, {"publish", step_agent_publish, NULL, true}}, /* a round's events first */
    {AGENT_AT_DECIDED, {"reconcile", step_reconcile, NULL, false}},
    {AGENT_AT_END, {"waiting", step_check_waiting, wake_waiting_wake, true}},
    {AGENT_AT_END, {"publish-again", step_agent_publish, NULL, false}},
};
const size_t agent_n_running_steps = sizeof(agent_running_steps) / sizeof(agent_running_steps[0]);

#define IN_RUN (a->stage.id == AP_RUNNING)
AGENT_FD_SOURCE(liveness, IN_RUN, agent_liveness_fd(a), agent_liveness_on_reports(a))
/* the first signal ends the phase (a graceful leave), a second one kills the workers */
AGENT_FD_SOURCE(signal, true, a->quit.sigfd, agent_on_signal(a))
AGENT_FD_SOURCE(store, IN_RUN, kv_event_fd(a->node.kv), on_store_events(a))

/* Process exits: whose they are depends on the phase (the check before joining, the spares
 * warming before joining, the workers): the components take theirs first. */
static void on_process_exits(struct agent *a)
{
    if (a->stage.id == AP_RUNNING || a->stage.id == AP_DRAINING) {
        agent_on_worker_exits(a);
        return;
    }
    struct launch_exit *ex = NULL;
    size_t n = 0;
    struct ea_error err = {0};
    if (launcher_dispatch(a->launcher, &ex, &n, &err) < 0)
        log_error("launcher: %s", err.msg);
    for (size_t i = 0; i < n; i++)
        taken_by_component(a, &ex[i]);
    free(ex);
}

AGENT_FD_SOURCE(workers, a->stage.id != AP_JOINING, launcher_fd(a->launcher), on_process_exits(a))

/* Served in this order after each poll, after the components' sources. */
const struct ea_loop_source agent_sources[] = {
    {"liveness", 1, fd_liveness, on_liveness, false}, /* the ring's reports, or -1 */
    {"signal", 1, fd_signal, on_signal, false},
    {"workers", 1, fd_workers, on_workers, false},
    {"store", 1, fd_store, on_store, false},
};
const size_t agent_n_sources = sizeof(agent_sources) / sizeof(agent_sources[0]);
