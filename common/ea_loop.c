// SPDX-License-Identifier: Apache-2.0
/* ea_loop: steps, sources and a clock (see ea_loop.h). */
#include "ea_loop.h"

#include <errno.h>
#include <stdlib.h>

#include "ea_time.h"

struct reg_step {
    const struct ea_loop_step *s;
    void *ctx;
};

struct reg_source {
    const struct ea_loop_source *s;
    void *ctx;
    size_t off, n; /* this pass's pollfds: fds[off .. off + n) */
};

struct ea_loop {
    struct ea_clock clock;
    bool (*done)(void *ctx);
    void *done_ctx;
    struct reg_step *steps;
    size_t n_steps;
    struct reg_source *srcs;
    size_t n_srcs;
    struct pollfd *fds; /* the sum of the sources' max */
    size_t cap_fds;
};

static int64_t real_now(void *ctx)
{
    (void)ctx;
    return ea_now_ms();
}

static int real_wait(void *ctx, struct pollfd *fds, size_t n, int64_t deadline_ms)
{
    (void)ctx;
    return poll(fds, n, ea_timeout_until(deadline_ms));
}

const struct ea_clock ea_clock_real = {.now_ms = real_now, .wait = real_wait};

int ea_wait_fds(struct pollfd *fds, size_t n, int64_t deadline_ms)
{
    return real_wait(NULL, fds, n, deadline_ms);
}

static int64_t fake_now(void *ctx)
{
    return ((struct ea_fake_clock *)ctx)->now;
}

static int fake_wait(void *ctx, struct pollfd *fds, size_t n, int64_t deadline_ms)
{
    struct ea_fake_clock *fc = ctx;
    fc->waits++;
    int r = poll(fds, n, 0); /* real fds (a test's pipes) are looked at, never waited on */
    if (r == 0 && deadline_ms >= 0) {
        if (deadline_ms > fc->now)
            fc->now = deadline_ms;
        fc->jumps++;
    }
    return r;
}

void ea_fake_clock_init(struct ea_fake_clock *fc, int64_t start_ms)
{
    *fc = (struct ea_fake_clock){.now = start_ms};
    fc->clock = (struct ea_clock){.now_ms = fake_now, .wait = fake_wait, .ctx = fc};
}

struct ea_loop *ea_loop_create(const struct ea_clock *clock, bool (*done)(void *ctx),
                               void *done_ctx)
{
    struct ea_loop *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->clock = clock ? *clock : ea_clock_real;
    l->done = done;
    l->done_ctx = done_ctx;
    return l;
}

void ea_loop_destroy(struct ea_loop *l)
{
    if (!l)
        return;
    free(l->steps);
    free(l->srcs);
    free(l->fds);
    free(l);
}

int ea_loop_add_step(struct ea_loop *l, const struct ea_loop_step *step, void *ctx)
{
    struct reg_step *n = realloc(l->steps, (l->n_steps + 1) * sizeof(*n));
    if (!n)
        return -ENOMEM;
    l->steps = n;
    l->steps[l->n_steps++] = (struct reg_step){.s = step, .ctx = ctx};
    return 0;
}

int ea_loop_add_source(struct ea_loop *l, const struct ea_loop_source *src, void *ctx)
{
    struct pollfd *f = realloc(l->fds, (l->cap_fds + src->max) * sizeof(*f));
    if (!f && l->cap_fds + src->max > 0)
        return -ENOMEM;
    l->fds = f;
    struct reg_source *n = realloc(l->srcs, (l->n_srcs + 1) * sizeof(*n));
    if (!n)
        return -ENOMEM; /* the fds array only grew: harmless */
    l->srcs = n;
    l->srcs[l->n_srcs++] = (struct reg_source){.s = src, .ctx = ctx};
    l->cap_fds += src->max;
    return 0;
}

static int64_t earliest(int64_t a, int64_t b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

int64_t ea_loop_next_wake(const struct ea_loop *l)
{
    int64_t t = -1;
    for (size_t i = 0; i < l->n_steps; i++)
        if (l->steps[i].s->wake)
            t = earliest(t, l->steps[i].s->wake(l->steps[i].ctx));
    return t;
}

int64_t ea_loop_now(const struct ea_loop *l)
{
    return l->clock.now_ms(l->clock.ctx);
}

static bool is_done(const struct ea_loop *l)
{
    return l->done && l->done(l->done_ctx);
}

int ea_loop_run_once(struct ea_loop *l)
{
    if (is_done(l))
        return 1;
    int64_t now = ea_loop_now(l);
    for (size_t i = 0; i < l->n_steps; i++) {
        const struct ea_loop_step *s = l->steps[i].s;
        if (s->run)
            s->run(l->steps[i].ctx, now);
        if (s->then_check_done && is_done(l))
            return 1;
    }
    int64_t wake = ea_loop_next_wake(l);
    size_t n = 0;
    for (size_t i = 0; i < l->n_srcs; i++) {
        struct reg_source *r = &l->srcs[i];
        r->off = n;
        r->n = r->s->fds ? r->s->fds(r->ctx, l->fds + n, r->s->max) : 0;
        if (r->n > r->s->max)
            r->n = r->s->max;
        n += r->n;
    }
    int ready = l->clock.wait(l->clock.ctx, l->fds, n, wake);
    if (ready < 0)
        return errno == EINTR ? 0 : -errno;
    now = ea_loop_now(l);
    for (size_t i = 0; i < l->n_srcs; i++) {
        struct reg_source *r = &l->srcs[i];
        bool any = false;
        for (size_t k = 0; k < r->n && !any; k++)
            any = l->fds[r->off + k].revents != 0;
        if (r->s->ready && (any || r->s->on_timeout))
            r->s->ready(r->ctx, l->fds + r->off, r->n, now);
    }
    return 0;
}

int ea_loop_run(struct ea_loop *l)
{
    int r;
    while ((r = ea_loop_run_once(l)) == 0)
        ;
    return r > 0 ? 0 : r;
}
