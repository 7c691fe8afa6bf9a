// SPDX-License-Identifier: Apache-2.0
/*
 * launcher/fake: see fake.h. Its ops for the core: spawn records the request and hands out a
 * fake pid, signal records the signal (a SIGKILL also ends the worker, at once), reap turns the
 * exits the test decided into launch_core_exit() at the fake clock, now is that clock, and there
 * is no timer (the test calls dispatch()). The launcher's fd is an eventfd raised whenever the
 * test makes something happen.
 */
#include "fake.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "launch_core.h"

#define FAKE_PID_BASE 100000 /* fake pids: far from the small numbers a test might compare to */

struct fake {
    struct launch_core core; /* first: a struct launcher * is a struct fake * */
    int64_t now;
    int fail_next;
    int64_t hold_next; /* the next start stays starting, until this long on the fake clock */
    bool holding;
    size_t started;
    int64_t fence;
};

/* The fake part of a record. */
struct fproc {
    char **argv;
    char **envp; /* its environment, copied: a test reads e.g. ELASTIC_HEARTBEAT_FILE */
    int sigs[LAUNCH_FAKE_SIGNALS_MAX];
    size_t nsig;
    bool ending; /* the test (or a SIGKILL) ended it: reported by the next reap */
    int code, sig;
};

extern const struct launcher_ops launch_fake_ops;

static struct fproc *fp(const struct launch_proc *p)
{
    return p->impl;
}

static int64_t fake_now(struct launch_core *c)
{
    return ((struct fake *)c)->now;
}

static void raise_event(struct fake *f)
{
    uint64_t one = 1;
    if (write(f->core.fd, &one, sizeof(one)) < 0) {
        /* EAGAIN: already raised */
    }
}

/* ---- core ops ----------------------------------------------------------------------------- */

static int fake_signal(struct launch_proc *p, int sig)
{
    struct fproc *x = fp(p);
    if (p->exited || x->ending)
        return -ESRCH;
    if (x->nsig < LAUNCH_FAKE_SIGNALS_MAX)
        x->sigs[x->nsig] = sig;
    x->nsig++;
    if (sig == SIGKILL) /* cannot be caught: the worker ends at once */
        launch_core_exit(p, -1, SIGKILL, ((struct fake *)p->core)->now);
    return 0;
}

static void fake_reap(struct launch_core *c)
{
    struct fake *f = (struct fake *)c;
    uint64_t ticks;
    while (read(f->core.fd, &ticks, sizeof(ticks)) > 0)
        ;
    for (size_t i = 0; i < c->n; i++) {
        struct launch_proc *p = c->v[i];
        if (!p->exited && fp(p)->ending)
            launch_core_exit(p, fp(p)->code, fp(p)->sig, f->now);
    }
}

static void fake_free(struct launch_proc *p)
{
    for (size_t i = 0; fp(p)->argv && fp(p)->argv[i]; i++)
        free(fp(p)->argv[i]);
    free(fp(p)->argv);
    for (size_t i = 0; fp(p)->envp && fp(p)->envp[i]; i++)
        free(fp(p)->envp[i]);
    free(fp(p)->envp);
}

static void fake_destroy(struct launch_core *c)
{
    launch_core_fini(c); /* closes the eventfd */
    free(c);
}

static const struct launch_core_ops fake_core_ops;

/* ---- launcher ops ------------------------------------------------------------------------- */

static int fake_create(const struct launcher_config *cfg, struct launcher **ret,
                       struct ea_error *err)
{
    (void)cfg;
    struct fake *f = calloc(1, sizeof(*f));
    if (!f)
        return ea_errorf(err, -ENOMEM, "out of memory");
    launch_core_init(&f->core, &launch_fake_ops, &fake_core_ops);
    if ((f->core.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        int r = ea_errorf(err, -errno, "cannot set up the launcher's fds: %s", strerror(errno));
        free(f);
        return r;
    }
    *ret = &f->core.base;
    return 0;
}

static int copy_strv(char ***ret, const char *const *argv)
{
    size_t n = 0;
    while (argv && argv[n])
        n++;
    if (!(*ret = calloc(n + 1, sizeof(**ret))))
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (!((*ret)[i] = strdup(argv[i])))
            return -ENOMEM;
    return 0;
}

static int fake_spawn(struct launch_proc *p, const struct launch_spec *spec, struct ea_error *err)
{
    struct fake *f = (struct fake *)p->core;
    if (copy_strv(&fp(p)->argv, spec->argv) < 0 || copy_strv(&fp(p)->envp, spec->envp) < 0)
        return ea_errorf(err, -ENOMEM, "out of memory");
    if (f->fail_next < 0) { /* like an exec failure: an exit the next dispatch reports */
        launch_core_start_failed(p, f->fail_next, "cannot run '%s': %s", spec->argv[0],
                                 strerror(-f->fail_next));
        f->fail_next = 0;
        fp(p)->ending = true;
        raise_event(f);
        return 0;
    }
    if (f->holding) { /* like a connection being set up: confirmed by the test, or overdue */
        f->holding = false;
        launch_core_starting(p, f->hold_next >= 0 ? f->now + f->hold_next : -1);
        return 0;
    }
    p->pid = (pid_t)(FAKE_PID_BASE + f->started++);
    return 0;
}

static void fake_fence(struct launcher *base, int64_t valid_until_ms)
{
    ((struct fake *)base)->fence = valid_until_ms > 0 ? valid_until_ms : 0;
}

static const struct launch_core_ops fake_core_ops = {
    .impl_size = sizeof(struct fproc), .spawn = fake_spawn, .signal = fake_signal,
    .reap = fake_reap, .now = fake_now, .destroy = fake_destroy, .free = fake_free};

const struct launcher_ops launch_fake_ops = {
    .name = "fake",
    .create = fake_create,
    LAUNCH_CORE_OPS,
    .fence = fake_fence,
    .relabel = launch_core_relabel,
};

/* ---- what the test drives ----------------------------------------------------------------- */

void launch_fake_set_now(struct launcher *l, int64_t now_ms)
{
    struct fake *f = (struct fake *)l;
    f->now = now_ms;
    raise_event(f);
}

int launch_fake_exit(struct launcher *l, struct launch_proc *p, int exit_code, int term_signal)
{
    struct fproc *x = fp(p);
    if (p->exited || x->ending)
        return -ESRCH;
    x->ending = true;
    x->code = term_signal > 0 ? -1 : exit_code & 255;
    x->sig = term_signal > 0 ? term_signal : 0;
    raise_event((struct fake *)l);
    return 0;
}

void launch_fake_fail_next(struct launcher *l, int code)
{
    ((struct fake *)l)->fail_next = code < 0 ? code : 0;
}

void launch_fake_hold_next(struct launcher *l, int64_t timeout_ms)
{
    ((struct fake *)l)->holding = true;
    ((struct fake *)l)->hold_next = timeout_ms;
}

int launch_fake_confirm(struct launcher *l, struct launch_proc *p)
{
    struct fake *f = (struct fake *)l;
    if (!p->starting || p->exited)
        return -ESRCH;
    p->pid = (pid_t)(FAKE_PID_BASE + f->started++);
    launch_core_started(p);
    raise_event(f);
    return 0;
}

bool launch_fake_starting(const struct launch_proc *p)
{
    return p->starting && !p->exited;
}

void launch_fake_stderr(struct launch_proc *p, const char *data)
{
    launch_core_tail(p, data, strlen(data));
}

size_t launch_fake_started(const struct launcher *l)
{
    return ((const struct fake *)l)->started;
}

const char *launch_fake_env(const struct launch_proc *p, const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; fp(p)->envp && fp(p)->envp[i]; i++)
        if (strncmp(fp(p)->envp[i], name, len) == 0 && fp(p)->envp[i][len] == '=')
            return fp(p)->envp[i] + len + 1;
    return NULL;
}

const char *const *launch_fake_argv(const struct launch_proc *p)
{
    return (const char *const *)fp(p)->argv;
}

const char *launch_fake_label(const struct launch_proc *p)
{
    return p->label;
}

size_t launch_fake_signals(const struct launch_proc *p, const int **ret_sigs)
{
    *ret_sigs = fp(p)->sigs;
    return fp(p)->nsig;
}

int64_t launch_fake_fence(const struct launcher *l)
{
    return ((const struct fake *)l)->fence;
}

struct launch_proc *launch_fake_proc(struct launcher *l, size_t i)
{
    struct launch_core *c = (struct launch_core *)l;
    return i < c->n ? c->v[i] : NULL;
}

bool launch_fake_ended(const struct launch_proc *p)
{
    return p->exited || fp(p)->ending;
}

int64_t launch_fake_next_kill(const struct launcher *l)
{
    return launch_core_next_wake((const struct launch_core *)l);
}
