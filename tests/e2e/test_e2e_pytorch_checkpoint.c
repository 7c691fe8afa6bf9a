// SPDX-License-Identifier: Apache-2.0
/*
 * Real PyTorch with the checkpoint store (issue 39), CPU and gloo, on a real etcd:
 * examples/pytorch/train_checkpoint.py (DDP) under --checkpoint-memory: rank 1 is SIGKILLed after
 * step 8, the group restarts and resumes from step 8 out of the agent's memory, and the final
 * loss equals an uninterrupted run's; examples/pytorch/train_zero.py (ZeRO-1, each rank's
 * optimizer shard saved) resumed at world size 4 from 2 shards written to --checkpoint-dir, the
 * loss at step 20 equal to an uninterrupted world-size-2 run's.
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
                          "--nproc-per-node", "2", "--max-restarts", "3", "--checkpoint-memory",
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
    cr_assert(h_file_contains(b.log, "restarts 1/3"), "the group was restarted");
    cr_assert_eq(strncmp(plain, "[ckpt rank 0/2] done: step 20 loss 0.", 37), 0, "'%s'", plain);
    cr_assert_str_eq(killed, plain, "the loss after resuming equals an uninterrupted run's");
    free(plain);
    free(killed);
}

/* examples/pytorch/train_zero.py to `steps` at `nproc` workers, run `name` under store prefix
 * `prefix`; the "done" line of rank 0. */
static char *zero(const char *name, const char *prefix, int nproc, int steps, const char *ckdir,
                  struct h_agent *a)
{
    const char *base[] = {"--rdzv-endpoint", etcd.endpoints, "--prefix", prefix, "--run-id", name,
                          "--node-id", "n0", "--nproc-per-node", h_fmt("%d", nproc),
                          "--checkpoint-memory", "256", "--checkpoint-dir", ckdir,
                          "--max-restarts", "3", /* a master port race on a busy machine */
                          "--checkpoint-every", "1", "--settle", "0.2", "--stop-timeout", "5",
                          "--local-addr", "127.0.0.1", NULL};
    const char *cmd[] = {"/usr/bin/python3",
                         h_fmt("%s/examples/pytorch/train_zero.py", EA_SOURCE_DIR), "--steps",
                         h_fmt("%d", steps), NULL};
    h_agent_start_argv(a, dir, h_fmt("%s%d", name, nproc), base, NULL, cmd);
    int code = h_agent_wait(a, 300000);
    if (code != 0)
        h_show_log(a);
    cr_assert_eq(code, 0, "%s exited %d", name, code);
    char *out = h_slurp(a->out, NULL);
    char *done = strstr(out, h_fmt("[zero rank 0/%d] done: ", nproc));
    cr_assert(done, "no done line in %s:\n%s", a->out, out);
    char *line = strndup(done + strlen("[zero rank 0/N] "), strcspn(done, "\n") - 16);
    free(out);
    return line;
}

/* ZeRO-1: each rank saves its optimizer shard; a whole-run restart at world size 4 merges the 2
 * shards of step 10 and partitions again; the loss at step 20 equals an uninterrupted run's at
 * world size 2 (the global batch is the same at both). */
Test(e2e_pytorch_checkpoint, zero1_resumes_at_another_world_size_with_the_same_loss)
{
    const char *ckdir = h_fmt("%s/disk", dir);
    struct h_agent a = {0}, b = {0}, c = {0};
    char *plain = zero("zplain", "/zp/", 2, 20, ckdir, &a);
    char *first = zero("zresume", "/z1/", 2, 10, ckdir, &b);
    free(first);
    char *resumed = zero("zresume", "/z2/", 4, 20, ckdir, &c);
    cr_assert(h_file_contains(c.out, "[zero rank 3/4] start: resumed from step 10 (2 shards)"));
    cr_assert(h_file_contains(c.log, "read back from --checkpoint-dir"));
    cr_assert_eq(strncmp(plain, "done: step 20 loss 0.", 21), 0, "'%s'", plain);
    cr_assert_str_eq(resumed, plain, "the loss at step 20 after resuming at world size 4 equals "
                     "the uninterrupted run's at world size 2");
    free(plain);
    free(resumed);
}
