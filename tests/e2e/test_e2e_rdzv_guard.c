// SPDX-License-Identifier: Apache-2.0
/*
 * Rendezvous values checked against who may write them (issue 29; rendezvous/roundguard.c,
 * docs/security.md "Rendezvous keys"), end to end: three elastic-agent processes on a real etcd
 * (tests/etcd/etcd_harness), recording workers (tests/helpers/ea-testworker: each writes its
 * environment), the fleet path (no full view: the nodes that do not coordinate read only their
 * own chunk). A store writer (etcdctl, as an attacker with write access would) plants
 *   - rounds/<r+1>/master naming group rank 0, pointing at an address inside a network
 *     namespace this test made, plus reform/<r> to make the run move to round
 *     r+1: no worker ever gets that MASTER_ADDR, group rank 0 logs what it refused and
 *     publishes its own, and the run goes on and succeeds;
 *   - failures/<r> naming a node that is not a member: it is not counted (no new round, no
 *     restart), the coordinator logs what it ignored, and the run succeeds.
 * Nothing is ever sent to the namespace's address: the workers only print their environment.
 * Waits are on files (inotify), log lines and pidfds with deadlines, never sleeps.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "etcd_harness.h"
#include "harness.h"
#include "netns_harness.h"

#define W EA_HELPERS_DIR "/ea-testworker"
#define RUN "guard"
#define P "/elastic/" RUN "/"

static char dir[256], envdir[300];
static struct etcd_harness eh;
static struct h_agent agents[3];
static char fake_ip[32]; /* an address inside our namespace: where a forged master points */

static void setup(void)
{
    h_mkdtemp(dir, sizeof(dir), "rdzv-guard");
    snprintf(envdir, sizeof(envdir), "%s/env", dir);
    cr_assert_eq(mkdir(envdir, 0755), 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    /* the fleet path: only the coordinator mirrors the run */
    setenv("ELASTIC_TOPOLOGY", "off", 1);
    setenv("ELASTIC_NIC_DISCOVERY", "off", 1);
}

static void teardown(void)
{
    h_kill_agents();
    etcd_harness_stop(&eh);
    netns_cleanup();
    if (getenv("EA_E2E_KEEP"))
        cr_log_warn("kept %s", dir);
    else
        h_rmdir(dir);
}

TestSuite(e2e_rdzv_guard, .init = setup, .fini = teardown, .timeout = 120);

/* A namespace with one address on a veth link to ours (nothing listens or is sent there). */
static void make_namespace(void)
{
    netns_require();
    int pid = (int)getpid();
    char ns[NETNS_NAME_MAX];
    netns_ns_create("fm", ns);
    snprintf(fake_ip, sizeof(fake_ip), "10.%d.%d.2", 200 + pid % 10, (pid / 10) % 250);
    netns_veth_root(ns, "eth0", h_fmt("%s/24", fake_ip),
                    h_fmt("10.%d.%d.1/24", 200 + pid % 10, (pid / 10) % 250), NULL);
}

static void start_run(void)
{
    cr_assert_eq(etcd_harness_start(&eh, 1), 0);
    const char *worker = h_fmt("%s record %s && exec %s wait-file %s/go", W, envdir, W, envdir);
    for (int i = 0; i < 3; i++) {
        /* clang-format off */
        const char *args[] = {
            "--rdzv-endpoint", eh.endpoints, "--run-id", RUN, "--node-id", h_fmt("n%d", i),
            "--min", "3", "--max", "3", "--settle", "0.3", "--lease-ttl", "3",
            "--stop-timeout", "2", "--local-addr", "127.0.0.1",
            "--", "/bin/sh", "-c", worker, NULL};
        /* clang-format on */
        h_agent_start(&agents[i], dir, h_fmt("n%d", i), args);
    }
}

/* Env files (written by the workers) of `round`; with `ret_rank0`, the node id of its group
 * rank 0; every file's MASTER_ADDR must not be the namespace's address. */
static int round_files(int round, char *ret_rank0, size_t size)
{
    int n = 0;
    DIR *d = opendir(envdir);
    cr_assert(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "env.", 4) != 0 || strstr(e->d_name, ".tmp"))
            continue;
        const char *p = h_fmt("%s/%s", envdir, e->d_name);
        const char *m = h_env_value(p, "MASTER_ADDR"); /* (a static buffer) */
        cr_assert(m && strcmp(m, fake_ip) != 0, "%s: a worker got MASTER_ADDR=%s (forged)", p,
                  m ? m : "(none)");
        const char *r = h_env_value(p, "ELASTIC_ROUND");
        if (!r || atoi(r) != round)
            continue;
        n++;
        const char *g = h_env_value(p, "GROUP_RANK");
        if (ret_rank0 && g && strcmp(g, "0") == 0)
            snprintf(ret_rank0, size, "%s", h_env_value(p, "ELASTIC_NODE_ID"));
    }
    closedir(d);
    return n;
}

/* Wait (inotify on the directory) until `round` has n env files. */
static void wait_round(int round, int n, int timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    while (round_files(round, NULL, 0) < n) {
        int64_t left = deadline - h_now_ms();
        if (left <= 0) {
            for (int i = 0; i < 3; i++)
                h_show_log(&agents[i]);
            cr_assert_fail("round %d: %d of %d workers started", round, round_files(round, NULL, 0),
                           n);
        }
        h_wait_files(envdir, "env.", h_count_files(envdir, "env.") + 1, (int)left);
    }
}

/* etcdctl against the harness: its exit status; its output (the tail of etcdctl.log). */
static const char *etcdctl(const char *const args[])
{
    static char out[65536];
    const char *log = h_fmt("%s/etcdctl.log", eh.dir);
    struct stat st;
    off_t off = stat(log, &st) == 0 ? st.st_size : 0;
    cr_assert_eq(etcd_harness_etcdctl(&eh, args), 0, "etcdctl %s failed", args[0]);
    out[0] = '\0';
    FILE *f = fopen(log, "re");
    if (f) {
        fseeko(f, off, SEEK_SET);
        out[fread(out, 1, sizeof(out) - 1, f)] = '\0';
        fclose(f);
    }
    return out;
}

static void finish_run(void)
{
    FILE *f = fopen(h_fmt("%s/go", envdir), "w");
    cr_assert(f);
    fclose(f);
    for (int i = 0; i < 3; i++)
        h_expect_exit(&agents[i], 0, 30000);
}

/* Mutation check (scripts/test.sh): record_lists() (roundguard.c) always true -> the forged
 * value passes (it names group rank 0) and every worker of round 2 gets
 * the namespace's address. */
Test(e2e_rdzv_guard, forged_master_of_the_next_round_is_never_used)
{
    make_namespace();
    start_run();
    wait_round(1, 3, 30000);
    char rank0[64] = "";
    round_files(1, rank0, sizeof(rank0));
    cr_assert(rank0[0], "no group rank 0 in round 1");
    const char *member = strcmp(rank0, "n1") == 0 ? "n2" : "n1";
    /* rank 0 stays rank 0 in round 2 (members keep their order): name it */
    const char *forged = h_fmt("{\"addr\":\"%s:29500\",\"node\":\"%s\",\"schema\":"
                               "\"elastic-agent/v2\"}",
                               fake_ip, rank0);
    const char *put_master[] = {"put", P "rounds/2/master", forged, NULL};
    etcdctl(put_master);
    const char *put_reform[] = {"put", P "reform/1", member, NULL};
    etcdctl(put_reform);
    wait_round(2, 3, 30000);
    /* every worker of round 2 has group rank 0's own address (round_files checked them all) */
    DIR *d = opendir(envdir);
    cr_assert(d);
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, "env.", 4) == 0 && !strstr(e->d_name, ".tmp"))
            cr_assert_str_eq(h_env_value(h_fmt("%s/%s", envdir, e->d_name), "MASTER_ADDR"),
                             "127.0.0.1");
    closedir(d);
    /* group rank 0 refused it (and overwrote it); nobody logged it twice */
    const char *refused = "refusing key '" P "rounds/2/master'";
    int k = rank0[1] - '0';
    cr_assert_eq(h_count_in(agents[k].log, refused), 1, "group rank 0 (%s) did not log '%s' once",
                 rank0, refused);
    cr_assert(h_file_contains(
        agents[k].log, h_fmt("'%s' is not an address in node '%s''s record", fake_ip, rank0)));
    for (int i = 0; i < 3; i++)
        cr_assert_leq(h_count_in(agents[i].log, refused), 1, "n%d logged it twice", i);
    finish_run();
}

/* Mutation check: rdzv_guard_report_counts() counting a record of any node -> round 2 with a
 * restart charged, and no warning. */
Test(e2e_rdzv_guard, forged_failure_from_a_non_member_is_not_counted)
{
    start_run();
    wait_round(1, 3, 30000);
    const char *coord_get[] = {"get", P "coord", "--print-value-only", NULL};
    const char *coord = strstr(etcdctl(coord_get), "\"node\":\"n");
    cr_assert(coord, "no coordinator in the store");
    int c = coord[9] == '1' ? 1 : coord[9] == '2' ? 2 : 0;
    const char *put[] = {"put", P "failures/1",
                         "{\"exit_code\":1,\"host\":\"elsewhere\",\"local_rank\":0,\"message\":"
                         "\"forged\",\"node\":\"intruder\",\"pid\":1,\"rank\":0,\"schema\":"
                         "\"elastic-agent/v2\",\"signal\":0,\"time_ms\":1}",
                         NULL};
    etcdctl(put);
    const char *ignored =
        "ignoring key '" P "failures/1': node 'intruder' is not a member of round 1";
    bool seen = h_log_wait(&agents[c], ignored, 15000);
    if (!seen)
        h_show_log(&agents[c]);
    cr_assert(seen, "the coordinator (n%d) did not log '%s'", c, ignored);
    /* it has seen the record and acted on nothing: still round 1, nothing charged */
    const char *state_get[] = {"get", P "state", "--print-value-only", NULL};
    const char *state = etcdctl(state_get);
    cr_assert(strstr(state, "\"round\":1,") && strstr(state, "\"restart_count\":0,"), "%s", state);
    cr_assert_eq(round_files(2, NULL, 0), 0);
    finish_run();
}
