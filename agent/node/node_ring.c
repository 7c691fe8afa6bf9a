// SPDX-License-Identifier: Apache-2.0
/*
 * node_ring: the node's decisions on the liveness ring (node.h): follows each running round with
 * the ring, writes a suspicion when a link breaks, and, as coordinator, confirms each suspicion
 * with a probe of its own before it revokes the suspect's lease; a suspicion of the coordinator
 * goes to a third member. A node that loses its lease again soon after rejoining waits before it
 * rejoins (no round storm). The ring's sockets are its host's (node_transport).
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
#include "domain.h"
#include "suspect.h"

/* EVICTED: its lease revoked, until the coordinator's mirror no longer has its node key (the
 * round waits for that: hold_losses). DEAD: this node's own probe, made while it confirmed a
 * suspicion of the coordinator and before it coordinated, went unanswered at dead_ms (used once
 * it coordinates, while fresh: succession_probes) */
enum case_state { CASE_FREE, CASE_QUEUED, CASE_PROBING, CASE_EVICTED, CASE_DONE, CASE_DEAD };

/* A probe's outcome, as far as a confirmation goes. */
enum probe_res { PR_PENDING, PR_ALIVE, PR_DEAD, PR_LOCAL };

struct ring_case {
    enum case_state state;
    struct rdzv_suspect_case c;
    uint64_t probe;
    int64_t dead_ms;
    /* correlated evidence (rdzv_correlated): the watcher, probed too; wprobe 0: not needed */
    struct rdzv_ring_peer watcher;
    uint64_t wprobe;
    enum probe_res sres, wres;
};

struct node_ring {
    struct node_ring_params p;
    char ns[RDZV_ADDR_MAX]; /* this host and network namespace ("" any) */

    /* the ring as handed to the transport */
    int64_t round;
    char next[RDZV_ID_MAX], prev[RDZV_ID_MAX];
    int64_t peer_retry_ms;
    /* the successor's node record as last read: the same while its slot is (no read a round) */
    char peer_id[RDZV_ID_MAX];
    int64_t peer_slot;
    struct ring_peer peer_rp;
    bool peer_have, peer_reach;

    struct rdzv_suspicion unsent[NODE_UNSENT_MAX];
    size_t n_unsent;

    /* the coordinator's confirmations in cases_round (allocated when this node first
     * coordinates: most nodes never do) */
    struct ring_case *cases;
    int64_t cases_round;
    uint64_t seen_changes;
    bool rescan;
    bool holding;               /* the next round waits for the confirmations (hold_losses) */
    int64_t hold_from, hold_to; /* since when; until when, as last told to the session */

    /* a confirmation of a suspicion of the coordinator (this node is its third member, or the
     * watcher in a round of two) */
    bool coord_probing, coord_from_key;
    uint64_t coord_probe, coord_wprobe; /* of the coordinator; of the watcher (0: not needed) */
    enum probe_res coord_sres, coord_wres;
    int64_t coord_lease;
    struct rdzv_coord_suspicion coord_x;
    int64_t coord_seen_round, coord_seen_rev; /* the last rounds/<r>/coord_suspect looked at */
    bool coord_todo;                          /* coord_x still to be written */
    /* while this node confirms a suspicion of the coordinator (it claims `coord` if it dies): until
     * when it probes the round's other suspects too, and when it last listed them */
    int64_t succeed_until, succeed_listed;

    uint64_t probe_ids;
    struct node_ring_stats st;
    /* past a suspected successor [0] and predecessor [1] (node_walk.c); NULL until a first walk */
    struct node_walk *walk[2];

    /* the rejoin cooldown: `strikes` losses in a row, each soon after rejoining or cut from
     * the ring (node_rejoin_wait); was_lost: the loss was seen (by node_step, or here) */
    bool was_lost;
    int strikes;
    int64_t rejoined_ms, cooldown_until_ms;
    /* the ring round in which this node reported a broken link of its own and the store took
     * the report (so its lease was live then): a loss of the lease in that round is a ring
     * eviction of a node cut from its neighbours that still reaches the store (0: none); when;
     * the last ring round this node was in (the loss is often seen after the run went on) */
    int64_t cut_round, cut_ms, ring_last;
};

/* Whether this node can reach a peer at the address in its record: a loopback address only
 * from the same host and network namespace (agents of a file store in network namespaces all
 * publish 127.0.0.1: without this each would find every other dead). */
static bool reachable(const struct node_ring *g, const struct rdzv_ring_peer *p)
{
    return !p->ns[0] || !g->ns[0] || strcmp(p->ns, g->ns) == 0;
}

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
        if (r == 0 && !(reach = reachable(g, &p))) {
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
        p.lease != lease || !reachable(g, &p))
        return;
    /* this node and the watcher in one domain, the coordinator outside it: its probe counts only
     * if it reaches the watcher too (a domain cut at its switch finds everybody outside dead) */
    struct rdzv_ring_peer wp;
    struct ring_peer wrp;
    bool need_w = from_key && node_correlated_watcher(n, x->sus.by, NULL, p.domain, &wp) > 0;
    if (need_w && !reachable(g, &wp))
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
    int r = rdzv_coord_suspect(n->rdzv, &cx, &err);
    if (r > 0)
        note_cut(n, g, cx.sus.round);
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
        int r = rdzv_coord_suspect(n->rdzv, &g->coord_x, &err);
        if (r > 0)
            note_cut(n, g, g->coord_x.sus.round);
        if (r >= 0)
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

static void evicted(struct node *n, struct node_ring *g, const struct rdzv_suspicion *x,
                    const char *why, int r, const struct ea_error *err)
{
    if (r < 0) {
        node_log(n, NODE_WARN, "liveness ring: could not revoke the lease of node '%s': %s",
                 x->node_id, err->msg);
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

/* The coordinator's probe of a suspect went unanswered: revoke its lease. */
static void evict_case(struct node *n, struct node_ring *g, struct ring_case *k, const char *why)
{
    struct ea_error err = {0};
    node_publish_detect(n, &k->c.sus);
    int r = rdzv_evict(n->rdzv, &k->c, &err);
    evicted(n, g, &k->c.sus, why, r, &err);
    k->state = CASE_DONE;
    if (r >= 0) /* the lease revoked (its node key's delete on its way), or gone already */
        k->state = r > 0 ? CASE_EVICTED : CASE_FREE;
}

static void on_probe(struct node *n, struct node_ring *g, const struct ring_report *x)
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
        evict_case(n, g, k, x->cause);
        return;
    }
}

void node_on_report(struct node *n, const struct ring_report *x)
{
    struct node_ring *g = n->ring;
    if (!g)
        return;
    if (x->kind == RING_REPORT_SUSPECT)
        on_suspect(n, g, x);
    else
        on_probe(n, g, x);
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
    bool can = reachable(g, &k->c.peer) && (!need_w || reachable(g, &k->watcher));
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
static void succession_probes(struct node *n, struct node_ring *g, int64_t now)
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
    struct rdzv_suspect_case list[NODE_CASES_MAX];
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
            evict_case(n, g, k, "no answer to its probe while the coordinator was suspected");
        else
            k->state = CASE_QUEUED;
    }
}

static void confirm_suspects(struct node *n, struct node_ring *g, int64_t now)
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
    struct rdzv_suspect_case list[NODE_CASES_MAX];
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
        if (k)
            queue_case(n, g, k, &list[i]);
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
 * leave in one round, not one round each, every survivor restarting its workers each time. */
static void hold_losses(struct node *n, struct node_ring *g, int64_t now)
{
    bool busy = g->rescan;
    for (size_t i = 0; g->cases && i < NODE_CASES_MAX; i++) {
        struct ring_case *k = &g->cases[i];
        if (k->state == CASE_EVICTED && !still_listed(n, k))
            k->state = CASE_FREE; /* its delete arrived: settled, the slot free */
        busy = busy || k->state == CASE_QUEUED || k->state == CASE_PROBING ||
               k->state == CASE_EVICTED || k->state == CASE_DEAD;
    }
    int64_t to = 0;
    if (busy) {
        if (!g->holding)
            g->hold_from = now;
        g->holding = true;
        to = now + g->p.probe_ms; /* every probe in flight has ended by then */
        if (to > g->hold_from + NODE_LOSS_HOLD_MAX_MS)
            to = g->hold_from + NODE_LOSS_HOLD_MAX_MS;
    } else if (g->holding) {
        g->holding = false; /* lifted: planned at once */
    } else {
        return;
    }
    if (to != g->hold_to) {
        g->hold_to = to;
        rdzv_hold_losses(n->rdzv, to);
    }
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
        confirm_suspects(n, g, now);
        hold_losses(n, g, now);
    } else {
        check_coord_suspicion(n, g);
        if (now < g->succeed_until) { /* this node may coordinate in a moment: the round waits */
            succession_probes(n, g, now);
            hold_losses(n, g, now);
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
