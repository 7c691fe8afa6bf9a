// SPDX-License-Identifier: Apache-2.0
/*
 * Warm spares end to end (--warm-workers, issue 32; docs/warm.md): elastic-agent processes on the
 * file backend, the spares are ea-testworker's `warm` mode taking their assignment through
 * include/elastic_agent_assign.h. A parked worker gets the environment a cold worker gets; a
 * membership change (a node added, a node killed) hands its ranks to spares parked before the
 * change began; a spare that exits while parked, sends a malformed line or never calls the
 * helper is a clear message and a cold start (or, once it has its rank, a failed start); and
 * nothing of a spare is left running once its agent is gone, however it went.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

#define W EA_HELPERS_DIR "/ea-testworker"
#define TTL "1"

static char dir[256], state[300], envdir[300];

static void setup(void)
{
    h_suite_dirs("warm", dir, state, envdir);
}

static void teardown(void)
{
    h_kill_agents(); /* whatever a failed assertion left running */
    if (getenv("EA_E2E_KEEP"))
        cr_log_warn("kept %s", dir);
    else
        h_rmdir(dir);
}

TestSuite(warm, .init = setup, .fini = teardown, .timeout = 120);

/* An agent of run `run` on the file store `st`, its logs in `logs`/<name>.{log,out}. */
static void start_in(struct h_agent *a, const char *logs, const char *st, const char *run,
                     const char *name, const char *const *extra, const char *const *cmd)
{
    const char *base[] = {"--state-dir", st, "--run-id", run, "--node-id", name,
                            "--settle", "1", "--stop-timeout", "2", "--lease-ttl", TTL, NULL};
    h_agent_start_argv(a, logs, name, base, extra, cmd);
}

static void start(struct h_agent *a, const char *name, const char *const *extra,
                  const char *const *cmd)
{
    start_in(a, dir, state, "warm", name, extra, cmd);
}

static void wait_log(const struct h_agent *a, const char *needle, int timeout_ms)
{
    bool ok = h_log_wait(a, needle, timeout_ms);
    if (!ok)
        h_show_log(a);
    cr_assert(ok, "'%s' not in %s within %d ms", needle, a->log, timeout_ms);
}

/* pids of the files "<prefix>.<pid>" (parked.<pid>) or "env.<rank>.<pid>" in d, into out. */
static int pids_of(const char *d, const char *prefix, pid_t *out, int max)
{
    DIR *dd = opendir(d);
    cr_assert(dd);
    int n = 0;
    size_t len = strlen(prefix);
    for (struct dirent *e; (e = readdir(dd)) && n < max;) {
        if (strncmp(e->d_name, prefix, len) != 0 || e->d_name[len] != '.')
            continue;
        const char *dot = strrchr(e->d_name, '.');
        out[n++] = (pid_t)atoi(dot + 1);
    }
    closedir(dd);
    return n;
}

static bool in(pid_t pid, const pid_t *v, int n)
{
    for (int i = 0; i < n; i++)
        if (v[i] == pid)
            return true;
    return false;
}

/* The env.<rank>.<pid> files of round `round` (their paths and the pids). */
static int round_files(int round, char paths[][512], pid_t *pids, int max)
{
    DIR *d = opendir(envdir);
    cr_assert(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < max;) {
        if (strncmp(e->d_name, "env.", 4) != 0)
            continue;
        const char *p = h_fmt("%s/%s", envdir, e->d_name);
        const char *r = h_env_value(p, "ELASTIC_ROUND");
        if (!r || atoi(r) != round)
            continue;
        snprintf(paths[n], 512, "%s", p);
        pids[n++] = (pid_t)atoi(strrchr(e->d_name, '.') + 1);
    }
    closedir(d);
    return n;
}

/* Wait until `count` workers recorded their environment in round `round`. */
static void wait_round_files(int round, int count, int timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    char paths[16][512];
    pid_t pids[16];
    for (int have = 0; (have = round_files(round, paths, pids, 16)) < count;) {
        int left = (int)(deadline - h_now_ms());
        cr_assert_gt(left, 0, "round %d: %d of %d workers recorded their environment", round,
                     have, count);
        h_wait_files(envdir, "env.", h_count_files(envdir, "env.") + 1, left);
    }
}

/* The parent of `pid` from /proc (its exec-guard, for a worker), or -1 once it is gone. */
static pid_t parent_of(pid_t pid)
{
    char buf[512];
    FILE *f = fopen(h_fmt("/proc/%d/stat", (int)pid), "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    int ppid = -1;
    char st;
    if (!rp || sscanf(rp + 1, " %c %d", &st, &ppid) != 2)
        return -1;
    return (pid_t)ppid;
}

/* No process of process group `pgid` (a worker leads its own) is left. The worker's guard keeps
 * its zombie (a member of the group) until it has removed everything else, then reaps it and
 * exits: wait for the guard too. */
static void assert_group_gone(pid_t pgid)
{
    pid_t guard = parent_of(pgid);
    cr_assert(h_pid_gone(pgid, 10000), "worker %d still runs", (int)pgid);
    if (guard > 1)
        cr_assert(h_pid_gone(guard, 10000), "the guard %d of worker %d still runs", (int)guard,
                  (int)pgid);
    errno = 0;
    cr_assert(kill(-pgid, 0) < 0 && errno == ESRCH, "process group %d still has a process",
              (int)pgid);
}

static void assert_all_gone(void)
{
    pid_t pids[64];
    int n = pids_of(envdir, "parked", pids, 64);
    for (int i = 0; i < n; i++)
        assert_group_gone(pids[i]);
    char paths[16][512];
    for (int round = 1; round < 8; round++) {
        int k = round_files(round, paths, pids, 16);
        for (int i = 0; i < k; i++)
            assert_group_gone(pids[i]);
    }
}

static const char *const round_vars[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR",
                                         "MASTER_PORT", "GROUP_RANK", "ELASTIC_GENERATION",
                                         "ELASTIC_ROUND", "TORCHELASTIC_RESTART_COUNT", NULL};

/* The names (sorted, one a line) and values of a recorded environment. */
static char *read_env(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s", path);
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len = getdelim(&buf, &cap, '\0', f);
    fclose(f);
    cr_assert_gt(len, 0);
    return buf;
}

/* Variables whose value names a place of this agent's private directory or this round's port. */
static bool per_run(const char *name)
{
    /* ELASTIC_HEARTBEAT_FILE: given by default since issue 40 (the step for progress-aware
     * restarts), cold and warm alike, in the agent's private directory */
    static const char *const v[] = {"MASTER_PORT", "TORCHELASTIC_ERROR_FILE",
                                    "ELASTIC_TOPOLOGY_FILE", "ELASTIC_GENERATION",
                                    "ELASTIC_HEARTBEAT_FILE", NULL};
    for (int i = 0; v[i]; i++)
        if (strcmp(name, v[i]) == 0)
            return true;
    return false;
}

/* Every line NAME=VALUE of `a` is in `b` (values of per_run names: only the name), and the other
 * way round: the same environment. */
static void assert_same_env(const char *a_path, const char *b_path)
{
    char *a = read_env(a_path), *b = read_env(b_path);
    for (int pass = 0; pass < 2; pass++) {
        char *x = pass ? b : a;
        for (char *line = x, *nl; *line; line = nl + 1) {
            nl = strchr(line, '\n');
            cr_assert(nl);
            *nl = '\0';
            char *eq = strchr(line, '=');
            cr_assert(eq, "%s", line);
            char name[256];
            snprintf(name, sizeof(name), "%.*s", (int)(eq - line), line);
            const char *other = pass ? h_env_value(a_path, name) : h_env_value(b_path, name);
            cr_assert(other, "%s is in %s but not in %s", name, pass ? b_path : a_path,
                      pass ? a_path : b_path);
            if (!per_run(name))
                cr_assert_str_eq(other, eq + 1, "%s differs: '%s' (%s) vs '%s'", name, eq + 1,
                                 pass ? b_path : a_path, other);
            *nl = '\n';
        }
    }
    free(a);
    free(b);
}

Test(warm, parked_worker_gets_what_a_cold_worker_gets)
{
    /* a cold run and a warm run of one node with two local ranks, otherwise alike */
    char cold_env[300];
    snprintf(cold_env, sizeof(cold_env), "%s/cold", dir);
    cr_assert_eq(mkdir(cold_env, 0755), 0);
    struct h_agent c, w;
    const char *ccmd[] = {W, "warm", cold_env, NULL};
    const char *extra[] = {"--min", "1", "--max", "1", "--nproc-per-node", "2", NULL};
    start_in(&c, cold_env, h_fmt("%s/cold-state", dir), "warm", "n0", extra, ccmd);
    h_expect_exit(&c, 0, 30000);
    const char *wcmd[] = {W, "warm", envdir, NULL};
    const char *events = h_fmt("%s/events.jsonl", dir);
    const char *wextra[] = {"--min", "1", "--max", "1", "--nproc-per-node", "2",
                            "--warm-workers", "--events", events, NULL};
    start(&w, "n0", wextra, wcmd);
    h_expect_exit(&w, 0, 30000);
    cr_assert(h_file_contains(w.log, "round 1: 2 of 2 local worker(s) are warm spares"));
    cr_assert(h_file_contains(events, "\"event\":\"workers_started\""), "%s", events);
    cr_assert(h_file_contains(events, "\"warm\":2"), "%s", events);
    cr_assert_not(h_file_contains(c.log, "warm spare"));

    char paths[16][512];
    pid_t pids[16];
    cr_assert_eq(round_files(1, paths, pids, 16), 2);
    for (int i = 0; i < 2; i++) {
        /* the worker that took rank r was parked first: its environment had no rank then */
        const char *parked = h_fmt("%s/parked.%d", envdir, (int)pids[i]);
        cr_assert(access(parked, F_OK) == 0, "the worker %d of round 1 was not parked",
                  (int)pids[i]);
        cr_assert(h_env_value(parked, "ELASTIC_ASSIGN_FD"), "%s", parked);
        const char *hint = h_env_value(parked, "ELASTIC_ASSIGN_LOCAL_RANK");
        cr_assert(hint, "%s", parked);
        cr_assert_str_eq(hint, h_env_value(paths[i], "LOCAL_RANK"), "the spare of local rank %s "
                         "became local rank %s", hint, h_env_value(paths[i], "LOCAL_RANK"));
        for (int k = 0; round_vars[k]; k++)
            cr_assert_null(h_env_value(parked, round_vars[k]), "a parked worker has %s",
                           round_vars[k]);
        cr_assert_null(h_env_value(paths[i], "ELASTIC_ASSIGN_FD"));
        const char *rank = h_env_value(paths[i], "RANK");
        cr_assert(rank);
        /* ... and after its assignment, the cold worker of that rank's environment */
        char cold[600] = "", prefix[64];
        snprintf(prefix, sizeof(prefix), "env.%s.", rank);
        DIR *d = opendir(cold_env);
        for (struct dirent *e; (e = readdir(d));)
            if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
                snprintf(cold, sizeof(cold), "%s/%s", cold_env, e->d_name);
        closedir(d);
        cr_assert(cold[0], "no cold worker of rank %s", prefix);
        assert_same_env(paths[i], cold);
    }
    assert_all_gone();
}

static const char *const *warm_cmd(void)
{
    static const char *cmd[5];
    cmd[0] = W;
    cmd[1] = "warm";
    cmd[2] = envdir;
    cmd[3] = h_fmt("%s/go", envdir);
    cmd[4] = NULL;
    return cmd;
}

static void release_workers(void)
{
    FILE *f = fopen(h_fmt("%s/go", envdir), "w");
    cr_assert(f);
    fclose(f);
}

/* Round `round`'s workers were all parked before it: their pids are in `before`, except the
 * worker of node `joiner` (NULL: none), which must have been parked all the same. */
static void assert_round_warm(int round, int workers, const pid_t *before, int n_before,
                              const char *joiner)
{
    wait_round_files(round, workers, 30000);
    char paths[16][512];
    pid_t pids[16];
    int n = round_files(round, paths, pids, 16);
    cr_assert_eq(n, workers);
    for (int i = 0; i < n; i++) {
        if (joiner && strcmp(h_env_value(paths[i], "ELASTIC_NODE_ID"), joiner) == 0) {
            cr_assert(access(h_fmt("%s/parked.%d", envdir, (int)pids[i]), F_OK) == 0,
                      "round %d: the joiner's worker %d was not parked", round, (int)pids[i]);
            continue;
        }
        cr_assert(in(pids[i], before, n_before),
                  "round %d: worker %d (%s, node %s) was not parked before the change began",
                  round, (int)pids[i], paths[i], h_env_value(paths[i], "ELASTIC_NODE_ID"));
        cr_assert_str_eq(h_env_value(paths[i], "WORLD_SIZE"), h_fmt("%d", workers));
    }
}

Test(warm, membership_changes_hand_ranks_to_spares_parked_before_them)
{
    struct h_agent a[3];
    const char *extra[] = {"--nnodes", "2:3", "--warm-workers", NULL};
    start(&a[0], "n0", extra, warm_cmd());
    start(&a[1], "n1", extra, warm_cmd());
    for (int i = 0; i < 2; i++)
        wait_log(&a[i], "round 1 (", 30000);
    wait_round_files(1, 2, 30000);
    /* round 1's workers (parked before it) and the spares parked after it started */
    cr_assert_eq(h_wait_files(envdir, "parked.", 4, 30000), 4, "no spares parked in round 1");

    /* a node joins: round 2 takes the spares parked before it started */
    pid_t before[64];
    int nb = pids_of(envdir, "parked", before, 64);
    int64_t t_join = h_now_ms();
    start(&a[2], "n2", extra, warm_cmd());
    for (int i = 0; i < 3; i++)
        wait_log(&a[i], "round 2 (", 30000);
    assert_round_warm(2, 3, before, nb, "n2");
    for (int i = 0; i < 3; i++)
        cr_assert(h_file_contains(a[i].log, "round 2: 1 of 1 local worker(s) are warm spares"),
                  "%s", a[i].log);
    cr_log_info("join -> round 2 running on spares: %lld ms", (long long)(h_now_ms() - t_join));

    /* a node dies: round 3 (world 2) takes the spares parked during round 2 */
    cr_assert_eq(h_wait_files(envdir, "parked.", 8, 30000), 8, "no spares parked in round 2");
    nb = pids_of(envdir, "parked", before, 64);
    h_agent_signal(&a[2], SIGKILL);
    cr_assert_eq(h_agent_wait(&a[2], 5000), 128 + SIGKILL);
    for (int i = 0; i < 2; i++)
        wait_log(&a[i], "round 3 (", 30000);
    assert_round_warm(3, 2, before, nb, NULL);
    /* the recovery clock: "assigned" (commit -> every spare took its rank) instead of "spawn" */
    for (int i = 0; i < 2; i++) {
        /* the cause: node_lost (the liveness ring saw it) or membership (its lease expired) */
        wait_log(&a[i], "round 3: recovery phases (", 10000);
        char line[512] = "";
        FILE *lf = fopen(a[i].log, "r");
        while (fgets(line, sizeof(line), lf) && !strstr(line, "round 3: recovery phases"))
            ;
        fclose(lf);
        cr_assert(strstr(line, ", assigned ") && !strstr(line, "spawn"), "%s", line);
    }

    release_workers();
    for (int i = 0; i < 2; i++)
        h_expect_exit(&a[i], 0, 30000);
    assert_all_gone(); /* the spares of a round that never came, and the killed node's */
}

Test(warm, spare_that_exits_while_parked_is_replaced_by_a_cold_start)
{
    /* the first spare parked exits 3 before calling the helper */
    const char *script = h_fmt("if [ -n \"$ELASTIC_ASSIGN_FD\" ] && mkdir %s/died 2>/dev/null; "
                               "then exit 3; fi; exec %s warm %s",
                               dir, W, envdir);
    const char *cmd[] = {"/bin/sh", "-c", script, NULL};
    const char *extra[] = {"--min", "2", "--max", "2", "--warm-workers", NULL};
    struct h_agent a[2];
    start(&a[0], "n0", extra, cmd);
    wait_log(&a[0], "local rank 0's warm spare (pid ", 30000);
    wait_log(&a[0], "exited while parked (exit code 3), before it called "
                    "elastic_agent.wait_for_assignment(); the next round starts this node's "
                    "workers cold",
             1000);
    start(&a[1], "n1", extra, cmd);
    for (int i = 0; i < 2; i++)
        h_expect_exit(&a[i], 0, 30000);
    char paths[16][512];
    pid_t pids[16];
    cr_assert_eq(round_files(1, paths, pids, 16), 2);
    for (int i = 0; i < 2; i++) {
        bool parked = access(h_fmt("%s/parked.%d", envdir, (int)pids[i]), F_OK) == 0;
        bool on_n0 = strcmp(h_env_value(paths[i], "ELASTIC_NODE_ID"), "n0") == 0;
        /* n0's worker started cold; n1's was its spare */
        cr_assert(parked != on_n0, "round 1: %s's worker %d was %s", on_n0 ? "n0" : "n1",
                  (int)pids[i], parked ? "a spare" : "cold");
    }
    cr_assert_not(h_file_contains(a[0].log, "are warm spares"));
    cr_assert(h_file_contains(a[1].log, "round 1: 1 of 1 local worker(s) are warm spares"));
    assert_all_gone();
}

Test(warm, malformed_line_is_refused_and_the_round_starts_cold)
{
    const char *cmd[] = {W, "warm-bad", envdir, NULL};
    const char *extra[] = {"--min", "2", "--max", "2", "--warm-workers", NULL};
    const char *cold[] = {"--min", "2", "--max", "2", NULL};
    struct h_agent a[2];
    start(&a[0], "n0", extra, cmd);
    wait_log(&a[0], "sent a malformed line on ELASTIC_ASSIGN_FD: not JSON", 30000);
    wait_log(&a[0], "'hello, agent' (expected {\"ready\":1,\"pid\":N}); the next round starts "
                    "this node's workers cold",
             1000);
    start(&a[1], "n1", cold, cmd);
    for (int i = 0; i < 2; i++)
        h_expect_exit(&a[i], 0, 30000); /* --max-restarts 0: nothing was charged */
    char paths[16][512];
    pid_t pids[16];
    cr_assert_eq(round_files(1, paths, pids, 16), 2, "both workers ran round 1, cold");
    cr_assert_not(h_file_contains(a[0].log, "are warm spares"));
    assert_all_gone();
}

Test(warm, spare_that_never_calls_the_helper_fails_its_start)
{
    /* `hang` never sends a ready line: once it has its rank, that is a failed start */
    const char *cmd[] = {W, "hang", NULL};
    const char *extra[] = {"--min", "1", "--max", "1", "--warm-workers",
                           "--worker-startup-timeout", "1", NULL};
    struct h_agent a;
    start(&a, "n0", extra, cmd);
    h_expect_exit(&a, 1, 30000);
    const char *why = "did not call elastic_agent.wait_for_assignment() (no ready line on "
                      "ELASTIC_ASSIGN_FD) within --worker-startup-timeout 1 s of its start";
    cr_assert(h_file_contains(a.log, h_fmt("worker rank 0: local rank 0's warm spare (pid ")),
              "%s", a.log);
    cr_assert(h_file_contains(a.log, why));
    cr_assert(h_file_contains(a.log, "ea-testworker FAILED"), "no failure table");
    /* the failure table carries the same reason */
    cr_assert(h_file_contains(a.log, "  traceback : local rank 0's warm spare (pid "),
              "the failure table does not say why");
    cr_assert_not(h_file_contains(a.log, "no heartbeat"), "taken for a hang");
}

Test(warm, nothing_of_a_spare_is_left_when_its_agent_is_stopped_or_killed)
{
    const char *extra[] = {"--min", "1", "--max", "1", "--warm-workers", NULL};
    struct h_agent a, b;
    start_in(&a, dir, h_fmt("%s/sa", dir), "ra", "na", extra, warm_cmd());
    start_in(&b, dir, h_fmt("%s/sb", dir), "rb", "nb", extra, warm_cmd());
    /* each: its round's worker, and a spare parked for the next round */
    cr_assert_eq(h_wait_files(envdir, "parked.", 4, 30000), 4);
    wait_round_files(1, 2, 30000);
    h_agent_signal(&a, SIGTERM);
    h_expect_exit(&a, 128 + SIGTERM, 30000);
    h_agent_signal(&b, SIGKILL); /* its guards stop what it started: the death signal */
    cr_assert_eq(h_agent_wait(&b, 5000), 128 + SIGKILL);
    assert_all_gone();
}

Test(warm, frozen_agents_spares_are_stopped_by_their_guards)
{
    /* a frozen node's workers are stopped by the fence before the others can declare it dead:
     * its parked spares too, they run under the same guards */
    const char *extra[] = {"--min", "1", "--max", "1", "--warm-workers", NULL};
    struct h_agent a;
    start(&a, "n0", extra, warm_cmd());
    cr_assert_eq(h_wait_files(envdir, "parked.", 2, 30000), 2);
    wait_round_files(1, 1, 30000);
    pid_t pids[4];
    cr_assert_eq(pids_of(envdir, "parked", pids, 4), 2);
    h_agent_freeze(&a);
    int64_t t0 = h_now_ms();
    for (int i = 0; i < 2; i++)
        cr_assert(h_pid_gone(pids[i], 10000), "worker %d outlived its frozen agent's lease",
                  (int)pids[i]);
    cr_log_info("agent frozen -> its worker and its spare stopped by their guards: %lld ms "
                "(lease TTL " TTL " s)",
                (long long)(h_now_ms() - t0));
    h_agent_signal(&a, SIGKILL);
    h_agent_signal(&a, SIGCONT);
    h_agent_wait(&a, 5000);
    assert_all_gone();
}

Test(warm, python_and_c_workers_take_their_assignment_through_the_helpers)
{
    /* python/elastic_agent from the checkout, by /usr/bin/python3 */
    setenv("PYTHONPATH", EA_SOURCE_DIR "/python", 1);
    const char *py = "import elastic_agent, os, sys\n"
                     "parked = 'ELASTIC_ASSIGN_FD' in os.environ and 'RANK' not in os.environ\n"
                     "a = elastic_agent.wait_for_assignment()\n"
                     "p = os.path.join(sys.argv[1], 'py.%s.%d' % (os.environ['RANK'], os.getpid()))\n"
                     "open(p, 'w').write('%s %s %s %s' % (parked, a['warm'], a['rank'],\n"
                     "                    'ELASTIC_ASSIGN_FD' in os.environ))\n";
    const char *cmd[] = {"/usr/bin/python3", "-c", py, envdir, NULL};
    const char *extra[] = {"--min", "1", "--max", "1", "--nproc-per-node", "2", "--warm-workers",
                           NULL};
    struct h_agent a, c;
    start(&a, "py", extra, cmd);
    h_expect_exit(&a, 0, 60000);
    unsetenv("PYTHONPATH");
    cr_assert(h_file_contains(a.log, "round 1: 2 of 2 local worker(s) are warm spares"));
    cr_assert_eq(h_count_files(envdir, "py."), 2);
    DIR *d = opendir(envdir);
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "py.", 3) != 0)
            continue;
        int rank = atoi(e->d_name + 3);
        char buf[128];
        FILE *f = fopen(h_fmt("%s/%s", envdir, e->d_name), "r");
        cr_assert(f && fgets(buf, sizeof(buf), f));
        fclose(f);
        /* parked without a rank, warm, the rank its environment says, the fd variable gone */
        cr_assert_str_eq(buf, h_fmt("True True %d False", rank));
    }
    closedir(d);

    /* examples/c/warm_worker.c */
    const char *ccmd[] = {EA_HELPERS_DIR "/ea-warm-example", NULL};
    const char *cextra[] = {"--min", "1", "--max", "1", "--warm-workers", "--tee", NULL};
    start_in(&c, dir, h_fmt("%s/c-state", dir), "c", "c", cextra, ccmd);
    h_expect_exit(&c, 0, 30000);
    cr_assert(h_file_contains(c.out, "rank 0 of 1 (generation "), "%s", c.out);
    cr_assert(h_file_contains(c.out, "), from a warm spare"), "%s", c.out);
}
