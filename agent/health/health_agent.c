// SPDX-License-Identifier: Apache-2.0
/* agent health hooks: hang detection (health/heartbeat.c) and the per-phase recovery clock
 * (observe/phases.c) tied to the agent's round lifecycle; kept out of agent.c. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_internal.h"
#include "ea_time.h"
#include "log.h"

const char *agent_health_arm(struct agent *a, int n, int rank_base, char *buf, size_t size)
{
    if (!a->health.hb)
        return NULL;
    snprintf(buf, size, "%s/heartbeat", a->me.workdir);
    struct ea_error err = {0};
    if (hb_arm(a->health.hb, buf, n, rank_base, ea_now_ms(), &err) < 0) {
        log_error("%s: hang detection is off for this round", err.msg);
        return NULL;
    }
    return buf;
}

/* A round's phases are complete: emit them, (group rank 0) publish them, and log them last, so
 * that whoever reads the log line finds the rest. The histograms reach /metrics with the loop's
 * next agent_publish, in the same pass (this file never calls back into the loop). */
static void recovery_done(struct agent *a)
{
    const struct ph_record *r = &a->health.ph.last;
    char *json = ph_record_json(r);
    json_t *o = json ? json_loads(json, 0, NULL) : NULL;
    if (o && a->obs.events) {
        json_object_del(o, "round");
        events_emit(a->obs.events, "recovery", r->round, a->group.generation, "O", o);
    }
    json_decref(o);
    /* a cold start is no recovery: its phases are in the event and the histograms only */
    if (json && rdzv_my_index(a->node.rdzv) == 0 && strcmp(r->cause, "first") != 0 &&
        a->node.store_down_since_ms < 0) {
        struct ea_error err = {0};
        if (rdzv_publish_round_key(a->node.rdzv, r->round, "recovery", json, &err) < 0)
            log_debug("could not publish round %" PRId64 "'s recovery record: %s", r->round,
                      err.msg);
    }
    free(json);
    char text[160];
    ph_format(r, text, sizeof(text));
    /* not "round N (": tools look for that as the start of round N */
    log_info("round %" PRId64 ": recovery phases (%s): %s", r->round, r->cause, text);
}

void agent_health_spawned(struct agent *a)
{
    /* warm spares (--warm-workers): "assigned" instead of "spawn", until each took its rank */
    if (ph_spawned(&a->health.ph, ea_wall_ms(), ea_now_ms(), a->health.hb != NULL, a->group.warm > 0))
        recovery_done(a);
}

void agent_health_fault(struct agent *a, int64_t fault_wall, const char *cause, int rank)
{
    int64_t now = ea_wall_ms();
    ph_detect(&a->health.ph, fault_wall, now, cause);
    if (a->node.store_down_since_ms >= 0)
        return; /* the failure report comes first; it is retried, this is not worth a wait */
    char v[384];
    ph_detect_json(fault_wall, now, cause, a->cfg->node_id, rank, v, sizeof(v));
    struct ea_error err = {0};
    /* before the failure moves the run on: the others' watch delivers it first */
    if (rdzv_publish_round_key(a->node.rdzv, a->group.round, "detect", v, &err) < 0)
        log_debug("could not publish the detect time of round %" PRId64 ": %s", a->group.round,
                  err.msg);
}

void agent_health_stopping(struct agent *a)
{
    hb_disarm(a->health.hb);
    /* another node's fault (its `detect` key), else: observed here, when it began is unknown */
    ph_detect_remote(&a->health.ph, rdzv_round_key(a->node.rdzv, a->group.round, "detect"));
    ph_detect(&a->health.ph, -1, ea_wall_ms(), "membership");
}

void agent_health_observe(struct agent *a, const struct rdzv_state *s, int64_t gen)
{
    (void)gen;
    if (!s || s->status != RDZV_RUNNING || s->round == a->health.ph_round || rdzv_my_index(a->node.rdzv) < 0)
        return;
    a->health.ph_round = s->round;
    if (a->group.round > 0)
        ph_detect_remote(&a->health.ph, rdzv_round_key(a->node.rdzv, a->group.round, "detect"));
    int64_t now = ea_now_ms(), wall = ea_wall_ms();
    ph_committed(&a->health.ph, s->round, wall, wall - (now - a->obs.rdzv_since_ms));
}

int agent_health_tick(struct agent *a, int64_t now, struct hb_hang *ret)
{
    int64_t assigned = ph_waiting_assigned(&a->health.ph)
                           ? warm_assigned_ms(a->warm.spares, a->group.generation) : -1;
    if (assigned >= 0 && ph_assigned(&a->health.ph, ea_wall_ms() - (now - assigned)))
        recovery_done(a);
    if (!a->health.hb)
        return 0;
    int64_t ready = hb_ready_ms(a->health.hb);
    if (ready >= 0 && ph_waiting_ready(&a->health.ph) && ph_ready(&a->health.ph, ready))
        recovery_done(a);
    return hb_check(a->health.hb, now, ret);
}

int64_t agent_health_wake_ms(const struct agent *a)
{
    return hb_wake_ms(a->health.hb);
}

/* ---- the component ----------------------------------------------------------------------- */

static int64_t wake_hang(void *c)
{
    return agent_in_run(c) ? agent_health_wake_ms(c) : -1;
}

/* inotify, while first beats are due */
AGENT_FD_SOURCE(heartbeat, agent_in_run(a), hb_fd(a->health.hb),
                hb_on_events(a->health.hb, ea_now_ms()))

static void health_starting(struct agent *a, const struct rdzv_state *s, struct group_start *gs)
{
    (void)s;
    gs->heartbeat_dir = agent_health_arm(a, gs->self->nproc, gs->self->rank_base,
                                         a->health.hbdir, sizeof(a->health.hbdir));
}

static void health_started(struct agent *a, const struct rdzv_state *s)
{
    (void)s;
    agent_health_spawned(a);
}

static void health_stopping(struct agent *a, const struct rdzv_state *s)
{
    (void)s;
    agent_health_stopping(a);
}

static void health_worker_exited(struct agent *a, const struct group_worker *w)
{
    hb_forget(a->health.hb, w->local_rank, ea_now_ms());
}

/* A local rank missed its heartbeat deadline: a failure like an exit, charged the same way. */
static size_t health_check(struct agent *a, int64_t now, struct agent_fault *ret, size_t max)
{
    struct hb_hang h;
    if (max == 0 || agent_health_tick(a, now, &h) <= 0 || h.local_rank >= a->group.n)
        return 0;
    *ret = (struct agent_fault){.local_rank = h.local_rank,
                                .began_wall = ea_wall_ms() - h.silent_ms, .cause = "hang"};
    snprintf(ret->message, sizeof(ret->message), "%s", h.message);
    snprintf(ret->what, sizeof(ret->what), "%s (local rank %d, pid %ld)", h.message,
             h.local_rank, (long)a->group.w[h.local_rank].pid);
    return 1;
}

static void health_observe(struct agent *a, const struct rdzv_state *s, int64_t gen)
{
    agent_health_observe(a, s, gen);
    memcpy(a->obs.m.phases, a->health.ph.hist, sizeof(a->obs.m.phases));
}

static const struct agent_step health_steps[] = {
    {AGENT_AT_CHECK, {"hang", NULL, wake_hang, false}}, /* its check: health_check */
};

static const struct ea_loop_source health_sources[] = {
    {"heartbeat", 1, fd_heartbeat, on_heartbeat, false},
};

const struct agent_component agent_health_component = {
    .name = "health",
    AGENT_STEPS(health_steps),
    AGENT_SOURCES(health_sources),
    .starting = health_starting,
    .started = health_started,
    .stopping = health_stopping,
    .worker_exited = health_worker_exited,
    .check = health_check,
    .fault = agent_health_fault,
    .observe = health_observe,
};
