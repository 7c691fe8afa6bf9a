// SPDX-License-Identifier: Apache-2.0
/*
 * pf (agent/health/preflight.c) with the local launcher and real checks on a synthetic clock: a
 * check stopped at its timeout has failed, whatever it exits with (a check that traps SIGTERM and
 * exits 0 is still a check that never finished).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ea_time.h"
#include "preflight.h"
#include "test_launch_support.h"

static char dir[256];
static struct launcher *l;

static void setup(void)
{
    tl_mkdtemp(dir, sizeof(dir));
    l = tl_launcher();
}

static void teardown(void)
{
    launcher_destroy(l);
    tl_rmrf(dir);
}

TestSuite(preflight, .init = setup, .fini = teardown, .timeout = 30);

/* mutation: pf_on_exit() judging by the exit status alone -> the check that ran out of time
 * and exited 0 when stopped passes */
Test(preflight, a_check_stopped_at_its_timeout_fails_even_if_it_exits_0)
{
    char fifo[300], cmd[640];
    snprintf(fifo, sizeof(fifo), "%s/ready", dir);
    int keep = -1, rfd = tl_fifo(fifo, &keep);
    snprintf(cmd, sizeof(cmd),
             "trap 'echo stopped; exit 0' TERM; echo 'probing the GPU'; echo \"ready $$\" > %s; "
             "sleep 30 & wait",
             fifo);
    char *envp[] = {"PATH=/usr/bin:/bin", NULL};
    struct pf *p = NULL;
    struct ea_error err = {0};
    cr_assert_eq(pf_create(cmd, 1000, l, dir, envp, &p, &err), 0, "%s", err.msg);
    int64_t t0 = ea_now_ms();
    cr_assert_eq(pf_start(p, t0), 0);
    cr_assert_eq(pf_state(p), PF_RUNNING, "%s", pf_reason(p));
    pid_t pid = 0;
    cr_assert_eq(tl_read_ready(rfd, &pid, 1, 10000), 1, "the check never set its trap");
    cr_assert_eq(pf_wake_ms(p), t0 + 1000);
    pf_tick(p, t0 + 999);
    cr_assert_eq(pf_state(p), PF_RUNNING, "stopped before its timeout");
    pf_tick(p, t0 + 1000); /* its timeout: SIGTERM to its group */
    struct launch_exit ex;
    cr_assert_eq(tl_wait_exits(l, &ex, 1, 10000), 1, "the check was not stopped");
    cr_assert_eq(ex.exit_code, 0, "the check was to exit 0 when stopped: code %d, signal %d",
                 ex.exit_code, ex.term_signal);
    cr_assert(pf_on_exit(p, &ex));
    cr_assert_eq(pf_state(p), PF_FAILED, "a check that ran out of time passed");
    cr_assert(strstr(pf_reason(p), "timed out after 1.0 s (--preflight-timeout), killed: "
                                   "probing the GPU; stopped"),
              "reason: %s", pf_reason(p));
    cr_assert_eq(pf_wake_ms(p), -1);
    pf_destroy(p);
    close(keep);
    close(rfd);
}
