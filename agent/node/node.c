// SPDX-License-Identifier: Apache-2.0
/*
 * node: the session's lease, the rejoin after a loss, the pending reports and store trouble
 * (node.h). Time comes from the caller (`now`, or params.clock); what happens goes out through
 * node_ops. The ring's decisions are node_ring.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ea_time.h"
#include "kv.h"
#include "node.h"
#include "node_internal.h"

void node_log(struct node *n, enum node_level level, const char *fmt, ...)
{
    if (!n->p.ops.log)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    n->p.ops.log(n->p.ops.ctx, level, msg);
}

void node_event(struct node *n, const struct node_event *e)
{
    struct node_event x = *e;
    x.node = x.node ? x.node : "";
    x.by = x.by ? x.by : "";
    x.cause = x.cause ? x.cause : "";
    x.detail = x.detail ? x.detail : "";
    if (n->p.ops.event)
        n->p.ops.event(n->p.ops.ctx, &x);
}

void node_take_warning(struct node *n)
{
    char warning[EA_ERROR_MSG_MAX]; /* e.g. a round's master refused: logged once, at once */
    if (rdzv_take_warning(n->rdzv, warning, sizeof(warning)))
        node_log(n, NODE_WARN, "%s", warning);
}

static void fatal(struct node *n, enum node_fatal why, const char *msg)
{
    if (n->p.ops.fatal)
        n->p.ops.fatal(n->p.ops.ctx, why, msg);
}

void node_init(struct node *n, const struct node_params *p)
{
    struct rdzv_session *s = n->rdzv;
    struct kv *kv = n->kv;
    memset(n, 0, sizeof(*n));
    n->rdzv = s;
    n->kv = kv;
    n->p = *p;
    if (!n->p.clock)
        n->p.clock = &ea_clock_real;
    snprintf(n->node_id, sizeof(n->node_id), "%s", p->node_id ? p->node_id : "");
    n->p.node_id = n->node_id;
    n->store_down_since_ms = -1;
    n->retry_at_ms = -1;
}

int64_t node_now(const struct node *n)
{
    const struct ea_clock *c = n->p.clock ? n->p.clock : &ea_clock_real;
    return c->now_ms(c->ctx);
}

void node_free(struct node *n)
{
    node_ring_free(n);
    rdzv_session_destroy(n->rdzv);
    n->rdzv = NULL;
}

void node_store_problem(struct node *n, int code, const struct ea_error *err, int64_t now)
{
    const char *msg = err && err->msg[0] ? err->msg : kv_strerror(code);
    if (code == KV_EAUTH) {
        node_log(n, NODE_ERROR, "the store refused our credentials: %s", msg);
        fatal(n, NODE_FATAL_AUTH, msg);
        return;
    }
    if (code == -EBADMSG || code == KV_ECORRUPT) {
        node_log(n, NODE_ERROR,
                 "refusing to use the store: %s (use another --run-id or remove the key)", msg);
        fatal(n, NODE_FATAL_CORRUPT, msg);
        return;
    }
    if (n->store_down_since_ms < 0) {
        n->store_down_since_ms = now;
        node_log(n, NODE_WARN, "store request failed: %s; retrying", msg);
    } else if (now - n->store_down_since_ms > n->p.join_timeout_ms) {
        node_log(n, NODE_ERROR, "store unreachable for %.1f s (--join-timeout): %s",
                 (double)(now - n->store_down_since_ms) / 1000.0, msg);
        fatal(n, NODE_FATAL_TIMEOUT, msg);
        return;
    }
    /* back off, doubling to 5 s, with jitter: when the store is overloaded, a thousand agents
     * retrying in lockstep would keep it so */
    int64_t wait;
    n->retry_delay_ms = ea_retry_next(n->retry_delay_ms, NODE_RETRY_BASE_MS, NODE_RETRY_CAP_MS,
                                      ea_retry_seed(now), &wait);
    n->retry_at_ms = now + wait;
}

void node_store_ok(struct node *n)
{
    if (n->store_down_since_ms >= 0)
        node_log(n, NODE_INFO, "store reachable again");
    n->store_down_since_ms = -1;
    n->retry_delay_ms = 0;
}

void node_write_failure(struct node *n, int64_t now)
{
    struct ea_error err = {0};
    int r = rdzv_report_failure(n->rdzv, n->failure_generation, &n->failure, &err);
    if (r < 0) {
        node_store_problem(n, r, &err, now);
        return;
    }
    node_store_ok(n);
    n->failure_pending = false;
}

void node_write_done(struct node *n, int64_t now)
{
    struct ea_error err = {0};
    int r = rdzv_report_done(n->rdzv, n->done_round, &err);
    if (r < 0) {
        node_store_problem(n, r, &err, now);
        return;
    }
    node_store_ok(n);
    n->done_pending = false;
}

void node_report_failure(struct node *n, int64_t generation, const struct rdzv_failure *f)
{
    n->failure = *f;
    n->failure_generation = generation;
    n->failure_pending = true;
    node_write_failure(n, node_now(n));
}

void node_report_done(struct node *n, int64_t round)
{
    n->done_round = round;
    n->done_pending = true;
    node_write_done(n, node_now(n));
}

void node_step(struct node *n, const struct node_step_in *in, int64_t now)
{
    struct ea_error err = {0};
    int r = rdzv_keepalive(n->rdzv, now, &err);
    bool answered = r > 0; /* a store request succeeded in this pass */
    if (r < 0)
        n->renew_failures++;
    if (r == KV_ENOLEASE) {
        const char *why = err.msg[0] ? err.msg : "expired";
        node_log(n, NODE_ERROR,
                 "lease lost (%s): this node may have been fenced out; stopping workers and "
                 "rejoining",
                 why);
        n->lease_lost = true;
        node_ring_lease_lost(n, now); /* the rejoin's wait: before the rejoin below */
        node_event(n, &(struct node_event){.kind = NODE_EV_LEASE_LOST, .detail = why});
    } else if (r < 0) {
        node_store_problem(n, r, &err, now);
    }
    if (n->lease_lost && in->may_rejoin && (n->retry_at_ms < 0 || now >= n->retry_at_ms) &&
        node_may_rejoin(n, now)) {
        ea_error_clear(&err);
        if ((r = rdzv_join(n->rdzv, &err)) < 0) {
            node_store_problem(n, r, &err, now);
            return;
        }
        n->rejoins++;
        n->lease_lost = false;
        node_ring_rejoined(n, now);
        /* our workers of that generation are gone: the run must form a new round */
        n->reform_generation = in->generation;
        n->reform_pending = in->generation != 0;
        node_event(n, &(struct node_event){.kind = NODE_EV_REJOINED});
    }
    if (n->retry_at_ms >= 0 && now < n->retry_at_ms)
        return;
    n->retry_at_ms = -1;
    if (n->failure_pending)
        node_write_failure(n, now);
    if (n->done_pending && !in->done_still_valid)
        n->done_pending = false;
    if (n->done_pending)
        node_write_done(n, now);
    if (n->reform_pending) {
        ea_error_clear(&err);
        if ((r = rdzv_reform(n->rdzv, n->reform_generation, &err)) < 0)
            node_store_problem(n, r, &err, now);
        else
            n->reform_pending = false;
    }
    ea_error_clear(&err);
    r = rdzv_tick(n->rdzv, now, &err);
    node_take_warning(n);
    if (r < 0)
        node_store_problem(n, r, &err, now);
    else if ((answered || r > 0) && !n->failure_pending && !n->done_pending)
        node_store_ok(n);
}

int64_t node_wake_ms(const struct node *n)
{
    int64_t w = rdzv_wake_ms(n->rdzv);
    if (n->retry_at_ms >= 0 && (w < 0 || n->retry_at_ms < w))
        w = n->retry_at_ms;
    return w;
}
