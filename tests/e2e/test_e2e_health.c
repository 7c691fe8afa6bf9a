// SPDX-License-Identifier: Apache-2.0
/*
 * Hang detection end to end (issue 21): real agents on the file backend. A worker that never
 * beats is caught by --worker-startup-timeout; a worker whose beats keep coming through slow
 * steps is left alone; and with real PyTorch (gloo, CPU; examples/pytorch/train_elastic.py) a
 * rank that stops beating and blocks before an all-reduce is stopped with its group, the run
 * restarts within 6 s of the hang and finishes, and the failure names the hung rank.
 * Waits are on log lines and files (inotify) and pidfds with deadlines, never sleeps.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

#define PYTHON "/usr/bin/python3"
#define TRAIN EA_SOURCE_DIR "/examples/pytorch/train_elastic.py"

static char dir[256], state[300], envdir[300];

static void setup(void)
{
    h_suite_dirs("health", dir, state, envdir);
}

static void teardown(void)
{
    h_kill_agents();
    if (getenv("EA_E2E_KEEP"))
        cr_log_warn("kept %s", dir);
    else
        h_rmdir(dir);
}

TestSuite(health, .init = setup, .fini = teardown, .timeout = 120);

static void start(struct h_agent *a, const char *name, const char *const *extra,
                  const char *const *cmd)
{
    const char *base[] = {"--state-dir", state, "--run-id", "hb", "--node-id", name,
                            "--stop-timeout", "2", NULL};
    h_agent_start_argv(a, dir, name, base, extra, cmd);
}

/* `elastic-agent status` of the run, into a static buffer. */
static const char *status_text(void)
{
    static char out[16384];
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s status --run-id hb --state-dir %s 2>&1", EA_AGENT_BIN, state);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    pclose(p);
    return out;
}

/* mutation: hb_check ignoring ranks that never beat (no startup deadline) → the agent does not
 * exit within the deadline */
Test(health, worker_that_never_beats_is_caught_by_the_startup_timeout)
{
    struct h_agent a;
    const char *extra[] = {"--worker-heartbeat-timeout", "60", "--worker-startup-timeout", "1",
                           "--max-restarts", "0", NULL};
    const char *cmd[] = {"sleep", "60", NULL};
    int64_t t0 = h_now_ms();
    start(&a, "n0", extra, cmd);
    h_expect_exit(&a, 1, 20000);
    cr_assert_lt(h_now_ms() - t0, 15000, "the startup timeout took too long");
    cr_assert(h_file_contains(a.log, "rank 0 hung: no first heartbeat within 1.0 s of its start "
                                     "(--worker-startup-timeout)"));
    cr_assert(h_file_contains(a.log, "traceback : rank 0 hung"), "not in the failure table");
    cr_assert(strstr(status_text(), "rank 0 hung: no first heartbeat"), "status: %s",
              status_text());
}

/* mutation: refresh() not taking a newer mtime as a beat → the slow worker is called hung */
Test(health, beats_that_keep_coming_keep_a_slow_step_alive)
{
    struct h_agent a;
    const char *extra[] = {"--worker-heartbeat-timeout", "2", "--max-restarts", "0", NULL};
    /* steps of 0.7 s each beat (the echo form and the touch form): 12 of them take 4 timeouts */
    const char *cmd[] = {
        "sh", "-c",
        "for i in 1 2 3 4 5 6; do echo $i > \"$ELASTIC_HEARTBEAT_FILE\"; sleep 0.7; "
        "touch \"$ELASTIC_HEARTBEAT_FILE\"; sleep 0.7; done",
        NULL};
    start(&a, "n0", extra, cmd);
    h_expect_exit(&a, 0, 30000);
    cr_assert_not(h_file_contains(a.log, "hung"), "a false hang");
}

/* Without the option (and without progress-aware restarts, which read the step from the same
 * file: docs/restarts.md) no worker sees ELASTIC_HEARTBEAT_FILE, not even an inherited one.
 * mutation: ELASTIC_HEARTBEAT_FILE left out of workerenv.c's owned names → the worker exits 1 */
Test(health, no_heartbeat_file_when_off)
{
    struct h_agent a;
    const char *extra[] = {"--max-restarts-without-progress", "0", "--straggler-threshold", "0",
                           NULL};
    const char *cmd[] = {"sh", "-c", "test -z \"$ELASTIC_HEARTBEAT_FILE\"", NULL};
    setenv("ELASTIC_HEARTBEAT_FILE", "/tmp/inherited", 1); /* never inherited either */
    start(&a, "n0", extra, cmd);
    unsetenv("ELASTIC_HEARTBEAT_FILE");
    h_expect_exit(&a, 0, 20000);
}

/* Which of the two agents logged `needle`; NULL if neither. */
static struct h_agent *who_logged(struct h_agent *a, const char *needle)
{
    for (int i = 0; i < 2; i++)
        if (h_file_contains(a[i].log, needle))
            return &a[i];
    return NULL;
}

/* mutation: agent.c's check_hang() not called → nothing restarts within 6 s of the hang */
Test(health, pytorch_rank_that_stops_beating_is_restarted_within_6_s, .timeout = 240)
{
    h_require_torch();
    char ckpt[400], events[400];
    snprintf(ckpt, sizeof(ckpt), "%s/ckpt", dir);
    snprintf(events, sizeof(events), "%s/events.jsonl", dir);
    cr_assert_eq(mkdir(ckpt, 0755), 0);
    struct h_agent a[2];
    const char *extra[] = {"--min", "2", "--max", "2", "--settle", "1", "--max-restarts", "1",
                           "--worker-heartbeat-timeout", "5", "--worker-startup-timeout", "120",
                           "--events", events, "--tee", NULL};
    /* 2 ranks x 4 steps per epoch: rank 1 hangs at step 5 (epoch 2), once. Steps 0.3 s apart,
     * so the hung rank's last beat (step 4) is clearly older than its peer's (step 5, which then
     * blocks in the all-reduce and stops beating too): the hung rank's deadline comes first
     * even on a loaded machine */
    const char *cmd[] = {PYTHON,        TRAIN, "--ckpt-dir",  ckpt, "--epochs",    "3",
                         "--samples",   "256", "--hang-rank", "1",  "--hang-step", "5",
                         "--step-time", "0.3", NULL};
    start(&a[0], "a", extra, cmd);
    start(&a[1], "b", extra, cmd);
    cr_assert_eq(h_wait_files(ckpt, "hung.rank1", 1, 150000), 1, "rank 1 never reached the hang");
    int64_t hung_at = h_now_ms();
    /* detection at 5 s after the last beat, then the restart: round 2's workers start */
    bool restarted = h_log_wait(&a[0], "round 2 (generation", 8000) &&
                     h_log_wait(&a[1], "round 2 (generation", 1000);
    int64_t took = h_now_ms() - hung_at;
    if (!restarted || took > 6000) {
        h_show_log(&a[0]);
        h_show_log(&a[1]);
    }
    cr_assert(restarted, "no restart after the hang");
    cr_assert_leq(took, 6000, "restarted %lld ms after the hang", (long long)took);
    h_expect_exit(&a[0], 0, 150000);
    h_expect_exit(&a[1], 0, 10000);
    struct h_agent *hung = who_logged(a, "worker rank 1 hung: no heartbeat for 5.");
    cr_assert_not_null(hung, "no agent names rank 1 as hung");
    cr_assert(h_file_contains(hung->log, "(last: step 4)"), "the last beat is not named");
    const char *st = status_text();
    cr_assert(strstr(st, "rank 1 hung: no heartbeat for 5."), "status: %s", st);
    cr_assert(strstr(st, "last recovery: detect 5."), "status: %s", st);
    cr_assert(strstr(st, "(round 2, hang)"), "status: %s", st);
    cr_assert(h_file_contains(events, "\"event\":\"recovery\""), "no recovery event");
    cr_assert(h_file_contains(events, "\"cause\":\"hang\""), "no recovery caused by the hang");
}

/* ---- --preflight ----------------------------------------------------------------------- */

/* mutation: agent_preflight_gate() returning 0 at once → the node joins while the check fails */
Test(health, failing_preflight_keeps_the_node_out_until_it_passes)
{
    struct h_agent a;
    const char *check = h_fmt("test -e %s/ok || { echo 'checking %s'; echo 'no ok file' >&2; "
                              "exit 7; }",
                              dir, dir);
    const char *extra[] = {"--preflight", check, "--preflight-cooldown", "0.5", NULL};
    const char *cmd[] = {"true", NULL};
    start(&a, "n0", extra, cmd);
    cr_assert(h_log_wait(&a, "failed: exit code 7: checking", 20000), "no failed check logged");
    cr_assert(h_file_contains(a.log, "no ok file; this node stays out of run 'hb'"));
    const char *st = status_text();
    cr_assert(strstr(st, "held out by --preflight:\n  n0 (since "), "status: %s", st);
    cr_assert(strstr(st, "exit code 7: checking"), "status: %s", st);
    cr_assert(strstr(st, "live nodes    0"), "the held node joined: %s", st);
    cr_assert_not(h_file_contains(a.log, "joined run"));
    /* the check passes from now on: the node joins at the next try and the run succeeds */
    FILE *f = fopen(h_fmt("%s/ok", dir), "w");
    cr_assert_not_null(f);
    fclose(f);
    cr_assert(h_log_wait(&a, "preflight check passed", 10000));
    h_expect_exit(&a, 0, 20000);
    cr_assert(h_file_contains(a.log, "joined run"));
    st = status_text();
    cr_assert_null(strstr(st, "held out"), "still held after passing: %s", st);
}

/* mutation: pf_tick() never stopping the check → no timeout, the check's sleep stays alive */
Test(health, hanging_preflight_is_killed_and_counts_as_failed)
{
    struct h_agent a;
    const char *pidfile = h_fmt("%s/check.pid", dir);
    const char *check = h_fmt("echo $$ > %s; echo 'probing the GPU'; exec sleep 120", pidfile);
    const char *extra[] = {"--preflight", check, "--preflight-timeout", "1",
                           "--preflight-cooldown", "60", NULL};
    const char *cmd[] = {"true", NULL};
    start(&a, "n0", extra, cmd);
    cr_assert(h_log_wait(&a, "failed: timed out after 1.0 s (--preflight-timeout), killed: "
                             "probing the GPU",
                         20000));
    pid_t pid = h_read_pid(pidfile);
    cr_assert_gt(pid, 0);
    cr_assert(h_pid_gone(pid, 5000), "the hanging check (pid %d) was not killed", (int)pid);
    const char *st = status_text();
    cr_assert(strstr(st, "timed out after 1.0 s"), "status: %s", st);
    h_agent_signal(&a, SIGTERM);
    h_expect_exit(&a, 143, 10000);
    st = status_text();
    cr_assert_null(strstr(st, "held out"), "held after the agent left: %s", st);
}

/* mutation: agent_preflight_round() always true → n1 runs round 2 instead of leaving */
Test(health, preflight_every_round_takes_a_sick_node_out_and_back)
{
    struct h_agent a[2];
    /* n1's worker fails once and makes n1 sick; n0's waits for that, then succeeds */
    const char *work = h_fmt("if [ \"$ELASTIC_NODE_ID\" = n1 ] && [ ! -e %s/m1 ]; then "
                             "touch %s/m1 %s/sick; exit 1; fi; "
                             "while [ ! -e %s/m1 ]; do sleep 0.05; done",
                             dir, dir, dir, dir);
    const char *cmd[] = {"sh", "-c", work, NULL};
    const char *x0[] = {"--min", "1", "--max", "2", "--settle", "1", "--max-restarts", "3",
                        "--preflight", "true", "--preflight-every-round", NULL};
    const char *x1[] = {"--min", "1", "--max", "2", "--settle", "1", "--max-restarts", "3",
                        "--preflight",
                        h_fmt("! test -e %s/sick || { echo 'node is sick'; exit 4; }", dir),
                        "--preflight-every-round", "--preflight-cooldown", "0.5", NULL};
    start(&a[0], "n0", x0, cmd);
    start(&a[1], "n1", x1, cmd);
    cr_assert(h_log_wait(&a[1], "failed before a round: exit code 4: node is sick", 30000),
              "n1 did not fail its check before round 2");
    h_expect_exit(&a[0], 0, 30000); /* the run went on without n1 */
    cr_assert(h_log_wait(&a[1], "this node stays out of run 'hb'", 10000));
    const char *st = status_text();
    cr_assert(strstr(st, "n1 (since ") && strstr(st, "exit code 4: node is sick"), "status: %s",
              st);
    cr_assert_eq(unlink(h_fmt("%s/sick", dir)), 0);
    h_expect_exit(&a[1], 0, 20000); /* back in: finds the run succeeded */
    cr_assert(h_file_contains(a[1].log, "preflight check passed"));
}

/* ---- the recovery clock on /metrics ---------------------------------------------------- */

/* The text after `needle` in the agent's log, up to the end of that line, into buf. */
static bool log_after(const struct h_agent *a, const char *needle, char *buf, size_t size)
{
    FILE *f = fopen(a->log, "r");
    char line[1024];
    bool found = false;
    while (f && !found && fgets(line, sizeof(line), f)) {
        const char *p = strstr(line, needle);
        if (p) {
            snprintf(buf, size, "%.*s", (int)strcspn(p + strlen(needle), "\n"),
                     p + strlen(needle));
            found = true;
        }
    }
    if (f)
        fclose(f);
    return found;
}

/* mutation: agent_publish() not copying a->ph.hist into the snapshot → every count is 0 */
Test(health, metrics_show_the_phases_of_a_recovery_and_pass_promtool)
{
    struct h_agent a;
    const char *work = h_fmt("echo start > \"$ELASTIC_HEARTBEAT_FILE\"; "
                             "if [ ! -e %s/m ]; then touch %s/m; exit 1; fi; "
                             "while [ ! -e %s/release ]; do sleep 0.05; done",
                             dir, dir, dir);
    const char *cmd[] = {"sh", "-c", work, NULL};
    const char *extra[] = {"--max-restarts", "1", "--worker-heartbeat-timeout", "30",
                           "--http", "127.0.0.1:0", NULL};
    start(&a, "n0", extra, cmd);
    cr_assert(h_log_wait(&a, "round 2: recovery phases (failure): detect ", 20000),
              "no recovery logged");
    char port[16] = "";
    cr_assert(log_after(&a, "/metrics on http://127.0.0.1:", port, sizeof(port)));
    /* the /metrics page's recovery histogram only, through promtool */
    const char *metrics = h_fmt("%s/metrics.txt", dir);
    char cmd_get[512];
    snprintf(cmd_get, sizeof(cmd_get),
             PYTHON " -c \"import urllib.request as u; print(u.urlopen("
                    "'http://127.0.0.1:%s/metrics', timeout=5).read().decode(), end='')\" "
                    "| grep recovery_phase > %s",
             port, metrics);
    cr_assert_eq(system(cmd_get), 0, "cannot get /metrics on port %s", port);
#define COUNT(phase) "elastic_agent_recovery_phase_seconds_count{phase=\"" phase "\"} "
    cr_assert(h_file_contains(metrics, COUNT("detect") "1")); /* round 2's: after the failure */
    cr_assert(h_file_contains(metrics, COUNT("spawn") "2"));  /* both rounds */
    /* round 2's ready is in (it was logged); round 1's only if its beat came before its exit */
    cr_assert(h_file_contains(metrics, COUNT("ready") "1") ||
              h_file_contains(metrics, COUNT("ready") "2"));
    cr_assert_eq(system(h_fmt("promtool check metrics < %s", metrics)), 0, "promtool refused it");
    FILE *f = fopen(h_fmt("%s/release", dir), "w");
    cr_assert_not_null(f);
    fclose(f);
    h_expect_exit(&a, 0, 20000);
}
