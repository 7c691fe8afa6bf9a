// SPDX-License-Identifier: Apache-2.0
/*
 * ea_loop: the one event loop a command runs (the habit of redis `ae` and libuv): components
 * register steps (run before each poll, in registration order, each with its next deadline) and
 * sources (the fds they wait on, and what to do when one is ready); the loop computes the next
 * wake from the steps' deadlines and knows no component by name. Time comes from a clock the
 * loop is given: the real one by default, a fake one in tests, so a decision that waits on a
 * deadline is tested in microseconds and its verdict does not depend on the machine's load.
 * Not for: threads (one loop per thread; the only extra threads hand events over an fd).
 */
#ifndef EA_COMMON_EA_LOOP_H
#define EA_COMMON_EA_LOOP_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where a loop's time comes from, and how it waits. */
struct ea_clock {
    /* milliseconds on a monotonic scale */
    int64_t (*now_ms)(void *ctx);
    /* wait until one of fds[0..n) is ready or deadline_ms (on now_ms's scale; -1: none) has
     * come; poll()'s return value and errno */
    int (*wait)(void *ctx, struct pollfd *fds, size_t n, int64_t deadline_ms);
    void *ctx;
};

/* CLOCK_MONOTONIC and poll(). */
extern const struct ea_clock ea_clock_real;

/* A clock tests drive: time stands still until a wait, which looks at the fds without blocking
 * and, when none is ready, jumps to the deadline (a wait with no deadline and nothing ready
 * returns 0 at once: the test decides what happens next). */
struct ea_fake_clock {
    int64_t now;
    int64_t waits; /* how many waits ran, and how many of them jumped */
    int64_t jumps;
    struct ea_clock clock; /* set by ea_fake_clock_init: hand &fc->clock to the loop */
};
void ea_fake_clock_init(struct ea_fake_clock *fc, int64_t start_ms);

/* One step of every pass, before the poll. `run` (or NULL) is called with the pass's time; `wake`
 * (or NULL) gives the step's next deadline (-1: none). With `then_check_done`, the pass ends after
 * this step once the loop's done() says so (the agent leaving: the later steps must not act). */
struct ea_loop_step {
    const char *name;
    void (*run)(void *ctx, int64_t now);
    int64_t (*wake)(void *ctx);
    bool then_check_done;
};

/* What a component waits on: `fds` fills up to `max` pollfds for this pass (0: none now; an fd of
 * -1 is ignored by poll), `ready` is called after the poll with the same fds and their revents,
 * when one of them has an event, or after every poll that did not fail with `on_timeout` (a
 * component with deadlines of its own). Sources are served in registration order. */
struct ea_loop_source {
    const char *name;
    size_t max;
    size_t (*fds)(void *ctx, struct pollfd *fds, size_t max);
    void (*ready)(void *ctx, const struct pollfd *fds, size_t n, int64_t now);
    bool on_timeout;
};

struct ea_loop;

/* A loop on `clock` (NULL: ea_clock_real); `done` (or NULL: never) is asked before every pass
 * and after the steps marked then_check_done. NULL without memory. */
struct ea_loop *ea_loop_create(const struct ea_clock *clock, bool (*done)(void *ctx),
                               void *done_ctx);
void ea_loop_destroy(struct ea_loop *l);

/* Register a step / a source (the struct is not copied: a const table of the component's).
 * 0, or -ENOMEM. */
int ea_loop_add_step(struct ea_loop *l, const struct ea_loop_step *step, void *ctx);
int ea_loop_add_source(struct ea_loop *l, const struct ea_loop_source *src, void *ctx);

/* The earliest deadline of the registered steps, -1 when none has one. */
int64_t ea_loop_next_wake(const struct ea_loop *l);
/* The loop's time now. */
int64_t ea_loop_now(const struct ea_loop *l);

/* One pass: the steps (until done), then one wait until the next wake or an fd, then the
 * sources. 0; 1 once done; a negative errno when the wait failed (not EINTR). */
int ea_loop_run_once(struct ea_loop *l);
/* Passes until done or a wait fails: 0 or the negative errno. */
int ea_loop_run(struct ea_loop *l);

/* A bounded wait outside a loop (a teardown: a child given a moment to end, a full pipe): until
 * one of fds[0..n) is ready or deadline_ms (monotonic; -1: none) has come, on the real clock.
 * poll()'s return value and errno. The one other place (with ea_clock_real) that waits on fds,
 * so that a component never calls poll() itself. */
int ea_wait_fds(struct pollfd *fds, size_t n, int64_t deadline_ms);

#endif
