// SPDX-License-Identifier: Apache-2.0
/*
 * Who may write the rendezvous values a node acts on (rendezvous/roundguard.c, docs/security.md
 * "Rendezvous keys"), with three sessions on one store (the file backend, a handle each, as
 * separate agents): a forged rounds/<r>/master is refused by every node (the coordinator and the
 * nodes that read only their own chunk) and overwritten by group rank 0; failures/<r> and
 * reform/<r> naming a node that is not a member do not count; keys planted for later rounds are
 * deleted at the next commit; the roster lists every member's addresses.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ea_time.h"
#include "roster.h"
#include "session.h"

#define N 3
#define P "/elastic/g/"
static char dir[] = "/tmp/ea-guard-XXXXXX";
static struct kv *kvs[N];
static struct rdzv_session *ss[N];
static char warned[N][8192]; /* every warning each session reported, one a line */

static void setup(void)
{
    cr_assert(mkdtemp(dir));
    for (int i = 0; i < N; i++) {
        struct kv_config kc = {.backend = "file", .state_dir = dir};
        struct ea_error err = {0};
        cr_assert_eq(kv_open(&kc, &kvs[i], &err), 0, "%s", err.msg);
        struct rdzv_config rc = {.prefix = P,
                                 .params = {.min_nodes = 2,
                                            .max_nodes = 3,
                                            .settle_ms = 0,
                                            .last_call_ms = 1000,
                                            .max_restarts = 3},
                                 .lease_ttl_ms = 5000};
        snprintf(rc.self.node_id, sizeof(rc.self.node_id), "n%d", i);
        snprintf(rc.self.host, sizeof(rc.self.host), "h%d", i);
        snprintf(rc.self.addr, sizeof(rc.self.addr), "127.0.0.%d", i + 1);
        if (i == 0) /* its workers run elsewhere (--host): its tracker listens here */
            snprintf(rc.self.agent_addr, sizeof(rc.self.agent_addr), "127.0.0.99");
        rc.self.nproc = 2;
        cr_assert_eq(rdzv_session_create(kvs[i], &rc, &ss[i], &err), 0, "%s", err.msg);
        warned[i][0] = '\0';
    }
}

static void teardown(void)
{
    for (int i = 0; i < N; i++) {
        rdzv_session_destroy(ss[i]);
        kv_close(kvs[i]);
    }
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(guard, .init = setup, .fini = teardown, .timeout = 30);

static void take_warnings(int i)
{
    char w[EA_ERROR_MSG_MAX];
    while (rdzv_take_warning(ss[i], w, sizeof(w))) {
        size_t n = strlen(warned[i]);
        snprintf(warned[i] + n, sizeof(warned[i]) - n, "%s\n", w);
    }
}

/* Pump every session (events + tick) until pred() holds or `ms` pass. */
static bool pump_within(bool (*pred)(void), int ms)
{
    int64_t deadline = ea_now_ms() + ms;
    while (ea_now_ms() < deadline) {
        for (int i = 0; i < N; i++) {
            struct ea_error err = {0};
            cr_assert_geq(rdzv_on_events(ss[i], &err), 0, "%s", err.msg);
            take_warnings(i);
            cr_assert_geq(rdzv_tick(ss[i], ea_now_ms(), &err), 0, "%s", err.msg);
            take_warnings(i);
        }
        if (pred())
            return true;
        struct pollfd p[N];
        for (int i = 0; i < N; i++)
            p[i] = (struct pollfd){.fd = kv_event_fd(kvs[i]), .events = POLLIN};
        poll(p, N, 50);
    }
    return false;
}

static int64_t round_of(int i)
{
    const struct rdzv_state *s = rdzv_current(ss[i], NULL);
    return s && s->status == RDZV_RUNNING ? s->round : 0;
}

static bool all_in_round1(void)
{
    for (int i = 0; i < N; i++)
        if (round_of(i) != 1 || !rdzv_self_member(ss[i]))
            return false;
    return true;
}

static void join_all(void)
{
    for (int i = 0; i < N; i++) {
        struct ea_error err = {0};
        cr_assert_eq(rdzv_join(ss[i], &err), 0, "%s", err.msg);
    }
    cr_assert(pump_within(all_in_round1, 5000), "3 nodes at max must commit round 1");
    cr_assert_eq(rdzv_my_index(ss[0]), 0);
    cr_assert(rdzv_is_coordinator(ss[0]));
}

static void put(const char *key, const char *value, int64_t lease)
{
    struct ea_error err = {0};
    cr_assert_eq(kv_put(kvs[1], key, value, strlen(value), lease, NULL, &err), 0, "%s", err.msg);
}

static bool absent(const char *key)
{
    struct kv_entry e = {0};
    int r = kv_get(kvs[1], key, &e, NULL);
    kv_entry_clear(&e);
    return r == KV_ENOTFOUND;
}

static bool each_warned_master(void)
{
    for (int i = 0; i < N; i++)
        if (!strstr(warned[i], "refusing key '" P "rounds/1/master'"))
            return false;
    return true;
}

static bool master_known(void)
{
    for (int i = 0; i < N; i++)
        if (!rdzv_master(ss[i], 1))
            return false;
    return true;
}

/* A forged master naming group rank 0, on an address that is not in its record: refused by every
 * node (one warning each), then overwritten by group rank 0. Mutation check (scripts/test.sh):
 * record_lists() always true -> the nodes use 10.99.0.2. */
Test(guard, forged_master_is_refused_and_overwritten_by_rank_0)
{
    join_all();
    put(P "rounds/1/master",
        "{\"addr\":\"10.99.0.2:29500\",\"node\":\"n0\",\"schema\":\"elastic-agent/v2\"}", 0);
    cr_assert(pump_within(each_warned_master, 5000), "warnings: '%s' '%s' '%s'", warned[0],
              warned[1], warned[2]);
    for (int i = 0; i < N; i++) {
        cr_assert_null(rdzv_master(ss[i], 1), "node %d uses a forged master '%s'", i,
                       rdzv_master(ss[i], 1));
        cr_assert(strstr(warned[i], "'10.99.0.2' is not an address in node 'n0''s record"), "%s",
                  warned[i]);
        char *second = strstr(warned[i], "refusing key");
        cr_assert_null(strstr(second + 1, "refusing key"), "warned twice: %s", warned[i]);
    }
    struct ea_error err = {0};
    cr_assert_eq(rdzv_publish_master(ss[0], 1, "127.0.0.1:1234", &err), 0, "%s", err.msg);
    cr_assert(pump_within(master_known, 5000));
    for (int i = 0; i < N; i++)
        cr_assert_str_eq(rdzv_master(ss[i], 1), "127.0.0.1:1234");
}

/* Not group rank 0 (on its own address), not our value at all: each refused.
 * Mutation check: dropping the group-rank-0 test (leader_check() true for anyone) fails this. */
Test(guard, master_from_anyone_but_rank_0_is_refused)
{
    join_all();
    static const struct {
        const char *value;
        const char *why;
    } cases[] = {
        {"{\"addr\":\"127.0.0.2:29500\",\"node\":\"n1\",\"schema\":\"elastic-agent/v2\"}",
         "node 'n1' is not group rank 0 of round 1"},
        {"{\"addr\":\"127.0.0.1:29500\",\"node\":\"n0\",\"schema\":\"elastic-agent/v1\"}",
         "not a {\"schema\""},
        {"10.99.0.2:29500", "not a {\"schema\""},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        for (int i = 0; i < N; i++)
            warned[i][0] = '\0';
        put(P "rounds/1/master", cases[c].value, 0);
        cr_assert(pump_within(each_warned_master, 5000), "case %zu: '%s' '%s' '%s'", c, warned[0],
                  warned[1], warned[2]);
        for (int i = 0; i < N; i++) {
            cr_assert_null(rdzv_master(ss[i], 1), "case %zu, node %d", c, i);
            cr_assert(strstr(warned[i], cases[c].why), "case %zu: %s", c, warned[i]);
        }
    }
}

static bool tracker_known(void)
{
    for (int i = 0; i < N; i++)
        if (!rdzv_round_key(ss[i], 1, "tracker"))
            return false;
    return true;
}

static bool each_warned_tracker(void)
{
    for (int i = 1; i < N; i++)
        if (!strstr(warned[i], "refusing key '" P "rounds/1/tracker'"))
            return false;
    return true;
}

/* The tracker key is checked like the master: group rank 0's agent address (`agent_addr`, where
 * its tracker listens when its workers run on another host) passes, any other address does not.
 */
Test(guard, tracker_on_the_agents_own_address)
{
    join_all();
    put(P "rounds/1/tracker",
        "{\"addr\":\"127.0.0.98:4000\",\"node\":\"n0\",\"schema\":\"elastic-agent/v2\"}", 0);
    cr_assert(pump_within(each_warned_tracker, 5000), "'%s' '%s'", warned[1], warned[2]);
    struct ea_error err = {0};
    cr_assert_eq(rdzv_publish_round_key(ss[0], 1, "tracker", "127.0.0.99:4000", &err), 0, "%s",
                 err.msg);
    cr_assert(pump_within(tracker_known, 5000));
    for (int i = 0; i < N; i++)
        cr_assert_str_eq(rdzv_round_key(ss[i], 1, "tracker"), "127.0.0.99:4000");
}

static bool coord_warned_failure(void)
{
    return strstr(warned[0], "ignoring key '" P "failures/1': node 'intruder' is not a member");
}

static bool coord_warned_reform(void)
{
    return strstr(warned[0], "ignoring key '" P "reform/1': node 'intruder' is not a member");
}

static bool in_round2(void)
{
    return round_of(0) == 2 && round_of(1) == 2 && round_of(2) == 2;
}

/* A failure record naming a node that is not a member of the round is not counted: no new
 * round, no restart charged. A reform request likewise; one naming a member is acted on.
 * Mutation check: rdzv_guard_report_counts() counting any record fails this. */
Test(guard, reports_count_only_from_members)
{
    join_all();
    int64_t gen = 0;
    rdzv_current(ss[1], &gen);
    struct rdzv_failure f = {
        .node_id = "intruder", .host = "elsewhere", .rank = 0, .exit_code = 1, .message = "forged"};
    struct ea_error err = {0};
    cr_assert_eq(rdzv_report_failure(ss[1], gen, &f, &err), 0, "%s", err.msg);
    cr_assert(pump_within(coord_warned_failure, 5000), "%s", warned[0]);
    put(P "reform/1", "intruder", 0);
    cr_assert(pump_within(coord_warned_reform, 5000), "%s", warned[0]);
    /* the coordinator has seen both and acted on neither */
    const struct rdzv_state *s = rdzv_current(ss[0], NULL);
    cr_assert_eq(s->round, 1);
    cr_assert_eq(s->restart_count, 0);
    cr_assert_eq(s->status, RDZV_RUNNING);
    /* a member's reform request moves the run on */
    put(P "reform/1", "n2", 0);
    cr_assert(pump_within(in_round2, 5000), "a member's reform/1 must commit round 2");
    cr_assert_eq(rdzv_current(ss[0], NULL)->restart_count, 0);
}

static bool coord_deleted(void)
{
    return in_round2() && strstr(warned[0], "deleted 4 key(s) of rounds after round 2");
}

/* Keys of rounds after the committed one were written by nobody of this run: the coordinator
 * deletes them with its next commit (fenced); its own round's keys stay.
 * Mutation check: rdzv_guard_cleanup() returning at once fails this. */
Test(guard, keys_of_later_rounds_are_deleted_at_the_next_commit)
{
    join_all();
    put(P "rounds/1/detect", "{}", 0);
    put(P "rounds/2/recovery", "{}", 0);
    put(P "rounds/5/master", "10.99.0.2:29500", 0);
    put(P "failures/7", "{}", 0);
    put(P "reform/6", "n1", 0);
    put(P "done/9/n1", "{}", 0);
    put(P "reform/1", "n1", 0); /* a member: round 2 */
    cr_assert(pump_within(coord_deleted, 5000), "%s", warned[0]);
    cr_assert(absent(P "rounds/5/master"));
    cr_assert(absent(P "failures/7"));
    cr_assert(absent(P "reform/6"));
    cr_assert(absent(P "done/9/n1"));
    cr_assert_not(absent(P "rounds/1/detect"));
    cr_assert_not(absent(P "rounds/2/recovery"), "the committed round's own keys stay");
}

/* Every member with its record's addresses, in group-rank order, from the coordinator's mirror
 * and from a node that reads only its own chunk (two listings). */
Test(guard, roster_lists_every_member)
{
    join_all();
    for (int i = 0; i < N; i++) {
        struct rdzv_roster_node *ro = NULL;
        size_t n = 0;
        struct ea_error err = {0};
        cr_assert_eq(rdzv_round_roster(ss[i], &ro, &n, &err), 0, "node %d: %s", i, err.msg);
        cr_assert_eq(n, N);
        for (size_t k = 0; k < n; k++) {
            char id[8], addr[16];
            snprintf(id, sizeof(id), "n%zu", k);
            snprintf(addr, sizeof(addr), "127.0.0.%zu", k + 1);
            cr_assert_str_eq(ro[k].node_id, id);
            cr_assert_eq(ro[k].nproc, 2);
            cr_assert_eq(ro[k].n_addrs, 1);
            cr_assert_str_eq(ro[k].addrs[0], addr);
        }
        free(ro);
    }
}
