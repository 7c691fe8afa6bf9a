// SPDX-License-Identifier: Apache-2.0
/* The protocol's rules (DESIGN.md §4) as pure functions: cold start, scale up/down, failures,
 * success, rank assignment. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

static struct rdzv_params P = {.min_nodes = 2, .max_nodes = 4, .settle_ms = 1000,
                               .last_call_ms = 30000, .max_restarts = 1, .lease_ttl_ms = 2000};

static struct rdzv_node nodes[8];

static void mknodes(int n)
{
    memset(nodes, 0, sizeof(nodes));
    for (int i = 0; i < n; i++) {
        snprintf(nodes[i].node_id, sizeof(nodes[i].node_id), "n%d", i);
        snprintf(nodes[i].host, sizeof(nodes[i].host), "h%d", i);
        snprintf(nodes[i].addr, sizeof(nodes[i].addr), "10.0.0.%d", i);
        nodes[i].nproc = 2;
        nodes[i].create_revision = 10 + i;
    }
}

static int plan(const struct rdzv_state *s, int n, int64_t now, int64_t last_arrival,
                int64_t min_reached, struct rdzv_state *next, int64_t *wake)
{
    struct rdzv_view v = {.state = s, .nodes = nodes, .n_nodes = (size_t)n, .now_ms = now,
                          .last_arrival_ms = last_arrival, .min_reached_ms = min_reached};
    return rdzv_plan(&P, &v, next, wake, NULL);
}

Test(plan, cold_start_waits_below_min)
{
    mknodes(1);
    struct rdzv_state next;
    int64_t wake;
    cr_assert_eq(plan(NULL, 1, 100000, 0, -1, &next, &wake), 0);
    cr_assert_eq(wake, -1);
}

Test(plan, cold_start_settles_then_commits)
{
    mknodes(3);
    struct rdzv_state next;
    int64_t wake;
    /* 3 of max 4 present, last arrival at t=5000: wait until 6000 */
    cr_assert_eq(plan(NULL, 3, 5500, 5000, 4000, &next, &wake), 0);
    cr_assert_eq(wake, 6000);
    cr_assert_eq(plan(NULL, 3, 6000, 5000, 4000, &next, &wake), 1);
    cr_assert_eq(next.round, 1);
    cr_assert_eq(next.status, RDZV_RUNNING);
    cr_assert_eq(next.n_members, 3);
    cr_assert_eq(next.world_size, 6);
    cr_assert_str_eq(next.members[2].node_id, "n2");
    cr_assert_eq(next.members[2].rank_base, 4);
    rdzv_state_clear(&next);
}

Test(plan, last_call_bounds_a_trickle)
{
    mknodes(3);
    struct rdzv_state next;
    int64_t wake;
    /* arrivals keep coming (last at 40000) but min was reached at 10000: last call at 40000 */
    cr_assert_eq(plan(NULL, 3, 39999, 39500, 10000, &next, &wake), 0);
    cr_assert_eq(wake, 40000);
    cr_assert_eq(plan(NULL, 3, 40000, 39900, 10000, &next, &wake), 1);
    rdzv_state_clear(&next);
}

Test(plan, commits_at_max_at_once)
{
    mknodes(5);
    struct rdzv_state next;
    int64_t wake;
    cr_assert_eq(plan(NULL, 5, 100, 100, 50, &next, &wake), 1);
    cr_assert_eq(next.n_members, 4, "extra node must stay a spare");
    cr_assert_str_eq(next.members[3].node_id, "n3");
    rdzv_state_clear(&next);
}

static struct rdzv_state running(int n)
{
    struct rdzv_state s = {0};
    cr_assert_eq(rdzv_plan(&P,
                           &(struct rdzv_view){.nodes = nodes, .n_nodes = (size_t)n,
                                               .now_ms = 1000000, .min_reached_ms = 0},
                           &s, &(int64_t){0}, NULL),
                 1);
    return s;
}

Test(plan, scale_down_keeps_survivor_order_and_budget)
{
    mknodes(4);
    struct rdzv_state s = running(4), next;
    int64_t wake;
    /* n1 dies: nodes n0, n2, n3 remain */
    nodes[1] = nodes[3];
    cr_assert_eq(plan(&s, 3, 2000000, 0, 0, &next, &wake), 1);
    cr_assert_eq(next.round, 2);
    cr_assert_eq(next.restart_count, 0, "a lost node is not a worker failure");
    cr_assert_eq(next.n_members, 3);
    cr_assert_str_eq(next.members[0].node_id, "n0");
    cr_assert_str_eq(next.members[1].node_id, "n2");
    cr_assert_str_eq(next.members[2].node_id, "n3");
    cr_assert_eq(next.members[2].rank_base, 4);
    rdzv_state_clear(&s);
    rdzv_state_clear(&next);
}

Test(plan, below_min_waits_then_restarts)
{
    mknodes(2);
    struct rdzv_state s = running(2), next, next2;
    int64_t wake;
    cr_assert_eq(plan(&s, 1, 2000000, 0, -1, &next, &wake), 1);
    cr_assert_eq(next.status, RDZV_WAITING);
    cr_assert_eq(next.round, 1);
    /* a node comes back: a new round after settle, survivors first */
    snprintf(nodes[1].node_id, sizeof(nodes[1].node_id), "fresh");
    cr_assert_eq(plan(&next, 2, 3000000, 2999000, 2999000, &next2, &wake), 1);
    cr_assert_eq(next2.round, 2);
    cr_assert_eq(next2.status, RDZV_RUNNING);
    cr_assert_str_eq(next2.members[0].node_id, "n0");
    cr_assert_str_eq(next2.members[1].node_id, "fresh");
    rdzv_state_clear(&s);
    rdzv_state_clear(&next);
    rdzv_state_clear(&next2);
}

Test(plan, scale_up_batches_arrivals)
{
    mknodes(3);
    struct rdzv_state s = running(2), next;
    int64_t wake;
    /* n2 arrived at 5000: wait for settle */
    cr_assert_eq(plan(&s, 3, 5500, 5000, 0, &next, &wake), 0);
    cr_assert_eq(wake, 6000);
    cr_assert_eq(plan(&s, 3, 6000, 5000, 0, &next, &wake), 1);
    cr_assert_eq(next.round, 2);
    cr_assert_eq(next.n_members, 3);
    cr_assert_str_eq(next.members[2].node_id, "n2");
    cr_assert_eq(next.restart_count, 0);
    rdzv_state_clear(&s);
    rdzv_state_clear(&next);
}

Test(plan, no_scale_up_at_max_or_while_finishing)
{
    mknodes(5);
    struct rdzv_state s = running(4), next;
    int64_t wake;
    cr_assert_eq(plan(&s, 5, 9000000, 0, 0, &next, &wake), 0, "at max: newcomer is a spare");
    rdzv_state_clear(&s);
    mknodes(3);
    s = running(2);
    const char *done[] = {"n0"};
    struct rdzv_view v = {.state = &s, .nodes = nodes, .n_nodes = 3, .done = done, .n_done = 1,
                          .now_ms = 9000000, .last_arrival_ms = 0, .min_reached_ms = 0};
    cr_assert_eq(rdzv_plan(&P, &v, &next, &wake, NULL), 0);
    rdzv_state_clear(&s);
}

Test(plan, success_when_all_members_done)
{
    mknodes(2);
    struct rdzv_state s = running(2), next;
    int64_t wake;
    const char *done[] = {"n1", "n0"};
    struct rdzv_view v = {.state = &s, .nodes = nodes, .n_nodes = 2, .done = done, .n_done = 2,
                          .now_ms = 1};
    cr_assert_eq(rdzv_plan(&P, &v, &next, &wake, NULL), 1);
    cr_assert_eq(next.status, RDZV_SUCCEEDED);
    cr_assert_eq(next.round, s.round);
    struct rdzv_state after;
    v.state = &next;
    cr_assert_eq(rdzv_plan(&P, &v, &after, &wake, NULL), 0, "succeeded is final");
    rdzv_state_clear(&s);
    rdzv_state_clear(&next);
}

Test(plan, failure_charges_budget_then_fails)
{
    mknodes(2);
    struct rdzv_state s = running(2), next, last;
    cr_assert_eq(rdzv_plan_failure(&P, &s, nodes, 2, &next, NULL), 1);
    cr_assert_eq(next.status, RDZV_RUNNING);
    cr_assert_eq(next.round, 2);
    cr_assert_eq(next.restart_count, 1);
    cr_assert_eq(rdzv_plan_failure(&P, &next, nodes, 2, &last, NULL), 1);
    cr_assert_eq(last.status, RDZV_FAILED, "max_restarts 1: the second failure ends the run");
    cr_assert_eq(last.failure_round, 2);
    rdzv_state_clear(&s);
    rdzv_state_clear(&next);
    rdzv_state_clear(&last);
}

Test(plan, assign_caps_and_orders)
{
    mknodes(6);
    struct rdzv_member *m;
    size_t n;
    struct rdzv_member prev_m[2] = {{.node_id = "n4", .nproc = 1}, {.node_id = "n1", .nproc = 1}};
    struct rdzv_state prev = {.members = prev_m, .n_members = 2};
    nodes[5].nproc = 3;
    cr_assert_eq(rdzv_assign(&prev, nodes, 6, 4, false, &m, &n), 0);
    cr_assert_eq(n, 4);
    const char *want[] = {"n4", "n1", "n0", "n2"};
    int base = 0;
    for (int i = 0; i < 4; i++) {
        cr_assert_str_eq(m[i].node_id, want[i]);
        cr_assert_eq(m[i].group_rank, i);
        cr_assert_eq(m[i].rank_base, base);
        base += m[i].nproc;
    }
    free(m);
}

Test(plan, reform_is_not_charged)
{
    mknodes(3);
    struct rdzv_state s = running(3), next;
    cr_assert_eq(rdzv_plan_reform(&P, &s, nodes, 3, &next, NULL), 1);
    cr_assert_eq(next.round, 2);
    cr_assert_eq(next.status, RDZV_RUNNING);
    cr_assert_eq(next.restart_count, 0);
    cr_assert_str_eq(next.members[0].node_id, "n0");
    rdzv_state_clear(&next);
    cr_assert_eq(rdzv_plan_reform(&P, &s, nodes, 1, &next, NULL), 1);
    cr_assert_eq(next.status, RDZV_WAITING, "below min");
    rdzv_state_clear(&s);
    rdzv_state_clear(&next);
}

/* Round 2 started by a worker failure in round 1, its charge still pending. */
static struct rdzv_state after_failure(int n)
{
    struct rdzv_state s = running(n), next;
    cr_assert_eq(rdzv_plan_failure(&P, &s, nodes, (size_t)n, &next, NULL), 1);
    rdzv_state_clear(&s);
    cr_assert_eq(next.round, 2);
    cr_assert_eq(next.restart_count, 1, "charged at once (workers see the count)");
    cr_assert_eq(next.charge_round, 2);
    cr_assert_eq(next.charge_failed_round, 1);
    return next;
}

Test(plan, failure_coinciding_with_a_loss_is_refunded)
{
    mknodes(3);
    struct rdzv_state s = after_failure(3), next;
    int64_t wake;
    /* n2's lease expires within the TTL after the failure: the failure was its symptom */
    struct rdzv_view v = {.state = &s, .nodes = nodes, .n_nodes = 2, .now_ms = 1500,
                          .generation = 40, .charge_seen_ms = 1000};
    cr_assert_eq(rdzv_plan(&P, &v, &next, &wake, NULL), 1);
    cr_assert_eq(next.round, 3);
    cr_assert_eq(next.restart_count, 0, "refunded");
    cr_assert_eq(next.charge_round, 0);
    cr_assert_eq(next.scale_events, 1);
    rdzv_state_clear(&s);
    rdzv_state_clear(&next);
}

Test(plan, failure_charge_becomes_final_after_one_ttl_without_a_new_round)
{
    mknodes(3);
    struct rdzv_state s = after_failure(3), next;
    int64_t wake;
    /* TTL 2000 + max(1000, TTL/2) = 3000 ms after the failure was seen */
    cr_assert_eq(rdzv_charge_window_ms(&P), 3000);
    struct rdzv_view v = {.state = &s, .nodes = nodes, .n_nodes = 3, .now_ms = 3999,
                          .generation = 40, .charge_seen_ms = 1000};
    cr_assert_eq(rdzv_plan(&P, &v, &next, &wake, NULL), 0);
    cr_assert_eq(wake, 4000);
    v.now_ms = 4000;
    cr_assert_eq(rdzv_plan(&P, &v, &next, &wake, NULL), 1);
    cr_assert_eq(next.status, RDZV_RUNNING);
    cr_assert_eq(next.round, 2, "same round");
    cr_assert_eq(next.generation, 40, "same generation: workers keep running");
    cr_assert_eq(next.restart_count, 1);
    cr_assert_eq(next.charge_round, 0);
    cr_assert_eq(rdzv_state_generation(&next, 99), 40);
    rdzv_state_clear(&s);
    rdzv_state_clear(&next);
}

/* A run of `n` nodes in round 1 whose budget is 0 (--max-restarts 0), and its params. */
static struct rdzv_params zero_budget(void)
{
    struct rdzv_params z = P;
    z.max_restarts = 0;
    return z;
}

static struct rdzv_state first_round(const struct rdzv_params *q, int n)
{
    struct rdzv_state s = {0};
    cr_assert_eq(rdzv_plan(q,
                           &(struct rdzv_view){.nodes = nodes, .n_nodes = (size_t)n,
                                               .now_ms = 1000000, .min_reached_ms = 0},
                           &s, &(int64_t){0}, NULL),
                 1);
    return s;
}

/* Issue 19: with the budget spent, a failure starts no worker on speculation: FAILING holds the
 * round (every agent stops its workers) for the charge window, then FAILED. */
Test(plan, over_budget_failure_stops_workers_then_fails_after_the_window)
{
    /* mutation checked: the over-budget branch of rdzv_plan_failure() removed (the old rule:
     * round 2 at once with restarts 1/0): status RUNNING, round 2, restart_count 1: fails */
    mknodes(2);
    struct rdzv_params zero = zero_budget();
    struct rdzv_state s = first_round(&zero, 2), held, next;
    cr_assert_eq(rdzv_plan_failure(&zero, &s, nodes, 2, &held, NULL), 1);
    cr_assert_eq(held.status, RDZV_FAILING, "no new round on speculation");
    cr_assert_eq(held.round, 1, "no new round on speculation");
    cr_assert_eq(held.restart_count, 0, "nothing shows more restarts than the budget");
    cr_assert_eq(held.charge_round, 1, "the session times the window on charge_round == round");
    cr_assert_eq(held.charge_failed_round, 1);
    /* within the window, nothing; newcomers and done records change nothing either */
    mknodes(3);
    const char *done[] = {"n0"};
    int64_t wake;
    struct rdzv_view v = {.state = &held, .nodes = nodes, .n_nodes = 3, .done = done,
                          .n_done = 1, .now_ms = 3999, .last_arrival_ms = 0,
                          .generation = 7, .charge_seen_ms = 1000};
    cr_assert_eq(rdzv_plan(&zero, &v, &next, &wake, NULL), 0);
    cr_assert_eq(wake, 4000, "TTL 2000 + 1000 after the charge was seen");
    v.now_ms = 4000;
    cr_assert_eq(rdzv_plan(&zero, &v, &next, &wake, NULL), 1);
    cr_assert_eq(next.status, RDZV_FAILED);
    cr_assert_eq(next.round, 1, "round 2 never ran");
    cr_assert_eq(next.failure_round, 1, "the round where the worker failed");
    cr_assert_eq(next.restart_count, 1, "the failure that spent the budget is charged");
    cr_assert_eq(next.charge_round, 0);
    rdzv_state_clear(&next);
    rdzv_state_clear(&s);
    rdzv_state_clear(&held);
}

Test(plan, over_budget_failure_refunded_by_a_loss_within_the_window)
{
    mknodes(3);
    struct rdzv_params zero = zero_budget();
    struct rdzv_state s = first_round(&zero, 3), held, next;
    cr_assert_eq(rdzv_plan_failure(&zero, &s, nodes, 3, &held, NULL), 1);
    cr_assert_eq(held.status, RDZV_FAILING);
    /* n1's lease expires within the window: the failure was its symptom */
    nodes[1] = nodes[2];
    int64_t wake;
    struct rdzv_view v = {.state = &held, .nodes = nodes, .n_nodes = 2, .now_ms = 3500,
                          .generation = 7, .charge_seen_ms = 1000};
    cr_assert_eq(rdzv_plan(&zero, &v, &next, &wake, NULL), 1);
    cr_assert_eq(next.status, RDZV_RUNNING);
    cr_assert_eq(next.round, 2);
    cr_assert_eq(next.restart_count, 0, "refunded: never charged");
    cr_assert_eq(next.charge_round, 0);
    cr_assert_eq(next.scale_events, 1);
    cr_assert_eq(next.n_members, 2);
    rdzv_state_clear(&next);
    /* below min after the loss: WAITING, still uncharged */
    v.n_nodes = 1;
    cr_assert_eq(rdzv_plan(&zero, &v, &next, &wake, NULL), 1);
    cr_assert_eq(next.status, RDZV_WAITING);
    cr_assert_eq(next.restart_count, 0);
    rdzv_state_clear(&next);
    rdzv_state_clear(&s);
    rdzv_state_clear(&held);
}

Test(plan, over_budget_failure_of_a_single_member_fails_at_once)
{
    /* mutation checked: `|| s->n_members <= 1` removed from rdzv_plan_failure(): FAILING: fails */
    mknodes(1);
    struct rdzv_params solo = zero_budget();
    solo.min_nodes = solo.max_nodes = 1;
    struct rdzv_state s = first_round(&solo, 1), next;
    cr_assert_eq(s.n_members, 1);
    cr_assert_eq(rdzv_plan_failure(&solo, &s, nodes, 1, &next, NULL), 1);
    cr_assert_eq(next.status, RDZV_FAILED, "nothing else could be lost: no window to wait");
    cr_assert_eq(next.round, 1);
    cr_assert_eq(next.failure_round, 1);
    cr_assert_eq(next.restart_count, 1);
    rdzv_state_clear(&s);
    rdzv_state_clear(&next);
}

Test(plan, over_budget_failure_while_a_charge_is_pending_fails_at_once)
{
    /* max_restarts 1: round 2 runs on a provisional charge; its failure confirms it */
    mknodes(2);
    struct rdzv_state r2 = after_failure(2), next;
    cr_assert_eq(rdzv_plan_failure(&P, &r2, nodes, 2, &next, NULL), 1);
    cr_assert_eq(next.status, RDZV_FAILED);
    cr_assert_eq(next.failure_round, 2);
    cr_assert_eq(next.restart_count, 2);
    rdzv_state_clear(&r2);
    rdzv_state_clear(&next);
}

Test(plan, failing_status_survives_the_codec)
{
    mknodes(2);
    struct rdzv_params zero = zero_budget();
    struct rdzv_state s = first_round(&zero, 2), held, back;
    cr_assert_eq(rdzv_plan_failure(&zero, &s, nodes, 2, &held, NULL), 1);
    char *json = NULL;
    cr_assert_eq(rdzv_state_encode(&held, &json, NULL), 0);
    cr_assert(strstr(json, "\"failing\""), "%s", json);
    cr_assert_eq(rdzv_state_decode(json, strlen(json), &back, NULL), 0, "%s", json);
    cr_assert_eq(back.status, RDZV_FAILING);
    cr_assert_eq(back.charge_round, 1);
    cr_assert_str_eq(rdzv_status_name(RDZV_FAILING), "failing");
    free(json);
    rdzv_state_clear(&s);
    rdzv_state_clear(&held);
    rdzv_state_clear(&back);
}

Test(plan, scale_events_are_counted_not_charged)
{
    mknodes(4);
    struct rdzv_state s = running(2), a, b;
    int64_t wake;
    cr_assert_eq(s.scale_events, 0, "the first round is not a scale event");
    cr_assert_eq(plan(&s, 3, 9000, 1000, 0, &a, &wake), 1);
    cr_assert_eq(a.scale_events, 1);
    nodes[1] = nodes[2];
    cr_assert_eq(plan(&a, 2, 9000, 1000, 0, &b, &wake), 1);
    cr_assert_eq(b.scale_events, 2);
    cr_assert_eq(b.restart_count, 0);
    rdzv_state_clear(&s);
    rdzv_state_clear(&a);
    rdzv_state_clear(&b);
}

Test(plan, rank_order_host_sorts_the_chosen_members_by_host)
{
    mknodes(5);
    snprintf(nodes[0].host, sizeof(nodes[0].host), "zeta");
    snprintf(nodes[1].host, sizeof(nodes[1].host), "alpha");
    snprintf(nodes[2].host, sizeof(nodes[2].host), "mid");
    snprintf(nodes[3].host, sizeof(nodes[3].host), "alpha");
    struct rdzv_member *m;
    size_t n;
    /* the first 4 arrivals are chosen (max 4), then ordered by host, ties by node id */
    cr_assert_eq(rdzv_assign(NULL, nodes, 5, 4, true, &m, &n), 0);
    cr_assert_eq(n, 4);
    const char *want[] = {"n1", "n3", "n2", "n0"};
    for (int i = 0; i < 4; i++) {
        cr_assert_str_eq(m[i].node_id, want[i]);
        cr_assert_eq(m[i].group_rank, i);
        cr_assert_eq(m[i].rank_base, 2 * i);
    }
    free(m);
}

/* The fleet-scale layout (issue 18): a round of 10,000 nodes, then one with 1,000 of them gone
 * (every tenth) and 500 newcomers. Survivors keep their relative order, newcomers follow by
 * arrival, ranks are contiguous, the commit record names ⌈N/32⌉ chunks and each chunk holds
 * 31-33 members (the slots of a cold start are consecutive create_revisions). Mutation checked:
 * node_by_id() in rdzv_assign() finding nobody (survivors taken as newcomers) -> order fails. */
Test(plan, fleet_assignment_in_chunks)
{
    enum { N = 10000, NEW = 500 };
    struct rdzv_node *big = calloc(N + NEW, sizeof(*big));
    cr_assert_not_null(big);
    for (int i = 0; i < N + NEW; i++) {
        snprintf(big[i].node_id, sizeof(big[i].node_id), "node-%05d", (i * 7919) % (N + NEW));
        snprintf(big[i].host, sizeof(big[i].host), "host-%05d", i);
        big[i].nproc = 1 + i % 2;
        big[i].create_revision = 1000 + i;
    }
    struct rdzv_params p = {.min_nodes = 1, .max_nodes = N + NEW, .max_restarts = 0};
    struct rdzv_view v = {.nodes = big, .n_nodes = N, .min_reached_ms = 0};
    struct rdzv_state s1 = {0}, s2 = {0};
    int64_t wake;
    cr_assert_eq(rdzv_plan(&p, &v, &s1, &wake, NULL), 1);
    cr_assert_eq(s1.group_world_size, N);
    cr_assert_eq(s1.n_chunks, (N + 31) / 32);
    int count[313] = {0};
    for (int i = 0; i < N; i++)
        count[rdzv_chunk_of(s1.members[i].slot, s1.n_chunks)]++;
    for (int k = 0; k < s1.n_chunks; k++)
        cr_assert(count[k] >= 31 && count[k] <= 33, "chunk %d holds %d members", k, count[k]);
    /* every tenth node leaves; 500 arrive. The survivors rejoined in reverse (their node keys'
     * create_revisions now run backwards), so arrival order is not their old order. */
    struct rdzv_node *live = calloc(N + NEW, sizeof(*live)),
                     *want = calloc(N + NEW, sizeof(*want));
    size_t n = 0;
    for (int i = 0; i < N + NEW; i++)
        if (i >= N || i % 10 != 0) {
            want[n] = big[i];
            want[n].create_revision = i < N ? 100000 - i : 200000 + i;
            n++;
        }
    for (size_t i = 0; i < n; i++) /* the view lists nodes by create_revision */
        live[i] = want[i < n - NEW ? n - NEW - 1 - i : i];
    v = (struct rdzv_view){.state = &s1, .nodes = live, .n_nodes = n, .now_ms = 1,
                           .min_reached_ms = 0, .last_arrival_ms = -100000};
    cr_assert_eq(rdzv_plan(&p, &v, &s2, &wake, NULL), 1);
    cr_assert_eq(s2.group_world_size, (int)n);
    cr_assert_eq(s2.round, 2);
    /* 9,500 members still fit 313 chunks of 16-32: every node's chunk key stays put */
    cr_assert_eq(s2.n_chunks, s1.n_chunks);
    int base = 0;
    for (size_t i = 0; i < s2.n_members; i++) {
        cr_assert_eq(s2.members[i].group_rank, (int)i);
        cr_assert_eq(s2.members[i].rank_base, base);
        base += s2.members[i].nproc;
        /* the first 9,000 are the survivors in their old order, then the newcomers */
        cr_assert_str_eq(s2.members[i].node_id, want[i].node_id, "member %zu", i);
    }
    cr_assert_eq(s2.world_size, base);
    rdzv_state_clear(&s1);
    rdzv_state_clear(&s2);
    free(big);
    free(live);
    free(want);
}

/* Losses in a big round are batched for rdzv_loss_batch_ms() after the last commit (a burst of
 * lease expiries becomes one round); a small run re-forms at once. Mutation checked: the batch
 * condition removed -> the first plan commits at once and the test fails. */
Test(plan, losses_in_a_big_round_are_batched_after_a_commit)
{
    enum { N = 1200 };
    struct rdzv_node *big = calloc(N, sizeof(*big));
    cr_assert_not_null(big);
    for (int i = 0; i < N; i++) {
        snprintf(big[i].node_id, sizeof(big[i].node_id), "n%05d", i);
        snprintf(big[i].host, sizeof(big[i].host), "h%05d", i);
        big[i].nproc = 1;
        big[i].create_revision = 100 + i;
    }
    struct rdzv_params p = {.min_nodes = 1, .max_nodes = N, .max_restarts = 0};
    struct rdzv_view v = {.nodes = big, .n_nodes = N, .min_reached_ms = 0};
    struct rdzv_state s1 = {0}, s2 = {0};
    int64_t wake;
    cr_assert_eq(rdzv_plan(&p, &v, &s1, &wake, NULL), 1);
    int64_t batch = rdzv_loss_batch_ms(N);
    cr_assert_eq(batch, N / 5);
    /* 10 nodes lost 50 ms after the commit was seen: wait for the batch window */
    v = (struct rdzv_view){.state = &s1, .nodes = big + 10, .n_nodes = N - 10, .now_ms = 10050,
                           .state_seen_ms = 10000, .min_reached_ms = 0, .last_arrival_ms = 0};
    cr_assert_eq(rdzv_plan(&p, &v, &s2, &wake, NULL), 0, "a loss right after a commit waits");
    cr_assert_eq(wake, 10000 + batch);
    v.now_ms = 10000 + batch;
    cr_assert_eq(rdzv_plan(&p, &v, &s2, &wake, NULL), 1, "then one round without all of them");
    cr_assert_eq(s2.group_world_size, N - 10);
    cr_assert_eq(rdzv_loss_batch_ms(999), 0, "small runs re-form at once");
    cr_assert_eq(rdzv_loss_batch_ms(100000), 2000);
    rdzv_state_clear(&s1);
    rdzv_state_clear(&s2);
    free(big);
}

/* While the coordinator's liveness ring confirms suspicions (rdzv_hold_losses), a loss waits for
 * the hold, so the members one burst takes (a rack, a failure domain) leave in one round; a hold
 * that has passed holds nothing, and nor does a hold without a loss. Mutation checked. */
Test(plan, a_loss_waits_for_the_rings_confirmations_in_flight)
{
    mknodes(4);
    struct rdzv_state s = running(4), next;
    int64_t wake;
    nodes[1] = nodes[3]; /* n1 evicted; n3's probe still in flight */
    struct rdzv_view v = {.state = &s, .nodes = nodes, .n_nodes = 3, .now_ms = 2000000,
                          .loss_hold_ms = 2000400};
    cr_assert_eq(rdzv_plan(&P, &v, &next, &wake, NULL), 0, "a loss during the hold committed");
    cr_assert_eq(wake, 2000400, "not planned again when the hold ends");
    v.now_ms = 2000400;
    cr_assert_eq(rdzv_plan(&P, &v, &next, &wake, NULL), 1, "the hold held past its end");
    cr_assert_eq(next.n_members, 3);
    rdzv_state_clear(&next);
    mknodes(4); /* nobody lost: a hold changes nothing */
    v = (struct rdzv_view){.state = &s, .nodes = nodes, .n_nodes = 4, .now_ms = 2000000,
                           .loss_hold_ms = 2000400};
    cr_assert_eq(rdzv_plan(&P, &v, &next, &wake, NULL), 0);
    cr_assert_eq(wake, -1, "a hold without a loss asked for a wake-up");
    rdzv_state_clear(&s);
}
