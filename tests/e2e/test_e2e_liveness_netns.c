// SPDX-License-Identifier: Apache-2.0
/*
 * The liveness ring when a node's network goes away (issue 31): four "hosts", each agent in its
 * own network namespace on one bridge, the file backend (the filesystem is shared, so the cut
 * node still reaches the store: only its peers are gone). Its link cut at the switch (its own
 * interface stays up, so its connects time out: evidence, not a local error), the others' next
 * round starts within seconds, not after the 10 s lease; the cut node, which still runs, finds its
 * lease revoked at its next renewal and stops its workers (the gap docs/protocol.md names: it is
 * measured and bounded here).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"
#include "netns_harness.h"

#define W EA_HELPERS_DIR "/ea-testworker"
#define N 4

static char dir[256], state[300], envdir[300];
static char sw[NETNS_NAME_MAX], ns[N][NETNS_NAME_MAX];
static struct h_agent a[N];

static void setup(void)
{
    netns_require();
    h_suite_dirs("livens", dir, state, envdir);
}

static void teardown(void)
{
    netns_cleanup(); /* SIGKILLs the agents still running, removes namespaces and bridges */
    if (getenv("EA_E2E_KEEP"))
        cr_log_warn("kept %s", dir);
    else
        h_rmdir(dir);
}

TestSuite(liveness_netns, .init = setup, .fini = teardown, .timeout = 120);

static const char *addr_of[N]; /* --local-addr; NULL: 10.79.0.<i+1> */

static void start_in(int i)
{
    const char *cmd = h_fmt("echo $$ > %s/pid.$ELASTIC_NODE_ID.$ELASTIC_ROUND; %s record %s && "
                            "exec %s wait-file %s/go",
                            envdir, W, envdir, W, envdir);
    const char *argv[] = {EA_AGENT_BIN,
                          "--run-id",
                          "cut",
                          "--node-id",
                          h_fmt("n%d", i),
                          "--min",
                          "2",
                          "--max",
                          h_fmt("%d", N),
                          "--settle",
                          "1",
                          "--stop-timeout",
                          "2",
                          "--lease-ttl",
                          "10",
                          "--state-dir",
                          state,
                          "--local-addr",
                          addr_of[i] ? addr_of[i] : h_fmt("10.79.0.%d", i + 1),
                          "--nic-discovery",
                          "off",
                          "--",
                          "/bin/sh",
                          "-c",
                          cmd,
                          NULL};
    memset(&a[i], 0, sizeof(a[i]));
    snprintf(a[i].log, sizeof(a[i].log), "%s/n%d.log", dir, i);
    snprintf(a[i].out, sizeof(a[i].out), "%s/n%d.out", dir, i);
    a[i].pid = netns_spawn(&(struct netns_spawn_opts){.ns = ns[i],
                                                      .hostname = h_fmt("host%d", i),
                                                      .stdout_path = a[i].out,
                                                      .stderr_path = a[i].log},
                           argv);
    a[i].pidfd = (int)syscall(SYS_pidfd_open, a[i].pid, 0);
    cr_assert_geq(a[i].pidfd, 0, "pidfd_open: %s", strerror(errno));
}

/* Four hosts on one bridge, n0 (the coordinator: it joins first) to n3, all in round 1. */
static void four_hosts_in_round_1(void)
{
    char br[NETNS_NAME_MAX] = "br0";
    netns_ns_create("sw", sw);
    netns_bridge_in(sw, br);
    for (int i = 0; i < N; i++) {
        netns_ns_create(h_fmt("h%d", i), ns[i]);
        netns_veth_bridge_in(ns[i], "eth0", h_fmt("10.79.0.%d/24", i + 1), sw, br);
    }
    start_in(0);
    cr_assert(h_log_wait(&a[0], "joined run", 20000), "n0 joins (and coordinates)");
    for (int i = 1; i < N; i++)
        start_in(i);
    for (int i = 0; i < N; i++)
        cr_assert(h_log_wait(&a[i], "round 1 ", 30000), "n%d runs round 1", i);
    cr_assert_eq(h_wait_files(envdir, "pid.", N, 10000), N);
}

/* The others start round `round` within 5 s of t0 (all but `skip`): the time it took. */
static int64_t wait_others(int skip, int round, int64_t t0)
{
    for (int i = 0; i < N; i++) {
        if (i == skip)
            continue;
        int left = (int)(t0 + 5000 - h_now_ms());
        bool ok = h_log_wait(&a[i], h_fmt("round %d ", round), left > 0 ? left : 0);
        if (!ok)
            h_show_log(&a[i]);
        cr_assert(ok, "n%d: no round %d within 5 s of the cut (lease TTL 10 s)", i, round);
    }
    return h_now_ms() - t0;
}

/* Two LANs on one switch: host i is on the first (10.79.0.<i+1>) when bit i of on0 is set, on
 * the second (10.79.1.<i+1>) when bit i of on1 is. */
static void two_lans(unsigned on0, unsigned on1)
{
    char br0[NETNS_NAME_MAX] = "br0", br1[NETNS_NAME_MAX] = "br1";
    netns_ns_create("sw", sw);
    netns_bridge_in(sw, br0);
    netns_bridge_in(sw, br1);
    for (int i = 0; i < N; i++) {
        netns_ns_create(h_fmt("h%d", i), ns[i]);
        if (on0 & (1u << i))
            netns_veth_bridge_in(ns[i], "eth0", h_fmt("10.79.0.%d/24", i + 1), sw, br0);
        if (on1 & (1u << i))
            netns_veth_bridge_in(ns[i], "eth1", h_fmt("10.79.1.%d/24", i + 1), sw, br1);
    }
}

/* Start n0 to n3 one after another (newcomers are ranked by arrival: the ring is n0, n1, n2, n3;
 * n0 coordinates), with the addresses in addr_of, then forget those; all in round 1. */
static void start_one_by_one(void)
{
    for (int i = 0; i < N; i++) {
        start_in(i);
        cr_assert(h_log_wait(&a[i], "joined run", 20000), "n%d joins", i);
    }
    for (int i = 0; i < N; i++)
        addr_of[i] = NULL;
    for (int i = 0; i < N; i++)
        cr_assert(h_log_wait(&a[i], "round 1 ", 30000), "n%d runs round 1", i);
    cr_assert_eq(h_wait_files(envdir, "pid.", N, 10000), N);
}

/* Let the workers finish: every agent but `skip` (-1: none) ends its run with 0. */
static void release_all(int skip)
{
    FILE *f = fopen(h_fmt("%s/go", envdir), "w");
    cr_assert(f);
    fclose(f);
    for (int i = 0; i < N; i++) {
        if (i == skip)
            continue;
        pid_t pid = a[i].pid;
        h_expect_exit(&a[i], 0, 30000);
        netns_forget(pid);
    }
}

static int evictions(void)
{
    int revoked = 0;
    for (int i = 0; i < N; i++) {
        FILE *f = fopen(a[i].log, "r");
        char line[4096];
        while (f && fgets(line, sizeof(line), f))
            revoked += strstr(line, "its lease is revoked") != NULL;
        if (f)
            fclose(f);
    }
    return revoked;
}

Test(liveness_netns, a_cut_link_next_round_within_seconds)
{
    four_hosts_in_round_1();
    pid_t cut_worker = h_read_pid(h_fmt("%s/pid.n3.1", envdir));
    cr_assert_gt(cut_worker, 0);

    netns_port_set(ns[3], "eth0", false); /* at the switch: its packets are lost, not refused */
    int64_t t0 = h_now_ms();
    for (int i = 0; i < 3; i++) {
        int left = (int)(t0 + 5000 - h_now_ms());
        bool ok = h_log_wait(&a[i], "round 2 ", left > 0 ? left : 0);
        if (!ok)
            h_show_log(&a[i]);
        cr_assert(ok, "n%d: no round 2 within 5 s of the cut (lease TTL 10 s)", i);
    }
    int64_t took = h_now_ms() - t0;
    /* the cut node runs on: it learns of the revoke at its next renewal (TTL/3) */
    bool gone = h_pid_gone(cut_worker, 10000);
    int64_t gone_ms = h_now_ms() - t0;
    cr_log_info("link cut: every survivor's round 2 after %lld ms; the cut node's worker ended "
                "after %lld ms (lease TTL 10 s)",
                (long long)took, (long long)gone_ms);
    printf("liveness: link cut -> survivors' next round: %lld ms (cut node's worker gone after "
           "%lld ms)\n",
           (long long)took, (long long)gone_ms);
    cr_assert(gone, "the cut node's worker still ran 10 s after the cut");
    cr_assert(h_log_wait(&a[3], "lease lost", 10000), "the cut node found its lease revoked");
    /* A watcher confirming a suspicion of the coordinator itself would let the cut node, finding
     * everybody unreachable, evict the coordinator (the race decides: the mutation check is
     * one_cut_link_to_the_coordinator_evicts_nobody, which has none). */
    int revoked = 0;
    for (int i = 0; i < N; i++)
        revoked += h_file_contains(a[i].log, "its lease is revoked");
    cr_assert(h_file_contains(a[0].log, "round 2 "), "the coordinator is in round 2");
    cr_assert_not(h_file_contains(a[3].log, "its lease is revoked"),
                  "the cut node evicted somebody");
    cr_assert_eq(revoked, 1, "only the cut node was evicted");
    netns_port_set(ns[3], "eth0", true);
    release_all(3);
}

/* The coordinator cut off (it still reaches the store, like the file store here): it must not
 * evict the nodes it can no longer reach; a third member confirms its neighbours' suspicion of it
 * and it is the one evicted. (The coordinator confirming its own suspicions alone would evict its
 * neighbours if its probes timed out before its own eviction: a race here; the mutation check is
 * one_cut_link_to_the_coordinator_evicts_nobody.) */
Test(liveness_netns, a_cut_off_coordinator_evicts_nobody_and_is_evicted)
{
    four_hosts_in_round_1();
    netns_port_set(ns[0], "eth0", false);
    int64_t t0 = h_now_ms();
    int64_t took = wait_others(0, 2, t0);
    cr_log_info("the coordinator cut off: the others' round 2 after %lld ms", (long long)took);
    printf("liveness: coordinator cut off -> the others' next round: %lld ms\n", (long long)took);
    cr_assert(h_log_wait(&a[0], "lease lost", 10000), "the cut coordinator lost its lease");
    cr_assert_not(h_file_contains(a[0].log, "its lease is revoked"),
                  "the cut-off coordinator evicted a node it could not reach");
    cr_assert_eq(evictions(), 1, "only the coordinator was evicted");
    netns_port_set(ns[0], "eth0", true);
    release_all(0);
}

/*
 * One link cut, between the coordinator and a neighbour: n0, n2 and n3 share a second LAN, on
 * which n0 publishes its address, and n3's port on it is cut (the ring is n0, n1, n2, n3: n3 is
 * n0's predecessor and the only one that dials n0, besides probes). n3's link to n0 goes silent
 * at both ends. n0, the coordinator, suspects n3, but n3's other neighbour (n2) still hears it:
 * nobody backs that suspicion, and n0 must wait for it. n3 suspects the coordinator: the third
 * member, n2 (half the rank order away from the coordinator), probes n0 over the second LAN and
 * finds it alive. Nobody is evicted: two false
 * alarms, no round. Mutations: the coordinator confirming its own suspicions alone
 * (node_ring.c on_suspect) -> its probe of n3 times out and it evicts n3; a suspicion of the
 * coordinator confirmed by its watcher alone (suspect_coord) -> n3's probe of n0 times out and it
 * evicts the coordinator.
 */
Test(liveness_netns, one_cut_link_to_the_coordinator_evicts_nobody)
{
    two_lans(0xf, 0xf & ~(1u << 1));
    addr_of[0] = "10.79.1.1";
    start_one_by_one();
    netns_port_set(ns[3], "eth1", false);
    bool waits = h_log_wait(&a[0], "waiting for the other neighbour of 'n3'", 10000);
    bool answered = h_log_wait(&a[2], "node 'n0' answered a probe", 10000);
    if (!waits || !answered)
        for (int i = 0; i < N; i++)
            h_show_log(&a[i]);
    cr_assert(waits, "the coordinator did not wait for a second report of n3");
    cr_assert(answered, "the third member did not probe the coordinator and find it alive");
    /* a probe over the cut link times out within a second: give either mutant three */
    cr_assert_not(h_log_wait(&a[0], "its lease is revoked", 3000),
                  "the coordinator evicted n3 on its own word");
    cr_assert_eq(evictions(), 0, "a healthy node was evicted");
    for (int i = 0; i < N; i++)
        cr_assert_not(h_file_contains(a[i].log, "round 2 "), "n%d: a new round", i);
    netns_port_set(ns[3], "eth1", true);
    release_all(-1);
}

/*
 * A node that has no route to its peers (issue 31, chaos episode 18: agents in namespaces that
 * reach the store through a relay and have no default route): its connects fail at once with
 * ENETUNREACH, which says nothing of the peer. Two LANs: n0 (the coordinator) only on the second,
 * n2 only on the first, n1 and n3 on both; n0 and n3 publish their address on the second, n1 and
 * n2 on the first. So n0 can open no link (to n1), n1 suspects n0, which never linked, and the
 * third member that confirms a suspicion of the coordinator, n2, has no route to n0 either; n2
 * cannot link to n3, n3 suspects n2, and the coordinator n0 has no route to n2. Before the fix n0
 * suspected n1 ("unreachable"), n2 revoked the healthy coordinator's lease, and a coordinator n0
 * would revoke n2's. Mutations: ring.c's local-error checks in out_connect (n0 suspects n1) and
 * ring_probe, node_ring.c's on a third member's (n2 evicts n0) and a coordinator's probe.
 */
Test(liveness_netns, no_route_here_is_no_evidence_and_evicts_nobody)
{
    two_lans(0xf & ~1u, 0xf & ~(1u << 2));
    addr_of[0] = "10.79.1.1"; /* its peers reach it there: those on the second LAN */
    addr_of[3] = "10.79.1.4";
    start_one_by_one();
    /* n1 suspects n0 (it never linked); n2 confirms, and cannot send n0 a packet */
    bool seen = h_log_wait(&a[2], "could not probe node 'n0' from here", 15000);
    if (!seen)
        for (int i = 0; i < N; i++)
            h_show_log(&a[i]);
    cr_assert(seen, "n2 did not report its probe of n0 as no evidence");
    /* n3 suspects n2 (it never linked); the coordinator cannot send n2 a packet */
    cr_assert(h_log_wait(&a[0], "could not probe node 'n2' from here", 15000),
              "n0 did not report its probe of n2 as no evidence");
    cr_assert(h_log_wait(&a[0], "could not start from this node", 5000),
              "n0 logs that it has no route (once)");
    cr_assert_eq(evictions(), 0, "a node with no route evicted a healthy one");
    cr_assert_not(h_file_contains(a[0].log, "lost node 'n1'"),
                  "n0 suspected n1 on its own lack of a route");
    for (int i = 0; i < N; i++)
        cr_assert_not(h_file_contains(a[i].log, "round 2 "), "n%d: a new round: somebody left", i);
    release_all(-1);
}
