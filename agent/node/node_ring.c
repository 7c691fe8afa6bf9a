// SPDX-License-Identifier: Apache-2.0
/*
 * node_ring: the node's decisions on the liveness ring (node.h): follows each running round with
 * the ring, writes a suspicion when a link breaks (a suspicion of the coordinator goes to a third
 * member), and routes the probes' answers to the confirmations (node_confirm.c: the coordinator
 * confirms each suspicion with a probe of its own before it revokes the suspect's lease). A node
 * that loses its lease again soon after rejoining waits before it rejoins (no round storm). The
 * ring's sockets are its host's (node_transport).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ea_time.h"
#include "node.h"
#include "node_internal.h"
#include "node_ring_internal.h"
#include "domain.h"
#include "suspect.h"

int node_ring_open(struct node *n, const struct node_ring_params *p)
{
    struct node_ring *g = calloc(1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    g->p = *p;
    if (p->ns)
        snprintf(g->ns, sizeof(g->ns), "%s", p->ns);
    g->p.ns = NULL;
    n->ring = g;
    return 0;
}

void node_ring_free(struct node *n)
{
    if (!n->ring)
        return;
    free(n->ring->cases);
    free(n->ring->listed);
    node_walk_free(n->ring->walk[0]);
    node_walk_free(n->ring->walk[1]);
    free(n->ring);
    n->ring = NULL;
}

/* ---- following the rounds ----------------------------------------------------------------- */

static void follow_round(struct node *n, struct node_ring *g, bool active, int64_t now)
{
    int64_t gen = 0;
    const struct rdzv_state *s = rdzv_current(n->rdzv, &gen);
    const struct rdzv_member *m = rdzv_self_member(n->rdzv);
    const char *self = n->node_id;
    int64_t round = s && s->status == RDZV_RUNNING && m && !n->lease_lost && active ? s->round : 0;
    const char *next = round && m->next[0] && strcmp(m->next, self) != 0 ? m->next : "";
    const char *prev = round && m->prev[0] && strcmp(m->prev, self) != 0 ? m->prev : "";
    if (round == g->round && strcmp(next, g->next) == 0 && strcmp(prev, g->prev) == 0)
        return;
    if (next[0] && now < g->peer_retry_ms)
        return;
    struct ring_peer rp = {0};
    bool have = false, reach = true;
    if (next[0] && m->next_slot > 0 && m->next_slot == g->peer_slot &&
        strcmp(next, g->peer_id) == 0) { /* the incarnation of the last read: its record */
        rp = g->peer_rp;
        have = g->peer_have;
        reach = g->peer_reach;
    } else if (next[0]) { /* the one node record a node reads per round: its successor's */
        struct rdzv_ring_peer p;
        struct ea_error err = {0};
        int r = rdzv_ring_peer(n->rdzv, next, &p, &err);
        if (r == 0 && !(reach = node_ring_reachable(g, &p))) {
            node_log(n, NODE_DEBUG,
                     "liveness ring: node '%s' has a loopback address in another network "
                     "namespace: no link to it",
                     next);
        } else if (r == 0) {
            snprintf(rp.node_id, sizeof(rp.node_id), "%s", p.node_id);
            snprintf(rp.addr, sizeof(rp.addr), "%s", p.addr);
            rp.port = p.port;
            have = true;
        }
        if (r == 0) {
            snprintf(g->peer_id, sizeof(g->peer_id), "%s", next);
            g->peer_slot = m->next_slot;
            g->peer_rp = rp;
            g->peer_have = have;
            g->peer_reach = reach;
        } else if (r != KV_ENOTFOUND && r != -ENOPROTOOPT) {
            node_log(n, NODE_DEBUG, "liveness ring: reading node '%s': %s; trying again", next,
                     err.msg);
            g->peer_retry_ms = now + NODE_PEER_RETRY_MS;
            return;
        } else { /* gone already, or not in the ring: nothing to watch on that side */
            node_log(n, NODE_DEBUG, "liveness ring: no link to node '%s': %s", next, err.msg);
        }
    }
    /* a predecessor that never links is suspected unless this node is on a loopback address
     * it cannot reach through (its successor in another namespace: so, likely, is it) */
    g->p.tr.set(g->p.tr.ctx, round, round && s ? s->group_world_size : 0, prev,
                g->p.await_prev && (!g->p.loopback || reach), have ? &rp : NULL, now);
    g->round = round;
    if (round)
        g->ring_last = round;
    snprintf(g->next, sizeof(g->next), "%s", next);
    snprintf(g->prev, sizeof(g->prev), "%s", prev);
    if (round)
        node_log(n, NODE_DEBUG, "liveness ring, round %" PRId64 ": from '%s', to '%s'", round,
                 prev[0] ? prev : "(none)", next[0] ? next : "(none)");
}

/* ---- suspicions --------------------------------------------------------------------------- */

/* The store took this node's report of a broken link of round `round` (with its lease: it was
 * alive then): a loss of the lease soon after, in that round, is a cut (node_ring_lease_lost). */
static void note_cut(struct node *n, struct node_ring *g, int64_t round)
{
    if (round && round == g->round) {
        g->cut_round = round;
        g->cut_ms = node_now(n);
    }
}

static void flush_todo(struct node *n, struct node_ring *g)
{
    size_t kept = 0;
    for (size_t i = 0; i < g->n_unsent; i++) {
        struct ea_error err = {0};
        int r = rdzv_suspect(n->rdzv, &g->unsent[i], &err);
        if (r > 0) /* written with this node's lease: it was alive, cut */
            note_cut(n, g, g->unsent[i].round);
        if (r < 0 && g->unsent[i].round == g->round) {
            node_log(n, NODE_DEBUG, "liveness ring: reporting node '%s': %s; trying again",
                     g->unsent[i].node_id, err.msg);
            g->unsent[kept++] = g->unsent[i];
        }
    }
    g->n_unsent = kept;
}

/* Confirm a suspicion of the coordinator with a probe of this node's own, on a new connection:
 * this node is the third member rdzv_coord_confirmer_of() names (outside the coordinator's
 * failure domain where it can), or the watcher in a round of two
 * (docs/protocol.md: why a third member, and why a revoke is safe). */
static void confirm_coord(struct node *n, struct node_ring *g, const struct rdzv_coord_suspicion *x,
                          bool from_key)
{
    char holder[RDZV_ID_MAX];
    int64_t lease = 0;
    struct rdzv_ring_peer p;
    struct ring_peer rp;
    if (g->coord_probing || !rdzv_coord_holder(n->rdzv, holder, sizeof(holder), &lease) ||
        strcmp(holder, x->sus.node_id) != 0 || rdzv_ring_peer(n->rdzv, holder, &p, NULL) < 0 ||
        p.lease != lease || !node_ring_reachable(g, &p))
        return;
    /* this node and the watcher in one domain, the coordinator outside it: its probe counts only
     * if it reaches the watcher too (a domain cut at its switch finds everybody outside dead) */
    struct rdzv_ring_peer wp;
    struct ring_peer wrp;
    bool need_w = from_key && node_correlated_watcher(n, x->sus.by, NULL, p.domain, &wp) > 0;
    if (need_w && !node_ring_reachable(g, &wp))
        return; /* the watcher cannot be probed from here: no second vantage point */
    uint64_t wid = 0;
    if (need_w) {
        node_to_ring_peer(&wp, &wrp);
        wid = ++g->probe_ids;
        if (g->p.tr.probe(g->p.tr.ctx, wid, &wrp, x->sus.round, g->p.probe_ms, node_now(n)) < 0)
            return;
    }
    node_to_ring_peer(&p, &rp);
    uint64_t id = ++g->probe_ids;
    if (g->p.tr.probe(g->p.tr.ctx, id, &rp, x->sus.round, g->p.probe_ms, node_now(n)) < 0)
        return; /* (a watcher's probe already sent is ignored when it ends) */
    g->coord_wprobe = wid;
    g->coord_sres = PR_PENDING;
    g->coord_wres = need_w ? PR_PENDING : PR_ALIVE;
    g->coord_probing = true;
    g->coord_from_key = from_key;
    g->coord_probe = id;
    g->coord_lease = lease;
    g->coord_x = *x;
    g->succeed_until = node_now(n) + 2 * g->p.probe_ms; /* the probe, the revoke, the claim */
    g->succeed_listed = 0;
    node_log(n, NODE_INFO, "liveness ring: '%s' suspects the coordinator '%s' (%s): probing it",
             x->sus.by, x->sus.node_id, x->sus.cause);
}

/* A suspicion of the coordinator: a third member confirms it (rounds/<r>/coord_suspect), or in a
 * round of two this watcher, as nobody else is there. */
static int suspect_coord(struct node *n, struct node_ring *g, const struct rdzv_suspicion *x,
                         int coord_rank)
{
    const struct rdzv_state *s = rdzv_current(n->rdzv, NULL);
    const struct rdzv_member *m = rdzv_self_member(n->rdzv);
    int nw = s ? s->group_world_size : 0;
    if (!m || nw < 2)
        return 0;
    struct rdzv_coord_suspicion cx = {.sus = *x, .by_rank = m->group_rank, .coord_rank = coord_rank};
    if (rdzv_coord_confirmer_of(s, cx.coord_rank, cx.by_rank) < 0) {
        confirm_coord(n, g, &cx, false);
        return 0;
    }
    g->coord_x = cx;
    g->coord_todo = true; /* retried by check_coord_suspicion */
    struct ea_error err = {0};
    /* no note_cut: the key is written without this node's lease, so the store taking it says
     * nothing of whether this node was alive (a frozen node resumed after its eviction writes it
     * too, and must rejoin at once) */
    int r = rdzv_coord_suspect(n->rdzv, &cx, &err);
    if (r >= 0)
        g->coord_todo = false;
    else
        node_log(n, NODE_DEBUG, "liveness ring: reporting the coordinator '%s': %s; trying again",
                 x->node_id, err.msg);
    return 0;
}

/* Another member suspects the coordinator: confirm it when this node is the one to. */
static void check_coord_suspicion(struct node *n, struct node_ring *g)
{
    if (g->coord_todo) {
        struct ea_error err = {0};
        if (rdzv_coord_suspect(n->rdzv, &g->coord_x, &err) >= 0) /* no note_cut: no lease */
            g->coord_todo = false;
    }
    struct rdzv_coord_suspicion cx;
    int r = rdzv_coord_suspicion(n->rdzv, &cx);
    node_take_warning(n);
    if (r <= 0 || (cx.sus.round == g->coord_seen_round && cx.key_rev == g->coord_seen_rev))
        return;
    g->coord_seen_round = cx.sus.round;
    g->coord_seen_rev = cx.key_rev;
    const struct rdzv_state *s = rdzv_current(n->rdzv, NULL);
    const struct rdzv_member *m = rdzv_self_member(n->rdzv);
    if (s && m && !rdzv_is_coordinator(n->rdzv) &&
        rdzv_coord_confirmer_of(s, cx.coord_rank, cx.by_rank) == m->group_rank)
        confirm_coord(n, g, &cx, true);
}

static struct node_walk_env walk_env(const struct node_ring *g)
{
    return (struct node_walk_env){.tr = &g->p.tr, .probe_ms = g->p.probe_ms, .ns = g->ns};
}

static bool is_coord_holder(struct node *n, const char *node_id)
{
    char holder[RDZV_ID_MAX];
    int64_t lease = 0;
    return !rdzv_is_coordinator(n->rdzv) &&
           rdzv_coord_holder(n->rdzv, holder, sizeof(holder), &lease) &&
           strcmp(holder, node_id) == 0;
}

int node_ring_suspect_member(struct node *n, const struct rdzv_suspicion *sus, int rank)
{
    struct node_ring *g = n->ring;
    int r = 0;
    if (is_coord_holder(n, sus->node_id)) {
        r = suspect_coord(n, g, sus, rank);
    } else {
        struct ea_error err = {0};
        if ((r = rdzv_suspect(n->rdzv, sus, &err)) < 0) {
            node_log(n, NODE_DEBUG, "liveness ring: reporting node '%s': %s; trying again",
                     sus->node_id, err.msg);
            return r;
        }
        if (r > 0)
            note_cut(n, g, sus->round);
    }
    g->st.suspicions++;
    node_event(n, &(struct node_event){
                      .kind = NODE_EV_SUSPECT, .node = sus->node_id, .cause = sus->cause});
    return r;
}

static void on_suspect(struct node *n, struct node_ring *g, const struct ring_report *x)
{
    if (x->round != g->round || !x->round)
        return; /* a link of a round that has ended */
    int64_t now = node_now(n), wall = ea_wall_ms();
    struct rdzv_suspicion sus = {.round = x->round,
                                 .fault_ms = x->heard_ms >= 0 ? wall - (now - x->heard_ms) : -1,
                                 .detected_ms = wall};
    snprintf(sus.node_id, sizeof(sus.node_id), "%s", x->node_id);
    snprintf(sus.by, sizeof(sus.by), "%s", n->node_id);
    snprintf(sus.cause, sizeof(sus.cause), "%s", x->cause);
    node_log(n, NODE_WARN, "liveness ring: lost node '%s' (the link %s it: %s): suspecting it",
             x->node_id, x->outbound ? "to" : "from", x->cause);
    g->st.suspicions++;
    node_event(n, &(struct node_event){.kind = NODE_EV_SUSPECT,
                                       .node = x->node_id,
                                       .cause = x->cause,
                                       .outbound = x->outbound});
    /* a run of dead members past the neighbour (a rack) is found in this pass, not from its two
     * ends inwards a round per pair (the coordinator's own word is no second vantage point: it
     * does not walk) */
    struct node_walk_env env = walk_env(g);
    if (!rdzv_is_coordinator(n->rdzv) &&
        node_walk_start(n, &g->walk[!x->outbound], &env, g->round, x->node_id, !x->outbound,
                        now) < 0)
        node_log(n, NODE_DEBUG, "liveness ring: no memory to walk past '%s'", x->node_id);
    const struct rdzv_member *m = rdzv_self_member(n->rdzv);
    if (is_coord_holder(n, x->node_id)) {
        /* its group rank: the ring runs in chunk order, so a neighbour's rank is the chunk's */
        if (m)
            suspect_coord(n, g, &sus, x->outbound ? m->next_rank : m->prev_rank);
        return;
    }
    const struct rdzv_state *s = rdzv_current(n->rdzv, NULL);
    if (rdzv_is_coordinator(n->rdzv) && s && s->group_world_size >= 3) {
        /* a second vantage point: the suspect's other neighbour reports it too if it is gone
         * (it goes into the key's `also`), and the coordinator's probe confirms that; on its
         * own word alone a coordinator cut off from the network would evict every node it
         * probes. Its key is written all the same: the store taking it says this node was
         * alive then, so a lease lost in this round is a cut from the ring (node_rejoin_wait) */
        node_log(n, NODE_INFO,
                 "liveness ring: waiting for the other neighbour of '%s' to report it too",
                 x->node_id);
    }
    if (g->n_unsent < NODE_UNSENT_MAX)
        g->unsent[g->n_unsent++] = sus;
    flush_todo(n, g);
}

void node_on_report(struct node *n, const struct ring_report *x)
{
    struct node_ring *g = n->ring;
    if (!g)
        return;
    if (x->kind == RING_REPORT_SUSPECT)
        on_suspect(n, g, x);
    else
        node_ring_on_probe(n, g, x);
}

/* ---- the rejoin cooldown (node_rejoin_wait) ------------------------------------------------ */

void node_ring_lease_lost(struct node *n, int64_t now)
{
    struct node_ring *g = n->ring;
    if (!g || g->was_lost)
        return;
    g->was_lost = true;
    /* lost again soon after rejoining (a flaky node), or in the ring round in which it was cut
     * from its neighbours (its lease revoked by the ring while it still reached the store):
     * wait before rejoining, so it cannot cause a round every few seconds, and is not taken
     * into a round where nobody can reach it at once. Decided here, at the loss: the rejoin may
     * follow in the same pass (its workers stopped already) */
    /* its last ring round is the one it reported in (it has not linked in another since), and
     * within one cooldown (the TTL) of the report: an eviction follows it within seconds */
    bool cut = g->cut_round > 0 && g->cut_round == g->ring_last &&
               now - g->cut_ms <= g->p.cooldown_ms;
    int64_t since = g->rejoined_ms > 0 ? now - g->rejoined_ms : -1;
    int64_t wait = node_rejoin_wait(g->p.cooldown_ms, g->strikes, since, cut, &g->strikes);
    g->cooldown_until_ms = now + wait;
    if (wait > 0 && cut && g->strikes == 1)
        node_log(n, NODE_WARN,
                 "lost the lease in the round in which this node lost its ring links (an "
                 "eviction by the ring while it reaches the store): waiting %.1f s before "
                 "rejoining",
                 (double)wait / 1000.0);
    else if (wait > 0)
        node_log(n, NODE_WARN,
                 "lost the lease again %.1f s after rejoining (loss %d in a row): waiting %.1f s "
                 "before rejoining",
                 (double)since / 1000.0, g->strikes + 1, (double)wait / 1000.0);
}

void node_ring_rejoined(struct node *n, int64_t now)
{
    if (n->ring && n->ring->was_lost) {
        n->ring->was_lost = false;
        n->ring->rejoined_ms = now;
    }
}

/* ---- every pass --------------------------------------------------------------------------- */

void node_ring_step(struct node *n, bool active, int64_t now)
{
    struct node_ring *g = n->ring;
    if (!g)
        return;
    /* a loss node_step did not see (the agent's own fence lapsed), and the rejoin after it */
    if (n->lease_lost)
        node_ring_lease_lost(n, now);
    else
        node_ring_rejoined(n, now);
    follow_round(n, g, active, now);
    struct node_walk_env env = walk_env(g);
    node_walk_step(n, g->walk[0], &env, g->round, now);
    node_walk_step(n, g->walk[1], &env, g->round, now);
    if (g->n_unsent)
        flush_todo(n, g);
    if (rdzv_is_coordinator(n->rdzv)) {
        node_confirm_suspects(n, g, now);
        node_evict_confirmed(n, g);
        node_hold_losses(n, g, now);
    } else {
        check_coord_suspicion(n, g);
        if (now < g->succeed_until) { /* this node may coordinate in a moment: the round waits */
            node_succession_probes(n, g, now);
            node_hold_losses(n, g, now);
        }
    }
}

bool node_may_rejoin(const struct node *n, int64_t now)
{
    return !n->ring || now >= n->ring->cooldown_until_ms;
}

int64_t node_ring_wake_ms(const struct node *n, int64_t now)
{
    const struct node_ring *g = n->ring;
    if (!g)
        return -1;
    if (g->n_confirmed)
        return now;
    if (g->n_unsent || g->rescan || g->coord_todo || node_walk_due(g->walk[0]) ||
        node_walk_due(g->walk[1]))
        return now + NODE_PEER_RETRY_MS / 5;
    if (now < g->succeed_until) /* the next listing of succession_probes */
        return now + g->p.probe_ms / 3;
    if (n->lease_lost && g->cooldown_until_ms > now)
        return g->cooldown_until_ms;
    if (g->peer_retry_ms > now)
        return g->peer_retry_ms;
    return -1;
}

bool node_ring_linked(const struct node *n)
{
    const struct node_ring *g = n->ring;
    return g && g->round > 0 && (g->next[0] || g->prev[0]) && !n->lease_lost;
}

void node_ring_stats_get(const struct node *n, struct node_ring_stats *ret)
{
    *ret = n->ring ? n->ring->st : (struct node_ring_stats){0};
}
