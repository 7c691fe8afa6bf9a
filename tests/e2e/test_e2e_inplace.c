// SPDX-License-Identifier: Apache-2.0
/*
 * In-place re-assignment end to end (--in-place, issue 32 part 2; docs/warm.md): elastic-agent
 * processes on a real etcd, their workers tests/helpers/inplace_worker.py (the elastic_agent
 * Python package, standard library only), each node's recording into its own directory a file
 * gen.<generation>.<pid> for every assignment it holds. A node added and a node SIGKILLed: every
 * survivor's worker is the same process, holding the new world. A worker that never takes its
 * re-assignment, or answers it with a malformed ack: one clear message, it is stopped and its
 * rank restarted the normal way; nothing is left running.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include "etcd_harness.h"
#include "harness.h"
#include "kv.h"

#define PYTHON "/usr/bin/python3"
#define IPW EA_SOURCE_DIR "/tests/helpers/inplace_worker.py"

static char dir[256];
static struct etcd_harness eh;

static void setup(void)
{
    h_mkdtemp(dir, sizeof(dir), "inplace");
    prctl(PR_SET_CHILD_SUBREAPER, 1); /* orphans of a killed agent come to us */
    cr_assert_eq(etcd_harness_start(&eh, 1), 0, "cannot start etcd");
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

TestSuite(inplace, .init = setup, .fini = teardown, .timeout = 150);

/* Node `name` of run `run`; its worker in `mode` records into <dir>/<name>.rec (returned);
 * `extra` (NULL-terminated, or NULL): more options. */
static const char *start_opts(struct h_agent *a, const char *run, const char *name,
                              const char *mode, const char *const *extra)
{
    static char recs[8][300];
    static int n;
    char *rec = recs[n++ % 8];
    snprintf(rec, sizeof(recs[0]), "%s/%s.rec", dir, name);
    cr_assert_eq(mkdir(rec, 0755), 0);
    const char *base[] = {"--rdzv-endpoint",
                          eh.endpoints,
                          "--run-id",
                          run,
                          "--node-id",
                          name,
                          "--nnodes",
                          "2:3",
                          "--settle",
                          "1",
                          "--lease-ttl",
                          "2",
                          "--stop-timeout",
                          "2",
                          "--max-restarts",
                          "3",
                          "--local-addr",
                          "127.0.0.1",
                          "--warm-workers",
                          "--in-place",
                          "--in-place-timeout",
                          "1",
                          NULL};
    const char *cmd[] = {PYTHON, IPW, rec, mode, NULL};
    h_agent_start_argv(a, dir, name, base, extra, cmd);
    return rec;
}

static const char *start(struct h_agent *a, const char *run, const char *name, const char *mode)
{
    return start_opts(a, run, name, mode, NULL);
}

static void wait_log(const struct h_agent *a, const char *needle, int timeout_ms)
{
    bool ok = h_log_wait(a, needle, timeout_ms);
    if (!ok)
        h_show_log(a);
    cr_assert(ok, "'%s' not in %s within %d ms", needle, a->log, timeout_ms);
}

struct rec {
    long gen;
    pid_t pid;
    int world;
};

/* The records of one node's worker(s), oldest generation first. */
static int records(const char *rec, struct rec *out, int max)
{
    DIR *d = opendir(rec);
    cr_assert(d, "%s", rec);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < max;) {
        long gen;
        int pid;
        if (sscanf(e->d_name, "gen.%ld.%d", &gen, &pid) != 2 || strstr(e->d_name, ".tmp"))
            continue;
        const char *ws = h_env_value(h_fmt("%s/%s", rec, e->d_name), "WORLD_SIZE");
        out[n++] = (struct rec){.gen = gen, .pid = (pid_t)pid, .world = ws ? atoi(ws) : -1};
    }
    closedir(d);
    for (int i = 1; i < n; i++) /* insertion sort by generation */
        for (int k = i; k > 0 && out[k].gen < out[k - 1].gen; k--) {
            struct rec t = out[k];
            out[k] = out[k - 1];
            out[k - 1] = t;
        }
    return n;
}

/* Wait until the node's newest record is of world `world` (and newer than generation `after`). */
static struct rec wait_world(const char *rec, int world, long after, int timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    struct rec v[32];
    for (;;) {
        int n = records(rec, v, 32);
        if (n > 0 && v[n - 1].world == world && v[n - 1].gen > after)
            return v[n - 1];
        int left = (int)(deadline - h_now_ms());
        cr_assert_gt(left, 0, "%s: no worker of world %d after generation %ld (%d records)", rec,
                     world, after, n);
        h_wait_files(rec, "gen.", n + 1, left);
    }
}

/* Every record of the node names the same process. */
static void assert_one_pid(const char *rec, pid_t pid)
{
    struct rec v[32];
    int n = records(rec, v, 32);
    for (int i = 0; i < n; i++)
        cr_assert_eq(v[i].pid, pid, "%s: generation %ld was held by pid %d, not %d (restarted)",
                     rec, v[i].gen, (int)v[i].pid, (int)pid);
}

static void assert_all_gone(const char *rec)
{
    struct rec v[32];
    int n = records(rec, v, 32);
    for (int i = 0; i < n; i++) {
        cr_assert(h_pid_gone(v[i].pid, 10000), "worker %d still runs", (int)v[i].pid);
        errno = 0;
        cr_assert(kill(-v[i].pid, 0) < 0 && errno == ESRCH,
                  "process group %d still has a "
                  "process",
                  (int)v[i].pid);
    }
}

Test(inplace, node_added_and_removed_survivors_keep_their_process)
{
    struct h_agent a[3];
    const char *r0 = start(&a[0], "ip1", "n0", "good");
    const char *r1 = start(&a[1], "ip1", "n1", "good");
    struct rec w0 = wait_world(r0, 2, 0, 60000), w1 = wait_world(r1, 2, 0, 60000);
    /* a node added: world 3, the same two processes */
    const char *r2 = start(&a[2], "ip1", "n2", "good");
    struct rec v0 = wait_world(r0, 3, w0.gen, 60000), v1 = wait_world(r1, 3, w1.gen, 60000);
    struct rec v2 = wait_world(r2, 3, 0, 60000);
    cr_assert_eq(v0.pid, w0.pid, "n0's worker was restarted at the node's arrival");
    cr_assert_eq(v1.pid, w1.pid, "n1's worker was restarted at the node's arrival");
    wait_log(&a[0], "local worker(s) re-assigned in place", 10000);
    /* a node lost (SIGKILL): world 2, the survivors' processes again the same */
    h_agent_signal(&a[1], SIGKILL);
    cr_assert_eq(h_agent_wait(&a[1], 5000), 128 + SIGKILL);
    struct rec x0 = wait_world(r0, 2, v0.gen, 60000), x2 = wait_world(r2, 2, v2.gen, 60000);
    cr_assert_eq(x0.pid, w0.pid, "n0's worker was restarted at the node's loss");
    cr_assert_eq(x2.pid, v2.pid, "n2's worker was restarted at the node's loss");
    cr_assert_eq(x0.gen, x2.gen, "the survivors hold different generations");
    assert_one_pid(r0, w0.pid);
    assert_one_pid(r2, v2.pid);
    cr_assert_not(h_file_contains(a[0].log, "ERROR"), "an error on n0");
    /* leaving: the in-place workers are stopped like any */
    h_agent_signal(&a[0], SIGTERM);
    h_agent_signal(&a[2], SIGTERM);
    h_expect_exit(&a[0], 128 + SIGTERM, 30000);
    h_expect_exit(&a[2], 128 + SIGTERM, 30000);
    assert_all_gone(r0);
    assert_all_gone(r1);
    assert_all_gone(r2);
}

/* n0's worker in `mode` breaks the re-assignment when n2 arrives: `message` in n0's log, the
 * worker stopped, its rank restarted (another process), the run going on; nothing left. */
static void broken_reassignment(const char *run, const char *mode, const char *message)
{
    struct h_agent a[3];
    const char *r0 = start(&a[0], run, "n0", mode);
    const char *r1 = start(&a[1], run, "n1", "good");
    struct rec w0 = wait_world(r0, 2, 0, 60000);
    wait_world(r1, 2, 0, 60000);
    const char *r2 = start(&a[2], run, "n2", "good");
    wait_log(&a[0], message, 30000);
    cr_assert(
        h_file_contains(a[0].log, h_fmt("local rank 0's in-place worker (pid %d) ", (int)w0.pid)),
        "the message does not name the worker");
    cr_assert(h_pid_gone(w0.pid, 10000), "the worker that broke the protocol still runs");
    /* restarted the normal way: a new round, its rank taken by another process */
    wait_log(&a[0], "restarts 1/3", 30000);
    struct rec v0 = wait_world(r0, 3, w0.gen, 60000);
    cr_assert_neq(v0.pid, w0.pid);
    wait_world(r2, 3, 0, 60000);
    for (int i = 0; i < 3; i++)
        h_agent_signal(&a[i], SIGTERM);
    for (int i = 0; i < 3; i++)
        h_expect_exit(&a[i], 128 + SIGTERM, 30000);
    assert_all_gone(r0);
    assert_all_gone(r1);
    assert_all_gone(r2);
}

Test(inplace, ignored_reassignment_is_restarted_after_the_timeout)
{
    broken_reassignment("ip2", "ignore", "did not acknowledge its re-assignment to generation ");
    cr_assert(h_file_contains(h_fmt("%s/n0.log", dir),
                              "within --in-place-timeout 1.0 s (it must call "
                              "elastic_agent.reassignment() at a safe point"));
}

Test(inplace, malformed_ack_is_restarted)
{
    broken_reassignment("ip3", "badack", "sent a malformed line on ELASTIC_ASSIGN_FD: not JSON");
    cr_assert(h_file_contains(h_fmt("%s/n0.log", dir), "(expected {\"ack\":G} after a "
                                                       "re-assignment)"));
}

/* ---- a joining node warms its workers before it joins (--warm-workers) ---------------------- */

/* The pids of <rec>/<prefix>.<pid> files (parked.<pid>, ready.<pid>). */
static int marks(const char *rec, const char *prefix, pid_t *out, int max)
{
    DIR *d = opendir(rec);
    cr_assert(d, "%s", rec);
    int n = 0;
    size_t len = strlen(prefix);
    for (struct dirent *e; (e = readdir(d)) && n < max;)
        if (strncmp(e->d_name, prefix, len) == 0 && e->d_name[len] == '.')
            out[n++] = (pid_t)atoi(e->d_name + len + 1);
    closedir(d);
    return n;
}

/* A watch on node `name`'s key of run `run` (its record, written when the node joins). */
static struct kv *watch_node_key(const char *run, const char *name, int64_t *wid)
{
    struct kv *kv = NULL;
    struct ea_error err = {0};
    cr_assert_eq(etcd_harness_open(eh.endpoints, 0, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_watch(kv, h_fmt("/elastic/%s/nodes/%s", run, name), 0, wid, &err), 0, "%s",
                 err.msg);
    return kv;
}

/* Two nodes train; a third joins with a spare whose set-up takes IPW_READY_DELAY 3 s: its node
 * key (its join) appears only after that spare's ready line, the world-3 round takes the spare. */
Test(inplace, joining_node_writes_its_node_key_after_its_spare_is_ready)
{
    struct h_agent a[3];
    const char *r0 = start(&a[0], "ip4", "n0", "good");
    const char *r1 = start(&a[1], "ip4", "n1", "good");
    struct rec w0 = wait_world(r0, 2, 0, 60000);
    wait_world(r1, 2, 0, 60000);
    int64_t wid = 0;
    struct kv *kv = watch_node_key("ip4", "n2", &wid);
    setenv("IPW_READY_DELAY", "3", 1); /* the agents' environment is their workers' */
    const char *r2 = start(&a[2], "ip4", "n2", "good");
    unsetenv("IPW_READY_DELAY");
    int64_t t0 = h_now_ms();
    struct kv_event *evs = NULL;
    size_t n_evs = 0;
    long put = etcd_harness_wait_type(kv, &evs, &n_evs, wid, KV_EVENT_PUT, 60000);
    int64_t t_key = h_now_ms();
    cr_assert_geq(put, 0, "n2's node key never appeared");
    pid_t ready[8], parked[8];
    int n_ready = marks(r2, "ready", ready, 8), n_parked = marks(r2, "parked", parked, 8);
    cr_assert_eq(n_ready, 1,
                 "n2's node key appeared %.1f s after its start, before its spare sent its ready "
                 "line (%d spare(s) started): it joined first and warmed after",
                 (double)(t_key - t0) / 1000.0, n_parked);
    cr_assert_eq(n_parked, 1, "n2 parked %d spare(s) before its join, not 1", n_parked);
    kv_events_free(evs, n_evs);
    kv_close(kv);
    wait_log(&a[2], "run 'ip4' is running: warming 1 worker(s) before joining it", 1000);
    wait_log(&a[2], "1 of 1 warm spare(s) ready after ", 1000);
    /* the round the join started took that very spare; the survivors stayed themselves */
    struct rec v2 = wait_world(r2, 3, 0, 60000);
    cr_assert_eq(v2.pid, ready[0], "n2's world-3 worker (pid %d) is not its warmed spare (pid %d)",
                 (int)v2.pid, (int)ready[0]);
    struct rec v0 = wait_world(r0, 3, w0.gen, 60000);
    cr_assert_eq(v0.pid, w0.pid, "n0's worker was restarted at the node's arrival");
    cr_assert_not(h_file_contains(a[2].log, "ERROR"), "an error on n2");
    for (int i = 0; i < 3; i++)
        h_agent_signal(&a[i], SIGTERM);
    for (int i = 0; i < 3; i++)
        h_expect_exit(&a[i], 128 + SIGTERM, 30000);
    assert_all_gone(r0);
    assert_all_gone(r1);
    assert_all_gone(r2);
}

/* A joining node whose spare never sends its ready line joins all the same once
 * --worker-startup-timeout has passed, with one clear line; its workers start cold. */
Test(inplace, joining_node_whose_spare_never_gets_ready_joins_cold)
{
    struct h_agent a[3];
    const char *r0 = start(&a[0], "ip5", "n0", "good");
    const char *r1 = start(&a[1], "ip5", "n1", "good");
    wait_world(r0, 2, 0, 60000);
    wait_world(r1, 2, 0, 60000);
    setenv("IPW_READY_DELAY", "3600", 1);
    const char *extra[] = {"--worker-startup-timeout", "2", NULL};
    const char *r2 = start_opts(&a[2], "ip5", "n2", "good", extra);
    unsetenv("IPW_READY_DELAY");
    wait_log(&a[2],
             "did not call elastic_agent.wait_for_assignment() (no ready line on "
             "ELASTIC_ASSIGN_FD) within --worker-startup-timeout 2 s of its start",
             15000);
    wait_log(&a[2], "; joining run 'ip5' anyway: its next round starts this node's workers cold",
             1000);
    wait_log(&a[2], "joined run 'ip5'", 5000);
    struct rec v2 = wait_world(r2, 3, 0, 60000); /* a cold worker: no wait for the ready line */
    pid_t parked[8];
    int n_parked = marks(r2, "parked", parked, 8);
    cr_assert_geq(n_parked, 1);
    cr_assert_neq(v2.pid, parked[0], "the spare that never got ready took a rank");
    cr_assert(h_pid_gone(parked[0], 10000), "the spare that never got ready still runs");
    for (int i = 0; i < 3; i++)
        h_agent_signal(&a[i], SIGTERM);
    for (int i = 0; i < 3; i++)
        h_expect_exit(&a[i], 128 + SIGTERM, 30000);
    assert_all_gone(r0);
    assert_all_gone(r1);
    assert_all_gone(r2);
    n_parked = marks(r2, "parked", parked, 8);
    for (int i = 0; i < n_parked; i++)
        cr_assert(h_pid_gone(parked[i], 10000), "spare %d still runs", (int)parked[i]);
}

/* SIGTERM while a joining node warms its workers: it exits at once, never joined, its spare
 * (and its process group) gone. */
Test(inplace, sigterm_while_warming_before_the_join_leaves_nothing)
{
    struct h_agent a[3];
    const char *r0 = start(&a[0], "ip6", "n0", "good");
    const char *r1 = start(&a[1], "ip6", "n1", "good");
    wait_world(r0, 2, 0, 60000);
    wait_world(r1, 2, 0, 60000);
    setenv("IPW_READY_DELAY", "3600", 1);
    const char *r2 = start(&a[2], "ip6", "n2", "good");
    unsetenv("IPW_READY_DELAY");
    wait_log(&a[2], "warming 1 worker(s) before joining it", 15000);
    cr_assert_eq(h_wait_files(r2, "parked.", 1, 15000), 1);
    pid_t parked[8];
    cr_assert_eq(marks(r2, "parked", parked, 8), 1);
    h_agent_signal(&a[2], SIGTERM);
    h_expect_exit(&a[2], 128 + SIGTERM, 10000);
    cr_assert(h_pid_gone(parked[0], 10000), "the spare %d outlived its agent", (int)parked[0]);
    errno = 0;
    cr_assert(kill(-parked[0], 0) < 0 && errno == ESRCH, "the spare's process group lives on");
    wait_log(&a[2], "interrupted while warming this node's workers: stopping them, not joining",
             1000);
    cr_assert_not(h_file_contains(a[2].log, "joined run"), "n2 joined");
    h_agent_signal(&a[0], SIGTERM);
    h_agent_signal(&a[1], SIGTERM);
    h_expect_exit(&a[0], 128 + SIGTERM, 30000);
    h_expect_exit(&a[1], 128 + SIGTERM, 30000);
    assert_all_gone(r0);
    assert_all_gone(r1);
}
