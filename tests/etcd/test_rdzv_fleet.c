// SPDX-License-Identifier: Apache-2.0
/*
 * The fleet-scale protocol on a real etcd: 200 simulated nodes (bench/rdzv_sim.c: each a real
 * rendezvous session with its own lease, node key, watches and assignment) rendezvous, one is
 * killed, then the coordinator. What each node received and wrote is counted by its session
 * (rdzv_stats: every key and value a listing, get or watch event brought) and must not grow with
 * N: a node that does not coordinate receives under 2 KiB per round (a member list would be
 * ~12 KiB at 200 nodes) and writes nothing; the coordinator writes ⌈N/32⌉ + 1 keys. Every node
 * got its assignment (rdzv-sim); and every round the run committed is read back from etcd's
 * history: its chunks hold each of its members once, with group ranks 0..n-1 and global ranks
 * contiguous, so the assignments the nodes read are unique.
 * Mutation checked: every session mirroring the whole run (`s->full = true` in
 * rdzv_session_create) -> the per-round byte bound fails.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "etcd_harness.h"
#include "state.h"

#define RUN "fleet"
#define P "/elastic/" RUN "/"

static struct etcd_harness h;

static void setup(void)
{
    cr_assert_eq(etcd_harness_start(&h, 1), 0, "etcd did not start");
}

static void teardown(void)
{
    etcd_harness_stop(&h);
}

TestSuite(fleet, .init = setup, .fini = teardown, .timeout = 240);

/* Run rdzv-sim with `args` against `endpoint`; its key=value output in `out`. Exit status. */
static int sim(const char *endpoint, const char *args, char *out, size_t size)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "'%s' --endpoints %s %s 2>&1", EA_RDZV_SIM, endpoint, args);
    FILE *p = popen(cmd, "r");
    cr_assert(p, "cannot run %s", cmd);
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static double value(const char *out, const char *key)
{
    char pat[128];
    snprintf(pat, sizeof(pat), "\n%s=", key);
    const char *p = strstr(out, pat);
    cr_assert(p, "rdzv-sim printed no %s:\n%s", key, out);
    return atof(p + strlen(pat));
}

static void check_o1(const char *out, int n)
{
    /* every node has its assignment; per round (after the join) a node that does not
     * coordinate receives the commit record, its own chunk and the round's master, and writes
     * nothing but group rank 0's master (one node, one key) */
    cr_assert_leq(value(out, "kill_one_bytes_per_node_max"), 2048, "%s", out);
    cr_assert_leq(value(out, "kill_coordinator_bytes_per_node_max"), 2048, "%s", out);
    cr_assert_leq(value(out, "kill_one_keys_written_per_node_max"), 1, "%s", out);
    cr_assert_leq(value(out, "kill_one_keys_written_per_node_mean"), 2.0 / n, "%s", out);
    /* the join: its node key (plus a claim of `coord` by the few that found it free) */
    cr_assert_leq(value(out, "join_keys_written_per_node_mean"), 1.1, "%s", out);
    cr_assert_leq(value(out, "join_bytes_per_node_max"), 4096, "%s", out);
    /* the coordinator: ⌈N/32⌉ chunks + the commit record per round */
    cr_assert_leq(value(out, "kill_one_coordinator_keys_written"), (n + 31) / 32 + 2, "%s", out);
}

static int by_group_rank(const void *a, const void *b)
{
    const struct rdzv_member *x = a, *y = b;
    return (x->group_rank > y->group_rank) - (x->group_rank < y->group_rank);
}

/* Round `st`, committed at revision `rev`: its members from its chunks as of that revision. Each
 * node once, group ranks 0..n-1, global ranks contiguous: rank_base the sum of the nproc of the
 * ranks before, world_size the sum of all. Returns the member count. */
static size_t check_round(struct kv *kv, const struct rdzv_state *st, int64_t rev)
{
    struct rdzv_member *all = NULL;
    size_t n = 0;
    for (int k = 0; k < st->n_chunks; k++) {
        char key[64];
        snprintf(key, sizeof(key), P "assign/%06d", k);
        struct kv_entry e = {0};
        struct ea_error err = {0};
        cr_assert_eq(kv_get_at(kv, key, rev, &e, &err), 0, "round %lld: %s: %s",
                     (long long)st->round, key, err.msg);
        int64_t round = 0;
        int chunk = -1;
        struct rdzv_member *m = NULL;
        size_t cn = 0;
        cr_assert_eq(rdzv_chunk_decode(e.value, e.value_len, &round, &chunk, &m, &cn, &err), 0,
                     "%s: %s", key, err.msg);
        cr_assert(round == st->round && chunk == k, "%s at revision %lld: chunk %d of round %lld",
                  key, (long long)rev, chunk, (long long)round);
        struct rdzv_member *grown = realloc(all, (n + cn) * sizeof(*all));
        cr_assert_not_null(grown);
        all = grown;
        memcpy(all + n, m, cn * sizeof(*m));
        n += cn;
        free(m);
        kv_entry_clear(&e);
    }
    cr_assert_eq(n, (size_t)st->group_world_size,
                 "round %lld: %zu members in its chunks, %d in its commit", (long long)st->round, n,
                 st->group_world_size);
    qsort(all, n, sizeof(*all), by_group_rank);
    int base = 0;
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(all[i].group_rank, (int)i,
                     "round %lld: group ranks not 0..%zu: %d at %zu (%s)", (long long)st->round,
                     n - 1, all[i].group_rank, i, all[i].node_id);
        cr_assert_eq(all[i].rank_base, base,
                     "round %lld: %s (group rank %zu) has global ranks from %d, not %d",
                     (long long)st->round, all[i].node_id, i, all[i].rank_base, base);
        base += all[i].nproc;
        for (size_t k = 0; k < i; k++)
            cr_assert_str_neq(all[k].node_id, all[i].node_id, "round %lld: node %s twice",
                              (long long)st->round, all[i].node_id);
    }
    cr_assert_eq(base, st->world_size, "round %lld: global ranks 0..%d, world size %d",
                 (long long)st->round, base - 1, st->world_size);
    free(all);
    return n;
}

/* Every round the run committed, from the history of its `state` key (a watch from revision 1
 * replays it; a marker key written afterwards ends it): check_round() on each RUNNING one.
 * `want` (ended by 0): member counts some round must have had. */
static void check_every_round(const size_t *want)
{
    struct kv *kv = NULL;
    struct ea_error err = {0};
    cr_assert_eq(etcd_harness_open(h.endpoints, 0, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_put(kv, P "state~end", "x", 1, 0, NULL, &err), 0, "%s", err.msg);
    int64_t id = 0;
    cr_assert_eq(kv_watch(kv, P "state", 1, &id, &err), 0, "%s", err.msg);
    struct kv_event *ev = NULL;
    size_t n = 0, done = 0, rounds = 0, seen[8] = {0}, n_seen = 0;
    for (bool end = false; !end;) {
        size_t had = n;
        cr_assert_gt(etcd_harness_wait_events(kv, &ev, &n, n + 1, 10000), had,
                     "the history of '" P "state' did not come");
        for (; done < n && !end; done++) {
            const struct kv_event *e = &ev[done];
            cr_assert_neq(e->type, KV_EVENT_ERROR, "%s", e->message);
            end = strcmp(e->entry.key, P "state~end") == 0;
            struct rdzv_state st = {0};
            if (e->type != KV_EVENT_PUT || strcmp(e->entry.key, P "state") != 0)
                continue;
            cr_assert_eq(rdzv_state_decode(e->entry.value, e->entry.value_len, &st, &err), 0, "%s",
                         err.msg);
            if (st.status == RDZV_RUNNING) {
                size_t m = check_round(kv, &st, e->entry.mod_revision);
                rounds++;
                if (n_seen < 8)
                    seen[n_seen++] = m;
            }
            rdzv_state_clear(&st);
        }
    }
    kv_events_free(ev, n);
    kv_close(kv);
    cr_log_info("%zu committed rounds checked", rounds);
    for (const size_t *w = want; *w; w++) {
        bool found = false;
        for (size_t i = 0; i < n_seen; i++)
            found |= seen[i] == *w;
        cr_assert(found, "no round of %zu members among the %zu committed", *w, rounds);
    }
}

Test(fleet, two_hundred_nodes_receive_o1_bytes_per_round)
{
    static char out[16384];
    int rc = sim(h.endpoints,
                 "--nodes 200 --procs 4 --ttl 2 --kill-one --kill-coordinator --timeout 120 "
                 "--run-id " RUN,
                 out, sizeof(out));
    cr_assert_eq(rc, 0, "rdzv-sim failed:\n%s", out);
    check_o1(out, 200);
    /* a lost node and a lost coordinator: the next round within the lease TTL + 2 s */
    cr_assert_leq(value(out, "kill_one_to_all_seen_ms"), 4000, "%s", out);
    cr_assert_leq(value(out, "kill_coordinator_to_all_seen_ms"), 4000, "%s", out);
    /* the join's round of 200, then one without the killed node, one without the coordinator */
    static const size_t want[] = {200, 199, 198, 0};
    check_every_round(want);
}
