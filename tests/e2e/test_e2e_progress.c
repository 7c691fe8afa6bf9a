// SPDX-License-Identifier: Apache-2.0
/*
 * Progress-aware restarts end to end (issue 40): agents on a real etcd (tests/etcd/etcd_harness,
 * free loopback ports), shell workers that beat their step (echo STEP > $ELASTIC_HEARTBEAT_FILE)
 * with hang detection off. A worker that fails the same way at step 50 ends the run after at
 * most 3 restarts without progress, with one message, although --max-restarts allows 100; a
 * worker that fails at random steps but resumes past them is never stopped by the rule. Waits
 * are on pidfds with deadlines, never sleeps.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include "etcd_harness.h"
#include "harness.h"

static char dir[256], work[300];
static struct etcd_harness eh;

static void setup(void)
{
    h_mkdtemp(dir, sizeof(dir), "progress");
    snprintf(work, sizeof(work), "%s/work", dir);
    cr_assert_eq(mkdir(work, 0755), 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    cr_assert_eq(etcd_harness_start(&eh, 1), 0);
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

TestSuite(e2e_progress, .init = setup, .fini = teardown, .timeout = 240);

static void start(struct h_agent *a, const char *name, const char *run, const char *const *extra,
                  const char *const *cmd)
{
    const char *base[] = {"--rdzv-endpoint", eh.endpoints, "--run-id",    run,
                          "--node-id",       name,         "--settle",    "0.3",
                          "--stop-timeout",  "2",          "--lease-ttl", "2",
                          "--local-addr",    "127.0.0.1",  NULL};
    h_agent_start_argv(a, dir, name, base, extra, cmd);
}

/* Rank 1 fails at step 50 every time (a bad batch); rank 0 beats on and waits to be stopped.
 * mutation: pg_next counting progress as none (or the threshold off by one) changes when it
 * stops; the failure record's stop not acted on by the coordinator → 100 restarts */
Test(e2e_progress, the_same_failure_at_step_50_ends_the_run_without_spending_max_restarts)
{
    const char *extra[] = {"--nnodes", "2", "--max-restarts", "100", NULL};
    const char *cmd[] = {
        "sh", "-c",
        "i=0; while [ $i -le 60 ]; do echo $i > \"$ELASTIC_HEARTBEAT_FILE\"; "
        "if [ \"$RANK\" = 1 ] && [ $i = 50 ]; then echo 'bad batch at step 50' >&2; exit 3; fi; "
        "i=$((i+1)); done; exec sleep 600",
        NULL};
    struct h_agent a[2];
    int64_t t0 = h_now_ms();
    for (int i = 0; i < 2; i++)
        start(&a[i], h_fmt("n%d", i), "det", extra, cmd);
    for (int i = 0; i < 2; i++)
        h_expect_exit(&a[i], 1, 120000);
    /* ranks go by arrival: rank 1 is either node */
    const char *msg = "failed: the same failure 3 times in a row at step 50, no progress: rank 1 "
                      "(node 'n";
    for (int i = 0; i < 2; i++) {
        if (!h_file_contains(a[i].log, msg))
            h_show_log(&a[i]);
        cr_assert_eq(h_count_in(a[i].log, msg), 1, "one message, on every node");
        cr_assert(h_file_contains(a[i].log, "exited with code 3 and left no error file (write one "
                                            "with torch.distributed.elastic.multiprocessing.errors"
                                            ".record) | last lines of stderr: | bad batch at step "
                                            "50"),
                  "the root cause, in the one message");
        cr_assert_not(h_file_contains(a[i].log, "exceeded --max-restarts"));
        /* rounds 1-3 started, the 2 restarts without progress the last of them */
        cr_assert(h_file_contains(a[i].log, "restarts 2/100"));
        cr_assert_not(h_file_contains(a[i].log, "restarts 3/100"), "a 3rd restart");
    }
    cr_log_info("ended after 2 restarts without progress in %.1f s",
                (double)(h_now_ms() - t0) / 1000.0);
    /* status says where the run was and why it ended */
    char scmd[1024], out[16384];
    snprintf(scmd, sizeof(scmd), "%s status --run-id det --rdzv-endpoint %s 2>&1", EA_AGENT_BIN,
             eh.endpoints);
    FILE *p = popen(scmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    pclose(p);
    cr_assert(strstr(out, "progress      best step 50 at the failure of round 3; 2 restart(s) in a "
                          "row without progress, the same failure 3 time(s) in a row (the run "
                          "ended: no progress)"),
              "status: %s", out);
}

/* Every attempt fails (the same rank, the same exit code) 1-5 steps after where it resumed, but
 * resumes from its checkpoint past the last failure: progress every time, never stopped, and the
 * run finishes at step 40.
 * mutation: pg_next not resetting the counts on progress → stopped after 3 failures */
Test(e2e_progress, failures_at_random_steps_that_progress_are_never_stopped)
{
    const char *extra[] = {"--nnodes", "1", "--max-restarts", "100", NULL};
    const char *script = h_fmt(
        "ck=%s/ckpt; s=$(cat $ck 2>/dev/null || echo 0); "
        "k=$(( $(od -An -N1 -tu1 /dev/urandom) %% 5 + 1 )); i=$s; "
        "while [ $i -le 40 ]; do echo $i > \"$ELASTIC_HEARTBEAT_FILE\"; echo $((i+1)) > $ck; "
        "if [ $i -ge $((s+k-1)) ] && [ $i -lt 40 ]; then echo \"lost at step $i\" >&2; exit 3; "
        "fi; i=$((i+1)); done",
        work);
    const char *cmd[] = {"sh", "-c", script, NULL};
    struct h_agent a;
    start(&a, "n0", "rand", extra, cmd);
    h_expect_exit(&a, 0, 180000);
    int failures = h_count_in(a.log, "failed: exited with code 3");
    if (failures < 6)
        h_show_log(&a);
    cr_assert_geq(failures, 6, "the worker failed only %d times", failures);
    cr_assert_not(h_file_contains(a.log, "no progress"));
    cr_log_info("%d failures, each past the last one, none stopped", failures);
}

/* Off: the same deterministic failure spends --max-restarts as before.
 * mutation: --max-restarts-without-progress 0 not turning the rule off → exit before 4 restarts */
Test(e2e_progress, off_spends_max_restarts)
{
    const char *extra[] = {"--nnodes",
                           "1",
                           "--max-restarts",
                           "4",
                           "--max-restarts-without-progress",
                           "0",
                           "--straggler-threshold",
                           "0",
                           NULL};
    const char *cmd[] = {
        "sh", "-c", "test -z \"$ELASTIC_HEARTBEAT_FILE\" || exit 9; echo 'bad batch' >&2; exit 3",
        NULL};
    struct h_agent a;
    start(&a, "n0", "off", extra, cmd);
    h_expect_exit(&a, 1, 120000);
    cr_assert(h_file_contains(a.log, "worker failures exceeded --max-restarts 4"));
    cr_assert(h_file_contains(a.log, "restarts 4/4"));
    cr_assert_not(h_file_contains(a.log, "no progress"));
}

/* Four nodes whose workers time their compute section (the shell form: "STEP SECONDS"); node n2's
 * take 1.5x as long. The coordinator names n2, and no other node, within a deadline well above
 * the 20 s window (the time is logged: bench/RESULTS.md); the store sees one put per node per
 * 5 s, never one per step.
 * mutation: sg_observe's threshold test inverted / the window ignored (unit-tested) */
Test(e2e_progress, a_node_1_5x_slower_is_named_a_straggler, .timeout = 180)
{
    const char *ev = h_fmt("%s/events.jsonl", dir);
    const char *extra[] = {"--nnodes", "4", "--events", ev, "--max-restarts", "0", NULL};
    const char *cmd[] = {
        "sh", "-c",
        "c=0.10000; [ \"$ELASTIC_NODE_ID\" = n2 ] && c=0.15000; i=0; "
        "while :; do echo \"$i $c$((i % 10))\" > \"$ELASTIC_HEARTBEAT_FILE\"; i=$((i+1)); "
        "sleep 0.05; done",
        NULL};
    FILE *f = fopen(ev, "a"); /* there to be watched before the first event */
    cr_assert_not_null(f);
    fclose(f);
    struct h_agent a[4];
    for (int i = 0; i < 4; i++)
        start(&a[i], h_fmt("n%d", i), "slow", extra, cmd);
    struct h_agent events = {0}; /* the shared event stream, waited on like a log */
    snprintf(events.log, sizeof(events.log), "%s", ev);
    cr_assert(h_log_wait(&events, "\"event\":\"workers_started\"", 60000));
    int64_t t0 = h_now_ms();
    bool named = h_log_wait(&events, "\"event\":\"straggler\"", 120000);
    int64_t took = h_now_ms() - t0;
    if (!named)
        for (int i = 0; i < 4; i++)
            h_show_log(&a[i]);
    cr_assert(named, "no straggler named");
    cr_assert(h_file_contains(ev, "\"straggler_node\":\"n2\""));
    /* status: a COMPUTE column with each node's median and score */
    char scmd[1024], out[16384];
    snprintf(scmd, sizeof(scmd), "%s status --run-id slow --rdzv-endpoint %s 2>&1", EA_AGENT_BIN,
             eh.endpoints);
    FILE *p = popen(scmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    pclose(p);
    cr_assert(strstr(out, "COMPUTE") && strstr(out, "0.150 s x1.50") && strstr(out, "0.100 s x"),
              "status: %s", out);
    for (int i = 0; i < 4; i++) {
        h_agent_signal(&a[i], SIGTERM);
        h_expect_exit(&a[i], 143, 30000);
    }
    cr_assert_eq(h_count_in(ev, "\"event\":\"straggler\""), 1, "a false report, or twice");
    cr_log_info("the straggler named %.1f s after its workers started", (double)took / 1000.0);
}

static char *status_of(const char *run)
{
    char scmd[1024];
    snprintf(scmd, sizeof(scmd), "%s status --run-id %s --rdzv-endpoint %s 2>&1", EA_AGENT_BIN, run,
             eh.endpoints);
    FILE *p = popen(scmd, "r");
    cr_assert_not_null(p);
    static char out[16384];
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    pclose(p);
    return out;
}

/* --straggler-action evict with a fifth node waiting (--nnodes 4): the slow node n2 leaves, the
 * spare n4 takes its place in the next round, the run keeps 4 nodes without spending a restart
 * (--max-restarts 0), and n2 is held out (listed by status) until its cooldown ends, then joins
 * again as a spare.
 * mutation: the spare condition of sg_evict_decide / the writer check of rdzv_straggler_check
 * (unit-tested: test_straggler_evict) */
Test(e2e_progress, a_straggler_is_evicted_to_a_waiting_spare, .timeout = 200)
{
    const char *ev = h_fmt("%s/events-evict.jsonl", dir);
    const char *extra[] = {"--nnodes",
                           "4",
                           "--events",
                           ev,
                           "--max-restarts",
                           "0",
                           "--straggler-window",
                           "5",
                           "--straggler-action",
                           "evict",
                           "--straggler-cooldown",
                           "15",
                           NULL};
    const char *cmd[] = {
        "sh", "-c",
        "c=0.10000; [ \"$ELASTIC_NODE_ID\" = n2 ] && c=0.15000; i=0; "
        "while :; do echo \"$i $c$((i % 10))\" > \"$ELASTIC_HEARTBEAT_FILE\"; i=$((i+1)); "
        "sleep 0.05; done",
        NULL};
    FILE *f = fopen(ev, "a");
    cr_assert_not_null(f);
    fclose(f);
    struct h_agent a[5];
    start(&a[0], "n0", "evict", extra, cmd); /* first: it coordinates (never evicts itself) */
    h_wait_in(&a[0], false, "joined run 'evict'", 30000);
    for (int i = 1; i < 4; i++)
        start(&a[i], h_fmt("n%d", i), "evict", extra, cmd);
    struct h_agent events = {0};
    snprintf(events.log, sizeof(events.log), "%s", ev);
    cr_assert(h_log_wait(&events, "\"event\":\"workers_started\"", 60000));
    start(&a[4], "n4", "evict", extra, cmd); /* the spare: the round is full */
    h_wait_in(&a[4], false, "joined run 'evict'", 30000);

    bool evicted = h_log_wait(&a[2], "the coordinator evicted this node as a straggler", 120000);
    if (!evicted)
        for (int i = 0; i < 5; i++)
            h_show_log(&a[i]);
    cr_assert(evicted, "n2 was not evicted");
    h_wait_in(&a[2], false, "stays out of run 'evict'", 30000);
    int64_t out_at = h_now_ms();
    cr_assert(h_file_contains(ev, "\"event\":\"straggler_evict\""));
    cr_assert(h_file_contains(ev, "\"straggler_node\":\"n2\""));
    char *st = status_of("evict"); /* held out, with the reason */
    cr_assert(strstr(st, "n2 (since ") && strstr(st, "evicted as a straggler"), "status: %s", st);

    /* the spare runs in the next round, at the same size */
    h_wait_in(&a[4], false, "of world 4", 60000);
    cr_assert(h_log_wait(&a[4], "restarts 0/0", 1000), "a restart was spent: %s", a[4].log);
    cr_assert_eq(h_count_in(a[2].log, "joined run 'evict'"), 1, "n2 joined again during its hold");

    /* n2 rejoins only once its cooldown is over (logged before the join), as a spare */
    cr_assert(h_log_wait(&a[2], "the cooldown is over", 60000));
    int64_t held = h_now_ms() - out_at;
    cr_assert_geq(held, 13000, "n2 came back after %.1f s, before --straggler-cooldown 15",
                  (double)held / 1000.0);
    cr_assert_eq(h_count_in(ev, "\"event\":\"run_failed\""), 0);
    for (int i = 0; i < 5; i++) {
        h_agent_signal(&a[i], SIGTERM);
        h_expect_exit(&a[i], 143, 30000);
    }
    cr_log_info("n2 held out for %.1f s", (double)held / 1000.0);
}
