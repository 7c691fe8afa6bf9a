// SPDX-License-Identifier: Apache-2.0
/*
 * The liveness ring's keys (rendezvous/suspect.c) with three sessions on one file store, each
 * with its own handle as separate agents would have: the ring links in each member's chunk,
 * a suspicion written by a watcher and confirmed by the coordinator (the suspect's lease revoked,
 * the next round without it), a false alarm cleared, forged and stale suspicions cleaned up, and
 * a revoke that would hit a rejoined node's new lease refused.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ea_time.h"
#include "session.h"
#include "suspect.h"

#define N 3
static char dir[] = "/tmp/ea-susp-XXXXXX";
static struct kv *kvs[N];
static struct rdzv_session *ss[N];

static void setup(void)
{
    cr_assert(mkdtemp(dir));
    for (int i = 0; i < N; i++) {
        struct kv_config kc = {.backend = "file", .state_dir = dir};
        struct ea_error err = {0};
        cr_assert_eq(kv_open(&kc, &kvs[i], &err), 0, "%s", err.msg);
        struct rdzv_config rc = {.prefix = "/elastic/t/",
                                 .params = {.min_nodes = 2,
                                            .max_nodes = 3,
                                            .settle_ms = 0,
                                            .last_call_ms = 1000,
                                            .ring = true},
                                 .lease_ttl_ms = 5000};
        snprintf(rc.self.node_id, sizeof(rc.self.node_id), "n%d", i);
        snprintf(rc.self.host, sizeof(rc.self.host), "h%d", i);
        snprintf(rc.self.addr, sizeof(rc.self.addr), "127.0.0.1");
        rc.self.nproc = 1;
        rc.self.live_port = 40000 + i;
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

static bool pump_within(bool (*pred)(void), int ms)
{
    int64_t deadline = ea_now_ms() + ms;
    while (ea_now_ms() < deadline) {
        for (int i = 0; i < N; i++) {
            struct ea_error err = {0};
            rdzv_on_events(ss[i], &err);
            rdzv_tick(ss[i], ea_now_ms(), &err);
        }
        if (pred())
            return true;
        struct pollfd p[N];
        for (int i = 0; i < N; i++)
            p[i] = (struct pollfd){.fd = kv_event_fd(kvs[i]), .events = POLLIN};
        poll(p, N, 20);
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
    cr_assert(pump_within(all_in_round1, 5000), "3 nodes at max commit round 1");
    cr_assert(rdzv_is_coordinator(ss[0]));
}

static struct rdzv_suspicion suspicion(int64_t round, const char *node, const char *by)
{
    struct rdzv_suspicion x = {.round = round, .fault_ms = 1000, .detected_ms = 2000};
    snprintf(x.node_id, sizeof(x.node_id), "%s", node);
    snprintf(x.by, sizeof(x.by), "%s", by);
    snprintf(x.cause, sizeof(x.cause), "connection closed");
    return x;
}

static void put(const char *rel, const char *value)
{
    char key[256];
    snprintf(key, sizeof(key), "/elastic/t/%s", rel);
    struct ea_error err = {0};
    cr_assert_eq(kv_put(kvs[1], key, value, strlen(value), 0, NULL, &err), 0, "%s", err.msg);
}

static bool present(const char *rel)
{
    char key[256];
    snprintf(key, sizeof(key), "/elastic/t/%s", rel);
    struct kv_entry e = {0};
    int r = kv_get(kvs[1], key, &e, NULL);
    kv_entry_clear(&e);
    return r == 0;
}

/* The store's revision now. */
static int64_t store_rev(void)
{
    struct kv_list l = {0};
    struct ea_error err = {0};
    cr_assert_eq(kv_list(kvs[1], "/elastic/t/nodes/", &l, &err), 0, "%s", err.msg);
    int64_t rev = l.revision;
    kv_list_clear(&l);
    return rev;
}

/* The coordinator's watch delivers everything written so far. */
static void deliver(void)
{
    struct ea_error err = {0};
    for (int k = 0; k < 20; k++) { /* the file store's events come through its fd */
        rdzv_on_events(ss[0], &err);
        struct pollfd p = {.fd = kv_event_fd(kvs[0]), .events = POLLIN};
        if (poll(&p, 1, 20) <= 0)
            break;
    }
    rdzv_on_events(ss[0], &err);
}

/* The coordinator's suspicions after its watch delivered everything written so far. */
static size_t suspects(struct rdzv_suspect_case *c, size_t max)
{
    size_t n = 0;
    struct ea_error err = {0};
    deliver();
    cr_assert_eq(rdzv_suspects(ss[0], c, max, &n, &err), 0, "%s", err.msg);
    return n;
}

TestSuite(suspect, .init = setup, .fini = teardown, .timeout = 30);

Test(suspect, every_member_learns_its_ring_neighbours_from_its_own_chunk)
{
    join_all();
    for (int i = 0; i < N; i++) {
        const struct rdzv_member *m = rdzv_self_member(ss[i]);
        char next[8], prev[8];
        snprintf(next, sizeof(next), "n%d", (m->group_rank + 1) % N);
        snprintf(prev, sizeof(prev), "n%d", (m->group_rank + N - 1) % N);
        cr_assert_str_eq(m->next, next, "n%d's successor", i);
        cr_assert_str_eq(m->prev, prev, "n%d's predecessor", i);
    }
    /* the successor's record: its live port, and the lease its key is on */
    struct rdzv_ring_peer p;
    cr_assert_eq(rdzv_ring_peer(ss[1], "n2", &p, NULL), 0, "one read from a light node");
    cr_assert_eq(p.port, 40002);
    cr_assert_str_eq(p.addr, "127.0.0.1");
    cr_assert_neq(p.lease, 0);
}

Test(suspect, a_confirmed_suspicion_revokes_the_suspects_lease)
{
    join_all();
    struct rdzv_suspicion x = suspicion(1, "n2", "n1");
    struct ea_error err = {0};
    cr_assert_eq(rdzv_suspect(ss[1], &x, &err), 1, "%s", err.msg);
    cr_assert_eq(rdzv_suspect(ss[1], &x, &err), 0, "create-only: the second report is a no-op");
    struct rdzv_suspect_case c[4];
    cr_assert_eq(suspects(c, 4), 1);
    cr_assert_str_eq(c[0].sus.node_id, "n2");
    cr_assert_str_eq(c[0].sus.by, "n1");
    cr_assert_eq(c[0].peer.port, 40002, "the probe goes where the suspect's own record says");
    cr_assert_eq(rdzv_evict(ss[0], &c[0], &err), 1, "%s", err.msg);
    cr_assert_not(present("nodes/n2"), "the revoke deleted the suspect's node key");
    cr_assert(present("suspect/1/n2"), "the key stays until its round is over (no write more)");
    cr_assert_eq(rdzv_keepalive(ss[2], ea_now_ms() + 60000, &err), KV_ENOLEASE,
                 "the evicted node finds its lease gone");
    cr_assert_eq(rdzv_evict(ss[0], &c[0], &err), 0, "gone already: nothing to do");
}

/* The suspect's other neighbour finds the key written: it puts itself in `also` (once), so a
 * first watcher that coordinates by now has a second word besides its own. */
Test(suspect, the_other_neighbours_report_is_the_second_word)
{
    join_all();
    struct rdzv_suspicion x = suspicion(1, "n2", "n1"), y = suspicion(1, "n2", "n0");
    struct ea_error err = {0};
    cr_assert_eq(rdzv_suspect(ss[1], &x, &err), 1, "%s", err.msg);
    cr_assert_eq(rdzv_suspect(ss[0], &y, &err), 1, "%s", err.msg);
    cr_assert_eq(rdzv_suspect(ss[1], &x, &err), 0, "the first watcher again: nothing");
    cr_assert_eq(rdzv_suspect(ss[0], &y, &err), 0, "the second again: nothing");
    struct rdzv_suspect_case c[4];
    size_t n = suspects(c, 4);
    cr_assert_eq(n, 1, "%zu cases (%s)", n, n ? c[0].sus.by : "");
    cr_assert_str_eq(c[0].sus.by, "n1");
    cr_assert_str_eq(c[0].sus.also, "n0");
}

Test(suspect, a_false_alarm_is_cleared)
{
    join_all();
    struct rdzv_suspicion x = suspicion(1, "n1", "n0");
    struct ea_error err = {0};
    cr_assert_eq(rdzv_suspect(ss[0], &x, &err), 1, "%s", err.msg);
    struct rdzv_suspect_case c[4];
    cr_assert_eq(suspects(c, 4), 1);
    cr_assert_eq(rdzv_suspect_clear(ss[0], &c[0], &err), 0, "%s", err.msg);
    cr_assert_not(present("suspect/1/n1"));
    cr_assert(present("nodes/n1"), "nobody evicted");
    cr_assert_eq(rdzv_suspect(ss[2], &x, &err), 1, "a later failure can be reported again");
}

/* Mutation: rdzv_evict() without its lease check -> the rejoined node's new lease is revoked. */
Test(suspect, a_revoke_never_hits_a_lease_the_node_rejoined_with)
{
    join_all();
    struct rdzv_suspicion x = suspicion(1, "n2", "n1");
    struct ea_error err = {0};
    cr_assert_eq(rdzv_suspect(ss[1], &x, &err), 1, "%s", err.msg);
    struct rdzv_suspect_case c[4];
    cr_assert_eq(suspects(c, 4), 1);
    /* a case whose lease is not the one n2's key is on now (it rejoined since the scan): here,
     * a live lease that matters, n1's */
    struct rdzv_ring_peer n1;
    cr_assert_eq(rdzv_ring_peer(ss[0], "n1", &n1, NULL), 0);
    struct rdzv_suspect_case old = c[0];
    old.peer.lease = n1.lease;
    cr_assert_eq(rdzv_evict(ss[0], &old, &err), 0, "%s", err.msg);
    cr_assert(present("nodes/n1"), "no other lease is ever revoked");
    cr_assert(present("nodes/n2"), "nor the suspect's, unless it is the one that was seen");
    cr_assert_geq(rdzv_keepalive(ss[1], ea_now_ms() + 60000, &err), 0, "%s", err.msg);
}

Test(suspect, forged_and_stale_suspicions_are_cleaned_up_not_probed)
{
    join_all();
    put("suspect/1/nobody", "{\"schema\":\"elastic-agent/v2\",\"by\":\"x\",\"cause\":\"c\","
                            "\"fault_ms\":1,\"detected_ms\":2}"); /* not a member */
    put("suspect/0/n1", "{\"schema\":\"elastic-agent/v2\",\"by\":\"x\",\"cause\":\"c\","
                        "\"fault_ms\":1,\"detected_ms\":2}"); /* an older round */
    put("suspect/1/n0", "{\"schema\":\"elastic-agent/v2\",\"by\":\"x\",\"cause\":\"c\","
                        "\"fault_ms\":1,\"detected_ms\":2}"); /* the coordinator: it is alive */
    put("suspect/1/n1", "{\"by\":\"x\"}");                    /* not a suspicion */
    put("suspect/one/n2", "{}");                              /* not a round */
    struct rdzv_suspect_case c[4];
    cr_assert_eq(suspects(c, 4), 0, "nothing to probe");
    char w[EA_ERROR_MSG_MAX];
    cr_assert(rdzv_take_warning(ss[0], w, sizeof(w)), "the bad value is reported");
    cr_assert(strstr(w, "suspect/1/n1"), "%s", w);
    const char *gone[] = {"suspect/1/nobody", "suspect/0/n1", "suspect/1/n0", "suspect/1/n1",
                          "suspect/one/n2"};
    for (size_t i = 0; i < sizeof(gone) / sizeof(*gone); i++)
        cr_assert_not(present(gone[i]), "'%s' deleted", gone[i]);
    for (int i = 0; i < N; i++)
        cr_assert(present(i == 0 ? "nodes/n0" : i == 1 ? "nodes/n1" : "nodes/n2"));
    struct rdzv_suspicion x = suspicion(7, "n1", "n2");
    struct ea_error err = {0};
    cr_assert_eq(rdzv_suspect(ss[2], &x, &err), 0, "a round that is not running: no write");
    cr_assert_not(present("suspect/7/n1"));
}

/* Stale keys go in one transaction fenced on each key's revision: a key rewritten since the
 * coordinator's mirror saw it is not deleted (it is looked at again when its event arrives).
 * Mutation (scripts/mutants.d/burst.sh): the transaction without its compares -> deleted. */
Test(suspect, a_stale_key_rewritten_since_is_not_deleted_with_the_others)
{
    join_all();
    const char *v = "{\"schema\":\"elastic-agent/v2\",\"by\":\"x\",\"cause\":\"c\","
                    "\"fault_ms\":1,\"detected_ms\":2}";
    put("suspect/0/n1", v);     /* an older round */
    put("suspect/1/nobody", v); /* not a member */
    deliver();
    put("suspect/0/n1", v); /* rewritten: the coordinator has not seen it yet */
    struct rdzv_suspect_case c[4];
    size_t n = 9;
    struct ea_error err = {0};
    cr_assert_eq(rdzv_suspects(ss[0], c, 4, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 0);
    cr_assert(present("suspect/0/n1"), "a key rewritten since it was seen was deleted");
    cr_assert_not(present("suspect/1/nobody"), "the other stale key stayed");
    cr_assert_eq(suspects(c, 4), 0, "its event arrives: looked at again");
    cr_assert_not(present("suspect/0/n1"), "and deleted then");
}

Test(suspect, a_watcher_may_revoke_the_coordinator_it_cannot_reach)
{
    join_all();
    char holder[64];
    int64_t lease = 0;
    cr_assert(rdzv_coord_holder(ss[1], holder, sizeof(holder), &lease));
    cr_assert_str_eq(holder, "n0");
    struct ea_error err = {0};
    cr_assert_eq(rdzv_evict_coord(ss[1], "n0", lease + 1, &err), 0, "another lease: refused");
    cr_assert_eq(rdzv_evict_coord(ss[1], "n1", lease, &err), 0, "not the coordinator: refused");
    cr_assert(present("coord"));
    cr_assert_eq(rdzv_evict_coord(ss[1], "n0", lease, &err), 1, "%s", err.msg);
    cr_assert_not(present("coord"), "the coordinator's key went with its lease");
    cr_assert_not(present("nodes/n0"));
}

Test(suspect, suspicion_values_are_checked)
{
    struct rdzv_suspicion x = suspicion(1, "n1", "n0"), d;
    char *json = NULL;
    cr_assert_eq(rdzv_suspicion_encode(&x, &json, NULL), 0);
    cr_assert_eq(rdzv_suspicion_decode(json, strlen(json), &d, NULL), 0);
    cr_assert_str_eq(d.by, "n0");
    cr_assert_str_eq(d.cause, "connection closed");
    cr_assert_eq(d.fault_ms, 1000);
    free(json);
    const char *bad[] = {
        "{\"schema\":\"elastic-agent/v1\",\"by\":\"a\",\"cause\":\"c\",\"fault_ms\":1,"
        "\"detected_ms\":2}",
        "{\"schema\":\"elastic-agent/v2\",\"by\":\"\",\"cause\":\"c\",\"fault_ms\":1,"
        "\"detected_ms\":2}",
        "{\"schema\":\"elastic-agent/v2\",\"by\":\"a\",\"cause\":\"c\",\"fault_ms\":1,"
        "\"detected_ms\":0}",
        "{\"schema\":\"elastic-agent/v2\",\"by\":\"a\",\"cause\":\"c\",\"fault_ms\":\"1\","
        "\"detected_ms\":2}",
        "{\"schema\":\"elastic-agent/v2\",\"by\":\"a\",\"cause\":\"c\",\"fault_ms\":1,"
        "\"detected_ms\":2,\"also\":\"a\"}",
        "{\"schema\":\"elastic-agent/v2\",\"by\":\"a\",\"cause\":\"c\",\"fault_ms\":1,"
        "\"detected_ms\":2,\"also\":\"\"}",
        "{\"schema\":\"elastic-agent/v2\",\"by\":\"a\",\"cause\":\"c\",\"fault_ms\":1,"
        "\"detected_ms\":2,\"also\":7}",
        "[]",
        "not json",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        cr_assert_eq(rdzv_suspicion_decode(bad[i], strlen(bad[i]), &d, NULL), -EBADMSG, "%s",
                     bad[i]);
    snprintf(d.also, sizeof(d.also), "zz");
    cr_assert_eq(rdzv_suspicion_encode(&x, &json, NULL), 0);
    cr_assert_eq(rdzv_suspicion_decode(json, strlen(json), &d, NULL), 0);
    cr_assert_str_eq(d.also, "", "no second watcher: empty");
    free(json);
    snprintf(x.also, sizeof(x.also), "n2");
    cr_assert_eq(rdzv_suspicion_encode(&x, &json, NULL), 0);
    cr_assert_eq(rdzv_suspicion_decode(json, strlen(json), &d, NULL), 0);
    cr_assert_str_eq(d.also, "n2", "the second watcher");
    free(json);
    char big[RDZV_SUSPECT_BYTES_MAX + 2];
    memset(big, ' ', sizeof(big));
    cr_assert_eq(rdzv_suspicion_decode(big, sizeof(big), &d, NULL), -EBADMSG, "too big");
}

Test(suspect, a_third_member_confirms_a_suspicion_of_the_coordinator)
{
    cr_assert_eq(rdzv_coord_confirmer(2, 0, 1), -1, "two members: nobody else");
    cr_assert_eq(rdzv_coord_confirmer(3, 0, 1), 2);
    cr_assert_eq(rdzv_coord_confirmer(4, 0, 3), 2, "half the rank order away");
    cr_assert_eq(rdzv_coord_confirmer(4, 1, 0), 3, "half the rank order away, wrapping");
    cr_assert_eq(rdzv_coord_confirmer(4, 0, 2), 1, "that one is the watcher: the lowest other");
    cr_assert_eq(rdzv_coord_confirmer(9, 5, 4), 0);
    /* a rack of consecutive ranks with the coordinator (0-31 of 10,000) keeps its confirmer */
    cr_assert_eq(rdzv_coord_confirmer(10000, 0, 9999), 5000);
    join_all();
    struct rdzv_coord_suspicion x = {.sus = suspicion(1, "n0", "n2"),
                                     .coord_rank = 0,
                                     .by_rank = 2},
                                got;
    struct ea_error err = {0};
    cr_assert_eq(rdzv_coord_suspect(ss[2], &x, &err), 1, "%s", err.msg);
    cr_assert_eq(rdzv_coord_suspect(ss[2], &x, &err), 0, "one per round");
    int64_t end = ea_now_ms() + 5000;
    while (rdzv_coord_suspicion(ss[1], &got) != 1 && ea_now_ms() < end) {
        struct pollfd p = {.fd = kv_event_fd(kvs[1]), .events = POLLIN};
        poll(&p, 1, 20);
        rdzv_on_events(ss[1], &err);
    }
    cr_assert_eq(rdzv_coord_suspicion(ss[1], &got), 1, "every node receives it (rounds/)");
    cr_assert_str_eq(got.sus.node_id, "n0");
    cr_assert_str_eq(got.sus.by, "n2");
    cr_assert_eq(got.coord_rank, 0);
    cr_assert_eq(got.by_rank, 2);
    cr_assert_eq(rdzv_coord_suspect_clear(ss[1], &got, &err), 0, "%s", err.msg);
    cr_assert_not(present("rounds/1/coord_suspect"), "a false alarm is cleared");
    put("rounds/1/coord_suspect", "{\"schema\":\"elastic-agent/v2\",\"node\":\"n0\"}");
    end = ea_now_ms() + 5000;
    int r;
    while ((r = rdzv_coord_suspicion(ss[1], &got)) == 0 && ea_now_ms() < end) {
        struct pollfd p = {.fd = kv_event_fd(kvs[1]), .events = POLLIN};
        poll(&p, 1, 20);
        rdzv_on_events(ss[1], &err);
    }
    cr_assert_eq(r, -EBADMSG, "a value that is not one is refused");
    char w[EA_ERROR_MSG_MAX];
    cr_assert(rdzv_take_warning(ss[1], w, sizeof(w)) && strstr(w, "coord_suspect"), "%s", w);
}

/* Issue 30's rule for the coordinator (O(changed) per event): it looks only at the suspect keys
 * the watch brings, never scanning its mirror. Mutation: the mirror's hook that queues them
 * (rdzv_suspect_on_put) ignores suspect/ keys -> a suspicion that arrives as an event is never
 * acted on. */
Test(suspect, a_suspicion_that_arrives_as_an_event_is_acted_on_once)
{
    join_all();
    struct rdzv_suspect_case c[4];
    cr_assert_eq(suspects(c, 4), 0, "nothing suspected yet");
    struct rdzv_suspicion x = suspicion(1, "n2", "n1");
    struct ea_error err = {0};
    cr_assert_eq(rdzv_suspect(ss[1], &x, &err), 1, "%s", err.msg);
    cr_assert_eq(suspects(c, 4), 1, "the event's key is looked at");
    cr_assert_str_eq(c[0].sus.node_id, "n2");
    cr_assert_eq(suspects(c, 4), 0, "handed out once in its round, not at every change");
    /* more than fit in one call: the rest are due for the next */
    struct rdzv_suspicion y = suspicion(1, "n1", "n2");
    cr_assert_eq(rdzv_suspect(ss[2], &y, &err), 1, "%s", err.msg);
    put("suspect/1/n0", "{\"schema\":\"elastic-agent/v2\",\"by\":\"x\",\"cause\":\"c\","
                        "\"fault_ms\":1,\"detected_ms\":2}"); /* the coordinator: stale */
    size_t n = 0;
    for (int k = 0; k < 20; k++) {
        rdzv_on_events(ss[0], &err);
        struct pollfd p = {.fd = kv_event_fd(kvs[0]), .events = POLLIN};
        if (poll(&p, 1, 20) <= 0)
            break;
    }
    rdzv_on_events(ss[0], &err);
    cr_assert_eq(rdzv_suspects(ss[0], c, 0, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 0);
    cr_assert(rdzv_suspects_due(ss[0]), "n1's suspicion waits for room");
    cr_assert_not(present("suspect/1/n0"), "the stale key went at once");
    cr_assert_eq(rdzv_suspects(ss[0], c, 4, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(c[0].sus.node_id, "n1");
    cr_assert_not(rdzv_suspects_due(ss[0]));
}

/* A key handed out and left in the store is looked at again when its round is over (and
 * deleted then). Mutation: the kept keys are not queued again at a change of round -> the key of
 * round 1 stays. */
Test(suspect, a_suspicion_left_from_an_earlier_round_is_cleaned_up)
{
    join_all();
    put("suspect/1/n1", "{\"schema\":\"elastic-agent/v2\",\"by\":\"n2\",\"cause\":\"c\","
                        "\"fault_ms\":1,\"detected_ms\":2}"); /* no lease: stays unless deleted */
    struct rdzv_suspicion x = suspicion(1, "n2", "n1");
    struct ea_error err = {0};
    cr_assert_eq(rdzv_suspect(ss[1], &x, &err), 1, "%s", err.msg);
    struct rdzv_suspect_case c[4];
    cr_assert_eq(suspects(c, 4), 2);
    size_t k2 = strcmp(c[0].sus.node_id, "n2") == 0 ? 0 : 1;
    cr_assert_eq(rdzv_evict(ss[0], &c[k2], &err), 1, "%s", err.msg);
    cr_assert(present("suspect/1/n2"), "the evicted node's key stays for now");
    int64_t end = ea_now_ms() + 5000;
    while (round_of(0) != 2 && ea_now_ms() < end) {
        rdzv_on_events(ss[0], &err);
        rdzv_tick(ss[0], ea_now_ms(), &err);
        struct pollfd p = {.fd = kv_event_fd(kvs[0]), .events = POLLIN};
        poll(&p, 1, 20);
    }
    cr_assert_eq(round_of(0), 2, "the round without n2");
    cr_assert(present("suspect/1/n1"));
    int64_t rev = store_rev();
    cr_assert_eq(suspects(c, 4), 0, "a suspicion of round 1 is not one of round 2");
    cr_assert_not(present("suspect/1/n1"), "deleted once its round was over");
    cr_assert_not(present("suspect/1/n2"), "and the evicted node's with it");
    cr_assert_eq(store_rev(), rev + 1, "both in one write");
}
