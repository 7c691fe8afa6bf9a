// SPDX-License-Identifier: Apache-2.0
/*
 * launcher/local: workers on this host, each behind an exec-guard (guard.c) started through the
 * spawn recipe (proc.c). One epoll fd carries everything dispatch() has to do: the SIGCHLD
 * signalfd, a pidfd per guard (so an exit is seen even if some other thread swallowed the
 * SIGCHLD), the timerfd of pending SIGKILLs, and the pipes of pumped output (tee, stderr tail).
 *
 * Process layout per worker: agent → guard (new session, PDEATHSIG=SIGTERM, subreaper) →
 * worker (own process group W inside that session, PDEATHSIG=SIGKILL). signal()/stop() act on
 * group W, so the guard outlives a SIGKILL of the worker's group and removes what escaped it.
 * The exit reported is the guard's, which mirrors the worker's (code, or the same signal).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ea_time.h"
#include "launcher.h"
#include "output.h"
#include "proc.h"

#define LOCAL_REPORT_FD 3          /* where the guard finds the error pipe */
#define LOCAL_LINE_MAX 16384       /* longer tee'd lines are cut into pieces of this size */
#define LOCAL_PUMP_MAX (1 << 20)   /* bytes read from one stream per dispatch, for fairness */
#define LOCAL_DESTROY_WAIT_MS 3000 /* guards get this long to clean up before being SIGKILLed */
#define LOCAL_FENCE_FD_MIN 10      /* the fence memfd lives above the fds the spawn rearranges */

struct lstream {
    struct launch_proc *p;
    int fd;      /* read end of the worker's stdout/stderr pipe, -1 once closed */
    int file_fd; /* the log file, or -1 */
    int out_fd;  /* the agent's STDOUT_FILENO or STDERR_FILENO */
    bool tee;    /* prefixed lines to out_fd; else raw to out_fd only when there is no file */
    char *tail;  /* the last tail_cap bytes (NUL-terminated), or NULL: launch_exit.stderr_tail */
    size_t tail_cap, tail_len;
    size_t len;
    char buf[LOCAL_LINE_MAX];
};

struct launch_proc {
    struct local *l;
    pid_t pid;  /* the exec-guard: the child we reap */
    pid_t wpid; /* the worker, leader of the process group we signal */
    int pidfd;  /* of the guard; -1 without pidfd_open (SIGCHLD then suffices) */
    char label[64];
    struct lstream *out[2]; /* pumped streams (tee, stderr tail): stdout, stderr */
    int64_t kill_at;        /* monotonic ms of the pending SIGKILL, -1 = none */
    bool stopping, exited, reported;
    bool released; /* released while running: reaped and freed quietly by dispatch/destroy */
    int status;    /* wait status of the guard, once exited */
    int64_t end_ms;
};

struct local {
    struct launcher base;
    char *guard;
    bool table; /* proc_table_open() succeeded */
    int epfd, sigfd, tfd;
    int fence_fd;          /* memfd shared read-only with every guard: one int64_t deadline */
    int64_t *fence;        /* its mapping (MAP_FAILED-safe: NULL when not mapped) */
    char fence_fd_arg[16]; /* "--fence-fd" value */
    char fence_grace_arg[24];
    struct launch_proc **v;
    size_t n, cap;
};

extern const struct launcher_ops launch_local_ops;

/* ---- output ----------------------------------------------------------------------------- */

static void tail_add(struct lstream *s, const char *data, size_t n)
{
    launch_tail_keep(s->tail, s->tail_cap, &s->tail_len, data, n);
}

/* One line (with its '\n', unless it is a cut or the unterminated end): raw to the file, with
 * the "[label]:" prefix to the agent's stream (tee). Without tee, any chunk of bytes: raw to the
 * file, else to the agent's stream. */
static void emit_line(struct lstream *s, char *line, size_t n)
{
    if (s->tail)
        tail_add(s, line, n);
    struct iovec f = {.iov_base = line, .iov_len = n};
    if (s->file_fd >= 0)
        launch_write_all(s->file_fd, &f, 1);
    if (!s->tee) {
        if (s->file_fd < 0)
            launch_write_all(s->out_fd, &f, 1);
        return;
    }
    bool nl = n > 0 && line[n - 1] == '\n';
    struct iovec iov[5] = {
        {.iov_base = "[", .iov_len = 1},
        {.iov_base = s->p->label, .iov_len = strlen(s->p->label)},
        {.iov_base = "]:", .iov_len = 2},
        {.iov_base = line, .iov_len = n},
        {.iov_base = "\n", .iov_len = nl ? 0 : 1},
    };
    launch_write_all(s->out_fd, iov, 5);
}

static void emit_lines(struct lstream *s, bool flush)
{
    size_t start = 0;
    for (size_t i = 0; i < s->len; i++)
        if (s->buf[i] == '\n') {
            emit_line(s, s->buf + start, i + 1 - start);
            start = i + 1;
        }
    if ((start == 0 && s->len == sizeof(s->buf)) || (flush && start < s->len)) {
        emit_line(s, s->buf + start, s->len - start);
        start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
}

static void stream_close(struct local *l, struct lstream *s)
{
    if (s->fd >= 0) {
        emit_lines(s, true);
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, s->fd, NULL);
        close(s->fd);
        s->fd = -1;
    }
}

/* Read what is there (bounded), emit complete lines; close the stream at EOF. */
static void stream_pump(struct local *l, struct lstream *s)
{
    size_t total = 0;
    while (s->fd >= 0 && total < LOCAL_PUMP_MAX) {
        ssize_t n = read(s->fd, s->buf + s->len, sizeof(s->buf) - s->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            stream_close(l, s);
            return;
        }
        total += (size_t)n;
        if (!s->tee) { /* no prefix to add: pass the bytes on as they come (progress bars) */
            emit_line(s, s->buf + s->len, (size_t)n);
            continue;
        }
        s->len += (size_t)n;
        emit_lines(s, false);
    }
}

static void stream_free(struct lstream *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    if (s->file_fd >= 0)
        close(s->file_fd);
    free(s->tail);
    free(s);
}

static int open_log(const char *path, const char *prog, int *ret_fd, struct ea_error *err)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return ea_errorf(err, -errno, "cannot open '%s' for the output of '%s': %s", path, prog,
                         strerror(errno));
    *ret_fd = fd;
    return 0;
}

/* Set up where stream k (0 stdout, 1 stderr) goes; *ret_child_fd is what the worker gets (-1 =
 * inherit the agent's). */
static int output_setup(struct launch_proc *p, const struct launch_spec *spec, int k,
                        int *ret_child_fd, struct ea_error *err)
{
    const char *path = k ? spec->stderr_path : spec->stdout_path;
    size_t tail = k && spec->stderr_tail ? spec->stderr_tail : 0;
    if (!spec->tee && !tail) {
        *ret_child_fd = -1;
        return path ? open_log(path, spec->argv[0], ret_child_fd, err) : 0;
    }
    struct lstream *s = malloc(sizeof(*s));
    if (!s)
        return ea_errorf(err, -ENOMEM, "out of memory");
    *s = (struct lstream){.p = p, .fd = -1, .file_fd = -1, .out_fd = k ? 2 : 1, .tee = spec->tee};
    p->out[k] = s;
    if (tail) {
        s->tail_cap = tail < LAUNCH_TAIL_MAX ? tail : LAUNCH_TAIL_MAX;
        if (!(s->tail = calloc(1, s->tail_cap + 1)))
            return ea_errorf(err, -ENOMEM, "out of memory");
    }
    int r = path ? open_log(path, spec->argv[0], &s->file_fd, err) : 0;
    if (r < 0)
        return r;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return ea_errorf(err, -errno, "cannot create a pipe: %s", strerror(errno));
    s->fd = fds[0];
    fcntl(s->fd, F_SETFL, O_NONBLOCK);
    *ret_child_fd = fds[1];
    return 0;
}

/* ---- processes -------------------------------------------------------------------------- */

static void lp_free(struct launch_proc *p)
{
    for (int k = 0; k < 2; k++)
        stream_free(p->out[k]);
    if (p->pidfd >= 0)
        close(p->pidfd);
    free(p);
}

static void lp_unlink(struct local *l, struct launch_proc *p)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i] == p) {
            memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof(*l->v));
            l->n--;
            break;
        }
    lp_free(p);
}

/* The guard has been reaped: take the rest of its output, let go of its fds. */
static void lp_finish(struct local *l, struct launch_proc *p, int status, int64_t end_ms)
{
    for (int k = 0; k < 2; k++)
        if (p->out[k]) {
            stream_pump(l, p->out[k]);
            stream_close(l, p->out[k]);
        }
    if (p->pidfd >= 0) {
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, p->pidfd, NULL);
        close(p->pidfd);
        p->pidfd = -1;
    }
    proc_table_remove(p->pid);
    p->exited = true;
    p->status = status;
    p->end_ms = end_ms;
}

/* Signal the worker's group, unless its guard has already exited: the guard holds the worker's
 * zombie (so the group id cannot be reused) until just before it exits, and a guard that exited
 * but is not reaped yet no longer vouches for that id. */
static int group_kill(const struct launch_proc *p, int sig)
{
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (p->exited ||
        (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid))
        return -ESRCH;
    return kill(-p->wpid, sig) < 0 ? -errno : 0;
}

static void arm_timer(struct local *l)
{
    int64_t next = -1;
    for (size_t i = 0; i < l->n; i++) {
        const struct launch_proc *p = l->v[i];
        if (!p->exited && p->kill_at >= 0 && (next < 0 || p->kill_at < next))
            next = p->kill_at;
    }
    struct itimerspec its = {0};
    if (next >= 0) {
        its.it_value.tv_sec = next / 1000;
        its.it_value.tv_nsec = (long)(next % 1000) * 1000000L;
    }
    timerfd_settime(l->tfd, next >= 0 ? TFD_TIMER_ABSTIME : 0, &its, NULL);
}

/* Everything dispatch() does except handing out exits: pump ready output, send due SIGKILLs,
 * reap, and finish the processes whose guard has been reaped. */
static void collect(struct local *l)
{
    struct epoll_event ev[64];
    int n = epoll_wait(l->epfd, ev, 64, 0);
    for (int i = 0; i < n; i++)
        if (ev[i].data.ptr)
            stream_pump(l, ev[i].data.ptr);
    uint64_t ticks;
    while (read(l->tfd, &ticks, sizeof(ticks)) > 0)
        ;
    int64_t now = ea_now_ms();
    for (size_t i = 0; i < l->n; i++) {
        struct launch_proc *p = l->v[i];
        if (!p->exited && p->kill_at >= 0 && now >= p->kill_at) {
            group_kill(p, SIGKILL);
            p->kill_at = -1;
        }
    }
    if (proc_reap() > 0)
        proc_kill_strays(); /* what a SIGKILLed guard let go of came to us: it ends here */
    for (size_t i = 0; i < l->n; i++) {
        struct launch_proc *p = l->v[i];
        int st;
        int64_t end;
        if (!p->exited && proc_exit_status(p->pid, &st, &end) == 1)
            lp_finish(l, p, st, end);
    }
    arm_timer(l);
}

static size_t live_count(const struct local *l)
{
    size_t live = 0;
    for (size_t i = 0; i < l->n; i++)
        live += !l->v[i]->exited;
    return live;
}

/* ---- ops -------------------------------------------------------------------------------- */

static void local_destroy(struct launcher *base)
{
    struct local *l = (struct local *)base;
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        group_kill(l->v[i], SIGKILL);
    /* each guard now removes what is left of its worker's tree, then exits */
    int64_t deadline = ea_now_ms() + LOCAL_DESTROY_WAIT_MS;
    while (l->epfd >= 0 && live_count(l) > 0 && ea_timeout_until(deadline) > 0) {
        struct pollfd pfd = {.fd = l->epfd, .events = POLLIN};
        poll(&pfd, 1, ea_timeout_until(deadline));
        collect(l);
    }
    for (size_t i = 0; i < l->n; i++) {
        struct launch_proc *p = l->v[i];
        if (p->exited)
            continue;
        group_kill(p, SIGKILL);
        kill(p->pid, SIGKILL); /* a guard that did not finish in time */
        while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        proc_table_remove(p->pid);
    }
    if (l->table) /* orphans re-parented to us (escaped a killed guard), and theirs in turn */
        proc_kill_strays_until(deadline);
    for (size_t i = 0; i < l->n; i++)
        lp_free(l->v[i]);
    free(l->v);
    if (l->tfd >= 0)
        close(l->tfd);
    if (l->fence)
        munmap(l->fence, sizeof(*l->fence));
    if (l->fence_fd >= 0)
        close(l->fence_fd);
    if (l->epfd >= 0)
        close(l->epfd);
    if (l->table)
        proc_table_close();
    free(l->guard);
    free(l);
}

static int epoll_add(int epfd, int fd, void *ptr)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ptr};
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/*
 * The default middleman: the small libc-only elastic-agent-guard next to the running binary (build
 * tree) or in its libexec directory (installed), else the running binary's own exec-guard
 * subcommand. Exec'ing the agent again would load its ~85 shared libraries for every worker.
 */
static int default_guard(char *buf, size_t size, struct ea_error *err)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n < 0)
        return ea_errorf(err, -errno, "cannot find the running binary: %s", strerror(errno));
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) {
        const char *dirs[] = {"", "/" EA_GUARD_REL_DIR};
        for (size_t i = 0; i < sizeof(dirs) / sizeof(*dirs); i++) {
            int len = snprintf(buf, size, "%.*s%s/elastic-agent-guard", (int)(slash - self), self,
                               dirs[i]);
            if (len > 0 && (size_t)len < size && access(buf, X_OK) == 0)
                return 0;
        }
    }
    snprintf(buf, size, "%s", self);
    return 0;
}

static int resolve_guard(const char *path, char **ret, struct ea_error *err)
{
    char buf[PATH_MAX];
    if (!path) {
        int r = default_guard(buf, sizeof(buf), err);
        if (r < 0)
            return r;
    } else if (!realpath(path, buf)) {
        return ea_errorf(err, -errno, "exec-guard '%s': %s", path, strerror(errno));
    }
    if (access(buf, X_OK) < 0)
        return ea_errorf(err, -errno, "exec-guard '%s': %s", buf, strerror(errno));
    char *s = strdup(buf);
    if (!s)
        return ea_errorf(err, -ENOMEM, "out of memory");
    *ret = s;
    return 0;
}

/* The fence page (see launcher_ops.fence): a memfd of one int64_t, 0 until the first fence(). */
static int fence_setup(struct local *l, int64_t grace_ms, struct ea_error *err)
{
    int fd = (int)syscall(SYS_memfd_create, "elastic-agent-fence", MFD_CLOEXEC);
    if (fd >= 0) {
        l->fence_fd = fcntl(fd, F_DUPFD_CLOEXEC, LOCAL_FENCE_FD_MIN);
        close(fd);
    }
    if (l->fence_fd < 0 || ftruncate(l->fence_fd, sizeof(*l->fence)) < 0)
        return ea_errorf(err, -errno, "cannot create the fence page: %s", strerror(errno));
    void *m = mmap(NULL, sizeof(*l->fence), PROT_READ | PROT_WRITE, MAP_SHARED, l->fence_fd, 0);
    if (m == MAP_FAILED)
        return ea_errorf(err, -errno, "cannot map the fence page: %s", strerror(errno));
    l->fence = m;
    snprintf(l->fence_fd_arg, sizeof(l->fence_fd_arg), "%d", l->fence_fd);
    snprintf(l->fence_grace_arg, sizeof(l->fence_grace_arg), "%lld",
             (long long)(grace_ms > 0 ? grace_ms : 500));
    return 0;
}

static void local_fence(struct launcher *base, int64_t valid_until_ms)
{
    struct local *l = (struct local *)base;
    if (l->fence)
        __atomic_store_n(l->fence, valid_until_ms > 0 ? valid_until_ms : 0, __ATOMIC_RELEASE);
}

static int local_create(const struct launcher_config *cfg, struct launcher **ret,
                        struct ea_error *err)
{
    struct local *l = calloc(1, sizeof(*l));
    if (!l)
        return ea_errorf(err, -ENOMEM, "out of memory");
    l->base.ops = &launch_local_ops;
    l->epfd = l->sigfd = l->tfd = l->fence_fd = -1;
    int r = resolve_guard(cfg->guard_path, &l->guard, err);
    if (r < 0 || (r = fence_setup(l, cfg->fence_grace_ms, err)) < 0 || (r = proc_set_subreaper(err)) < 0 || (r = proc_table_open(&l->sigfd, err)) < 0)
        goto error;
    l->table = true;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (l->epfd < 0 || l->tfd < 0 || (r = epoll_add(l->epfd, l->sigfd, NULL)) < 0 ||
        (r = epoll_add(l->epfd, l->tfd, NULL)) < 0) {
        r = ea_errorf(err, r < 0 ? r : -errno, "cannot set up the launcher's fds: %s",
                      strerror(r < 0 ? -r : errno));
        goto error;
    }
    *ret = &l->base;
    return 0;
error:
    local_destroy(&l->base);
    return r;
}

/* After a successful spawn, something failed: kill the worker's tree and reap the guard. */
static void abandon(struct launch_proc *p)
{
    group_kill(p, SIGKILL);
    while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

static int local_start(struct launcher *base, const struct launch_spec *spec,
                       struct launch_proc **ret, struct ea_error *err)
{
    struct local *l = (struct local *)base;
    if (!spec->argv || !spec->argv[0])
        return ea_errorf(err, -EINVAL, "no program to start");
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct launch_proc **v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return ea_errorf(err, -ENOMEM, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    size_t argc = 0;
    while (spec->argv[argc])
        argc++;
    const char **gargv = calloc(argc + 12, sizeof(*gargv));
    struct launch_proc *p = calloc(1, sizeof(*p));
    if (!gargv || !p) {
        free(gargv);
        free(p);
        return ea_errorf(err, -ENOMEM, "out of memory");
    }
    p->l = l;
    p->pidfd = -1;
    p->kill_at = -1;
    snprintf(p->label, sizeof(p->label), "%s", spec->label ? spec->label : "");
    const char *head[] = {l->guard,        "exec-guard",      "--report-fd",       "3",
                          "--fence-fd",    l->fence_fd_arg,   "--fence-grace-ms", l->fence_grace_arg};
    _Static_assert(LOCAL_REPORT_FD == 3, "the guard's argv says 3");
    size_t ga = sizeof(head) / sizeof(*head);
    memcpy(gargv, head, sizeof(head));
    char pass_arg[16];
    bool pass = spec->pass_fd >= 3;
    if (pass && (spec->pass_fd == LOCAL_REPORT_FD || spec->pass_fd == l->fence_fd)) {
        free(gargv);
        free(p);
        return ea_errorf(err, -EINVAL, "fd %d cannot be passed: the guard uses it",
                         spec->pass_fd);
    }
    if (pass) { /* the guard hands it on to the worker and closes its own copy */
        snprintf(pass_arg, sizeof(pass_arg), "%d", spec->pass_fd);
        gargv[ga++] = "--pass-fd";
        gargv[ga++] = pass_arg;
    }
    gargv[ga++] = "--";
    memcpy(gargv + ga, spec->argv, argc * sizeof(*gargv));

    int child_fd[2] = {-1, -1};
    int r = output_setup(p, spec, 0, &child_fd[0], err);
    if (r >= 0)
        r = output_setup(p, spec, 1, &child_fd[1], err);
    if (r >= 0) {
        struct proc_spawn_opts o = {
            .argv = gargv,
            .envp = spec->envp,
            .cwd = spec->cwd,
            .stdin_fd = -1,
            .stdout_fd = child_fd[0],
            .stderr_fd = child_fd[1],
            .flags = PROC_NEW_SESSION | PROC_DEATHSIG | PROC_CLOSE_FDS,
            .deathsig = SIGTERM, /* catchable: the guard must live to kill its worker's tree */
            .report_fd = LOCAL_REPORT_FD,
            .target = spec->argv[0],
            .keep_fd = l->fence_fd,
            .keep_fd2 = pass ? spec->pass_fd : -1,
        };
        r = proc_spawn(&o, &p->pid, &p->wpid, err);
    }
    for (int k = 0; k < 2; k++)
        if (child_fd[k] >= 0)
            close(child_fd[k]);
    free(gargv);
    if (r < 0) {
        lp_free(p);
        return r;
    }
    if ((r = proc_table_add(p->pid)) < 0) {
        abandon(p);
        lp_free(p);
        return ea_errorf(err, r, "out of memory");
    }
    p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0); /* CLOEXEC by definition */
    if (p->pidfd >= 0)
        r = epoll_add(l->epfd, p->pidfd, NULL);
    for (int k = 0; k < 2 && r >= 0; k++)
        if (p->out[k])
            r = epoll_add(l->epfd, p->out[k]->fd, p->out[k]);
    if (r < 0) {
        abandon(p);
        proc_table_remove(p->pid);
        lp_free(p);
        return ea_errorf(err, r, "cannot watch '%s': %s", spec->argv[0], strerror(-r));
    }
    if (!spec->label)
        snprintf(p->label, sizeof(p->label), "%d", (int)p->wpid);
    l->v[l->n++] = p;
    *ret = p;
    return 0;
}

static int local_signal(struct launch_proc *p, int sig)
{
    return group_kill(p, sig);
}

static int local_stop(struct launch_proc *p, int64_t grace_ms)
{
    if (p->exited)
        return 0;
    int64_t at = ea_now_ms() + (grace_ms > 0 ? grace_ms : 0);
    if (!p->stopping) {
        p->stopping = true;
        p->kill_at = at;
        group_kill(p, SIGTERM); /* ESRCH: the worker is gone, the guard is finishing */
    } else if (p->kill_at >= 0 && at < p->kill_at) {
        p->kill_at = at; /* a second stop may only shorten the grace */
    }
    arm_timer(p->l);
    return 0;
}

static int local_fd(struct launcher *base)
{
    return ((struct local *)base)->epfd;
}

static int local_dispatch(struct launcher *base, struct launch_exit **ret_exits, size_t *ret_n,
                          struct ea_error *err)
{
    struct local *l = (struct local *)base;
    collect(l);
    size_t n = 0;
    for (size_t i = l->n; i-- > 0;) {
        if (l->v[i]->released && l->v[i]->exited)
            lp_unlink(l, l->v[i]);
        else
            n += l->v[i]->exited && !l->v[i]->reported;
    }
    struct launch_exit *ex = NULL;
    if (n && !(ex = calloc(n, sizeof(*ex))))
        return ea_errorf(err, -ENOMEM, "out of memory"); /* the exits stay for the next call */
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++) {
        struct launch_proc *p = l->v[i];
        if (!p->exited || p->reported || p->released)
            continue;
        p->reported = true;
        ex[k++] = (struct launch_exit){
            .proc = p,
            .exit_code = WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -1,
            .term_signal = WIFSIGNALED(p->status) ? WTERMSIG(p->status) : 0,
            .end_ms = p->end_ms,
            .stderr_tail = p->out[1] ? p->out[1]->tail : NULL,
        };
    }
    *ret_exits = ex;
    *ret_n = n;
    return 0;
}

static pid_t local_pid(const struct launch_proc *p)
{
    return p->wpid;
}

static void local_relabel(struct launch_proc *p, const char *label)
{
    snprintf(p->label, sizeof(p->label), "%s", label ? label : "");
}

static void local_release(struct launch_proc *p)
{
    if (!p)
        return;
    if (!p->exited) {
        /* misuse: kill it; it stays in the list, unreported, until its guard is reaped */
        group_kill(p, SIGKILL);
        p->released = true;
        return;
    }
    lp_unlink(p->l, p);
}

const struct launcher_ops launch_local_ops = {
    .name = "local",
    .create = local_create,
    .destroy = local_destroy,
    .start = local_start,
    .signal = local_signal,
    .stop = local_stop,
    .fd = local_fd,
    .dispatch = local_dispatch,
    .pid = local_pid,
    .release = local_release,
    .fence = local_fence,
    .relabel = local_relabel,
};
