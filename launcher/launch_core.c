// SPDX-License-Identifier: Apache-2.0
/*
 * launcher/launch_core: see launch_core.h. The lifecycle every launcher shares: a record is made
 * (launch_core_new), joins the core once its spawn succeeded (launch_core_add), may be stopped
 * (SIGTERM now, SIGKILL at its deadline), ends (launch_core_exit, from the implementation's
 * reap), is reported once by dispatch, and is freed by release — or quietly, when it was released
 * while running.
 */
#include "launch_core.h"

#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ea_time.h"
#include "output.h"

void launch_core_init(struct launch_core *c, const struct launcher_ops *lops,
                      const struct launch_core_ops *ops)
{
    *c = (struct launch_core){.base.ops = lops, .ops = ops, .fd = -1, .tfd = -1};
}

int launch_core_watch(struct launch_core *c, int fd, void *ptr)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ptr};
    return fd < 0 || epoll_ctl(c->fd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

int launch_core_open(struct launch_core *c, int sigfd, struct ea_error *err)
{
    int r = 0;
    c->fd = epoll_create1(EPOLL_CLOEXEC);
    c->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (c->fd < 0 || c->tfd < 0 || (r = launch_core_watch(c, sigfd, NULL)) < 0 ||
        (r = launch_core_watch(c, c->tfd, NULL)) < 0)
        return ea_errorf(err, r < 0 ? r : -errno, "cannot set up the launcher's fds: %s",
                         strerror(r < 0 ? -r : errno));
    return 0;
}

static int64_t now_ms(struct launch_core *c)
{
    return c->ops->now ? c->ops->now(c) : ea_now_ms();
}

static void proc_free(struct launch_proc *p)
{
    if (p->core->ops->free)
        p->core->ops->free(p);
    free(p->impl);
    free(p->tail);
    free(p->start_error);
    free(p);
}

void launch_core_fini(struct launch_core *c)
{
    for (size_t i = 0; i < c->n; i++)
        proc_free(c->v[i]);
    free(c->v);
    c->v = NULL;
    c->n = c->cap = 0;
    if (c->tfd >= 0)
        close(c->tfd);
    if (c->fd >= 0)
        close(c->fd);
    c->fd = c->tfd = -1;
}

static void arm(struct launch_core *c);

static int proc_new(struct launch_core *c, const struct launch_spec *spec, struct launch_proc **ret,
                    struct ea_error *err)
{
    size_t impl_size = c->ops->impl_size;
    if (!spec->argv || !spec->argv[0])
        return ea_errorf(err, -EINVAL, "no program to start");
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        struct launch_proc **v = realloc(c->v, cap * sizeof(*v));
        if (!v)
            return ea_errorf(err, -ENOMEM, "out of memory");
        c->v = v;
        c->cap = cap;
    }
    struct launch_proc *p = calloc(1, sizeof(*p));
    if (!p || !(p->impl = calloc(1, impl_size ? impl_size : 1))) {
        free(p);
        return ea_errorf(err, -ENOMEM, "out of memory");
    }
    p->core = c;
    p->kill_at = -1;
    p->start_by = -1;
    snprintf(p->prog, sizeof(p->prog), "%s", spec->argv[0]);
    snprintf(p->label, sizeof(p->label), "%s", spec->label ? spec->label : "");
    if (spec->stderr_tail) {
        p->tail_cap = spec->stderr_tail < LAUNCH_TAIL_MAX ? spec->stderr_tail : LAUNCH_TAIL_MAX;
        if (!(p->tail = calloc(1, p->tail_cap + 1))) {
            free(p->impl);
            free(p);
            return ea_errorf(err, -ENOMEM, "out of memory");
        }
    }
    *ret = p;
    return 0;
}

int launch_core_op_start(struct launcher *l, const struct launch_spec *spec,
                         struct launch_proc **ret, struct ea_error *err)
{
    struct launch_core *c = (struct launch_core *)l;
    struct launch_proc *p = NULL;
    int r = proc_new(c, spec, &p, err);
    if (r < 0)
        return r;
    c->v[c->n++] = p; /* proc_new reserved the room */
    if ((r = c->ops->spawn(p, spec, err)) < 0) {
        if (!p->released) /* else: launch_core_drop(), it may still start */
            launch_core_free(p);
        return r;
    }
    if (!spec->label)
        snprintf(p->label, sizeof(p->label), "%d", (int)p->pid);
    arm(c); /* its start deadline */
    *ret = p;
    return 0;
}

void launch_core_free(struct launch_proc *p)
{
    struct launch_core *c = p->core;
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i] == p) {
            memmove(&c->v[i], &c->v[i + 1], (c->n - i - 1) * sizeof(*c->v));
            c->n--;
            break;
        }
    proc_free(p);
}

void launch_core_tail(struct launch_proc *p, const char *data, size_t n)
{
    launch_tail_keep(p->tail, p->tail_cap, &p->tail_len, data, n);
}

void launch_core_exit(struct launch_proc *p, int exit_code, int term_signal, int64_t end_ms)
{
    if (p->exited)
        return;
    p->exited = true;
    p->exit_code = p->start_error ? p->start_code : exit_code;
    p->term_signal = p->start_error ? 0 : term_signal;
    p->end_ms = end_ms;
    p->kill_at = -1;
    p->starting = false;
}

void launch_core_starting(struct launch_proc *p, int64_t start_by)
{
    p->starting = true;
    p->start_by = start_by;
}

void launch_core_started(struct launch_proc *p)
{
    p->starting = false;
    p->start_by = -1;
}

void launch_core_start_failed(struct launch_proc *p, int code, const char *fmt, ...)
{
    if (p->start_error || p->exited)
        return;
    p->starting = false;
    p->start_by = -1;
    p->start_code = code == -ENOENT ? 127 : 126;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&p->start_error, fmt, ap) < 0)
        p->start_error = NULL;
    va_end(ap);
    if (!p->start_error)
        p->start_error = strdup("the process did not start");
    if (!p->start_error)
        p->start_code = 0; /* no memory: an ordinary exit then */
}

bool launch_core_start_overdue(const struct launch_proc *p, int64_t now_ms)
{
    return p->starting && !p->exited && p->start_by >= 0 && now_ms >= p->start_by;
}

void launch_core_exit_status(struct launch_proc *p, int status, int64_t end_ms)
{
    launch_core_exit(p, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                     WIFSIGNALED(status) ? WTERMSIG(status) : 0, end_ms);
}

int64_t launch_core_next_kill(const struct launch_core *c)
{
    int64_t next = -1;
    for (size_t i = 0; i < c->n; i++) {
        const struct launch_proc *p = c->v[i];
        if (!p->exited && p->kill_at >= 0 && (next < 0 || p->kill_at < next))
            next = p->kill_at;
    }
    return next;
}

static int64_t earliest(int64_t a, int64_t b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

int64_t launch_core_next_wake(const struct launch_core *c)
{
    int64_t at = launch_core_next_kill(c);
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i]->starting && !c->v[i]->exited)
            at = earliest(at, c->v[i]->start_by);
    return earliest(at, c->ops->wake ? c->ops->wake((struct launch_core *)c) : -1);
}

/* Wake the event loop when the next SIGKILL or start deadline is due. */
static void arm(struct launch_core *c)
{
    if (c->tfd < 0)
        return;
    int64_t at = launch_core_next_wake(c);
    struct itimerspec its = {0};
    if (at >= 0) {
        its.it_value.tv_sec = at / 1000;
        its.it_value.tv_nsec = (long)(at % 1000) * 1000000L;
    }
    timerfd_settime(c->tfd, at >= 0 ? TFD_TIMER_ABSTIME : 0, &its, NULL);
}

int launch_core_stop(struct launch_proc *p, int64_t grace_ms, int64_t now_ms)
{
    if (p->exited)
        return 0;
    int64_t at = now_ms + (grace_ms > 0 ? grace_ms : 0);
    if (!p->stopping) {
        p->stopping = true;
        p->kill_at = at;
        p->core->ops->signal(p, SIGTERM); /* ESRCH: it is gone, its exit is on its way */
    } else if (p->kill_at >= 0 && at < p->kill_at) {
        p->kill_at = at; /* a second stop may only shorten the grace */
    }
    arm(p->core);
    return 0;
}

void launch_core_poll(struct launch_core *c, int64_t now_ms)
{
    uint64_t ticks;
    while (c->tfd >= 0 && read(c->tfd, &ticks, sizeof(ticks)) > 0)
        ;
    c->ops->reap(c);
    for (size_t i = 0; i < c->n; i++) {
        struct launch_proc *p = c->v[i];
        if (!p->exited && p->kill_at >= 0 && now_ms >= p->kill_at) {
            p->kill_at = -1;
            c->ops->signal(p, SIGKILL);
        }
        if (launch_core_start_overdue(p, now_ms)) {
            launch_core_start_failed(p, -ETIMEDOUT,
                                     "'%s' did not start: its start was not confirmed in time",
                                     p->prog);
            if (c->ops->abort_start)
                c->ops->abort_start(p, now_ms);
            else
                launch_core_exit(p, -1, 0, now_ms);
        }
    }
    arm(c);
}

int launch_core_dispatch(struct launch_core *c, int64_t now_ms, struct launch_exit **ret_exits,
                         size_t *ret_n, struct ea_error *err)
{
    launch_core_poll(c, now_ms);
    size_t n = 0;
    for (size_t i = c->n; i-- > 0;) {
        if (c->v[i]->released && c->v[i]->exited)
            launch_core_free(c->v[i]);
        else
            n += c->v[i]->exited && !c->v[i]->reported;
    }
    struct launch_exit *ex = NULL;
    if (n && !(ex = calloc(n, sizeof(*ex))))
        return ea_errorf(err, -ENOMEM, "out of memory"); /* the exits stay for the next call */
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++) {
        struct launch_proc *p = c->v[i];
        if (!p->exited || p->reported || p->released)
            continue;
        p->reported = true;
        ex[k++] = (struct launch_exit){
            .proc = p,
            .exit_code = p->exit_code,
            .term_signal = p->term_signal,
            .end_ms = p->end_ms,
            .stderr_tail = p->tail,
            .start_error = p->start_error,
        };
    }
    *ret_exits = ex;
    *ret_n = n;
    return 0;
}

void launch_core_drop(struct launch_proc *p, int64_t now_ms)
{
    p->released = true;
    p->kill_at = now_ms;
    arm(p->core);
}

void launch_core_release(struct launch_proc *p)
{
    if (!p)
        return;
    if (!p->exited) {
        /* misuse: kill it; it stays in the core, unreported, until its exit is seen */
        p->core->ops->signal(p, SIGKILL);
        p->released = true;
        return;
    }
    launch_core_free(p);
}

void launch_core_relabel(struct launch_proc *p, const char *label)
{
    snprintf(p->label, sizeof(p->label), "%s", label ? label : "");
}

size_t launch_core_live(const struct launch_core *c)
{
    size_t live = 0;
    for (size_t i = 0; i < c->n; i++)
        live += !c->v[i]->exited;
    return live;
}

void launch_core_signal_all(struct launch_core *c, int sig)
{
    for (size_t i = 0; i < c->n; i++)
        c->ops->signal(c->v[i], sig);
}

void launch_core_op_destroy(struct launcher *l)
{
    if (l)
        ((struct launch_core *)l)->ops->destroy((struct launch_core *)l);
}

int launch_core_op_signal(struct launch_proc *p, int sig)
{
    return p->core->ops->signal(p, sig);
}

int launch_core_op_stop(struct launch_proc *p, int64_t grace_ms)
{
    return launch_core_stop(p, grace_ms, now_ms(p->core));
}

int launch_core_op_fd(struct launcher *l)
{
    return ((struct launch_core *)l)->fd;
}

int launch_core_op_dispatch(struct launcher *l, struct launch_exit **ret_exits, size_t *ret_n,
                            struct ea_error *err)
{
    struct launch_core *c = (struct launch_core *)l;
    return launch_core_dispatch(c, now_ms(c), ret_exits, ret_n, err);
}

pid_t launch_core_op_pid(const struct launch_proc *p)
{
    return p->pid;
}
