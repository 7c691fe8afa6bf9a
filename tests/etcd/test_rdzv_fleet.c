// SPDX-License-Identifier: Apache-2.0
/*
 * The fleet-scale protocol on a real etcd: 200 simulated nodes (bench/rdzv_sim.c: each a real
 * rendezvous session with its own lease, node key, watches and assignment) rendezvous, one is
 * killed, then the coordinator. What each node received and wrote is counted by its session
 * (rdzv_stats: every key and value a listing, get or watch event brought) and must not grow with
 * N: a node that does not coordinate receives under 2 KiB per round (a member list would be
 * ~12 KiB at 200 nodes) and writes nothing; the coordinator writes ⌈N/32⌉ + 1 keys.
 * Mutation checked: every session mirroring the whole run (`s->full = true` in
 * rdzv_session_create) -> the per-round byte bound fails.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "etcd_harness.h"

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

Test(fleet, two_hundred_nodes_receive_o1_bytes_per_round)
{
    static char out[16384];
    int rc = sim(h.endpoints,
                 "--nodes 200 --procs 4 --ttl 2 --kill-one --kill-coordinator --timeout 120", out,
                 sizeof(out));
    cr_assert_eq(rc, 0, "rdzv-sim failed:\n%s", out);
    check_o1(out, 200);
    /* a lost node and a lost coordinator: the next round within the lease TTL + 2 s */
    cr_assert_leq(value(out, "kill_one_to_all_seen_ms"), 4000, "%s", out);
    cr_assert_leq(value(out, "kill_coordinator_to_all_seen_ms"), 4000, "%s", out);
}
