// SPDX-License-Identifier: Apache-2.0
/*
 * Real PyTorch with warm spares (issue 32): three elastic-agent processes on a real etcd run
 * examples/pytorch/train_warm.py (gloo on CPU; torch imported, the model built and the checkpoint
 * read before the rank) with --warm-workers and Debian's python3-torch. Once round 1 trains and
 * every node has parked its spare, a node that is not rank 0's is SIGKILLed mid-epoch. The
 * survivors' world-2 workers must be those spares — parked (their "[train pid P] parked" line
 * written) before the kill — and resume from the last checkpoint; the run finishes with no
 * restart charged.
 *
 * Waits are on log lines (inotify) and pidfds with deadlines, never sleeps. Without an importable
 * torch the test fails (it never skips): scripts/install-deps.sh --test installs python3-torch.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "etcd_harness.h"
#include "harness.h"

#define PYTHON "/usr/bin/python3"
#define TRAIN EA_SOURCE_DIR "/examples/pytorch/train_warm.py"
#define RUN "ptw"
#define EPOCHS 6
#define SETTLE "3" /* the three agents make round 1 together, even on a loaded machine */

static char dir[256], ckpt[300], logs[300];
static struct etcd_harness eh;

static void setup(void)
{
    h_mkdtemp(dir, sizeof(dir), "pytorch-warm");
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

TestSuite(pytorch_warm, .init = setup, .fini = teardown, .timeout = 300);

static void start(struct h_agent *a, const char *name)
{
    const char *args[64] = {"--rdzv-endpoint", eh.endpoints, "--run-id", RUN, "--node-id", name,
                            "--log-dir", logs, "--nnodes", "2:3", "--settle", SETTLE,
                            "--lease-ttl", "2", "--stop-timeout", "2", "--max-restarts", "0",
                            "--local-addr", "127.0.0.1", "--tee", "--warm-workers", "--",
                            PYTHON, TRAIN, "--ckpt-dir", ckpt, "--epochs",
                            h_fmt("%d", EPOCHS), "--step-time", "0.03", NULL};
    h_agent_start(a, dir, name, args);
}

/* Wait until the agent's stdout holds `needle` at least n times (inotify on the file). */
static void wait_count(const struct h_agent *a, const char *needle, int n, int timeout_ms)
{
    int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    cr_assert_geq(fd, 0);
    cr_assert_geq(inotify_add_watch(fd, a->out, IN_MODIFY), 0);
    int64_t deadline = h_now_ms() + timeout_ms;
    int have;
    while ((have = h_count_in(a->out, needle)) < n) {
        int64_t left = deadline - h_now_ms();
        cr_assert_gt(left, 0, "%s: '%s' %d times, wanted %d", a->out, needle, have, n);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) == 1) {
            char buf[4096];
            while (read(fd, buf, sizeof(buf)) > 0)
                ;
        }
    }
    close(fd);
}

Test(pytorch_warm, node_killed_survivors_restart_on_parked_spares_and_resume)
{
    h_require_torch();
    cr_assert_eq(etcd_harness_start(&eh, 1), 0, "cannot start etcd");
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("GLOO_SOCKET_IFNAME", "lo", 1);
    struct h_agent a[3];
    for (int i = 0; i < 3; i++)
        start(&a[i], h_fmt("n%d", i));
    for (int i = 0; i < 3; i++)
        h_wait_in(&a[i], false, "round 1 (", 60000);
    /* round 1 trains; every node then has its round-1 worker's and its spare's parked line */
    for (int i = 0; i < 3; i++)
        h_wait_in(&a[i], true, "/3] epoch 1 begin", 120000);
    for (int i = 0; i < 3; i++)
        wait_count(&a[i], "] parked: set up in ", 2, 120000);
    /* the victim: a node whose worker is not rank 0, once epoch 2 is saved and 3 begun */
    int victim = -1;
    for (int i = 0; i < 3 && victim < 0; i++)
        if (!h_file_contains(a[i].out, "[train rank 0/3]"))
            victim = i;
    cr_assert_geq(victim, 0);
    int rank0 = -1;
    for (int i = 0; i < 3; i++)
        if (h_file_contains(a[i].out, "[train rank 0/3]"))
            rank0 = i;
    cr_assert_geq(rank0, 0, "no node runs rank 0");
    h_wait_in(&a[rank0], true, "[train rank 0/3] checkpoint epoch 2 saved", 120000);
    h_wait_in(&a[victim], true, "/3] epoch 3 begin", 60000);
    size_t at_kill[3];
    for (int i = 0; i < 3; i++)
        free(h_slurp(a[i].out, &at_kill[i]));
    h_agent_signal(&a[victim], SIGKILL);
    int64_t t_kill = h_now_ms();
    cr_assert_eq(h_agent_wait(&a[victim], 5000), 128 + SIGKILL);
    int last_saved = EPOCHS;
    while (last_saved > 0 &&
           !h_file_contains(a[rank0].out, h_fmt("checkpoint epoch %d saved", last_saved)))
        last_saved--;
    cr_assert_geq(last_saved, 2);

    /* the survivors run world 2 on their spares, parked before the kill */
    for (int i = 0; i < 3; i++) {
        if (i == victim)
            continue;
        h_wait_in(&a[i], false, " of world 2,", 30000);
        h_wait_in(&a[i], true, "/2] start: ", 60000);
        char *out = h_slurp(a[i].out, NULL);
        const char *st = strstr(out, "/2] start: ");
        const char *warm = strstr(st, ", warm (pid ");
        const char *eol = strchr(st, '\n');
        cr_assert(warm && (!eol || warm < eol), "n%d's world-2 worker did not start warm: %.200s",
                  i, st);
        int pid = atoi(warm + strlen(", warm (pid "));
        char *parked = strstr(out, h_fmt("[train pid %d] parked: ", pid));
        cr_assert(parked, "n%d: worker %d never parked", i, pid);
        cr_assert_lt((size_t)(parked - out), at_kill[i],
                     "n%d: worker %d was parked after the kill", i, pid);
        cr_assert(strstr(st, h_fmt("resumed from epoch %d,", last_saved)) &&
                      strstr(st, h_fmt("resumed from epoch %d,", last_saved)) < eol,
                  "n%d: not resumed from the last checkpoint (epoch %d): %.200s", i, last_saved,
                  st);
        free(out);
        cr_assert(h_log_wait(&a[i], "local worker(s) are warm spares, assigned their ranks", 0));
    }
    int64_t restarted = h_now_ms() - t_kill;
    for (int i = 0; i < 3; i++)
        if (i != victim)
            h_wait_in(&a[i], true, "/2] first step: ", 60000);
    int64_t stepping = h_now_ms() - t_kill;

    /* the run finishes at world 2: exit 0, nothing charged, the last epoch saved */
    bool last = false;
    for (int i = 0; i < 3; i++) {
        if (i == victim)
            continue;
        h_expect_exit(&a[i], 0, 180000);
        cr_assert(h_file_contains(a[i].log, "run '" RUN "' succeeded (round "));
        cr_assert(h_file_contains(a[i].log, ", 0 restart(s))"));
        last |= h_file_contains(a[i].out, h_fmt("/2] checkpoint epoch %d saved", EPOCHS));
    }
    cr_assert(last, "epoch %d was not saved at world 2", EPOCHS);
    cr_log_info("kill -> survivors' world-2 workers started (warm): %lld ms; -> first step: "
                "%lld ms (resumed from epoch %d)",
                (long long)restarted, (long long)stepping, last_saved);
}
