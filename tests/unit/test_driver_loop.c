// SPDX-License-Identifier: Apache-2.0
/* Driver mode's loop on a fake clock (agent/driver/driver.c, issue 37): its deadlines — a
 * host's cooldown, --join-timeout when no host can run a node — are the loop's wakes, decided on
 * the loop's clock, so the verdicts here take no real time and do not depend on the load. */
#include <criterion/criterion.h>
#include <string.h>

#include "config.h"
#include "driver_internal.h"
#include "ea_loop.h"

static struct ea_fake_clock fc;
static struct cfg cfg;
static struct dhost host;
static struct driver d;
static struct ea_loop *l;

#define START 1000000

static void setup(void)
{
    ea_fake_clock_init(&fc, START);
    memset(&cfg, 0, sizeof(cfg));
    cfg.join_timeout_ms = 60000;
    cfg.stop_timeout_ms = 10000;
    cfg.lease_ttl_ms = 10000;
    memset(&host, 0, sizeof(host));
    snprintf(host.name, sizeof(host.name), "h1");
    d = (struct driver){.clock = &fc.clock, .cfg = &cfg, .h = &host, .n = 1, .cap = 1,
                        .have_list = true, .sigfd = -1, .chldfd = -1, .disc_pid = -1,
                        .disc_fd = -1, .disc_next = -1, .outcome = -1, .idle_since = -1};
    l = ea_loop_create(&fc.clock, driver_done, &d);
    cr_assert(l);
    cr_assert_eq(driver_loop_add(l, &d), 0);
}

static void teardown(void)
{
    ea_loop_destroy(l);
}

TestSuite(driver_loop, .init = setup, .fini = teardown);

/* A host no longer listed, blacklisted until +5 s: its cooldown ends when the loop's clock says
 * so (the loop wakes for it), and nothing starts it (not listed). No host runs a node: the driver
 * gives up at --join-timeout, exit 3, exactly then. */
Test(driver_loop, a_cooldown_ends_and_join_timeout_gives_up_on_the_loops_clock)
{
    host.st = DH_COOLDOWN;
    host.retry_at = START + 5000;
    int64_t cooled = -1;
    int r = 0, passes = 0;
    for (; passes < 50 && r == 0; passes++) {
        int64_t pass_at = fc.now; /* the pass's steps run at this time; its wait then jumps */
        r = ea_loop_run_once(l);
        if (cooled < 0 && host.st == DH_IDLE)
            cooled = pass_at;
    }
    cr_assert_eq(r, 1, "the driver never ended (%d passes, at +%lld ms)", passes,
                 (long long)(fc.now - START));
    cr_assert_eq(cooled, START + 5000, "the cooldown ended at +%lld ms, not +5000",
                 (long long)(cooled - START));
    cr_assert_eq(host.st, DH_IDLE, "a host no longer listed was started");
    cr_assert_eq(d.exit_code, AGENT_EXIT_RDZV);
    cr_assert_eq(fc.now, START + cfg.join_timeout_ms, "gave up at +%lld ms, not at --join-timeout",
                 (long long)(fc.now - START));
    cr_assert_lt(passes, 10, "%d passes: the loop did not sleep until its deadlines", passes);
}
