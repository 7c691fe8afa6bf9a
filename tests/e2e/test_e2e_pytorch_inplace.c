// SPDX-License-Identifier: Apache-2.0
/*
 * Real PyTorch re-formed in place (issue 32 part 2): elastic-agent processes on a real etcd run
 * examples/pytorch/train_inplace.py (DDP, gloo on CPU, Debian's python3-torch) with
 * --warm-workers --in-place. Two nodes train; a third is added: the two workers re-form to world
 * 3 in the same processes; then one of the first two is SIGKILLed mid-epoch: the survivors
 * re-form to world 2, again in the same processes, and the run finishes with no restart charged.
 * Exact resumption: every epoch's "coverage" line says each sample was trained exactly once,
 * across both changes.
 *
 * Waits are on log lines (inotify) and pidfds with deadlines, never sleeps. Without an importable
 * torch the test fails (it never skips): scripts/install-deps.sh --test installs python3-torch.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "etcd_harness.h"
#include "harness.h"

#define PYTHON "/usr/bin/python3"
#define TRAIN EA_SOURCE_DIR "/examples/pytorch/train_inplace.py"
#define RUN "pti"
#define EPOCHS 10

static char dir[256], ckpt[300], logs[300];
static struct etcd_harness eh;

static void setup(void)
{
    h_mkdtemp(dir, sizeof(dir), "pytorch-inplace");
    snprintf(ckpt, sizeof(ckpt), "%s/ckpt", dir);
    snprintf(logs, sizeof(logs), "%s/logs", dir);
    prctl(PR_SET_CHILD_SUBREAPER, 1); /* orphans of the killed agent come to us */
}

static void teardown(void)
{
    h_kill_agents();
    etcd_harness_stop(&eh);
    if (getenv("EA_E2E_KEEP"))
        cr_log_warn("kept %s", dir);
    else
        h_rmdir(dir);
}

TestSuite(pytorch_inplace, .init = setup, .fini = teardown, .timeout = 300);

static void start(struct h_agent *a, const char *name)
{
    const char *args[64] = {"--rdzv-endpoint",
                            eh.endpoints,
                            "--run-id",
                            RUN,
                            "--node-id",
                            name,
                            "--log-dir",
                            logs,
                            "--nnodes",
                            "2:3",
                            "--settle",
                            "1",
                            "--lease-ttl",
                            "2",
                            "--stop-timeout",
                            "2",
                            "--max-restarts",
                            "0",
                            "--local-addr",
                            "127.0.0.1",
                            "--tee",
                            "--warm-workers",
                            "--in-place",
                            "--in-place-timeout",
                            "30",
                            "--",
                            PYTHON,
                            TRAIN,
                            "--ckpt-dir",
                            ckpt,
                            "--epochs",
                            h_fmt("%d", EPOCHS),
                            "--step-time",
                            "0.05",
                            NULL};
    h_agent_start(a, dir, name, args);
}

/* The pid in the first "<what> (pid P)" of the agent's stdout after `from`, or -1. */
static int pid_after(const struct h_agent *a, const char *what)
{
    char *out = h_slurp(a->out, NULL);
    const char *p = strstr(out, what);
    int pid = p ? atoi(p + strlen(what)) : -1;
    free(out);
    return pid;
}

/* Every coverage line in `path` says each sample was trained once; how many there are. */
static int exact_epochs(const char *path)
{
    int all = h_count_in(path, "] epoch "), cov = h_count_in(path, " coverage min ");
    int exact = h_count_in(path, " coverage min 1 max 1 samples 4096");
    cr_assert_eq(cov, exact, "%s: %d of %d epochs not trained exactly once", path, cov - exact,
                 cov);
    (void)all;
    return exact;
}

Test(pytorch_inplace, node_added_and_lost_survivors_reform_in_place_and_resume_exactly)
{
    h_require_torch();
    cr_assert_eq(etcd_harness_start(&eh, 1), 0, "cannot start etcd");
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("GLOO_SOCKET_IFNAME", "lo", 1);
    struct h_agent a[3];
    start(&a[0], "n0");
    start(&a[1], "n1");
    for (int i = 0; i < 2; i++)
        h_wait_in(&a[i], true, "/2] first step: ", 120000);
    int pid[3];
    for (int i = 0; i < 2; i++) {
        pid[i] = pid_after(&a[i], "/2] start: warm (pid ");
        cr_assert_gt(pid[i], 0, "n%d's worker did not start warm", i);
    }
    /* a node added: both workers re-form to world 3, the same processes */
    start(&a[2], "n2");
    for (int i = 0; i < 2; i++)
        h_wait_in(&a[i], true, h_fmt(", world 2 -> 3 (pid %d)", pid[i]), 120000);
    h_wait_in(&a[2], true, "/3] first step: ", 60000);
    pid[2] = pid_after(&a[2], "/3] start: ");
    for (int i = 0; i < 2; i++)
        h_wait_in(&a[i], false, "local worker(s) re-assigned in place", 1000);
    /* a node lost mid-epoch: n1 (SIGKILL); n0 and n2 re-form to world 2, the same processes */
    h_wait_in(&a[0], true, "/3] epoch ", 60000);
    h_agent_signal(&a[1], SIGKILL);
    int64_t t_kill = h_now_ms();
    cr_assert_eq(h_agent_wait(&a[1], 5000), 128 + SIGKILL);
    h_wait_in(&a[0], true, h_fmt(", world 3 -> 2 (pid %d)", pid[0]), 60000);
    int n2pid = pid_after(&a[2], "/3] start: warm (pid ");
    h_wait_in(&a[2], true, ", world 3 -> 2 (pid ", 60000);
    int64_t reformed = h_now_ms() - t_kill;
    cr_assert(n2pid < 0 || h_file_contains(a[2].out, h_fmt(", world 3 -> 2 (pid %d)", n2pid)),
              "n2's worker was restarted");
    /* the run finishes at world 2: exit 0, nothing charged, no worker started cold */
    for (int i = 0; i < 3; i += 2) {
        h_expect_exit(&a[i], 0, 240000);
        cr_assert(h_file_contains(a[i].log, "run '" RUN "' succeeded (round "));
        cr_assert(h_file_contains(a[i].log, ", 0 restart(s))"));
        cr_assert_not(h_file_contains(a[i].out, "start: cold"), "n%d started a worker cold", i);
    }
    cr_assert_eq(h_count_in(a[0].out, "] start: "), 1, "n0's worker was started again");
    cr_assert_eq(h_count_in(a[2].out, "] start: "), 1, "n2's worker was started again");
    /* exact: every epoch of the run trained each sample once, across both changes */
    cr_assert_geq(exact_epochs(a[0].out), EPOCHS, "n0 saw fewer than %d epochs end", EPOCHS);
    exact_epochs(a[2].out);
    exact_epochs(a[1].out);
    cr_log_info("kill -> survivors re-formed in place: %lld ms", (long long)reformed);
}
