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
 *
 * start() never waits: the guard's report pipe (proc_spawn_begin) is watched on the same epoll
 * fd, and the record is "starting" until the guard reported its worker's exec (or a failure, or
 * nothing by PROC_START_TIMEOUT_MS: the guard is then killed, and its exit reported as a start
 * failure).
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
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ea_loop.h"
#include "ea_time.h"
#include "launch_core.h"
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
    bool err;    /* stderr: kept in the record's tail (launch_exit.stderr_tail) */
    size_t len;
    char buf[LOCAL_LINE_MAX];
};

/* The local part of a record (launch_proc.impl); launch_proc.pid is the worker, leader of the
 * process group we signal. */
struct lproc {
    pid_t gpid;             /* the exec-guard: the child we reap */
    struct proc_start st;   /* its start, while st.fd >= 0 */
    int pidfd;              /* of the guard; -1 without pidfd_open (SIGCHLD then suffices) */
    struct lstream *out[2]; /* pumped streams (tee, stderr tail): stdout, stderr */
};

struct local {
    struct launch_core core; /* first: a struct launcher * is a struct local * */
    char *guard;
    bool table; /* proc_table_open() succeeded */
    int sigfd;
    int fence_fd;          /* memfd shared read-only with every guard: one int64_t deadline */
    int64_t *fence;        /* its mapping (MAP_FAILED-safe: NULL when not mapped) */
    char fence_fd_arg[16]; /* "--fence-fd" value */
    char fence_grace_arg[24];
};

extern const struct launcher_ops launch_local_ops;

/* ---- output ----------------------------------------------------------------------------- */

/* One line (with its '\n', unless it is a cut or the unterminated end): raw to the file, with
 * the "[label]:" prefix to the agent's stream (tee). Without tee, any chunk of bytes: raw to the
 * file, else to the agent's stream. */
static void emit_line(struct lstream *s, char *line, size_t n)
{
    if (s->err)
        launch_core_tail(s->p, line, n);
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
        epoll_ctl(l->core.fd, EPOLL_CTL_DEL, s->fd, NULL);
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
    if (!spec->tee && !(k && spec->stderr_tail)) {
        *ret_child_fd = -1;
        return path ? open_log(path, spec->argv[0], ret_child_fd, err) : 0;
    }
    struct lstream *s = malloc(sizeof(*s));
    if (!s)
        return ea_errorf(err, -ENOMEM, "out of memory");
    *s = (struct lstream){
        .p = p, .fd = -1, .file_fd = -1, .out_fd = k ? 2 : 1, .tee = spec->tee, .err = k == 1};
    ((struct lproc *)p->impl)->out[k] = s;
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

static struct lproc *lp(const struct launch_proc *p)
{
    return p->impl;
}

static void lp_free(struct launch_proc *p)
{
    for (int k = 0; k < 2; k++)
        stream_free(lp(p)->out[k]);
    if (lp(p)->pidfd >= 0)
        close(lp(p)->pidfd);
    proc_spawn_end(&lp(p)->st);
}

/* Take in what the guard reported about its start (non-blocking): confirmed (the worker's pid),
 * failed (the guard is SIGKILLed; its exit, when reaped, reports the start error), or not yet.
 * `ended`: the guard has been reaped, so nothing more will come. */
static void start_feed(struct local *l, struct launch_proc *p, bool ended)
{
    struct lproc *x = lp(p);
    if (x->st.fd < 0)
        return;
    int fd = x->st.fd;
    struct ea_error err = {0};
    int r = proc_spawn_feed(&x->st, &err);
    if (r == 0 && !ended)
        return;
    if (x->st.fd >= 0) {
        proc_spawn_end(&x->st);
        r = ea_errorf(&err, -EPROTO, "'%s' ended without starting '%s'", x->st.prog, p->prog);
    }
    epoll_ctl(l->core.fd, EPOLL_CTL_DEL, fd, NULL); /* closed already: harmless */
    if (r > 0) {
        p->pid = x->st.target;
        launch_core_started(p);
    } else if (p->stopping) {
        launch_core_started(p); /* stopped before it started: its guard's exit, as it is */
    } else {
        launch_core_start_failed(p, r, "%s", err.msg);
    }
}

/* The confirmation is overdue (the core recorded why): the guard goes, its exit reports it. */
static void start_abort(struct launch_proc *p, int64_t now_ms)
{
    (void)now_ms;
    struct local *l = (struct local *)p->core;
    if (lp(p)->st.fd >= 0) {
        epoll_ctl(l->core.fd, EPOLL_CTL_DEL, lp(p)->st.fd, NULL);
        proc_spawn_end(&lp(p)->st);
    }
    kill(lp(p)->gpid, SIGKILL); /* its worker, if any, has PDEATHSIG=SIGKILL */
}

/* The guard has been reaped: take the rest of its output, let go of its fds. */
static void lp_finish(struct local *l, struct launch_proc *p, int status, int64_t end_ms)
{
    struct lproc *x = lp(p);
    start_feed(l, p, true);
    for (int k = 0; k < 2; k++)
        if (x->out[k]) {
            stream_pump(l, x->out[k]);
            stream_close(l, x->out[k]);
        }
    if (x->pidfd >= 0) {
        epoll_ctl(l->core.fd, EPOLL_CTL_DEL, x->pidfd, NULL);
        close(x->pidfd);
        x->pidfd = -1;
    }
    proc_table_remove(x->gpid);
    launch_core_exit_status(p, status, end_ms);
}

/* Signal the worker's group, unless its guard has already exited: the guard holds the worker's
 * zombie (so the group id cannot be reused) until just before it exits, and a guard that exited
 * but is not reaped yet no longer vouches for that id. */
static int group_kill(struct launch_proc *p, int sig)
{
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    if (!p->exited && p->pid <= 0) /* starting: no worker group known yet, its guard is there */
        return kill(lp(p)->gpid, sig) < 0 ? -errno : 0;
    if (p->exited ||
        (waitid(P_PID, (id_t)lp(p)->gpid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid))
        return -ESRCH;
    return kill(-p->pid, sig) < 0 ? -errno : 0;
}

/* Pump ready output, reap, and finish the processes whose guard has been reaped. */
static void local_reap(struct launch_core *c)
{
    struct local *l = (struct local *)c;
    /* every open stream, read until it would block (bounded per stream): no need to ask the
     * epoll fd which ones are ready, and nothing here waits */
    for (size_t i = 0; i < c->n; i++)
        for (int k = 0; k < 2; k++)
            if (lp(c->v[i])->out[k] && lp(c->v[i])->out[k]->fd >= 0)
                stream_pump(l, lp(c->v[i])->out[k]);
    for (size_t i = 0; i < c->n; i++)
        start_feed(l, c->v[i], false);
    if (proc_reap() > 0)
        proc_kill_strays(); /* what a SIGKILLed guard let go of came to us: it ends here */
    for (size_t i = 0; i < c->n; i++) {
        struct launch_proc *p = c->v[i];
        int st;
        int64_t end;
        if (!p->exited && proc_exit_status(lp(p)->gpid, &st, &end) == 1)
            lp_finish(l, p, st, end);
    }
}

static void local_destroy(struct launch_core *c)
{
    struct local *l = (struct local *)c;
    launch_core_signal_all(c, SIGKILL);
    /* each guard now removes what is left of its worker's tree, then exits */
    int64_t deadline = ea_now_ms() + LOCAL_DESTROY_WAIT_MS;
    while (c->fd >= 0 && launch_core_live(c) > 0 && ea_timeout_until(deadline) > 0) {
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        ea_wait_fds(&pfd, 1, deadline);
        launch_core_poll(c, ea_now_ms());
    }
    for (size_t i = 0; i < c->n; i++) {
        struct launch_proc *p = c->v[i];
        if (p->exited)
            continue;
        group_kill(p, SIGKILL);
        kill(lp(p)->gpid, SIGKILL); /* a guard that did not finish in time */
        while (waitpid(lp(p)->gpid, NULL, 0) < 0 && errno == EINTR)
            ;
        proc_table_remove(lp(p)->gpid);
    }
    if (l->table) /* orphans re-parented to us (escaped a killed guard), and theirs in turn */
        proc_kill_strays_until(deadline);
    launch_core_fini(c);
    if (l->fence)
        munmap(l->fence, sizeof(*l->fence));
    if (l->fence_fd >= 0)
        close(l->fence_fd);
    if (l->table)
        proc_table_close();
    free(l->guard);
    free(l);
}

/* ---- ops -------------------------------------------------------------------------------- */

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

/* After a successful spawn, something failed: kill the guard (its worker, if any, follows it:
 * PDEATHSIG) and reap it. */
static void abandon(struct launch_proc *p)
{
    proc_spawn_end(&lp(p)->st);
    kill(lp(p)->gpid, SIGKILL);
    while (waitpid(lp(p)->gpid, NULL, 0) < 0 && errno == EINTR)
        ;
}

static int local_spawn(struct launch_proc *p, const struct launch_spec *spec,
                       struct ea_error *err)
{
    struct local *l = (struct local *)p->core;
    struct lproc *x = lp(p);
    x->pidfd = -1;
    x->st.fd = -1;
    size_t argc = 0;
    while (spec->argv[argc])
        argc++;
    const char **gargv = calloc(argc + 12, sizeof(*gargv));
    if (!gargv)
        return ea_errorf(err, -ENOMEM, "out of memory");
    const char *head[] = {l->guard,        "exec-guard",      "--report-fd",       "3",
                          "--fence-fd",    l->fence_fd_arg,   "--fence-grace-ms", l->fence_grace_arg};
    _Static_assert(LOCAL_REPORT_FD == 3, "the guard's argv says 3");
    size_t ga = sizeof(head) / sizeof(*head);
    memcpy(gargv, head, sizeof(head));
    char pass_arg[16];
    bool pass = spec->pass_fd >= 3;
    if (pass && (spec->pass_fd == LOCAL_REPORT_FD || spec->pass_fd == l->fence_fd)) {
        free(gargv);
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
        r = proc_spawn_begin(&o, &x->st, err);
        x->gpid = x->st.pid;
    }
    for (int k = 0; k < 2; k++)
        if (child_fd[k] >= 0)
            close(child_fd[k]);
    free(gargv);
    if (r < 0)
        return r;
    if ((r = proc_table_add(x->gpid)) < 0) {
        abandon(p);
        return ea_errorf(err, r, "out of memory");
    }
    x->pidfd = (int)syscall(SYS_pidfd_open, x->gpid, 0); /* CLOEXEC by definition */
    if (x->pidfd >= 0)
        r = launch_core_watch(&l->core, x->pidfd, NULL);
    if (r >= 0)
        r = launch_core_watch(&l->core, x->st.fd, NULL); /* start_feed reads it */
    for (int k = 0; k < 2 && r >= 0; k++)
        if (x->out[k])
            r = launch_core_watch(&l->core, x->out[k]->fd, x->out[k]);
    if (r < 0) {
        abandon(p);
        proc_table_remove(x->gpid);
        return ea_errorf(err, r, "cannot watch '%s': %s", spec->argv[0], strerror(-r));
    }
    launch_core_starting(p, ea_now_ms() + PROC_START_TIMEOUT_MS);
    return 0;
}

static const struct launch_core_ops local_core_ops = {
    .impl_size = sizeof(struct lproc), .spawn = local_spawn, .signal = group_kill,
    .reap = local_reap, .destroy = local_destroy, .free = lp_free, .abort_start = start_abort};

static int local_create(const struct launcher_config *cfg, struct launcher **ret,
                        struct ea_error *err)
{
    struct local *l = calloc(1, sizeof(*l));
    if (!l)
        return ea_errorf(err, -ENOMEM, "out of memory");
    launch_core_init(&l->core, &launch_local_ops, &local_core_ops);
    l->sigfd = l->fence_fd = -1;
    int r = resolve_guard(cfg->guard_path, &l->guard, err);
    if (r < 0 || (r = fence_setup(l, cfg->fence_grace_ms, err)) < 0 || (r = proc_set_subreaper(err)) < 0 || (r = proc_table_open(&l->sigfd, err)) < 0)
        goto error;
    l->table = true;
    if ((r = launch_core_open(&l->core, l->sigfd, err)) < 0)
        goto error;
    *ret = &l->core.base;
    return 0;
error:
    local_destroy(&l->core);
    return r;
}

const struct launcher_ops launch_local_ops = {
    .name = "local", .create = local_create, .fence = local_fence, .relabel = launch_core_relabel,
    LAUNCH_CORE_OPS};
