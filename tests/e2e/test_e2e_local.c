// SPDX-License-Identifier: Apache-2.0
/*
 * End to end on one host: several elastic-agent processes on the file backend, real workers
 * (tests/helpers/ea-testworker), real signals. Issue #3's "done when" list, plus scale-up and
 * node loss.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include "harness.h"

#define W EA_HELPERS_DIR "/ea-testworker"

static char dir[256], state[300], envdir[300];

static void setup(void)
{
    h_suite_dirs("local", dir, state, envdir);
}

static void teardown(void)
{
    h_kill_agents(); /* whatever a failed assertion left running */
    h_rmdir(dir);
}

TestSuite(e2e, .init = setup, .fini = teardown, .timeout = 90);

/* Start agent `name` with the common options plus `extra` (NULL-terminated) and the command. */
static void start(struct h_agent *a, const char *name, const char *const *extra,
                  const char *const *cmd)
{
    /* settle 1 s: agents started together share round 1 even on a loaded host */
    const char *base[] = {"--state-dir", state, "--run-id", "e2e", "--node-id", name,
                          "--settle", "1", "--stop-timeout", "2", NULL};
    h_agent_start_argv(a, dir, name, base, extra, cmd);
}



Test(e2e, four_agents_two_workers_get_ranks_0_to_7)
{
    struct h_agent a[4];
    const char *extra[] = {"--min", "4", "--max", "4", "--nproc-per-node", "2", NULL};
    const char *cmd[] = {W, "record", envdir, NULL};
    for (int i = 0; i < 4; i++)
        start(&a[i], h_fmt("n%d", i), extra, cmd);
    for (int i = 0; i < 4; i++)
        h_expect_exit(&a[i], 0, 30000);
    cr_assert_eq(h_count_files(envdir, "env."), 8);
    int seen[8] = {0};
    char master[128] = "", gen[64] = "";
    DIR *d = opendir(envdir);
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "env.", 4) != 0)
            continue;
        const char *p = h_fmt("%s/%s", envdir, e->d_name);
        int rank = atoi(h_env_value(p, "RANK"));
        int group = atoi(h_env_value(p, "GROUP_RANK"));
        cr_assert(rank >= 0 && rank < 8);
        seen[rank]++;
        cr_assert_eq(atoi(h_env_value(p, "LOCAL_RANK")), rank - 2 * group);
        cr_assert_str_eq(h_env_value(p, "WORLD_SIZE"), "8");
        cr_assert_str_eq(h_env_value(p, "LOCAL_WORLD_SIZE"), "2");
        cr_assert_str_eq(h_env_value(p, "GROUP_WORLD_SIZE"), "4");
        cr_assert_str_eq(h_env_value(p, "TORCHELASTIC_RESTART_COUNT"), "0");
        cr_assert_str_eq(h_env_value(p, "TORCHELASTIC_RUN_ID"), "e2e");
        cr_assert_str_eq(h_env_value(p, "OMP_NUM_THREADS"), "1");
        char m[128];
        snprintf(m, sizeof(m), "%s:%s", h_env_value(p, "MASTER_ADDR"),
                 h_env_value(p, "MASTER_PORT"));
        if (!master[0])
            snprintf(master, sizeof(master), "%s", m);
        cr_assert_str_eq(m, master, "every worker has the same MASTER_ADDR:PORT");
        if (!gen[0])
            snprintf(gen, sizeof(gen), "%s", h_env_value(p, "ELASTIC_GENERATION"));
        cr_assert_str_eq(h_env_value(p, "ELASTIC_GENERATION"), gen);
    }
    closedir(d);
    for (int r = 0; r < 8; r++)
        cr_assert_eq(seen[r], 1, "rank %d seen %d times", r, seen[r]);
}

Test(e2e, failure_within_budget_restarts_everyone_with_count_1)
{
    struct h_agent a[2];
    const char *extra[] = {"--min", "2", "--max", "2", "--nproc-per-node", "2",
                           "--max-restarts", "1", NULL};
    const char *cmd[] = {W, "fail-once", envdir, "3", NULL};
    for (int i = 0; i < 2; i++)
        start(&a[i], h_fmt("n%d", i), extra, cmd);
    for (int i = 0; i < 2; i++)
        h_expect_exit(&a[i], 0, 30000);
    int restarted[4] = {0};
    DIR *d = opendir(envdir);
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "env.", 4) != 0)
            continue;
        const char *p = h_fmt("%s/%s", envdir, e->d_name);
        if (strcmp(h_env_value(p, "TORCHELASTIC_RESTART_COUNT"), "1") == 0) {
            restarted[atoi(h_env_value(p, "RANK"))]++;
            cr_assert_str_eq(h_env_value(p, "ELASTIC_ROUND"), "2");
        }
    }
    closedir(d);
    for (int r = 0; r < 4; r++)
        cr_assert_eq(restarted[r], 1, "rank %d restarted %d times with count 1", r, restarted[r]);
}

Test(e2e, failure_past_budget_fails_every_agent_naming_the_first_failure)
{
    struct h_agent a[2];
    /* the charge is final one lease TTL after the failure (no peer was lost): then the run fails */
    const char *extra[] = {"--min", "2", "--nproc-per-node", "2", "--lease-ttl", "1", NULL};
    const char *script = "if [ \"$RANK\" = 3 ] && [ \"$ELASTIC_ROUND\" = 1 ]; then exec " W
                         " errorfile boom 7; fi; exec " W " hang";
    const char *cmd[] = {"/bin/sh", "-c", script, NULL};
    for (int i = 0; i < 2; i++)
        start(&a[i], h_fmt("n%d", i), extra, cmd);
    for (int i = 0; i < 2; i++) {
        h_expect_exit(&a[i], 1, 30000);
        cr_assert(h_file_contains(a[i].log, "sh FAILED"), "%s", a[i].log);
        cr_assert(h_file_contains(a[i].log, "rank      : 3 (local_rank: 1)"));
        cr_assert(h_file_contains(a[i].log, "exitcode  : 7"));
        cr_assert(h_file_contains(a[i].log, "RuntimeError: boom"));
        /* rank 3 lives on group rank 1, whichever node arrived second */
        cr_assert(h_file_contains(a[i].log, "node      : n"));
    }
}

/* A worker script that records its pid and its grandchild's pid, then hangs. */
static const char *hang_script(void)
{
    return h_fmt("%s orphan %s/gc.$RANK; echo $$ > %s/pid.$RANK.tmp && mv %s/pid.$RANK.tmp "
               "%s/pid.$RANK; exec %s hang",
               W, envdir, envdir, envdir, envdir, W);
}

static void collect_pids(pid_t *pids, int n_ranks)
{
    cr_assert_eq(h_wait_files(envdir, "pid.", n_ranks, 20000), n_ranks);
    for (int r = 0; r < n_ranks; r++) {
        pids[2 * r] = h_read_pid(h_fmt("%s/pid.%d", envdir, r));
        pids[2 * r + 1] = h_read_pid(h_fmt("%s/gc.%d", envdir, r));
        cr_assert_gt(pids[2 * r], 0);
        cr_assert_gt(pids[2 * r + 1], 0);
    }
}

Test(e2e, sigkill_of_agent_takes_workers_and_descendants_within_1s)
{
    struct h_agent a;
    const char *extra[] = {"--standalone", "--nproc-per-node", "2", NULL};
    const char *cmd[] = {"/bin/sh", "-c", hang_script(), NULL};
    start(&a, "solo", extra, cmd);
    pid_t pids[4];
    collect_pids(pids, 2);
    h_agent_signal(&a, SIGKILL);
    int64_t t0 = h_now_ms();
    cr_assert_eq(h_agent_wait(&a, 5000), 128 + SIGKILL);
    /* the time left is clamped at 0: poll(-1) would wait for ever and lose the 1 s bound.
     * Mutation: no PR_SET_PDEATHSIG/guard stdin watch -> "survived its agent's SIGKILL". */
    for (int i = 0; i < 4; i++) {
        int left = (int)(t0 + 1000 - h_now_ms());
        cr_assert(h_pid_gone(pids[i], left > 0 ? left : 0),
                  "process %d survived its agent's SIGKILL by more than 1 s", pids[i]);
    }
}

Test(e2e, sigterm_stops_workers_and_exits_143)
{
    struct h_agent a;
    const char *extra[] = {"--standalone", "--nproc-per-node", "2", NULL};
    const char *cmd[] = {"/bin/sh", "-c", hang_script(), NULL};
    start(&a, "solo", extra, cmd);
    pid_t pids[4];
    collect_pids(pids, 2);
    h_agent_signal(&a, SIGTERM);
    h_expect_exit(&a, 143, 10000);
    for (int i = 0; i < 4; i++)
        cr_assert(h_pid_gone(pids[i], 100), "process %d left behind", pids[i]);
    cr_assert(h_file_contains(a.log, "SIGTERM"));
}

Test(e2e, grandchild_of_an_exited_worker_is_not_left_behind)
{
    struct h_agent a;
    const char *extra[] = {"--standalone", NULL};
    const char *gc = h_fmt("%s/gc", envdir);
    const char *cmd[] = {W, "orphan", gc, NULL};
    start(&a, "solo", extra, cmd);
    h_expect_exit(&a, 0, 20000);
    pid_t pid = h_read_pid(gc);
    cr_assert_gt(pid, 0);
    cr_assert(h_pid_gone(pid, 2000), "grandchild %d still running", pid);
}

Test(e2e, missing_program_is_named)
{
    struct h_agent a;
    const char *extra[] = {"--standalone", NULL};
    const char *cmd[] = {"/nonexistent/prog", NULL};
    start(&a, "solo", extra, cmd);
    h_expect_exit(&a, 1, 20000);
    cr_assert(h_file_contains(a.log, "/nonexistent/prog"));
}

Test(e2e, usage_errors_exit_2_with_one_line)
{
    const char *cases[][8] = {
        {"--min", "3", "--max", "2", "--", "true", NULL},
        {"--bogus", "--", "true", NULL},
        {"--min", "2", NULL},
        {"--nproc-per-node", "x", "--", "true", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        struct h_agent a;
        h_agent_start(&a, dir, h_fmt("usage%zu", i), cases[i]);
        h_expect_exit(&a, 2, 5000);
        cr_assert(h_file_contains(a.log, "elastic-agent: "), "no reason given (case %zu)", i);
    }
}

Test(e2e, join_timeout_exits_4)
{
    struct h_agent a;
    const char *extra[] = {"--min", "2", "--join-timeout", "0.5", NULL};
    const char *cmd[] = {"true", NULL};
    start(&a, "lonely", extra, cmd);
    h_expect_exit(&a, 4, 10000);
    cr_assert(h_file_contains(a.log, "rendezvous timed out"));
}

/* Workers record their env, then run until the test creates envdir/go. */
static const char *record_then_wait(void)
{
    return h_fmt("%s record %s && exec %s wait-file %s/go", W, envdir, W, envdir);
}

static void release_workers(void)
{
    FILE *f = fopen(h_fmt("%s/go", envdir), "w");
    cr_assert(f);
    fclose(f);
}

Test(e2e, scale_up_restarts_everyone_with_new_world)
{
    struct h_agent a[3];
    const char *extra[] = {"--min", "2", "--max", "3", NULL};
    const char *cmd[] = {"/bin/sh", "-c", record_then_wait(), NULL};
    for (int i = 0; i < 2; i++)
        start(&a[i], h_fmt("n%d", i), extra, cmd);
    for (int i = 0; i < 2; i++)
        cr_assert(h_log_wait(&a[i], "round 1 ", 20000));
    start(&a[2], "n2", extra, cmd);
    for (int i = 0; i < 3; i++)
        cr_assert(h_log_wait(&a[i], "round 2 ", 20000), "node %d did not join round 2", i);
    cr_assert_geq(h_wait_files(envdir, "env.", 5, 20000), 5); /* 2 in round 1 + 3 in round 2 */
    release_workers();
    for (int i = 0; i < 3; i++)
        h_expect_exit(&a[i], 0, 20000);
    int in_round2 = 0;
    DIR *d = opendir(envdir);
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, "env.", 4) == 0) {
            const char *p = h_fmt("%s/%s", envdir, e->d_name);
            if (strcmp(h_env_value(p, "ELASTIC_ROUND"), "2") == 0) {
                in_round2++;
                cr_assert_str_eq(h_env_value(p, "WORLD_SIZE"), "3");
                cr_assert_str_eq(h_env_value(p, "TORCHELASTIC_RESTART_COUNT"), "0",
                                 "scale-up is not charged");
            }
        }
    closedir(d);
    cr_assert_eq(in_round2, 3);
}

Test(e2e, killed_node_is_replaced_after_its_lease)
{
    struct h_agent a[3];
    const char *extra[] = {"--min", "2", "--max", "3", "--lease-ttl", "1", NULL};
    const char *cmd[] = {"/bin/sh", "-c", record_then_wait(), NULL};
    for (int i = 0; i < 3; i++)
        start(&a[i], h_fmt("n%d", i), extra, cmd);
    for (int i = 0; i < 3; i++)
        cr_assert(h_log_wait(&a[i], "round 1 ", 20000));
    h_agent_signal(&a[2], SIGKILL);
    int64_t t0 = h_now_ms();
    cr_assert_eq(h_agent_wait(&a[2], 5000), 128 + SIGKILL);
    for (int i = 0; i < 2; i++)
        cr_assert(h_log_wait(&a[i], "round 2 ", 10000), "survivor %d not restarted", i);
    int64_t took = h_now_ms() - t0;
    cr_log_info("survivors restarted %lld ms after the kill (lease TTL 1000 ms)",
                (long long)took);
    release_workers();
    for (int i = 0; i < 2; i++)
        h_expect_exit(&a[i], 0, 20000);
}

Test(e2e, sigint_exits_130)
{
    struct h_agent a;
    const char *extra[] = {"--standalone", NULL};
    const char *cmd[] = {"/bin/sh", "-c", hang_script(), NULL};
    start(&a, "solo", extra, cmd);
    pid_t pids[2];
    collect_pids(pids, 1);
    h_agent_signal(&a, SIGINT);
    h_expect_exit(&a, 130, 10000);
    for (int i = 0; i < 2; i++)
        cr_assert(h_pid_gone(pids[i], 100), "process %d left behind", pids[i]);
}

Test(e2e, log_dir_files_and_tee_prefixes)
{
    struct h_agent a;
    const char *logdir = h_fmt("%s/logs", dir);
    const char *extra[] = {"--standalone", "--nproc-per-node", "2", "--log-dir", logdir, "--tee",
                           "--run-id", "logs", NULL};
    const char *cmd[] = {W, "echo-lines", "3", NULL};
    start(&a, "solo", extra, cmd);
    h_expect_exit(&a, 0, 20000);
    for (int r = 0; r < 2; r++) {
        cr_assert(h_file_contains(h_fmt("%s/logs/1/rank_%d.out", logdir, r), "line 2"),
                  "rank %d stdout file", r);
        cr_assert(h_file_contains(h_fmt("%s/logs/1/rank_%d.err", logdir, r), "eline 2"),
                  "rank %d stderr file", r);
        cr_assert(h_file_contains(a.out, h_fmt("[%d]:line 2", r)), "tee of rank %d stdout", r);
        cr_assert(h_file_contains(a.log, h_fmt("[%d]:eline 2", r)), "tee of rank %d stderr", r);
    }
}

Test(e2e, late_joiner_of_a_finished_run_exits_0)
{
    struct h_agent a, b;
    const char *extra[] = {"--min", "1", NULL};
    const char *cmd[] = {"true", NULL};
    start(&a, "first", extra, cmd);
    h_expect_exit(&a, 0, 20000);
    start(&b, "late", extra, cmd);
    h_expect_exit(&b, 0, 20000);
    cr_assert(h_file_contains(b.log, "already finished"), "the late joiner says why it exits");
}
