// SPDX-License-Identifier: Apache-2.0
/*
 * The successor walk of the node unit (agent/node/node_walk.c) without real time or sockets:
 * twelve nodes on one memory store (one assignment chunk: the ring in its order), each a real
 * rendezvous session in a struct node, a fake clock and a fake ring transport that records the
 * probes the nodes ask for (the test answers them, out of order). A node whose successor died
 * probes the members after it and reports every one up to the first that answers: a run of 3 or
 * of 8 dead members is reported in one pass and leaves in one round, and so is one walked from
 * its end (backwards, from the member after it); the walk stops at the first live member and at
 * one it could not probe (no evidence); a walk of a round that has ended writes nothing.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ea_loop.h"
#include "ea_time.h"
#include "kv.h"
#include "node.h"
#include "session.h"
#include "suspect.h"

#define NN 12
#define PREFIX "/elastic/walkt/"
#define TTL 9000
#define PROBES 48

struct probe_req {
    uint64_t id;
    char peer[RING_NAME_MAX + 1];
    int64_t round;
};

struct fake_tr {
    int64_t round;
    char prev[RING_NAME_MAX + 1], next[RING_NAME_MAX + 1];
    struct probe_req probes[PROBES];
    int n_probes;
};

struct counts {
    int suspect, evicted;
};

static struct kv *kv;
static struct ea_fake_clock fc;
static struct node nodes[NN];
static struct fake_tr tr[NN];
static struct counts cnt[NN];
static bool dead[NN];

static void tr_set(void *ctx, int64_t round, int members, const char *prev, bool await_prev,
                   const struct ring_peer *next, int64_t now)
{
    (void)members, (void)await_prev, (void)now;
    struct fake_tr *t = ctx;
    t->round = round;
    snprintf(t->prev, sizeof(t->prev), "%s", prev ? prev : "");
    snprintf(t->next, sizeof(t->next), "%s", next ? next->node_id : "");
}

static int tr_probe(void *ctx, uint64_t id, const struct ring_peer *peer, int64_t round,
                    int64_t timeout_ms, int64_t now)
{
    (void)timeout_ms, (void)now;
    struct fake_tr *t = ctx;
    if (t->n_probes >= PROBES)
        return -EBUSY;
    struct probe_req *p = &t->probes[t->n_probes++];
    p->id = id;
    p->round = round;
    snprintf(p->peer, sizeof(p->peer), "%s", peer->node_id);
    return 0;
}

static void on_event(void *ctx, const struct node_event *e)
{
    struct counts *c = ctx;
    c->suspect += e->kind == NODE_EV_SUSPECT;
    c->evicted += e->kind == NODE_EV_EVICTED;
}

static void setup(void)
{
    struct kv_config kc = {.backend = "memory"};
    struct ea_error err = {0};
    cr_assert_eq(kv_open(&kc, &kv, &err), 0, "%s", err.msg);
    /* an hour ahead of the real clock (test_node.c: no hold ends early on a slow machine) */
    ea_fake_clock_init(&fc, ea_now_ms() + 3600 * 1000);
    memset(tr, 0, sizeof(tr));
    memset(cnt, 0, sizeof(cnt));
    memset(dead, 0, sizeof(dead));
    for (int i = 0; i < NN; i++) {
        struct rdzv_config rc = {.prefix = PREFIX,
                                 .params = {.min_nodes = 2,
                                            .max_nodes = NN,
                                            .settle_ms = 0,
                                            .last_call_ms = 1000,
                                            .max_restarts = 100,
                                            .lease_ttl_ms = TTL,
                                            .ring = true},
                                 .lease_ttl_ms = TTL};
        snprintf(rc.self.node_id, sizeof(rc.self.node_id), "n%d", i);
        snprintf(rc.self.host, sizeof(rc.self.host), "h%d", i);
        snprintf(rc.self.addr, sizeof(rc.self.addr), "127.0.0.1");
        rc.self.nproc = 1;
        rc.self.pid = 100 + i;
        rc.self.live_port = 41000 + i;
        memset(&nodes[i], 0, sizeof(nodes[i]));
        cr_assert_eq(rdzv_session_create(kv, &rc, &nodes[i].rdzv, &err), 0, "%s", err.msg);
        struct node_params p = {.node_id = rc.self.node_id,
                                .clock = &fc.clock,
                                .join_timeout_ms = 60000,
                                .ops = {.ctx = &cnt[i], .event = on_event}};
        node_init(&nodes[i], &p);
        struct node_ring_params rp = {.tr = {.ctx = &tr[i], .set = tr_set, .probe = tr_probe},
                                      .probe_ms = 600,
                                      .cooldown_ms = TTL,
                                      .await_prev = true};
        cr_assert_eq(node_ring_open(&nodes[i], &rp), 0);
        cr_assert_eq(rdzv_join(nodes[i].rdzv, &err), 0, "%s", err.msg);
    }
}

static void teardown(void)
{
    for (int i = 0; i < NN; i++)
        node_free(&nodes[i]);
    kv_close(kv);
}

TestSuite(walk, .init = setup, .fini = teardown, .timeout = 60);

/* One pass of every live node: the store's events, the store's step, the ring's step. */
static void pass(void)
{
    struct kv_event *ev = NULL;
    size_t n = 0;
    struct ea_error err = {0};
    cr_assert_eq(kv_read_events(kv, &ev, &n, &err), 0, "%s", err.msg);
    for (int i = 0; i < NN; i++) {
        if (dead[i])
            continue;
        if (n)
            cr_assert_geq(rdzv_apply_events_at(nodes[i].rdzv, ev, n, fc.now, &err), 0, "%s",
                          err.msg);
        struct node_step_in in = {.may_rejoin = true, .generation = 1, .done_still_valid = true};
        node_step(&nodes[i], &in, fc.now);
        node_ring_step(&nodes[i], true, fc.now);
    }
    kv_events_free(ev, n);
}

/* Passes of every live node, 10 simulated ms apart. */
static void passes(int k)
{
    while (k-- > 0) {
        pass();
        fc.now += 10;
    }
}

static int64_t round_of(int i)
{
    const struct rdzv_state *s = rdzv_current(nodes[i].rdzv, NULL);
    return s && s->status == RDZV_RUNNING && rdzv_self_member(nodes[i].rdzv) ? s->round : 0;
}

/* Passes 50 simulated ms apart until every live node is in one running round of `members` with
 * its ring set, or 400 passes went by. */
static bool settle(int members)
{
    for (int k = 0; k < 400; k++) {
        pass();
        bool ok = true;
        int64_t r0 = -1;
        for (int i = 0; i < NN && ok; i++) {
            if (dead[i])
                continue;
            const struct rdzv_state *s = rdzv_current(nodes[i].rdzv, NULL);
            int64_t r = round_of(i);
            ok = r > 0 && s->group_world_size == members && tr[i].round == r && (r0 < 0 || r == r0);
            r0 = r;
        }
        if (ok)
            return true;
        fc.now += 50;
    }
    return false;
}

static int coordinator(void)
{
    for (int i = 0; i < NN; i++)
        if (!dead[i] && rdzv_is_coordinator(nodes[i].rdzv))
            return i;
    cr_assert_fail("no coordinator");
    return -1;
}

static int index_of(const char *id)
{
    return id[0] == 'n' ? atoi(id + 1) : -1;
}

/* The ring's report to node w: its link to its successor (`outbound`) or predecessor broke. */
static void link_broke(int w, bool outbound)
{
    struct ring_report r = {
        .kind = RING_REPORT_SUSPECT, .round = tr[w].round, .heard_ms = -1, .outbound = outbound};
    snprintf(r.node_id, sizeof(r.node_id), "%s", outbound ? tr[w].next : tr[w].prev);
    snprintf(r.cause, sizeof(r.cause), "refused");
    node_on_report(&nodes[w], &r);
}

static void answer(int w, const struct probe_req *p, bool alive, bool local)
{
    struct ring_report r = {.kind = RING_REPORT_PROBE,
                            .round = p->round,
                            .probe_id = p->id,
                            .alive = alive,
                            .local = local};
    snprintf(r.node_id, sizeof(r.node_id), "%s", p->peer);
    snprintf(r.cause, sizeof(r.cause), "%s", local ? "no route" : alive ? "answered" : "refused");
    node_on_report(&nodes[w], &r);
}

/* The member `k` places after node i in the ring (k < 0: before). */
static int after(int i, int k)
{
    for (; k > 0; k--)
        i = index_of(tr[i].next);
    for (; k < 0; k++)
        i = index_of(tr[i].prev);
    return i;
}

/* A round of NN; w, the coordinator's successor, watches the run of members after it. */
static int walker(void)
{
    cr_assert(settle(NN), "no round of %d", NN);
    return index_of(tr[coordinator()].next);
}

/* Probes node w asked for of node x since probe `from`. */
static const struct probe_req *probe_of(int w, int x, int from)
{
    for (int i = from; i < tr[w].n_probes; i++)
        if (index_of(tr[w].probes[i].peer) == x)
            return &tr[w].probes[i];
    return NULL;
}

/* w's walk answered until it asks for no more probes, the last asked first (they run in
 * parallel): dead members refuse, the rest answer; `lying` (if >= 0) refuses although it lives,
 * `local` (if >= 0) cannot be probed. */
static void answer_walk(int w, int from, int lying, int local)
{
    while (from < tr[w].n_probes) {
        int to = tr[w].n_probes;
        for (int i = to - 1; i >= from; i--) {
            int x = index_of(tr[w].probes[i].peer);
            answer(w, &tr[w].probes[i], !dead[x] && x != lying, x == local);
        }
        from = to;
        passes(1);
    }
}

/* The coordinator probes exactly the k members after w (`dir` 1; -1: before it) and no one
 * else, they refuse, and the survivors go on in one round without them. */
static void leave_in_one_round(int w, int k, int dir, int64_t r0)
{
    int c = coordinator();
    passes(5);
    cr_assert_eq(tr[c].n_probes, k, "the coordinator probed %d suspects, not the run of %d",
                 tr[c].n_probes, k);
    for (int j = 1; j <= k; j++)
        cr_assert_not_null(probe_of(c, after(w, dir * j), 0),
                           "member %d of the run (n%d) unreported", j, after(w, dir * j));
    for (int i = 0; i < k; i++)
        answer(c, &tr[c].probes[i], false, false);
    cr_assert_eq(cnt[c].evicted, k);
    cr_assert(settle(NN - k), "no round without the run of %d", k);
    cr_assert_eq(round_of(c), r0 + 1, "the survivors went through more than one round");
}

/* A run of k consecutive members after w (`dir` 1; -1: before it) dies; only w's link to the
 * first breaks. */
static void run_dies(int w, int k, int dir)
{
    for (int j = 1; j <= k; j++)
        dead[after(w, dir * j)] = true;
    link_broke(w, dir > 0);
    passes(3);
}

Test(walk, a_run_of_three_dead_successors_is_reported_in_one_pass)
{
    int w = walker();
    int64_t r0 = round_of(w);
    run_dies(w, 3, 1);
    cr_assert_not_null(probe_of(w, after(w, 2), 0), "the walk did not probe past the successor");
    cr_assert_null(probe_of(w, after(w, 3), 0), "the walk probed on before its first was dead");
    answer_walk(w, 0, -1, -1);
    leave_in_one_round(w, 3, 1, r0);
}

Test(walk, a_run_of_eight_dead_successors_is_reported_in_one_pass)
{
    int w = walker();
    int64_t r0 = round_of(w);
    run_dies(w, 8, 1);
    answer_walk(w, 0, -1, -1);
    cr_assert_eq(cnt[w].suspect, 8, "the walker reported %d of the run of 8", cnt[w].suspect);
    leave_in_one_round(w, 8, 1, r0);
}

/* A run that ends at w's predecessor (it may begin at a chunk's first member, past which the
 * walker before it knows no order): w walks it backwards. */
Test(walk, a_run_of_dead_predecessors_is_reported_from_its_end)
{
    cr_assert(settle(NN), "no round of %d", NN);
    int w = index_of(tr[coordinator()].prev);
    int64_t r0 = round_of(w);
    run_dies(w, 4, -1);
    answer_walk(w, 0, -1, -1);
    cr_assert_eq(cnt[w].suspect, 4, "the walker reported %d of the run of 4", cnt[w].suspect);
    leave_in_one_round(w, 4, -1, r0);
}

/* The first member that answers ends the run: one after it that does not answer (here one that
 * lies) is its own neighbours' to report, not the walker's. */
Test(walk, the_walk_stops_at_the_first_live_member)
{
    int w = walker();
    run_dies(w, 3, 1);
    int live = after(w, 4), beyond = after(w, 5);
    answer_walk(w, 0, beyond, -1);
    cr_assert_not_null(probe_of(w, beyond, 0));
    passes(5);
    cr_assert_eq(cnt[w].suspect, 3, "the walker reported %d, not the run of 3", cnt[w].suspect);
    int c = coordinator();
    cr_assert_null(probe_of(c, live, 0));
    cr_assert_null(probe_of(c, beyond, 0), "a member past the first live one was reported");
    cr_assert_eq(tr[c].n_probes, 3);
}

/* A probe that could not leave this node says nothing of its member: the walk ends there
 * without reporting it or anyone after it. */
Test(walk, a_probe_that_could_not_leave_this_node_stops_the_walk)
{
    int w = walker();
    run_dies(w, 4, 1);
    int unknown = after(w, 3);
    answer_walk(w, 0, -1, unknown);
    passes(5);
    cr_assert_eq(cnt[w].suspect, 2, "the walker reported %d, not the two before the local probe",
                 cnt[w].suspect);
    int c = coordinator();
    cr_assert_not_null(probe_of(c, after(w, 2), 0), "the member before the local probe unreported");
    cr_assert_null(probe_of(c, unknown, 0), "a member that could not be probed was reported");
    cr_assert_null(probe_of(c, after(w, 4), 0), "a member past the local probe was reported");
}

/* The round changes while the walk's probes are out: their answers write nothing. */
Test(walk, a_walk_of_the_previous_round_is_dropped_when_the_round_changes)
{
    int w = walker();
    int64_t r0 = round_of(w);
    int s = after(w, 1);
    run_dies(w, 3, 1);
    int walked = tr[w].n_probes;
    cr_assert_not_null(probe_of(w, after(w, 2), 0), "the walk did not probe past the successor");
    /* only the successor's own suspicion is confirmed: a round without it */
    int c = coordinator();
    const struct probe_req *p = probe_of(c, s, 0);
    cr_assert_not_null(p);
    answer(c, p, false, false);
    dead[after(w, 2)] = dead[after(w, 3)] = false; /* back, as far as the test goes */
    cr_assert(settle(NN - 1), "no round without the successor");
    cr_assert_eq(round_of(w), r0 + 1);
    int before = cnt[w].suspect;
    for (int i = 0; i < walked; i++) /* the old round's answers: all refused */
        answer(w, &tr[w].probes[i], false, false);
    passes(5);
    cr_assert_eq(cnt[w].suspect, before, "a walk of round %lld reported in round %lld",
                 (long long)r0, (long long)r0 + 1);
}
