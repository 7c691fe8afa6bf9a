// SPDX-License-Identifier: Apache-2.0
/* agent preflight gate: run --preflight before the node joins; while it fails, the node stays
 * out, says why in one leased held/<node-id> key (status lists it) and retries after the
 * cooldown. A node evicted as a straggler (a->health.out_until, progress/progress_agent.c) is
 * held out here the same way until its cooldown ends. The check itself is health/preflight.c. */
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "agent_internal.h"
#include "ea_time.h"
#include "health_view.h"
#include "keys.h"
#include "log.h"
#include "preflight.h"

/* The held/<node-id> key and the lease that keeps it only while this agent lives. */
struct held {
    char key[700];
    int64_t lease;
    int64_t renew_at; /* monotonic; -1 without a lease */
    int64_t since_wall;
};

static int64_t earliest(int64_t a, int64_t b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

static void held_put(struct agent *a, struct held *h, const char *reason)
{
    struct ea_error err = {0};
    if (!h->lease) {
        if (kv_lease_grant(a->node.kv, a->cfg->lease_ttl_ms, &h->lease, &err) < 0) {
            log_warn("preflight: cannot tell the store this node is held out: %s", err.msg);
            h->lease = 0;
            return;
        }
        h->renew_at = ea_now_ms() + a->cfg->lease_ttl_ms / 3;
    }
    char *v = hview_held_json(a->cfg->node_id, reason, (long long)h->since_wall);
    int64_t rev = 0;
    if (v && kv_put(a->node.kv, h->key, v, strlen(v), h->lease, &rev, &err) < 0)
        log_warn("preflight: cannot write '%s': %s", h->key, err.msg);
    free(v);
}

static void held_keepalive(struct agent *a, struct held *h, int64_t now)
{
    if (!h->lease || now < h->renew_at)
        return;
    struct ea_error err = {0};
    int64_t ttl = 0;
    if (kv_lease_keepalive(a->node.kv, h->lease, &ttl, &err) < 0)
        h->lease = 0; /* expired (the key with it): the next failure writes it again */
    h->renew_at = now + a->cfg->lease_ttl_ms / 3;
}

static void held_clear(struct agent *a, struct held *h)
{
    struct ea_error err = {0};
    if (h->lease && kv_lease_revoke(a->node.kv, h->lease, &err) < 0)
        log_warn("preflight: cannot remove '%s': %s", h->key, err.msg);
    h->lease = 0;
}

/* AP_PREFLIGHT's state: the held key, and whether the check runs or the node waits out the
 * cooldown after a failure. */
struct gate {
    struct held h;
    bool cooling;  /* failed: waiting until `until` to check again */
    int64_t until; /* monotonic */
};

static void gate_end(struct agent *a, int code)
{
    struct gate *g = a->stage.data;
    held_clear(a, &g->h);
    free(g);
    a->stage.data = NULL;
    agent_phase_over(a, code);
}

/* Evicted (--straggler-action evict): held out until a->health.out_until, then the check (with
 * --preflight) or the join. */
static void gate_hold(struct agent *a, struct gate *g, int64_t now)
{
    g->cooling = true;
    g->until = a->health.out_until;
    g->h.since_wall = ea_wall_ms();
    held_put(a, &g->h, a->health.out_reason);
    log_info("%s: this node stays out of run '%s' for %.0f s (--straggler-cooldown), then "
             "rejoins as a spare",
             a->health.out_reason, a->cfg->run_id, (double)(g->until - now) / 1000.0);
    a->health.out_until = 0;
}

void agent_preflight_enter(struct agent *a)
{
    const struct cfg *c = a->cfg;
    int64_t now = ea_now_ms();
    bool held = a->health.out_until > now;
    if (!c->preflight && !held) {
        agent_phase_over(a, 0);
        return;
    }
    struct ea_error err = {0};
    if (c->preflight && !a->health.pf &&
        pf_create(c->preflight, c->preflight_timeout_ms, a->launcher, a->me.workdir, a->env.envp,
                  &a->health.pf, &err) < 0) {
        log_error("%s", err.msg);
        agent_phase_over(a, AGENT_EXIT_RDZV);
        return;
    }
    struct gate *g = calloc(1, sizeof(*g));
    if (!g) {
        log_error("preflight: out of memory");
        agent_phase_over(a, AGENT_EXIT_RDZV);
        return;
    }
    g->h.renew_at = -1;
    rdzv_key_held(a->me.prefix, c->node_id, g->h.key, sizeof(g->h.key));
    a->stage.data = g;
    if (held)
        gate_hold(a, g, now);
    else
        pf_start(a->health.pf, now);
}

/* The check has finished: passed (the phase is over), or failed (held out for the cooldown). */
static void gate_judge(struct agent *a, struct gate *g, int64_t now)
{
    const struct cfg *c = a->cfg;
    if (pf_state(a->health.pf) == PF_PASSED) {
        log_info("preflight check passed (%.1f s)", (double)pf_duration_ms(a->health.pf) / 1000.0);
        a->health.pf_fresh = true;
        events_emit(a->obs.events, "preflight", 0, 0, "{s:b, s:f}", "ok", 1, "seconds",
                    (double)pf_duration_ms(a->health.pf) / 1000.0);
        gate_end(a, 0);
        return;
    }
    if (!g->h.since_wall)
        g->h.since_wall = ea_wall_ms();
    held_put(a, &g->h, pf_reason(a->health.pf)); /* first: whoever reads the log finds it in status */
    log_error("preflight check '%s' failed: %s; this node stays out of run '%s', checking "
              "again in %.0f s",
              c->preflight, pf_reason(a->health.pf), c->run_id,
              (double)c->preflight_cooldown_ms / 1000.0);
    events_emit(a->obs.events, "preflight", 0, 0, "{s:b, s:f, s:s}", "ok", 0, "seconds",
                (double)pf_duration_ms(a->health.pf) / 1000.0, "reason", pf_reason(a->health.pf));
    g->cooling = true;
    g->until = now + c->preflight_cooldown_ms;
}

void agent_preflight_step(struct agent *a, int64_t now)
{
    struct gate *g = a->stage.data;
    if (a->quit.term_signal) {
        gate_end(a, 128 + a->quit.term_signal);
        return;
    }
    if (g->cooling && now >= g->until) {
        g->cooling = false;
        if (!a->health.pf) { /* an eviction's cooldown, without --preflight: over */
            log_info("the cooldown is over: joining run '%s' again", a->cfg->run_id);
            gate_end(a, 0);
            return;
        }
        pf_start(a->health.pf, now);
    }
    if (!g->cooling && pf_state(a->health.pf) != PF_RUNNING) {
        gate_judge(a, g, now);
        if (a->stage.over)
            return;
    }
    pf_tick(a->health.pf, now);
    held_keepalive(a, &g->h, now);
}

int64_t agent_preflight_wake_ms(const struct agent *a)
{
    const struct gate *g = a->stage.data;
    if (!g)
        return -1;
    return earliest(earliest(g->cooling ? g->until : -1, pf_wake_ms(a->health.pf)),
                    g->h.lease ? g->h.renew_at : -1);
}

void agent_preflight_on_exit(struct agent *a, const struct launch_exit *e)
{
    pf_on_exit(a->health.pf, e);
}

bool agent_preflight_round(struct agent *a, int64_t gen)
{
    if (!a->health.pf || !a->cfg->preflight_every_round || a->health.pf_gen == gen)
        return true;
    if (a->health.pf_fresh) {
        a->health.pf_fresh = false;
        a->health.pf_gen = gen;
        return true;
    }
    if (a->health.pf_run_gen != gen) {
        if (pf_state(a->health.pf) == PF_RUNNING)
            return false; /* one for an older round: wait for it, then check for this one */
        a->health.pf_run_gen = gen;
        log_info("preflight check before this node's workers of generation %" PRId64 " start", gen);
        pf_start(a->health.pf, ea_now_ms());
    }
    switch (pf_state(a->health.pf)) {
    case PF_PASSED:
        a->health.pf_gen = gen;
        return true;
    case PF_FAILED:
        log_error("preflight check '%s' failed before a round: %s; leaving run '%s' until it "
                  "passes",
                  a->cfg->preflight, pf_reason(a->health.pf), a->cfg->run_id);
        events_emit(a->obs.events, "preflight", 0, gen, "{s:b, s:f, s:s}", "ok", 0, "seconds",
                    (double)pf_duration_ms(a->health.pf) / 1000.0, "reason", pf_reason(a->health.pf));
        a->health.pf_out = a->quit.exiting = true;
        a->health.pf_run_gen = 0;
        return false;
    default:
        return false;
    }
}

/* ---- the component ----------------------------------------------------------------------- */

static void gate_step(void *c, int64_t now)
{
    struct agent *a = c;
    if (a->stage.id == AP_PREFLIGHT && !a->stage.over)
        agent_preflight_step(a, now);
}

static int64_t gate_wake(void *c)
{
    const struct agent *a = c;
    return a->stage.id == AP_PREFLIGHT && !a->stage.over ? agent_preflight_wake_ms(a) : -1;
}

/* --preflight-every-round's check: its timeout */
static void round_tick(void *c, int64_t now)
{
    if (agent_in_run(c))
        pf_tick(((struct agent *)c)->health.pf, now);
}

static int64_t round_wake(void *c)
{
    return agent_in_run(c) ? pf_wake_ms(((const struct agent *)c)->health.pf) : -1;
}

static void preflight_enter(struct agent *a, int phase)
{
    if (phase == AP_PREFLIGHT)
        agent_preflight_enter(a);
}

static bool preflight_take_exit(struct agent *a, const struct launch_exit *e)
{
    return pf_on_exit(a->health.pf, e);
}

static const struct agent_step preflight_steps[] = {
    {AGENT_AT_PHASE, {"preflight-gate", gate_step, gate_wake, true}},
    {AGENT_AT_CHECK, {"preflight", round_tick, round_wake, false}},
};

const struct agent_component agent_preflight_component = {
    .name = "preflight",
    AGENT_STEPS(preflight_steps),
    .enter = preflight_enter,
    .may_start = agent_preflight_round,
    .take_exit = preflight_take_exit,
};
