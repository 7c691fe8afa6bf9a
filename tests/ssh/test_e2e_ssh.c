// SPDX-License-Identifier: Apache-2.0
/*
 * Agents with --launcher ssh against a real sshd on a loopback port (sshd_harness): ranks and a
 * normal run, one connection for 16 slots, the agent's SIGKILL leaves no worker, clear errors
 * (refused authentication, --launcher ssh without --host), `auto` stays local for this machine.
 * The remote PATH has the build dir, so the remote middleman is the exec-guard.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"
#include "sshd_harness.h"

#define TW EA_HELPERS_DIR "/ea-testworker"

static char dir[256], state[300], envdir[300];
static struct sshd_h sshd;

static void setup(void)
{
    h_suite_dirs("ssh", dir, state, envdir);
    struct sshd_h_opts o = {.extra_config = "SetEnv PATH=" EA_BIN_DIR ":/usr/bin:/bin"};
    sshd_h_start(&sshd, &o);
}

static void teardown(void)
{
    h_kill_agents();
    sshd_h_stop(&sshd);
    h_rmdir(dir);
}

TestSuite(e2e_ssh, .init = setup, .fini = teardown, .timeout = 90);

/* Agent arguments: head..., the sshd's client options, "--", cmd... */
static const char **args(const char *const *head, const char *const *cmd)
{
    static const char *v[96];
    int n = 0;
    for (int i = 0; head[i]; i++)
        v[n++] = head[i];
    for (int i = 0; sshd.agent_args[i]; i++)
        v[n++] = sshd.agent_args[i];
    v[n++] = "--";
    for (int i = 0; cmd[i]; i++)
        v[n++] = cmd[i];
    v[n] = NULL;
    return v;
}

static void run_slots(int nproc)
{
    char np[16];
    snprintf(np, sizeof(np), "%d", nproc);
    const char *head[] = {"--state-dir", state, "--run-id",         "s", "--host", "127.0.0.1",
                          "--launcher",  "ssh", "--nproc-per-node", np,  NULL};
    const char *cmd[] = {TW, "record", envdir, NULL};
    struct h_agent a;
    int64_t t0 = h_now_ms();
    h_agent_start(&a, dir, "a", args(head, cmd));
    int got = h_wait_files(envdir, "env.", nproc, 60000);
    int64_t t1 = h_now_ms();
    cr_assert_eq(got, nproc, "workers recorded: %d of %d", got, nproc);
    h_expect_exit(&a, 0, 30000);
    fprintf(stderr, "e2e ssh: agent start -> %d workers running: %lld ms; connections: %d\n", nproc,
            (long long)(t1 - t0), sshd_h_accepted(&sshd));
    cr_assert_eq(sshd_h_accepted(&sshd), 1, "one connection for %d slots", nproc);
    for (int r = 0; r < nproc; r++) { /* env.<RANK>.<pid>: every rank exactly once */
        char prefix[32];
        snprintf(prefix, sizeof(prefix), "env.%d.", r);
        cr_assert_eq(h_count_files(envdir, prefix), 1, "rank %d", r);
    }
    cr_assert(h_log_wait(&a, "over ssh", 1000));
}

Test(e2e_ssh, four_slots_get_ranks_0_to_3_and_the_run_succeeds)
{
    run_slots(4);
}

Test(e2e_ssh, sixteen_slots_open_exactly_one_connection)
{
    run_slots(16);
}

Test(e2e_ssh, published_address_is_the_hosts)
{
    /* --host localhost: the ssh launcher is forced, the node publishes localhost's address */
    const char *head[] = {"--state-dir", state, "--run-id",         "h", "--host", "localhost",
                          "--launcher",  "ssh", "--nproc-per-node", "1", NULL};
    const char *cmd[] = {TW, "record", envdir, NULL};
    struct h_agent a;
    h_agent_start(&a, dir, "a", args(head, cmd));
    cr_assert_eq(h_wait_files(envdir, "env.0.", 1, 60000), 1);
    h_expect_exit(&a, 0, 30000);
    cr_assert_eq(sshd_h_accepted(&sshd), 1);
    cr_assert(h_log_wait(&a, "workers run on host 'localhost' (127.0.0.1) over ssh", 1000));
}

/* Start an agent whose 4 remote workers write their pids to envdir/pid.<RANK> and hang. */
static void start_hanging(struct h_agent *a, const char *run, pid_t *pids)
{
    const char *head[] = {
        "--state-dir", state, "--run-id",         run, "--host",         "127.0.0.1",
        "--launcher",  "ssh", "--nproc-per-node", "4", "--stop-timeout", "2",
        NULL};
    static char script[600];
    snprintf(script, sizeof(script),
             "echo $$ > '%s'/pid.$RANK.tmp && mv '%s'/pid.$RANK.tmp "
             "'%s'/pid.$RANK && exec '%s' hang",
             envdir, envdir, envdir, TW);
    const char *cmd[] = {"/bin/sh", "-c", script, NULL};
    h_agent_start(a, dir, "a", args(head, cmd));
    cr_assert_eq(h_wait_files(envdir, "pid.", 4, 60000), 4);
    for (int r = 0; r < 4; r++) {
        char path[400];
        snprintf(path, sizeof(path), "%s/pid.%d", envdir, r);
        pids[r] = h_read_pid(path);
        cr_assert_gt(pids[r], 0);
    }
}

Test(e2e_ssh, sigterm_of_the_agent_stops_the_remote_workers)
{
    struct h_agent a;
    pid_t pids[4];
    start_hanging(&a, "t", pids);
    h_agent_signal(&a, SIGTERM);
    h_expect_exit(&a, 128 + SIGTERM, 20000);
    for (int r = 0; r < 4; r++) /* the agent waited for their exits before it exited */
        cr_assert(h_pid_gone(pids[r], 0), "worker %d outlived the agent", (int)pids[r]);
}

Test(e2e_ssh, sigkill_of_the_agent_leaves_no_worker_within_2s)
{
    struct h_agent a;
    pid_t pids[4];
    start_hanging(&a, "k", pids);
    h_agent_signal(&a, SIGKILL);
    int64_t t0 = h_now_ms();
    cr_assert_eq(h_agent_wait(&a, 5000), 128 + SIGKILL);
    for (int r = 0; r < 4; r++) {
        int left = (int)(t0 + 2000 - h_now_ms());
        cr_assert(h_pid_gone(pids[r], left > 0 ? left : 0), "worker %d outlived the agent by 2 s",
                  (int)pids[r]);
    }
    fprintf(stderr, "e2e ssh: 4 workers gone %lld ms after the agent's SIGKILL\n",
            (long long)(h_now_ms() - t0));
}

Test(e2e_ssh, refused_authentication_fails_with_the_host_named)
{
    char key[400], cmdline[600];
    snprintf(key, sizeof(key), "%s/other_id", dir);
    snprintf(cmdline, sizeof(cmdline), "ssh-keygen -q -t ed25519 -N '' -f '%s' >/dev/null", key);
    cr_assert_eq(system(cmdline), 0);
    const char *head[] = {"--state-dir", state, "--run-id",       "f", "--host", "127.0.0.1",
                          "--launcher",  "ssh", "--ssh-identity", key, NULL};
    const char *cmd[] = {TW, "exit", "0", NULL};
    /* the harness's --ssh-identity comes later and would win: drop it */
    const char **v = args(head, cmd);
    for (int i = 0; v[i]; i++)
        if (strcmp(v[i], "--ssh-identity") == 0 && v[i + 1] != key) {
            for (int j = i; v[j]; j++)
                v[j] = v[j + 2];
            break;
        }
    struct h_agent a;
    h_agent_start(&a, dir, "a", v);
    h_expect_exit(&a, 1, 60000);
    cr_assert(h_log_wait(&a, "cannot connect to host '127.0.0.1' over ssh", 1000));
    cr_assert(h_log_wait(&a, "Permission denied", 1000));
}

Test(e2e_ssh, auto_launcher_runs_this_machines_workers_locally)
{
    const char *head[] = {"--state-dir",      state, "--run-id", "l", "--host", "127.0.0.1",
                          "--nproc-per-node", "2",   NULL};
    const char *cmd[] = {TW, "record", envdir, NULL};
    struct h_agent a;
    h_agent_start(&a, dir, "a", args(head, cmd));
    h_expect_exit(&a, 0, 30000);
    cr_assert_eq(h_count_files(envdir, "env."), 2);
    cr_assert_eq(sshd_h_accepted(&sshd), 0, "auto used ssh for this machine");
}

Test(e2e_ssh, launcher_ssh_without_host_is_a_usage_error)
{
    struct h_agent a;
    const char *v[] = {"--standalone", "--launcher", "ssh", "--", "true", NULL};
    h_agent_start(&a, dir, "a", v);
    h_expect_exit(&a, 2, 10000);
    cr_assert(h_log_wait(&a, "--launcher ssh needs --host", 1000));
}
