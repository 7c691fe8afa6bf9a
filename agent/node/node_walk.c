// SPDX-License-Identifier: Apache-2.0
/*
 * node_walk: the liveness ring's successor walk (docs/protocol.md "The liveness ring", issue
 * 41). A node whose link to its successor broke probes the members after it in ring order (one
 * whose link from its predecessor broke, those before it), as its own assignment chunk gives
 * them (rdzv_ring_walk: the chunk's order and its `ring` next or prev, no other chunk): the first
 * one, and once that one is dead all the others at once. It writes a suspicion for every one that
 * does not answer, in ring order, stopping at the first that answers, at the first it cannot
 * probe (no route from here, no ring port) and at RDZV_WALK_MAX. So a run of consecutive dead
 * members (a rack) is reported in one pass instead of from its two ends inwards, a round per
 * pair, and a run that starts at a chunk's first member (where the walker before it, the
 * previous chunk's last, knows no further) is walked from its other end. The coordinator
 * confirms each suspicion with its own probe as usual. Only on a broken link: a node record read
 * and a probe per member walked, bounded; nothing in a round where nothing breaks.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ea_time.h"
#include "node_internal.h"
#include "ringwalk.h"
#include "suspect.h"

/* The walks' probe ids: apart from node_ring's own (a counter from 1), and from each other. */
#define WALK_PROBE_BIT (UINT64_C(1) << 63)
#define WALK_BACK_BIT (UINT64_C(1) << 62)

enum walk_state {
    W_READ,     /* its node record to be read */
    W_WAIT,     /* its probe to be started (the transport had no free slot) */
    W_PROBING,  /* probed, no answer yet */
    W_DEAD,     /* did not answer: a suspicion to write */
    W_REPORTED, /* its suspicion written (or there already) */
    W_GONE,     /* no node key any more: its loss is known, the walk goes past it */
    W_ALIVE,    /* answered: the walk ends here */
    W_STOP,     /* cannot be probed from here (no evidence either way): the walk ends here */
};

struct walk_entry {
    struct rdzv_walk_step st;
    struct ring_peer peer;
    enum walk_state state;
    uint64_t probe;
    char cause[RDZV_CAUSE_MAX];
};

struct node_walk {
    bool backward;          /* past the predecessor, towards the ring's start */
    int64_t round;          /* 0: no walk */
    char from[RDZV_ID_MAX]; /* the suspected neighbour it walks past */
    struct walk_entry e[RDZV_WALK_MAX];
    size_t n;
    size_t at;  /* the first entry not yet reported or passed */
    bool ended; /* stopped: nothing more to read, probe or report */
    uint64_t seq;
};

void node_walk_free(struct node_walk *w)
{
    free(w);
}

/* A walk belongs to the ring round it started in: when the ring moves on (another round, or
 * none), it is dropped, its probes' answers ignored and its suspicions not written. */
static bool walk_of_round(struct node_walk *w, int64_t round)
{
    if (w->round == round)
        return true;
    w->round = 0;
    w->n = w->at = 0;
    w->ended = true;
    return false;
}

/* The entries walked so far: the first member alone, and once it is known dead (a run, not a
 * false alarm of the neighbour's link) all of them. */
static size_t window(const struct node_walk *w)
{
    if (!w->n)
        return 0;
    enum walk_state first = w->e[0].state;
    return first == W_DEAD || first == W_REPORTED || first == W_GONE ? w->n : 1;
}

/* Read the node records and start the probes that wait, in ring order, up to the first entry the
 * walk cannot go past: the first member alone, and once it is known dead (a run, not a false
 * alarm of the neighbour's link) all the others at once. */
static void pump(struct node *n, struct node_walk *w, const struct node_walk_env *env, int64_t now)
{
    for (size_t i = w->at; i < window(w); i++) {
        struct walk_entry *e = &w->e[i];
        if (e->state == W_ALIVE || e->state == W_STOP)
            return; /* nothing after it is walked */
        if (e->state == W_READ) {
            struct rdzv_ring_peer p;
            struct ea_error err = {0};
            int r = rdzv_ring_peer(n->rdzv, e->st.node_id, &p, &err);
            if (r == KV_ENOTFOUND) {
                e->state = W_GONE;
                continue;
            }
            if (r == -ENOPROTOOPT || (r == 0 && p.ns[0] && env->ns[0] && strcmp(p.ns, env->ns))) {
                e->state = W_STOP; /* not in the ring, or unreachable from this namespace */
                return;
            }
            if (r < 0) {
                node_log(n, NODE_DEBUG, "liveness ring: walk: reading node '%s': %s; trying again",
                         e->st.node_id, err.msg);
                return;
            }
            snprintf(e->peer.node_id, sizeof(e->peer.node_id), "%s", p.node_id);
            snprintf(e->peer.addr, sizeof(e->peer.addr), "%s", p.addr);
            e->peer.port = p.port;
            e->state = W_WAIT;
        }
        if (e->state == W_WAIT) {
            uint64_t id = WALK_PROBE_BIT | (w->backward ? WALK_BACK_BIT : 0) | ++w->seq;
            if (env->tr->probe(env->tr->ctx, id, &e->peer, w->round, env->probe_ms, now) < 0)
                return; /* every probe slot busy: the next pass */
            e->probe = id;
            e->state = W_PROBING;
        }
    }
}

/* Write the suspicions the answers so far allow, in ring order: every member up to the first
 * that answered (or could not be probed) and none after it. */
static void advance(struct node *n, struct node_walk *w)
{
    while (w->at < w->n) {
        struct walk_entry *e = &w->e[w->at];
        if (e->state == W_READ || e->state == W_WAIT || e->state == W_PROBING)
            return;                                      /* not known yet */
        if (e->state == W_ALIVE || e->state == W_STOP) { /* the first live one: the run ends */
            w->ended = true;
            return;
        }
        if (e->state != W_DEAD) { /* gone, or reported */
            w->at++;
            continue;
        }
        int64_t wall = ea_wall_ms();
        struct rdzv_suspicion sus = {.round = w->round, .fault_ms = -1, .detected_ms = wall};
        snprintf(sus.node_id, sizeof(sus.node_id), "%s", e->st.node_id);
        snprintf(sus.by, sizeof(sus.by), "%s", n->node_id);
        snprintf(sus.cause, sizeof(sus.cause), "%s", e->cause);
        int r = node_ring_suspect_member(n, &sus, e->st.group_rank);
        if (r < 0)
            return; /* the store: the next pass tries again */
        e->state = W_REPORTED;
        node_log(n, NODE_WARN,
                 "liveness ring: node '%s' (%zu %s '%s') did not answer a probe either (%s): "
                 "suspecting it",
                 e->st.node_id, w->at + 1, w->backward ? "before" : "after", w->from, e->cause);
        w->at++;
    }
    w->ended = true;
}

int node_walk_start(struct node *n, struct node_walk **wp, const struct node_walk_env *env,
                    int64_t round, const char *from, bool backward, int64_t now)
{
    struct node_walk *w = *wp;
    if (w && w->round == round && !strcmp(w->from, from))
        return 0; /* walked past this neighbour in this round already */
    if (!w && !(w = *wp = calloc(1, sizeof(*w))))
        return -ENOMEM;
    struct rdzv_walk_step steps[RDZV_WALK_MAX];
    size_t k = 0;
    struct ea_error err = {0};
    if (rdzv_ring_walk(n->rdzv, from, backward, steps, RDZV_WALK_MAX, &k, &err) < 0)
        node_log(n, NODE_DEBUG, "liveness ring: walk past '%s': %s", from, err.msg);
    memset(w->e, 0, sizeof(w->e));
    w->backward = backward;
    w->round = round;
    snprintf(w->from, sizeof(w->from), "%s", from);
    w->n = k;
    w->at = 0;
    w->ended = k == 0;
    for (size_t i = 0; i < k; i++) {
        w->e[i].st = steps[i];
        w->e[i].state = W_READ;
    }
    if (k)
        node_log(n, NODE_INFO, "liveness ring: walking the %zu member%s %s '%s'", k,
                 k == 1 ? "" : "s", backward ? "before" : "after", from);
    pump(n, w, env, now);
    return 0;
}

bool node_walk_on_probe(struct node *n, struct node_walk *w, int64_t round,
                        const struct ring_report *x)
{
    if (!w || !(x->probe_id & WALK_PROBE_BIT) || !(x->probe_id & WALK_BACK_BIT) != !w->backward)
        return false;
    if (!walk_of_round(w, round))
        return true; /* a walk of a round that has ended */
    for (size_t i = 0; i < w->n; i++) {
        struct walk_entry *e = &w->e[i];
        if (e->state != W_PROBING || e->probe != x->probe_id)
            continue;
        e->state = x->local ? W_STOP : x->alive ? W_ALIVE : W_DEAD;
        snprintf(e->cause, sizeof(e->cause), "walk: %s", x->cause);
        advance(n, w);
        break;
    }
    return true;
}

void node_walk_step(struct node *n, struct node_walk *w, const struct node_walk_env *env,
                    int64_t round, int64_t now)
{
    if (!w || w->ended || !walk_of_round(w, round))
        return;
    pump(n, w, env, now);
    advance(n, w);
}

bool node_walk_due(const struct node_walk *w)
{
    if (!w || w->ended)
        return false;
    for (size_t i = w->at; i < w->n && i < window(w); i++) {
        enum walk_state st = w->e[i].state;
        if (st == W_ALIVE || st == W_STOP)
            return false;
        if (st == W_READ || st == W_WAIT || st == W_DEAD)
            return true;
    }
    return false;
}
