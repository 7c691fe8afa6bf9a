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
    if (!a->hb)
        return NULL;
    snprintf(buf, size, "%s/heartbeat", a->workdir);
    struct ea_error err = {0};
    if (hb_arm(a->hb, buf, n, rank_base, ea_now_ms(), &err) < 0) {
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
    const struct ph_record *r = &a->ph.last;
    char *json = ph_record_json(r);
    json_t *o = json ? json_loads(json, 0, NULL) : NULL;
    if (o && a->events) {
        json_object_del(o, "round");
        events_emit(a->events, "recovery", r->round, a->group.generation, "O", o);
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
    if (ph_spawned(&a->ph, ea_wall_ms(), ea_now_ms(), a->hb != NULL, a->group.warm > 0))
        recovery_done(a);
}

void agent_health_fault(struct agent *a, int64_t fault_wall, const char *cause, int rank)
{
    int64_t now = ea_wall_ms();
    ph_detect(&a->ph, fault_wall, now, cause);
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
    hb_disarm(a->hb);
    /* another node's fault (its `detect` key), else: observed here, when it began is unknown */
    ph_detect_remote(&a->ph, rdzv_round_key(a->node.rdzv, a->group.round, "detect"));
    ph_detect(&a->ph, -1, ea_wall_ms(), "membership");
}

void agent_health_observe(struct agent *a, const struct rdzv_state *s, int64_t gen)
{
    (void)gen;
    if (!s || s->status != RDZV_RUNNING || s->round == a->ph_round || rdzv_my_index(a->node.rdzv) < 0)
        return;
    a->ph_round = s->round;
    if (a->group.round > 0)
        ph_detect_remote(&a->ph, rdzv_round_key(a->node.rdzv, a->group.round, "detect"));
    int64_t now = ea_now_ms(), wall = ea_wall_ms();
    ph_committed(&a->ph, s->round, wall, wall - (now - a->rdzv_since_ms));
}

int agent_health_tick(struct agent *a, int64_t now, struct hb_hang *ret)
{
    int64_t assigned = ph_waiting_assigned(&a->ph)
                           ? warm_assigned_ms(a->warm, a->group.generation) : -1;
    if (assigned >= 0 && ph_assigned(&a->ph, ea_wall_ms() - (now - assigned)))
        recovery_done(a);
    if (!a->hb)
        return 0;
    int64_t ready = hb_ready_ms(a->hb);
    if (ready >= 0 && ph_waiting_ready(&a->ph) && ph_ready(&a->ph, ready))
        recovery_done(a);
    return hb_check(a->hb, now, ret);
}

int64_t agent_health_wake_ms(const struct agent *a)
{
    return hb_wake_ms(a->hb);
}
