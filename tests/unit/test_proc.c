// SPDX-License-Identifier: Apache-2.0
/*
 * proc: the spawn recipe (exec failure as errno, PATH of the given env, cwd, env, sessions and
 * groups, signal reset, fd hygiene, death signal) and the child table (SIGCHLD signalfd, known
 * exits recorded, unknown children reaped silently, subreaper). Real processes only.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc.h"
#include "test_launch_support.h"

static char dir[64];

static void setup(void)
{
    tl_mkdtemp(dir, sizeof(dir));
}

static void teardown(void)
{
    tl_rmrf(dir);
}

TestSuite(proc, .init = setup, .fini = teardown, .timeout = 20);

static int wait_status(pid_t pid)
{
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    return st;
}

static int spawn(const char *const *argv, const char *const *envp, unsigned flags, pid_t *pid,
                 struct ea_error *err)
{
    struct proc_spawn_opts o = {.argv = argv,
                                .envp = envp,
                                .stdin_fd = -1,
                                .stdout_fd = -1,
                                .stderr_fd = -1,
                                .flags = flags,
                                .report_fd = -1};
    return proc_spawn(&o, pid, NULL, err);
}

/* A process that blocks until killed, with its "ready" line thrown away. */
static pid_t spawn_hang(unsigned flags, int deathsig)
{
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    const char *argv[] = {TW, "hang", NULL};
    struct proc_spawn_opts o = {.argv = argv,
                                .stdin_fd = -1,
                                .stdout_fd = devnull,
                                .stderr_fd = -1,
                                .flags = flags,
                                .deathsig = deathsig,
                                .report_fd = -1};
    pid_t pid = -1;
    struct ea_error err = {0};
    cr_assert_eq(proc_spawn(&o, &pid, NULL, &err), 0, "%s", err.msg);
    close(devnull);
    return pid;
}

Test(proc, exit_status_and_target_pid)
{
    const char *argv[] = {TW, "exit", "7", NULL};
    pid_t pid = -1, target = -1;
    struct proc_spawn_opts o = {
        .argv = argv, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .report_fd = -1};
    cr_assert_eq(proc_spawn(&o, &pid, &target, NULL), 0);
    cr_assert_eq(target, pid);
    int st = wait_status(pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 7);
}

Test(proc, missing_program_is_enoent_and_named)
{
    const char *argv[] = {"/nonexistent/ea-prog", NULL};
    pid_t pid = 12345;
    struct ea_error err = {0};
    cr_assert_eq(spawn(argv, NULL, 0, &pid, &err), -ENOENT);
    cr_assert_eq(pid, 12345, "ret_pid must be untouched on failure");
    cr_assert(strstr(err.msg, "'/nonexistent/ea-prog'"), "%s", err.msg);
    cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "the failed child must have been reaped");
    cr_assert_eq(errno, ECHILD);
}

Test(proc, not_executable_is_eacces)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/plain", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "#!/bin/sh\n", 10), 10);
    close(fd);
    const char *argv[] = {path, NULL};
    pid_t pid;
    struct ea_error err = {0};
    cr_assert_eq(spawn(argv, NULL, 0, &pid, &err), -EACCES);
    cr_assert(strstr(err.msg, path), "%s", err.msg);
    /* through PATH too: a non-executable match is reported as such, not as "not found" */
    char pathenv[160];
    snprintf(pathenv, sizeof(pathenv), "PATH=/nonexistent:%s", dir);
    const char *envp[] = {pathenv, NULL};
    const char *argv2[] = {"plain", NULL};
    cr_assert_eq(spawn(argv2, envp, PROC_SEARCH_PATH, &pid, &err), -EACCES);
}

Test(proc, path_is_searched_in_the_given_environment)
{
    const char *argv[] = {"ea-testworker", "exit", "3", NULL};
    const char *envp[] = {"PATH=/nonexistent::" EA_HELPERS_DIR, NULL};
    pid_t pid;
    struct ea_error err = {0};
    cr_assert_eq(spawn(argv, envp, PROC_SEARCH_PATH, &pid, &err), 0, "%s", err.msg);
    int st = wait_status(pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    /* the caller's PATH does not count */
    const char *noenv[] = {"PATH=/nonexistent", NULL};
    cr_assert_eq(spawn(argv, noenv, PROC_SEARCH_PATH, &pid, &err), -ENOENT);
    cr_assert(strstr(err.msg, "'ea-testworker'"), "%s", err.msg);
    /* without the flag, no search at all */
    cr_assert_eq(spawn(argv, envp, 0, &pid, &err), -ENOENT);
}

Test(proc, env_and_cwd_are_exact)
{
    const char *argv[] = {TW, "record", ".", "4", NULL};
    const char *envp[] = {"A=1", "B=two words", "EMPTY=", "RANK=r9", NULL};
    struct proc_spawn_opts o = {.argv = argv,
                                .envp = envp,
                                .cwd = dir,
                                .stdin_fd = -1,
                                .stdout_fd = -1,
                                .stderr_fd = -1,
                                .report_fd = -1};
    pid_t pid;
    cr_assert_eq(proc_spawn(&o, &pid, NULL, NULL), 0);
    int st = wait_status(pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 4);
    char path[160], buf[512];
    snprintf(path, sizeof(path), "%s/env.r9.%d", dir, (int)pid);
    cr_assert_gt(tl_read_file(path, buf, sizeof(buf)), 0, "no %s: cwd not applied", path);
    cr_assert_str_eq(buf, "A=1\nB=two words\nEMPTY=\nRANK=r9\n");
}

Test(proc, chdir_failure_names_the_directory)
{
    const char *argv[] = {TW, "exit", "0", NULL};
    struct proc_spawn_opts o = {.argv = argv,
                                .cwd = "/nonexistent/wd",
                                .stdin_fd = -1,
                                .stdout_fd = -1,
                                .stderr_fd = -1,
                                .report_fd = -1};
    pid_t pid;
    struct ea_error err = {0};
    cr_assert_eq(proc_spawn(&o, &pid, NULL, &err), -ENOENT);
    cr_assert(strstr(err.msg, "'/nonexistent/wd'"), "%s", err.msg);
}

Test(proc, new_session_and_new_group)
{
    pid_t pid = spawn_hang(PROC_NEW_SESSION, 0);
    cr_assert_eq(getsid(pid), pid);
    cr_assert_eq(getpgid(pid), pid);
    kill(pid, SIGKILL);
    wait_status(pid);

    pid = spawn_hang(PROC_NEW_PGROUP, 0);
    cr_assert_eq(getpgid(pid), pid);
    cr_assert_eq(getsid(pid), getsid(0), "a new group stays in our session");
    kill(pid, SIGKILL);
    wait_status(pid);

    pid = spawn_hang(0, 0);
    cr_assert_eq(getpgid(pid), getpgid(0));
    kill(pid, SIGKILL);
    wait_status(pid);
}

Test(proc, signal_dispositions_and_mask_are_reset)
{
    signal(SIGTERM, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    pid_t a = spawn_hang(0, 0);
    pid_t b = spawn_hang(0, 0);
    kill(a, SIGTERM);
    kill(b, SIGUSR1);
    int st = wait_status(a);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "SIG_IGN leaked into the child");
    st = wait_status(b);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGUSR1, "the blocked mask leaked");
}

Test(proc, close_fds_hides_leaked_descriptors)
{
    int leaked = fcntl(STDERR_FILENO, F_DUPFD, 10); /* deliberately not CLOEXEC */
    cr_assert_geq(leaked, 10);
    char script[64];
    snprintf(script, sizeof(script), "test -e /proc/self/fd/%d", leaked);
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    pid_t pid;
    cr_assert_eq(spawn(argv, NULL, 0, &pid, NULL), 0);
    int st = wait_status(pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "control: the fd is inherited without the flag");
    cr_assert_eq(spawn(argv, NULL, PROC_CLOSE_FDS, &pid, NULL), 0);
    st = wait_status(pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "PROC_CLOSE_FDS let fd %d through", leaked);
    close(leaked);
}

/* A middle process spawns `hang` (with or without PROC_DEATHSIG) and exits at once. */
static pid_t orphaned_hang(unsigned flags)
{
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    pid_t mid = fork();
    cr_assert_geq(mid, 0);
    if (mid == 0) {
        pid_t pid = spawn_hang(flags, SIGKILL);
        _exit(write(p[1], &pid, sizeof(pid)) == sizeof(pid) ? 0 : 1);
    }
    close(p[1]);
    pid_t pid = -1;
    cr_assert_eq(read(p[0], &pid, sizeof(pid)), (ssize_t)sizeof(pid));
    close(p[0]);
    wait_status(mid);
    return pid;
}

Test(proc, death_signal_fires_when_the_parent_dies)
{
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0); /* the orphan comes to us to be reaped */
    pid_t pid = orphaned_hang(PROC_DEATHSIG);
    cr_assert(tl_pid_gone(pid, 1000), "PROC_DEATHSIG child survived its parent");
    int st = wait_status(pid);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* control: without the flag it survives */
    pid = orphaned_hang(0);
    cr_assert_not(tl_pid_gone(pid, 200));
    kill(pid, SIGKILL);
    wait_status(pid);
}

/* Issue 38: what is re-parented to a subreaper is killed by proc_kill_strays_until, and the
 * children of the children (re-parented in turn when their parent is killed); what the table
 * holds is not touched. */
Test(proc, strays_and_their_children_are_killed_registered_children_are_not)
{
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    int sigfd = -1;
    struct ea_error err = {0};
    cr_assert_eq(proc_table_open(&sigfd, &err), 0, "%s", err.msg);
    pid_t mine = spawn_hang(0, SIGKILL); /* registered: ours on purpose */
    cr_assert_eq(proc_table_add(mine), 0);
    /* a stray with a child of its own: a middle process forks it and exits */
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    pid_t mid = fork();
    cr_assert_geq(mid, 0);
    if (mid == 0) {
        pid_t s = fork();
        if (s == 0) {
            pid_t c = fork();
            if (c == 0)
                for (;;)
                    pause();
            pid_t both[2] = {getpid(), c};
            _exit(write(p[1], both, sizeof(both)) == sizeof(both) ? 0 : 1); /* the stray */
        }
        _exit(0);
    }
    close(p[1]);
    pid_t both[2] = {-1, -1};
    cr_assert_eq(read(p[0], both, sizeof(both)), (ssize_t)sizeof(both));
    close(p[0]);
    int fds[2] = {tl_pidfd(both[0]), tl_pidfd(both[1])};
    cr_assert_eq(proc_kill_strays_until(tl_now_ms() + 5000), 0);
    bool gone = tl_pidfds_gone(fds, 2, 5000), kept = !tl_pid_gone(mine, 0);
    for (int i = 0; i < 2 && !gone; i++)
        kill(both[i], SIGKILL); /* nothing left to hold the test's output open */
    kill(mine, SIGKILL);
    proc_table_close();
    wait_status(mine);
    close(fds[0]);
    close(fds[1]);
    cr_assert(gone, "a stray or its child survived");
    cr_assert(kept, "a registered child was killed");
}

Test(proc, a_middleman_that_does_not_report_is_an_error)
{
    const char *argv[] = {"/bin/true", NULL};
    struct proc_spawn_opts o = {.argv = argv,
                                .stdin_fd = -1,
                                .stdout_fd = -1,
                                .stderr_fd = -1,
                                .report_fd = 3,
                                .target = "worker"};
    pid_t pid = -1;
    struct ea_error err = {0};
    cr_assert_eq(proc_spawn(&o, &pid, NULL, &err), -EPROTO);
    cr_assert(strstr(err.msg, "'/bin/true'") && strstr(err.msg, "'worker'"), "%s", err.msg);
    cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1);
}

/* Whether someone reaped `pid` (without reaping it ourselves). */
static bool reaped(pid_t pid)
{
    siginfo_t si = {0};
    return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD;
}

Test(proc, table_records_known_exits_and_reaps_unknown_children)
{
    int sigfd = -1;
    struct ea_error err = {0};
    cr_assert_eq(proc_table_open(&sigfd, &err), 0, "%s", err.msg);
    const char *argv[] = {TW, "exit", "5", NULL};
    pid_t known;
    cr_assert_eq(spawn(argv, NULL, 0, &known, NULL), 0);
    cr_assert_eq(proc_table_add(known), 0);
    pid_t unknown = fork();
    if (unknown == 0)
        _exit(0);
    int st = 0;
    int64_t end = 0, deadline = tl_now_ms() + 5000;
    while (proc_exit_status(known, &st, &end) == 0 || !reaped(unknown)) {
        struct pollfd pfd = {.fd = sigfd, .events = POLLIN};
        cr_assert_gt(poll(&pfd, 1, (int)(deadline - tl_now_ms())), 0, "no SIGCHLD seen");
        proc_reap();
    }
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 5);
    cr_assert_gt(end, 0);
    cr_assert_eq(proc_exit_status(unknown, &st, NULL), -ESRCH);
    proc_table_remove(known);
    cr_assert_eq(proc_exit_status(known, &st, NULL), -ESRCH);
    proc_table_close();
}

Test(proc, subreaper_adopts_orphaned_grandchildren)
{
    cr_assert_eq(proc_set_subreaper(NULL), 0);
    char pidfile[128];
    snprintf(pidfile, sizeof(pidfile), "%s/gc", dir);
    const char *argv[] = {TW, "orphan-setsid", pidfile, NULL};
    pid_t pid;
    cr_assert_eq(spawn(argv, NULL, 0, &pid, NULL), 0);
    int st = wait_status(pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    pid_t gc = tl_read_pid(pidfile);
    cr_assert_gt(gc, 0);
    cr_assert_eq(tl_ppid(gc), getpid(), "the orphan went past us");
    kill(gc, SIGKILL);
    wait_status(gc);
}
