// SPDX-License-Identifier: Apache-2.0
/*
 * Elastic membership end to end (issue #7), the same scenarios on two backends: compiled once
 * for the file backend and once (EA_E2E_ETCD) against a real etcd started by the test. Separate
 * agent processes, real workers and signals; every wait is an event with a deadline. Measured
 * times are logged (cr_log_info); the benchmarks in bench/ report them properly.
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
#ifdef EA_E2E_ETCD
#include "etcd_harness.h"
static struct etcd_harness etcd;
#define TTL "2" /* etcd's minimum lease TTL is about 1.5 s */
#define TTL_MS 2000
#else
#define TTL "1"
#define TTL_MS 1000
#endif

#define W EA_HELPERS_DIR "/ea-testworker"

/* Graceful-leave tests: a lease TTL long enough that its expiry (>= 20 s after the leaver's last
 * keepalive, sent every TTL/3) cannot pass for a leave within the bound on the survivors' new
 * round; the leave makes it in ~50 ms (valgrind included, well under 1 s). */
#define LEAVE_TTL "30"
#define LEAVE_BOUND_MS 6000

static char dir[256], state[300], envdir[300];

static void setup(void)
{
    h_suite_dirs("elastic", dir, state, envdir);
#ifdef EA_E2E_ETCD
    cr_assert_eq(etcd_harness_start(&etcd, 1), 0, "cannot start etcd");
#endif
}

static void teardown(void)
{
    h_kill_agents(); /* whatever a failed assertion left running */
#ifdef EA_E2E_ETCD
    etcd_harness_stop(&etcd);
#endif
    if (getenv("EA_E2E_KEEP"))
        cr_log_warn("kept %s", dir);
    else
        h_rmdir(dir);
}

TestSuite(elastic, .init = setup, .fini = teardown, .timeout = 120);


/* Agent `name` with the backend's options, the common ones, `extra` and the command. */
static void start(struct h_agent *a, const char *name, const char *const *extra,
                  const char *const *cmd)
{
    /* settle 1 s: every agent a test starts together is in round 1, even on a loaded machine */
    const char *args[48] = {"--run-id", "elastic", "--node-id", name, "--settle", "1",
                            "--stop-timeout", "2", "--lease-ttl", TTL};
    int n = 10;
#ifdef EA_E2E_ETCD
    args[n++] = "--rdzv-endpoint";
    args[n++] = etcd.endpoints;
#else
    args[n++] = "--state-dir";
    args[n++] = state;
#endif
    for (int i = 0; extra && extra[i]; i++)
        args[n++] = extra[i];
    args[n++] = "--";
    for (int i = 0; cmd[i]; i++)
        args[n++] = cmd[i];
    args[n] = NULL;
    h_agent_start(a, dir, name, args);
}


/* Workers record their environment, then run until the test creates envdir/go. */
static const char *const *record_then_wait(void)
{
    static const char *cmd[4];
    cmd[0] = "/bin/sh";
    cmd[1] = "-c";
    cmd[2] = h_fmt("%s record %s && exec %s wait-file %s/go", W, envdir, W, envdir);
    cmd[3] = NULL;
    return cmd;
}

static void release_workers(void)
{
    FILE *f = fopen(h_fmt("%s/go", envdir), "w");
    cr_assert(f);
    fclose(f);
}

static void wait_round(struct h_agent *a, int n, int round, int timeout_ms)
{
    for (int i = 0; i < n; i++)
        cr_assert(h_log_wait(&a[i], h_fmt("round %d ", round), timeout_ms),
                  "agent %d never ran round %d", i, round);
}

/* The first round agent `a` started workers in ("round N (generation G): started"). */
static int first_round_of(const struct h_agent *a, int timeout_ms)
{
    cr_assert(h_log_wait(a, "(generation ", timeout_ms), "%s started no workers", a->log);
    char *log = h_slurp(a->log, NULL);
    const char *g = strstr(log, " (generation ");
    const char *r = g;
    while (r > log && strncmp(r, "round ", 6) != 0)
        r--;
    int round = strncmp(r, "round ", 6) == 0 ? atoi(r + 6) : 0;
    free(log);
    cr_assert_gt(round, 0, "no round number before '(generation' in %s", a->log);
    return round;
}

/* Every agent of `a` runs `round` within LEAVE_BOUND_MS of t0 (when the leaver got SIGTERM). */
static void wait_round_after_leave(struct h_agent *a, int n, int round, int64_t t0)
{
    for (int i = 0; i < n; i++) {
        int left = (int)(t0 + LEAVE_BOUND_MS - h_now_ms());
        cr_assert(h_log_wait(&a[i], h_fmt("round %d ", round), left > 0 ? left : 0),
                  "agent %d: no round %d within %d ms of the leave (lease TTL %s s)", i, round,
                  LEAVE_BOUND_MS, LEAVE_TTL);
    }
    cr_log_info("leave to round %d on every survivor: %lld ms", round,
                (long long)(h_now_ms() - t0));
}

/* The highest ELASTIC_ROUND among the env files. */
static int latest_round(void)
{
    int latest = 0;
    DIR *d = opendir(envdir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, "env.", 4) != 0)
            continue;
        const char *r = h_env_value(h_fmt("%s/%s", envdir, e->d_name), "ELASTIC_ROUND");
        if (r && atoi(r) > latest)
            latest = atoi(r);
    }
    if (d)
        closedir(d);
    return latest;
}

/* Ranks seen in env files of `round` (bitmask), checking the restart count of each. */
static unsigned ranks_in_round(int round, const char *restart_count, int *ret_world)
{
    unsigned seen = 0;
    DIR *d = opendir(envdir);
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "env.", 4) != 0)
            continue;
        const char *p = h_fmt("%s/%s", envdir, e->d_name);
        if (atoi(h_env_value(p, "ELASTIC_ROUND")) != round)
            continue;
        int rank = atoi(h_env_value(p, "RANK"));
        cr_assert_eq(seen & (1u << rank), 0, "rank %d twice in round %d", rank, round);
        seen |= 1u << rank;
        *ret_world = atoi(h_env_value(p, "WORLD_SIZE"));
        cr_assert_str_eq(h_env_value(p, "TORCHELASTIC_RESTART_COUNT"), restart_count);
    }
    closedir(d);
    return seen;
}

Test(elastic, sigkill_one_of_four_survivors_restart_after_the_lease)
{
    struct h_agent a[4];
    const char *extra[] = {"--min", "2", "--max", "4", NULL};
    for (int i = 0; i < 4; i++)
        start(&a[i], h_fmt("n%d", i), extra, record_then_wait());
    wait_round(a, 4, 1, 30000);
    /* "round N" is logged at fork: wait until every worker has recorded before killing */
    cr_assert_eq(h_wait_files(envdir, "env.", 4, 10000), 4);
    h_agent_signal(&a[3], SIGKILL);
    int64_t t0 = h_now_ms();
    wait_round(a, 3, 2, TTL_MS + 10000);
    int64_t took = h_now_ms() - t0;
    cr_log_info("SIGKILL of 1 of 4: survivors restarted after %lld ms (lease TTL %d ms)",
                (long long)took, TTL_MS);
    cr_assert_lt(took, TTL_MS + 1500, "survivors took %lld ms", (long long)took);
    cr_assert_eq(h_wait_files(envdir, "env.", 7, 10000), 7);
    int world = 0;
    cr_assert_eq(ranks_in_round(2, "0", &world), 0x7u, "ranks 0..2 exactly once");
    cr_assert_eq(world, 3);
    release_workers();
    for (int i = 0; i < 3; i++)
        h_expect_exit(&a[i], 0, 20000);
    h_agent_wait(&a[3], 1000);
}

/* Mutation: rdzv_leave() returning 0 at once -> no round 2 within 6 s (lease TTL 30 s). */
Test(elastic, sigterm_leaves_at_once_without_charging)
{
    struct h_agent a[3];
    const char *extra[] = {"--min", "2", "--max", "3", "--lease-ttl", LEAVE_TTL, NULL};
    for (int i = 0; i < 3; i++)
        start(&a[i], h_fmt("n%d", i), extra, record_then_wait());
    wait_round(a, 3, 1, 30000);
    cr_assert_eq(h_wait_files(envdir, "env.", 3, 10000), 3);
    int64_t t0 = h_now_ms();
    h_agent_signal(&a[1], SIGTERM);
    struct h_agent s[2] = {a[0], a[2]};
    wait_round_after_leave(s, 2, 2, t0);
    h_expect_exit(&a[1], 143, 10000);
    /* a leave, not an eviction: the liveness ring would also move the run on without n1, by
     * revoking its lease once it stopped answering (mutation: rdzv_leave a no-op) */
    for (int i = 0; i < 2; i++)
        cr_assert_not(h_file_contains(s[i].log, "did not answer a probe either"),
                      "n1 was evicted by the liveness ring, not left: %s", s[i].log);
    cr_assert_eq(h_wait_files(envdir, "env.", 5, 10000), 5);
    int world = 0;
    cr_assert_eq(ranks_in_round(2, "0", &world), 0x3u);
    release_workers();
    h_expect_exit(&a[0], 0, 20000);
    h_expect_exit(&a[2], 0, 20000);
}

Test(elastic, arrivals_within_settle_make_one_round)
{
    struct h_agent a[4];
    const char *extra[] = {"--min", "1", "--max", "4", "--settle", "3", NULL};
    start(&a[0], "n0", extra, record_then_wait());
    wait_round(a, 1, 1, 30000);
    for (int i = 1; i < 4; i++)
        start(&a[i], h_fmt("n%d", i), extra, record_then_wait());
    wait_round(a, 4, 2, 30000);
    cr_assert_eq(h_wait_files(envdir, "env.", 5, 10000), 5);
    release_workers();
    for (int i = 0; i < 4; i++) {
        h_expect_exit(&a[i], 0, 20000);
        cr_assert_not(h_file_contains(a[i].log, "round 3 "), "one batch, one restart");
    }
}

/* Mutation: rdzv_leave() returning 0 at once -> no round 2 within 6 s (lease TTL 30 s). */
Test(elastic, spare_beyond_max_is_admitted_when_a_member_leaves)
{
    struct h_agent a[5];
    const char *extra[] = {"--min", "4", "--max", "4", "--lease-ttl", LEAVE_TTL, NULL};
    for (int i = 0; i < 4; i++)
        start(&a[i], h_fmt("n%d", i), extra, record_then_wait());
    wait_round(a, 4, 1, 30000);
    start(&a[4], "n4", extra, record_then_wait());
    cr_assert(h_log_wait(&a[4], "spare", 10000), "the fifth agent says it is a spare");
    cr_assert_not(h_file_contains(a[4].log, "round 1 "));
    int64_t t0 = h_now_ms();
    h_agent_signal(&a[0], SIGTERM);
    h_expect_exit(&a[0], 143, 10000);
    struct h_agent rest[4] = {a[1], a[2], a[3], a[4]};
    wait_round_after_leave(rest, 4, 2, t0);
    release_workers();
    for (int i = 0; i < 4; i++)
        h_expect_exit(&rest[i], 0, 20000);
}

Test(elastic, below_min_stops_workers_and_waits)
{
    struct h_agent a[3];
    const char *extra[] = {"--min", "2", "--max", "2", NULL};
    const char *cmd[] = {"/bin/sh", "-c",
                         h_fmt("echo $$ > %s/pid.$ELASTIC_NODE_ID.$ELASTIC_ROUND; exec %s "
                             "wait-file %s/go",
                             envdir, W, envdir),
                         NULL};
    for (int i = 0; i < 2; i++)
        start(&a[i], h_fmt("n%d", i), extra, cmd);
    wait_round(a, 2, 1, 30000);
    cr_assert_eq(h_wait_files(envdir, "pid.", 2, 10000), 2);
    pid_t worker = h_read_pid(h_fmt("%s/pid.n0.1", envdir));
    h_agent_signal(&a[1], SIGTERM);
    h_expect_exit(&a[1], 143, 10000);
    cr_assert(h_log_wait(&a[0], "waiting for nodes: 1/2", 10000));
    cr_assert(h_pid_gone(worker, 5000), "below min, the survivor's worker is stopped");
    start(&a[2], "n2", extra, cmd);
    struct h_agent now[2] = {a[0], a[2]};
    wait_round(now, 2, 2, 20000);
    release_workers();
    h_expect_exit(&a[0], 0, 20000);
    h_expect_exit(&a[2], 0, 20000);
}

/*
 * An agent that cannot act (SIGSTOP: a paused VM, a swap storm) must not keep its workers running
 * into the next generation: its workers' guards hold the lease's deadline and stop them on their
 * own. Once resumed, the agent knows it was fenced out, rejoins, and the stop is not charged.
 */
Test(elastic, frozen_agent_workers_are_fenced_by_their_guards)
{
    struct h_agent a[3];
    /* two workers per node: both of the frozen node's are fenced, and neither is charged */
    const char *extra[] = {"--min",          "2", "--max", "3", "--max-restarts", "0",
                           "--nproc-per-node", "2", NULL};
    const char *cmd[] = {"/bin/sh", "-c",
                         h_fmt("echo $$ > %s/pid.$ELASTIC_NODE_ID.$LOCAL_RANK.$ELASTIC_ROUND; %s "
                               "record %s && exec %s wait-file %s/go",
                               envdir, W, envdir, W, envdir),
                         NULL};
    for (int i = 0; i < 3; i++)
        start(&a[i], h_fmt("n%d", i), extra, cmd);
    /* the first round n2 runs workers in has all three (round 1, unless a loaded machine started
     * it after the settle: then round 2, after a round of n0 and n1) */
    int r0 = first_round_of(&a[2], 30000);
    wait_round(a, 3, r0, 30000);
    pid_t frozen[2];
    for (int k = 0; k < 2; k++) {
        const char *pf = h_fmt("pid.n2.%d.%d", k, r0);
        cr_assert_eq(h_wait_files(envdir, pf, 1, 10000), 1, "no %s", pf);
        frozen[k] = h_read_pid(h_fmt("%s/%s", envdir, pf));
        cr_assert_gt(frozen[k], 0);
    }
    h_agent_freeze(&a[2]);
    int64_t t0 = h_now_ms();
    bool gone = h_pid_gone(frozen[0], TTL_MS + 1500);
    gone = gone && h_pid_gone(frozen[1], (int)(t0 + TTL_MS + 1500 - h_now_ms()) > 0
                                             ? (int)(t0 + TTL_MS + 1500 - h_now_ms())
                                             : 0);
    int64_t gone_ms = h_now_ms() - t0;
    struct h_agent s[2] = {a[0], a[1]};
    wait_round(s, 2, r0 + 1, TTL_MS + 10000);
    int64_t round2_ms = h_now_ms() - t0;
    cr_log_info("agent frozen: its worker stopped by the guard after %lld ms, survivors' round "
                "2 after %lld ms (lease TTL %d ms)",
                (long long)gone_ms, (long long)round2_ms, TTL_MS);
    h_agent_signal(&a[2], SIGCONT);
    cr_assert(gone, "the frozen agent's worker still ran %d ms after SIGSTOP", TTL_MS + 1500);
    cr_assert(h_log_wait(&a[2], "fenced out", 10000), "the resumed agent knows it was fenced");
    wait_round(a, 3, r0 + 2, 20000);
    /* the round all three run (3, unless a membership change made another): complete, uncharged */
    int round, world = 0, files = h_wait_files(envdir, "env.", 16, 10000);
    cr_assert_geq(files, 16);
    unsigned seen;
    while ((seen = ranks_in_round(round = latest_round(), "0", &world)) != 0x3fu) {
        int more = h_wait_files(envdir, "env.", files + 1, 10000);
        cr_assert_gt(more, files, "round %d: ranks 0x%x of 0..5, nothing more started", round,
                     seen);
        files = more;
    }
    cr_assert_eq(world, 6);
    release_workers();
    for (int i = 0; i < 3; i++)
        h_expect_exit(&a[i], 0, 20000);
}

/* Mutation: rdzv_leave() returning 0 at once -> no round 3 within 6 s (lease TTL 30 s). */
Test(elastic, max_restarts_0_survives_scale_events)
{
    struct h_agent a[2], x;
    const char *extra[] = {"--min", "1",           "--max",   "3", "--max-restarts",
                           "0",     "--lease-ttl", LEAVE_TTL, NULL};
    for (int i = 0; i < 2; i++)
        start(&a[i], h_fmt("n%d", i), extra, record_then_wait());
    wait_round(a, 2, 1, 30000);
    int round = 1;
    for (int k = 0; k < 3; k++) { /* 3 joins + 3 leaves = 6 scale events */
        start(&x, h_fmt("x%d", k), extra, record_then_wait());
        wait_round(a, 2, ++round, 20000);
        int64_t t0 = h_now_ms();
        h_agent_signal(&x, SIGTERM);
        wait_round_after_leave(a, 2, ++round, t0);
        h_expect_exit(&x, 143, 10000);
    }
    cr_assert(h_log_wait(&a[0], "restarts 0/0, scale events 6", 5000));
    release_workers();
    for (int i = 0; i < 2; i++)
        h_expect_exit(&a[i], 0, 20000);
}

/* Mutation: rdzv_leave() returning 0 at once -> no round 2 within 6 s (lease TTL 30 s). */
Test(elastic, preemption_file_is_a_graceful_leave)
{
    struct h_agent a[2];
    const char *notice = h_fmt("%s/preempted", dir);
    const char *extra0[] = {"--min", "1", "--max", "2", "--lease-ttl", LEAVE_TTL, NULL};
    const char *extra1[] = {
        "--min", "1", "--max", "2", "--lease-ttl", LEAVE_TTL, "--preemption-file", notice, NULL};
    start(&a[0], "n0", extra0, record_then_wait());
    start(&a[1], "n1", extra1, record_then_wait());
    wait_round(a, 2, 1, 30000);
    int64_t t0 = h_now_ms();
    FILE *f = fopen(notice, "w");
    cr_assert(f);
    fclose(f);
    wait_round_after_leave(a, 1, 2, t0);
    h_expect_exit(&a[1], 143, 10000);
    cr_assert(h_file_contains(a[1].log, "preemption notice"));
    release_workers();
    h_expect_exit(&a[0], 0, 20000);
}

/*
 * Issue 19: --max-restarts 0 and a worker that exits 2 on one of two nodes. No node is lost, so
 * nothing refunds the failure: the run fails after the charge window without starting the job a
 * second time (a script with side effects must not run again when no restart was asked for).
 */
Test(elastic, max_restarts_0_failure_runs_the_job_once)
{
    /* mutation checked: rdzv_plan_failure() past the budget starting round 2 at once (the old
     * rule): the failing worker ran twice, "restarts 1/0" logged: fails */
    struct h_agent a[2];
    const char *extra[] = {"--min", "2", "--max", "2", "--max-restarts", "0", NULL};
    const char *runs = h_fmt("%s/runs", envdir);
    const char *cmd[] = {"/bin/sh", "-c",
                         h_fmt("echo \"$ELASTIC_NODE_ID $RANK $ELASTIC_ROUND\" >> %s; "
                               "[ \"$RANK\" = 0 ] && exit 2; exec %s wait-file %s/go",
                               runs, W, envdir),
                         NULL};
    for (int i = 0; i < 2; i++)
        start(&a[i], h_fmt("n%d", i), extra, cmd);
    /* round 1 (settle 1 s), then the charge window (TTL + max(1 s, TTL/2)) before the run fails */
    for (int i = 0; i < 2; i++)
        h_expect_exit(&a[i], 1, 30000);
    /* rank 0 ran once; rank 1 at most once (its node may see the failure before it starts) */
    int lines = 0, rank0 = 0, other_round = 0;
    FILE *f = fopen(runs, "r");
    cr_assert(f, "no worker ran");
    char node[64];
    int rank, round;
    while (fscanf(f, "%63s %d %d", node, &rank, &round) == 3) {
        lines++;
        rank0 += rank == 0;
        other_round += round != 1;
    }
    fclose(f);
    cr_assert_eq(rank0, 1, "the failing worker ran %d times", rank0);
    cr_assert_leq(lines, 2, "the job ran %d worker(s), more than once on each node", lines);
    cr_assert_eq(other_round, 0, "a worker ran in a round after the failure");
    /* a healthy worker that did start was stopped while the window ran */
    int ok = h_file_contains(a[0].log, "ranks 1-1") ? 0 : 1;
    if (lines == 2)
        cr_assert(h_file_contains(a[ok].log, "stopping 1 worker(s) of round 1 (a worker failed "
                                             "with --max-restarts spent"),
                  "the healthy node's worker was not stopped for the failure");
    for (int i = 0; i < 2; i++) {
        cr_assert_not(h_file_contains(a[i].log, "round 2 "), "round 2 ran");
        cr_assert_not(h_file_contains(a[i].log, "restarts 1/0"), "over the budget");
        cr_assert(h_file_contains(a[i].log, "failed: worker failures exceeded --max-restarts 0"));
    }
}

Test(elastic, worker_failure_caused_by_a_lost_peer_is_not_charged)
{
    struct h_agent a[3];
    const char *extra[] = {"--min", "2", "--max", "3", "--max-restarts", "0", NULL};
    /* rank 0 of round 1 "loses its collective" when the test says so; everyone else waits */
    const char *cmd[] = {"/bin/sh", "-c",
                         h_fmt("%s record %s || exit 9; if [ \"$RANK\" = 0 ] && "
                             "[ \"$ELASTIC_ROUND\" = 1 ]; then %s wait-file %s/broken; exit 1; "
                             "fi; exec %s wait-file %s/go",
                             W, envdir, W, envdir, W, envdir),
                         NULL};
    for (int i = 0; i < 3; i++)
        start(&a[i], h_fmt("n%d", i), extra, cmd);
    wait_round(a, 3, 1, 30000);
    /* the victim must not host rank 0, whose worker fails (arrival order decides who does) */
    int victim = h_file_contains(a[2].log, "ranks 0-0") ? 1 : 2;
    struct h_agent live[2];
    for (int i = 0, n = 0; i < 3; i++)
        if (i != victim)
            live[n++] = a[i];
    h_agent_signal(&a[victim], SIGKILL); /* the peer dies ... */
    FILE *f = fopen(h_fmt("%s/broken", envdir), "w"); /* ... and rank 0's collective breaks */
    cr_assert(f);
    fclose(f);
    /* the budget is spent, so the failure only stops the workers (failing); the loss follows
     * within the charge window and explains it: round 2, uncharged */
    wait_round(live, 2, 2, TTL_MS + 10000);
    for (int i = 0; i < 2; i++) {
        cr_assert(h_file_contains(live[i].log, "restarts 0/0, scale events 1"),
                  "refunded once the loss explained the failure");
        cr_assert_not(h_file_contains(live[i].log, "restarts 1/0"), "over the budget, even once");
    }
    release_workers();
    h_expect_exit(&live[0], 0, 20000);
    h_expect_exit(&live[1], 0, 20000);
    h_agent_wait(&a[victim], 1000);
}
