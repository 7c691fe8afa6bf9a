// SPDX-License-Identifier: Apache-2.0
/*
 * proc: the spawn recipe and the child table (see proc.h). The shape follows libuv's
 * uv__spawn_and_init_child: a CLOEXEC pipe reports set-up or exec failure as an errno (EOF means
 * the exec succeeded), and between fork and exec the child only makes async-signal-safe calls.
 */
#include "proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ea_loop.h"
#include "ea_time.h"

extern char **environ;

#define PROC_DEFAULT_PATH "/bin:/usr/bin" /* glibc's execvp default when PATH is unset */

/* ---- child side: async-signal-safe calls only, then exec or _exit(127) -------------------- */

int proc_report_write(int fd, int kind, int value)
{
    struct proc_report r = {.kind = kind, .value = value};
    for (;;) {
        ssize_t n = write(fd, &r, sizeof(r));
        if (n == (ssize_t)sizeof(r))
            return 0;
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 ? -errno : -EIO;
    }
}

static void child_fail(int errw, int kind, int e) __attribute__((noreturn));
static void child_fail(int errw, int kind, int e)
{
    proc_report_write(errw, kind, e);
    _exit(127);
}

/* Default dispositions first, then an empty mask: a pending signal must not run a handler that
 * belongs to the parent. Signals the C library reserves fail with EINVAL, which is fine. */
static void child_reset_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            sigaction(s, &sa, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/* dup2 the given fds onto 0/1/2. Sources that are themselves in 0..2 move up first, so that
 * swapping 1 and 2 cannot clobber one of them. Returns 0 or an errno. */
static int child_stdio(const int src[3])
{
    int fd[3];
    for (int i = 0; i < 3; i++) {
        fd[i] = src[i];
        if (fd[i] >= 0 && fd[i] < 3 && fd[i] != i) {
            fd[i] = fcntl(fd[i], F_DUPFD_CLOEXEC, 3);
            if (fd[i] < 0)
                return errno;
        }
    }
    for (int i = 0; i < 3; i++) {
        if (fd[i] < 0)
            continue;
        if (fd[i] == i ? fcntl(i, F_SETFD, 0) < 0 : dup2(fd[i], i) < 0)
            return errno;
    }
    return 0;
}

static void child_cloexec_all(int maxfd)
{
    if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
        return;
    for (int fd = 3; fd < maxfd; fd++)
        fcntl(fd, F_SETFD, FD_CLOEXEC); /* EBADF for the holes */
}

static const char *env_get(const char *const *envp, const char *name, size_t len)
{
    for (size_t i = 0; envp[i]; i++)
        if (strncmp(envp[i], name, len) == 0 && envp[i][len] == '=')
            return envp[i] + len + 1;
    return NULL;
}

/* execve argv[0], searching PATH like Python's os.execvpe: try every directory, report the first
 * error that is not "not there" (ENOENT/ENOTDIR), else ENOENT. An empty element is the cwd. */
static void child_exec(const char *const *argv, const char *const *envp, bool search, int errw)
    __attribute__((noreturn));
static void child_exec(const char *const *argv, const char *const *envp, bool search, int errw)
{
    const char *file = argv[0];
    if (!search || strchr(file, '/')) {
        execve(file, (char *const *)argv, (char *const *)envp);
        child_fail(errw, PROC_REPORT_EXEC, errno);
    }
    const char *path = env_get(envp, "PATH", 4);
    if (!path)
        path = PROC_DEFAULT_PATH;
    size_t flen = strlen(file);
    char buf[4096];
    int first = 0;
    for (const char *p = path;;) {
        const char *end = p;
        while (*end && *end != ':')
            end++;
        size_t dlen = (size_t)(end - p);
        if (dlen + flen + 2 <= sizeof(buf)) {
            memcpy(buf, p, dlen);
            if (dlen)
                buf[dlen++] = '/';
            memcpy(buf + dlen, file, flen + 1);
            execve(buf, (char *const *)argv, (char *const *)envp);
            if (errno != ENOENT && errno != ENOTDIR && !first)
                first = errno;
        }
        if (!*end)
            break;
        p = end + 1;
    }
    child_fail(errw, PROC_REPORT_EXEC, first ? first : ENOENT);
}

static void child_main(const struct proc_spawn_opts *o, const char *const *envp, pid_t parent,
                       int errw, int maxfd) __attribute__((noreturn));
static void child_main(const struct proc_spawn_opts *o, const char *const *envp, pid_t parent,
                       int errw, int maxfd)
{
    child_reset_signals();
    if ((o->flags & PROC_NEW_SESSION) && setsid() < 0)
        child_fail(errw, PROC_REPORT_SETUP, errno);
    if ((o->flags & PROC_NEW_PGROUP) && setpgid(0, 0) < 0)
        child_fail(errw, PROC_REPORT_SETUP, errno);
    if (o->flags & PROC_DEATHSIG) {
        if (prctl(PR_SET_PDEATHSIG, o->deathsig) < 0)
            child_fail(errw, PROC_REPORT_SETUP, errno);
        if (getppid() != parent) /* died before the death signal was armed */
            _exit(127);
    }
    int fds[3] = {o->stdin_fd, o->stdout_fd, o->stderr_fd};
    int e = child_stdio(fds);
    if (e)
        child_fail(errw, PROC_REPORT_SETUP, e);
    if (o->flags & PROC_CLOSE_FDS)
        child_cloexec_all(maxfd);
    if (o->report_fd >= 0) {
        /* the write end stays CLOEXEC (closed by a successful exec); its copy survives */
        if (errw == o->report_fd ? fcntl(errw, F_SETFD, 0) < 0 : dup2(errw, o->report_fd) < 0)
            child_fail(errw, PROC_REPORT_SETUP, errno);
    }
    const int keep[2] = {o->keep_fd, o->keep_fd2};
    for (int k = 0; k < 2; k++)
        if (keep[k] >= 3 && keep[k] != o->report_fd && keep[k] != errw &&
            fcntl(keep[k], F_SETFD, 0) < 0)
            child_fail(errw, PROC_REPORT_SETUP, errno);
    if (o->cgroup_fd >= 3) {
        int cg = openat(o->cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
        if (cg < 0 || write(cg, "0", 1) != 1) /* "0": the writer itself */
            child_fail(errw, PROC_REPORT_SETUP, errno);
        close(cg);
    }
    if (o->cwd && chdir(o->cwd) < 0)
        child_fail(errw, PROC_REPORT_CHDIR, errno);
    child_exec(o->argv, envp, o->flags & PROC_SEARCH_PATH, errw);
}

/* ---- parent side ------------------------------------------------------------------------ */

/* A pipe whose ends are CLOEXEC and above 2 (a parent with stdin closed would get fd 0, which
 * the child's dup2 onto 0 would clobber). */
static int error_pipe(int p[2])
{
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    for (int i = 0; i < 2; i++) {
        if (p[i] >= 3)
            continue;
        int fd = fcntl(p[i], F_DUPFD_CLOEXEC, 3);
        int e = errno;
        close(p[i]);
        p[i] = fd;
        if (fd < 0) {
            if (p[1 - i] >= 0)
                close(p[1 - i]);
            return -e;
        }
    }
    return 0;
}

static int open_max(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 65536)
        return 65536;
    return (int)rl.rlim_cur;
}

/* Read what the pipe holds into s: 1 at EOF (every write end closed: the exec succeeded, or the
 * child is gone) or on an error, 0 when it would block (more to come). */
static int reports_read(struct proc_start *s)
{
    for (;;) {
        ssize_t got = read(s->fd, s->buf + s->have, sizeof(s->buf) - s->have);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && errno == EAGAIN)
            return 0;
        if (got <= 0)
            return 1;
        s->have += (size_t)got;
        while (s->have >= sizeof(struct proc_report)) {
            struct proc_report r;
            memcpy(&r, s->buf, sizeof(r));
            s->have -= sizeof(r);
            memmove(s->buf, s->buf + sizeof(r), s->have);
            if (r.kind == PROC_REPORT_TARGET_PID)
                s->target = r.value;
            else if (!s->kind) {
                s->kind = r.kind;
                s->value = r.value > 0 ? r.value : EIO;
            }
        }
    }
}

static int reap_blocking(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return st;
}

/* The message of a failed start; st: the child's wait status, -1 when not reaped (yet). */
static int spawn_error(const struct proc_start *s, int st, struct ea_error *err)
{
    const char *prog = s->prog;
    const char *target = s->target_name[0] ? s->target_name : "its program";
    int e = s->value;
    switch (s->kind) {
    case PROC_REPORT_CHDIR:
        return ea_errorf(err, -e, "cannot change to directory '%s' to run '%s': %s", s->cwd,
                         s->target_name[0] ? s->target_name : prog, strerror(e));
    case PROC_REPORT_EXEC:
        return ea_errorf(err, -e, "cannot execute '%s': %s", prog, strerror(e));
    case PROC_REPORT_TARGET_EXEC:
        return ea_errorf(err, -e, "cannot execute '%s': %s", target, strerror(e));
    case PROC_REPORT_TARGET_SETUP:
        return ea_errorf(err, -e, "'%s' could not start '%s': %s", prog, target, strerror(e));
    case 0:
        break;
    default:
        return ea_errorf(err, -e, "cannot set up the process for '%s': %s", prog, strerror(e));
    }
    if (s->timed_out)
        return ea_errorf(err, -ETIMEDOUT, "'%s' did not start '%s' within %d s", prog, target,
                         PROC_START_TIMEOUT_MS / 1000);
    if (st < 0)
        return ea_errorf(err, -EPROTO, "'%s' ended without starting '%s'", prog, target);
    if (WIFSIGNALED(st))
        return ea_errorf(err, -EPROTO, "'%s' was killed by signal %d before starting '%s'", prog,
                         WTERMSIG(st), target);
    return ea_errorf(err, -EPROTO, "'%s' exited with status %d without starting '%s'", prog,
                     WEXITSTATUS(st), target);
}

int proc_spawn_begin(const struct proc_spawn_opts *o, struct proc_start *s, struct ea_error *err)
{
    *s = (struct proc_start){.fd = -1, .target = -1, .want_target = o->report_fd >= 0};
    if (!o->argv || !o->argv[0] || (o->report_fd >= 0 && o->report_fd < 3))
        return ea_errorf(err, -EINVAL, "proc_spawn: no program, or a report fd below 3");
    snprintf(s->prog, sizeof(s->prog), "%s", o->argv[0]);
    snprintf(s->target_name, sizeof(s->target_name), "%s", o->target ? o->target : "");
    snprintf(s->cwd, sizeof(s->cwd), "%s", o->cwd ? o->cwd : "");
    const char *const *envp = o->envp ? o->envp : (const char *const *)environ;
    int p[2];
    int r = error_pipe(p);
    if (r < 0)
        return ea_errorf(err, r, "cannot create a pipe: %s", strerror(-r));
    int maxfd = open_max();
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        r = -errno;
        close(p[0]);
        close(p[1]);
        return ea_errorf(err, r, "cannot fork to run '%s': %s", o->argv[0], strerror(-r));
    }
    if (pid == 0) {
        close(p[0]);
        child_main(o, envp, parent, p[1], maxfd);
    }
    close(p[1]);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    s->pid = pid;
    s->fd = p[0];
    return 0;
}

int proc_spawn_feed(struct proc_start *s, struct ea_error *err)
{
    if (s->fd >= 0 && !s->timed_out && reports_read(s) == 0)
        return 0;
    proc_spawn_end(s);
    if (s->kind || s->timed_out || (s->want_target && s->target <= 0)) {
        kill(s->pid, SIGKILL); /* it is exiting already, unless it is not a middleman at all */
        return spawn_error(s, -1, err);
    }
    if (!s->want_target)
        s->target = s->pid;
    return 1;
}

void proc_spawn_end(struct proc_start *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
}

int proc_spawn(const struct proc_spawn_opts *o, pid_t *ret_pid, pid_t *ret_target_pid,
               struct ea_error *err)
{
    struct proc_start s;
    int r = proc_spawn_begin(o, &s, err);
    if (r < 0)
        return r;
    int64_t deadline = ea_now_ms() + PROC_START_TIMEOUT_MS;
    while ((r = proc_spawn_feed(&s, NULL)) == 0) {
        struct pollfd pfd = {.fd = s.fd, .events = POLLIN};
        if (ea_wait_fds(&pfd, 1, deadline) == 0)
            s.timed_out = true;
    }
    if (r < 0) /* the child has been SIGKILLed: reap it, for the message and to leave nothing */
        return spawn_error(&s, reap_blocking(s.pid), err);
    *ret_pid = s.pid;
    if (ret_target_pid)
        *ret_target_pid = s.target;
    return 0;
}

int proc_set_subreaper(struct ea_error *err)
{
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        return ea_errorf(err, -errno, "cannot become a child subreaper: %s", strerror(errno));
    return 0;
}

/* ---- the child table ---------------------------------------------------------------------- */

struct proc_entry {
    pid_t pid;
    bool exited;
    int status;
    int64_t end_ms;
};

/* The one process-wide table (STYLE 6): SIGCHLD is process-wide, so is what it reports. */
static struct {
    struct proc_entry *v;
    size_t n, cap;
    int refs;
    int sigfd;
    bool was_blocked;
} tab = {.sigfd = -1};

int proc_table_open(int *ret_sigfd, struct ea_error *err)
{
    if (tab.refs == 0) {
        sigset_t set, old;
        sigemptyset(&set);
        sigaddset(&set, SIGCHLD);
        int e = pthread_sigmask(SIG_BLOCK, &set, &old);
        if (e)
            return ea_errorf(err, -e, "cannot block SIGCHLD: %s", strerror(e));
        int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        if (fd < 0) {
            e = errno;
            if (!sigismember(&old, SIGCHLD))
                pthread_sigmask(SIG_UNBLOCK, &set, NULL);
            return ea_errorf(err, -e, "cannot create a SIGCHLD signalfd: %s", strerror(e));
        }
        tab.sigfd = fd;
        tab.was_blocked = sigismember(&old, SIGCHLD);
    }
    tab.refs++;
    *ret_sigfd = tab.sigfd;
    return 0;
}

void proc_table_close(void)
{
    if (tab.refs == 0 || --tab.refs > 0)
        return;
    close(tab.sigfd);
    tab.sigfd = -1;
    if (!tab.was_blocked) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGCHLD);
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    }
    free(tab.v);
    tab.v = NULL;
    tab.n = tab.cap = 0;
}

static struct proc_entry *table_find(pid_t pid)
{
    for (size_t i = 0; i < tab.n; i++)
        if (tab.v[i].pid == pid)
            return &tab.v[i];
    return NULL;
}

int proc_table_add(pid_t pid)
{
    if (tab.n == tab.cap) {
        size_t cap = tab.cap ? tab.cap * 2 : 16;
        struct proc_entry *v = realloc(tab.v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        tab.v = v;
        tab.cap = cap;
    }
    tab.v[tab.n++] = (struct proc_entry){.pid = pid};
    return 0;
}

void proc_table_remove(pid_t pid)
{
    struct proc_entry *e = table_find(pid);
    if (e)
        *e = tab.v[--tab.n];
}

int proc_reap(void)
{
    struct signalfd_siginfo si;
    if (tab.sigfd >= 0)
        while (read(tab.sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
            ;
    for (int reaped = 0;; reaped++) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid < 0 && errno == EINTR) {
            reaped--;
            continue;
        }
        if (pid <= 0)
            return reaped; /* 0: children left, none exited; ECHILD: none left */
        struct proc_entry *e = table_find(pid);
        if (e && !e->exited) {
            e->exited = true;
            e->status = st;
            e->end_ms = ea_now_ms();
        }
    }
}

/* The parent pid in /proc/<name>/stat, or -1. */
static pid_t stat_ppid(const char *name)
{
    char path[300], buf[512];
    snprintf(path, sizeof(path), "/proc/%s/stat", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t len = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (len <= 0)
        return -1;
    buf[len] = '\0';
    const char *rp = strrchr(buf, ')'); /* comm may hold spaces and ')' */
    char state;
    int ppid;
    return rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 ? (pid_t)ppid : -1;
}

int proc_kill_strays(void)
{
    /* /proc, not task/<tid>/children: an orphan may be adopted by any thread of ours, and the
     * stat's ppid names the process */
    DIR *d = opendir("/proc");
    if (!d)
        return -errno;
    pid_t self = getpid();
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9' || stat_ppid(e->d_name) != self)
            continue;
        pid_t pid = (pid_t)atoi(e->d_name);
        if (table_find(pid))
            continue;
        n += kill(pid, SIGKILL) == 0;
    }
    closedir(d);
    return n;
}

int proc_kill_strays_until(int64_t deadline_ms)
{
    for (;;) {
        proc_reap();
        if (proc_kill_strays() <= 0)
            return 0;
        if (tab.sigfd < 0 || ea_timeout_until(deadline_ms) == 0)
            return -ETIMEDOUT;
        struct pollfd pfd = {.fd = tab.sigfd, .events = POLLIN};
        ea_wait_fds(&pfd, 1, deadline_ms);
    }
}

int proc_exit_status(pid_t pid, int *ret_status, int64_t *ret_end_ms)
{
    const struct proc_entry *e = table_find(pid);
    if (!e)
        return -ESRCH;
    if (!e->exited)
        return 0;
    *ret_status = e->status;
    if (ret_end_ms)
        *ret_end_ms = e->end_ms;
    return 1;
}
