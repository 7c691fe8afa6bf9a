// SPDX-License-Identifier: Apache-2.0
/* ckpt_pump.h: what the agent's loop does for a checkpoint store, for the unit tests that run
 * one or two stores in-process (test_checkpoint.c, test_ckpt_repl.c). */
#ifndef EA_TESTS_CKPT_PUMP_H
#define EA_TESTS_CKPT_PUMP_H

#include <poll.h>

#include "checkpoint.h"

/* The stores' fds polled for up to `ms` (y may be NULL), the ready ones served. */
static inline void pump_ckpt2(struct ckpt *x, struct ckpt *y, int ms)
{
    struct pollfd p[2 * CKPT_POLL_MAX];
    size_t nx = x ? ckpt_pollfds(x, p, CKPT_POLL_MAX) : 0;
    size_t ny = y ? ckpt_pollfds(y, p + nx, CKPT_POLL_MAX) : 0;
    poll(p, nx + ny, ms);
    if (x)
        ckpt_on_poll(x, p, nx);
    if (y)
        ckpt_on_poll(y, p + nx, ny);
}

static inline void pump_ckpt(struct ckpt *c, int ms)
{
    pump_ckpt2(c, NULL, ms);
}

#endif
