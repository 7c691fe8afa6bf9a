// SPDX-License-Identifier: Apache-2.0
/*
 * The local launcher end to end: real exec-guard (the build's elastic-agent), real workers
 * (ea-testworker), real signals. Exits and signals reported exactly, exec failure as errno,
 * env/cwd exact, stop with SIGTERM then SIGKILL after the grace, no descendant outlives its
 * worker, its guard or its agent, log files and tee, destroy, many workers.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher.h"
#include "test_launch_support.h"

extern char **environ;

static char dir[64];

static void setup(void)
{
    tl_mkdtemp(dir, sizeof(dir));
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
}

static void teardown(void)
{
    tl_rmrf(dir);
}

TestSuite(local, .init = setup, .fini = teardown, .timeout = 30);

static char *path_in(const char *name)
{
    static char bufs[8][160];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof(bufs[0]), "%s/%s", dir, name);
    return b;
}

static struct launch_proc *start_io(struct launcher *l, const char *const *argv, const char *label,
                                    const char *out, const char *errp, int tee)
{
    struct launch_spec spec = {.argv = argv,
                               .envp = (const char *const *)environ,
                               .label = label,
                               .stdout_path = out,
                               .stderr_path = errp,
                               .tee = tee};
    struct launch_proc *p = NULL;
    struct ea_error err = {0};
    cr_assert_eq(tl_start(l, &spec, &p, &err, 10000), 0, "start '%s': %s", argv[0], err.msg);
    cr_assert_not_null(p);
    return p;
}

static struct launch_proc *start(struct launcher *l, const char *const *argv)
{
    return start_io(l, argv, "w", NULL, NULL, 0);
}

static struct launch_exit wait_one(struct launcher *l, struct launch_proc *p, int timeout_ms)
{
    struct launch_exit ex;
    cr_assert_eq(tl_wait_exits(l, &ex, 1, timeout_ms), 1, "no exit within %d ms", timeout_ms);
    cr_assert_eq(ex.proc, p);
    return ex;
}

Test(local, create_checks_the_guard_and_the_name)
{
    struct launcher *l = NULL;
    struct ea_error err = {0};
    struct launcher_config cfg = {.name = "local", .guard_path = "/nonexistent/agent"};
    cr_assert_eq(launcher_create(&cfg, &l, &err), -ENOENT);
    cr_assert_null(l);
    cr_assert(strstr(err.msg, "/nonexistent/agent"), "%s", err.msg);
    cfg.name = "no-such-launcher";
    cr_assert_eq(launcher_create(&cfg, &l, &err), -EINVAL);
    launcher_destroy(NULL);
    l = tl_launcher();
    launch_release(l, NULL);
    cr_assert_geq(launcher_fd(l), 0);
    launcher_destroy(l);
}

Test(local, exit_codes_are_reported_exactly)
{
    struct launcher *l = tl_launcher();
    const char *codes[] = {"0", "1", "42", "255"};
    struct launch_proc *p[4];
    for (int i = 0; i < 4; i++) {
        const char *argv[] = {TW, "exit", codes[i], NULL};
        p[i] = start(l, argv);
    }
    struct launch_exit ex[4];
    cr_assert_eq(tl_wait_exits(l, ex, 4, 10000), 4);
    for (int i = 0; i < 4; i++) {
        const struct launch_exit *e = tl_find_exit(ex, 4, p[i]);
        cr_assert_not_null(e);
        cr_assert_eq(e->exit_code, atoi(codes[i]));
        cr_assert_eq(e->term_signal, 0);
        cr_assert_gt(e->end_ms, 0);
    }
    struct launch_exit *more = NULL;
    size_t n = 99;
    cr_assert_eq(launcher_dispatch(l, &more, &n, NULL), 0);
    cr_assert_eq(n, 0, "an exit was reported twice");
    free(more);
    for (int i = 0; i < 4; i++)
        launch_release(l, p[i]);
    launcher_destroy(l);
}

Test(local, fatal_signals_are_reported_exactly)
{
    struct launcher *l = tl_launcher();
    int sigs[] = {SIGKILL, SIGTERM, SIGUSR1, SIGABRT};
    struct launch_proc *p[4];
    for (int i = 0; i < 4; i++) {
        char num[8];
        snprintf(num, sizeof(num), "%d", sigs[i]);
        const char *argv[] = {TW, "signal", num, NULL};
        p[i] = start(l, argv);
    }
    struct launch_exit ex[4];
    cr_assert_eq(tl_wait_exits(l, ex, 4, 10000), 4);
    for (int i = 0; i < 4; i++) {
        const struct launch_exit *e = tl_find_exit(ex, 4, p[i]);
        cr_assert_not_null(e);
        cr_assert_eq(e->exit_code, -1);
        cr_assert_eq(e->term_signal, sigs[i]);
    }
    launcher_destroy(l);
}

/* A start that fails after start() returned (start() never waits): the exit dispatch() reports,
 * with the reason naming the program and the code of a shell (127 not found, 126 otherwise). */
static void expect_start_failure(struct launcher *l, const struct launch_spec *spec, int code,
                                 const char *named)
{
    struct launch_proc *p = NULL;
    struct ea_error err = {0};
    cr_assert_eq(launch_start(l, spec, &p, &err), 0, "%s", err.msg);
    cr_assert_eq(launch_pid(l, p), 0, "not confirmed yet: start() did not wait");
    struct launch_exit e = wait_one(l, p, 10000);
    cr_assert_not_null(e.start_error);
    cr_assert_eq(e.exit_code, code, "%d: %s", e.exit_code, e.start_error);
    cr_assert_eq(e.term_signal, 0);
    cr_assert(strstr(e.start_error, named), "%s", e.start_error);
    launch_release(l, p);
}

Test(local, exec_failure_is_an_exit_with_the_error_naming_the_program)
{
    struct launcher *l = tl_launcher();
    struct launch_proc *p = NULL;
    struct ea_error err = {0};
    const char *missing[] = {"/nonexistent/prog", "arg", NULL};
    struct launch_spec spec = {.argv = missing, .envp = (const char *const *)environ};
    expect_start_failure(l, &spec, 127, "cannot execute '/nonexistent/prog'");

    const char *unknown[] = {"ea-no-such-program", NULL};
    const char *envp[] = {"PATH=" EA_HELPERS_DIR ":/nonexistent", NULL};
    spec = (struct launch_spec){.argv = unknown, .envp = envp};
    expect_start_failure(l, &spec, 127, "'ea-no-such-program'");

    const char *plain[] = {path_in("plain"), NULL};
    int fd = open(plain[0], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    cr_assert_geq(fd, 0);
    close(fd);
    spec = (struct launch_spec){.argv = plain, .envp = envp};
    expect_start_failure(l, &spec, 126, plain[0]);

    const char *ok[] = {TW, "exit", "0", NULL};
    spec = (struct launch_spec){.argv = ok, .envp = envp, .cwd = "/nonexistent/wd"};
    expect_start_failure(l, &spec, 127, "'/nonexistent/wd'");

    /* known at once: an error of start() itself */
    spec = (struct launch_spec){.argv = ok, .envp = envp, .stdout_path = "/nonexistent/out"};
    cr_assert_eq(launch_start(l, &spec, &p, &err), -ENOENT);
    cr_assert(strstr(err.msg, "'/nonexistent/out'"), "%s", err.msg);

    cr_assert_eq(tl_child_count(), 0, "a failed start left a process behind");
    struct launch_exit *ex = NULL;
    size_t n = 0;
    cr_assert_eq(launcher_dispatch(l, &ex, &n, NULL), 0);
    cr_assert_eq(n, 0);
    launcher_destroy(l);
}

/* A process stopped before its start was confirmed (start() never waits) ends as stopped, not as
 * a failed start: no start_error, and the stop's signal. */
Test(local, a_start_stopped_before_its_confirmation_is_not_a_start_failure)
{
    struct launcher *l = tl_launcher();
    const char *argv[] = {TW, "hang", NULL};
    struct launch_spec spec = {.argv = argv, .envp = (const char *const *)environ};
    struct launch_proc *p = NULL;
    struct ea_error err = {0};
    cr_assert_eq(launch_start(l, &spec, &p, &err), 0, "%s", err.msg);
    cr_assert_eq(launch_stop(l, p, 0), 0);
    struct launch_exit e = wait_one(l, p, 10000);
    cr_assert_null(e.start_error, "%s", e.start_error);
    cr_assert_eq(e.exit_code, -1, "exit %d", e.exit_code);
    cr_assert(e.term_signal == SIGTERM || e.term_signal == SIGKILL, "signal %d", e.term_signal);
    launch_release(l, p);
    cr_assert_eq(tl_child_count(), 0);
    launcher_destroy(l);
}

Test(local, env_and_cwd_are_passed_exactly)
{
    struct launcher *l = tl_launcher();
    const char *argv[] = {"ea-testworker", "record", ".", NULL}; /* found through envp's PATH */
    const char *envp[] = {"PATH=" EA_HELPERS_DIR, "RANK=3", "X=a b", "Y=", NULL};
    struct launch_spec spec = {.argv = argv, .envp = envp, .cwd = dir, .label = "3"};
    struct launch_proc *p = NULL;
    struct ea_error err = {0};
    cr_assert_eq(tl_start(l, &spec, &p, &err, 10000), 0, "%s", err.msg);
    pid_t pid = launch_pid(l, p);
    struct launch_exit e = wait_one(l, p, 10000);
    cr_assert_eq(e.exit_code, 0);
    char name[64], buf[512];
    snprintf(name, sizeof(name), "env.3.%d", (int)pid); /* the pid is the worker's own */
    cr_assert_gt(tl_read_file(path_in(name), buf, sizeof(buf)), 0, "no %s in the cwd", name);
    cr_assert_str_eq(buf, "PATH=" EA_HELPERS_DIR "\nRANK=3\nX=a b\nY=\n");
    launcher_destroy(l);
}

Test(local, stop_sigkills_a_worker_ignoring_sigterm_after_the_grace)
{
    const int grace = 400;
    struct launcher *l = tl_launcher();
    int keep, rfd = tl_fifo(path_in("fifo"), &keep);
    const char *argv[] = {TW, "ignore-term", NULL};
    struct launch_proc *p = start_io(l, argv, "w", path_in("fifo"), NULL, 0);
    pid_t ready;
    cr_assert_eq(tl_read_ready(rfd, &ready, 1, 5000), 1);
    cr_assert_eq(ready, launch_pid(l, p));
    int64_t t0 = tl_now_ms();
    cr_assert_eq(launch_stop(l, p, grace), 0);
    cr_assert_eq(launch_stop(l, p, grace * 10), 0, "stop is idempotent");
    struct launch_exit e = wait_one(l, p, grace + 3000);
    int64_t took = e.end_ms - t0;
    cr_assert_eq(e.term_signal, SIGKILL);
    cr_assert_geq(took, grace, "SIGKILL before the grace: %lld ms", (long long)took);
    cr_assert_lt(took, grace + 1000, "SIGKILL too late: %lld ms", (long long)took);
    cr_assert_eq(launch_signal(l, p, SIGTERM), -ESRCH);
    cr_assert_eq(launch_stop(l, p, grace), 0);
    close(rfd);
    close(keep);
    launcher_destroy(l);
}

Test(local, stop_ends_a_well_behaved_worker_with_sigterm)
{
    struct launcher *l = tl_launcher();
    const char *argv[] = {TW, "hang", NULL};
    struct launch_proc *p = start_io(l, argv, "w", "/dev/null", NULL, 0);
    int64_t t0 = tl_now_ms();
    cr_assert_eq(launch_stop(l, p, 5000), 0);
    struct launch_exit e = wait_one(l, p, 3000);
    cr_assert_eq(e.term_signal, SIGTERM);
    cr_assert_eq(e.exit_code, -1);
    cr_assert_lt(e.end_ms - t0, 1000);
    launcher_destroy(l);
}

Test(local, signal_reaches_the_worker)
{
    struct launcher *l = tl_launcher();
    const char *argv[] = {TW, "hang", NULL};
    struct launch_proc *p = start_io(l, argv, "w", "/dev/null", NULL, 0);
    cr_assert_eq(launch_signal(l, p, SIGUSR1), 0);
    struct launch_exit e = wait_one(l, p, 3000);
    cr_assert_eq(e.term_signal, SIGUSR1);
    cr_assert_eq(launch_signal(l, p, SIGUSR1), -ESRCH);
    launcher_destroy(l);
}

static void grandchild_is_gone_on_exit(const char *mode)
{
    struct launcher *l = tl_launcher();
    const char *argv[] = {TW, mode, path_in("gc"), NULL};
    struct launch_proc *p = start(l, argv);
    struct launch_exit e = wait_one(l, p, 5000);
    cr_assert_eq(e.exit_code, 0);
    pid_t gc = tl_read_pid(path_in("gc"));
    cr_assert_gt(gc, 0);
    /* the exit is reported only once the guard has ended and reaped every descendant */
    cr_assert(tl_no_such_pid(gc), "%s: grandchild %d outlived its worker", mode, gc);
    cr_assert_eq(tl_child_count(), 0);
    launcher_destroy(l);
}

Test(local, grandchild_in_the_group_is_gone_when_the_worker_exits)
{
    grandchild_is_gone_on_exit("orphan");
}

Test(local, setsid_grandchild_is_gone_when_the_worker_exits)
{
    grandchild_is_gone_on_exit("orphan-setsid");
}

/* Drive the launcher (as the agent's loop does) until `pid` has ended or the deadline passes. */
static bool gone_while_dispatching(struct launcher *l, pid_t pid, int timeout_ms)
{
    int fd = tl_pidfd(pid);
    if (fd < 0)
        return true;
    int64_t deadline = tl_now_ms() + timeout_ms;
    bool gone = false;
    while (!gone && tl_now_ms() < deadline) {
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
                              {.fd = launcher_fd(l), .events = POLLIN}};
        poll(p, 2, (int)(deadline - tl_now_ms()));
        gone = p[0].revents != 0;
        struct launch_exit *ex = NULL;
        size_t n = 0;
        if (p[1].revents && launcher_dispatch(l, &ex, &n, NULL) == 0)
            free(ex);
    }
    close(fd);
    return gone;
}

/* Issue 38: a worker double-forks a setsid()'ed process and SIGKILLs its own exec-guard. The
 * guard cannot clean up; the process is re-parented to the agent (the launcher's subreaper),
 * which must kill it, not only reap it: it would otherwise outlive its run. */
Test(local, escapee_of_a_killed_guard_is_killed_by_the_agent)
{
    struct launcher *l = tl_launcher();
    const char *argv[] = {TW, "escape", path_in("gc"), NULL};
    struct launch_proc *p = start(l, argv);
    struct launch_exit e = wait_one(l, p, 10000);
    cr_assert_eq(e.term_signal, SIGKILL, "the guard was killed");
    pid_t gc = tl_read_pid(path_in("gc"));
    cr_assert_gt(gc, 1);
    bool gone = gone_while_dispatching(l, gc, 10000);
    if (!gone)
        kill(gc, SIGKILL); /* do not leave it to the next test */
    cr_assert(gone, "the escaped process %d outlived its killed guard by 10 s", gc);
    launcher_destroy(l);
    cr_assert(tl_no_such_pid(gc), "pid %d left (not reaped)", gc);
}

Test(local, sigkill_of_the_agent_takes_every_worker_and_descendant_within_1s)
{
    enum { W = 3, N = 2 * W + 2 }; /* workers, their guards, two grandchildren */
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0); /* the guards come to us to be reaped */
    int keep, rfd = tl_fifo(path_in("fifo"), &keep);
    char script[768];
    snprintf(script, sizeof(script), "%s orphan %s && %s orphan-setsid %s && exec %s hang", TW,
             path_in("gc1"), TW, path_in("gc2"), TW);
    const char *fifo = path_in("fifo");
    pid_t agent = fork();
    cr_assert_geq(agent, 0);
    if (agent == 0) { /* an agent-like parent: a launcher with three workers */
        struct launcher_config cfg = {.name = "local", .guard_path = TG};
        struct launcher *l;
        if (launcher_create(&cfg, &l, NULL) < 0)
            _exit(1);
        const char *sh[] = {"/bin/sh", "-c", script, NULL};
        const char *hang[] = {TW, "hang", NULL};
        const char *stubborn[] = {TW, "ignore-term", NULL}; /* a forwarded SIGTERM is not enough */
        const char *const *cmds[W] = {sh, hang, stubborn};
        for (int i = 0; i < W; i++) {
            struct launch_spec s = {
                .argv = cmds[i], .envp = (const char *const *)environ, .stdout_path = fifo};
            struct launch_proc *p;
            if (launch_start(l, &s, &p, NULL) < 0)
                _exit(2);
        }
        for (;;)
            pause();
    }
    pid_t pids[N];
    cr_assert_eq(tl_read_ready(rfd, pids, W, 10000), W);
    for (int i = 0; i < W; i++)
        pids[W + i] = tl_ppid(pids[i]);
    pids[2 * W] = tl_read_pid(path_in("gc1"));
    pids[2 * W + 1] = tl_read_pid(path_in("gc2"));
    int fds[N];
    for (int i = 0; i < N; i++) {
        cr_assert_gt(pids[i], 1);
        fds[i] = tl_pidfd(pids[i]);
        cr_assert_geq(fds[i], 0);
    }
    cr_assert_eq(tl_ppid(pids[W]), agent);
    cr_assert_eq(kill(agent, SIGKILL), 0);
    cr_assert_eq(waitpid(agent, NULL, 0), agent);
    bool gone = tl_pidfds_gone(fds, N, 1000);
    for (int i = 0; i < N && !gone; i++)
        kill(pids[i], SIGKILL); /* do not leave them to the next test */
    cr_assert(gone, "a worker or descendant survived its agent by 1 s");
    for (int i = W; i < 2 * W; i++) { /* guards, re-parented to us */
        int st;
        cr_assert_eq(waitpid(pids[i], &st, 0), pids[i]);
    }
    for (int i = 0; i < N; i++) {
        cr_assert(tl_no_such_pid(pids[i]), "pid %d left (zombie?)", pids[i]);
        close(fds[i]);
    }
    cr_assert_eq(tl_child_count(), 0);
    close(rfd);
    close(keep);
}

Test(local, log_files_get_the_output)
{
    struct launcher *l = tl_launcher();
    const char *argv[] = {TW, "echo-lines", "3", NULL};
    for (int round = 0; round < 2; round++) { /* the second run appends */
        struct launch_proc *p = start_io(l, argv, "w", path_in("out"), path_in("err"), 0);
        cr_assert_eq(wait_one(l, p, 5000).exit_code, 0);
        launch_release(l, p);
    }
    char buf[256];
    cr_assert_gt(tl_read_file(path_in("out"), buf, sizeof(buf)), 0);
    cr_assert_str_eq(buf, "line 1\nline 2\nline 3\nline 1\nline 2\nline 3\n");
    cr_assert_gt(tl_read_file(path_in("err"), buf, sizeof(buf)), 0);
    cr_assert_str_eq(buf, "eline 1\neline 2\neline 3\neline 1\neline 2\neline 3\n");
    launcher_destroy(l);
}

/* The lines of `text` that start with `prefix`, concatenated. */
static void only(const char *text, const char *prefix, char *out, size_t size)
{
    size_t len = 0, plen = strlen(prefix);
    out[0] = '\0';
    for (const char *s = text; *s;) {
        const char *nl = strchr(s, '\n');
        size_t n = nl ? (size_t)(nl - s + 1) : strlen(s);
        if (strncmp(s, prefix, plen) == 0 && len + n < size) {
            memcpy(out + len, s, n);
            len += n;
            out[len] = '\0';
        }
        s += n;
    }
}

Test(local, tee_prefixes_lines_and_still_writes_the_files)
{
    struct launcher *l = tl_launcher();
    const char *echo[] = {TW, "echo-lines", "3", NULL};
    const char *partial[] = {"/bin/sh", "-c", "printf 'a\\nb'; printf 'c' >&2", NULL};
    /* the agent's stdout/stderr go to files for the duration */
    int cap[2] = {open(path_in("cap1"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644),
                  open(path_in("cap2"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644)};
    cr_assert(cap[0] >= 0 && cap[1] >= 0);
    fflush(stdout);
    fflush(stderr);
    int saved[2] = {dup(1), dup(2)};
    dup2(cap[0], 1);
    dup2(cap[1], 2);
    struct launch_proc *p1 = start_io(l, echo, "7", path_in("out"), path_in("err"), 1);
    struct launch_proc *p2 = start_io(l, partial, "p", NULL, NULL, 1);
    struct launch_exit ex[2];
    size_t got = tl_wait_exits(l, ex, 2, 5000);
    dup2(saved[0], 1);
    dup2(saved[1], 2);
    close(saved[0]);
    close(saved[1]);
    close(cap[0]);
    close(cap[1]);
    cr_assert_eq(got, 2);
    cr_assert_not_null(tl_find_exit(ex, 2, p1));
    cr_assert_not_null(tl_find_exit(ex, 2, p2));

    char buf[1024], lines[512];
    cr_assert_gt(tl_read_file(path_in("cap1"), buf, sizeof(buf)), 0);
    only(buf, "[7]:", lines, sizeof(lines));
    cr_assert_str_eq(lines, "[7]:line 1\n[7]:line 2\n[7]:line 3\n");
    only(buf, "[p]:", lines, sizeof(lines));
    cr_assert_str_eq(lines, "[p]:a\n[p]:b\n", "the unterminated last line must be flushed");
    cr_assert_gt(tl_read_file(path_in("cap2"), buf, sizeof(buf)), 0);
    only(buf, "[7]:", lines, sizeof(lines));
    cr_assert_str_eq(lines, "[7]:eline 1\n[7]:eline 2\n[7]:eline 3\n");
    only(buf, "[p]:", lines, sizeof(lines));
    cr_assert_str_eq(lines, "[p]:c\n");
    cr_assert_gt(tl_read_file(path_in("out"), buf, sizeof(buf)), 0);
    cr_assert_str_eq(buf, "line 1\nline 2\nline 3\n", "the file gets the raw lines");
    cr_assert_gt(tl_read_file(path_in("err"), buf, sizeof(buf)), 0);
    cr_assert_str_eq(buf, "eline 1\neline 2\neline 3\n");
    launcher_destroy(l);
}

Test(local, destroy_leaves_nothing_running_and_no_zombies)
{
    struct launcher *l = tl_launcher();
    int keep, rfd = tl_fifo(path_in("fifo"), &keep);
    char script[768];
    snprintf(script, sizeof(script), "%s orphan %s && %s orphan-setsid %s && exec %s hang", TW,
             path_in("gc1"), TW, path_in("gc2"), TW);
    const char *sh[] = {"/bin/sh", "-c", script, NULL};
    const char *hang[] = {TW, "hang", NULL};
    const char *stubborn[] = {TW, "ignore-term", NULL};
    start_io(l, sh, "0", path_in("fifo"), NULL, 0);
    start_io(l, hang, "1", path_in("fifo"), NULL, 0);
    start_io(l, stubborn, "2", path_in("fifo"), NULL, 0);
    struct launch_proc *teed = start_io(l, hang, "3", NULL, NULL, 1); /* a pipe to pump too */
    pid_t w[3];
    cr_assert_eq(tl_read_ready(rfd, w, 3, 10000), 3);
    pid_t t = launch_pid(l, teed);
    pid_t pids[10] = {w[0],
                      w[1],
                      w[2],
                      t,
                      tl_ppid(w[0]),
                      tl_ppid(w[1]),
                      tl_ppid(w[2]),
                      tl_ppid(t),
                      tl_read_pid(path_in("gc1")),
                      tl_read_pid(path_in("gc2"))};
    for (int i = 0; i < 10; i++)
        cr_assert_gt(pids[i], 1);
    int64_t t0 = tl_now_ms();
    launcher_destroy(l);
    cr_assert_lt(tl_now_ms() - t0, 2000, "destroy took %lld ms", (long long)(tl_now_ms() - t0));
    for (int i = 0; i < 10; i++)
        cr_assert(tl_no_such_pid(pids[i]), "pid %d survived destroy()", pids[i]);
    cr_assert_eq(tl_child_count(), 0, "destroy() left zombies");
    close(rfd);
    close(keep);
}

Test(local, many_workers_start_and_stop_cleanly)
{
    enum { N = 16 };
    struct launcher *l = tl_launcher();
    int keep, rfd = tl_fifo(path_in("fifo"), &keep);
    const char *hang[] = {TW, "hang", NULL};
    struct launch_proc *p[N];
    for (int i = 0; i < N; i++)
        p[i] = start_io(l, hang, "w", path_in("fifo"), NULL, 0);
    pid_t ready[N];
    cr_assert_eq(tl_read_ready(rfd, ready, N, 10000), N);
    int64_t t0 = tl_now_ms();
    for (int i = 0; i < N; i++)
        cr_assert_eq(launch_stop(l, p[i], 5000), 0);
    struct launch_exit ex[N];
    cr_assert_eq(tl_wait_exits(l, ex, N, 5000), N);
    cr_assert_lt(tl_now_ms() - t0, 2000);
    for (int i = 0; i < N; i++) {
        const struct launch_exit *e = tl_find_exit(ex, N, p[i]);
        cr_assert_not_null(e);
        cr_assert_eq(e->term_signal, SIGTERM);
        cr_assert(tl_no_such_pid(ready[i]));
        launch_release(l, p[i]);
    }
    cr_assert_eq(tl_child_count(), 0);
    launcher_destroy(l);
    close(rfd);
    close(keep);
}

Test(local, releasing_a_running_process_kills_it)
{
    struct launcher *l = tl_launcher();
    const char *hang[] = {TW, "hang", NULL};
    struct launch_proc *p = start_io(l, hang, "w", "/dev/null", NULL, 0);
    pid_t pid = launch_pid(l, p);
    launch_release(l, p);
    cr_assert(tl_pid_gone(pid, 1000));
    launcher_destroy(l); /* reaps the guard as an unknown child */
    cr_assert_eq(tl_child_count(), 0);
}
