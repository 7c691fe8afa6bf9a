// SPDX-License-Identifier: Apache-2.0
/*
 * End to end of the node daemon (issue 23) against a real etcd: `elastic-agent serve` daemons,
 * runs queued with `submit`, closed with `cancel`, the pool listed with `status --pool --json`.
 * Three idle daemons run two runs back to back without a restart (ranks 0..2, /healthz and
 * /readyz between runs); two runs of --max 2 on three daemons run in FIFO order; a fourth daemon
 * joins a run below its max; a SIGKILLed daemon's run re-forms and the daemon, started again,
 * rejoins it; an idle daemon fills a run that lost a member; a failed run (submit --wait exits 1,
 * its id is spent); cancel, a refused spec, a corrupt and a foreign spec in the store, a run that
 * cannot reach its --min. Waits are on files (inotify), exits (pidfd) and the pool's status
 * polled with deadlines; never on sleeps.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etcd_harness.h"
#include "../helpers/ea_ci.h"
#include "harness.h"

#define W EA_HELPERS_DIR "/ea-testworker"

static char dir[256], state[300], envdir[300];
static struct etcd_harness eh;
static int n_cmds;

static void setup(void)
{
    h_suite_dirs("daemon", dir, state, envdir);
    cr_assert_eq(etcd_harness_start(&eh, 1), 0, "etcd did not start");
    n_cmds = 0;
}

static void teardown(void)
{
    h_kill_agents();
    while (waitpid(-1, NULL, WNOHANG) > 0) /* orphaned agents and workers came to us */
        ;
    etcd_harness_stop(&eh);
    if (getenv("EA_E2E_KEEP"))
        cr_log_warn("kept %s", dir);
    else
        h_rmdir(dir);
}

TestSuite(daemon, .init = setup, .fini = teardown, .timeout = 90);

/* Start daemon `name` of pool "default" with --http on a free port and `extra` options. These
 * daemons run unsigned specs (--allow-unsigned): signing is test_e2e_signed.c's. */
static void serve(struct h_agent *a, const char *name, const char *extra)
{
    const char *args[16] = {"serve",     "--rdzv-endpoint", eh.endpoints, "--node-id",
                            name,        "--local-addr",    "127.0.0.1",  "--lease-ttl",
                            "2",         "--http",          ":0",         "--allow-unsigned"};
    int n = 12;
    if (extra)
        args[n++] = extra;
    args[n] = NULL;
    h_agent_start(a, dir, name, args);
    cr_assert(h_log_wait(a, "serving pool 'default'", 10000), "daemon %s did not start", name);
}

static void wait_idle(int n, int timeout_ms);

/* Start daemons d1..dn (in d[0..n-1]) and wait until all n are idle. */
static void serve_all(struct h_agent *d, int n)
{
    for (int i = 0; i < n; i++)
        serve(&d[i], h_fmt("d%d", i + 1), NULL);
    wait_idle(n, 10000);
}

/* Run `elastic-agent ARGS...` (NULL-terminated) in the background as command `name`. */
static void cmd_start(struct h_agent *a, const char *name, const char *const *args)
{
    h_agent_start(a, dir, name, args);
}

/* Run `elastic-agent ARGS...` and return its exit code (within 30 s); its stdout in out_path. */
static int cmd(const char *const *args, char *out_path, size_t size)
{
    struct h_agent a;
    char name[32];
    snprintf(name, sizeof(name), "cmd%d", n_cmds++);
    h_agent_start(&a, dir, name, args);
    int code = h_agent_wait(&a, 30000);
    if (out_path)
        snprintf(out_path, size, "%s", a.out);
    if (code != 0)
        h_show_log(&a);
    return code;
}

/* A worker that records "<node> <rank> <world> <TAG>" in envdir/<run>.<round>.<rank>, then
 * waits for envdir/go-<run> unless `hold` is false. */
static const char *worker(const char *run, bool hold)
{
    return h_fmt("f=%s/%s.$ELASTIC_ROUND.$RANK; echo \"$ELASTIC_NODE_ID $RANK $WORLD_SIZE "
                 "$TAG\" > $f.tmp && mv $f.tmp $f%s",
                 envdir, run, hold ? h_fmt(" && exec %s wait-file %s/go-%s", W, envdir, run) : "");
}

static void release(const char *run)
{
    FILE *f = fopen(h_fmt("%s/go-%s", envdir, run), "w");
    cr_assert(f);
    fclose(f);
}

/* Submit run `id` with `opts` (space-separated run options) and the worker; --wait when `wait`:
 * then in the background as `a` (returns at once), else returns submit's exit code. */
static int submit(struct h_agent *a, const char *id, const char *opts, const char *sh)
{
    const char *args[40] = {"submit", "--rdzv-endpoint", eh.endpoints, "--run-id", id,
                            "--env", "TAG=tagged"};
    int n = 7;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", opts);
    char *save = NULL;
    for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save))
        args[n++] = h_fmt("%s", t);
    if (a)
        args[n++] = "--wait";
    args[n++] = "--";
    args[n++] = "sh";
    args[n++] = "-c";
    args[n++] = sh;
    args[n] = NULL;
    if (a) {
        cmd_start(a, h_fmt("submit-%s", id), args);
        return 0;
    }
    return cmd(args, NULL, 0);
}

/* The pool as `status --pool default --json` prints it (the caller json_decref's it). */
static json_t *pool_status(void)
{
    char out[512];
    const char *args[] = {"status", "--pool", "default", "--json", "--rdzv-endpoint",
                          eh.endpoints, NULL};
    cr_assert_eq(cmd(args, out, sizeof(out)), 0, "status --pool failed");
    json_error_t je;
    json_t *j = json_load_file(out, 0, &je);
    cr_assert(j, "status --pool --json: %s", je.text);
    return j;
}

/* Daemons in `state` ("idle" / "in-run"), and the run `run`'s status ("" if not listed). */
static int count_daemons(json_t *j, const char *st)
{
    size_t i;
    json_t *d;
    int n = 0;
    json_array_foreach(json_object_get(j, "daemons"), i, d)
        n += strcmp(json_string_value(json_object_get(d, "state")), st) == 0;
    return n;
}

/* Wait (polling status --pool, deadline timeout_ms) until `n` daemons are idle. */
static void wait_idle(int n, int timeout_ms)
{
    int64_t end = h_now_ms() + timeout_ms;
    int got = -1;
    while (h_now_ms() < end) {
        json_t *j = pool_status();
        got = count_daemons(j, "idle");
        json_decref(j);
        if (got == n)
            return;
        poll(NULL, 0, 100); /* the next poll of the status, not a synchronisation */
    }
    cr_assert_fail("%d daemon(s) idle, not %d, after %d ms", got, n, timeout_ms);
}

/* Run `id`'s entry in the pool's list of runs (borrowed from j), or NULL. */
static json_t *run_of(json_t *j, const char *id)
{
    json_t *r;
    size_t i;
    json_array_foreach(json_object_get(j, "runs"), i, r)
        if (strcmp(json_string_value(json_object_get(r, "run")), id) == 0)
            return r;
    return NULL;
}

/* Wait (polling status --pool) until run `id` is in the pool's queue with at least `nodes`
 * nodes in it (`nodes` < 0: until it is no longer queued). */
static void wait_run_nodes(const char *id, int nodes, int timeout_ms)
{
    int64_t end = h_now_ms() + timeout_ms;
    int got = -1;
    while (h_now_ms() < end) {
        json_t *j = pool_status(), *r = run_of(j, id);
        got = r ? (int)json_array_size(json_object_get(r, "nodes")) : -1;
        json_decref(j);
        if (nodes < 0 ? got < 0 : got >= nodes)
            return;
        poll(NULL, 0, 50); /* the next poll of the status, not a synchronisation */
    }
    if (nodes < 0)
        cr_assert_fail("run %s still queued (with %d nodes) after %d ms", id, got, timeout_ms);
    cr_assert_fail("run %s: %d node(s), not %d, after %d ms (-1: not queued)", id, got, nodes,
                   timeout_ms);
}

/* Wait (polling status --pool) until run `id` is in the pool's queue. */
static void wait_queued(const char *id, int timeout_ms)
{
    wait_run_nodes(id, 0, timeout_ms);
}

/* Read envdir/<run>.<round>.<rank>: node id, world size, tag. */
static void read_rank(const char *run, int round, int rank, char *node, int *world, char *tag)
{
    FILE *f = fopen(h_fmt("%s/%s.%d.%d", envdir, run, round, rank), "r");
    cr_assert(f, "no record of %s round %d rank %d", run, round, rank);
    int r = -1;
    cr_assert_eq(fscanf(f, "%63s %d %d %63s", node, &r, world, tag), 4);
    cr_assert_eq(r, rank);
    fclose(f);
}

/* Wait until round `round` of `run` has `n` rank records. */
static void wait_ranks(const char *run, int round, int n, int timeout_ms)
{
    int got = h_wait_files(envdir, h_fmt("%s.%d.", run, round), n, timeout_ms);
    cr_assert_geq(got, n, "%s round %d: %d of %d ranks recorded", run, round, got, n);
}

/* The HTTP port a daemon logged. */
static int http_port(const struct h_agent *a)
{
    cr_assert(h_log_wait(a, "/metrics on http://127.0.0.1:", 5000));
    FILE *f = fopen(a->log, "r");
    char line[512];
    int port = -1;
    while (f && fgets(line, sizeof(line), f))
        if (strstr(line, "/metrics on http://127.0.0.1:"))
            port = atoi(strstr(line, "127.0.0.1:") + 10);
    if (f)
        fclose(f);
    return port;
}

static void expect_http(int port, const char *path, const char *status, const char *text)
{
    char buf[2048];
    cr_assert_gt(etcd_harness_http_get(port, path, buf, sizeof(buf), 3000), 0, "GET %s", path);
    cr_assert(strstr(buf, status) && strstr(buf, text), "GET %s: %s", path, buf);
}

Test(daemon, two_runs_through_the_same_daemons)
{
    struct h_agent d[3], s;
    for (int i = 0; i < 3; i++)
        serve(&d[i], h_fmt("d%d", i + 1), NULL);
    int port = http_port(&d[0]);
    wait_idle(3, 10000);
    expect_http(port, "/healthz", "200", "ok");
    expect_http(port, "/readyz", "503", "idle");
    submit(&s, "first", "--min 2 --max 3 --settle 1", worker("first", false));
    h_expect_exit(&s, 0, 30000);
    bool seen[3] = {false};
    for (int rank = 0; rank < 3; rank++) {
        char node[64], tag[64];
        int world = 0;
        read_rank("first", 1, rank, node, &world, tag);
        cr_assert_eq(world, 3);
        cr_assert_str_eq(tag, "tagged"); /* --env reached the workers */
        seen[node[1] - '1'] = true;
    }
    cr_assert(seen[0] && seen[1] && seen[2], "every daemon ran a rank");
    wait_idle(3, 10000);
    expect_http(port, "/healthz", "200", "ok");
    expect_http(port, "/readyz", "503", "idle");
    /* the second run: the same daemons, none restarted */
    submit(&s, "second", "--min 2 --max 3 --settle 1", worker("second", false));
    h_expect_exit(&s, 0, 30000);
    wait_ranks("second", 1, 3, 5000);
    wait_idle(3, 10000);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(kill(d[i].pid, 0), 0, "daemon %d is gone", i + 1);
        cr_assert(h_file_contains(d[i].log, "run 'first' is over on this node (agent exit 0)"));
        cr_assert(h_file_contains(d[i].log, "run 'second' is over on this node (agent exit 0)"));
    }
    h_agent_signal(&d[0], SIGTERM);
    h_expect_exit(&d[0], 0, 10000);
}

Test(daemon, fifo_two_runs_on_three_nodes)
{
    struct h_agent d[3], a, b;
    /* both queued before any daemon looks: the queue's order alone decides */
    submit(&a, "older", "--min 2 --max 2 --settle 0.5", worker("older", true));
    wait_queued("older", 10000);
    submit(&b, "newer", "--min 2 --max 2 --settle 0.5", worker("newer", true));
    wait_queued("newer", 10000);
    for (int i = 0; i < 3; i++)
        serve(&d[i], h_fmt("d%d", i + 1), NULL);
    wait_ranks("older", 1, 2, 20000);
    /* the older run holds two nodes; the newer one waits (its min is 2; one node is left) */
    json_t *j = pool_status();
    json_t *runs = json_object_get(j, "runs");
    cr_assert_eq(json_array_size(runs), 2);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(runs, 0), "run")), "older");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(runs, 1), "run")), "newer");
    cr_assert_str_neq(json_string_value(json_object_get(json_array_get(runs, 1), "status")),
                      "running");
    /* a node belongs to one run, and a run takes no more daemons than its max: the third one
     * is not a spare of the older run but waits in the newer one */
    size_t i;
    json_t *dm;
    int in_older = 0;
    json_array_foreach(json_object_get(j, "daemons"), i, dm)
        in_older += strcmp(json_string_value(json_object_get(dm, "run")), "older") == 0;
    cr_assert_eq(in_older, 2, "%d daemons in a run of --max 2", in_older);
    json_decref(j);
    cr_assert_eq(h_count_files(envdir, "newer."), 0, "the newer run started first");
    /* the third daemon went on to the newer run: the pool shows the older run full (at its max)
     * and the newer one as next, with room.
     * Mutation: pool_run_of_state() giving a run at its max room (scripts/test.sh runs it) ->
     * the older run is not full. */
    wait_run_nodes("newer", 1, 10000);
    j = pool_status();
    json_t *older = run_of(j, "older"), *newer = run_of(j, "newer");
    cr_assert(older && newer);
    cr_assert_str_eq(json_string_value(json_object_get(older, "status")), "running");
    cr_assert(json_is_true(json_object_get(older, "full")), "a run at its --max is not full");
    cr_assert(json_is_false(json_object_get(newer, "full")), "the newer run (1 of 2) is full");
    cr_assert_str_eq(json_string_value(json_object_get(j, "next")), "newer",
                     "the pool's next run is not the one with room");
    json_decref(j);
    release("older");
    h_expect_exit(&a, 0, 30000);
    wait_ranks("newer", 1, 2, 20000);
    release("newer");
    h_expect_exit(&b, 0, 30000);
    wait_idle(3, 10000);
}

Test(daemon, fourth_daemon_joins_a_run_below_its_max)
{
    struct h_agent d[4], s;
    serve_all(d, 3);
    submit(&s, "grow", "--min 2 --max 4 --settle 0.5", worker("grow", true));
    wait_ranks("grow", 1, 3, 20000);
    char before[3][64], node[64], tag[64];
    int world = 0;
    for (int rank = 0; rank < 3; rank++) {
        read_rank("grow", 1, rank, before[rank], &world, tag);
        cr_assert_eq(world, 3);
    }
    serve(&d[3], "d4", NULL); /* the autoscaler's new node: no command on it */
    wait_ranks("grow", 2, 4, 20000);
    for (int rank = 0; rank < 4; rank++) {
        read_rank("grow", 2, rank, node, &world, tag);
        cr_assert_eq(world, 4);
        if (rank < 3)
            cr_assert_str_eq(node, before[rank], "rank %d moved", rank); /* ranks stay stable */
        else
            cr_assert_str_eq(node, "d4");
    }
    /* SIGTERM during a run: the daemon leaves it gracefully (round 3 without it) and exits 0 */
    h_agent_signal(&d[3], SIGTERM);
    h_expect_exit(&d[3], 0, 15000);
    wait_ranks("grow", 3, 3, 20000);
    release("grow");
    h_expect_exit(&s, 0, 30000);
    wait_idle(3, 10000);
}

Test(daemon, killed_daemon_run_reforms_and_it_rejoins)
{
    struct h_agent d[3], again, s;
    serve_all(d, 3);
    submit(&s, "sturdy", "--min 2 --max 3 --settle 0.5 --stop-timeout 2",
           worker("sturdy", true));
    wait_ranks("sturdy", 1, 3, 20000);
    h_agent_signal(&d[2], SIGKILL);
    cr_assert_eq(h_agent_wait(&d[2], 5000), 128 + SIGKILL);
    /* its agent dies with it (parent-death signal), the lease expires: round 2 without it */
    wait_ranks("sturdy", 2, 2, 20000);
    char node[64], tag[64];
    int world = 0;
    read_rank("sturdy", 2, 0, node, &world, tag);
    cr_assert_eq(world, 2);
    while (waitpid(-1, NULL, WNOHANG) > 0) /* the killed agent, orphaned to us */
        ;
    serve(&again, "d3", NULL); /* its supervisor starts it again */
    wait_ranks("sturdy", 3, 3, 20000);
    read_rank("sturdy", 3, 2, node, &world, tag);
    cr_assert_eq(world, 3);
    cr_assert_str_eq(node, "d3");
    release("sturdy");
    h_expect_exit(&s, 0, 30000);
    wait_idle(3, 10000);
}

/* A run at its max loses a member while a daemon is idle (the pool's `next` names no run): the
 * idle daemon fills the run by itself. Mutation: without the watch of the run's state in
 * agent/daemon/serve.c (watch_run_state) nobody tells the idle daemon and round 2 never comes. */
Test(daemon, idle_daemon_fills_a_run_that_lost_a_member)
{
    struct h_agent d[3], s;
    serve_all(d, 3);
    submit(&s, "refill", "--min 2 --max 2 --settle 0.5", worker("refill", true));
    wait_ranks("refill", 1, 2, 20000);
    wait_idle(1, 10000);
    char node[2][64], tag[64], now[64];
    int world = 0;
    for (int rank = 0; rank < 2; rank++)
        read_rank("refill", 1, rank, node[rank], &world, tag);
    int victim = 0, idle = 0; /* the member of rank 1, and the daemon that is in no run */
    int found = 0;
    for (int i = 0; i < 3; i++) {
        const char *name = h_fmt("d%d", i + 1);
        if (strcmp(name, node[1]) == 0)
            victim = i, found |= 1;
        else if (strcmp(name, node[0]) != 0)
            idle = i, found |= 2;
    }
    cr_assert_eq(found, 3, "members %s, %s", node[0], node[1]);
    h_agent_signal(&d[victim], SIGKILL);
    cr_assert_eq(h_agent_wait(&d[victim], 5000), 128 + SIGKILL);
    /* the survivor waits for its --min; the idle daemon joins: round 2 with it as rank 1 */
    wait_ranks("refill", 2, 2, 20000);
    read_rank("refill", 2, 0, now, &world, tag);
    cr_assert_str_eq(now, node[0], "the survivor keeps rank 0");
    read_rank("refill", 2, 1, now, &world, tag);
    cr_assert_str_eq(now, h_fmt("d%d", idle + 1), "the idle daemon took the free place");
    while (waitpid(-1, NULL, WNOHANG) > 0) /* the killed agent, orphaned to us */
        ;
    release("refill");
    h_expect_exit(&s, 0, 30000);
    wait_idle(2, 10000);
}

/* A run whose worker fails with no restart left: submit --wait exits 1 and says so, the run
 * leaves the queue, and its id is spent (its final state stays in the store).
 * Mutations: pool_status_exit() taking "failed" for 0 -> --wait exits 0, "succeeded";
 * pool_advance() never deleting an ended run's spec -> it stays queued; pool_submit() comparing
 * the queue key alone -> the id is queued again (scripts/test.sh runs the first and the last). */
Test(daemon, failed_run_exits_1_leaves_the_queue_and_spends_its_id)
{
    struct h_agent d[2], s;
    serve_all(d, 2);
    submit(&s, "doomed", "--min 2 --max 2 --settle 0.5 --max-restarts 0", "exit 3");
    h_expect_exit(&s, 1, 30000);
    cr_assert(h_file_contains(s.out, "run 'doomed' failed (exit 1)"),
              "submit --wait said nothing of the failure");
    wait_idle(2, 10000);
    for (int i = 0; i < 2; i++)
        cr_assert(h_file_contains(d[i].log, "run 'doomed' is over on this node (agent exit 1)"));
    wait_run_nodes("doomed", -1, 10000);
    struct h_agent again;
    const char *args[] = {"submit", "--rdzv-endpoint", eh.endpoints, "--run-id", "doomed", "--",
                          "true", NULL};
    cmd_start(&again, "submit-again", args);
    h_expect_exit(&again, 2, 10000);
    cr_assert(h_file_contains(again.log, "run 'doomed' exists already"), "submitted again");
    json_t *j = pool_status();
    cr_assert_null(run_of(j, "doomed"), "the spent id is queued again");
    json_decref(j);
}

Test(daemon, cancel_refused_and_corrupt_specs)
{
    struct h_agent d[2], s;
    serve_all(d, 2);
    /* refused at submit, with the one-shot form's messages */
    struct h_agent bad;
    const char *node_opt[] = {"submit", "--rdzv-endpoint", eh.endpoints, "--run-id", "x",
                              "--node-id", "n1", "--", "true", NULL};
    cmd_start(&bad, "bad1", node_opt);
    h_expect_exit(&bad, 2, 10000);
    cr_assert(h_file_contains(bad.log, "--node-id is a per-node option"));
    const char *minmax[] = {"submit", "--rdzv-endpoint", eh.endpoints, "--run-id", "x",
                            "--min", "3", "--max", "2", "--", "true", NULL};
    cmd_start(&bad, "bad2", minmax);
    h_expect_exit(&bad, 2, 10000);
    cr_assert(h_file_contains(bad.log, "--min 3 is larger than --max 2"));
    const char *nocmd[] = {"submit", "--rdzv-endpoint", eh.endpoints, "--run-id", "x", NULL};
    cmd_start(&bad, "bad3", nocmd);
    h_expect_exit(&bad, 2, 10000);
    cr_assert(h_file_contains(bad.log, "missing the worker command"));
    /* a corrupt and a foreign spec, queued before a good run: moved aside to refused/ by the
     * first to walk the queue and said once in the pool (issue 38), never run */
    const char *corrupt[] = {"put", "/elastic/~pools/default/queue/aaa", "{not json", NULL};
    const char *foreign[] = {"put", "/elastic/~pools/default/queue/bbb",
                             "{\"schema\":\"someone-else/v9\",\"run\":\"bbb\"}", NULL};
    cr_assert_eq(etcd_harness_etcdctl(&eh, corrupt), 0);
    cr_assert_eq(etcd_harness_etcdctl(&eh, foreign), 0);
    submit(&s, "victim", "--min 2 --max 2 --settle 0.5", worker("victim", true));
    wait_ranks("victim", 1, 2, 20000);
    json_t *j = pool_status();
    cr_assert_eq(json_array_size(json_object_get(j, "skipped")), 0);
    json_t *refused = json_object_get(j, "refused");
    cr_assert_eq(json_array_size(refused), 2);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(refused, 0), "run")), "aaa");
    cr_assert(strstr(json_string_value(json_object_get(json_array_get(refused, 1), "reason")),
                     "not a run spec of ours"));
    json_decref(j);
    /* cancel: the run is closed everywhere, --wait says 4, the daemons are idle again */
    const char *cancel[] = {"cancel", "victim", "--rdzv-endpoint", eh.endpoints, NULL};
    cr_assert_eq(cmd(cancel, NULL, 0), 0);
    h_expect_exit(&s, 4, 20000);
    wait_idle(2, 10000);
    int said = 0;
    for (int i = 0; i < 2; i++) {
        cr_assert(h_file_contains(d[i].log, "run 'victim' is over on this node (agent exit 4)"));
        said += h_file_contains(d[i].log, "queue/aaa");
    }
    said += h_file_contains(s.log, "queue/aaa");
    cr_assert_eq(said, 1, "the corrupt spec said %d times (once in the pool)", said);
    cr_assert_eq(cmd(cancel, NULL, 0), 0); /* over already: nothing to do */
    const char *none[] = {"cancel", "nosuch", "--rdzv-endpoint", eh.endpoints, NULL};
    struct h_agent c;
    cmd_start(&c, "cancel-none", none);
    h_expect_exit(&c, 4, 10000);
    /* a run that cannot reach its --min fails the usual way, and leaves the queue */
    submit(&s, "toobig", "--min 3 --join-timeout 2", worker("toobig", false));
    h_expect_exit(&s, 4, 30000);
    cr_assert(h_file_contains(d[0].log, "rendezvous timed out") ||
              h_file_contains(d[1].log, "rendezvous timed out"));
    wait_idle(2, 10000);
    j = pool_status();
    cr_assert_eq(json_array_size(json_object_get(j, "runs")), 0);
    json_decref(j);
}

/* How many lines of file `path` hold `needle`. */
/* Issue 38: a run's worker leaves a process behind past its guard and its agent (it stops the
 * agent, SIGKILLs the guard, then the agent): the process comes to the daemon, a subreaper, and
 * is killed when the run ends there — before the daemon starts anything else. */
Test(daemon, what_a_run_left_behind_is_killed_at_its_end)
{
    struct h_agent d[1];
    serve_all(d, 1);
    const char *pidfile = h_fmt("%s/left.pid", envdir);
    cr_assert_eq(submit(NULL, "leaver", "--max-restarts 0",
                        h_fmt("exec %s escape-all %s", W, pidfile)),
                 0);
    cr_assert(h_log_wait(&d[0], "run 'leaver' is over on this node (agent exit 137)", 30000),
              "the run's agent was not killed");
    cr_assert_eq(h_wait_files(envdir, "left.pid", 1, 10000), 1, "no pid of the process left");
    FILE *f = fopen(pidfile, "r");
    int pid = 0;
    cr_assert(f && fscanf(f, "%d", &pid) == 1 && pid > 1);
    fclose(f);
    bool gone = h_pid_gone(pid, 10000);
    if (!gone)
        kill(pid, SIGKILL);
    cr_assert(gone, "process %d outlived its run", pid);
}

/* ... and past the daemon too (it stops the daemon and the agent, SIGKILLs the guard, the agent
 * and the daemon): the process is still in the run's cgroup, which the daemon started again
 * kills (or any daemon starting on this host meanwhile). Needs a cgroup v2 this test's daemon may write (root here); skipped
 * where there is none. */
/* CI (CI=1) runs as root on cgroup v2: a missing cgroup there is a failure, never a skip. */
#define CGROUP_SKIP(why)                                                                       \
    do {                                                                                       \
        if (ea_test_in_ci())                                                                   \
            cr_assert_fail("CI (CI=%s): %s", getenv("CI"), why);                               \
        cr_skip_test(why);                                                                     \
    } while (0)

Test(daemon, what_a_killed_daemons_run_left_is_killed_when_it_starts_again)
{
    if (access("/proc/self/cgroup", R_OK) < 0 || !h_file_contains("/proc/self/cgroup", "0::"))
        CGROUP_SKIP("no cgroup v2 here");
    struct h_agent d[1];
    serve(&d[0], "dk1", NULL); /* a node id of its own: no other test's daemon reaps its runs */
    if (h_file_contains(d[0].log, "runs are not put into cgroups"))
        CGROUP_SKIP("this daemon cannot make cgroups here");
    const char *pidfile = h_fmt("%s/left.pid", envdir);
    cr_assert_eq(submit(NULL, "leaver2", "--max-restarts 0",
                        h_fmt("exec %s escape-all %s 2", W, pidfile)),
                 0);
    cr_assert_eq(h_agent_wait(&d[0], 30000), 128 + SIGKILL, "the daemon was not killed");
    cr_assert_eq(h_wait_files(envdir, "left.pid", 1, 10000), 1, "no pid of the process left");
    pid_t pid = h_read_pid(pidfile);
    cr_assert_gt(pid, 1);
    if (h_file_contains(d[0].log, "runs are not put into cgroups")) { /* said at the run */
        kill(pid, SIGKILL);
        CGROUP_SKIP("this daemon cannot make cgroups here");
    }
    cr_assert(!h_pid_gone(pid, 0), "process %d did not outlive its daemon", pid);
    struct h_agent again;
    serve(&again, "dk1", NULL); /* it finds the dead daemon's run's cgroup */
    bool gone = h_pid_gone(pid, 10000);
    if (!gone)
        kill(pid, SIGKILL);
    cr_assert(gone, "process %d outlived its run and its daemon's restart", pid);
}

static int count_lines(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s", path);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* The liveness ring's options are run options (issue 31): the two ends of a link must agree on
 * them, so submit sets them for every agent of the run and serve passes them on (it refuses them
 * as its own: tests/bad_input). The run's agents log their ring's heartbeat at debug level. */
Test(daemon, a_runs_liveness_options_reach_every_agent_of_it)
{
    struct h_agent d[2], s;
    for (int i = 0; i < 2; i++)
        serve(&d[i], h_fmt("d%d", i + 1), "--log-level=debug");
    wait_idle(2, 10000);
    submit(&s, "ring", "--min 2 --max 2 --settle 0.5 --liveness-interval 0.35 --liveness-misses 7",
           worker("ring", false));
    h_expect_exit(&s, 0, 30000);
    wait_idle(2, 10000);
    for (int i = 0; i < 2; i++) {
        cr_assert(h_file_contains(d[i].log, "run 'ring' is over on this node (agent exit 0)"));
        cr_assert_eq(count_lines(d[i].log, "(heartbeat 350 ms, 7 misses)"), 1,
                     "daemon d%d's agent did not take the run's ring options", i + 1);
    }
    submit(&s, "noring", "--min 2 --max 2 --settle 0.5 --liveness off", worker("noring", false));
    h_expect_exit(&s, 0, 30000);
    wait_idle(2, 10000);
    for (int i = 0; i < 2; i++) {
        cr_assert(h_file_contains(d[i].log, "run 'noring' is over on this node (agent exit 0)"));
        cr_assert_eq(count_lines(d[i].log, "liveness ring: listening on"), 1,
                     "the second run's agent on d%d opened a ring (--liveness off)", i + 1);
    }
}
