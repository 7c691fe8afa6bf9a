// SPDX-License-Identifier: Apache-2.0
/*
 * --straggler-action evict (docs/restarts.md, docs/security.md "Straggler eviction"): the
 * decision as a pure function (evict only while a spare node waits, never the coordinator
 * itself; the cooldown on a fake clock), the check of rounds/<r>/evict's writer, and the key on
 * a real session (three nodes on the file backend, max 2: one spare): the coordinator's eviction
 * reaches every node, one planted by a member is refused by all and overwritten by the
 * coordinator's, and no other node may write one.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ea_time.h"
#include "evict.h"
#include "kv.h"
#include "session.h"
#include "straggler.h"

/* ---- the decision ------------------------------------------------------------------------ */

Test(evict_decide, only_with_a_spare_waiting)
{
    cr_assert_eq(sg_evict_decide(true, 5, 4, false), SG_EVICT, "a fifth live node waits");
    cr_assert_eq(sg_evict_decide(true, 6, 4, false), SG_EVICT);
    cr_assert_eq(sg_evict_decide(true, 4, 4, false), SG_REPORT_NO_SPARE,
                 "every live node is a member: evicting would shrink the run");
    cr_assert_eq(sg_evict_decide(true, 3, 4, false), SG_REPORT_NO_SPARE,
                 "a member lost meanwhile: no spare");
    cr_assert_eq(sg_evict_decide(true, 0, 0, false), SG_REPORT_NO_SPARE);
}

Test(evict_decide, report_never_evicts_nor_the_coordinator_itself)
{
    cr_assert_eq(sg_evict_decide(false, 5, 4, false), SG_REPORT);
    cr_assert_eq(sg_evict_decide(true, 5, 4, true), SG_REPORT_SELF);
    cr_assert_str_eq(sg_action_name(SG_EVICT), "evict");
    cr_assert_str_eq(sg_action_name(SG_REPORT_NO_SPARE), "report_no_spare");
}

Test(evict_decide, cooldown_on_a_fake_clock)
{
    struct sg_hold h = {0};
    cr_assert_not(sg_hold_active(&h, 1000), "never evicted: not held");
    sg_hold_start(&h, 10000, 300000);
    cr_assert(sg_hold_active(&h, 10000));
    cr_assert(sg_hold_active(&h, 10000 + 299999), "held until the cooldown's last ms");
    cr_assert_not(sg_hold_active(&h, 10000 + 300000), "free once it is over");
    sg_hold_start(&h, 5000, 0);
    cr_assert_not(sg_hold_active(&h, 5000), "--straggler-cooldown 0: rejoins at once");
}

/* ---- who may write rounds/<r>/evict (pure) ------------------------------------------------ */

#define V(by, node) "{\"by\":\"" by "\",\"node\":\"" node "\",\"schema\":\"elastic-agent/v2\"}"

static int check(const char *v, int64_t key_lease, const char *coord, int64_t coord_lease,
                 char *node)
{
    return rdzv_straggler_check(v, strlen(v), key_lease, coord, coord_lease, node);
}

Test(evict_check, the_coordinators_word_on_its_lease_counts)
{
    char node[RDZV_ID_MAX] = "";
    cr_assert_eq(check(V("n0", "n3"), 77, "n0", 77, node), 0);
    cr_assert_str_eq(node, "n3");
}

Test(evict_check, another_writer_is_refused)
{
    char node[RDZV_ID_MAX];
    cr_assert_eq(check(V("n1", "n3"), 77, "n0", 77, node), -EPERM,
                 "names another writer than the coordinator, even on its lease");
    cr_assert_eq(check(V("n0", "n3"), 78, "n0", 77, node), -EPERM,
                 "names the coordinator, on another lease (a member's)");
    cr_assert_eq(check(V("n0", "n3"), 0, "n0", 77, node), -EPERM, "no lease");
    cr_assert_eq(check(V("n0", "n3"), 0, "n0", 0, node), -EPERM, "no coordinator lease known");
    cr_assert_eq(check(V("n0", "n3"), 77, NULL, 77, node), -EPERM, "no coordinator known");
    cr_assert_eq(check(V("n0", "n3"), 77, "", 77, node), -EPERM);
}

Test(evict_check, what_does_not_decode_is_refused)
{
    char node[RDZV_ID_MAX];
    cr_assert_eq(check("n3", 77, "n0", 77, node), -EBADMSG);
    cr_assert_eq(check(V("n0", ""), 77, "n0", 77, node), -EBADMSG, "names nobody");
    cr_assert_eq(
        check("{\"by\":\"n0\",\"node\":\"n3\",\"schema\":\"other/v9\"}", 77, "n0", 77, node),
        -EBADMSG, "another schema");
    cr_assert_eq(check("{\"by\":\"n0\",\"node\":\"n3\",\"node\":\"n1\",\"schema\":"
                       "\"elastic-agent/v2\"}",
                       77, "n0", 77, node),
                 -EBADMSG, "two names");
}

/* ---- the key on a real session ------------------------------------------------------------- */

#define N 3
#define P "/elastic/ev/"
static char dir[] = "/tmp/ea-evict-XXXXXX";
static struct kv *kvs[N];
static struct rdzv_session *ss[N];

static void setup(void)
{
    cr_assert(mkdtemp(dir));
    for (int i = 0; i < N; i++) {
        struct kv_config kc = {.backend = "file", .state_dir = dir};
        struct ea_error err = {0};
        cr_assert_eq(kv_open(&kc, &kvs[i], &err), 0, "%s", err.msg);
        struct rdzv_config rc = {.prefix = P,
                                 .params = {.min_nodes = 2,
                                            .max_nodes = 2,
                                            .settle_ms = 0,
                                            .last_call_ms = 500,
                                            .max_restarts = 3},
                                 .lease_ttl_ms = 10000};
        snprintf(rc.self.node_id, sizeof(rc.self.node_id), "n%d", i);
        snprintf(rc.self.host, sizeof(rc.self.host), "h%d", i);
        snprintf(rc.self.addr, sizeof(rc.self.addr), "127.0.0.%d", i + 1);
        rc.self.nproc = 1;
        cr_assert_eq(rdzv_session_create(kvs[i], &rc, &ss[i], &err), 0, "%s", err.msg);
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

TestSuite(evict_key, .init = setup, .fini = teardown, .timeout = 30);

static bool pump_within(bool (*pred)(void), int ms)
{
    int64_t deadline = ea_now_ms() + ms;
    while (ea_now_ms() < deadline) {
        for (int i = 0; i < N; i++) {
            struct ea_error err = {0};
            char w[EA_ERROR_MSG_MAX];
            cr_assert_geq(rdzv_on_events(ss[i], &err), 0, "%s", err.msg);
            cr_assert_geq(rdzv_tick(ss[i], ea_now_ms(), &err), 0, "%s", err.msg);
            while (rdzv_take_warning(ss[i], w, sizeof(w)))
                ;
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

static bool round1_with_a_spare(void)
{
    int members = 0;
    for (int i = 0; i < N; i++) {
        const struct rdzv_state *s = rdzv_current(ss[i], NULL);
        if (!s || s->status != RDZV_RUNNING || s->round != 1)
            return false;
        members += rdzv_self_member(ss[i]) != NULL;
    }
    return members == 2;
}

static int coord = -1, member = -1, spare = -1;

static void start(void)
{
    for (int i = 0; i < N; i++) {
        struct ea_error err = {0};
        cr_assert_eq(rdzv_join(ss[i], &err), 0, "%s", err.msg);
    }
    cr_assert(pump_within(round1_with_a_spare, 10000), "round 1 with 2 members and a spare");
    coord = member = spare = -1;
    for (int i = 0; i < N; i++)
        if (rdzv_is_coordinator(ss[i]))
            coord = i;
        else if (rdzv_self_member(ss[i]))
            member = i;
        else
            spare = i;
    cr_assert(coord >= 0 && member >= 0 && spare >= 0);
    cr_assert(rdzv_self_member(ss[coord]), "the coordinator is a member");
    cr_assert_eq(rdzv_live_count(ss[coord]), 3, "the coordinator counts the spare");
}

static int named[N];
static char who[N][RDZV_ID_MAX];

static bool all_named(void)
{
    for (int i = 0; i < N; i++)
        if ((named[i] = rdzv_straggler_evicted(ss[i], 1, who[i])) != 0)
            return false;
    return true;
}

static bool all_refused(void)
{
    for (int i = 0; i < N; i++)
        if ((named[i] = rdzv_straggler_evicted(ss[i], 1, who[i])) != -EPERM)
            return false;
    return true;
}

Test(evict_key, the_coordinators_eviction_reaches_every_node)
{
    start();
    char id[RDZV_ID_MAX];
    snprintf(id, sizeof(id), "n%d", member);
    cr_assert_eq(rdzv_straggler_evicted(ss[member], 1, who[member]), -ENOENT, "none yet");
    struct ea_error err = {0};
    cr_assert_eq(rdzv_straggler_evict(ss[coord], 1, id, &err), 0, "%s", err.msg);
    cr_assert(pump_within(all_named, 5000), "every node sees the eviction (got %d %d %d)", named[0],
              named[1], named[2]);
    for (int i = 0; i < N; i++)
        cr_assert_str_eq(who[i], id);
    cr_assert_eq(rdzv_straggler_evict(ss[coord], 1, id, &err), 0, "again: the first word stands");
}

Test(evict_key, only_the_coordinator_may_write_it)
{
    start();
    char id[RDZV_ID_MAX];
    snprintf(id, sizeof(id), "n%d", coord);
    struct ea_error err = {0};
    cr_assert_eq(rdzv_straggler_evict(ss[member], 1, id, &err), -EPERM, "a member");
    cr_assert_eq(rdzv_straggler_evict(ss[spare], 1, id, &err), -EPERM, "a spare");
    snprintf(id, sizeof(id), "n%d", coord);
    cr_assert_eq(rdzv_straggler_evict(ss[coord], 1, id, &err), -EINVAL, "not itself");
    cr_assert_eq(rdzv_straggler_evict(ss[coord], 2, "n9", &err), -EPERM, "not another round");
}

Test(evict_key, a_planted_eviction_is_refused_and_overwritten)
{
    start();
    /* a member plants one naming the coordinator as its writer, on the member's own lease */
    char v[256], key[128];
    snprintf(v, sizeof(v), V("n%d", "n%d"), coord, member);
    snprintf(key, sizeof(key), P "rounds/1/evict");
    struct ea_error err = {0};
    int64_t lease = 0, rev = 0;
    cr_assert_eq(kv_lease_grant(kvs[member], 10000, &lease, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_put(kvs[member], key, v, strlen(v), lease, &rev, &err), 0, "%s", err.msg);
    cr_assert(pump_within(all_refused, 5000), "every node refuses it (got %d %d %d)", named[0],
              named[1], named[2]);
    char id[RDZV_ID_MAX];
    snprintf(id, sizeof(id), "n%d", member);
    cr_assert_eq(rdzv_straggler_evict(ss[coord], 1, id, &err), 0, "%s", err.msg);
    cr_assert(pump_within(all_named, 5000), "the coordinator's overwrote it");
    for (int i = 0; i < N; i++)
        cr_assert_str_eq(who[i], id);
}
