// SPDX-License-Identifier: Apache-2.0
/*
 * exec-guard, driven directly through proc_spawn with a report fd (as the local launcher does):
 * the worker's pid and group, exec failure relayed with errno, the worker's status mirrored
 * (code or the same signal), signals sent to the guard forwarded to the group, --watch-stdin,
 * leftovers (even setsid'ed ones, even ones ignoring SIGTERM) ended before the guard exits,
 * fencing: a worker stopped by its guard alone once the deadline in the fence page has passed.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "test_launch_support.h"

#define GRACE_MS 500 /* guard.c GUARD_GRACE_MS */

static char dir[64];

static void setup(void)
{
    tl_mkdtemp(dir, sizeof(dir));
    struct rlimit no_core = {0, 0}; /* workers die of SIGQUIT/SIGABRT here */
    setrlimit(RLIMIT_CORE, &no_core);
}

static void teardown(void)
{
    tl_rmrf(dir);
}

TestSuite(guard, .init = setup, .fini = teardown, .timeout = 20);

struct g {
    pid_t pid, wpid;
};

/* exec-guard [--watch-stdin] -- cmd..., in a new session like the local launcher does. */
static int guard_start_io(const char *const *cmd, bool watch, int stdin_fd, int stdout_fd,
                          struct g *g, struct ea_error *err)
{
    const char *argv[16] = {TG, "exec-guard", "--report-fd", "3"};
    int n = 4;
    if (watch)
        argv[n++] = "--watch-stdin";
    argv[n++] = "--";
    for (int i = 0; cmd[i]; i++)
        argv[n++] = cmd[i];
    argv[n] = NULL;
    struct proc_spawn_opts o = {.argv = argv,
                                .stdin_fd = stdin_fd,
                                .stdout_fd = stdout_fd,
                                .stderr_fd = -1,
                                .flags = PROC_NEW_SESSION,
                                .report_fd = 3,
                                .target = cmd[0]};
    return proc_spawn(&o, &g->pid, &g->wpid, err);
}

static int guard_start(const char *const *cmd, bool watch, int stdin_fd, struct g *g,
                       struct ea_error *err)
{
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC); /* hang's "ready" line */
    int r = guard_start_io(cmd, watch, stdin_fd, devnull, g, err);
    close(devnull);
    return r;
}

static int guard_wait(const struct g *g)
{
    int st = 0;
    cr_assert_eq(waitpid(g->pid, &st, 0), g->pid);
    return st;
}

Test(guard, worker_runs_in_its_own_group_under_the_guard)
{
    const char *cmd[] = {TW, "hang", NULL};
    struct g g;
    struct ea_error err = {0};
    cr_assert_eq(guard_start(cmd, false, -1, &g, &err), 0, "%s", err.msg);
    cr_assert_neq(g.wpid, g.pid);
    cr_assert_eq(tl_ppid(g.wpid), g.pid);
    cr_assert_eq(getpgid(g.wpid), g.wpid, "the worker leads its own group");
    cr_assert_eq(getsid(g.wpid), g.pid, "inside the guard's session");
    cr_assert_eq(getpgid(g.pid), g.pid);
    cr_assert_eq(kill(-g.wpid, SIGKILL), 0);
    int st = guard_wait(&g);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status 0x%x", st);
    cr_assert(tl_no_such_pid(g.wpid));
}

Test(guard, exit_codes_are_mirrored)
{
    const char *codes[] = {"0", "1", "3", "126", "255"};
    for (size_t i = 0; i < sizeof(codes) / sizeof(*codes); i++) {
        const char *cmd[] = {TW, "exit", codes[i], NULL};
        struct g g;
        cr_assert_eq(guard_start(cmd, false, -1, &g, NULL), 0);
        int st = guard_wait(&g);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == atoi(codes[i]), "exit %s: status 0x%x",
                  codes[i], st);
    }
}

Test(guard, fatal_signals_are_re_raised_without_a_core)
{
    int sigs[] = {SIGTERM, SIGUSR1, SIGABRT, SIGKILL};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(*sigs); i++) {
        char num[8];
        snprintf(num, sizeof(num), "%d", sigs[i]);
        const char *cmd[] = {TW, "signal", num, NULL};
        struct g g;
        cr_assert_eq(guard_start(cmd, false, -1, &g, NULL), 0);
        int st = guard_wait(&g);
        cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == sigs[i], "signal %d: status 0x%x", sigs[i],
                  st);
        cr_assert_not(WCOREDUMP(st), "the guard dumped a core for signal %d", sigs[i]);
    }
}

Test(guard, exec_failure_is_relayed_with_errno)
{
    const char *cmd[] = {"/nonexistent/ea-prog", "x", NULL};
    struct g g = {-1, -1};
    struct ea_error err = {0};
    cr_assert_eq(guard_start(cmd, false, -1, &g, &err), -ENOENT);
    cr_assert(strstr(err.msg, "'/nonexistent/ea-prog'"), "%s", err.msg);
    cr_assert_eq(g.pid, -1);
    cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "the guard was not reaped");

    const char *cmd2[] = {"ea-no-such-program-xyz", NULL};
    cr_assert_eq(guard_start(cmd2, false, -1, &g, &err), -ENOENT);
    cr_assert(strstr(err.msg, "'ea-no-such-program-xyz'"), "%s", err.msg);

    char plain[128];
    snprintf(plain, sizeof(plain), "%s/plain", dir);
    int fd = open(plain, O_WRONLY | O_CREAT | O_CLOEXEC, 0644); /* exists, not executable */
    cr_assert_geq(fd, 0);
    close(fd);
    const char *cmd3[] = {plain, NULL};
    cr_assert_eq(guard_start(cmd3, false, -1, &g, &err), -EACCES, "%s", err.msg);
    cr_assert(strstr(err.msg, plain), "%s", err.msg);
}

Test(guard, usage_error_exits_2)
{
    const char *argv[] = {TG, "exec-guard", "--bogus", NULL};
    struct proc_spawn_opts o = {.argv = argv,
                                .stdin_fd = -1,
                                .stdout_fd = -1,
                                .stderr_fd = open("/dev/null", O_WRONLY | O_CLOEXEC),
                                .report_fd = -1};
    pid_t pid;
    cr_assert_eq(proc_spawn(&o, &pid, NULL, NULL), 0);
    int st = 0;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2);
}

Test(guard, signals_sent_to_the_guard_reach_the_worker)
{
    int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(*sigs); i++) {
        const char *cmd[] = {TW, "hang", NULL};
        struct g g;
        cr_assert_eq(guard_start(cmd, false, -1, &g, NULL), 0);
        cr_assert_eq(kill(g.pid, sigs[i]), 0);
        int st = guard_wait(&g);
        cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == sigs[i], "signal %d: status 0x%x", sigs[i],
                  st);
    }
}

Test(guard, stdin_eof_kills_the_worker_tree)
{
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    char pidfile[128];
    snprintf(pidfile, sizeof(pidfile), "%s/gc", dir);
    char script[512];
    snprintf(script, sizeof(script), "%s orphan-setsid %s && exec %s hang", TW, pidfile, TW);
    const char *cmd[] = {"/bin/sh", "-c", script, NULL};
    char fifo[128];
    snprintf(fifo, sizeof(fifo), "%s/out", dir);
    int keep, rfd = tl_fifo(fifo, &keep);
    struct g g;
    cr_assert_eq(guard_start_io(cmd, true, p[0], keep, &g, NULL), 0);
    close(p[0]);
    pid_t hang;
    cr_assert_eq(tl_read_ready(rfd, &hang, 1, 5000), 1); /* orphan-setsid is done by then */
    cr_assert_eq(hang, g.wpid);
    /* the guard keeps running while its stdin stays open; the worker's stdin is /dev/null */
    cr_assert_not(tl_pid_gone(g.pid, 100));
    pid_t gc = tl_read_pid(pidfile);
    cr_assert_gt(gc, 0);
    int fds[3] = {tl_pidfd(g.pid), tl_pidfd(g.wpid), tl_pidfd(gc)};
    close(p[1]);
    cr_assert(tl_pidfds_gone(fds, 3, 1000), "stdin EOF did not end the tree within 1 s");
    int st = guard_wait(&g);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status 0x%x", st);
    cr_assert(tl_no_such_pid(gc));
    close(rfd);
    close(keep);
}

Test(guard, leftovers_are_ended_before_the_guard_exits)
{
    char pidfile[128], script[512];
    snprintf(pidfile, sizeof(pidfile), "%s/gc", dir);
    /* a same-group orphan and a setsid'ed one, then the worker exits with 4 */
    snprintf(script, sizeof(script), "%s orphan %s.1 && %s orphan-setsid %s.2 && exit 4", TW,
             pidfile, TW, pidfile);
    const char *cmd[] = {"/bin/sh", "-c", script, NULL};
    struct g g;
    cr_assert_eq(guard_start(cmd, false, -1, &g, NULL), 0);
    int64_t t0 = tl_now_ms();
    int st = guard_wait(&g);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 4, "status 0x%x", st);
    cr_assert_lt(tl_now_ms() - t0, GRACE_MS, "leftovers that obey SIGTERM need no grace");
    char p1[160], p2[160];
    snprintf(p1, sizeof(p1), "%s.1", pidfile);
    snprintf(p2, sizeof(p2), "%s.2", pidfile);
    pid_t gc1 = tl_read_pid(p1), gc2 = tl_read_pid(p2);
    cr_assert(gc1 > 0 && gc2 > 0);
    cr_assert(tl_no_such_pid(gc1), "same-group grandchild %d left behind", gc1);
    cr_assert(tl_no_such_pid(gc2), "setsid'ed grandchild %d left behind", gc2);
}

static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (tl_read_file(path, buf, sizeof(buf)) <= 0)
        return '?';
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' ? rp[2] : '?';
}

Test(guard, leftovers_ignoring_sigterm_get_sigkill_after_the_grace)
{
    char fifo[128], ready[128], script[768];
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    snprintf(ready, sizeof(ready), "%s/ready", dir);
    /* the worker starts a child that ignores SIGTERM, waits until it says so, and exits 0 */
    snprintf(script, sizeof(script),
             "mkfifo %s && { %s ignore-term > %s & } && read x < %s && echo \"$x\" > %s", fifo, TW,
             fifo, fifo, ready);
    const char *cmd[] = {"/bin/sh", "-c", script, NULL};
    struct g g;
    cr_assert_eq(guard_start(cmd, false, -1, &g, NULL), 0);
    int64_t t0 = tl_now_ms();
    /* while the leftover holds the guard up, the worker stays a zombie: its pid (and so the
     * group id the agent signals) cannot be reused yet */
    int wfd = tl_pidfd(g.wpid);
    cr_assert(tl_pidfds_gone(&wfd, 1, 5000));
    close(wfd);
    cr_assert_eq(proc_state(g.wpid), 'Z', "the guard reaped its worker before the leftovers");
    int st = guard_wait(&g);
    int64_t took = tl_now_ms() - t0;
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status 0x%x", st);
    cr_assert_geq(took, GRACE_MS, "SIGKILL came before the grace: %lld ms", (long long)took);
    cr_assert_lt(took, GRACE_MS + 1000, "SIGKILL came late: %lld ms", (long long)took);
    char buf[64];
    int left = -1;
    cr_assert_gt(tl_read_file(ready, buf, sizeof(buf)), 0);
    cr_assert_eq(sscanf(buf, "ready %d", &left), 1);
    cr_assert(tl_no_such_pid(left), "the SIGTERM-ignoring leftover %d survived", left);
}

/* A fence page as the local launcher makes it: a memfd holding one int64_t deadline. */
static int fence_page(int64_t **ret)
{
    int fd = memfd_create("fence", MFD_CLOEXEC);
    cr_assert_geq(fd, 0);
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    close(fd);
    cr_assert_eq(ftruncate(high, sizeof(int64_t)), 0);
    void *m = mmap(NULL, sizeof(int64_t), PROT_READ | PROT_WRITE, MAP_SHARED, high, 0);
    cr_assert_neq(m, MAP_FAILED);
    *ret = m;
    return high;
}

static int guard_start_fenced(int fence_fd, const char *grace_ms, struct g *g)
{
    char fdarg[16];
    snprintf(fdarg, sizeof(fdarg), "%d", fence_fd);
    const char *argv[] = {TG, "exec-guard", "--report-fd", "3", "--fence-fd", fdarg,
                          "--fence-grace-ms", grace_ms, "--", TW, "hang", NULL};
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    struct proc_spawn_opts o = {.argv = argv, .stdin_fd = -1, .stdout_fd = devnull,
                                .stderr_fd = devnull, .flags = PROC_NEW_SESSION,
                                .report_fd = 3, .target = TW, .keep_fd = fence_fd};
    int r = proc_spawn(&o, &g->pid, &g->wpid, NULL);
    close(devnull);
    return r;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

Test(guard, fence_deadline_passed_stops_the_worker_without_the_agent)
{
    int64_t *page;
    int fd = fence_page(&page);
    int64_t first = mono_ms() + 1000;
    __atomic_store_n(page, first, __ATOMIC_RELEASE);
    struct g g;
    cr_assert_eq(guard_start_fenced(fd, "2000", &g), 0);
    /* renewed in time: still running after the first deadline */
    int64_t renewed = first + 500;
    __atomic_store_n(page, renewed, __ATOMIC_RELEASE);
    int wait = (int)(first + 200 - mono_ms());
    cr_assert_not(tl_pid_gone(g.wpid, wait > 0 ? wait : 0),
                  "stopped although the deadline was renewed");
    cr_assert(tl_pid_gone(g.wpid, 4000), "the worker outlived its fence deadline");
    int64_t gone = mono_ms();
    cr_assert_geq(gone, renewed, "stopped %lld ms before the renewed deadline",
                  (long long)(renewed - gone));
    cr_assert_leq(gone, renewed + 1000, "stopped %lld ms after the deadline",
                  (long long)(gone - renewed));
    int st = guard_wait(&g);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "SIGTERM first: status 0x%x", st);
    munmap(page, sizeof(int64_t));
    close(fd);
}

Test(guard, fence_zero_means_no_deadline_yet)
{
    int64_t *page;
    int fd = fence_page(&page);
    struct g g;
    cr_assert_eq(guard_start_fenced(fd, "100", &g), 0);
    cr_assert_not(tl_pid_gone(g.wpid, 300), "no deadline set: nothing to fence");
    cr_assert_eq(kill(g.pid, SIGTERM), 0);
    int st = guard_wait(&g);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    munmap(page, sizeof(int64_t));
    close(fd);
}
