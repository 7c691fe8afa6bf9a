// SPDX-License-Identifier: Apache-2.0
/*
 * common/ea_time's pure schedules, without a clock: the doubling backoff and the jittered store
 * retry (one schedule for the join and every later store request: issue 37 found two, one of them
 * without jitter, so a thousand agents against a down etcd retried in lockstep).
 */
#include <criterion/criterion.h>

#include "ea_time.h"

Test(ea_time, backoff_doubles_from_its_base_to_its_cap)
{
    cr_assert_eq(ea_backoff_ms(1000, 0, 8000), 1000);
    cr_assert_eq(ea_backoff_ms(1000, 1, 8000), 1000);
    cr_assert_eq(ea_backoff_ms(1000, 3, 8000), 4000);
    cr_assert_eq(ea_backoff_ms(1000, 60, 8000), 8000, "capped, no overflow");
}

Test(ea_time, a_store_retry_doubles_to_its_cap)
{
    int64_t d = 0, want[] = {200, 400, 800, 1600, 3200, 5000, 5000};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        d = ea_retry_next(d, 200, 5000, i, NULL);
        cr_assert_eq(d, want[i], "retry %zu: %lld", i, (long long)d);
    }
}

Test(ea_time, a_store_retry_waits_between_half_and_one_and_a_half_of_its_delay)
{
    for (uint64_t seed = 0; seed < 2000; seed++) {
        int64_t w = -1;
        int64_t d = ea_retry_next(800, 200, 5000, seed * 7919u, &w);
        cr_assert_eq(d, 1600);
        cr_assert(w >= 800 && w < 2400, "seed %llu: wait %lld", (unsigned long long)seed,
                  (long long)w);
    }
}

/* Mutation (scripts/test.sh): the spread taken out -> every agent waits the same. */
Test(ea_time, agents_that_failed_together_do_not_retry_together)
{
    /* 1,000 agents whose seeds differ (their pids): the waits of the first retry spread over
     * at least half of the window, not one value */
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    int distinct = 0, seen[400] = {0};
    for (int pid = 1000; pid < 2000; pid++) {
        int64_t w;
        ea_retry_next(0, 200, 5000, (uint64_t)5000 ^ ((uint64_t)pid << 20), &w);
        lo = w < lo ? w : lo;
        hi = w > hi ? w : hi;
        if (w >= 0 && w < 400 && !seen[w]++)
            distinct++;
    }
    cr_assert_geq(hi - lo, 100, "waits %lld..%lld ms", (long long)lo, (long long)hi);
    cr_assert_geq(distinct, 100, "%d distinct waits of 1,000", distinct);
}
