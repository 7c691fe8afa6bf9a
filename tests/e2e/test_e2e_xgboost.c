// SPDX-License-Identifier: Apache-2.0
/*
 * Real XGBoost under the built-in rabit tracker (issue 20): elastic-agent processes on the file
 * backend run examples/xgboost/train_elastic.py with Debian's python3-xgboost and
 * `--env-style torch,dmlc` and no --dmlc-tracker, so no other process serves the tracker. The
 * script asserts that rabit's rank is DMLC_TASK_ID and RANK, trains on its shard, saves the
 * booster every 5 iterations and continues from it on every start; it exits 0 only at the
 * target accuracy. Cases: 3 agents x 1 worker, 2 agents x 2 workers, and a SIGKILL of the node
 * serving the tracker during training: the survivors' next round serves a new tracker for
 * world 2, continues from the saved booster and finishes.
 *
 * Waits are on log lines and files (inotify) and pidfds with deadlines, never sleeps. Without
 * an importable xgboost (/usr/bin/python3, package python3-xgboost, installed by
 * scripts/install-deps.sh --test) the test fails: it never skips.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

#define PYTHON "/usr/bin/python3"
#define TRAIN EA_SOURCE_DIR "/examples/xgboost/train_elastic.py"
#define TTL "1"

static char dir[256], state[300], envdir[300], ckpt[300];
static struct h_agent agents[3];

static void setup(void)
{
    h_suite_dirs("xgboost", dir, state, envdir);
    snprintf(ckpt, sizeof(ckpt), "%s/ckpt", dir);
    cr_assert_eq(mkdir(ckpt, 0755), 0);
}

static void teardown(void)
{
    h_kill_agents(); /* whatever a failed assertion left running */
    if (getenv("EA_E2E_KEEP"))
        cr_log_warn("kept %s", dir);
    else
        h_rmdir(dir);
}

TestSuite(xgboost, .init = setup, .fini = teardown, .timeout = 120);

/* Fail (never skip) unless /usr/bin/python3 imports xgboost. */
static void require_xgboost(void)
{
    FILE *p = popen(PYTHON " -c 'import xgboost; print(xgboost.__version__)' 2>&1", "r");
    cr_assert(p, "cannot run %s: %s", PYTHON, strerror(errno));
    char out[4096];
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    cr_assert(pclose(p) == 0,
              "XGBoost is not importable by " PYTHON " (Debian package python3-xgboost; "
              "scripts/install-deps.sh --test installs it). The test needs it and does not "
              "skip. Python said:\n%s",
              out);
}

/* Agent `name` of a run of `nodes` (min `min`) x `nproc`, training `rounds` iterations. */
static void start(struct h_agent *a, const char *name, int min, int nodes, int nproc, int rounds,
                  const char *step_time)
{
    /* --settle 5: a round commits at once when all `nodes` are there, so only a slow start
     * (loaded machine) waits, instead of committing a smaller first round */
    /* clang-format off */
    const char *args[] = {
        "--run-id", "xgb", "--node-id", name, "--state-dir", state,
        "--min", h_fmt("%d", min), "--max", h_fmt("%d", nodes),
        "--nproc-per-node", h_fmt("%d", nproc), "--settle", "5", "--lease-ttl", TTL,
        "--stop-timeout", "2", "--max-restarts", "2", "--local-addr", "127.0.0.1",
        "--env-style", "torch,dmlc", "--tee",
        "--", PYTHON, TRAIN, "--ckpt-dir", ckpt, "--rounds", h_fmt("%d", rounds),
        "--step-time", step_time, NULL};
    /* clang-format on */
    h_agent_start(a, dir, name, args);
}

static void wait_log(const struct h_agent *a, const char *needle, int timeout_ms)
{
    bool ok = h_log_wait(a, needle, timeout_ms);
    if (!ok)
        h_show_log(a);
    cr_assert(ok, "'%s' not in %s within %d ms", needle, a->log, timeout_ms);
}

/* The agent of `a[0..n)` whose log has `needle` (-1 if none). */
static int which_log(const struct h_agent *a, int n, const char *needle)
{
    for (int i = 0; i < n; i++)
        if (h_file_contains(a[i].log, needle))
            return i;
    return -1;
}

/* n agents x nproc workers train to the target; exactly one served the tracker, every rank
 * linked through it, rank 0's evaluation lines came through `print`. */
static void train(int n, int nproc)
{
    require_xgboost();
    for (int i = 0; i < n; i++)
        start(&agents[i], h_fmt("n%d", i), n, n, nproc, 30, "0");
    for (int i = 0; i < n; i++)
        h_expect_exit(&agents[i], 0, 60000);
    int world = n * nproc;
    const char *serving = h_fmt("serving the rabit tracker for %d worker(s)", world);
    int t = which_log(agents, n, serving);
    cr_assert_geq(t, 0, "no agent says '%s'", serving);
    for (int i = 0; i < n; i++)
        cr_assert(i == t || !h_file_contains(agents[i].log, "serving the rabit tracker"),
                  "two trackers");
    cr_assert(h_file_contains(agents[t].log,
                              h_fmt("all %d worker(s) have their ranks and links", world)));
    cr_assert(h_file_contains(agents[t].log, h_fmt("all %d worker(s) shut down", world)));
    cr_assert(h_file_contains(agents[t].log, "[0]: [29]\ttrain-error:"), "no print relayed");
    /* the tracker admits only the round's members (127.0.0.1 here), one start per rank, a few
     * connections per worker: real XGBoost workers never hit any of it */
    cr_assert_not(h_file_contains(agents[t].log, "refusing the connection"), "a worker refused");
    cr_assert_not(h_file_contains(agents[t].log, "refused: rank"), "a worker's start refused");
    for (int r = 0; r < world; r++) {
        const char *line = h_fmt("rank %d of %d: accuracy", r, world);
        bool found = false;
        for (int i = 0; i < n && !found; i++)
            found = h_file_contains(agents[i].out, line);
        cr_assert(found, "no '%s' in the workers' output", line);
    }
}

/* Mutation check: builtin_tracker() (agent.c) always false: no tracker, no DMLC_TRACKER_URI,
 * the workers fail. */
Test(xgboost, three_agents_one_worker_each)
{
    train(3, 1);
}

Test(xgboost, two_agents_two_workers_each)
{
    train(2, 2);
}

/* Mutation check: serving every round's tracker for the first round's world (3) fails this:
 * round 2's workers are refused (or wait for a rank that never comes). */
Test(xgboost, node_serving_the_tracker_is_killed)
{
    require_xgboost();
    for (int i = 0; i < 3; i++)
        start(&agents[i], h_fmt("n%d", i), 2, 3, 1, 60, "0.05");
    const char *serving = "serving the rabit tracker for 3 worker(s)";
    for (int i = 0; i < 3; i++)
        wait_log(&agents[i], "round 1 (generation", 30000);
    int t = which_log(agents, 3, serving);
    cr_assert_geq(t, 0, "no agent serves the tracker of round 1");
    /* training is under way once rank 0 saved a booster */
    cr_assert_geq(h_wait_files(ckpt, "booster.json", 1, 30000), 1, "no booster saved");
    h_agent_signal(&agents[t], SIGKILL);
    cr_assert_eq(h_agent_wait(&agents[t], 5000), 128 + SIGKILL);
    for (int i = 0; i < 3; i++)
        if (i != t)
            h_expect_exit(&agents[i], 0, 60000);
    int t2 = which_log(agents, 3, "serving the rabit tracker for 2 worker(s)");
    cr_assert(t2 >= 0 && t2 != t, "no survivor served a tracker for world 2");
    bool resumed = false, finished = false;
    for (int i = 0; i < 3; i++) {
        if (i == t)
            continue;
        FILE *f = fopen(agents[i].out, "r");
        cr_assert(f);
        char line[512];
        while (fgets(line, sizeof(line), f)) {
            const char *p = strstr(line, " of 2: continuing from iteration ");
            if (p && atoi(p + strlen(" of 2: continuing from iteration ")) > 0)
                resumed = true;
            finished |= strstr(line, " of 2: accuracy ") && strstr(line, "after 60 iterations");
        }
        fclose(f);
    }
    cr_assert(resumed, "world 2 did not continue from the saved booster");
    cr_assert(finished, "world 2 did not finish the 60 iterations");
}
