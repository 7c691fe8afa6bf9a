// SPDX-License-Identifier: Apache-2.0
/* rendezvous/keys.c: the keys outside a session, built and told apart in one place. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "keys.h"

#define P "/elastic/r/"

Test(rdzv_keys, held_key_is_built_under_the_prefix_and_refused_when_it_does_not_fit)
{
    char buf[64];
    cr_assert_eq(rdzv_key_held(P, "n1", buf, sizeof(buf)), 0);
    cr_assert_str_eq(buf, P "held/n1");
    char small[12];
    cr_assert_eq(rdzv_key_held(P, "n1", small, sizeof(small)), -ENAMETOOLONG);
}

Test(rdzv_keys, a_listing_key_is_told_apart)
{
    int64_t round = -1;
    const char *rest = NULL;
    cr_assert_eq(rdzv_key_parse(P, P "held/n7", &round, &rest), RDZV_KEY_HELD);
    cr_assert_str_eq(rest, "n7");
    cr_assert_eq(rdzv_key_parse(P, P "rounds/12/recovery", &round, &rest), RDZV_KEY_ROUND);
    cr_assert_eq(round, 12);
    cr_assert_str_eq(rest, "recovery");
    cr_assert_eq(rdzv_key_parse(P, "/elastic/other/held/n7", &round, &rest), RDZV_KEY_OUTSIDE);
    cr_assert_eq(rdzv_key_parse(P, P "state", &round, &rest), RDZV_KEY_OTHER);
    cr_assert_eq(rdzv_key_parse(P, P "held/", &round, &rest), RDZV_KEY_OTHER);
}

Test(rdzv_keys, a_round_key_that_is_not_a_positive_round_with_a_name_is_not_a_round_key)
{
    int64_t round = -1;
    const char *rest = NULL;
    const char *bad[] = {P "rounds/0/recovery", P "rounds/-3/recovery", P "rounds/+3/recovery",
                         P "rounds/3", P "rounds/3/", P "rounds/3x/recovery",
                         P "rounds/99999999999999999999/recovery", P "rounds//recovery"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_expect_eq(rdzv_key_parse(P, bad[i], &round, &rest), RDZV_KEY_OTHER, "%s", bad[i]);
}
