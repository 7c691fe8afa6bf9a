// SPDX-License-Identifier: Apache-2.0
/*
 * Agents on etcd's JSON gateway (issue #5), against a real etcd: a mixed fleet of gateway and
 * gRPC agents forms one run with unique ranks, and a run survives an etcd restart (the agents'
 * watch streams break, they re-list, re-watch and finish).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include "etcd_harness.h"
#include "harness.h"

#define W EA_HELPERS_DIR "/ea-testworker"

static char dir[256], envdir[300], http_ep[64];
static struct etcd_harness etcd;

static void setup(void)
{
    h_mkdtemp(dir, sizeof(dir), "gw");
    snprintf(envdir, sizeof(envdir), "%s/env", dir);
    cr_assert_eq(mkdir(envdir, 0755), 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    cr_assert_eq(etcd_harness_start(&etcd, 1), 0, "cannot start etcd");
    snprintf(http_ep, sizeof(http_ep), "http://%s", etcd.m[0].endpoint);
}

static void teardown(void)
{
    h_kill_agents(); /* whatever a failed assertion left running */
    etcd_harness_stop(&etcd);
    h_rmdir(dir);
}

TestSuite(gateway, .init = setup, .fini = teardown, .timeout = 120);

static void start(struct h_agent *a, const char *name, const char *endpoint, const char *min,
                  const char *const *cmd)
{
    const char *args[32] = {"--run-id", "gw", "--node-id", name, "--rdzv-endpoint", endpoint,
                            "--min", min, "--max", min, "--lease-ttl", "3",
                            "--stop-timeout", "2", "--"};
    int n = 15;
    for (int i = 0; cmd[i]; i++)
        args[n++] = cmd[i];
    args[n] = NULL;
    h_agent_start(a, dir, name, args);
}

Test(gateway, mixed_fleet_of_gateway_and_grpc_agents_gets_unique_ranks)
{
    struct h_agent a[8];
    const char *cmd[] = {W, "record", envdir, NULL};
    for (int i = 0; i < 8; i++)
        start(&a[i], h_fmt("n%d", i), i % 2 ? http_ep : etcd.endpoints, "8", cmd);
    for (int i = 0; i < 8; i++)
        h_expect_exit(&a[i], 0, 60000);
    cr_assert(h_file_contains(a[1].log, "(etcd-gateway backend)"));
    cr_assert(h_file_contains(a[0].log, "(etcd backend)"));
    unsigned seen = 0;
    DIR *d = opendir(envdir);
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, "env.", 4) == 0) {
            int rank = atoi(h_env_value(h_fmt("%s/%s", envdir, e->d_name), "RANK"));
            cr_assert_eq(seen & (1u << rank), 0, "rank %d twice", rank);
            seen |= 1u << rank;
        }
    closedir(d);
    cr_assert_eq(seen, 0xffu, "ranks 0..7 exactly once");
}

Test(gateway, run_survives_an_etcd_restart)
{
    struct h_agent a[2];
    const char *cmd[] = {"/bin/sh", "-c",
                         h_fmt("%s record %s && exec %s wait-file %s/go", W, envdir, W, envdir),
                         NULL};
    for (int i = 0; i < 2; i++)
        start(&a[i], h_fmt("n%d", i), http_ep, "2", cmd);
    for (int i = 0; i < 2; i++)
        cr_assert(h_log_wait(&a[i], "round 1 ", 30000));
    cr_assert_eq(etcd_harness_kill(&etcd, 0), 0);
    cr_assert_eq(etcd_harness_restart(&etcd, 0), 0);
    cr_assert_eq(etcd_harness_wait_healthy(&etcd, 0, 20000), 0);
    /* the agents must notice the broken watch, re-list and carry on: prove they still react to
     * the store by letting the run finish, which needs the coordinator to see both done keys */
    FILE *f = fopen(h_fmt("%s/go", envdir), "w");
    cr_assert(f);
    fclose(f);
    for (int i = 0; i < 2; i++)
        h_expect_exit(&a[i], 0, 30000);
}
