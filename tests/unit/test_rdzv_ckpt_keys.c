// SPDX-License-Identifier: Apache-2.0
/*
 * The checkpoint store's keys (rendezvous/ckpt_keys.c, docs/checkpoint.md "Fetch"), with three
 * sessions on one store (the file backend, a handle each, as separate agents): who is a member
 * of the committed round (a fetch is served to members only) — each member, from the
 * coordinator's mirror and from a node that reads only its own chunk; a node id that is not in
 * the round (no record, or a record whose incarnation the round does not list) is not; another
 * round cannot be told. And ckpt/<node-id>: put with the node's lease, listed with it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_keys.h"
#include "ea_time.h"
#include "session.h"
#include "suspect.h"

#define N 3
#define P "/elastic/k/"
static char dir[] = "/tmp/ea-ckkeys-XXXXXX";
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
                                            .max_nodes = 3,
                                            .settle_ms = 0,
                                            .last_call_ms = 1000,
                                            .max_restarts = 3},
                                 .lease_ttl_ms = 5000};
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

TestSuite(ckpt_keys, .init = setup, .fini = teardown, .timeout = 30);

static bool all_in_round1(void)
{
    for (int i = 0; i < N; i++) {
        const struct rdzv_state *s = rdzv_current(ss[i], NULL);
        if (!s || s->status != RDZV_RUNNING || s->round != 1 || !rdzv_self_member(ss[i]))
            return false;
    }
    return true;
}

/* Every session joins; pumped (events + tick) until round 1 runs everywhere (5 s at most). */
static void join_all(void)
{
    for (int i = 0; i < N; i++) {
        struct ea_error err = {0};
        cr_assert_eq(rdzv_join(ss[i], &err), 0, "%s", err.msg);
    }
    int64_t deadline = ea_now_ms() + 5000;
    while (!all_in_round1() && ea_now_ms() < deadline) {
        for (int i = 0; i < N; i++) {
            struct ea_error err = {0};
            cr_assert_geq(rdzv_on_events(ss[i], &err), 0, "%s", err.msg);
            cr_assert_geq(rdzv_tick(ss[i], ea_now_ms(), &err), 0, "%s", err.msg);
        }
        struct pollfd p[N];
        for (int i = 0; i < N; i++)
            p[i] = (struct pollfd){.fd = kv_event_fd(kvs[i]), .events = POLLIN};
        poll(p, N, 50);
    }
    cr_assert(all_in_round1(), "3 nodes at max commit round 1");
    cr_assert(rdzv_is_coordinator(ss[0]));
    cr_assert_not(rdzv_is_coordinator(ss[1]));
}

static int member(int i, const char *id, int64_t round)
{
    struct ea_error err = {0};
    return rdzv_is_member(ss[i], id, round, &err);
}

Test(ckpt_keys, the_members_of_the_round_and_nobody_else)
{
    join_all();
    for (int i = 0; i < N; i++) /* the coordinator's mirror, and the nodes' chunk reads */
        for (int j = 0; j < N; j++) {
            char id[8];
            snprintf(id, sizeof(id), "n%d", j);
            cr_assert_eq(member(i, id, 1), 1, "n%d: %s is a member", i, id);
        }
    for (int i = 0; i < N; i++)
        cr_assert_eq(member(i, "mallory", 1), 0, "no node record: not a member");
    /* a record for a node the round does not list: its incarnation is in no chunk */
    struct ea_error err = {0};
    const char *rec = "{\"schema\":\"elastic-agent/v2\",\"node\":\"ghost\",\"host\":\"h9\","
                      "\"addr\":\"127.0.0.9\",\"nproc\":1,\"pid\":1,\"version\":\"0\","
                      "\"joined_ms\":1}";
    cr_assert_eq(kv_put(kvs[2], P "nodes/ghost", rec, strlen(rec), 0, NULL, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(member(1, "ghost", 1), 0, "a live record is not membership");
    cr_assert_eq(member(2, "ghost", 1), 0);
    cr_assert_lt(member(1, "n2", 2), 0, "a round not committed here cannot be told");
    cr_assert_lt(member(0, "n2", 0), 0);
}

Test(ckpt_keys, a_summary_is_put_with_the_nodes_lease_and_listed)
{
    join_all();
    struct ea_error err = {0};
    cr_assert_eq(rdzv_ckpt_publish(ss[1], "{\"x\":1}", &err), 0, "%s", err.msg);
    struct kv_list l = {0};
    bool more = true;
    cr_assert_eq(rdzv_ckpt_list(ss[2], &l, &more, &err), 0, "%s", err.msg);
    cr_assert_eq(l.n, 1);
    cr_assert_not(more);
    cr_assert_str_eq(rdzv_ckpt_id_of(ss[2], l.entries[0].key), "n1");
    cr_assert_str_eq(l.entries[0].value, "{\"x\":1}");
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kvs[2], P "nodes/n1", &e, &err), 0, "%s", err.msg);
    cr_assert_neq(l.entries[0].lease, 0);
    cr_assert_eq(l.entries[0].lease, e.lease, "on its node key's lease: it vanishes with it");
    kv_entry_clear(&e);
    cr_assert_null(rdzv_ckpt_id_of(ss[2], P "nodes/n1"));
    kv_list_clear(&l);
}

struct seen {
    int n;
    char ids[8][16];
};

static void see(void *ctx, const struct rdzv_ckpt_entry *e)
{
    struct seen *s = ctx;
    cr_assert_lt(s->n, 8);
    snprintf(s->ids[s->n++], sizeof(s->ids[0]), "%s", e->id);
}

/* The coordinator's ckpt/ entries (rdzv_ckpt_each) once its mirror has had `want` more changes
 * than `since` (5 s at most): the number of other members, and who was listed in *ret. */
static int each_after(uint64_t since, uint64_t want, struct seen *ret)
{
    int64_t deadline = ea_now_ms() + 5000;
    while (rdzv_changes(ss[0]) < since + want && ea_now_ms() < deadline) {
        struct ea_error err = {0};
        cr_assert_geq(rdzv_on_events(ss[0], &err), 0, "%s", err.msg);
        struct pollfd p = {.fd = kv_event_fd(kvs[0]), .events = POLLIN};
        poll(&p, 1, 50);
    }
    cr_assert_geq(rdzv_changes(ss[0]), since + want, "the coordinator saw the puts");
    *ret = (struct seen){0};
    struct ea_error err = {0};
    return rdzv_ckpt_each(ss[0], 1, see, ret, &err);
}

static int64_t lease_of(int i, const char *key)
{
    struct kv_entry e = {0};
    struct ea_error err = {0};
    cr_assert_eq(kv_get(kvs[i], key, &e, &err), 0, "%s", err.msg);
    int64_t l = e.lease;
    kv_entry_clear(&e);
    return l;
}

Test(ckpt_keys, the_coordinator_reads_the_members_summaries_from_its_mirror)
{
    join_all();
    struct ea_error err = {0};
    struct rdzv_stats before, after;
    /* n1's own; the coordinator's own (it uses its store instead); a stranger's; and n2's node key
     * put again (another incarnation than round 1's) with a summary on that key's lease */
    int64_t l2 = lease_of(2, P "nodes/n2");
    struct kv_entry rec = {0};
    cr_assert_eq(kv_get(kvs[2], P "nodes/n2", &rec, &err), 0, "%s", err.msg);
    uint64_t c0 = rdzv_changes(ss[0]);
    cr_assert_eq(kv_put(kvs[2], P "ckpt/ghost", "{}", 2, 0, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(rdzv_ckpt_publish(ss[0], "{\"me\":0}", &err), 0, "%s", err.msg);
    cr_assert_eq(kv_del(kvs[2], P "nodes/n2", &err), 0, "%s", err.msg);
    cr_assert_eq(kv_put(kvs[2], P "nodes/n2", rec.value, rec.value_len, l2, NULL, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(rdzv_ckpt_publish(ss[2], "{\"me\":2}", &err), 0, "%s", err.msg);
    cr_assert_eq(rdzv_ckpt_publish(ss[1], "{\"me\":1}", &err), 0, "%s", err.msg);
    kv_entry_clear(&rec);
    rdzv_stats_get(ss[0], &before);
    struct seen s;
    cr_assert_eq(each_after(c0, 6, &s), 2, "two other members");
    rdzv_stats_get(ss[0], &after);
    cr_assert_eq(after.requests, before.requests, "from the mirror: no request");
    cr_assert_eq(s.n, 1, "n1 only (not itself, a stranger, another incarnation)");
    cr_assert_str_eq(s.ids[0], "n1");
    /* n1's summary put again on no lease: not written by n1 */
    c0 = rdzv_changes(ss[0]);
    cr_assert_eq(kv_put(kvs[2], P "ckpt/n1", "{}", 2, 0, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(each_after(c0, 1, &s), 2);
    cr_assert_eq(s.n, 0, "a summary not on its node key's lease is left out");
    cr_assert_eq(rdzv_ckpt_each(ss[1], 1, see, &s, &err), -EAGAIN, "a node that does not "
                 "mirror the run");
    cr_assert_eq(rdzv_ckpt_each(ss[0], 2, see, &s, &err), -EAGAIN, "another round");
}
