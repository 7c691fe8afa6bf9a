// SPDX-License-Identifier: Apache-2.0
/*
 * common/ea_loop: steps in order, the next wake from their deadlines, sources served in order
 * and only when ready (or on every pass when they ask), done() between steps — on a fake clock,
 * so that no test waits: the verdicts do not depend on the machine's load.
 */
#include <criterion/criterion.h>
#include <unistd.h>

#include "ea_loop.h"

struct comp {
    char trace[256];
    size_t len;
    int64_t deadline; /* the step's wake */
    int64_t fired_at; /* when its deadline was seen passed, -1 */
    int fd;           /* a source's fd (a pipe's read end) */
    int stop_after;   /* passes before done() says so, -1: never */
    int passes;
};

static void note(struct comp *c, char ch)
{
    if (c->len + 1 < sizeof(c->trace))
        c->trace[c->len++] = ch;
}

static void run_a(void *ctx, int64_t now)
{
    struct comp *c = ctx;
    note(c, 'a');
    if (c->deadline >= 0 && now >= c->deadline && c->fired_at < 0)
        c->fired_at = now;
}

static void run_b(void *ctx, int64_t now)
{
    (void)now;
    struct comp *c = ctx;
    note(c, 'b');
    c->passes++;
}

static int64_t wake_a(void *ctx)
{
    struct comp *c = ctx;
    return c->fired_at < 0 ? c->deadline : -1;
}

static bool done(void *ctx)
{
    struct comp *c = ctx;
    return c->stop_after >= 0 && c->passes >= c->stop_after;
}

static size_t fds_one(void *ctx, struct pollfd *fds, size_t max)
{
    (void)max;
    fds[0] = (struct pollfd){.fd = ((struct comp *)ctx)->fd, .events = POLLIN};
    return 1;
}

static void on_ready(void *ctx, const struct pollfd *fds, size_t n, int64_t now)
{
    (void)now;
    struct comp *c = ctx;
    cr_assert_eq(n, 1);
    note(c, fds[0].revents & POLLIN ? 'R' : 't');
    if (fds[0].revents & POLLIN) {
        char b[16];
        cr_assert_gt(read(c->fd, b, sizeof(b)), 0);
    }
}

static const struct ea_loop_step step_a = {"a", run_a, wake_a, false};
static const struct ea_loop_step step_b = {"b", run_b, NULL, true};
static const struct ea_loop_source src_ready = {"ready", 1, fds_one, on_ready, false};
static const struct ea_loop_source src_every = {"every", 1, fds_one, on_ready, true};

Test(ea_loop, a_deadline_is_met_by_a_jump_of_the_fake_clock_not_a_wait)
{
    struct ea_fake_clock fc;
    ea_fake_clock_init(&fc, 1000);
    struct comp c = {.deadline = 61000, .fired_at = -1, .fd = -1, .stop_after = -1};
    struct ea_loop *l = ea_loop_create(&fc.clock, done, &c);
    cr_assert_eq(ea_loop_add_step(l, &step_a, &c), 0);
    cr_assert_eq(ea_loop_next_wake(l), 61000);
    cr_assert_eq(ea_loop_run_once(l), 0);
    cr_assert_eq(c.fired_at, -1, "not before its deadline");
    cr_assert_eq(ea_loop_now(l), 61000, "the wait ends at the step's deadline");
    cr_assert_eq(ea_loop_run_once(l), 0);
    cr_assert_eq(c.fired_at, 61000, "the next pass sees it due");
    cr_assert_eq(ea_loop_next_wake(l), -1);
    cr_assert_eq(fc.jumps, 1);
    ea_loop_destroy(l);
}

Test(ea_loop, steps_run_in_order_and_done_ends_the_pass_after_a_marked_step)
{
    struct ea_fake_clock fc;
    ea_fake_clock_init(&fc, 0);
    struct comp c = {.deadline = -1, .fired_at = -1, .fd = -1, .stop_after = 2};
    struct ea_loop *l = ea_loop_create(&fc.clock, done, &c);
    cr_assert_eq(ea_loop_add_step(l, &step_a, &c), 0);
    cr_assert_eq(ea_loop_add_step(l, &step_b, &c), 0);
    cr_assert_eq(ea_loop_add_step(l, &step_a, &c), 0);
    cr_assert_eq(ea_loop_run(l), 0);
    cr_assert_str_eq(c.trace, "abaab", "the second pass ends after b: %s", c.trace);
    cr_assert_eq(ea_loop_run_once(l), 1, "done before a pass: nothing runs");
    cr_assert_str_eq(c.trace, "abaab");
    ea_loop_destroy(l);
}

Test(ea_loop, a_source_is_served_when_ready_and_on_every_pass_only_when_it_asks)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    struct ea_fake_clock fc;
    ea_fake_clock_init(&fc, 0);
    struct comp quiet = {.deadline = 10, .fired_at = -1, .fd = p[0], .stop_after = -1};
    struct comp every = {.deadline = -1, .fired_at = -1, .fd = -1, .stop_after = -1};
    struct ea_loop *l = ea_loop_create(&fc.clock, NULL, NULL);
    cr_assert_eq(ea_loop_add_step(l, &step_a, &quiet), 0);
    cr_assert_eq(ea_loop_add_source(l, &src_ready, &quiet), 0);
    cr_assert_eq(ea_loop_add_source(l, &src_every, &every), 0);
    cr_assert_eq(ea_loop_run_once(l), 0); /* nothing ready: a jump to 10 */
    cr_assert_eq(ea_loop_now(l), 10);
    cr_assert_str_eq(quiet.trace, "a", "not ready: not served (%s)", quiet.trace);
    cr_assert_str_eq(every.trace, "t", "on_timeout: served anyway (%s)", every.trace);
    cr_assert_eq(write(p[1], "x", 1), 1);
    cr_assert_eq(ea_loop_run_once(l), 0);
    cr_assert_eq(ea_loop_now(l), 10, "an fd was ready: no jump");
    cr_assert_str_eq(quiet.trace, "aaR", "%s", quiet.trace);
    ea_loop_destroy(l);
    close(p[0]);
    close(p[1]);
}

Test(ea_loop, the_earliest_of_the_steps_deadlines_wakes_the_loop)
{
    struct ea_fake_clock fc;
    ea_fake_clock_init(&fc, 0);
    struct comp x = {.deadline = 500, .fired_at = -1, .fd = -1, .stop_after = -1};
    struct comp y = {.deadline = 200, .fired_at = -1, .fd = -1, .stop_after = -1};
    struct comp z = {.deadline = -1, .fired_at = -1, .fd = -1, .stop_after = -1};
    struct ea_loop *l = ea_loop_create(&fc.clock, NULL, NULL);
    cr_assert_eq(ea_loop_add_step(l, &step_a, &z), 0);
    cr_assert_eq(ea_loop_add_step(l, &step_a, &x), 0);
    cr_assert_eq(ea_loop_add_step(l, &step_a, &y), 0);
    cr_assert_eq(ea_loop_next_wake(l), 200);
    cr_assert_eq(ea_loop_run_once(l), 0);
    cr_assert_eq(ea_loop_run_once(l), 0);
    cr_assert_eq(y.fired_at, 200);
    cr_assert_eq(x.fired_at, -1);
    cr_assert_eq(ea_loop_now(l), 500, "then the next one");
    ea_loop_destroy(l);
}
