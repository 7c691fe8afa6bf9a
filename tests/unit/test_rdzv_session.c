// SPDX-License-Identifier: Apache-2.0
/*
 * Sessions of several nodes against one real store (the file backend in a temp directory, each
 * session with its own handle, as separate agents would): cold start, coordinator commit, leave,
 * failure with budget, success barrier, master publication, corrupt state reported.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ea_time.h"
#include "domain.h"
#include "session.h"

#define N 3
static char dir[] = "/tmp/ea-sess-XXXXXX";
static struct kv *kvs[N];
static struct rdzv_session *ss[N];
static const char *domains[N]; /* --failure-domain of session i (NULL: none) */

/* (Re)create session i on its store handle: a round at min after `settle_ms` without arrivals
 * or `last_call_ms` after min was reached; the whole run mirrored with `full_view`. */
static void make_session(int i, int64_t settle_ms, int64_t last_call_ms, bool full_view)
{
    rdzv_session_destroy(ss[i]);
    struct ea_error err = {0};
    struct rdzv_config rc = {.prefix = "/elastic/t/",
                             .params = {.min_nodes = 2, .max_nodes = 3, .settle_ms = settle_ms,
                                        .last_call_ms = last_call_ms, .max_restarts = 1},
                             .lease_ttl_ms = 5000,
                             .full_view = full_view};
    snprintf(rc.self.node_id, sizeof(rc.self.node_id), "n%d", i);
    snprintf(rc.self.host, sizeof(rc.self.host), "h%d", i);
    snprintf(rc.self.addr, sizeof(rc.self.addr), "127.0.0.1");
    rc.self.nproc = 2;
    snprintf(rc.self.domain, sizeof(rc.self.domain), "%s", domains[i] ? domains[i] : "");
    cr_assert_eq(rdzv_session_create(kvs[i], &rc, &ss[i], &err), 0, "%s", err.msg);
}

static void setup(void)
{
    cr_assert(mkdtemp(dir));
    for (int i = 0; i < N; i++) {
        struct kv_config kc = {.backend = "file", .state_dir = dir};
        struct ea_error err = {0};
        cr_assert_eq(kv_open(&kc, &kvs[i], &err), 0, "%s", err.msg);
        ss[i] = NULL;
        make_session(i, 0, 1000, false);
    }
}

static void teardown(void)
{
    for (int i = 0; i < N; i++) {
        rdzv_session_destroy(ss[i]);
        ss[i] = NULL;
        domains[i] = NULL;
        kv_close(kvs[i]);
    }
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Pump every live session (events + coordinator tick) until pred() holds or `ms` pass. */
static bool pump_within(bool (*pred)(void), int live, int ms)
{
    int64_t deadline = ea_now_ms() + ms;
    while (ea_now_ms() < deadline) {
        for (int i = 0; i < live; i++) {
            struct ea_error err = {0};
            cr_assert_geq(rdzv_on_events(ss[i], &err), 0, "%s", err.msg);
            cr_assert_geq(rdzv_tick(ss[i], ea_now_ms(), &err), 0, "%s", err.msg);
        }
        if (pred())
            return true;
        struct pollfd p[N];
        for (int i = 0; i < live; i++)
            p[i] = (struct pollfd){.fd = kv_event_fd(kvs[i]), .events = POLLIN};
        poll(p, (nfds_t)live, 50);
    }
    return false;
}

/* Pump session i alone (the others stall: they see nothing of what happens meanwhile). */
static bool pump_one_within(int i, bool (*pred)(void), int ms)
{
    int64_t deadline = ea_now_ms() + ms;
    while (ea_now_ms() < deadline) {
        struct ea_error err = {0};
        cr_assert_geq(rdzv_on_events(ss[i], &err), 0, "%s", err.msg);
        cr_assert_geq(rdzv_tick(ss[i], ea_now_ms(), &err), 0, "%s", err.msg);
        if (pred())
            return true;
        struct pollfd p = {.fd = kv_event_fd(kvs[i]), .events = POLLIN};
        int64_t wake = rdzv_wake_ms(ss[i]), left = wake - ea_now_ms();
        poll(&p, 1, wake < 0 || left > 50 ? 50 : left < 0 ? 0 : (int)left);
    }
    return false;
}

static bool pump_until(bool (*pred)(void), int live)
{
    return pump_within(pred, live, 5000);
}

static int64_t round_of(int i)
{
    const struct rdzv_state *s = rdzv_current(ss[i], NULL);
    return s && s->status == RDZV_RUNNING ? s->round : 0;
}

static bool all_in_round1(void)
{
    for (int i = 0; i < N; i++)
        if (round_of(i) != 1 || rdzv_current(ss[i], NULL)->group_world_size != N ||
            !rdzv_self_member(ss[i]))
            return false;
    return true;
}

static void join_all(void)
{
    for (int i = 0; i < N; i++) {
        struct ea_error err = {0};
        cr_assert_eq(rdzv_join(ss[i], &err), 0, "%s", err.msg);
    }
    cr_assert(pump_until(all_in_round1, N), "3 nodes at max must commit round 1");
}

TestSuite(session, .init = setup, .fini = teardown, .timeout = 30);

Test(session, cold_start_commits_once_with_contiguous_ranks)
{
    join_all();
    cr_assert(rdzv_is_coordinator(ss[0]), "lowest create_revision coordinates");
    cr_assert_not(rdzv_is_coordinator(ss[1]));
    int64_t g0, g1;
    const struct rdzv_state *s0 = rdzv_current(ss[0], &g0), *s1 = rdzv_current(ss[1], &g1);
    cr_assert_eq(g0, g1, "every node sees the same generation");
    cr_assert_eq(s0->world_size, 6);
    cr_assert_eq(s1->n_members, 0, "a node that does not coordinate reads only its own chunk");
    cr_assert_eq(s0->n_members, N, "the coordinator has every member");
    cr_assert_eq(s1->n_confirm, 0, "no failure domains: no confirmers committed");
    for (int i = 0; i < N; i++) {
        cr_assert_eq(rdzv_my_index(ss[i]), i, "arrival order");
        cr_assert_eq(rdzv_self_member(ss[i])->rank_base, 2 * i);
    }
}

/* issue 41: the commit record names the members that confirm a suspicion of the coordinator,
 * outside its failure domain, and every node has them with the commit (no member list read). */
Test(session, commit_names_confirmers_outside_the_coordinators_domain)
{
    domains[0] = domains[1] = "rack-a";
    domains[2] = "rack-b";
    for (int i = 0; i < N; i++)
        make_session(i, 0, 1000, false);
    join_all();
    cr_assert(rdzv_is_coordinator(ss[0]));
    for (int i = 0; i < N; i++) {
        const struct rdzv_state *s = rdzv_current(ss[i], NULL);
        cr_assert_eq(s->n_confirm, 1, "node %d", i);
        cr_assert_eq(s->confirm_coord, 0, "node %d: the coordinator's rank", i);
        cr_assert_eq(s->confirm[0], 2, "node %d: the one member outside rack-a", i);
        cr_assert_eq(rdzv_coord_confirmer_of(s, 0, 1), 2);
    }
}

static bool two_in_round2(void)
{
    return round_of(0) == 2 && round_of(1) == 2 &&
           rdzv_current(ss[1], NULL)->group_world_size == 2;
}

/* The leave itself must reform the round: bounded at 1 s, a fifth of the 5 s lease TTL, so the
 * leaver's lease running out (it is no longer pumped) cannot pass for a leave.
 * Mutation: rdzv_leave() returning 0 at once (scripts/test.sh runs it) -> fails in 1 s. */
Test(session, graceful_leave_reforms_without_charging)
{
    join_all();
    struct ea_error err = {0};
    int64_t t0 = ea_now_ms();
    cr_assert_eq(rdzv_leave(ss[2], &err), 0, "%s", err.msg);
    cr_assert(pump_within(two_in_round2, 2, 1000), "no round 2 within 1 s of the leave (TTL 5 s)");
    cr_log_info("leave to round 2: %lld ms", (long long)(ea_now_ms() - t0));
    cr_assert_eq(rdzv_current(ss[1], NULL)->restart_count, 0);
}

static bool master_known(void)
{
    return rdzv_master(ss[1], 1) && rdzv_master(ss[2], 1);
}

/* Group rank 0 publishes the master; nobody else may (docs/security.md "Rendezvous keys"). */
Test(session, master_is_group_rank_0s)
{
    join_all();
    struct ea_error err = {0};
    cr_assert_eq(rdzv_publish_master(ss[0], 1, "127.0.0.1:1234", &err), 0, "%s", err.msg);
    cr_assert_str_eq(rdzv_master(ss[0], 1), "127.0.0.1:1234");
    cr_assert_eq(rdzv_publish_master(ss[1], 1, "127.0.0.1:9999", &err), -EPERM);
    cr_assert(pump_until(master_known, N));
    cr_assert_str_eq(rdzv_master(ss[1], 1), "127.0.0.1:1234");
    cr_assert_str_eq(rdzv_master(ss[2], 1), "127.0.0.1:1234");
    /* a second publish of rank 0 (its reply lost) keeps the value the others may have used */
    cr_assert_eq(rdzv_publish_master(ss[0], 1, "127.0.0.1:5555", &err), 0, "%s", err.msg);
    cr_assert_str_eq(rdzv_master(ss[0], 1), "127.0.0.1:1234");
}

static bool restarted(void)
{
    const struct rdzv_state *s = rdzv_current(ss[2], NULL);
    return s && s->round == 2 && s->restart_count == 1;
}

static bool failed(void)
{
    const struct rdzv_state *s = rdzv_current(ss[0], NULL);
    return s && s->status == RDZV_FAILED;
}

Test(session, failures_restart_then_fail_and_are_recorded_once)
{
    join_all();
    int64_t gen;
    rdzv_current(ss[1], &gen);
    struct rdzv_failure f = {.node_id = "n1", .host = "h1", .rank = 2, .exit_code = 3,
                             .message = "first"};
    struct rdzv_failure g = f;
    snprintf(g.message, sizeof(g.message), "second");
    struct ea_error err = {0};
    cr_assert_eq(rdzv_report_failure(ss[1], gen, &f, &err), 0, "%s", err.msg);
    /* a concurrent failure of the same generation from another node is not charged again */
    cr_assert_eq(rdzv_report_failure(ss[2], gen, &g, &err), 0, "%s", err.msg);
    cr_assert(pump_until(restarted, N));
    struct rdzv_failure got;
    cr_assert_eq(rdzv_get_failure(ss[0], 1, &got, &err), 0, "%s", err.msg);
    cr_assert_str_eq(got.message, "first", "first failure wins");

    rdzv_current(ss[0], &gen);
    cr_assert_eq(rdzv_report_failure(ss[0], gen, &f, &err), 0);
    cr_assert(pump_until(failed, N), "max_restarts 1: the second failure fails the run");
    cr_assert_eq(rdzv_current(ss[0], NULL)->failure_round, 2);
}

static bool succeeded(void)
{
    for (int i = 0; i < N; i++) {
        const struct rdzv_state *s = rdzv_current(ss[i], NULL);
        if (!s || s->status != RDZV_SUCCEEDED)
            return false;
    }
    return true;
}

Test(session, success_barrier)
{
    join_all();
    struct ea_error err = {0};
    cr_assert_eq(rdzv_report_done(ss[1], 1, &err), 0);
    cr_assert_eq(rdzv_report_done(ss[2], 1, &err), 0);
    /* the coordinator takes in both done keys (both writes precede its wake-up) and ticks */
    struct pollfd p = {.fd = kv_event_fd(kvs[0]), .events = POLLIN};
    cr_assert_eq(poll(&p, 1, 5000), 1);
    cr_assert_geq(rdzv_on_events(ss[0], &err), 0);
    cr_assert_geq(rdzv_tick(ss[0], ea_now_ms(), &err), 0);
    const struct rdzv_state *s = rdzv_current(ss[0], NULL);
    cr_assert_eq(s->status, RDZV_RUNNING, "not done until every member is");
    cr_assert_eq(rdzv_report_done(ss[0], 1, &err), 0);
    cr_assert(pump_until(succeeded, N));
}

Test(session, corrupt_state_is_reported_not_trusted)
{
    struct ea_error err = {0};
    cr_assert_eq(kv_put(kvs[0], "/elastic/t/state", "{\"schema\":\"other\"}", 18, 0, NULL, &err),
                 0);
    int r = rdzv_join(ss[0], &err);
    cr_assert_eq(r, -EBADMSG);
    cr_assert(strstr(err.msg, "/elastic/t/state"), "%s", err.msg);
    cr_assert(strstr(err.msg, "schema 'other'"), "%s", err.msg);
}

static bool round2_everywhere(void)
{
    for (int i = 0; i < N; i++)
        if (round_of(i) != 2)
            return false;
    return true;
}

Test(session, lost_lease_is_reported_and_rejoin_reforms_the_round)
{
    join_all();
    int64_t gen;
    rdzv_current(ss[2], &gen);
    /* node 2's lease dies under it (as if its agent stalled past the TTL) */
    struct kv_entry node = {0};
    struct ea_error err = {0};
    cr_assert_eq(kv_get(kvs[2], "/elastic/t/nodes/n2", &node, &err), 0);
    cr_assert_eq(kv_lease_revoke(kvs[2], node.lease, &err), 0);
    kv_entry_clear(&node);
    cr_assert_eq(rdzv_keepalive(ss[2], ea_now_ms() + 60000, &err), KV_ENOLEASE);
    /* it rejoins and asks for a new round of the generation it stopped */
    cr_assert_eq(rdzv_join(ss[2], &err), 0, "%s", err.msg);
    cr_assert_eq(rdzv_reform(ss[2], gen, &err), 0, "%s", err.msg);
    cr_assert(pump_until(round2_everywhere, N));
    const struct rdzv_state *s = rdzv_current(ss[0], NULL);
    cr_assert_eq(s->restart_count, 0, "not charged");
    cr_assert_eq(s->n_members, 3);
    /* a second reform of the same old generation is a no-op */
    cr_assert_eq(rdzv_reform(ss[1], gen, &err), 0);
    cr_assert_eq(rdzv_current(ss[1], NULL)->round, 2);
}

/* ==== issue 30: a chunk is taken only from the commit `state` names ====
 * (kept as one block at the end of the file: other tests of this suite go above it)
 *
 * A node takes its ranks from its assignment chunk (assign/<k>) only when the chunk was written
 * by the commit that `state` names (between the commit's first chunk write, `chunks_rev`, and the
 * commit), never on its round number alone: a `waiting` state reuses the round number and
 * rewrites the chunks, and so does the successor of a coordinator that died between its chunk
 * writes and its `state`. Each test hands the node its store events in an order a real store
 * may deliver them (etcd: a chunk watch still catching up after a state watch), through
 * rdzv_apply_events(). */

/* Re-create every session with `min` nodes (on the same store handles). */
static void remake_sessions(int min)
{
    for (int i = 0; i < N; i++) {
        rdzv_session_destroy(ss[i]);
        struct rdzv_config rc = {.prefix = "/elastic/t/",
                                 .params = {.min_nodes = min, .max_nodes = 3, .settle_ms = 0,
                                            .last_call_ms = 1000, .max_restarts = 1},
                                 .lease_ttl_ms = 5000};
        snprintf(rc.self.node_id, sizeof(rc.self.node_id), "n%d", i);
        snprintf(rc.self.host, sizeof(rc.self.host), "h%d", i);
        snprintf(rc.self.addr, sizeof(rc.self.addr), "127.0.0.1");
        rc.self.nproc = 2;
        struct ea_error err = {0};
        cr_assert_eq(rdzv_session_create(kvs[i], &rc, &ss[i], &err), 0, "%s", err.msg);
    }
}

/* Node i's undelivered store events, read (not applied) until one of them is the write of
 * `state` at revision `state_rev` (deadline 5 s). The caller frees them (kv_events_free). */
static void events_until_state(int i, int64_t state_rev, struct kv_event **ret, size_t *ret_n)
{
    struct kv_event *all = NULL;
    size_t n = 0;
    int64_t deadline = ea_now_ms() + 5000;
    for (;;) {
        for (size_t k = 0; k < n; k++)
            if (strcmp(all[k].entry.key, "/elastic/t/state") == 0 &&
                all[k].entry.mod_revision == state_rev) {
                *ret = all;
                *ret_n = n;
                return;
            }
        cr_assert_lt(ea_now_ms(), deadline, "node %d never got the state of revision %lld", i,
                     (long long)state_rev);
        struct pollfd p = {.fd = kv_event_fd(kvs[i]), .events = POLLIN};
        poll(&p, 1, 50);
        struct kv_event *ev = NULL;
        size_t m = 0;
        struct ea_error err = {0};
        cr_assert_eq(kv_read_events(kvs[i], &ev, &m, &err), 0, "%s", err.msg);
        all = realloc(all, (n + m + 1) * sizeof(*all));
        cr_assert(all);
        memcpy(all + n, ev, m * sizeof(*ev)); /* the entries move over: free `ev` alone */
        free(ev);
        n += m;
    }
}

/* Apply to node i the events ev[k] for which keep(ev[k]) is `want` (shallow copies: the entries
 * stay ev's). */
static void apply_some(int i, const struct kv_event *ev, size_t n,
                       bool (*keep)(const struct kv_event *), bool want)
{
    struct kv_event *sel = calloc(n ? n : 1, sizeof(*sel));
    cr_assert(sel);
    size_t m = 0;
    for (size_t k = 0; k < n; k++)
        if (keep(&ev[k]) == want)
            sel[m++] = ev[k];
    struct ea_error err = {0};
    cr_assert_geq(rdzv_apply_events(ss[i], sel, m, &err), 0, "%s", err.msg);
    free(sel);
}

static bool rounds1_at_0_and_1(void)
{
    return round_of(0) == 1 && round_of(1) == 1;
}

static int64_t coordinator_state_rev(void)
{
    struct kv_entry e = {0};
    struct ea_error err = {0};
    cr_assert_eq(kv_get(kvs[0], "/elastic/t/state", &e, &err), 0, "%s", err.msg);
    int64_t rev = e.mod_revision;
    kv_entry_clear(&e);
    return rev;
}

static bool waiting_at_0(void)
{
    const struct rdzv_state *s = rdzv_current(ss[0], NULL);
    return s && s->status == RDZV_WAITING;
}

static int64_t waiting_state_rev;
static bool is_waiting_state(const struct kv_event *e)
{
    return strcmp(e->entry.key, "/elastic/t/state") == 0 &&
           e->entry.mod_revision >= waiting_state_rev;
}

/* Round 1 runs n0, n1, n2 (ranks 0, 1, 2); n1 leaves below min, so the coordinator writes a
 * `waiting` state of the same round number, rewriting the chunk with the survivors (n2 is rank 1
 * there). n2, which has not looked at its chunk yet, gets round 1's commit and the chunk
 * rewritten after it (the waiting `state` itself comes in its next read): it must not take rank
 * 1 of the waiting commit for round 1. Fails without the commit check in self_from_chunk (n2
 * takes rank 1). */
Test(session, waiting_rewrite_is_not_the_running_rounds_chunk)
{
    remake_sessions(3);
    struct ea_error err = {0};
    for (int i = 0; i < N; i++)
        cr_assert_eq(rdzv_join(ss[i], &err), 0, "%s", err.msg);
    cr_assert(pump_until(rounds1_at_0_and_1, 2), "round 1 at max (n2 is not pumped)");
    int64_t running_rev = coordinator_state_rev();
    cr_assert_eq(rdzv_leave(ss[1], &err), 0, "%s", err.msg);
    cr_assert(pump_until(waiting_at_0, 1), "below min: the coordinator writes a waiting state");
    waiting_state_rev = coordinator_state_rev();
    cr_assert_gt(waiting_state_rev, running_rev);

    struct kv_event *ev = NULL;
    size_t n = 0;
    events_until_state(2, waiting_state_rev, &ev, &n);
    apply_some(2, ev, n, is_waiting_state, false); /* up to round 1's commit */
    const struct rdzv_state *s = rdzv_current(ss[2], NULL);
    cr_assert(s && s->status == RDZV_RUNNING && s->round == 1);
    const struct rdzv_member *m = rdzv_self_member(ss[2]);
    cr_assert(!m || (m->group_rank == 2 && m->rank_base == 4),
              "round 1's ranks, or none yet; not the waiting commit's (rank %d, base %d)",
              m ? m->group_rank : -1, m ? m->rank_base : -1);
    apply_some(2, ev, n, is_waiting_state, true);
    cr_assert_eq(rdzv_current(ss[2], NULL)->status, RDZV_WAITING);
    kv_events_free(ev, n);
}

static int64_t real_chunk_rev;
static bool is_real_chunk(const struct kv_event *e)
{
    return e->entry.mod_revision == real_chunk_rev;
}

static bool round2_at_0(void)
{
    return round_of(0) == 2;
}

/* A coordinator died after writing its chunk of round 2 (n2 at rank 0), before its `state`;
 * its successor commits round 2 without n1 (n2 at rank 1), rewriting the chunk, then `state`.
 * n2 gets the dead coordinator's chunk, then the new `state`, and the successor's chunk last
 * (its chunk watch lags): it must take rank 1, at once (one read at the commit) and for the rest
 * of the round. Fails without the commit check in self_from_chunk (n2 takes rank 0 and keeps
 * it). */
Test(session, dead_coordinators_chunk_is_not_the_successors)
{
    join_all();
    struct ea_error err = {0};
    struct kv_entry node = {0};
    cr_assert_eq(kv_get(kvs[2], "/elastic/t/nodes/n2", &node, &err), 0, "%s", err.msg);
    struct rdzv_member dead[2] = {
        {.node_id = "n2", .host = "h2", .nproc = 2, .group_rank = 0, .rank_base = 0,
         .slot = node.create_revision},
        {.node_id = "n0", .host = "h0", .nproc = 2, .group_rank = 1, .rank_base = 2, .slot = 0}};
    kv_entry_clear(&node);
    struct kv_entry n0 = {0};
    cr_assert_eq(kv_get(kvs[0], "/elastic/t/nodes/n0", &n0, &err), 0, "%s", err.msg);
    dead[1].slot = n0.create_revision;
    kv_entry_clear(&n0);
    struct rdzv_state st = {.round = 2, .status = RDZV_RUNNING, .members = dead, .n_members = 2,
                            .group_world_size = 2, .n_chunks = 1, .world_size = 4};
    char *json = NULL;
    cr_assert_eq(rdzv_chunk_encode(&st, 0, &json, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_put(kvs[1], "/elastic/t/assign/000000", json, strlen(json), 0, NULL, &err), 0);
    free(json);

    cr_assert_eq(rdzv_leave(ss[1], &err), 0, "%s", err.msg);
    cr_assert(pump_until(round2_at_0, 1), "the coordinator commits round 2 without n1");
    int64_t state_rev = coordinator_state_rev();
    struct kv_entry chunk = {0};
    cr_assert_eq(kv_get(kvs[0], "/elastic/t/assign/000000", &chunk, &err), 0, "%s", err.msg);
    real_chunk_rev = chunk.mod_revision;
    kv_entry_clear(&chunk);

    struct kv_event *ev = NULL;
    size_t n = 0;
    events_until_state(2, state_rev, &ev, &n);
    apply_some(2, ev, n, is_real_chunk, false); /* the dead one's chunk, then the state */
    cr_assert_eq(round_of(2), 2);
    const struct rdzv_member *m = rdzv_self_member(ss[2]);
    cr_assert(m, "n2 is a member of round 2");
    cr_assert_eq(m->group_rank, 1, "the successor's rank, not the dead coordinator's");
    cr_assert_eq(m->rank_base, 2);
    apply_some(2, ev, n, is_real_chunk, true); /* the right chunk, late */
    m = rdzv_self_member(ss[2]);
    cr_assert(m && m->group_rank == 1 && m->rank_base == 2);
    kv_events_free(ev, n);
}

/* ==== issue 30: no re-sync loop after the store dropped old history ====
 * The file store keeps its last 512 events or 256 KiB (KVS_FILE_LOG_*): a watch that falls
 * further behind ends with KV_ECOMPACTED, as etcd's does after a compaction. */

static bool never(void)
{
    return false;
}

static bool any_event(const struct kv_event *e)
{
    (void)e;
    return true;
}

static uint64_t requests_of(int i)
{
    struct rdzv_stats st;
    rdzv_stats_get(ss[i], &st);
    return st.requests;
}

static bool all_resynced(void)
{
    for (int i = 0; i < N; i++)
        if (rdzv_resync_count(ss[i]) == 0 || !rdzv_self_member(ss[i]))
            return false;
    return true;
}

/* Every node re-syncs once and is quiet again: a node's chunk watch must start after its
 * listing's revision, not after the chunk's own version, which the store no longer has. Fails
 * without that (session.c fetch_self): the chunk watch fails at once, in a loop. */
Test(session, compacted_watch_resyncs_once_then_quiet)
{
    join_all();
    struct ea_error err = {0};
    /* past the store's history (KVS_FILE_LOG_BYTES): every watch falls behind */
    static char big[64 << 10];
    memset(big, 'x', sizeof(big));
    for (int k = 0; k < 8; k++)
        cr_assert_eq(kv_put(kvs[0], "/other/k", big, sizeof(big), 0, NULL, &err), 0, "%s",
                     err.msg);
    cr_assert(pump_until(all_resynced, N), "every node re-syncs after its watch was compacted");
    pump_within(never, N, 600); /* the light nodes start their chunk watches (rdzv_tick) */
    uint64_t req[N], rs[N];
    for (int i = 0; i < N; i++)
        req[i] = requests_of(i), rs[i] = rdzv_resync_count(ss[i]);
    pump_within(never, N, 1500);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(rdzv_resync_count(ss[i]), rs[i], "node %d re-syncs in a loop", i);
        cr_assert_eq(requests_of(i), req[i], "node %d: %llu requests while idle", i,
                     (unsigned long long)(requests_of(i) - req[i]));
    }
    char warning[EA_ERROR_MSG_MAX];
    cr_assert(rdzv_take_warning(ss[2], warning, sizeof(warning)));
    cr_assert(strstr(warning, "re-sync 1") && strstr(warning, "compacted"), "%s", warning);
    /* and the chunk watch works: round 2 reaches n2 */
    cr_assert_eq(rdzv_leave(ss[1], &err), 0, "%s", err.msg);
    cr_assert(pump_until(round2_at_0, 1));
    int64_t gen = 0;
    rdzv_current(ss[0], &gen);
    struct kv_event *ev = NULL;
    size_t n = 0;
    events_until_state(2, gen, &ev, &n);
    uint64_t before = requests_of(2);
    apply_some(2, ev, n, any_event, true);
    cr_assert_eq(round_of(2), 2);
    cr_assert(rdzv_self_member(ss[2]) && rdzv_my_index(ss[2]) == 1);
    cr_assert_eq(requests_of(2), before, "the chunk came on the watch, not by a read");
    kv_events_free(ev, n);
}

/* Revoke node i's lease behind its back (as if its agent stalled past the TTL): its node key,
 * and the `coord` key when it held it, vanish. Done through another node's store handle. */
static void revoke_lease_of(int i)
{
    struct kv_entry node = {0};
    struct ea_error err = {0};
    char key[64];
    snprintf(key, sizeof(key), "/elastic/t/nodes/n%d", i);
    cr_assert_eq(kv_get(kvs[(i + 1) % N], key, &node, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_lease_revoke(kvs[(i + 1) % N], node.lease, &err), 0, "%s", err.msg);
    kv_entry_clear(&node);
}

static bool n1_sees_two_live(void)
{
    /* the coordinator published the live count 2 (so it will not publish again) */
    return rdzv_live_count(ss[0]) == 2 && rdzv_last_call_ms(ss[0]) >= 0 &&
           rdzv_live_count(ss[1]) == 2;
}

static bool n1_coordinates(void)
{
    return rdzv_is_coordinator(ss[1]);
}

/* Two coordinators. Node 0 coordinates while the run gathers (n0 and n1 live, the round a minute
 * away); its lease ends under it and, before it has seen that, node 1 takes the `coord`
 * key. Node 0 still believes it coordinates and, past the last call, commits round 1: the fence
 * on `coord` must refuse it (the one on `state` passes: nothing was committed yet), and node 0
 * learns that it no longer coordinates.
 * Mutation: rdzv_commit fenced on `state` alone (scripts/test.sh runs it) -> the stale
 * coordinator commits round 1, its dead incarnation in it. */
Test(session, stale_coordinator_cannot_commit)
{
    for (int i = 0; i < 2; i++)
        make_session(i, 60000, 60000, false);
    struct ea_error err = {0};
    for (int i = 0; i < 2; i++)
        cr_assert_eq(rdzv_join(ss[i], &err), 0, "%s", err.msg);
    cr_assert(rdzv_is_coordinator(ss[0]), "the first node claims `coord` at its join");
    cr_assert(pump_until(n1_sees_two_live, 2), "the coordinator never counted both nodes");
    cr_assert_null(rdzv_current(ss[0], NULL), "committed before the last call");

    revoke_lease_of(0);
    cr_assert(pump_one_within(1, n1_coordinates, 5000), "node 1 never took over `coord`");
    cr_assert_null(rdzv_current(ss[1], NULL), "node 1 alone is below --min: nothing to commit");

    /* node 0 has seen none of it: past its last call it tries to commit round 1 */
    cr_assert(rdzv_is_coordinator(ss[0]), "node 0 saw the takeover: the test proves nothing");
    int r = rdzv_tick(ss[0], ea_now_ms() + 120000, &err);
    cr_assert_eq(r, 0, "the stale coordinator's tick: %d (%s)", r, err.msg);
    struct kv_entry st = {0};
    r = kv_get(kvs[1], "/elastic/t/state", &st, &err);
    cr_assert_eq(r, KV_ENOTFOUND, "a stale coordinator committed: %.*s", (int)st.value_len,
                 st.value ? st.value : "");
    kv_entry_clear(&st);
    cr_assert_not(rdzv_is_coordinator(ss[0]), "the lost fence did not refresh node 0's view");
}

static bool round2_with_n2(void)
{
    return round2_everywhere() && rdzv_self_member(ss[2]) != NULL;
}

/* A node that lost its lease and rejoined is a new incarnation (a new node key: a new slot). The
 * committed round's entry of its dead incarnation is not its assignment: it is no member until
 * the round its rejoin forms, where it gets an entry of its own.
 * Mutation: self_from_chunk matching the node id alone (scripts/test.sh runs it) -> the
 * rejoined node takes its dead incarnation's rank 2 in round 1. */
Test(session, rejoined_node_does_not_take_its_dead_incarnations_place)
{
    join_all();
    const struct rdzv_member *old = rdzv_self_member(ss[2]);
    cr_assert_not_null(old);
    int64_t old_slot = old->slot, gen;
    rdzv_current(ss[2], &gen);
    revoke_lease_of(2);
    struct ea_error err = {0};
    cr_assert_eq(rdzv_keepalive(ss[2], ea_now_ms() + 60000, &err), KV_ENOLEASE);
    cr_assert_eq(rdzv_join(ss[2], &err), 0, "%s", err.msg);
    cr_assert_eq(rdzv_current(ss[2], NULL)->round, 1, "round 1 is still the committed one");
    cr_assert_null(rdzv_self_member(ss[2]),
                   "the rejoined node took its dead incarnation's assignment (rank %d)",
                   rdzv_my_index(ss[2]));
    cr_assert_eq(rdzv_my_index(ss[2]), -1);
    cr_assert_eq(rdzv_reform(ss[2], gen, &err), 0, "%s", err.msg);
    cr_assert(pump_until(round2_with_n2, N));
    cr_assert_neq(rdzv_self_member(ss[2])->slot, old_slot, "round 2 has the new incarnation");
}

/* The same in full mode (cfg.full_view: NIC discovery, the topology file; and any node that once
 * coordinated): the rejoined node must not take its dead incarnation's assignment either.
 * self_from_members() checks the slot as self_from_chunk() does (light mode). */
Test(session, rejoined_full_view_node_does_not_take_its_dead_incarnations_place)
{
    for (int i = 0; i < N; i++)
        make_session(i, 0, 1000, true);
    join_all();
    int64_t gen;
    rdzv_current(ss[2], &gen);
    revoke_lease_of(2);
    struct ea_error err = {0};
    cr_assert_eq(rdzv_keepalive(ss[2], ea_now_ms() + 60000, &err), KV_ENOLEASE);
    cr_assert_eq(rdzv_join(ss[2], &err), 0, "%s", err.msg);
    cr_assert_eq(rdzv_current(ss[2], NULL)->round, 1, "round 1 is still the committed one");
    cr_assert_null(rdzv_self_member(ss[2]),
                   "the rejoined node took its dead incarnation's assignment (rank %d)",
                   rdzv_my_index(ss[2]));
    cr_assert_eq(rdzv_reform(ss[2], gen, &err), 0, "%s", err.msg);
    cr_assert(pump_until(round2_with_n2, N));
}
