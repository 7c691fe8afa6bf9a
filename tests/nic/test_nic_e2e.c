// SPDX-License-Identifier: Apache-2.0
/*
 * Issue #11 end to end: real agents, each in its own network namespace and UTS namespace (its
 * own host name: the agent takes its host from gethostname(), and `ip netns exec` alone would not
 * change it — netns_spawn's .hostname gives each "host" a fresh UTS namespace). The file backend
 * works across namespaces because the filesystem is shared.
 *
 *   common_interface     4 hosts, two links each, only eth0's subnet connects them all: NIC
 *                        discovery picks exactly eth0 and workers get it (and the topology file)
 *   discovery_off        the same hosts with --nic-discovery off: nothing exported (baseline for
 *                        the latency figure)
 *   no_common_interface  a host reachable on nothing: the round fails, exit 4, message says what
 *                        each node reached
 *   host_order_restart   --rank-order host: ranks follow host names and a restarted node gets its
 *                        old group rank back
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "netns_harness.h"

#define W EA_HELPERS_DIR "/ea-testworker"

static char dir[256], state[300], envdir[300];

static void setup(void)
{
    netns_require();
    h_suite_dirs("nic", dir, state, envdir);
}

static void teardown(void)
{
    netns_cleanup(); /* SIGKILLs the agents still running, removes namespaces and bridges */
    if (dir[0]) {
        if (getenv("EA_E2E_KEEP"))
            cr_log_warn("kept %s", dir);
        else
            h_rmdir(dir);
    }
}

TestSuite(nic, .init = setup, .fini = teardown, .timeout = 90);

/* Agent `name` inside namespace ns (NULL: root) with host name `host`. */
static void start_in(struct h_agent *a, const char *ns, const char *host, const char *name,
                     const char *const *extra, const char *const *cmd)
{
    const char *argv[64] = {EA_AGENT_BIN,
                            "--run-id",
                            "nic",
                            "--node-id",
                            name,
                            "--settle",
                            "1",
                            "--stop-timeout",
                            "2",
                            "--lease-ttl",
                            "1",
                            "--state-dir",
                            state,
                            "--events",
                            h_fmt("%s/%s.events", dir, name)};
    int n = 15;
    for (int i = 0; extra && extra[i]; i++)
        argv[n++] = extra[i];
    argv[n++] = "--";
    for (int i = 0; cmd[i]; i++)
        argv[n++] = cmd[i];
    argv[n] = NULL;
    memset(a, 0, sizeof(*a));
    snprintf(a->log, sizeof(a->log), "%s/%s.log", dir, name);
    snprintf(a->out, sizeof(a->out), "%s/%s.out", dir, name);
    a->pid = netns_spawn(
        &(struct netns_spawn_opts){
            .ns = ns, .hostname = host, .stdout_path = a->out, .stderr_path = a->log},
        argv);
    a->pidfd = (int)syscall(SYS_pidfd_open, a->pid, 0);
    cr_assert_geq(a->pidfd, 0, "pidfd_open: %s", strerror(errno));
}

static void expect_exit(struct h_agent *a, int code, int timeout_ms)
{
    pid_t pid = a->pid;
    h_expect_exit(a, code, timeout_ms);
    netns_forget(pid);
}

/* The hosts' links meet on bridges in one "switch" namespace per test, away from the host
 * firewall's bridge filtering (see netns_bridge_in). */
static char sw[NETNS_NAME_MAX];
static unsigned n_bridges;

/* A fresh bridge in the switch namespace; its name in ret_name. */
static void bridge(char *ret_name)
{
    if (!sw[0])
        netns_ns_create("sw", sw);
    snprintf(ret_name, NETNS_NAME_MAX, "br%u", n_bridges++);
    netns_bridge_in(sw, ret_name);
}

/* Interface `ifname` (cidr) of namespace ns, plugged into `br`. */
static void attach(const char *ns, const char *ifname, const char *cidr, const char *br)
{
    netns_veth_bridge_in(ns, ifname, cidr, sw, br);
}

/* Four "hosts" h0..h3: eth0 on one bridge (10.77.0.0/24: everybody reaches everybody), eth1 on
 * two bridges that each join only two hosts (h0-h1, h2-h3): the ring h0->h1->h2->h3->h0 reaches
 * eth1 on two of its four hops, so the only common interface is eth0. */
static void four_hosts(char ns[4][NETNS_NAME_MAX])
{
    char all[NETNS_NAME_MAX], pair[2][NETNS_NAME_MAX];
    bridge(all);
    bridge(pair[0]);
    bridge(pair[1]);
    for (int i = 0; i < 4; i++) {
        netns_ns_create(h_fmt("h%d", i), ns[i]);
        attach(ns[i], "eth0", h_fmt("10.77.0.%d/24", i + 1), all);
        attach(ns[i], "eth1", h_fmt("10.78.%d.%d/24", i / 2, i % 2 + 1), pair[i / 2]);
    }
}

/* Milliseconds from this agent's round_committed event to its workers_started event (the wall
 * clock times the agent wrote, ms resolution); -1 when either is missing. */
static int64_t commit_to_start_ms(const char *name)
{
    FILE *f = fopen(h_fmt("%s/%s.events", dir, name), "r");
    if (!f)
        return -1;
    char line[4096];
    int64_t committed = -1, started = -1;
    while (fgets(line, sizeof(line), f)) {
        json_t *j = json_loads(line, 0, NULL);
        const char *ev = json_string_value(json_object_get(j, "event"));
        const char *t = json_string_value(json_object_get(j, "time"));
        int hh, mm, ss, ms;
        if (ev && t && strlen(t) >= 23 && sscanf(t + 11, "%d:%d:%d.%d", &hh, &mm, &ss, &ms) == 4) {
            int64_t v = ((int64_t)(hh * 60 + mm) * 60 + ss) * 1000 + ms;
            if (strcmp(ev, "round_committed") == 0 && committed < 0)
                committed = v;
            else if (strcmp(ev, "workers_started") == 0 && started < 0)
                started = v;
        }
        json_decref(j);
    }
    fclose(f);
    return committed >= 0 && started >= 0 ? started - committed : -1;
}

/* Value of NAME in the env file of global rank `rank` written in round `round` (0: any round;
 * ea-testworker record writes env.<RANK>.<pid>). */
static const char *rank_env_in(int rank, int round, const char *name)
{
    char path[600] = "", prefix[32];
    snprintf(prefix, sizeof(prefix), "env.%d.", rank);
    DIR *d = opendir(envdir);
    cr_assert_not_null(d);
    for (struct dirent *e; !path[0] && (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", envdir, e->d_name);
        if (round && !h_file_contains(path, h_fmt("\nELASTIC_ROUND=%d\n", round)))
            path[0] = '\0';
    }
    closedir(d);
    cr_assert(path[0], "no env file for rank %d (round %d)", rank, round);
    return h_env_value(path, name);
}

static const char *rank_env(int rank, const char *name)
{
    return rank_env_in(rank, 0, name);
}

/* The topology file a worker copied: every rank once, ring closes, tree valid, hosts in order. */
static void check_topology(const char *path, int world, const char *const *hosts, int nproc)
{
    json_error_t jerr;
    json_t *j = json_load_file(path, 0, &jerr);
    cr_assert_not_null(j, "%s: %s", path, jerr.text);
    json_t *hs = json_object_get(j, "hosts"), *ranks = json_object_get(j, "ranks");
    cr_assert_eq(json_integer_value(json_object_get(j, "world_size")), world);
    cr_assert_eq((int)json_array_size(ranks), world);
    for (size_t i = 0; i < json_array_size(hs); i++)
        cr_assert_str_eq(json_string_value(json_array_get(hs, i)), hosts[i]);
    int seen[64] = {0}, parents = 0, r = 0;
    for (int i = 0; i < world; i++) {
        json_t *e = json_array_get(ranks, (size_t)i);
        int rank = (int)json_integer_value(json_object_get(e, "rank"));
        cr_assert(rank >= 0 && rank < world && !seen[rank]++, "rank %d twice", rank);
        cr_assert_str_eq(json_string_value(json_object_get(e, "host")), hosts[rank / nproc]);
        cr_assert_eq(json_integer_value(json_object_get(e, "local_rank")), rank % nproc);
        int parent = (int)json_integer_value(json_object_get(e, "tree_parent"));
        parents += parent >= 0;
        if (parent >= 0) { /* our parent lists us as its child */
            json_t *pc = json_object_get(json_array_get(ranks, (size_t)parent), "tree_children");
            bool found = false;
            for (size_t k = 0; k < json_array_size(pc); k++)
                found = found || json_integer_value(json_array_get(pc, k)) == rank;
            cr_assert(found, "rank %d not a child of its parent %d", rank, parent);
        }
    }
    cr_assert_eq(parents, world - 1, "a tree has exactly one root");
    for (int step = 0; step < world; step++) /* the ring closes after visiting all */
        r = (int)json_integer_value(json_object_get(json_array_get(ranks, (size_t)r), "ring_next"));
    cr_assert_eq(r, 0);
    json_decref(j);
}

Test(nic, common_interface)
{
    char ns[4][NETNS_NAME_MAX];
    four_hosts(ns);
    struct h_agent a[4];
    const char *cmd[] = {"/bin/sh", "-c",
                         h_fmt("cp \"$ELASTIC_TOPOLOGY_FILE\" %s/topo.$RANK.json && exec %s record "
                               "%s",
                               dir, W, envdir),
                         NULL};
    const char *extra[] = {"--nnodes", "4",           "--nproc-per-node", "2", "--rank-order",
                           "host",     "--env-style", "torch,horovod",    NULL};
    for (int i = 3; i >= 0; i--) /* arrival order h3..h0; ranks follow host names */
        start_in(&a[i], ns[i], h_fmt("h%d", i), h_fmt("n%d", i), extra, cmd);
    for (int i = 0; i < 4; i++)
        expect_exit(&a[i], 0, 60000);
    cr_assert(h_file_contains(a[0].log, "NIC discovery: common interface(s) eth0, master address "
                                        "10.77.0.1"),
              "no discovery result in the log");
    for (int rank = 0; rank < 8; rank++) {
        cr_assert_str_eq(rank_env(rank, "ELASTIC_IFACES"), "eth0");
        cr_assert_str_eq(rank_env(rank, "NCCL_SOCKET_IFNAME"), "eth0");
        cr_assert_str_eq(rank_env(rank, "GLOO_SOCKET_IFNAME"), "eth0");
        cr_assert_str_eq(rank_env(rank, "MASTER_ADDR"), "10.77.0.1", "rank %d", rank);
        cr_assert_str_eq(rank_env(rank, "HOROVOD_HOSTNAME"), h_fmt("h%d", rank / 2));
        cr_assert_str_eq(rank_env(rank, "HOROVOD_CROSS_RANK"), h_fmt("%d", rank / 2));
        cr_assert_str_eq(rank_env(rank, "GROUP_RANK"), h_fmt("%d", rank / 2));
    }
    const char *hosts[] = {"h0", "h1", "h2", "h3"};
    check_topology(h_fmt("%s/topo.5.json", dir), 8, hosts, 2);
    for (int i = 0; i < 4; i++)
        cr_log_info("NIC discovery on: n%d round committed -> workers started %lld ms", i,
                    (long long)commit_to_start_ms(h_fmt("n%d", i)));
}

Test(nic, discovery_off)
{
    char ns[4][NETNS_NAME_MAX];
    four_hosts(ns);
    struct h_agent a[4];
    const char *cmd[] = {"/bin/sh", "-c",
                         h_fmt("cp \"$ELASTIC_TOPOLOGY_FILE\" %s/topo.$RANK.json && exec %s record "
                               "%s",
                               dir, W, envdir),
                         NULL};
    const char *extra[] = {"--nnodes",
                           "4",
                           "--nproc-per-node",
                           "2",
                           "--rank-order",
                           "host",
                           "--env-style",
                           "torch,horovod",
                           "--nic-discovery",
                           "off",
                           NULL};
    for (int i = 3; i >= 0; i--)
        start_in(&a[i], ns[i], h_fmt("h%d", i), h_fmt("n%d", i), extra, cmd);
    for (int i = 0; i < 4; i++)
        expect_exit(&a[i], 0, 60000);
    for (int rank = 0; rank < 8; rank++) {
        cr_assert_null(rank_env(rank, "ELASTIC_IFACES"));
        cr_assert_null(rank_env(rank, "NCCL_SOCKET_IFNAME"));
        /* the file backend assumes one host: the node address is loopback */
        cr_assert_str_eq(rank_env(rank, "MASTER_ADDR"), "127.0.0.1");
    }
    cr_assert(!h_file_contains(a[0].log, "NIC discovery"));
    for (int i = 0; i < 4; i++)
        cr_log_info("NIC discovery off: n%d round committed -> workers started %lld ms", i,
                    (long long)commit_to_start_ms(h_fmt("n%d", i)));
}

Test(nic, no_common_interface)
{
    char ns[3][NETNS_NAME_MAX], lan[NETNS_NAME_MAX], island[NETNS_NAME_MAX];
    bridge(lan);
    bridge(island);
    for (int i = 0; i < 3; i++)
        netns_ns_create(h_fmt("x%d", i), ns[i]);
    attach(ns[0], "eth0", "10.77.0.1/24", lan);
    attach(ns[1], "eth0", "10.77.0.2/24", lan);
    attach(ns[2], "eth0", "10.79.0.3/24", island); /* nobody else's subnet */
    struct h_agent a[3];
    const char *cmd[] = {W, "record", envdir, NULL};
    const char *extra[] = {"--nnodes", "3", "--rank-order", "host", NULL};
    for (int i = 0; i < 3; i++)
        start_in(&a[i], ns[i], h_fmt("x%d", i), h_fmt("n%d", i), extra, cmd);
    for (int i = 0; i < 3; i++)
        expect_exit(&a[i], 4, 30000);
    /* whoever saw every probe result explains (usually all); the run is closed for the rest */
    int explained = 0;
    for (int i = 0; i < 3; i++) {
        bool why = h_file_contains(a[i].log, "no network interface is common to all 3 nodes");
        explained += why;
        if (why)
            cr_assert(h_file_contains(a[i].log, "n0 (x0) -> n1: eth0; n1 (x1) -> n2: nothing; "
                                                "n2 (x2) -> n0: nothing"),
                      "n%d did not list what each node reached", i);
        else
            cr_assert(h_file_contains(a[i].log, "was closed"), "n%d: no reason to exit", i);
    }
    cr_assert_geq(explained, 1);
    cr_assert_eq(h_count_files(envdir, "env."), 0, "workers started without a common interface");
}

/* --iface naming an interface this host does not have: a usage error before joining. */
Test(nic, unknown_iface_is_usage_error)
{
    char ns[NETNS_NAME_MAX];
    netns_ns_create("u0", ns);
    struct h_agent a;
    const char *cmd[] = {W, "record", envdir, NULL};
    const char *extra[] = {"--nic-discovery", "on", "--iface", "lo,nosuch0", NULL};
    start_in(&a, ns, "u0", "n0", extra, cmd);
    expect_exit(&a, 2, 20000);
    cr_assert(h_file_contains(a.log, "--iface: no interface 'nosuch0' with an address on this "
                                     "host (have: lo)"));
    cr_assert_eq(h_count_files(envdir, "env."), 0);
}

/* A worker failure restarts the round with the same members: no new probing, same result. */
Test(nic, no_reprobe_without_membership_change)
{
    char ns[2][NETNS_NAME_MAX], lan[NETNS_NAME_MAX];
    bridge(lan);
    struct h_agent a[2];
    const char *cmd[] = {W, "fail-once", envdir, "3", NULL};
    const char *extra[] = {"--nnodes", "2", "--max-restarts", "1", NULL};
    for (int i = 0; i < 2; i++) {
        netns_ns_create(h_fmt("r%d", i), ns[i]);
        attach(ns[i], "eth0", h_fmt("10.77.0.%d/24", i + 1), lan);
        start_in(&a[i], ns[i], h_fmt("r%d", i), h_fmt("n%d", i), extra, cmd);
    }
    for (int i = 0; i < 2; i++)
        expect_exit(&a[i], 0, 60000);
    for (int rank = 0; rank < 2; rank++) {
        cr_assert_str_eq(rank_env_in(rank, 2, "ELASTIC_IFACES"), "eth0");
        cr_assert_str_eq(rank_env_in(rank, 2, "TORCHELASTIC_RESTART_COUNT"), "1");
    }
    for (int i = 0; i < 2; i++) {
        cr_assert(h_file_contains(a[i].log, "round 1: NIC discovery: common interface(s) eth0"));
        cr_assert(!h_file_contains(a[i].log, "round 2: NIC discovery"), "n%d probed again", i);
    }
}

/* Value of NAME in the env file written for node `node` in round `round` (see the worker). */
static const char *round_env(int round, const char *node, const char *name)
{
    return h_env_value(h_fmt("%s/env.%d.%s", envdir, round, node), name);
}

Test(nic, host_order_restart)
{
    /* three hosts on one bridge; NIC discovery (auto: on, the hosts differ) runs again for
     * every membership change: rounds 1, 2 (hb lost) and 3 (hb back, a new agent process) */
    const char *node[] = {"n-c", "n-a", "n-b"}, *host[] = {"hc", "ha", "hb"};
    char ns[3][NETNS_NAME_MAX], lan[NETNS_NAME_MAX];
    bridge(lan);
    for (int i = 0; i < 3; i++) {
        netns_ns_create(host[i], ns[i]);
        attach(ns[i], "eth0", h_fmt("10.77.0.%d/24", i + 1), lan);
    }
    const char *cmd[] = {"/bin/sh", "-c",
                         h_fmt("env > %s/.e.$$ && mv %s/.e.$$ %s/env.$ELASTIC_ROUND."
                               "$ELASTIC_NODE_ID; exec %s wait-file %s/go",
                               envdir, envdir, envdir, W, dir),
                         NULL};
    const char *extra[] = {"--nnodes", "2:3", "--rank-order", "host", NULL};
    struct h_agent a[3], again;
    for (int i = 0; i < 3; i++) /* arrival order hc, ha, hb */
        start_in(&a[i], ns[i], host[i], node[i], extra, cmd);
    cr_assert_eq(h_wait_files(envdir, "env.1.", 3, 30000), 3);
    cr_assert_str_eq(round_env(1, "n-a", "GROUP_RANK"), "0");
    cr_assert_str_eq(round_env(1, "n-b", "GROUP_RANK"), "1");
    cr_assert_str_eq(round_env(1, "n-c", "GROUP_RANK"), "2");
    /* host hb's agent dies; the others go on without it, then it comes back */
    h_agent_signal(&a[2], SIGKILL);
    expect_exit(&a[2], 128 + SIGKILL, 5000);
    cr_assert_eq(h_wait_files(envdir, "env.2.", 2, 30000), 2);
    cr_assert_str_eq(round_env(2, "n-a", "GROUP_RANK"), "0");
    cr_assert_str_eq(round_env(2, "n-c", "GROUP_RANK"), "1");
    start_in(&again, ns[2], "hb", "n-b", extra, cmd);
    cr_assert_eq(h_wait_files(envdir, "env.3.", 3, 30000), 3);
    cr_assert_str_eq(round_env(3, "n-a", "GROUP_RANK"), "0");
    cr_assert_str_eq(round_env(3, "n-b", "GROUP_RANK"), "1", "the restarted node lost its rank");
    cr_assert_str_eq(round_env(3, "n-c", "GROUP_RANK"), "2");
    cr_assert_str_eq(round_env(3, "n-b", "RANK"), "1");
    cr_assert_str_eq(round_env(3, "n-b", "ELASTIC_IFACES"), "eth0");
    cr_assert_str_eq(round_env(3, "n-c", "MASTER_ADDR"), "10.77.0.2"); /* ha's eth0 */
    for (int r = 1; r <= 3; r++)
        cr_assert(h_file_contains(a[1].log, h_fmt("round %d: NIC discovery: common interface(s) "
                                                  "eth0",
                                                  r)),
                  "n-a did not discover again in round %d", r);
    FILE *go = fopen(h_fmt("%s/go", dir), "w");
    cr_assert_not_null(go);
    fclose(go);
    expect_exit(&a[0], 0, 30000);
    expect_exit(&a[1], 0, 30000);
    expect_exit(&again, 0, 30000);
}
