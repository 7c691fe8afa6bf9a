// SPDX-License-Identifier: Apache-2.0
/*
 * End to end against a real etcd (issue #4): elastic-agent processes on the etcd backend, etcd
 * members started by tests/etcd/etcd_harness on free loopback ports (temp data dirs, killed
 * after), real workers (tests/helpers/ea-testworker). Eight agents get ranks 0..7 and the state
 * key in etcd is the committed round; a 3-member cluster loses its leader during a rendezvous
 * and while workers run; etcd stops for longer than the lease TTL; TLS with client certificates
 * and auth; an unreachable store and wrong credentials. Waits are on log lines, files and pidfds
 * with deadlines; etcd's leader is read from its /metrics.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "etcd_harness.h"
#include "harness.h"
#include "state.h"

#define W EA_HELPERS_DIR "/ea-testworker"
#define MAX_AGENTS 16

static char dir[256], envdir[300];
static struct etcd_harness eh;
static struct h_agent *started[MAX_AGENTS];
static int n_started;

static void setup(void)
{
    h_mkdtemp(dir, sizeof(dir), "etcd");
    snprintf(envdir, sizeof(envdir), "%s/env", dir);
    cr_assert_eq(mkdir(envdir, 0755), 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1); /* orphaned workers come to us and can be reaped */
    n_started = 0;
}

static void teardown(void)
{
    h_kill_agents(); /* whatever a failed assertion left running */
    /* a failed assertion leaves agents behind: they (and their workers) go first */
    for (int i = 0; i < n_started; i++)
        if (!started[i]->reaped) {
            h_agent_signal(started[i], SIGKILL);
            h_agent_wait(started[i], 5000);
        }
    for (int i = 0; i < eh.n; i++)
        if (eh.m[i].pid > 0)
            kill(eh.m[i].pid, SIGCONT);
    etcd_harness_stop(&eh);
    unsetenv("ELASTIC_ETCD_PASSWORD");
    if (getenv("EA_E2E_KEEP"))
        cr_log_warn("kept %s", dir);
    else
        h_rmdir(dir);
}

TestSuite(e2e_etcd, .init = setup, .fini = teardown, .timeout = 120);


/* Start agent `name` of run `run` on `endpoints` with the common options, `extra`
 * (NULL-terminated, may be NULL) and the command. */
static void start(struct h_agent *a, const char *name, const char *run, const char *endpoints,
                  const char *const *extra, const char *const *cmd)
{
    const char *args[64] = {"--rdzv-endpoint", endpoints, "--run-id",     run,
                            "--node-id",       name,      "--settle",     "0.3",
                            "--stop-timeout",  "2",       "--local-addr", "127.0.0.1"};
    int n = 12;
    for (int i = 0; extra && extra[i]; i++)
        args[n++] = extra[i];
    args[n++] = "--";
    for (int i = 0; cmd[i]; i++)
        args[n++] = cmd[i];
    args[n] = NULL;
    h_agent_start(a, dir, name, args);
    cr_assert_lt(n_started, MAX_AGENTS);
    started[n_started++] = a;
}



static void wait_log(const struct h_agent *a, const char *needle, int timeout_ms)
{
    bool ok = h_log_wait(a, needle, timeout_ms);
    if (!ok)
        h_show_log(a);
    cr_assert(ok, "'%s' not in %s within %d ms", needle, a->log, timeout_ms);
}

/* Workers: write envdir/pid.<round>.<rank> (the pid stays: exec), record the environment, then
 * run until the test creates envdir/go. */
static const char *recording_worker(void)
{
    return h_fmt("f=%s/pid.$ELASTIC_ROUND.$RANK; echo $$ > $f.tmp && mv $f.tmp $f && %s record %s "
               "&& exec %s wait-file %s/go",
               envdir, W, envdir, W, envdir);
}

static void release_workers(void)
{
    FILE *f = fopen(h_fmt("%s/go", envdir), "w");
    cr_assert(f);
    fclose(f);
}

struct round_info {
    int n; /* env files of the round */
    char generation[64];
    char master[160];
};

/* Check the env files of `round`: exactly `n`, ranks 0..n-1 once each, one master, one
 * generation, world n, restart count 0. */
static struct round_info check_round(int round, int n)
{
    struct round_info ri = {0};
    int seen[64] = {0};
    DIR *d = opendir(envdir);
    cr_assert(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "env.", 4) != 0 || strstr(e->d_name, ".tmp"))
            continue;
        const char *p = h_fmt("%s/%s", envdir, e->d_name);
        const char *r = h_env_value(p, "ELASTIC_ROUND");
        cr_assert(r, "%s has no ELASTIC_ROUND", p);
        if (atoi(r) != round)
            continue;
        ri.n++;
        int rank = atoi(h_env_value(p, "RANK"));
        cr_assert(rank >= 0 && rank < n && rank < 64, "round %d: rank %d out of 0..%d", round, rank,
                  n - 1);
        seen[rank]++;
        cr_assert_eq(atoi(h_env_value(p, "WORLD_SIZE")), n);
        cr_assert_str_eq(h_env_value(p, "TORCHELASTIC_RESTART_COUNT"), "0");
        char m[160];
        snprintf(m, sizeof(m), "%s:%s", h_env_value(p, "MASTER_ADDR"),
                 h_env_value(p, "MASTER_PORT"));
        if (!ri.master[0])
            snprintf(ri.master, sizeof(ri.master), "%s", m);
        cr_assert_str_eq(m, ri.master, "round %d: one MASTER_ADDR:PORT", round);
        const char *g = h_env_value(p, "ELASTIC_GENERATION");
        if (!ri.generation[0])
            snprintf(ri.generation, sizeof(ri.generation), "%s", g);
        cr_assert_str_eq(g, ri.generation, "round %d: one generation", round);
    }
    closedir(d);
    cr_assert_eq(ri.n, n, "round %d: %d env files, wanted %d", round, ri.n, n);
    for (int r = 0; r < n; r++)
        cr_assert_eq(seen[r], 1, "round %d: rank %d seen %d times", round, r, seen[r]);
    return ri;
}

/* The highest ELASTIC_ROUND among the env files, and how many files are of that round. */
static int latest_round(int *ret_in_latest)
{
    int latest = 0, n = 0;
    DIR *d = opendir(envdir);
    cr_assert(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "env.", 4) != 0 || strstr(e->d_name, ".tmp"))
            continue;
        const char *r = h_env_value(h_fmt("%s/%s", envdir, e->d_name), "ELASTIC_ROUND");
        if (r && atoi(r) > latest) {
            latest = atoi(r);
            n = 0;
        }
        if (r && atoi(r) == latest)
            n++;
    }
    closedir(d);
    *ret_in_latest = n;
    return latest;
}

/* Pids of the n workers of `round` (pid files written by recording_worker). */
static void worker_pids(int round, int n, pid_t *pids)
{
    for (int r = 0; r < n; r++) {
        pids[r] = h_read_pid(h_fmt("%s/pid.%d.%d", envdir, round, r));
        cr_assert_gt(pids[r], 0, "no pid file for round %d rank %d", round, r);
    }
}

/* ---- etcd side ---- */

/* Run etcdctl (through the harness, which logs to <dir>/etcdctl.log) and return its output. */
static const char *etcdctl(const char *const args[], int *ret_status)
{
    static char out[65536];
    const char *log = h_fmt("%s/etcdctl.log", eh.dir);
    struct stat st;
    off_t off = stat(log, &st) == 0 ? st.st_size : 0;
    int status = etcd_harness_etcdctl(&eh, args);
    if (ret_status)
        *ret_status = status;
    out[0] = '\0';
    FILE *f = fopen(log, "re");
    if (f) {
        fseeko(f, off, SEEK_SET);
        size_t n = fread(out, 1, sizeof(out) - 1, f);
        out[n] = '\0';
        fclose(f);
    }
    return out;
}

/* GET /metrics on member i's plain-HTTP metrics listener; the value of `name`, or -1. */
static double metric(int i, const char *name)
{
    static char buf[1 << 20];
    etcd_harness_http_get(eh.m[i].health_port, "/metrics", buf, sizeof(buf), 2000);
    char needle[128];
    snprintf(needle, sizeof(needle), "\n%s ", name);
    const char *at = strstr(buf, needle);
    return at ? atof(at + strlen(needle)) : -1;
}

/* Sum of a metric over the running members. */
static double metric_sum(const char *name)
{
    double sum = 0;
    for (int i = 0; i < eh.n; i++)
        if (eh.m[i].pid > 0) {
            double v = metric(i, name);
            sum += v > 0 ? v : 0;
        }
    return sum;
}

#define STARTED(method, service)                                                                   \
    "grpc_server_started_total{grpc_method=\"" method "\",grpc_service=\"etcdserverpb." service    \
    "\",grpc_type=\"bidi_stream\"}"

/* The running member that is the leader, or -1. */
static int leader(void)
{
    for (int i = 0; i < eh.n; i++)
        if (eh.m[i].pid > 0 && metric(i, "etcd_server_is_leader") == 1)
            return i;
    return -1;
}

/* Wait (bounded readiness poll, as the harness does for /health) until a running member leads. */
static int wait_leader(int timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    int l;
    while ((l = leader()) < 0 && h_now_ms() < deadline)
        poll(NULL, 0, 20);
    return l;
}

/* "ep_first,others..." : every member, `first` first. */
static const char *endpoints_from(int first)
{
    char *b = h_fmt("%s", eh.m[first].endpoint);
    for (int i = 0; i < eh.n; i++)
        if (i != first)
            snprintf(b + strlen(b), 512 - strlen(b), ",%s", eh.m[i].endpoint);
    return b;
}

/* ---- 1. eight agents, one etcd ---- */

Test(e2e_etcd, eight_agents_get_ranks_0_to_7_and_etcd_holds_the_committed_round)
{
    cr_assert_eq(etcd_harness_start(&eh, 1), 0);
    static struct h_agent a[8];
    const char *extra[] = {"--min", "8", "--max", "8", NULL};
    const char *cmd[] = {"/bin/sh", "-c", recording_worker(), NULL};
    int64_t t0 = h_now_ms();
    for (int i = 0; i < 8; i++)
        start(&a[i], h_fmt("n%d", i), "e2e-8", eh.endpoints, extra, cmd);
    cr_assert_eq(h_wait_files(envdir, "env.", 8, 30000), 8);
    cr_log_info("8 agents: launch -> 8 workers recorded their env in %lld ms",
                (long long)(h_now_ms() - t0));
    struct round_info ri = check_round(1, 8);

    /* While the workers run, etcd's state key is that round: running, 8 members in rank order,
     * committed at the revision the workers got as ELASTIC_GENERATION. */
    int st = 0;
    const char *get[] = {"get", "--prefix", "/elastic/e2e-8/state", NULL};
    const char *out = etcdctl(get, &st);
    cr_assert_eq(st, 0, "etcdctl get: %s", out);
    const char *nl = strchr(out, '\n');
    cr_assert(nl && strncmp(out, "/elastic/e2e-8/state\n", 21) == 0, "etcdctl printed: %s", out);
    char json[16384];
    snprintf(json, sizeof(json), "%s", nl + 1);
    json[strcspn(json, "\n")] = '\0';
    struct rdzv_state s = {0};
    struct ea_error err = {0};
    cr_assert_eq(rdzv_state_decode(json, strlen(json), &s, &err), 0, "%s: %s", err.msg, json);
    cr_assert_eq(s.round, 1);
    cr_assert_eq(s.status, RDZV_RUNNING);
    cr_assert_eq(s.group_world_size, 8);
    cr_assert_eq(s.n_chunks, 1, "8 members fit one assignment chunk");
    cr_assert_eq(s.world_size, 8);
    cr_assert_eq(s.restart_count, 0);
    /* the members are in assign/000000, where the commit put them */
    const char *geta[] = {"get", "/elastic/e2e-8/assign/000000", "--print-value-only", NULL};
    out = etcdctl(geta, &st);
    cr_assert_eq(st, 0, "etcdctl get assign/000000: %s", out);
    snprintf(json, sizeof(json), "%s", out);
    json[strcspn(json, "\n")] = '\0';
    int64_t cround = 0;
    int chunk = -1;
    struct rdzv_member *cm = NULL;
    size_t cn = 0;
    cr_assert_eq(rdzv_chunk_decode(json, strlen(json), &cround, &chunk, &cm, &cn, &err), 0,
                 "%s: %s", err.msg, json);
    cr_assert_eq(cround, 1);
    struct rdzv_member *chunks[1] = {cm};
    cr_assert_eq(rdzv_state_gather(&s, chunks, &cn, &err), 0, "%s", err.msg);
    free(cm);
    cr_assert_eq(s.n_members, 8);
    int node_seen[8] = {0};
    for (size_t i = 0; i < s.n_members; i++) {
        cr_assert_eq(s.members[i].group_rank, (int)i);
        cr_assert_eq(s.members[i].rank_base, (int)i);
        cr_assert_eq(s.members[i].node_id[0], 'n');
        int k = atoi(s.members[i].node_id + 1);
        cr_assert(k >= 0 && k < 8, "member %s", s.members[i].node_id);
        node_seen[k]++;
    }
    for (int k = 0; k < 8; k++)
        cr_assert_eq(node_seen[k], 1, "node n%d is %d times a member", k, node_seen[k]);
    rdzv_state_clear(&s);
    const char *getj[] = {"get", "/elastic/e2e-8/state", "-w", "json", NULL};
    out = etcdctl(getj, &st);
    const char *mr = strstr(out, "\"mod_revision\":");
    cr_assert(st == 0 && mr, "etcdctl get -w json: %s", out);
    cr_assert_eq(atoll(mr + 15), atoll(ri.generation),
                 "state mod_revision %lld is not the workers' generation %s", atoll(mr + 15),
                 ri.generation);

    release_workers();
    for (int i = 0; i < 8; i++)
        h_expect_exit(&a[i], 0, 20000);
    out = etcdctl(get, &st);
    cr_assert(strstr(out, "\"status\":\"succeeded\""), "final state: %s", out);
}

/* ---- 2. 3-member cluster, leader killed ---- */

Test(e2e_etcd, leader_killed_during_rendezvous_round_still_commits_once)
{
    cr_assert_eq(etcd_harness_start(&eh, 3), 0);
    int l = wait_leader(5000);
    cr_assert_geq(l, 0, "no leader");
    static struct h_agent a[4];
    const char *extra[] = {"--min", "4", "--max", "4", NULL};
    const char *cmd[] = {"/bin/sh", "-c", recording_worker(), NULL};
    /* the first three talk to the leader, and are joined and waiting for a fourth */
    for (int i = 0; i < 3; i++)
        start(&a[i], h_fmt("n%d", i), "e2e-lk1", endpoints_from(l), extra, cmd);
    for (int i = 0; i < 3; i++)
        wait_log(&a[i], "waiting for nodes", 20000);
    cr_assert_eq(etcd_harness_kill(&eh, l), 0);
    int64_t t_kill = h_now_ms();
    /* the fourth is given the dead member first */
    start(&a[3], "n3", "e2e-lk1", endpoints_from(l), extra, cmd);
    cr_assert_eq(h_wait_files(envdir, "env.", 4, 30000), 4, "round 1 did not start everywhere");
    int64_t took = h_now_ms() - t_kill;
    int nl = wait_leader(5000);
    cr_log_info("leader m%d killed while 3 of 4 agents waited; new leader m%d; the 4th joined "
                "and all 4 workers started %lld ms after the kill",
                l, nl, (long long)took);
    check_round(1, 4);
    release_workers();
    for (int i = 0; i < 4; i++)
        h_expect_exit(&a[i], 0, 30000);
    for (int i = 0; i < 4; i++)
        cr_assert(!h_file_contains(a[i].log, "round 2 "), "agent n%d saw a second round", i);
}

Test(e2e_etcd, leader_killed_while_workers_run_disturbs_nobody)
{
    cr_assert_eq(etcd_harness_start(&eh, 3), 0);
    int l = wait_leader(5000);
    cr_assert_geq(l, 0, "no leader");
    static struct h_agent a[3];
    /* lease TTL 3 s: a keepalive every second, so the window below sees several */
    const char *extra[] = {"--min", "3", "--max", "3", "--lease-ttl", "3", NULL};
    const char *cmd[] = {"/bin/sh", "-c", recording_worker(), NULL};
    for (int i = 0; i < 3; i++)
        start(&a[i], h_fmt("n%d", i), "e2e-lk2", endpoints_from(l), extra, cmd);
    cr_assert_eq(h_wait_files(envdir, "pid.", 3, 30000), 3);
    cr_assert_eq(h_wait_files(envdir, "env.", 3, 10000), 3);
    struct round_info r1 = check_round(1, 3);
    pid_t pids[3];
    worker_pids(1, 3, pids);

    /* every agent's streams and requests are on the leader: kill it */
    double watches0 = 0, kas0 = 0;
    for (int i = 0; i < 3; i++)
        if (i != l) {
            watches0 += metric(i, STARTED("Watch", "Watch"));
            kas0 += metric(i, STARTED("LeaseKeepAlive", "Lease"));
        }
    cr_assert_eq(etcd_harness_kill(&eh, l), 0);
    int64_t t_kill = h_now_ms();
    int nl = wait_leader(10000);
    cr_assert_geq(nl, 0, "no new leader");
    int64_t elected = h_now_ms() - t_kill;
    /* Two lease TTLs after the election: no lease lost, no stop, no new round. */
    for (int i = 0; i < 3; i++) {
        int window = i == 0 ? 6000 : 0;
        cr_assert(!h_log_wait(&a[i], "lease lost", window), "agent n%d lost its lease", i);
        cr_assert(!h_file_contains(a[i].log, "stopping"), "agent n%d stopped its workers", i);
        cr_assert(!h_file_contains(a[i].log, "round 2 "), "agent n%d started round 2", i);
    }
    for (int r = 0; r < 3; r++)
        cr_assert(!h_pid_gone(pids[r], 0), "worker rank %d (pid %d) is gone", r, pids[r]);
    cr_assert_eq(h_count_files(envdir, "env."), 3, "a worker was started again");
    for (int i = 0; i < 3; i++) {
        char line[1024];
        FILE *f = fopen(a[i].log, "r");
        while (f && fgets(line, sizeof(line), f))
            if (strstr(line, "WARN") || strstr(line, "ERROR") || strstr(line, "reachable"))
                cr_log_info("n%d: %s", i, line);
        if (f)
            fclose(f);
    }
    /* ...and the agents did notice: each moved its watch and keepalive streams to a survivor */
    double watches = metric_sum(STARTED("Watch", "Watch")) - watches0;
    double kas = metric_sum(STARTED("LeaseKeepAlive", "Lease")) - kas0;
    cr_log_info("leader m%d killed with 3 workers running; m%d elected after %lld ms; the "
                "survivors got %.0f new watch and %.0f new keepalive streams; workers untouched",
                l, nl, (long long)elected, watches, kas);
    cr_assert_geq(watches, 3, "the agents' watches did not move to the surviving members");
    cr_assert_geq(kas, 3, "the agents' keepalives did not move to the surviving members");

    /* The run still works on the new leader: the workers finish, every agent sees success. */
    release_workers();
    for (int i = 0; i < 3; i++)
        h_expect_exit(&a[i], 0, 20000);
    struct round_info again = check_round(1, 3);
    cr_assert_str_eq(again.generation, r1.generation);
}

/* ---- 3. lease loss ---- */

/* Two agents with --lease-ttl 2 and running workers; `outage` takes etcd away, `back` brings it
 * back. Every agent must stop its workers about a TTL after the store went away, then rejoin
 * and run round 2 when it is back. */
static void lease_loss(const char *run, void (*outage)(void), void (*back)(void))
{
    cr_assert_eq(etcd_harness_start(&eh, 1), 0);
    static struct h_agent a[2];
    const char *extra[] = {"--min", "2", "--max", "2", "--lease-ttl", "2", NULL};
    const char *cmd[] = {"/bin/sh", "-c", recording_worker(), NULL};
    for (int i = 0; i < 2; i++)
        start(&a[i], h_fmt("n%d", i), run, eh.endpoints, extra, cmd);
    cr_assert_eq(h_wait_files(envdir, "pid.", 2, 30000), 2);
    cr_assert_eq(h_wait_files(envdir, "env.", 2, 10000), 2);
    check_round(1, 2);
    pid_t pids[2];
    worker_pids(1, 2, pids);

    outage();
    int64_t t0 = h_now_ms();
    /* The lease (TTL 2 s) was last renewed at most TTL/3 before the outage: the agents must
     * assume they are fenced out within the TTL, and stop their workers (SIGTERM; the worker
     * exits at once). 2 s of slack on top. */
    bool in_time = true;
    for (int r = 0; r < 2; r++) {
        int left = (int)(t0 + 2000 + 2000 - h_now_ms());
        if (!h_pid_gone(pids[r], left > 0 ? left : 0))
            in_time = false;
    }
    for (int r = 0; r < 2; r++)
        cr_assert(h_pid_gone(pids[r], 30000), "worker rank %d (pid %d) still runs %lld ms in", r,
                  pids[r], (long long)(h_now_ms() - t0));
    int64_t stopped_after = h_now_ms() - t0;
    cr_log_info("%s: workers stopped %lld ms after the store went away (lease TTL 2000 ms)", run,
                (long long)stopped_after);
    cr_expect(in_time,
              "%s: workers ran on for %lld ms after the store went away, with a lease "
              "TTL of 2000 ms (fencing needs them stopped within the TTL)",
              run, (long long)stopped_after);
    for (int i = 0; i < 2; i++) {
        wait_log(&a[i], "lease lost", 1000);
        wait_log(&a[i], "stopping 1 worker(s) of round 1 (lease lost", 1000);
    }

    back();
    for (int i = 0; i < 2; i++)
        wait_log(&a[i], "rejoined run", 20000);
    int files = h_wait_files(envdir, "env.", 4, 20000);
    cr_assert_geq(files, 4, "no new round started everywhere");
    /* Which round that is depends on timing: an agent that rejoins first may commit a round
     * with its peer's old node key (etcd restores leases across a restart), which lapses when
     * that lease expires: round 2 then waits for the peer, who starts round 3 on rejoining. */
    int latest, in_latest;
    while ((latest = latest_round(&in_latest)) > 1 && in_latest < 2) {
        /* that round has started on one agent so far */
        int more = h_wait_files(envdir, "env.", files + 1, 20000);
        cr_assert_gt(more, files, "round %d started on one agent only", latest);
        files = more;
    }
    cr_assert_gt(latest, 1);
    struct round_info r2 = check_round(latest, 2); /* a lost lease is not a worker failure */
    cr_assert_neq(atoll(r2.generation), 0);
    release_workers();
    for (int i = 0; i < 2; i++)
        h_expect_exit(&a[i], 0, 20000);
}

static void etcd_sigstop(void)
{
    cr_assert_eq(kill(eh.m[0].pid, SIGSTOP), 0);
}

static void etcd_sigcont(void)
{
    cr_assert_eq(kill(eh.m[0].pid, SIGCONT), 0);
}

static void etcd_kill(void)
{
    cr_assert_eq(etcd_harness_kill(&eh, 0), 0);
}

static void etcd_restart(void)
{
    cr_assert_eq(etcd_harness_restart(&eh, 0), 0, "etcd did not come back");
}

/* A hung store: connections stay open, nothing answers. */
Test(e2e_etcd, etcd_stopped_past_the_lease_ttl_stops_workers_then_round_2)
{
    lease_loss("e2e-stop", etcd_sigstop, etcd_sigcont);
}

/* A dead store: connections refused, then etcd restarts on its data dir and ports. */
Test(e2e_etcd, etcd_down_past_the_lease_ttl_stops_workers_then_round_2)
{
    lease_loss("e2e-down", etcd_kill, etcd_restart);
}

/* The store is down at the moment the workers finish: each node's done marker must still reach
 * the store once it is back (a failed write used to leave the run waiting for
 * ever). The lease (10 s) outlives the outage, so nothing else happens. */
Test(e2e_etcd, store_down_when_the_workers_finish_the_run_still_succeeds)
{
    cr_assert_eq(etcd_harness_start(&eh, 1), 0);
    static struct h_agent a[2];
    const char *extra[] = {"--min", "2", "--max", "2", "--lease-ttl", "10", NULL};
    const char *cmd[] = {"/bin/sh", "-c", recording_worker(), NULL};
    for (int i = 0; i < 2; i++)
        start(&a[i], h_fmt("n%d", i), "e2e-done-down", eh.endpoints, extra, cmd);
    cr_assert_eq(h_wait_files(envdir, "pid.", 2, 30000), 2);
    etcd_kill();
    release_workers();
    for (int i = 0; i < 2; i++) {
        wait_log(&a[i], "round 1: all 1 local worker(s) finished", 10000);
        wait_log(&a[i], "store request failed", 10000);
    }
    etcd_restart();
    for (int i = 0; i < 2; i++)
        h_expect_exit(&a[i], 0, 20000);
    check_round(1, 2);
}

/* ---- 4. TLS with client certificates, and auth ---- */

#define PASSWORD "pw-3fQ9-zz81"
#define WRONG_PASSWORD "wrong-Xk22-pq7"

Test(e2e_etcd, tls_and_auth_run_succeeds_and_wrong_password_exits_2)
{
    struct etcd_harness_opts o = {.members = 1, .tls = 1};
    cr_assert_eq(etcd_harness_start_opts(&eh, &o), 0);
    cr_assert_eq(etcd_harness_enable_auth(&eh, "root", PASSWORD), 0);
    const char *extra[] = {"--min", "2",     "--max", "2",      "--cacert", eh.cacert, "--cert",
                           eh.cert, "--key", eh.key,  "--user", "root",     NULL};
    const char *cmd[] = {W, "record", envdir, NULL};
    setenv("ELASTIC_ETCD_PASSWORD", PASSWORD, 1);
    static struct h_agent a[2];
    for (int i = 0; i < 2; i++)
        start(&a[i], h_fmt("n%d", i), "e2e-tls", eh.endpoints, extra, cmd);
    unsetenv("ELASTIC_ETCD_PASSWORD");
    for (int i = 0; i < 2; i++)
        h_expect_exit(&a[i], 0, 30000);
    check_round(1, 2);
    for (int i = 0; i < 2; i++) {
        cr_assert(!h_file_contains(a[i].log, PASSWORD), "the password is in %s", a[i].log);
        cr_assert(!h_file_contains(a[i].out, PASSWORD), "the password is in %s", a[i].out);
    }

    static struct h_agent bad;
    setenv("ELASTIC_ETCD_PASSWORD", WRONG_PASSWORD, 1);
    int64_t t0 = h_now_ms();
    start(&bad, "bad", "e2e-tls", eh.endpoints, extra, cmd);
    unsetenv("ELASTIC_ETCD_PASSWORD");
    h_expect_exit(&bad, 2, 10000);
    int64_t took = h_now_ms() - t0;
    cr_assert_lt(took, 3000, "wrong credentials took %lld ms to refuse: not retried",
                 (long long)took);
    cr_assert(h_file_contains(bad.log, "authentication failed, invalid user ID or password"),
              "etcd's reason is not in the log");
    cr_assert(!h_file_contains(bad.log, WRONG_PASSWORD), "the password is in the log");
    cr_assert(!h_file_contains(bad.out, WRONG_PASSWORD), "the password is in stdout");

    /* without a client certificate the TLS handshake fails: never a silent success */
    static struct h_agent nocert;
    const char *extra2[] = {"--min",          "1", "--cacert", eh.cacert, "--user", "root",
                            "--join-timeout", "1", NULL};
    setenv("ELASTIC_ETCD_PASSWORD", PASSWORD, 1);
    start(&nocert, "nocert", "e2e-tls", eh.endpoints, extra2, cmd);
    unsetenv("ELASTIC_ETCD_PASSWORD");
    int rc = h_agent_wait(&nocert, 15000);
    cr_assert(rc == 2 || rc == 3, "no client cert: exit %d (log %s)", rc, nocert.log);
}

/* ---- 5. unreachable store ---- */

/* A loopback port nobody listens on (bound, never listened to, closed). */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
              getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* Deterministic on a loaded machine or under valgrind: how many attempts fit in the
 * --join-timeout depends on how long each takes there, so the test asserts what the agent
 * decides — it retries until the timeout, with waits that never go past it — not a count or a
 * wall-clock bound (the schedule itself: tests/unit/test_ea_time.c). */
Test(e2e_etcd, unreachable_store_retries_until_join_timeout_then_exits_3)
{
    int p1 = closed_port(), p2 = closed_port();
    const char *eps = h_fmt("127.0.0.1:%d,127.0.0.1:%d", p1, p2);
    const char *extra[] = {"--join-timeout", "2", NULL};
    const char *cmd[] = {"true", NULL};
    static struct h_agent a;
    int64_t t0 = h_now_ms();
    start(&a, "lonely", "e2e-unreach", eps, extra, cmd);
    h_expect_exit(&a, 3, 60000);
    int64_t took = h_now_ms() - t0;
    cr_log_info("unreachable store: exit 3 after %lld ms (--join-timeout 2)", (long long)took);
    cr_assert_geq(took, 2000, "gave up before --join-timeout");
    cr_assert(h_file_contains(a.log, h_fmt("127.0.0.1:%d", p1)), "first endpoint not named");
    cr_assert(h_file_contains(a.log, h_fmt("127.0.0.1:%d", p2)), "second endpoint not named");
    cr_assert(h_file_contains(a.log, "--join-timeout"));
    /* progress: retry lines before giving up, whose waits add up to no more than the timeout */
    int retries = 0;
    double waited = 0, unreachable = -1;
    char line[2048];
    FILE *f = fopen(a.log, "r");
    while (f && fgets(line, sizeof(line), f)) {
        const char *r = strstr(line, "retrying in ");
        double w;
        if (r && sscanf(r, "retrying in %lf s", &w) == 1) {
            retries++;
            waited += w;
        }
        if ((r = strstr(line, "store unreachable for ")))
            sscanf(r, "store unreachable for %lf s", &unreachable);
    }
    if (f)
        fclose(f);
    /* no retry count: under valgrind the first attempt alone may outlast the timeout (then the
     * agent rightly gives up without a retry line); an agent that does not retry gives up
     * before the timeout, which the agent's own measure below catches */
    cr_log_info("%d retry lines, %.1f s of waits", retries, waited);
    cr_assert_leq(waited, 2.0 + 0.05 * retries, "waits of %.1f s past --join-timeout 2", waited);
    cr_assert_geq(unreachable, 2.0, "gave up after %.1f s, before --join-timeout", unreachable);
}
