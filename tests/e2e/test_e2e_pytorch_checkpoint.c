// SPDX-License-Identifier: Apache-2.0
/*
 * Real PyTorch with the checkpoint store (issue 39): examples/pytorch/train_checkpoint.py (DDP,
 * gloo, CPU) under elastic-agent --checkpoint-memory on a real etcd. Rank 1 is SIGKILLed after
 * step 8; the group restarts and rank 0 resumes from step 8 out of the agent's memory; the final
 * loss equals an uninterrupted run's at the same step (the state came back exactly).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_harness.h"
#include "harness.h"

static char dir[256], state[300], envdir[300];
static struct etcd_harness etcd;

static void setup(void)
{
    h_suite_dirs("ptckpt", dir, state, envdir);
    h_require_torch();
    cr_assert_eq(etcd_harness_start(&etcd, 1), 0, "cannot start etcd");
}

static void teardown(void)
{
    h_kill_agents();
    etcd_harness_stop(&etcd);
    if (getenv("EA_E2E_KEEP"))
        cr_log_warn("kept %s", dir);
    else
        h_rmdir(dir);
}

TestSuite(e2e_pytorch_checkpoint, .init = setup, .fini = teardown, .timeout = 400);

/* Run the example to step 20 (kill_at -1: never killed); its "done" line of rank 0. */
static char *run(const char *name, int kill_at, struct h_agent *a)
{
    const char *base[] = {"--rdzv-endpoint", etcd.endpoints, "--run-id", name, "--node-id", "n0",
                          "--nproc-per-node", "2", "--max-restarts", "1", "--checkpoint-memory",
                          "64", "--settle", "0.2", "--stop-timeout", "5", "--local-addr",
                          "127.0.0.1", NULL};
    const char *cmd[] = {"/usr/bin/env", h_fmt("CK_MARKER_DIR=%s", envdir), "/usr/bin/python3",
                         h_fmt("%s/examples/pytorch/train_checkpoint.py", EA_SOURCE_DIR),
                         "--steps", "20", "--kill-at", h_fmt("%d", kill_at), NULL};
    h_agent_start_argv(a, dir, name, base, NULL, cmd);
    int code = h_agent_wait(a, 300000);
    if (code != 0)
        h_show_log(a);
    cr_assert_eq(code, 0, "%s exited %d", name, code);
    char *out = h_slurp(a->out, NULL);
    char *done = strstr(out, "[ckpt rank 0/2] done: ");
    cr_assert(done, "no done line in %s:\n%s", a->out, out);
    char *line = strndup(done, strcspn(done, "\n"));
    free(out);
    return line;
}

Test(e2e_pytorch_checkpoint, a_killed_rank_resumes_from_memory_with_the_same_loss)
{
    struct h_agent a = {0}, b = {0};
    char *plain = run("plain", -1, &a);
    char *killed = run("killed", 8, &b);
    cr_assert(h_file_contains(b.out, "[ckpt rank 0/2] start: resumed from step 8 (the agent's memory"),
              "rank 0 resumed from step 8");
    cr_assert(h_file_contains(b.out, "[ckpt rank 1/2] start: resumed from step 8"));
    cr_assert(h_file_contains(b.log, "restarts 1/1"), "the group was restarted");
    cr_assert_str_eq(killed, plain, "the loss after resuming equals an uninterrupted run's");
    free(plain);
    free(killed);
}
