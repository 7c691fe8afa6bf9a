// SPDX-License-Identifier: Apache-2.0
/*
 * node_confirm: the liveness ring's confirmations (node_ring_internal.h). The coordinator probes
 * each suspect its watch delivers with a probe of its own (and, with correlated evidence, the
 * watcher too) and revokes the lease of one that does not answer; the member confirming a
 * suspicion of the coordinator probes it, and the round's other suspects with it, and once it
 * holds `coord` evicts those that did not answer; while any of it is in flight the next round
 * waits, so one burst leaves in one round (docs/protocol.md "The liveness ring").
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ea_time.h"
#include "node_ring_internal.h"

static void evicted(struct node *n, struct node_ring *g, const struct rdzv_suspicion *x,
                    const char *why, int r, const struct ea_error *err)
{
    if (r < 0) { /* a batch carries one message, its first failure's: this case's is its code */
        node_log(n, NODE_WARN, "liveness ring: could not revoke the lease of node '%s': %s%s%s%s",
                 x->node_id, kv_strerror(r), err->msg[0] ? " (the batch's first failure: " : "",
                 err->msg, err->msg[0] ? ")" : "");
        return;
    }
    if (r == 0)
        return; /* gone already, or rejoined under a new lease */
    g->st.evictions++;
    node_log(n, NODE_WARN,
             "liveness ring: node '%s' did not answer a probe either (%s; '%s' saw: %s): its "
             "lease is revoked, the run goes on without it",
             x->node_id, why, x->by, x->cause);
    node_event(n, &(struct node_event){.kind = NODE_EV_EVICTED,
                                       .node = x->node_id,
                                       .by = x->by,
                                       .cause = x->cause,
                                       .detail = why});
}

static void false_alarm(struct node *n, struct node_ring *g, const struct rdzv_suspicion *x)
{
    g->st.false_alarms++;
    node_log(n, NODE_INFO,
             "liveness ring: node '%s' answered a probe: a false alarm ('%s' saw: %s)", x->node_id,
             x->by, x->cause);
    node_event(n, &(struct node_event){
                      .kind = NODE_EV_CLEARED, .node = x->node_id, .by = x->by, .cause = x->cause});
}

static enum probe_res res_of(const struct ring_report *x)
{
    return x->local ? PR_LOCAL : x->alive ? PR_ALIVE : PR_DEAD;
}

/* The coordinator's probe of a suspect went unanswered: its lease is revoked at the end of the
 * pass, with the others confirmed in it (node_evict_confirmed). */
static void evict_case(struct node_ring *g, struct ring_case *k, const char *why)
{
    snprintf(k->why, sizeof(k->why), "%s", why);
    k->state = CASE_CONFIRMED;
    g->n_confirmed++;
}

void node_evict_confirmed(struct node *n, struct node_ring *g)
{
    if (!g->n_confirmed || !g->cases)
        return;
    g->n_confirmed = 0;
    struct ring_case *ks[NODE_CASES_MAX];
    const struct rdzv_suspect_case *cs[NODE_CASES_MAX];
    int rs[NODE_CASES_MAX];
    size_t m = 0;
    for (size_t i = 0; i < NODE_CASES_MAX; i++)
        if (g->cases[i].state == CASE_CONFIRMED) {
            ks[m] = &g->cases[i];
            cs[m++] = &g->cases[i].c;
        }
    if (!m)
        return;
    node_publish_detect(n, &ks[0]->c.sus); /* create-only: the round's first loss is its fault */
    struct ea_error err = {0};
    if (rdzv_evict_each(n->rdzv, cs, m, rs, &err) < 0)
        for (size_t j = 0; j < m; j++)
            rs[j] = err.code ? err.code : -1;
    for (size_t j = 0; j < m; j++) {
        struct ring_case *k = ks[j];
        evicted(n, g, &k->c.sus, k->why, rs[j], &err);
        k->state = rs[j] > 0 ? CASE_EVICTED : rs[j] == 0 ? CASE_FREE : CASE_DONE;
    }
}

void node_ring_on_probe(struct node *n, struct node_ring *g, const struct ring_report *x)
{
    struct ea_error err = {0};
    if (node_walk_on_probe(n, g->walk[0], g->round, x) ||
        node_walk_on_probe(n, g->walk[1], g->round, x))
        return;
    if (g->coord_probing && (x->probe_id == g->coord_probe || x->probe_id == g->coord_wprobe)) {
        *(x->probe_id == g->coord_probe ? &g->coord_sres : &g->coord_wres) = res_of(x);
        if (g->coord_sres == PR_PENDING ||
            (g->coord_sres == PR_DEAD && g->coord_wres == PR_PENDING))
            return; /* the other probe's answer decides */
        g->coord_probing = false;
        if (g->coord_sres == PR_LOCAL) { /* nothing left this node: no word either way */
            node_no_evidence(n, &g->coord_x.sus, x->cause);
            return;
        }
        if (g->coord_sres == PR_DEAD && g->coord_wres != PR_ALIVE) {
            node_unverified(n, &g->coord_x.sus);
            return;
        }
        if (g->coord_sres == PR_ALIVE) { /* the coordinator answered this third member */
            false_alarm(n, g, &g->coord_x.sus);
            if (g->coord_from_key && rdzv_coord_suspect_clear(n->rdzv, &g->coord_x, &err) < 0)
                node_log(n, NODE_DEBUG,
                         "liveness ring: clearing the suspicion of the coordinator: %s", err.msg);
            return;
        }
        node_publish_detect(n, &g->coord_x.sus);
        int r = rdzv_evict_coord(n->rdzv, g->coord_x.sus.node_id, g->coord_lease, &err);
        evicted(n, g, &g->coord_x.sus, x->cause, r, &err);
        return;
    }
    for (size_t i = 0; g->cases && i < NODE_CASES_MAX; i++) {
        struct ring_case *k = &g->cases[i];
        bool mine = (k->state == CASE_PROBING && k->probe == x->probe_id) ||
                    ((k->state == CASE_PROBING || k->state == CASE_QUEUED) && k->wprobe &&
                     k->wprobe == x->probe_id);
        if (!mine)
            continue;
        *(k->state == CASE_PROBING && k->probe == x->probe_id ? &k->sres : &k->wres) = res_of(x);
        if (k->state == CASE_QUEUED || k->sres == PR_PENDING ||
            (k->sres == PR_DEAD && k->wres == PR_PENDING))
            return; /* the other probe's answer decides */
        k->state = CASE_DONE;
        if (g->cases_round != x->round)
            return;
        if (!rdzv_is_coordinator(n->rdzv)) { /* a succession probe (succession_probes) */
            k->state = k->sres == PR_DEAD && k->wres == PR_ALIVE ? CASE_DEAD : CASE_FREE;
            k->dead_ms = node_now(n);
            return;
        }
        if (k->sres == PR_LOCAL) { /* the key stays: a coordinator that can reach it may */
            node_no_evidence(n, &k->c.sus, x->cause);
            return;
        }
        if (k->sres == PR_DEAD && k->wres != PR_ALIVE) { /* the key stays, as above */
            node_unverified(n, &k->c.sus);
            return;
        }
        if (k->sres == PR_ALIVE) { /* the suspect answered the coordinator's own probe */
            false_alarm(n, g, &k->c.sus);
            if (rdzv_suspect_clear(n->rdzv, &k->c, &err) < 0)
                node_log(n, NODE_DEBUG, "liveness ring: clearing the suspicion of '%s': %s",
                         x->node_id, err.msg);
            else
                k->state = CASE_FREE; /* settled, its key gone: the slot takes the next case */
            return;
        }
        evict_case(g, k, x->cause);
        return;
    }
}


/* ---- the coordinator's confirmations ------------------------------------------------------ */

static struct ring_case *case_for(struct node_ring *g, const struct rdzv_suspect_case *c)
{
    struct ring_case *free_slot = NULL;
    for (size_t i = 0; i < NODE_CASES_MAX; i++) {
        struct ring_case *k = &g->cases[i];
        if (k->state == CASE_FREE) {
            if (!free_slot)
                free_slot = k;
        } else if (strcmp(k->c.sus.node_id, c->sus.node_id) == 0 &&
                   (k->c.key_rev == c->key_rev || k->state != CASE_DONE)) {
            return NULL; /* this very key is handled already, or the node (its key rewritten
                            with a second watcher, `also`, while probed) */
        }
    }
    return free_slot;
}

/* The case table of `round` (allocated when first needed: most nodes never confirm anything). */
static bool cases_of(struct node_ring *g, int64_t round)
{
    if (!g->cases && !(g->cases = calloc(NODE_CASES_MAX, sizeof(*g->cases))))
        return false; /* out of memory: the lease sees the dead, later */
    if (!g->listed && !(g->listed = calloc(NODE_CASES_MAX, sizeof(*g->listed))))
        return false;
    if (round != g->cases_round) {
        memset(g->cases, 0, NODE_CASES_MAX * sizeof(*g->cases));
        g->cases_round = round;
        g->rescan = true;
    }
    return true;
}

/* Probe every queued case (with correlated evidence, its watcher first). */
static void start_probes(struct node *n, struct node_ring *g, int64_t round, int64_t now)
{
    for (size_t i = 0; i < NODE_CASES_MAX; i++) {
        struct ring_case *k = &g->cases[i];
        if (k->state != CASE_QUEUED)
            continue;
        struct ring_peer rp;
        if (k->wres == PR_PENDING && !k->wprobe) { /* the watcher first: a probe of it only */
            node_to_ring_peer(&k->watcher, &rp);
            uint64_t wid = ++g->probe_ids;
            if (g->p.tr.probe(g->p.tr.ctx, wid, &rp, round, g->p.probe_ms, now) < 0) {
                g->rescan = true;
                break;
            }
            k->wprobe = wid;
        }
        node_to_ring_peer(&k->c.peer, &rp);
        uint64_t id = ++g->probe_ids;
        if (g->p.tr.probe(g->p.tr.ctx, id, &rp, round, g->p.probe_ms, now) < 0) {
            g->rescan = true; /* every probe slot busy: the next pass */
            break;
        }
        k->probe = id;
        k->state = CASE_PROBING;
        node_log(n, NODE_INFO, "liveness ring: '%s' suspects node '%s' (%s): probing it",
                 k->c.sus.by, k->c.sus.node_id, k->c.sus.cause);
    }
}

/* Take case c into slot k: queued for its probes, or done when this node cannot probe it: one
 * this node cannot reach at all is not probed (no evidence, no eviction); with correlated
 * evidence (this node and the watchers in one failure domain, the suspect outside it) neither is
 * one whose watcher it cannot probe. */
static void queue_case(struct node *n, struct node_ring *g, struct ring_case *k,
                       const struct rdzv_suspect_case *c)
{
    k->c = *c;
    k->wprobe = 0;
    k->sres = PR_PENDING;
    k->wres = PR_ALIVE;
    bool need_w = node_correlated_watcher(n, k->c.sus.by, k->c.sus.also, k->c.peer.domain,
                                          &k->watcher) > 0;
    if (need_w)
        k->wres = PR_PENDING;
    bool can = node_ring_reachable(g, &k->c.peer) && (!need_w || node_ring_reachable(g, &k->watcher));
    k->state = can ? CASE_QUEUED : CASE_DONE;
}

/* A suspicion this node wrote itself, that nobody else has seen: no second vantage point (the
 * suspect's other neighbour, when it saw it too, is in `also`). */
static bool own_word_only(const struct node *n, const struct rdzv_suspect_case *c, int world)
{
    return strcmp(c->sus.by, n->node_id) == 0 && !c->sus.also[0] && world >= 3;
}

/* While this node confirms a suspicion of the coordinator it probes the round's other suspects
 * too, its verdicts kept (CASE_DEAD): a burst that took the coordinator (a rack) took others,
 * and once this node claims `coord` it evicts them at once, not after a second probe's deadline
 * (docs/protocol.md "Coordinator succession"). One listing of the round's suspect keys every
 * third of a probe's deadline, only in that window. */
void node_succession_probes(struct node *n, struct node_ring *g, int64_t now)
{
    const struct rdzv_state *s = rdzv_current(n->rdzv, NULL);
    int64_t round = s && s->status == RDZV_RUNNING ? s->round : 0;
    if (now >= g->succeed_until || !round || now - g->succeed_listed < g->p.probe_ms / 3 ||
        !cases_of(g, round))
        return;
    g->succeed_listed = now;
    size_t room = 0;
    for (size_t i = 0; i < NODE_CASES_MAX; i++)
        room += g->cases[i].state == CASE_FREE;
    struct rdzv_suspect_case *list = g->listed;
    size_t nl = 0;
    struct ea_error err = {0};
    if (room && rdzv_suspects_peek(n->rdzv, round, list, room, &nl, &err) < 0)
        node_log(n, NODE_DEBUG, "liveness ring: listing the round's suspicions: %s", err.msg);
    char holder[RDZV_ID_MAX] = "";
    int64_t lease = 0;
    rdzv_coord_holder(n->rdzv, holder, sizeof(holder), &lease);
    for (size_t i = 0; i < nl; i++) {
        if (strcmp(list[i].sus.node_id, holder) == 0 ||
            own_word_only(n, &list[i], s->group_world_size))
            continue;
        struct ring_case *k = case_for(g, &list[i]);
        if (k)
            queue_case(n, g, k, &list[i]);
    }
    start_probes(n, g, round, now);
}

/* Once it coordinates: the succession probes that went unanswered within a probe's deadline are
 * evicted now; older ones are probed again. */
static void succession_verdicts(struct node *n, struct node_ring *g, int64_t now)
{
    for (size_t i = 0; i < NODE_CASES_MAX; i++) {
        struct ring_case *k = &g->cases[i];
        if (k->state != CASE_DEAD)
            continue;
        if (now - k->dead_ms <= g->p.probe_ms)
            evict_case(g, k, "no answer to its probe while the coordinator was suspected");
        else
            k->state = CASE_QUEUED;
    }
}

void node_confirm_suspects(struct node *n, struct node_ring *g, int64_t now)
{
    int64_t gen = 0;
    const struct rdzv_state *s = rdzv_current(n->rdzv, &gen);
    int64_t round = s && s->status == RDZV_RUNNING ? s->round : 0;
    if (!cases_of(g, round))
        return;
    succession_verdicts(n, g, now);
    uint64_t changes = rdzv_changes(n->rdzv);
    if (!round || (changes == g->seen_changes && !g->rescan))
        return;
    g->seen_changes = changes;
    g->rescan = false;
    /* no more cases than free slots are taken out: the rest stay due for a later pass (a key
     * taken out and dropped would wait for the suspect's lease) */
    size_t room = 0;
    for (size_t i = 0; i < NODE_CASES_MAX; i++)
        room += g->cases[i].state == CASE_FREE;
    struct rdzv_suspect_case *list = g->listed;
    size_t nl = 0;
    struct ea_error err = {0};
    if (room && rdzv_suspects(n->rdzv, list, room, &nl, &err) < 0) {
        node_log(n, NODE_DEBUG, "liveness ring: listing suspicions: %s", err.msg);
        g->rescan = true;
    }
    if (!room || rdzv_suspects_due(n->rdzv)) /* more than one pass takes: the next one */
        g->rescan = true;
    node_take_warning(n);
    for (size_t i = 0; i < nl; i++) {
        /* written by this node (before it coordinated) and seen by nobody else */
        if (own_word_only(n, &list[i], s->group_world_size))
            continue;
        struct ring_case *k = case_for(g, &list[i]);
        if (k) {
            queue_case(n, g, k, &list[i]);
            if (!g->burst++)
                g->first_case_ms = now;
            g->last_case_ms = now;
        }
    }
    start_probes(n, g, round, now);
}

/* An evicted suspect's node key is still in the coordinator's mirror (its delete not seen yet). */
static bool still_listed(struct node *n, const struct ring_case *k)
{
    struct rdzv_ring_peer p;
    return rdzv_ring_peer(n->rdzv, k->c.sus.node_id, &p, NULL) == 0 && p.lease == k->c.peer.lease;
}

/* While cases are queued or probed (or keys wait for a slot), and until the node keys of those it
 * evicted are gone from its mirror, the coordinator's next round waits, at most
 * NODE_LOSS_HOLD_MAX_MS from the first: the members one burst takes (a rack, a failure domain)
 * leave in one round, not one round each, every survivor restarting its workers each time. A
 * burst (NODE_BURST_MIN cases or more) is waited for after its last case as long as it took to
 * arrive so far, a beat at most: its members' watchers see them silent over up to about one beat
 * interval (a probe's deadline is the interval times the misses, 3 by default), and a burst
 * that trickled in has more to come than one seen at once. */
void node_hold_losses(struct node *n, struct node_ring *g, int64_t now)
{
    bool busy = g->rescan;
    for (size_t i = 0; g->cases && i < NODE_CASES_MAX; i++) {
        struct ring_case *k = &g->cases[i];
        if (k->state == CASE_EVICTED && !still_listed(n, k))
            k->state = CASE_FREE; /* its delete arrived: settled, the slot free */
        busy = busy || k->state == CASE_QUEUED || k->state == CASE_PROBING ||
               k->state == CASE_CONFIRMED || k->state == CASE_EVICTED || k->state == CASE_DEAD;
    }
    int64_t beat = g->p.probe_ms / 3, cap = NODE_LOSS_HOLD_MAX_MS;
    if (cap < g->p.probe_ms + beat)
        cap = g->p.probe_ms + beat; /* a slow ring's burst is seen over a probe's deadline, and
                                       the last of it probed a beat later */
    /* as long as the burst took to arrive so far, a beat at most: a rack seen in one pass does
     * not wait, a tenth seen over an interval waits for its last members */
    int64_t quiet = g->last_case_ms - g->first_case_ms;
    if (quiet > beat)
        quiet = beat;
    int64_t settled = g->last_case_ms + quiet;
    bool settling = g->holding && g->burst >= NODE_BURST_MIN && now < settled;
    int64_t to = 0;
    if (busy || settling) {
        if (!g->holding)
            g->hold_from = now;
        g->holding = true;
        to = busy ? now + g->p.probe_ms /* every probe in flight has ended by then */
                  : settled;
        if (to > g->hold_from + cap)
            to = g->hold_from + cap;
    } else if (g->holding) {
        g->holding = false; /* lifted: planned at once */
        g->burst = 0;
    } else {
        g->burst = 0;
        return;
    }
    if (to != g->hold_to) {
        g->hold_to = to;
        rdzv_hold_losses(n->rdzv, to);
    }
}
