// SPDX-License-Identifier: Apache-2.0
#include "harness.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int64_t h_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void h_mkdtemp(char *buf, size_t size, const char *tag)
{
    snprintf(buf, size, "/tmp/ea-e2e-%s-XXXXXX", tag);
    cr_assert(mkdtemp(buf), "mkdtemp: %s", strerror(errno));
}

void h_suite_dirs(const char *tag, char *dir, char *state, char *envdir)
{
    h_mkdtemp(dir, 256, tag);
    snprintf(state, 300, "%s/state", dir);
    snprintf(envdir, 300, "%s/env", dir);
    cr_assert_eq(mkdir(envdir, 0755), 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
}

void h_rmdir(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        cr_log_warn("could not remove %s", dir);
}

/* Agents started by this (test) process, for h_kill_agents(). */
static pid_t started[256];
static size_t n_started;

void h_kill_agents(void)
{
    for (size_t i = 0; i < n_started; i++)
        if (started[i] > 0 && kill(started[i], SIGKILL) == 0)
            waitpid(started[i], NULL, 0);
    n_started = 0;
}

static void forget(pid_t pid)
{
    for (size_t i = 0; i < n_started; i++)
        if (started[i] == pid)
            started[i] = 0;
}

void h_agent_start_argv(struct h_agent *a, const char *dir, const char *name,
                        const char *const *base, const char *const *extra, const char *const *cmd)
{
    const char *args[96];
    size_t n = 0;
    const char *const *parts[3] = {base, extra, cmd};
    for (int p = 0; p < 3; p++) {
        if (p == 2)
            args[n++] = "--";
        for (size_t i = 0; parts[p] && parts[p][i]; i++) {
            cr_assert_lt(n, sizeof(args) / sizeof(args[0]) - 2, "too many arguments for %s", name);
            args[n++] = parts[p][i];
        }
    }
    args[n] = NULL;
    h_agent_start(a, dir, name, args);
}

void h_agent_start(struct h_agent *a, const char *dir, const char *name, const char *const *args)
{
    memset(a, 0, sizeof(*a));
    snprintf(a->log, sizeof(a->log), "%s/%s.log", dir, name);
    snprintf(a->out, sizeof(a->out), "%s/%s.out", dir, name);
    /* EA_AGENT_WRAPPER="valgrind --error-exitcode=99 ...": run every agent under that command
     * (words split on spaces); the CI's valgrind pass sets it (tests/bad_input.cmake) */
    const char *argv[96];
    char wrapper[512];
    int n = 0;
    const char *w = getenv("EA_AGENT_WRAPPER");
    snprintf(wrapper, sizeof(wrapper), "%s", w ? w : "");
    char *save = NULL;
    for (char *t = strtok_r(wrapper, " ", &save); t && n < 32; t = strtok_r(NULL, " ", &save))
        argv[n++] = t;
    argv[n++] = EA_AGENT_BIN;
    for (int k = 0; args[k] && n < 95; k++)
        argv[n++] = args[k];
    argv[n] = NULL;
    /* the files exist before the agent runs, so an inotify watch on them never misses a line */
    int e = open(a->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int o = open(a->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    cr_assert(e >= 0 && o >= 0, "cannot create %s: %s", a->log, strerror(errno));
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (e < 0 || o < 0 || dup2(e, 2) < 0 || dup2(o, 1) < 0)
            _exit(126);
        execvp(argv[0], (char **)argv);
        _exit(127);
    }
    close(e);
    close(o);
    a->pid = pid;
    if (n_started < sizeof(started) / sizeof(*started))
        started[n_started++] = pid;
    a->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    cr_assert_geq(a->pidfd, 0, "pidfd_open: %s", strerror(errno));
}

int h_agent_wait(struct h_agent *a, int timeout_ms)
{
    if (!a->reaped) {
        forget(a->pid);
        struct pollfd p = {.fd = a->pidfd, .events = POLLIN};
        if (poll(&p, 1, timeout_ms) != 1) {
            kill(a->pid, SIGKILL);
            waitpid(a->pid, &a->status, 0);
            a->reaped = true;
            close(a->pidfd);
            return -1;
        }
        waitpid(a->pid, &a->status, 0);
        a->reaped = true;
        close(a->pidfd);
    }
    if (WIFEXITED(a->status))
        return WEXITSTATUS(a->status);
    return 128 + WTERMSIG(a->status);
}

void h_agent_signal(struct h_agent *a, int sig)
{
    if (!a->reaped)
        kill(a->pid, sig);
}

/* Whether process `pid` holds a file lock (flock or POSIX) now: /proc/locks lines are
 * "N: FLOCK  ADVISORY  WRITE <pid> <dev>:<inode> 0 EOF"; a waiter's line has "->". */
static bool holds_lock(pid_t pid)
{
    FILE *f = fopen("/proc/locks", "r");
    if (!f)
        return false;
    char line[256];
    bool held = false;
    while (!held && fgets(line, sizeof(line), f)) {
        long p = 0;
        if (!strstr(line, "->") && sscanf(line, "%*d: %*s %*s %*s %ld", &p) == 1 && p == pid)
            held = true;
    }
    fclose(f);
    return held;
}

void h_agent_freeze(struct h_agent *a)
{
    /* Bounded by a deadline, not a count: an agent under valgrind on a busy machine may not run
     * at all between a SIGCONT and the next SIGSTOP, so a thousand tries in a row could all find
     * it in the same store operation (CI, e2e_valgrind_elastic). After each SIGCONT it is given
     * a millisecond to finish that operation. */
    int64_t deadline = h_now_ms() + 30000;
    int attempts = 0;
    do {
        attempts++;
        h_agent_signal(a, SIGSTOP);
        siginfo_t si = {0};
        cr_assert_eq(waitid(P_PID, (id_t)a->pid, &si, WSTOPPED), 0, "agent %d: waitid: %s",
                     (int)a->pid, strerror(errno));
        if (!holds_lock(a->pid))
            return;
        h_agent_signal(a, SIGCONT); /* in the middle of a store operation: let it finish */
        poll(NULL, 0, 1);
    } while (h_now_ms() < deadline);
    cr_assert_fail("agent %d held a file lock at each of %d stops in 30 s", (int)a->pid, attempts);
}

bool h_file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len = getdelim(&buf, &cap, '\0', f);
    fclose(f);
    bool found = len > 0 && strstr(buf, needle);
    free(buf);
    return found;
}

char *h_slurp(const char *path, size_t *ret_len)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot read %s", path);
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len = getdelim(&buf, &cap, '\0', f);
    fclose(f);
    if (len < 0) {
        free(buf);
        buf = strdup("");
        len = 0;
    }
    if (ret_len)
        *ret_len = (size_t)len;
    return buf;
}

int h_count_in(const char *path, const char *needle)
{
    if (access(path, F_OK) != 0)
        return 0;
    char *t = h_slurp(path, NULL);
    int n = 0;
    for (const char *p = t; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    free(t);
    return n;
}

void h_require_torch(void)
{
    const char *cmd = "/usr/bin/python3 -c 'import torch, torch.distributed as d; "
                      "assert d.is_available() and d.is_gloo_available(), \"no gloo\"; "
                      "print(torch.__version__)' 2>&1";
    FILE *p = popen(cmd, "r");
    cr_assert(p, "cannot run /usr/bin/python3: %s", strerror(errno));
    char out[4096];
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    cr_assert(st == 0,
              "PyTorch with gloo is not importable by /usr/bin/python3 (Debian package "
              "python3-torch; scripts/install-deps.sh --test installs it). The test needs it and "
              "does not skip. Python said:\n%s",
              out);
    out[strcspn(out, "\n")] = '\0';
    cr_log_info("torch %s", out);
}

/* Wait until check() holds, re-checking on every inotify event on `watch` (file or dir). */
static bool wait_inotify(const char *watch, uint32_t mask, bool (*check)(const void *),
                         const void *arg, int timeout_ms)
{
    int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    cr_assert_geq(fd, 0);
    cr_assert_geq(inotify_add_watch(fd, watch, mask), 0, "cannot watch %s: %s", watch,
                  strerror(errno));
    int64_t deadline = h_now_ms() + timeout_ms;
    bool ok;
    while (!(ok = check(arg))) {
        int64_t left = deadline - h_now_ms();
        if (left <= 0)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) == 1) {
            char buf[4096];
            while (read(fd, buf, sizeof(buf)) > 0)
                ;
        }
    }
    close(fd);
    return ok;
}

struct log_arg {
    const char *path, *needle;
};

static bool log_check(const void *p)
{
    const struct log_arg *l = p;
    return h_file_contains(l->path, l->needle);
}

bool h_log_wait(const struct h_agent *a, const char *needle, int timeout_ms)
{
    struct log_arg l = {a->log, needle};
    return wait_inotify(a->log, IN_MODIFY, log_check, &l, timeout_ms);
}

void h_wait_in(const struct h_agent *a, bool out, const char *needle, int timeout_ms)
{
    struct h_agent view = *a;
    if (out)
        snprintf(view.log, sizeof(view.log), "%s", a->out);
    bool ok = h_log_wait(&view, needle, timeout_ms);
    if (!ok) {
        h_show_log(a);
        h_show_log(&view);
    }
    cr_assert(ok, "'%s' not in %s within %d ms", needle, view.log, timeout_ms);
}

int h_count_files(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    size_t len = strlen(prefix);
    for (struct dirent *e; (e = readdir(d));)
        n += strncmp(e->d_name, prefix, len) == 0 && !strstr(e->d_name, ".tmp");
    closedir(d);
    return n;
}

struct count_arg {
    const char *dir, *prefix;
    int count;
};

static bool count_check(const void *p)
{
    const struct count_arg *c = p;
    return h_count_files(c->dir, c->prefix) >= c->count;
}

int h_wait_files(const char *dir, const char *prefix, int count, int timeout_ms)
{
    struct count_arg c = {dir, prefix, count};
    wait_inotify(dir, IN_CREATE | IN_MOVED_TO, count_check, &c, timeout_ms);
    return h_count_files(dir, prefix);
}

const char *h_env_value(const char *path, const char *name)
{
    static char val[1024];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char line[4096];
    size_t len = strlen(name);
    const char *found = NULL;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, name, len) == 0 && line[len] == '=') {
            snprintf(val, sizeof(val), "%s", line + len + 1);
            val[strcspn(val, "\n")] = '\0';
            found = val;
            break;
        }
    fclose(f);
    return found;
}

bool h_pid_gone(pid_t pid, int timeout_ms)
{
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0)
        return errno == ESRCH;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    bool gone = poll(&p, 1, timeout_ms > 0 ? timeout_ms : 0) == 1; /* never -1: for ever */
    close(fd);
    /* terminated; if it was re-parented to us (the test is a subreaper), reap it */
    if (gone)
        waitpid(pid, NULL, WNOHANG);
    return gone;
}

static pid_t read_pid_now(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long pid = -1;
    if (fscanf(f, "%ld", &pid) != 1)
        pid = -1;
    fclose(f);
    return (pid_t)pid;
}

static bool pid_written(const void *p)
{
    return read_pid_now(p) > 0;
}

/* A pid file a worker writes with `echo $$ > f` exists, empty, between the shell's open and its
 * write: h_wait_files (IN_CREATE) may return inside that window, so a file that is there but
 * holds no pid yet is waited for (its write is an event), at most PID_WRITE_WAIT_MS. */
#define PID_WRITE_WAIT_MS 5000

pid_t h_read_pid(const char *path)
{
    if (access(path, F_OK) != 0)
        return -1;
    if (read_pid_now(path) <= 0)
        wait_inotify(path, IN_MODIFY | IN_CLOSE_WRITE, pid_written, path, PID_WRITE_WAIT_MS);
    return read_pid_now(path);
}

char *h_fmt(const char *f, ...)
{
    static char bufs[16][512];
    static int next;
    char *b = bufs[next++ % 16];
    va_list ap;
    va_start(ap, f);
    vsnprintf(b, 512, f, ap);
    va_end(ap);
    return b;
}

void h_show_log(const struct h_agent *a)
{
    char cmd[2400]; /* the agent's log, then the end of its workers' output (a hang shows where) */
    snprintf(cmd, sizeof(cmd),
             "echo '---- %s' >&2; cat '%s' >&2; if [ -s '%s' ]; then echo '---- %s (the last 40 "
             "lines)' >&2; tail -n 40 '%s' >&2; fi",
             a->log, a->log, a->out, a->out, a->out);
    int rc = system(cmd);
    (void)rc;
}

void h_expect_exit(struct h_agent *a, int code, int timeout_ms)
{
    int got = h_agent_wait(a, timeout_ms);
    if (got != code)
        h_show_log(a);
    cr_assert_eq(got, code, "agent %d: exit %d, wanted %d (log %s)", a->pid, got, code, a->log);
}
