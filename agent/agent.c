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
#include "preflight.h"
#include "report.h"

static void exit_with(struct agent *a, int code);

/* An event about the run's current round (see events.h for the names and fields). */
void agent_emit(struct agent *a, const char *name, const char *fmt, ...)
{
    if (!a->events)
        return;
    int64_t gen = 0;
    const struct rdzv_state *s = a->node.rdzv ? rdzv_current(a->node.rdzv, &gen) : NULL;
    va_list ap;
    va_start(ap, fmt);
    events_emitv(a->events, name, s ? s->round : 0, gen, fmt, ap);
    va_end(ap);
}

/* ---- store trouble ---------------------------------------------------------------------- */



/* ---- actions -------------------------------------------------------------------------- */








static void fill_failure(struct agent *a, const struct group_worker *w, const char *message)
{
    struct rdzv_failure *f = &a->node.failure;
    memset(f, 0, sizeof(*f));
    snprintf(f->node_id, sizeof(f->node_id), "%s", a->cfg->node_id);
    snprintf(f->host, sizeof(f->host), "%s", a->host);
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
    a->node.failure_generation = a->group.generation;
    a->node.failure_pending = true;
    a->m.worker_failures++;
    events_emit(a->events, "failure", a->group.round, a->group.generation,
                "{s:i, s:i, s:i, s:i, s:I, s:s}", "rank", f->rank, "local_rank", f->local_rank,
                "exit_code", f->exit_code, "signal", f->signal, "pid", (json_int_t)f->pid,
                "message", f->message);
}

/* Every worker of the round is gone (or held for the next one, --in-place). */
static void workers_stopped(struct agent *a)
{
    a->state = LC_IDLE;
    a->rdzv_since_ms = ea_now_ms();
    events_emit(a->events, "workers_stopped", a->group.round, a->group.generation, "{s:i, s:s}",
                "workers", a->group.n, "reason", a->stop_reason ? a->stop_reason : "?");
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
    char hbdir[PATH_MAX];
    struct group_start gs = {.state = s, .self = m, .topology = cfg_topology(a->cfg),
                             .generation = gen,
                             .master_addr = maddr, .master_port = mport,
                             .envp = a->worker_envp ? a->worker_envp : a->envp,
                             .ifaces = nic_ifaces(a->nic),
                             .dmlc_tracker = agent_builtin_tracker(a)
                                                 ? rdzv_round_key(a->node.rdzv, s->round, "tracker")
                                                 : NULL,
                             .heartbeat_dir = agent_health_arm(a, m->nproc, m->rank_base, hbdir,
                                                               sizeof(hbdir)),
                             .warm = agent_warm_for_round(a)};
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
    agent_health_spawned(a);
    agent_warm_started(a, s);
    a->m.rounds_started++;
    a->m.last_rendezvous_seconds = (double)(now - a->rdzv_since_ms) / 1000.0;
    events_emit(a->events, "workers_started", s->round, gen,
                "{s:i, s:i, s:i, s:i, s:i, s:s, s:f, s:i}", "workers", m->nproc, "rank_first",
                m->rank_base, "rank_last", m->rank_base + m->nproc - 1, "world_size",
                s->world_size, "group_rank", m->group_rank, "master", master,
                "rendezvous_seconds", a->m.last_rendezvous_seconds, "warm", a->group.warm);
    log_info("round %" PRId64 " (generation %" PRId64 "): started %d worker(s), ranks %d-%d of "
             "world %d, group rank %d of %d, master %s; restarts %d/%d, scale events %d",
             s->round, gen, m->nproc, m->rank_base, m->rank_base + m->nproc - 1, s->world_size,
             m->group_rank, s->group_world_size, master, s->restart_count, s->max_restarts,
             s->scale_events);
}

static void exit_with(struct agent *a, int code)
{
    a->exiting = true;
    a->exit_code = code;
}

static void act(struct agent *a, enum lc_action action, const struct rdzv_state *s, int64_t gen)
{
    switch (action) {
    case LC_NOTHING:
        return;
    case LC_STOP_WORKERS:
        a->stop_reason = a->term_signal                  ? "interrupted"
                         : a->node.lease_lost                 ? "lease_lost"
                         : a->state == LC_FAILED         ? "local_failure"
                         : !s                            ? "no_state"
                         : s->round != a->group.round    ? "new_round"
                         : s->status != RDZV_RUNNING     ? rdzv_status_name(s->status)
                                                         : "not_a_member";
        agent_health_stopping(a);
        agent_warm_hold(a, s); /* --in-place: capable workers run on, re-assigned next round */
        if (a->group.live == 0) {
            a->state = LC_STOPPING;
            workers_stopped(a);
            return;
        }
        log_info("stopping %d worker(s) of round %" PRId64 "%s", a->group.live, a->group.round,
                 a->term_signal    ? " (interrupted)"
                 : a->node.lease_lost   ? " (lease lost: fenced out)"
                 : !s              ? ""
                 : s->round != a->group.round ? " (the run moved to a new round)"
                 : s->status == RDZV_FAILING
                     ? " (a worker failed with --max-restarts spent: the run fails unless a "
                       "lost node explains the failure)"
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
        log_error("run '%s' failed: worker failures exceeded --max-restarts %d", a->cfg->run_id,
                  s->max_restarts);
        bool have = rdzv_get_failure(a->node.rdzv, s->failure_round, &f, &err) == 0;
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
        log_info("interrupted by signal %d (SIG%s): workers stopped, leaving", a->term_signal,
                 sigabbrev_np(a->term_signal));
        agent_emit(a, "interrupted", "{s:i, s:s}", "signal", a->term_signal, "signal_name",
                   sigabbrev_np(a->term_signal));
        exit_with(a, 128 + a->term_signal);
        return;
    }
}

/* NIC discovery (nic.c) must finish before a round's master is chosen or its workers start.
 * No common interface fails the round: a rendezvous failure, exit 4. */
static bool nic_ready(struct agent *a, const struct rdzv_state *s)
{
    struct ea_error err = {0};
    int r = nic_step(a->nic, a->node.rdzv, s, rdzv_my_index(a->node.rdzv), ea_now_ms(), &err);
    if (r == NIC_DONE) {
        log_info("round %" PRId64 ": NIC discovery: common interface(s) %s, master address %s "
                 "(%" PRId64 " ms)",
                 s->round, nic_ifaces(a->nic),
                 nic_master_addr(a->nic) ? nic_master_addr(a->nic) : "?", nic_last_ms(a->nic));
        agent_emit(a, "nic_discovered", "{s:s, s:I}", "ifaces", nic_ifaces(a->nic), "ms",
                   (json_int_t)nic_last_ms(a->nic));
    } else if (r == NIC_FAILED) {
        /* close the run, so that members that have not got this far stop too (exit 4) */
        int64_t gen = 0;
        rdzv_current(a->node.rdzv, &gen);
        log_error("round %" PRId64 ": %s; closing the run", s->round, err.msg);
        agent_emit(a, "nic_failed", "{s:s}", "message", err.msg);
        struct ea_error cerr = {0};
        if (rdzv_close(a->node.rdzv, gen, &cerr) < 0)
            log_warn("could not close the run: %s", cerr.msg);
        exit_with(a, AGENT_EXIT_RDZV);
    } else if (r < 0) {
        agent_store_problem(a, r, &err);
    }
    return r == NIC_READY || r == NIC_DONE;
}

/* Ask the lifecycle what to do next, and do it, until it says nothing. */
static void reconcile(struct agent *a)
{
    for (int guard = 0; guard < 8 && !a->exiting; guard++) {
        int64_t gen = 0;
        const struct rdzv_state *s = rdzv_current(a->node.rdzv, &gen);
        struct lc_input in = {
            .group = a->state,
            .group_generation = a->group.generation,
            .live_workers = a->group.live,
            .terminating = a->term_signal != 0 || a->node.lease_lost,
            .have_state = s != NULL,
            .status = s ? s->status : RDZV_WAITING,
            .generation = gen,
            .my_index = rdzv_my_index(a->node.rdzv),
            .master_known = s && rdzv_master(a->node.rdzv, s->round) != NULL &&
                            (!agent_builtin_tracker(a) || rdzv_round_key(a->node.rdzv, s->round, "tracker")),
        };
        if (a->node.lease_lost && in.live_workers == 0 && !a->term_signal)
            return; /* the loop rejoins first (unless we are leaving anyway) */
        /* every member probes as soon as the round is committed (group rank 0 publishes the
         * master only afterwards), overlapping the stop of the previous round's workers */
        bool nic_ok = !(s && s->status == RDZV_RUNNING && in.my_index >= 0 &&
                        a->group.generation != gen) ||
                      nic_ready(a, s);
        if (a->exiting)
            return;
        enum lc_action action = lc_decide(&in);
        if (action == LC_NOTHING)
            return;
        if ((action == LC_PUBLISH_MASTER || action == LC_START_WORKERS) &&
            (!nic_ok || !agent_preflight_round(a, gen)))
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
    int64_t until = agent_liveness_fence_held(a, a->fence_until); /* the ring's thread moves it */
    return until > 0 && now >= until;
}

static void fenced_out(struct agent *a, int64_t now)
{
    log_error("the workers' deadline (the lease's, or the liveness ring's) passed %.1f s ago "
              "(was this agent stopped or starved?): this node is fenced out; the workers' "
              "guards stop them; rejoining",
              (double)(now - agent_liveness_fence_held(a, a->fence_until)) / 1000.0);
    a->node.lease_lost = true;
    agent_emit(a, "lease_lost", "{s:s, s:i}", "reason", "agent stalled past its lease",
               "workers_running", a->group.live);
}

/* Hand the lease's deadline to the guards (after agent_store_step renewed or rejoined). */
static void fence_refresh(struct agent *a, int64_t now)
{
    if (fence_lapsed(a, now) && a->group.live > 0 && !a->node.lease_lost)
        fenced_out(a, now);
    a->fence_until = agent_liveness_fence(a, rdzv_lease_valid_until(a->node.rdzv));
}

/* ---- events ---------------------------------------------------------------------------- */

void agent_on_worker_exits(struct agent *a)
{
    struct launch_exit *ex = NULL;
    size_t n = 0;
    struct ea_error err = {0};
    if (launcher_dispatch(a->launcher, &ex, &n, &err) < 0) {
        log_error("launcher: %s", err.msg);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (agent_warm_on_exit(a, &ex[i])) /* a parked spare (--warm-workers) */
            continue;
        struct group_worker *w = group_on_exit(&a->group, &ex[i]);
        if (!w) {
            pf_on_exit(a->pf, &ex[i]); /* --preflight-every-round's check */
            continue;
        }
        bool ok = w->exit_code == 0 && w->term_signal == 0;
        hb_forget(a->hb, w->local_rank, ea_now_ms());
        events_emit(a->events, "worker_exited", a->group.round, a->group.generation,
                    "{s:i, s:i, s:I, s:i, s:i, s:b, s:b}", "rank", w->rank, "local_rank",
                    w->local_rank, "pid", (json_int_t)w->pid, "exit_code", w->exit_code,
                    "signal", w->term_signal, "ok", ok, "stopped", a->state == LC_STOPPING);
        if (a->state == LC_RUNNING && !ok && fence_lapsed(a, ea_now_ms())) {
            if (!a->node.lease_lost) /* its guard stopped it (and its siblings): not a failure */
                fenced_out(a, ea_now_ms());
        } else if (a->state == LC_RUNNING && !ok) {
            fill_failure(a, w, NULL);
            log_error("worker rank %d (local rank %d, pid %ld) failed: %.*s", w->rank,
                      w->local_rank, (long)w->pid, (int)strcspn(a->node.failure.message, "\n"),
                      a->node.failure.message);
            a->state = LC_FAILED;
            agent_health_fault(a, ea_wall_ms(), "failure", w->rank);
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


static void on_preemption(struct agent *a)
{
    if (a->term_signal)
        return;
    log_info("preemption notice '%s': stopping workers and leaving the run", a->preempt.path);
    a->term_signal = SIGTERM; /* the same graceful leave, and exit 143 */
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
        if (run_going && rdzv_my_index(a->node.rdzv) < 0 && a->progress_count != (size_t)-1) {
            if (s->group_world_size >= s->max_nodes)
                log_info("spare: run '%s' is at its maximum of %d node(s); waiting for a slot",
                         a->cfg->run_id, s->max_nodes);
            else
                log_info("run '%s' is running round %" PRId64 " without this node; joining at "
                         "its next round",
                         a->cfg->run_id, s->round);
            a->progress_count = (size_t)-1;
        }
        if (run_going && gen != a->last_generation_logged && rdzv_my_index(a->node.rdzv) >= 0)
            a->progress_count = 0;
        a->waiting_since_ms = -1;
        log_progress_end();
        return;
    }
    if (a->waiting_since_ms < 0)
        a->waiting_since_ms = now;
    size_t live = rdzv_live_count(a->node.rdzv);
    if (live != a->progress_count || now >= a->progress_at_ms) {
        /* below min: how long until --join-timeout; at min or more: until the last call, when
         * the round commits with whoever is there */
        int64_t last_call = rdzv_last_call_ms(a->node.rdzv);
        bool quorum = last_call >= 0 && live >= (size_t)a->cfg->min_nodes;
        int64_t left = quorum ? last_call - now : a->waiting_since_ms + a->cfg->join_timeout_ms - now;
        bool in_place = log_progress("waiting for nodes: %zu/%d (min %d, max %d), %s in %.0f s",
                                     live, a->cfg->max_nodes, a->cfg->min_nodes,
                                     a->cfg->max_nodes, quorum ? "last call" : "giving up",
                                     (double)(left > 0 ? left : 0) / 1000.0);
        a->progress_count = live;
        a->progress_at_ms = now + (in_place ? 1000 : 5000); /* a terminal line counts down */
    }
    if (now - a->waiting_since_ms >= a->cfg->join_timeout_ms) {
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
    events_set_group_rank(a->events, rdzv_my_index(a->node.rdzv));
    events_observe(a->events, s, gen);
    agent_health_observe(a, s, gen);
    log_set_round(s ? s->round : 0, gen);
    if (!a->http)
        return;
    static const char *const group_names[] = {[LC_IDLE] = "idle", [LC_RUNNING] = "running",
                                              [LC_STOPPING] = "stopping",
                                              [LC_FINISHED] = "finished", [LC_FAILED] = "failed"};
    struct metrics_snapshot *m = &a->m;
    m->joined = a->joined;
    m->exiting = a->exiting;
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
    m->group_rank = rdzv_my_index(a->node.rdzv);
    m->workers_running = a->state == LC_RUNNING ? a->group.live : 0;
    memcpy(m->phases, a->ph.hist, sizeof(m->phases));
    m->workers_ready = s && s->status == RDZV_RUNNING && a->state == LC_RUNNING &&
                       a->group.live > 0 && a->group.generation == gen && !a->exiting;
    http_publish(a->http, m);
}

/* A local rank missed its heartbeat deadline: a failure like an exit, charged the same way. */
static void check_hang(struct agent *a, int64_t now)
{
    struct hb_hang h;
    if (agent_health_tick(a, now, &h) <= 0 || a->state != LC_RUNNING ||
        h.local_rank >= a->group.n)
        return;
    struct group_worker w = a->group.w[h.local_rank];
    w.exit_code = -1; /* still running: there is no exit code */
    fill_failure(a, &w, h.message);
    log_error("worker %s (local rank %d, pid %ld); stopping its group", h.message, w.local_rank,
              (long)w.pid);
    a->state = LC_FAILED;
    agent_health_fault(a, ea_wall_ms() - h.silent_ms, "hang", w.rank);
    agent_report_failure(a);
}

/* A warm spare this round took never sent its ready line, or a bad one: a failed start. */
static void check_warm(struct agent *a, int64_t now)
{
    struct warm_fault f;
    while (agent_warm_check(a, now, &f) > 0) {
        if (a->state != LC_RUNNING || f.local_rank >= a->group.n ||
            a->group.w[f.local_rank].pid != f.pid || !a->group.w[f.local_rank].alive)
            continue; /* not (or no longer) a worker of the running round */
        struct group_worker w = a->group.w[f.local_rank];
        w.exit_code = -1; /* still running: there is no exit code */
        fill_failure(a, &w, f.message);
        log_error("worker rank %d: %s; stopping its group", w.rank, f.message);
        a->state = LC_FAILED;
        agent_health_fault(a, ea_wall_ms(), "failure", w.rank);
        agent_report_failure(a);
    }
}


/* ---- the loop: what runs before each poll, and what each fd wakes ------------------------- */

/* AP_RUNNING's steps: a pass's work in order, each with the deadline it waits for (ea_loop.h). */
#define RUNNING(c) (((const struct agent *)(c))->stage.id == AP_RUNNING)
#define STEP_NOW(fn)                                                                           \
    static void step_##fn(void *c, int64_t now)                                                \
    {                                                                                          \
        if (RUNNING(c))                                                                        \
            fn((struct agent *)c, now);                                                        \
    }
#define STEP(fn)                                                                               \
    static void step_##fn(void *c, int64_t now)                                                \
    {                                                                                          \
        (void)now;                                                                             \
        if (RUNNING(c))                                                                        \
            fn((struct agent *)c);                                                             \
    }
#define WAKE(fn)                                                                               \
    static int64_t wake_##fn(void *c)                                                          \
    {                                                                                          \
        return RUNNING(c) ? fn((const struct agent *)c) : -1;                                  \
    }
STEP_NOW(agent_liveness_step)
STEP_NOW(agent_store_step)
STEP_NOW(fence_refresh)
STEP_NOW(check_warm)
STEP_NOW(check_hang)
STEP(agent_publish)
STEP(agent_warm_tick)
STEP(reconcile)
STEP_NOW(check_waiting)
STEP(agent_retire_tracker)
WAKE(agent_liveness_wake_ms)
WAKE(agent_warm_wake_ms)
WAKE(agent_health_wake_ms)

static void preflight_tick(struct agent *a, int64_t now)
{
    pf_tick(a->pf, now);
}
STEP_NOW(preflight_tick)

static int64_t preflight_wake(const struct agent *a)
{
    return pf_wake_ms(a->pf);
}
WAKE(preflight_wake)

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
    if (a->waiting_since_ms < 0)
        return -1;
    return earliest(a->progress_at_ms, a->waiting_since_ms + a->cfg->join_timeout_ms);
}
WAKE(waiting_wake)

static int64_t nic_wake(const struct agent *a)
{
    return nic_wake_ms(a->nic);
}
WAKE(nic_wake)

static int64_t tracker_wake(const struct agent *a)
{
    return a->tracker ? tracker_wake_ms(a->tracker) : -1;
}
WAKE(tracker_wake)

/* The phases before and after AP_RUNNING: each acts only in its own phase. */
#define PHASE_STEP(phase, fn)                                                                  \
    static void phase_##fn(void *c, int64_t now)                                               \
    {                                                                                          \
        struct agent *a = c;                                                                   \
        if (a->stage.id == (phase) && !a->stage.over)                                          \
            fn(a, now);                                                                        \
    }
#define PHASE_WAKE(phase, fn)                                                                  \
    static int64_t phase_wake_##fn(void *c)                                                    \
    {                                                                                          \
        const struct agent *a = c;                                                             \
        return a->stage.id == (phase) && !a->stage.over ? fn(a) : -1;                          \
    }
PHASE_STEP(AP_PREFLIGHT, agent_preflight_step)
PHASE_WAKE(AP_PREFLIGHT, agent_preflight_wake_ms)
PHASE_STEP(AP_WARMING, agent_warming_step)
PHASE_WAKE(AP_WARMING, agent_warming_wake_ms)
PHASE_STEP(AP_JOINING, agent_joining_step)
PHASE_STEP(AP_DRAINING, agent_draining_step)

static int64_t stage_deadline(const struct agent *a)
{
    return a->stage.deadline;
}
PHASE_WAKE(AP_JOINING, stage_deadline)

static int64_t draining_wake(void *c)
{
    const struct agent *a = c;
    return a->stage.id == AP_DRAINING ? a->stage.deadline : -1;
}

static const struct ea_loop_step agent_steps[] = {
    {"preflight-gate", phase_agent_preflight_step, phase_wake_agent_preflight_wake_ms, true},
    {"warming", phase_agent_warming_step, phase_wake_agent_warming_wake_ms, true},
    {"joining", phase_agent_joining_step, phase_wake_stage_deadline, true},
    {"draining", phase_agent_draining_step, draining_wake, true},
    /* AP_RUNNING */
    {"liveness", step_agent_liveness_step, wake_agent_liveness_wake_ms, false},
    {"store", step_agent_store_step, wake_store_wake, false}, /* lease, rejoin, reports, session */
    {"fence", step_fence_refresh, NULL, false},
    /* a spare that never took its rank cannot beat either: before the hang check */
    {"warm-check", step_check_warm, wake_agent_warm_wake_ms, false},
    {"hang", step_check_hang, wake_agent_health_wake_ms, false},
    {"preflight", step_preflight_tick, wake_preflight_wake, false},
    {"publish", step_agent_publish, NULL, true}, /* before acting: a round's events first */
    {"warm-park", step_agent_warm_tick, NULL, false}, /* spares parked before the first round */
    {"reconcile", step_reconcile, NULL, false},
    {"warm-refill", step_agent_warm_tick, NULL, true}, /* after a round took the parked spares */
    {"waiting", step_check_waiting, wake_waiting_wake, true},
    {"publish-again", step_agent_publish, NULL, false},
    {"nic", NULL, wake_nic_wake, false},
    {"tracker", step_agent_retire_tracker, wake_tracker_wake, false},
};

/* One fd of the agent's, ready for reading, polled in the phases `when` says. */
#define SOURCE_FD(name, when, get, on)                                                         \
    static size_t fd_##name(void *c, struct pollfd *fds, size_t max)                           \
    {                                                                                          \
        (void)max;                                                                             \
        const struct agent *a = c;                                                             \
        if (!(when))                                                                           \
            return 0;                                                                          \
        fds[0] = (struct pollfd){.fd = get, .events = POLLIN};                                 \
        return 1;                                                                              \
    }                                                                                          \
    static void on_##name(void *c, const struct pollfd *fds, size_t n, int64_t now)            \
    {                                                                                          \
        (void)now;                                                                             \
        struct agent *a = c;                                                                   \
        if (n && (fds[0].revents & POLLIN))                                                    \
            on;                                                                                \
    }
#define IN_RUN (a->stage.id == AP_RUNNING)
SOURCE_FD(liveness, IN_RUN, agent_liveness_fd(a), agent_liveness_on_reports(a))
SOURCE_FD(heartbeat, IN_RUN, hb_fd(a->hb), hb_on_events(a->hb, ea_now_ms()))
SOURCE_FD(warm, IN_RUN || a->stage.id == AP_WARMING, agent_warm_fd(a), agent_warm_on_events(a))
/* the first signal ends the phase (a graceful leave), a second one kills the workers */
SOURCE_FD(signal, true, a->sigfd, agent_on_signal(a))
SOURCE_FD(preempt, IN_RUN, a->preempt.fd, if (preempt_check(&a->preempt)) on_preemption(a))
SOURCE_FD(store, IN_RUN, kv_event_fd(a->kv), on_store_events(a))

static size_t fds_tracker(void *c, struct pollfd *fds, size_t max)
{
    const struct agent *a = c;
    return IN_RUN && a->tracker ? tracker_pollfds(a->tracker, fds, max) : 0;
}

static void on_tracker(void *c, const struct pollfd *fds, size_t n, int64_t now)
{
    struct agent *a = c;
    if (IN_RUN && a->tracker) /* also on a timeout: its deadlines */
        tracker_on_poll(a->tracker, fds, n, now);
}

static size_t fds_nic(void *c, struct pollfd *fds, size_t max)
{
    const struct agent *a = c;
    return IN_RUN ? nic_pollfds(a->nic, fds, max) : 0; /* listener, probes */
}

static void on_nic(void *c, const struct pollfd *fds, size_t n, int64_t now)
{
    (void)now;
    nic_on_poll(((struct agent *)c)->nic, fds, n);
}

/* Process exits: whose they are depends on the phase (the check before joining, the spares
 * warming before joining, the workers). */
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
    for (size_t i = 0; i < n; i++) {
        if (a->stage.id == AP_PREFLIGHT)
            agent_preflight_on_exit(a, &ex[i]);
        else if (a->stage.id == AP_WARMING)
            agent_warm_on_exit(a, &ex[i]); /* only spares run before the join */
    }
    free(ex);
}

SOURCE_FD(workers, a->stage.id != AP_JOINING, launcher_fd(a->launcher), on_process_exits(a))

/* Served in this order after each poll. */
static const struct ea_loop_source agent_sources[] = {
    {"tracker", TRACKER_POLL_MAX, fds_tracker, on_tracker, true},
    {"nic", NIC_POLL_MAX, fds_nic, on_nic, false},
    {"liveness", 1, fd_liveness, on_liveness, false}, /* the ring's reports, or -1 */
    {"heartbeat", 1, fd_heartbeat, on_heartbeat, false}, /* inotify, while first beats due */
    {"warm", 1, fd_warm, on_warm, false},                /* spares' sockets (--warm-workers) */
    {"signal", 1, fd_signal, on_signal, false},
    {"preempt", 1, fd_preempt, on_preempt, false}, /* -1 without --preemption-file */
    {"workers", 1, fd_workers, on_workers, false},
    {"store", 1, fd_store, on_store, false},
};

/* A pass ends early once its phase is over (or the run is being left): agent_setup.c moves on. */
static bool pass_done(void *c)
{
    const struct agent *a = c;
    return a->stage.over || a->stage.id == AP_DONE || (a->stage.id == AP_RUNNING && a->exiting);
}

int agent_loop_create(struct agent *a)
{
    struct ea_loop *l = ea_loop_create(a->hooks->clock, pass_done, a);
    int r = l ? 0 : -ENOMEM;
    if (r == 0 && a->hooks->step) /* a test's script, first of all */
        r = ea_loop_add_step(l, a->hooks->step, a->hooks->step_ctx);
    for (size_t i = 0; r == 0 && i < sizeof(agent_steps) / sizeof(agent_steps[0]); i++)
        r = ea_loop_add_step(l, &agent_steps[i], a);
    for (size_t i = 0; r == 0 && i < sizeof(agent_sources) / sizeof(agent_sources[0]); i++)
        r = ea_loop_add_source(l, &agent_sources[i], a);
    if (r < 0) {
        ea_loop_destroy(l);
        return r;
    }
    a->loop = l;
    return 0;
}
