// SPDX-License-Identifier: Apache-2.0
#include "ea_time.h"

#include <stdint.h>
#include <time.h>
#include <unistd.h>

static int64_t clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t (*override_now)(void *ctx);
static void *override_ctx;

void ea_time_override(int64_t (*now)(void *ctx), void *ctx)
{
    override_now = now;
    override_ctx = ctx;
}

int64_t ea_now_ms(void)
{
    return override_now ? override_now(override_ctx) : clock_ms(CLOCK_MONOTONIC);
}

int64_t ea_wall_ms(void)
{
    return clock_ms(CLOCK_REALTIME);
}

int ea_timeout_until(int64_t deadline_ms)
{
    if (deadline_ms < 0)
        return -1;
    int64_t left = deadline_ms - ea_now_ms();
    if (left <= 0)
        return 0;
    if (left > INT32_MAX)
        return INT32_MAX;
    return (int)left;
}

int64_t ea_backoff_ms(int64_t base_ms, int strikes, int64_t cap_ms)
{
    int64_t cap = base_ms > cap_ms ? base_ms : cap_ms;
    int64_t d = base_ms;
    for (int i = 1; i < strikes && d < cap; i++)
        d *= 2;
    return d < cap ? d : cap;
}

int64_t ea_retry_next(int64_t prev_ms, int64_t base_ms, int64_t cap_ms, uint64_t seed,
                      int64_t *ret_wait_ms)
{
    if (base_ms < 1)
        base_ms = 1;
    int64_t d = prev_ms > 0 ? (prev_ms > cap_ms / 2 ? cap_ms : prev_ms * 2) : base_ms;
    if (d > cap_ms)
        d = cap_ms > base_ms ? cap_ms : base_ms;
    uint64_t x = seed * 6364136223846793005u + 1442695040888963407u;
    if (ret_wait_ms)
        *ret_wait_ms = d / 2 + (int64_t)((x >> 33) % (uint64_t)d);
    return d;
}

uint64_t ea_retry_seed(int64_t now_ms)
{
    return (uint64_t)now_ms ^ ((uint64_t)getpid() << 20);
}
