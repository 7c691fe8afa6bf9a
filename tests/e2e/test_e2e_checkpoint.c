// SPDX-License-Identifier: Apache-2.0
/*
 * The checkpoint store end to end (issue 39, docs/checkpoint.md): elastic-agent on a real etcd,
 * real Python workers (tests/helpers/ckpt_worker.py, through python/elastic_agent/checkpoint.py):
 * a worker that crashed reloads its state from the agent's memory (the same bytes); a whole-run
 * restart resumes from --checkpoint-dir; a corrupt shard there is skipped for the older whole
 * step; a process of another user cannot reach the socket. Replication (stage 4): a node's saved
 * shard appears at its ring successor; the node SIGKILLed, the survivor's worker loads the dead
 * node's shard from the replica (the same bytes); a node that is not a member is refused at the
 * replication port. Fetch (issue 39 item 3): three nodes, each rank saving its shard (no node
 * holds a whole step); one node SIGKILLed; the survivors' latest() names the step complete
 * across them (the coordinator's value of the round: no node lists for it), and each loads
 * every shard, the dead node's fetched from its successor's replica
 * by the third node; a fetch by a non-member is refused.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckpt_wire.h"
#include "etcd_harness.h"
#include "harness.h"

static char dir[256], state[300], envdir[300];
static struct etcd_harness etcd;

static void setup(void)
{
    h_suite_dirs("ckpt", dir, state, envdir);
    cr_assert_eq(etcd_harness_start(&etcd, 1), 0, "cannot start etcd");
}

static void teardown(void)
{
    h_kill_agents();
    etcd_harness_stop(&etcd);
    if (getenv("EA_E2E_KEEP"))
        cr_log_warn("kept %s", dir);
    else
        h_rmdir(dir);
}

TestSuite(e2e_checkpoint, .init = setup, .fini = teardown, .timeout = 240);

/* One node of run "ck" (store prefix `prefix`), the worker ckpt_worker.py with `wenv` (a
 * "K=V K=V" string for env(1)), and `extra` agent flags. */
static void start(struct h_agent *a, const char *name, const char *prefix, const char *wenv,
                  const char *const *extra)
{
    const char *base[] = {"--rdzv-endpoint", etcd.endpoints, "--prefix", prefix, "--run-id", "ck",
                          "--node-id", name, "--settle", "0.2", "--stop-timeout", "5",
                          "--local-addr", "127.0.0.1", NULL};
    const char *cmd[] = {"/usr/bin/env", h_fmt("PYTHONPATH=%s/python", EA_SOURCE_DIR),
                         h_fmt("CK_OUT=%s", envdir), "/bin/sh", "-c",
                         h_fmt("exec env %s /usr/bin/python3 %s/tests/helpers/ckpt_worker.py", wenv,
                               EA_SOURCE_DIR),
                         NULL};
    h_agent_start_argv(a, dir, name, base, extra, cmd);
}

static void expect_file(const char *name, const char *needle)
{
    char *s = h_slurp(h_fmt("%s/%s", envdir, name), NULL);
    bool ok = strstr(s, needle) != NULL;
    if (!ok)
        cr_log_error("worker log:\n%s", s);
    free(s);
    cr_assert(ok, "'%s' not in the worker's log", needle);
}

static void expect_log(const char *needle)
{
    expect_file("log.0", needle);
}

Test(e2e_checkpoint, a_crashed_worker_reloads_its_state_from_memory)
{
    struct h_agent a = {0};
    const char *extra[] = {"--checkpoint-memory", "16", "--max-restarts", "1", NULL};
    start(&a, "n0", "/ck1/", "CK_STEPS=6 CK_CRASH_AT=3", extra);
    int code = h_agent_wait(&a, 120000);
    if (code != 0)
        h_show_log(&a);
    cr_assert_eq(code, 0);
    expect_log("fresh\nsaved 1\nsaved 2\nsaved 3\nresumed 3 ok\nsaved 4\nsaved 5\nsaved 6\n");
}

Test(e2e_checkpoint, a_whole_run_restart_resumes_from_checkpoint_dir)
{
    const char *ckdir = h_fmt("%s/disk", dir);
    struct h_agent a = {0}, b = {0};
    const char *extra[] = {"--checkpoint-memory", "16", "--checkpoint-dir", ckdir,
                           "--checkpoint-every", "2", NULL};
    /* the run fails after step 5 (no restarts): step 4 was written as a multiple of 2, step 5
     * at the breakpoint */
    start(&a, "n0", "/ck2a/", "CK_STEPS=9 CK_CRASH_AT=5", extra);
    int code = h_agent_wait(&a, 120000);
    cr_assert_neq(code, 0, "the run failed");
    expect_log("saved 5\n");
    /* a new run of the same id (a fresh store prefix: the job restarted from scratch) */
    start(&b, "n0", "/ck2b/", "CK_STEPS=6", extra);
    code = h_agent_wait(&b, 120000);
    if (code != 0)
        h_show_log(&b);
    cr_assert_eq(code, 0);
    expect_log("saved 5\nresumed 5 ok\nsaved 6\n");
    cr_assert(h_file_contains(b.log, "read back from --checkpoint-dir"));
}

Test(e2e_checkpoint, a_corrupt_shard_on_disk_is_skipped_for_the_older_whole_step)
{
    const char *ckdir = h_fmt("%s/disk", dir);
    struct h_agent a = {0}, b = {0};
    const char *extra[] = {"--checkpoint-memory", "16", "--checkpoint-dir", ckdir,
                           "--checkpoint-every", "1", NULL};
    start(&a, "n0", "/ck3a/", "CK_STEPS=4", extra);
    cr_assert_eq(h_agent_wait(&a, 120000), 0);
    /* steps 3 and 4 kept; one byte of step 4's data garbled */
    const char *f = h_fmt("%s/ck/step-%020d/shard-0-of-1", ckdir, 4);
    int fd = open(f, O_RDWR);
    cr_assert_geq(fd, 0, "%s", f);
    cr_assert_eq(pwrite(fd, "#", 1, 4096), 1);
    close(fd);
    start(&b, "n0", "/ck3b/", "CK_STEPS=5", extra);
    cr_assert_eq(h_agent_wait(&b, 120000), 0);
    expect_log("saved 4\nresumed 3 ok\nsaved 4\nsaved 5\n");
    cr_assert(h_file_contains(b.log, "skipped"));
}

Test(e2e_checkpoint, another_user_cannot_reach_the_socket)
{
    struct h_agent a = {0};
    const char *extra[] = {"--checkpoint-memory", "16", NULL};
    const char *base[] = {"--rdzv-endpoint", etcd.endpoints, "--prefix", "/ck4/", "--run-id", "ck",
                          "--node-id", "n0", "--settle", "0.2", "--stop-timeout", "2", NULL};
    const char *cmd[] = {"/bin/sh", "-c",
                         h_fmt("echo $ELASTIC_AGENT_CHECKPOINT_SOCKET > %s/sock.tmp && mv "
                               "%s/sock.tmp %s/sock && exec sleep 600",
                               envdir, envdir, envdir),
                         NULL};
    h_agent_start_argv(&a, dir, "n0", base, extra, cmd);
    cr_assert_eq(h_wait_files(envdir, "sock", 1, 30000), 1);
    char *path = h_slurp(h_fmt("%s/sock", envdir), NULL);
    path[strcspn(path, "\n")] = 0;
    cr_assert(path[0] == '/', "ELASTIC_AGENT_CHECKPOINT_SOCKET '%s'", path);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(65534) < 0 || setuid(65534) < 0)
            _exit(2);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        _exit(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? 0 : 1);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "uid 65534 reached %s", path);
    free(path);
    h_agent_signal(&a, SIGTERM);
    h_agent_wait(&a, 30000);
}

/* ---- replication (issue 39 stage 4) ------------------------------------------------------- */

static void start_repl_n(struct h_agent *a, const char *name, const char *prefix, const char *max,
                         const char *wenv)
{
    const char *base[] = {"--rdzv-endpoint", etcd.endpoints, "--prefix", prefix, "--run-id", "ck",
                          "--node-id", name, "--min", "1", "--max", max, "--settle", "1",
                          "--stop-timeout", "2", "--lease-ttl", "10", "--local-addr", "127.0.0.1",
                          "--checkpoint-memory", "16", "--log-level", "debug", NULL};
    const char *cmd[] = {"/usr/bin/env", h_fmt("PYTHONPATH=%s/python", EA_SOURCE_DIR),
                         h_fmt("CK_OUT=%s", envdir), h_fmt("CK_NODE=%s", name), "CK_STEPS=3",
                         h_fmt("CK_WORLD=%s", max), wenv, "/usr/bin/python3", h_fmt("%s/tests/helpers/ckpt_repl_worker.py",
                                                   EA_SOURCE_DIR),
                         NULL};
    h_agent_start_argv(a, dir, name, base, NULL, cmd);
}

static void start_repl(struct h_agent *a, const char *name)
{
    start_repl_n(a, name, "/ck5/", "2", "CK_WAIT=1");
}

/* The replication port n's log names. */
static int repl_port(const struct h_agent *a)
{
    cr_assert(h_log_wait(a, "replication port 127.0.0.1:", 30000));
    char *s = h_slurp(a->log, NULL);
    const char *p = strstr(s, "replication port 127.0.0.1:");
    int port = atoi(p + strlen("replication port 127.0.0.1:"));
    free(s);
    return port;
}

/* A hello from node `from` of run `run` to n1 at `port`: the answer's status. */
static int hello_status(int port, const char *run, int64_t round, const char *from)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    struct ckpt_hello h = {.round = round};
    snprintf(h.run, sizeof(h.run), "%s", run);
    snprintf(h.from, sizeof(h.from), "%s", from);
    snprintf(h.to, sizeof(h.to), "n1");
    uint8_t b[CKPT_HELLO_MAX];
    int n = ckpt_hello_encode(&h, b, sizeof(b));
    cr_assert_eq(send(fd, b, (size_t)n, 0), n);
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)); /* the deadline of the answer */
    uint8_t a[CKPT_ANSWER_MAX];
    size_t have = 0, used;
    char msg[256];
    enum ckpt_wire_status st = CKPT_W_BAD;
    int d = 0;
    while (d == 0) {
        ssize_t r = recv(fd, a + have, sizeof(a) - have, 0);
        cr_assert_gt(r, 0, "an answer");
        have += (size_t)r;
        d = ckpt_answer_decode(a, have, &st, msg, sizeof(msg), &used);
    }
    close(fd);
    return (int)st;
}

Test(e2e_checkpoint, a_dead_nodes_shard_is_served_from_its_replica)
{
    struct h_agent a = {0}, b = {0};
    start_repl(&a, "n0");
    cr_assert(h_log_wait(&a, "joined run", 20000), "n0 joins (and coordinates)");
    start_repl(&b, "n1"); /* a round of n0 alone before it, if any, saves nothing */
    int port = repl_port(&b);
    /* each worker saved shard RANK of 2 for steps 1..3, and its node holds step 3 complete: its
     * own shard and the predecessor's replica */
    cr_assert_eq(h_wait_files(envdir, "complete.", 2, 90000), 2, "both nodes hold step 3 whole");
    expect_file("log.n0", "complete 3\n");
    expect_file("log.n1", "complete 3\n");
    cr_assert(h_log_wait(&b, "replica of shard", 10000));
    /* a node that is not a member is refused; so is another run (in the round n1 runs) */
    char *log = h_slurp(b.log, NULL);
    const char *at = strstr(log, "checkpoint store, round ");
    cr_assert(at, "n1 follows a round");
    int round = atoi(at + strlen("checkpoint store, round "));
    free(log);
    cr_assert_eq(hello_status(port, "ck", round, "mallory"), CKPT_W_NOT_PEER);
    cr_assert(h_log_wait(&b, "not this node's ring predecessor", 10000));
    cr_assert_eq(hello_status(port, "other", round, "n0"), CKPT_W_BAD_RUN);
    /* n0 dies: agent and worker at once; n1's next worker loads step 3, n0's shard from the
     * replica, and checks the bytes */
    pid_t w = h_read_pid(h_fmt("%s/pid.n0", envdir));
    cr_assert_gt(w, 0);
    h_agent_signal(&a, SIGKILL);
    kill(w, SIGKILL);
    int code = h_agent_wait(&b, 120000);
    if (code != 0)
        h_show_log(&b);
    cr_assert_eq(code, 0);
    expect_file("log.n1", "complete 3\nresumed 3 shards 2 ok\n");
}

/* ---- fetch from any member (issue 39 item 3) ---------------------------------------------- */

/* A fetch request from node `from` to node `to` at `port`: the answer's status. */
static int fetch_status(int port, int64_t round, const char *from, const char *to)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    struct ckpt_fetch_req q = {.h.round = round, .step = 3, .shard = 0};
    snprintf(q.h.run, sizeof(q.h.run), "ck");
    snprintf(q.h.from, sizeof(q.h.from), "%s", from);
    snprintf(q.h.to, sizeof(q.h.to), "%s", to);
    uint8_t b[CKPT_FETCH_MAX];
    int n = ckpt_fetch_encode(&q, b, sizeof(b));
    cr_assert_eq(send(fd, b, (size_t)n, 0), n);
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)); /* the deadline of the answer */
    uint8_t a[CKPT_ANSWER_MAX];
    size_t have = 0, used;
    char msg[256];
    enum ckpt_wire_status st = CKPT_W_BAD;
    int d = 0;
    while (d == 0) {
        ssize_t r = recv(fd, a + have, sizeof(a) - have, 0);
        cr_assert_gt(r, 0, "an answer");
        have += (size_t)r;
        d = ckpt_answer_decode(a, have, &st, msg, sizeof(msg), &used);
    }
    close(fd);
    return (int)st;
}

/* The round a node's checkpoint store follows now (the last one its log names). */
static int64_t last_round(const struct h_agent *a)
{
    char *log = h_slurp(a->log, NULL);
    const char *at = NULL;
    for (const char *p = log; (p = strstr(p, "checkpoint store, round ")); p++)
        at = p;
    cr_assert(at, "it follows a round");
    int64_t round = atoll(at + strlen("checkpoint store, round "));
    free(log);
    return round;
}

Test(e2e_checkpoint, a_shard_is_fetched_from_any_member_and_latest_counts_the_members)
{
    struct h_agent n[3] = {{0}};
    const char *names[3] = {"n0", "n1", "n2"};
    start_repl_n(&n[0], "n0", "/ck6/", "3", "CK_WAIT=0");
    cr_assert(h_log_wait(&n[0], "joined run", 20000), "n0 joins (and coordinates)");
    start_repl_n(&n[1], "n1", "/ck6/", "3", "CK_WAIT=0");
    start_repl_n(&n[2], "n2", "/ck6/", "3", "CK_WAIT=0");
    int port1 = repl_port(&n[1]);
    /* every rank saved shard RANK of 3 for steps 1..3; each node holds its own shard and its
     * predecessor's replica: two of three, step 3 complete at none */
    cr_assert_eq(h_wait_files(envdir, "saved.", 3, 90000), 3, "the three ranks saved");
    for (int i = 0; i < 3; i++)
        cr_assert(h_log_wait(&n[i], "replica of shard", 30000), "%s holds a replica", names[i]);
    /* a node that is not a member of the round may not fetch; a member may (below) */
    int64_t round = last_round(&n[1]);
    cr_assert_eq(fetch_status(port1, round, "mallory", "n1"), CKPT_W_NOT_MEMBER);
    cr_assert(h_log_wait(&n[1], "'mallory' is not a member of round", 10000));
    /* n2 dies, agent and worker at once: the survivors' workers resume step 3, every shard of
     * it, n2's own from its successor's replica fetched by the third node */
    pid_t w = h_read_pid(h_fmt("%s/pid.n2", envdir));
    cr_assert_gt(w, 0);
    h_agent_signal(&n[2], SIGKILL);
    kill(w, SIGKILL);
    for (int i = 0; i < 2; i++) {
        int code = h_agent_wait(&n[i], 120000);
        if (code != 0)
            h_show_log(&n[i]);
        cr_assert_eq(code, 0, "%s", names[i]);
    }
    expect_file("log.n0", "resumed 3 shards 3 ok\n");
    expect_file("log.n1", "resumed 3 shards 3 ok\n");
    /* step 3 is complete at no node alone: latest() had it from the coordinator's value of the
     * round (rounds/<r>/ckpt), not from a listing nor this store alone */
    cr_assert(h_file_contains(n[0].log, "the run's newest complete step is 3 (3 shard(s))"));
    for (int i = 0; i < 2; i++)
        cr_assert_not(h_file_contains(n[i].log, "from this store alone"), "%s", names[i]);
    /* the dead node's rank (its shard) in the round of three, from its log */
    char *log = h_slurp(n[2].log, NULL);
    const char *at = strstr(log, "of world 3");
    cr_assert(at, "n2 ran in the round of three");
    while (at > log && strncmp(at, "ranks ", 6) != 0)
        at--;
    const char *fetched = h_fmt("fetched shard %d of step 3", atoi(at + 6));
    free(log);
    cr_assert(h_file_contains(n[0].log, fetched) || h_file_contains(n[1].log, fetched),
              "'%s': the dead node's shard, fetched from its successor", fetched);
}
