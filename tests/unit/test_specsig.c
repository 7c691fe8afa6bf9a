// SPDX-License-Identifier: Apache-2.0
/*
 * The time part of the decision on a run spec (agent/daemon/specsig.c, specsig_check_time) as a
 * pure function of the spec's submit time, its expiry and a given "now": no clock, no keys (the
 * signature part is test_sshsig's). Issue 38: a spec signed for a submit time years ahead (with
 * an expiry a day after it), and one whose expiry minus submit time overflowed int64, both ran.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "runspec.h"
#include "specsig.h"

/* 2026-11-29T00:00:00Z: a fixed "now" */
#define NOW 1795910400000LL
#define DAY 86400000LL
#define YEAR (365 * DAY)

/* The verdict on a spec submitted at `submitted`, expiring at `expires`, at `now`: 0, or -EPERM
 * with the reason in *msg. */
static int verdict(int64_t submitted, int64_t expires, int64_t now, char *msg, size_t size)
{
    struct runspec s = {.submitted_ms = submitted, .expires_ms = expires};
    struct ea_error err = {0};
    int r = specsig_check_time(&s, now, &err);
    snprintf(msg, size, "%s", err.msg);
    return r;
}

#define REFUSED(submitted, expires, now, what)                                                   \
    do {                                                                                         \
        char m_[EA_ERROR_MSG_MAX];                                                               \
        cr_assert_eq(verdict(submitted, expires, now, m_, sizeof(m_)), -EPERM,                  \
                     "submitted %lld, expires %lld, now %lld: not refused",                      \
                     (long long)(submitted), (long long)(expires), (long long)(now));            \
        cr_assert(strstr(m_, what), "expected '%s' in: %s", what, m_);                           \
    } while (0)
#define RUNS(submitted, expires, now)                                                            \
    do {                                                                                         \
        char m_[EA_ERROR_MSG_MAX];                                                               \
        cr_assert_eq(verdict(submitted, expires, now, m_, sizeof(m_)), 0, "%s", m_);             \
    } while (0)

Test(specsig, a_spec_valid_now_runs)
{
    RUNS(NOW, NOW + DAY, NOW);
    RUNS(NOW - DAY, NOW + DAY, NOW);
    RUNS(NOW, NOW + SPECSIG_VALID_MAX_MS, NOW);       /* exactly 30 days */
    RUNS(NOW, NOW + DAY, NOW + DAY);                  /* its last millisecond */
    RUNS(0, 0, NOW);                                  /* no expiry (unsigned): nothing to hold */
    RUNS(NOW + DAY, 0, NOW);
}

/* The finding: submitted_ms = now + 5 years, expiring a day later: valid for one day, from a time
 * of the signer's choosing. A clock a little ahead is not that. */
Test(specsig, submitted_in_the_future_is_refused)
{
    REFUSED(NOW + 5 * YEAR, NOW + 5 * YEAR + DAY, NOW, "in the future");
    REFUSED(NOW + 5 * YEAR, NOW + 5 * YEAR + DAY, NOW,
            "this node's clock says 2026-11-29T00:00:00Z");
    REFUSED(NOW + SPECSIG_CLOCK_SKEW_MS + 1, NOW + DAY, NOW, "at most 300 s ahead");
    RUNS(NOW + SPECSIG_CLOCK_SKEW_MS, NOW + DAY, NOW); /* the signer's clock 5 minutes ahead */
    RUNS(NOW + 1000, NOW + DAY, NOW);
}

/* The finding: submitted_ms = -9.2e18, expires_ms = 9e18: expires - submitted overflowed int64 to
 * a negative "validity" and passed. Now refused for the negative time, and no subtraction of the
 * checks overflows (UBSan in the sanitizer build says so) whatever the three values. */
Test(specsig, negative_submit_time_and_overflow_are_refused)
{
    REFUSED(-9200000000000000000LL, 9000000000000000000LL, NOW, "submitted at a negative time");
    REFUSED(INT64_MIN, INT64_MAX, NOW, "negative time");
    REFUSED(-1, NOW + DAY, NOW, "negative time (-1 ms)");
    REFUSED(0, INT64_MAX, NOW, "valid for 106751991167 days");
    REFUSED(0, 9000000000000000000LL, NOW, "from its submission (at most 30)");
    REFUSED(NOW, INT64_MAX, NOW, "valid for");
    REFUSED(INT64_MAX - 1, INT64_MAX, NOW, "in the future");
    /* a "now" anywhere: no overflow either */
    REFUSED(NOW, NOW + DAY, INT64_MIN, "in the future");
    REFUSED(NOW, NOW + DAY, INT64_MAX, "expired at");
    REFUSED(0, 1, INT64_MIN, "in the future");
}

Test(specsig, expiry_not_after_submission_is_refused)
{
    REFUSED(NOW, NOW, NOW, "not after its submission");
    REFUSED(NOW, NOW - 1, NOW, "expires at 2026-11-28T23:59:59Z, not after its submission at "
                                 "2026-11-29T00:00:00Z");
    REFUSED(NOW + DAY, NOW, NOW, "not after its submission");
}

Test(specsig, expired_and_too_long_are_refused)
{
    REFUSED(NOW - 2 * DAY, NOW - DAY, NOW, "expired at 2026-11-28T00:00:00Z");
    REFUSED(NOW, NOW + DAY, NOW + DAY + 1, "expired at");
    REFUSED(NOW, NOW + 31 * DAY, NOW, "valid for 31 days from its submission (at most 30)");
    REFUSED(NOW, NOW + SPECSIG_VALID_MAX_MS + 1, NOW, "valid for 30 days");
    /* validity counts from the submission, not from now */
    REFUSED(NOW - 20 * DAY, NOW + 20 * DAY, NOW, "valid for 40 days");
}
