// SPDX-License-Identifier: Apache-2.0
/* rdzv plan: coordinator decisions and rank assignment as pure functions. */
#include "plan.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A set of node ids for O(log n) membership tests (rdzv_assign and the plan run at the
 * coordinator over every node: nested loops would be 10^8 compares at 10,000 nodes). */
struct idset {
    const char **ids;
    size_t n;
};

static int cmp_id(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int idset_of_nodes(struct idset *set, const struct rdzv_node *nodes, size_t n)
{
    set->ids = malloc((n ? n : 1) * sizeof(*set->ids));
    if (!set->ids)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        set->ids[i] = nodes[i].node_id;
    set->n = n;
    qsort(set->ids, n, sizeof(*set->ids), cmp_id);
    return 0;
}

static int idset_of_members(struct idset *set, const struct rdzv_state *s)
{
    size_t n = s ? s->n_members : 0;
    set->ids = malloc((n ? n : 1) * sizeof(*set->ids));
    if (!set->ids)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        set->ids[i] = s->members[i].node_id;
    set->n = n;
    qsort(set->ids, n, sizeof(*set->ids), cmp_id);
    return 0;
}

static bool idset_has(const struct idset *set, const char *id)
{
    return set->n && bsearch(&id, set->ids, set->n, sizeof(*set->ids), cmp_id) != NULL;
}

/* The live node record of `id` through a sorted index of `nodes` (NULL if not live). */
static const struct rdzv_node *node_by_id(const struct rdzv_node *nodes, const size_t *order,
                                          size_t n, const char *id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(nodes[order[mid]].node_id, id);
        if (c == 0)
            return &nodes[order[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static const struct rdzv_node *sort_nodes_base;
static int cmp_node_idx(const void *a, const void *b)
{
    return strcmp(sort_nodes_base[*(const size_t *)a].node_id,
                  sort_nodes_base[*(const size_t *)b].node_id);
}

static void member_from_node(struct rdzv_member *m, const struct rdzv_node *n)
{
    memset(m, 0, sizeof(*m));
    memcpy(m->node_id, n->node_id, sizeof(m->node_id));
    memcpy(m->host, n->host, sizeof(m->host));
    memcpy(m->addr, n->addr, sizeof(m->addr));
    m->nproc = n->nproc;
    m->slot = n->create_revision;
    memcpy(m->domain, n->domain, sizeof(m->domain)); /* the ring's placement and confirmers */
}

static int cmp_host(const void *a, const void *b)
{
    const struct rdzv_member *x = a, *y = b;
    int c = strcmp(x->host, y->host);
    return c ? c : strcmp(x->node_id, y->node_id);
}

int rdzv_assign(const struct rdzv_state *prev, const struct rdzv_node *nodes, size_t n_nodes,
                int max_nodes, bool by_host, struct rdzv_member **ret, size_t *ret_n)
{
    struct rdzv_member *out = calloc(n_nodes ? n_nodes : 1, sizeof(*out));
    size_t *order = malloc((n_nodes ? n_nodes : 1) * sizeof(*order));
    struct idset was = {0};
    if (!out || !order || idset_of_members(&was, prev) < 0) {
        free(out);
        free(order);
        return -ENOMEM;
    }
    for (size_t j = 0; j < n_nodes; j++)
        order[j] = j;
    sort_nodes_base = nodes; /* single-threaded: the plan runs in the agent's loop */
    qsort(order, n_nodes, sizeof(*order), cmp_node_idx);
    size_t n = 0;
    /* survivors first, in their old rank order, with their current record (nproc may change) */
    for (size_t i = 0; prev && i < prev->n_members && n < (size_t)max_nodes; i++) {
        const struct rdzv_node *nd = node_by_id(nodes, order, n_nodes, prev->members[i].node_id);
        if (nd)
            member_from_node(&out[n++], nd);
    }
    /* then newcomers by arrival (nodes are sorted by create_revision) */
    for (size_t j = 0; j < n_nodes && n < (size_t)max_nodes; j++)
        if (!idset_has(&was, nodes[j].node_id))
            member_from_node(&out[n++], &nodes[j]);
    free(order);
    free(was.ids);
    if (by_host)
        qsort(out, n, sizeof(*out), cmp_host);
    int base = 0;
    for (size_t i = 0; i < n; i++) {
        out[i].group_rank = (int)i;
        out[i].rank_base = base;
        base += out[i].nproc;
    }
    *ret = out;
    *ret_n = n;
    return 0;
}

static int new_round(const struct rdzv_params *p, const struct rdzv_state *prev,
                     const struct rdzv_node *nodes, size_t n_nodes, int restart_count, bool scale,
                     struct rdzv_state *next, struct ea_error *err)
{
    struct rdzv_state s = {0};
    if (rdzv_assign(prev, nodes, n_nodes, p->max_nodes, p->rank_by_host, &s.members, &s.n_members) <
        0)
        return ea_errorf(err, -ENOMEM, "out of memory assigning ranks");
    s.round = (prev ? prev->round : 0) + 1;
    s.status = RDZV_RUNNING;
    s.group_world_size = (int)s.n_members;
    s.n_chunks = rdzv_chunk_count_next(prev ? prev->n_chunks : 0, s.n_members);
    for (size_t i = 0; i < s.n_members; i++)
        s.world_size += s.members[i].nproc;
    s.restart_count = restart_count;
    s.max_restarts = p->max_restarts;
    s.min_nodes = p->min_nodes;
    s.max_nodes = p->max_nodes;
    s.scale_events = (prev ? prev->scale_events : 0) + (scale && prev && prev->round > 0);
    s.last_failure = prev ? prev->last_failure : 0;
    *next = s;
    return 1;
}

/* Fill `next` as a new round from `prev` (may be NULL) over the live nodes. A membership-driven
 * round after the first counts as a scale event. */
static int next_round(const struct rdzv_params *p, const struct rdzv_state *prev,
                      const struct rdzv_node *nodes, size_t n_nodes, int restart_count,
                      struct rdzv_state *next, struct ea_error *err)
{
    return new_round(p, prev, nodes, n_nodes, restart_count, true, next, err);
}

/* A WAITING state that remembers the survivors (so they keep their order later). */
static int waiting(const struct rdzv_params *p, const struct rdzv_state *prev,
                   const struct rdzv_node *nodes, size_t n_nodes, int restart_count,
                   struct rdzv_state *next, struct ea_error *err)
{
    int r = new_round(p, prev, nodes, n_nodes, restart_count, false, next, err);
    if (r < 0)
        return r;
    next->round = prev->round; /* no round runs; the next commit is round + 1 */
    next->status = RDZV_WAITING;
    return 1;
}

static size_t count_survivors(const struct rdzv_state *s, const struct rdzv_node *nodes,
                              size_t n_nodes, bool *ret_nomem)
{
    struct idset live;
    if (idset_of_nodes(&live, nodes, n_nodes) < 0) {
        *ret_nomem = true;
        return 0;
    }
    size_t n = 0;
    for (size_t i = 0; i < s->n_members; i++)
        n += idset_has(&live, s->members[i].node_id);
    free(live.ids);
    return n;
}

static bool all_done(const struct rdzv_state *s, const char *const *done, size_t n_done)
{
    if (s->n_members == 0 || n_done < s->n_members)
        return false;
    struct idset set = {.ids = malloc(n_done * sizeof(*set.ids)), .n = n_done};
    if (!set.ids)
        return false; /* asked again at the next event */
    memcpy(set.ids, done, n_done * sizeof(*set.ids));
    qsort(set.ids, n_done, sizeof(*set.ids), cmp_id);
    bool all = true;
    for (size_t i = 0; i < s->n_members && all; i++)
        all = idset_has(&set, s->members[i].node_id);
    free(set.ids);
    return all;
}

static int64_t earliest(int64_t a, int64_t b)
{
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    return a < b ? a : b;
}

/* A decision that writes a round of the live nodes: RDZV_PLAN_NEED_NODES when the caller gave
 * counts only (rdzv_view.survivors_known), else `call`. */
#define NODES_OR(v, call) ((!(v)->nodes && (v)->n_nodes) ? RDZV_PLAN_NEED_NODES : (call))

/* Members of the state still live: as the caller counted them, or counted here. */
static size_t survivors_of(const struct rdzv_view *v, bool *ret_nomem)
{
    return v->survivors_known ? v->n_survivors
                              : count_survivors(v->state, v->nodes, v->n_nodes, ret_nomem);
}

/* Cold start or waiting: commit at max, or at >= min after settle / last call. */
static int plan_gather(const struct rdzv_params *p, const struct rdzv_view *v,
                       struct rdzv_state *next, int64_t *wake, struct ea_error *err)
{
    const struct rdzv_state *s = v->state;
    int restarts = s ? s->restart_count : 0;
    if (v->n_nodes >= (size_t)p->max_nodes)
        return NODES_OR(v, next_round(p, s, v->nodes, v->n_nodes, restarts, next, err));
    if (v->n_nodes < (size_t)p->min_nodes)
        return 0;
    int64_t t_settle = v->last_arrival_ms + p->settle_ms;
    int64_t t_last = v->min_reached_ms >= 0 ? v->min_reached_ms + p->last_call_ms : -1;
    if (v->now_ms >= t_settle || (t_last >= 0 && v->now_ms >= t_last))
        return NODES_OR(v, next_round(p, s, v->nodes, v->n_nodes, restarts, next, err));
    *wake = earliest(t_settle, t_last);
    return 0;
}

int64_t rdzv_loss_batch_ms(size_t n_members)
{
    if (n_members < 1000)
        return 0;
    return n_members / 5 < 2000 ? (int64_t)(n_members / 5) : 2000;
}

int64_t rdzv_charge_window_ms(const struct rdzv_params *p)
{
    int64_t slack = p->lease_ttl_ms / 2 > 1000 ? p->lease_ttl_ms / 2 : 1000;
    return p->lease_ttl_ms + slack;
}

/* FAILING: a worker failed with the budget spent and every agent stopped its workers. A member
 * lost within the charge window explains the failure: the next round, uncharged. Otherwise the
 * charge is final once the window has passed: FAILED. Newcomers and done records change nothing. */
static int plan_failing(const struct rdzv_params *p, const struct rdzv_view *v,
                        struct rdzv_state *next, int64_t *wake, struct ea_error *err)
{
    const struct rdzv_state *s = v->state;
    bool nomem = false;
    size_t survivors = survivors_of(v, &nomem);
    if (nomem)
        return ea_errorf(err, -ENOMEM, "out of memory");
    if (survivors < s->n_members) {
        if (v->n_nodes >= (size_t)p->min_nodes)
            return NODES_OR(v, next_round(p, s, v->nodes, v->n_nodes, s->restart_count, next, err));
        return NODES_OR(v, waiting(p, s, v->nodes, v->n_nodes, s->restart_count, next, err));
    }
    if (v->charge_seen_ms < 0)
        return 0; /* the session has not timed this charge yet */
    int64_t t_final = v->charge_seen_ms + rdzv_charge_window_ms(p);
    if (v->now_ms < t_final) {
        *wake = t_final;
        return 0;
    }
    int r = rdzv_state_copy(next, s);
    if (r < 0)
        return ea_errorf(err, r, "out of memory");
    next->status = RDZV_FAILED;
    next->generation = v->generation;
    next->failure_round = s->charge_failed_round;
    next->restart_count = s->restart_count + 1; /* the failure that spent the budget, charged */
    next->charge_round = 0;
    return 1;
}

int rdzv_plan(const struct rdzv_params *p, const struct rdzv_view *v, struct rdzv_state *ret_next,
              int64_t *ret_wake_ms, struct ea_error *err)
{
    const struct rdzv_state *s = v->state;
    *ret_wake_ms = -1;
    if (!s || s->status == RDZV_WAITING)
        return plan_gather(p, v, ret_next, ret_wake_ms, err);
    if (s->status == RDZV_FAILING)
        return plan_failing(p, v, ret_next, ret_wake_ms, err);
    if (s->status != RDZV_RUNNING)
        return 0; /* succeeded, failed, closed are final */

    bool nomem = false;
    size_t survivors = survivors_of(v, &nomem);
    if (nomem)
        return ea_errorf(err, -ENOMEM, "out of memory");
    size_t newcomers = v->n_nodes - survivors;
    bool pending = s->charge_round > 0 && s->charge_round == s->round;
    int64_t batch = rdzv_loss_batch_ms(s->n_members);
    int64_t hold = batch > 0 && v->state_seen_ms > 0 ? v->state_seen_ms + batch : 0;
    if (v->loss_hold_ms > hold) /* the ring's confirmations in flight: their evictions too */
        hold = v->loss_hold_ms;
    if (survivors < s->n_members && v->now_ms < hold) {
        *ret_wake_ms = hold; /* more may be on their way */
        return 0;
    }
    if (survivors < s->n_members) {
        /* a member left or its lease expired: re-form at once, without charging the budget; a
         * failure still pending within this lease TTL was the loss's symptom: refund it */
        int restarts = s->restart_count - (pending ? 1 : 0);
        if (v->n_nodes >= (size_t)p->min_nodes)
            return NODES_OR(v, next_round(p, s, v->nodes, v->n_nodes, restarts, ret_next, err));
        return NODES_OR(v, waiting(p, s, v->nodes, v->n_nodes, restarts, ret_next, err));
    }
    /* reports that reach the coordinator (failures/<r>, reform/<r>): acted on here, once */
    if (v->failure_reported)
        return NODES_OR(v, rdzv_plan_failure_ex(p, s, v->nodes, v->n_nodes, v->failure_stop,
                                                ret_next, err));
    if (v->reform_requested)
        return NODES_OR(v, rdzv_plan_reform(p, s, v->nodes, v->n_nodes, ret_next, err));
    if (all_done(s, v->done, v->n_done)) {
        int r = rdzv_state_copy(ret_next, s);
        if (r < 0)
            return ea_errorf(err, r, "out of memory");
        ret_next->status = RDZV_SUCCEEDED;
        return 1;
    }
    if (pending && v->charge_seen_ms >= 0) {
        /* no member lost within one lease TTL of the failure (plus the store's expiry
         * granularity and delivery: etcd checks leases every 0.5 s): the charge is final */
        int64_t t_final = v->charge_seen_ms + rdzv_charge_window_ms(p);
        if (v->now_ms >= t_final) {
            int r = rdzv_state_copy(ret_next, s);
            if (r < 0)
                return ea_errorf(err, r, "out of memory");
            ret_next->generation = v->generation; /* same round: workers keep running */
            ret_next->charge_round = 0;
            if (s->restart_count > s->max_restarts) {
                ret_next->status = RDZV_FAILED;
                ret_next->failure_round = s->charge_failed_round;
            }
            return 1;
        }
        *ret_wake_ms = t_final;
    }
    /* scale up: batch arrivals for `settle`; not while members are finishing (n_done > 0) */
    if (newcomers > 0 && s->n_members < (size_t)p->max_nodes && v->n_done == 0) {
        int64_t t_settle = v->last_arrival_ms + p->settle_ms;
        if (v->now_ms >= t_settle)
            return NODES_OR(
                v, next_round(p, s, v->nodes, v->n_nodes, s->restart_count, ret_next, err));
        *ret_wake_ms = earliest(*ret_wake_ms, t_settle);
    }
    return 0;
}

int rdzv_plan_failure(const struct rdzv_params *p, const struct rdzv_state *s,
                      const struct rdzv_node *nodes, size_t n_nodes, struct rdzv_state *ret_next,
                      struct ea_error *err)
{
    return rdzv_plan_failure_ex(p, s, nodes, n_nodes, false, ret_next, err);
}

int rdzv_plan_failure_ex(const struct rdzv_params *p, const struct rdzv_state *s,
                         const struct rdzv_node *nodes, size_t n_nodes, bool stop,
                         struct rdzv_state *ret_next, struct ea_error *err)
{
    int restarts = s->restart_count + 1;
    bool pending = s->charge_round > 0 && s->charge_round == s->round;
    if (restarts > s->max_restarts || stop) {
        /* The budget is spent: no worker starts on speculation. A failure while the last charge
         * is pending confirms it, and a lone member has nobody whose loss could explain it: FAILED
         * at once. Otherwise FAILING: workers stop while the window runs (plan_failing). */
        int r = rdzv_state_copy(ret_next, s);
        if (r < 0)
            return ea_errorf(err, r, "out of memory");
        if (pending || s->n_members <= 1) {
            ret_next->status = RDZV_FAILED;
            ret_next->failure_round = s->round;
            ret_next->restart_count = restarts;
            ret_next->charge_round = 0;
        } else {
            ret_next->status = RDZV_FAILING;
            ret_next->charge_round = s->round; /* times the window (charge_seen_ms) */
            ret_next->charge_failed_round = s->round;
        }
        ret_next->last_failure = s->round;
        return 1;
    }
    struct rdzv_params q = *p;
    q.max_restarts = s->max_restarts; /* the run's budget, as committed */
    if (n_nodes < (size_t)p->min_nodes)
        return waiting(&q, s, nodes, n_nodes, restarts, ret_next, err);
    int r = new_round(&q, s, nodes, n_nodes, restarts, false, ret_next, err);
    if (r > 0) {
        ret_next->charge_round = ret_next->round;
        ret_next->charge_failed_round = s->round;
        ret_next->last_failure = s->round; /* the next failure's record follows on from it */
    }
    return r;
}

int rdzv_plan_reform(const struct rdzv_params *p, const struct rdzv_state *s,
                     const struct rdzv_node *nodes, size_t n_nodes, struct rdzv_state *ret_next,
                     struct ea_error *err)
{
    if (n_nodes < (size_t)p->min_nodes)
        return waiting(p, s, nodes, n_nodes, s->restart_count, ret_next, err);
    return next_round(p, s, nodes, n_nodes, s->restart_count, ret_next, err);
}

int64_t rdzv_succession_step_ms(size_t n_members)
{
    /* long enough for a claim's event to reach the next successor in a big fleet (etcd fans one
     * small event out to 10,000 watchers in a few hundred ms), short in a small one */
    size_t step = 100 + n_members / 10;
    return step < 1000 ? (int64_t)step : 1000;
}

/* The successor index of `rank` in a round of n members (-1: not a successor): positions group
 * rank 1 (the coordinator is usually rank 0), then floor(i * n / RDZV_SUCCESSORS), each counted
 * once (a small round repeats some). */
static int successor_index(int rank, size_t n)
{
    size_t seen[RDZV_SUCCESSORS] = {0};
    int k = 0;
    for (size_t i = 0; i < RDZV_SUCCESSORS; i++) {
        size_t pos = i == 0 ? 1 : i * n / RDZV_SUCCESSORS;
        bool dup = pos >= n;
        for (int j = 0; j < k && !dup; j++)
            dup = seen[j] == pos;
        if (dup)
            continue;
        if (pos == (size_t)rank)
            return k;
        seen[k++] = pos;
    }
    return -1;
}

/* The least step between two turns of a gathering run's succession. */
#define GATHER_STEP_MIN_MS 400

/* splitmix64's finaliser: slots are store revisions, close together; their turns must not be. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

int64_t rdzv_gather_takeover_delay_ms(size_t n_live, int64_t slot)
{
    int64_t late = 450 + 50 * (int64_t)((uint64_t)slot % 20);
    if (n_live == 0)
        return late;
    /* no workers wait for a gathering run's coordinator: a wider step, so a claim has time to
     * reach the next turn's node even on a slow store */
    int64_t step = rdzv_succession_step_ms(n_live);
    if (step < GATHER_STEP_MIN_MS)
        step = GATHER_STEP_MIN_MS;
    uint64_t turn = mix64((uint64_t)slot) % n_live;
    if (turn < RDZV_SUCCESSORS)
        return (int64_t)turn * step;
    return RDZV_SUCCESSORS * step + late;
}

int64_t rdzv_takeover_delay_ms(int group_rank, size_t n_members, int64_t slot)
{
    int64_t step = rdzv_succession_step_ms(n_members);
    int64_t after_members = n_members ? RDZV_SUCCESSORS * step + 400 : 0;
    int i = group_rank >= 0 ? successor_index(group_rank, n_members) : -1;
    if (i >= 0)
        return i * step;
    if (group_rank >= 0) /* every successor gone or silent: the rest by rank (rare: a stampede) */
        return RDZV_SUCCESSORS * step + 50 * (group_rank < 8 ? group_rank : 8);
    return after_members + 450 + 50 * (int64_t)((uint64_t)slot % 20);
}
