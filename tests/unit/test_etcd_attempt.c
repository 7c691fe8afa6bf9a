// SPDX-License-Identifier: Apache-2.0
/*
 * How the etcd backend splits a lease renewal's time between members (etcd_attempt_until), decided
 * without a clock: a member that accepts connections but answers nothing (partitioned, frozen)
 * must leave time for the next one (issue 30: with the agent's timeout, a third of the TTL, a
 * renewal that waited all of it on a silent member ended where the session gives the lease up).
 * tests/etcd/test_etcd_ka_silent.c checks the same on a real 3-member cluster with SIGSTOP.
 */
#include <criterion/criterion.h>

#include "etcd_internal.h"

/* Mutation (scripts/test.sh): every attempt given the whole time left. */
Test(etcd_attempt, a_member_that_is_not_the_last_gets_half_the_time_left)
{
    cr_assert_eq(etcd_attempt_until(1000, 4000, 1, 3), 2500);
    cr_assert_eq(etcd_attempt_until(2500, 4000, 2, 3), 3250);
    cr_assert_eq(etcd_attempt_until(0, 1, 1, 2), 0, "rounded down, never past the deadline");
}

Test(etcd_attempt, the_last_member_gets_all_that_is_left)
{
    cr_assert_eq(etcd_attempt_until(3250, 4000, 3, 3), 4000);
    cr_assert_eq(etcd_attempt_until(1000, 4000, 1, 1), 4000, "one endpoint: the whole timeout");
    cr_assert_eq(etcd_attempt_until(1000, 4000, 5, 3), 4000, "a second pass: what is left");
}

Test(etcd_attempt, past_the_deadline_the_attempt_ends_at_it)
{
    cr_assert_eq(etcd_attempt_until(5000, 4000, 1, 3), 4000);
    cr_assert_eq(etcd_attempt_until(4000, 4000, 1, 3), 4000);
}

/* A renewal of a 3-member handle with a silent first member: the first two attempts end
 * before the deadline, so a third member still has time (the sequence the backend runs). */
Test(etcd_attempt, a_silent_first_member_leaves_a_quarter_for_the_third)
{
    int64_t deadline = 3000, now = 0;
    int64_t u1 = etcd_attempt_until(now, deadline, 1, 3);
    int64_t u2 = etcd_attempt_until(u1, deadline, 2, 3);
    int64_t u3 = etcd_attempt_until(u2, deadline, 3, 3);
    cr_assert_eq(u1, 1500);
    cr_assert_eq(u2, 2250);
    cr_assert_eq(u3, 3000);
    cr_assert_geq(deadline - u2, deadline / 4);
}
