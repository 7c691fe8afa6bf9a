// SPDX-License-Identifier: Apache-2.0
/*
 * Credentials a worker cannot read (issue 29, docs/security.md "Credentials and process
 * hygiene"), end to end against a real etcd with auth and mutual TLS. An agent and a `serve`
 * daemon run as uid 65534 — the uid their workers have — with the password in their
 * environment: the workers, --preflight and the run's agent never hold it, /proc/<agent>/environ
 * no longer shows it (read as root), and uid 65534 cannot open it (the agent is not dumpable)
 * while it can open its own worker's (a worker's exec makes it dumpable again). A submitted
 * run's --env reaches its workers, not its agent. --user over plaintext exits 2 without
 * --insecure-transport and warns with it; a spec's --env LD_PRELOAD is refused by submit and,
 * put straight into the store, by serve, as is a spec whose JSON max disagrees with its --max.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etcd_harness.h"
#include "harness.h"

#define W EA_HELPERS_DIR "/ea-testworker"
#define NOBODY 65534
#define PASSWORD "pw-Zq81-secret-x7"

static char dir[256], state[300], envdir[300], nb[320];
static struct etcd_harness eh;
static struct h_agent *mine[8]; /* started as NOBODY: not in the harness's list */
static int n_mine;
static pid_t racer = -1; /* ea-pwrace, when running */

static void setup(void)
{
    h_suite_dirs("secrets", dir, state, envdir);
    cr_assert_eq(chmod(dir, 0711), 0); /* uid 65534 passes through to nb/ */
    snprintf(nb, sizeof(nb), "%s/nb", dir); /* what uid 65534 may write */
    cr_assert_eq(mkdir(nb, 0700), 0);
    cr_assert_eq(chown(nb, NOBODY, NOBODY), 0);
    n_mine = 0;
    racer = -1;
}

static void teardown(void)
{
    if (racer > 0 && kill(racer, SIGKILL) == 0)
        waitpid(racer, NULL, 0);
    h_kill_agents();
    for (int i = 0; i < n_mine; i++)
        if (!mine[i]->reaped) {
            h_agent_signal(mine[i], SIGKILL);
            h_agent_wait(mine[i], 5000);
        }
    while (waitpid(-1, NULL, WNOHANG) > 0) /* orphaned workers came to us */
        ;
    etcd_harness_stop(&eh);
    unsetenv("ELASTIC_ETCD_PASSWORD");
    if (getenv("EA_E2E_KEEP"))
        cr_log_warn("kept %s", dir);
    else
        h_rmdir(dir);
}

TestSuite(secrets, .init = setup, .fini = teardown, .timeout = 120);

static void become_nobody(void)
{
    if (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0)
        _exit(125);
}

/* Start `EA_AGENT_BIN args...` as uid/gid 65534 with exactly the environment `envp`; its
 * stderr/stdout in dir/<name>.{log,out}. */
static void start_nobody(struct h_agent *a, const char *name, const char *const *args,
                         char *const *envp)
{
    memset(a, 0, sizeof(*a));
    snprintf(a->log, sizeof(a->log), "%s/%s.log", dir, name);
    snprintf(a->out, sizeof(a->out), "%s/%s.out", dir, name);
    const char *argv[64] = {EA_AGENT_BIN};
    int n = 1;
    for (int k = 0; args[k] && n < 63; k++)
        argv[n++] = args[k];
    argv[n] = NULL;
    int e = open(a->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int o = open(a->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    cr_assert(e >= 0 && o >= 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (dup2(e, 2) < 0 || dup2(o, 1) < 0)
            _exit(126);
        become_nobody();
        execve(argv[0], (char **)argv, envp);
        _exit(127);
    }
    close(e);
    close(o);
    a->pid = pid;
    a->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    cr_assert_geq(a->pidfd, 0);
    if (n_mine < (int)(sizeof(mine) / sizeof(*mine)))
        mine[n_mine++] = a;
}

/* The errno of open(path) by uid 65534 (0: it opened). */
static int open_as_nobody(const char *path)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        become_nobody();
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        _exit(fd >= 0 ? 0 : errno > 0 && errno < 120 ? errno : 120);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 125, "could not become uid %d", NOBODY);
    return WEXITSTATUS(st);
}

/* The whole of `path` (NULs kept) in buf; its length. */
static size_t slurp(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
    size_t n = 0;
    ssize_t r;
    while (n < size && (r = read(fd, buf + n, size - n)) > 0)
        n += (size_t)r;
    close(fd);
    return n;
}

static bool has(const char *path, const char *needle)
{
    static char buf[1 << 20];
    size_t n = slurp(path, buf, sizeof(buf));
    return memmem(buf, n, needle, strlen(needle)) != NULL;
}

/* Copy `src` to nb/<name>, owned by uid 65534 with mode 0600; its path (static, rotating). */
static const char *give_nobody(const char *src, const char *name)
{
    static char buf[64 << 10];
    const char *dst = h_fmt("%s/%s", nb, name);
    size_t n = slurp(src, buf, sizeof(buf));
    int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    cr_assert(fd >= 0 && write(fd, buf, n) == (ssize_t)n && fchown(fd, NOBODY, NOBODY) == 0);
    close(fd);
    return dst;
}

/* A worker that writes its environment to nb/<tag>.env and its pid to nb/<tag>.pid, then
 * waits for nb/go. */
static const char *worker_sh(const char *tag)
{
    return h_fmt("echo $$ > %s/%s.pid && env > %s/.%s && mv %s/.%s %s/%s.env && exec %s "
                 "wait-file %s/go",
                 nb, tag, nb, tag, nb, tag, nb, tag, W, nb);
}

/* The process `pid`'s /proc/<pid>/environ read as root (this test) holds no `secret`, and uid
 * 65534 (the workers' uid) cannot open it nor its mem. */
static void sealed(pid_t pid, const char *what)
{
    const char *env = h_fmt("/proc/%d/environ", (int)pid);
    cr_assert(has(env, "PATH="), "%s: %s unreadable as root", what, env);
    cr_assert(!has(env, PASSWORD), "%s: the password is in %s (not scrubbed)", what, env);
    cr_assert_eq(open_as_nobody(env), EACCES, "%s: uid %d can open %s (dumpable)", what, NOBODY,
                 env);
    cr_assert_eq(open_as_nobody(h_fmt("/proc/%d/mem", (int)pid)), EACCES, "%s: mem", what);
}

static void start_tls_etcd(void)
{
    struct etcd_harness_opts o = {.members = 1, .tls = 1};
    cr_assert_eq(etcd_harness_start_opts(&eh, &o), 0, "etcd did not start");
    cr_assert_eq(etcd_harness_enable_auth(&eh, "trainer", PASSWORD), 0);
}

static pid_t read_pid_file(const char *path)
{
    char buf[32] = {0};
    slurp(path, buf, sizeof(buf) - 1);
    return (pid_t)atol(buf);
}

/* Wait until nb/<name> exists while `a` runs (deadline timeout_ms); shows a's log and fails
 * when it does not come. */
static void wait_file(const struct h_agent *a, const char *name, int timeout_ms)
{
    int64_t end = h_now_ms() + timeout_ms;
    while (h_now_ms() < end) {
        if (h_wait_files(nb, name, 1, 250) >= 1)
            return;
        struct pollfd p = {.fd = a->pidfd, .events = POLLIN};
        if (poll(&p, 1, 0) > 0)
            break; /* it exited: the file will not come */
    }
    h_show_log(a);
    cr_assert_fail("%s/%s did not appear", nb, name);
}

static void go(void)
{
    int fd = open(h_fmt("%s/go", nb), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    cr_assert_geq(fd, 0);
    close(fd);
}

Test(secrets, agent_workers_and_preflight_never_hold_the_password)
{
    start_tls_etcd();
    const char *ca = give_nobody(eh.cacert, "ca.pem"), *cert = give_nobody(eh.cert, "c.pem"),
               *key = give_nobody(eh.key, "k.pem");
    char *envp[] = {"PATH=/usr/bin:/bin", h_fmt("TMPDIR=%s", nb), h_fmt("HOME=%s", nb),
                    "ELASTIC_ETCD_PASSWORD=" PASSWORD, NULL};
    const char *args[] = {"--rdzv-endpoint", eh.endpoints, "--cacert", ca, "--cert", cert,
                          "--key", key, "--user", "trainer", "--run-id", "sec1", "--node-id",
                          "n1", "--local-addr", "127.0.0.1", "--stop-timeout", "2",
                          "--preflight", h_fmt("env > %s/preflight.env", nb), "--", "/bin/sh",
                          "-c", worker_sh("w"), NULL};
    static struct h_agent a;
    start_nobody(&a, "agent", args, envp);
    wait_file(&a, "w.env", 30000);
    const char *wenv = h_fmt("%s/w.env", nb), *pfenv = h_fmt("%s/preflight.env", nb);
    cr_assert(has(wenv, "RANK=0") && has(pfenv, "PATH="), "worker and preflight recorded");
    cr_assert(!has(wenv, PASSWORD), "the password is in the worker's environment");
    cr_assert(!has(pfenv, PASSWORD), "the password is in the preflight's environment");
    sealed(a.pid, "the agent");
    /* the worker (uid 65534 too) stays an ordinary process: its exec made it dumpable again */
    pid_t w = read_pid_file(h_fmt("%s/w.pid", nb));
    cr_assert_gt(w, 1);
    cr_assert_eq(open_as_nobody(h_fmt("/proc/%d/environ", (int)w)), 0,
                 "the worker's own /proc is not readable by its uid");
    go();
    h_expect_exit(&a, 0, 30000);
    cr_assert(!has(a.log, PASSWORD) && !has(a.out, PASSWORD));
}

Test(secrets, serve_hands_the_password_by_fd_and_the_runs_env_to_workers_only)
{
    start_tls_etcd();
    const char *ca = give_nobody(eh.cacert, "ca.pem"), *cert = give_nobody(eh.cert, "c.pem"),
               *key = give_nobody(eh.key, "k.pem");
    char *envp[] = {"PATH=/usr/bin:/bin", h_fmt("TMPDIR=%s", nb), h_fmt("HOME=%s", nb),
                    "ELASTIC_ETCD_PASSWORD=" PASSWORD, NULL};
    const char *args[] = {"serve", "--rdzv-endpoint", eh.endpoints, "--cacert", ca, "--cert",
                          cert, "--key", key, "--user", "trainer", "--node-id", "d1",
                          "--local-addr", "127.0.0.1", "--lease-ttl", "2", "--stop-timeout", "2",
                          "--preflight", h_fmt("env > %s/preflight.env", nb), "--allow-unsigned",
                          NULL};
    static struct h_agent d;
    start_nobody(&d, "d1", args, envp);
    if (!h_log_wait(&d, "serving pool 'default'", 15000)) {
        h_show_log(&d);
        cr_assert_fail("the daemon did not start");
    }
    /* submit as root, the password from a file */
    const char *pwfile = h_fmt("%s/pw", dir);
    FILE *f = fopen(pwfile, "w");
    cr_assert(f && fputs(PASSWORD "\n", f) >= 0 && fclose(f) == 0);
    const char *sub[] = {"submit", "--rdzv-endpoint", eh.endpoints, "--cacert", eh.cacert,
                         "--cert", eh.cert, "--key", eh.key, "--user", "trainer",
                         "--password-file", pwfile, "--run-id", "sr1", "--env",
                         "TAG=tagged-run", "--", "/bin/sh", "-c", worker_sh("w"), NULL};
    static struct h_agent s;
    h_agent_start(&s, dir, "submit", sub);
    h_expect_exit(&s, 0, 20000);
    wait_file(&d, "w.env", 30000);
    cr_assert(h_log_wait(&d, "agent pid ", 5000));
    char log[1 << 16] = {0};
    slurp(d.log, log, sizeof(log) - 1);
    pid_t agent = (pid_t)atol(strstr(log, "agent pid ") + 10);
    cr_assert_gt(agent, 1);
    const char *wenv = h_fmt("%s/w.env", nb), *pfenv = h_fmt("%s/preflight.env", nb);
    cr_assert(has(wenv, "TAG=tagged-run"), "the run's --env did not reach its worker");
    cr_assert(!has(wenv, PASSWORD), "the password is in the worker's environment");
    cr_assert(!has(pfenv, PASSWORD) && !has(pfenv, "TAG=tagged-run"),
              "the preflight's environment holds the password or the run's --env");
    const char *aenv = h_fmt("/proc/%d/environ", (int)agent);
    cr_assert(!has(aenv, "TAG=tagged-run"), "the run's --env is in its agent's environment");
    cr_assert(!has(h_fmt("/proc/%d/cmdline", (int)agent), PASSWORD));
    sealed(agent, "the run's agent");
    sealed(d.pid, "the daemon");
    go();
    cr_assert(h_log_wait(&d, "run 'sr1' is over on this node (agent exit 0)", 30000));
    h_agent_signal(&d, SIGTERM);
    h_expect_exit(&d, 0, 15000);
    cr_assert(!has(d.log, PASSWORD));
}

/* Driver mode starts one agent per host: each gets the password by fd, none holds it in its
 * environment, and neither does a worker. */
Test(secrets, driver_mode_children_get_the_password_by_fd)
{
    start_tls_etcd();
    const char *ca = give_nobody(eh.cacert, "ca.pem"), *cert = give_nobody(eh.cert, "c.pem"),
               *key = give_nobody(eh.key, "k.pem");
    char *envp[] = {"PATH=/usr/bin:/bin", h_fmt("TMPDIR=%s", nb), h_fmt("HOME=%s", nb),
                    "ELASTIC_ETCD_PASSWORD=" PASSWORD, NULL};
    const char *args[] = {"--rdzv-endpoint", eh.endpoints, "--cacert", ca, "--cert", cert,
                          "--key", key, "--user", "trainer", "--run-id", "sec-drv", "--hosts",
                          "localhost:1,127.0.0.1:1", "--local-addr", "127.0.0.1",
                          "--stop-timeout", "2", "--", "/bin/sh", "-c", worker_sh("w$RANK"),
                          NULL};
    static struct h_agent drv;
    start_nobody(&drv, "driver", args, envp);
    wait_file(&drv, "w0.env", 30000);
    wait_file(&drv, "w1.env", 30000);
    for (int r = 0; r < 2; r++)
        cr_assert(!has(h_fmt("%s/w%d.env", nb, r), PASSWORD), "the password is in a worker's");
    sealed(drv.pid, "the driver");
    char kids[256] = {0};
    slurp(h_fmt("/proc/%d/task/%d/children", (int)drv.pid, (int)drv.pid), kids,
          sizeof(kids) - 1);
    int n = 0;
    for (char *p = kids, *end; *p; p = end) {
        long pid = strtol(p, &end, 10);
        if (end == p)
            break;
        sealed((pid_t)pid, "a host's agent");
        n++;
    }
    cr_assert_eq(n, 2, "the driver's children: '%s'", kids);
    go();
    h_expect_exit(&drv, 0, 30000);
}

/* Issue 38: a process of the agents' uid polls ns_last_pid and reads every new process's
 * /proc/<pid>/fd entries and environ (ea-pwrace) while a pool's daemon starts 20 runs. A run's
 * agent is dumpable from its exec to its prctl; the password it is handed must not be readable
 * through /proc in that window (a socket, not a memfd or a pipe), nor sit in its environment. */
Test(secrets, password_race_reads_nothing_while_a_pool_starts_20_runs, .timeout = 280)
{
    enum { RUNS = 20 };
    start_tls_etcd();
    const char *ca = give_nobody(eh.cacert, "ca.pem"), *cert = give_nobody(eh.cert, "c.pem"),
               *key = give_nobody(eh.key, "k.pem");
    char *envp[] = {"PATH=/usr/bin:/bin", h_fmt("TMPDIR=%s", nb), h_fmt("HOME=%s", nb),
                    "ELASTIC_ETCD_PASSWORD=" PASSWORD, NULL};
    const char *args[] = {"serve", "--rdzv-endpoint", eh.endpoints, "--cacert", ca, "--cert",
                          cert, "--key", key, "--user", "trainer", "--node-id", "d1",
                          "--local-addr", "127.0.0.1", "--lease-ttl", "2", "--stop-timeout", "2",
                          "--allow-unsigned", NULL};
    static struct h_agent d;
    start_nobody(&d, "d1", args, envp);
    if (!h_log_wait(&d, "serving pool 'default'", 15000)) {
        h_show_log(&d);
        cr_assert_fail("the daemon did not start");
    }
    /* the racer: uid 65534, started once the daemon has scrubbed its own environment */
    char out[400], pwfile[400];
    snprintf(out, sizeof(out), "%s/race.out", nb);
    racer = fork();
    cr_assert_geq(racer, 0);
    if (racer == 0) {
        become_nobody();
        char *renv[] = {"PATH=/usr/bin:/bin", NULL};
        execve(EA_HELPERS_DIR "/ea-pwrace",
               (char *[]){EA_HELPERS_DIR "/ea-pwrace", PASSWORD, out, NULL}, renv);
        _exit(127);
    }
    snprintf(pwfile, sizeof(pwfile), "%s/pw", dir);
    FILE *f = fopen(pwfile, "w");
    cr_assert(f && fputs(PASSWORD "\n", f) >= 0 && fclose(f) == 0);
    for (int i = 0; i < RUNS; i++) {
        char id[32];
        snprintf(id, sizeof(id), "race%d", i);
        const char *sub[] = {"submit", "--rdzv-endpoint", eh.endpoints, "--cacert", eh.cacert,
                             "--cert", eh.cert, "--key", eh.key, "--user", "trainer",
                             "--password-file", pwfile, "--run-id", id, "--", "true", NULL};
        struct h_agent s;
        h_agent_start(&s, dir, "submit", sub);
        h_expect_exit(&s, 0, 20000);
    }
    bool all = true;
    for (int i = 0; i < RUNS && all; i++)
        all = h_log_wait(&d, h_fmt("run 'race%d' is over on this node (agent exit 0)", i), 60000);
    cr_assert_eq(kill(racer, SIGTERM), 0);
    int st = 0;
    cr_assert_eq(waitpid(racer, &st, 0), racer);
    racer = -1;
    if (!all)
        h_show_log(&d);
    cr_assert(all, "the pool did not run its %d runs", RUNS);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the racer failed (status %d)", st);
    char res[128] = {0};
    slurp(out, res, sizeof(res) - 1);
    long hits = -1, pids = 0, windows = 0, agents = 0;
    cr_assert_eq(sscanf(res, "hits %ld pids %ld windows %ld agents %ld", &hits, &pids, &windows,
                        &agents),
                 4, "'%s'", res);
    cr_log_info("password race over %d runs: %s", RUNS, res);
    fprintf(stderr, "password race over %d runs: %s", RUNS, res);
    cr_assert_eq(hits, 0, "the racer read the password %ld times (%s)", hits, res);
    cr_assert_gt(pids, RUNS, "the racer saw no new processes: '%s'", res);
    h_agent_signal(&d, SIGTERM);
    h_expect_exit(&d, 0, 15000);
}

/* the password crosses the network in clear over plaintext: only when the operator says so */
Test(secrets, user_over_plaintext_needs_insecure_transport)
{
    cr_assert_eq(etcd_harness_start(&eh, 1), 0, "etcd did not start");
    cr_assert_eq(etcd_harness_enable_auth(&eh, "trainer", PASSWORD), 0);
    setenv("ELASTIC_ETCD_PASSWORD", PASSWORD, 1);
    struct h_agent a;
    const char *agent[] = {"--rdzv-endpoint", eh.endpoints, "--user", "trainer", "--run-id",
                           "plain", "--", "true", NULL};
    h_agent_start(&a, dir, "plain", agent);
    h_expect_exit(&a, 2, 10000);
    cr_assert(h_file_contains(a.log, "the password would cross a plaintext connection"));
    const char *gw[] = {"--rdzv-endpoint", "http://127.0.0.1:1", "--user", "trainer", "--",
                        "true", NULL};
    h_agent_start(&a, dir, "gw", gw);
    h_expect_exit(&a, 2, 10000);
    cr_assert(h_file_contains(a.log, "use https:// endpoints"));
    const char *serve[] = {"serve", "--rdzv-endpoint", eh.endpoints, "--user", "trainer", NULL};
    h_agent_start(&a, dir, "serve", serve);
    h_expect_exit(&a, 2, 10000);
    cr_assert(h_file_contains(a.log, "plaintext connection"));
    const char *submit[] = {"submit", "--rdzv-endpoint", eh.endpoints, "--user", "trainer",
                            "--run-id", "p2", "--", "true", NULL};
    h_agent_start(&a, dir, "submit", submit);
    h_expect_exit(&a, 2, 10000);
    cr_assert(h_file_contains(a.log, "plaintext connection"));
    const char *ok[] = {"--rdzv-endpoint", eh.endpoints, "--user", "trainer", "--run-id", "p3",
                        "--insecure-transport", "--", "true", NULL};
    h_agent_start(&a, dir, "insecure", ok);
    h_expect_exit(&a, 0, 20000);
    cr_assert(h_file_contains(a.log, "--insecure-transport: the etcd password of user 'trainer' "
                                     "crosses a plaintext connection"));
    unsetenv("ELASTIC_ETCD_PASSWORD");
}

/* A run spec's --env never changes how a process loads or connects; its min/max are its
 * options' */
Test(secrets, loader_env_and_a_lying_max_are_refused)
{
    cr_assert_eq(etcd_harness_start(&eh, 1), 0, "etcd did not start");
    struct h_agent a, d;
    const char *sub[] = {"submit", "--rdzv-endpoint", eh.endpoints, "--run-id", "ld", "--env",
                         "LD_PRELOAD=/tmp/evil.so", "--", "true", NULL};
    h_agent_start(&a, dir, "submit-ld", sub);
    h_expect_exit(&a, 2, 10000);
    cr_assert(h_file_contains(a.log, "--env: 'LD_PRELOAD' changes how a process loads or "
                                     "connects"));
    /* the same, and a spec whose max is not its --max, put straight into the store */
    const char *marker = h_fmt("%s/ran", envdir);
    const char *ld[] = {"put", "/elastic/~pools/default/queue/ld",
                        h_fmt("{\"schema\":\"elastic-agent/pool-v1\",\"run\":\"ld\",\"min\":1,"
                              "\"max\":1,\"args\":[],\"env\":[\"LD_PRELOAD=/tmp/evil.so\"],"
                              "\"command\":[\"touch\",\"%s\"]}",
                              marker),
                        NULL};
    const char *mm[] = {"put", "/elastic/~pools/default/queue/mm",
                        h_fmt("{\"schema\":\"elastic-agent/pool-v1\",\"run\":\"mm\",\"min\":1,"
                              "\"max\":3,\"args\":[\"--max\",\"1\"],\"env\":[],"
                              "\"command\":[\"touch\",\"%s\"]}",
                              marker),
                        NULL};
    cr_assert_eq(etcd_harness_etcdctl(&eh, ld), 0);
    cr_assert_eq(etcd_harness_etcdctl(&eh, mm), 0);
    const char *serve[] = {"serve", "--rdzv-endpoint", eh.endpoints, "--node-id", "d1",
                           "--local-addr", "127.0.0.1", "--lease-ttl", "2", "--allow-unsigned",
                           NULL};
    h_agent_start(&d, dir, "d1", serve);
    cr_assert(h_log_wait(&d, "skipping run spec '/elastic/~pools/default/queue/ld'", 15000));
    cr_assert(h_file_contains(d.log, "'LD_PRELOAD' changes how a process loads or connects"));
    cr_assert(h_log_wait(&d, "run 'mm' cannot run on this node: the spec says min 1, max 3 but "
                             "its options give --min 1 --max 1",
                         15000));
    cr_assert(!h_file_contains(d.log, "joining run"), "a refused spec was run");
    cr_assert_eq(access(marker, F_OK), -1, "a refused spec's command ran");
    h_agent_signal(&d, SIGTERM);
    h_expect_exit(&d, 0, 15000);
}
