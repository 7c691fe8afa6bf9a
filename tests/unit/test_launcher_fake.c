// SPDX-License-Identifier: Apache-2.0
/*
 * The fake launcher, and through it the launcher core every launcher shares (launch_core.c):
 * exits decided by the test and reported once, stop with grace (SIGTERM now, SIGKILL once the
 * grace has passed on the fake clock, a second stop only shortening it), release of a running
 * process. No process runs and no clock is read: every verdict here is independent of load.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"
#include "launch_core.h"
#include "launcher.h"

TestSuite(fake, .timeout = 10);

static struct launcher *fake_create(void)
{
    struct launcher_config cfg = {.name = "fake"};
    struct launcher *l = NULL;
    struct ea_error err = {0};
    cr_assert_eq(launcher_create(&cfg, &l, &err), 0, "%s", err.msg);
    return l;
}

static struct launch_proc *start(struct launcher *l, const char *label, size_t tail)
{
    const char *const argv[] = {"train.py", "--epochs", "3", NULL};
    struct launch_spec spec = {.argv = argv, .label = label, .stderr_tail = tail};
    struct launch_proc *p = NULL;
    struct ea_error err = {0};
    cr_assert_eq(launch_start(l, &spec, &p, &err), 0, "%s", err.msg);
    cr_assert_not_null(p);
    return p;
}

/* dispatch() once; returns the number of exits, the first in *ret. */
static size_t dispatch(struct launcher *l, struct launch_exit *ret)
{
    struct launch_exit *ex = NULL;
    size_t n = 0;
    struct ea_error err = {0};
    cr_assert_eq(launcher_dispatch(l, &ex, &n, &err), 0, "%s", err.msg);
    if (n && ret)
        *ret = ex[0];
    free(ex);
    return n;
}

static bool readable(int fd)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    return poll(&pfd, 1, 0) == 1;
}

Test(fake, is_registered_and_records_the_request)
{
    cr_assert_not_null(launcher_find("fake"));
    struct launcher *l = fake_create();
    struct launch_proc *a = start(l, "0", 0), *b = start(l, NULL, 0);
    cr_assert_eq(launch_fake_started(l), 2);
    cr_assert_str_eq(launch_fake_argv(a)[0], "train.py");
    cr_assert_str_eq(launch_fake_argv(a)[2], "3");
    cr_assert_null(launch_fake_argv(a)[3]);
    cr_assert_neq(launch_pid(l, a), launch_pid(l, b));
    cr_assert_str_eq(launch_fake_label(a), "0");
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)launch_pid(l, b));
    cr_assert_str_eq(launch_fake_label(b), pid, "no label: the pid");
    launch_relabel(l, b, "7");
    cr_assert_str_eq(launch_fake_label(b), "7");
    launcher_fence(l, 12345);
    cr_assert_eq(launch_fake_fence(l), 12345);
    launcher_destroy(l);
}

/* start() never waits: a start that fails is an exit the next dispatch() reports, with the
 * reason and the code of a shell (127: not found). */
Test(fake, a_failed_start_is_an_exit_with_its_reason)
{
    struct launcher *l = fake_create();
    launch_fake_fail_next(l, -ENOENT);
    const char *const argv[] = {"nope", NULL};
    struct launch_spec spec = {.argv = argv};
    struct launch_proc *p = NULL;
    struct ea_error err = {0};
    cr_assert_eq(launch_start(l, &spec, &p, &err), 0, "%s", err.msg);
    cr_assert(readable(launcher_fd(l)), "the failure wakes the loop");
    struct launch_exit e;
    cr_assert_eq(dispatch(l, &e), 1);
    cr_assert_eq(e.proc, p);
    cr_assert_eq(e.exit_code, 127);
    cr_assert_not_null(e.start_error);
    cr_assert(strstr(e.start_error, "'nope'"), "%s", e.start_error);
    cr_assert_eq(launch_fake_started(l), 0);
    launch_release(l, p);
    launch_fake_fail_next(l, -EACCES);
    p = start(l, "1", 0);
    cr_assert_eq(dispatch(l, &e), 1);
    cr_assert_eq(e.exit_code, 126, "any other reason: 126");
    launch_release(l, p);
    start(l, "0", 0); /* the next one succeeds again */
    cr_assert_eq(dispatch(l, NULL), 0);
    launcher_destroy(l);
}

/* A start the launcher has not confirmed (an ssh connection being set up) is given up at its
 * deadline on the launcher's clock, not before: an exit with start_error and code 126. The
 * core's rule, on the fake clock. Mutation (scripts/mutants.d/launcher_async.sh): the
 * confirmation's deadline. */
Test(fake, an_unconfirmed_start_fails_at_its_deadline_not_before)
{
    struct launcher *l = fake_create();
    launch_fake_set_now(l, 1000);
    launch_fake_hold_next(l, 30000);
    struct launch_proc *p = start(l, "0", 0);
    cr_assert(launch_fake_starting(p));
    cr_assert_eq(launch_pid(l, p), 0, "no pid before the confirmation");
    cr_assert_eq(launch_fake_next_kill(l), 31000, "the loop is woken at the deadline");
    launch_fake_set_now(l, 30999);
    cr_assert_eq(dispatch(l, NULL), 0, "still starting 1 ms before its deadline");
    cr_assert(launch_fake_starting(p));
    launch_fake_set_now(l, 31000);
    struct launch_exit e;
    cr_assert_eq(dispatch(l, &e), 1);
    cr_assert_eq(e.proc, p);
    cr_assert_eq(e.exit_code, 126);
    cr_assert_eq(e.end_ms, 31000);
    cr_assert_not_null(e.start_error);
    cr_assert(strstr(e.start_error, "'train.py'") && strstr(e.start_error, "not confirmed"), "%s",
              e.start_error);
    launch_release(l, p);

    launch_fake_hold_next(l, 30000); /* confirmed in time: it runs, nothing is reported */
    p = start(l, "1", 0);
    cr_assert_eq(launch_fake_confirm(l, p), 0);
    cr_assert_gt(launch_pid(l, p), 0);
    launch_fake_set_now(l, 90000);
    cr_assert_eq(dispatch(l, NULL), 0);
    cr_assert_eq(launch_fake_next_kill(l), -1);
    launcher_destroy(l);
}

Test(fake, a_worker_exit_is_reported_once_at_the_fake_time)
{
    struct launcher *l = fake_create();
    struct launch_proc *p = start(l, "0", 64);
    launch_fake_set_now(l, 5000);
    cr_assert_eq(dispatch(l, NULL), 0, "still running");
    launch_fake_stderr(p, "Traceback: boom\n");
    launch_fake_set_now(l, 7000);
    cr_assert_eq(launch_fake_exit(l, p, 3, 0), 0);
    cr_assert(readable(launcher_fd(l)), "an exit wakes the loop");
    struct launch_exit ex;
    cr_assert_eq(dispatch(l, &ex), 1);
    cr_assert_eq(ex.proc, p);
    cr_assert_eq(ex.exit_code, 3);
    cr_assert_eq(ex.term_signal, 0);
    cr_assert_eq(ex.end_ms, 7000);
    cr_assert_str_eq(ex.stderr_tail, "Traceback: boom\n");
    cr_assert_eq(dispatch(l, NULL), 0, "reported once");
    cr_assert_eq(launch_fake_exit(l, p, 0, 0), -ESRCH, "it has ended");
    cr_assert_eq(launch_signal(l, p, SIGTERM), -ESRCH);
    launch_release(l, p);
    launcher_destroy(l);
}

Test(fake, death_by_signal)
{
    struct launcher *l = fake_create();
    struct launch_proc *p = start(l, "0", 0);
    launch_fake_exit(l, p, 0, SIGSEGV);
    struct launch_exit ex;
    cr_assert_eq(dispatch(l, &ex), 1);
    cr_assert_eq(ex.exit_code, -1);
    cr_assert_eq(ex.term_signal, SIGSEGV);
    cr_assert_null(ex.stderr_tail, "no tail asked for");
    launch_release(l, p);
    launcher_destroy(l);
}

/* The SIGKILL comes when the grace has passed on the fake clock, not a millisecond before. */
Test(fake, stop_kills_when_the_grace_has_passed)
{
    struct launcher *l = fake_create();
    struct launch_proc *p = start(l, "0", 0);
    launch_fake_set_now(l, 1000);
    cr_assert_eq(launch_stop(l, p, 500), 0);
    const int *sigs;
    cr_assert_eq(launch_fake_signals(p, &sigs), 1);
    cr_assert_eq(sigs[0], SIGTERM, "SIGTERM to the group at once");

    launch_fake_set_now(l, 1499);
    cr_assert_eq(dispatch(l, NULL), 0);
    cr_assert_eq(launch_fake_signals(p, &sigs), 1, "no SIGKILL within the grace");

    launch_fake_set_now(l, 1500);
    struct launch_exit ex;
    cr_assert_eq(dispatch(l, &ex), 1, "SIGKILL once the grace has passed, and its exit");
    cr_assert_eq(launch_fake_signals(p, &sigs), 2);
    cr_assert_eq(sigs[1], SIGKILL);
    cr_assert_eq(ex.term_signal, SIGKILL);
    cr_assert_eq(ex.end_ms, 1500);
    launch_release(l, p);
    launcher_destroy(l);
}

/* A worker that ends on SIGTERM within the grace gets no SIGKILL. */
Test(fake, a_worker_that_obeys_sigterm_is_not_killed)
{
    struct launcher *l = fake_create();
    struct launch_proc *p = start(l, "0", 0);
    launch_stop(l, p, 1000);
    launch_fake_set_now(l, 300);
    launch_fake_exit(l, p, -1, SIGTERM);
    struct launch_exit ex;
    cr_assert_eq(dispatch(l, &ex), 1);
    cr_assert_eq(ex.term_signal, SIGTERM);
    launch_fake_set_now(l, 5000);
    cr_assert_eq(dispatch(l, NULL), 0);
    const int *sigs;
    cr_assert_eq(launch_fake_signals(p, &sigs), 1, "SIGTERM only");
    launch_release(l, p);
    launcher_destroy(l);
}

/* A second stop sends no second SIGTERM and may shorten the grace, never lengthen it. */
Test(fake, a_second_stop_only_shortens_the_grace)
{
    struct launcher *l = fake_create();
    struct launch_proc *p = start(l, "0", 0);
    launch_stop(l, p, 1000);
    launch_stop(l, p, 60000);
    const int *sigs;
    cr_assert_eq(launch_fake_signals(p, &sigs), 1, "one SIGTERM");
    launch_fake_set_now(l, 1000);
    cr_assert_eq(dispatch(l, NULL), 1, "killed at the first deadline");

    struct launch_proc *q = start(l, "1", 0);
    launch_stop(l, q, 1000); /* due at 2000 */
    launch_fake_set_now(l, 1100);
    launch_stop(l, q, 100); /* due at 1200 */
    launch_fake_set_now(l, 1200);
    cr_assert_eq(dispatch(l, NULL), 1, "killed at the shortened deadline");
    launch_release(l, p);
    launch_release(l, q);
    launcher_destroy(l);
}

/* The core's deadline as a pure function: the earliest SIGKILL of a running process. */
Test(fake, next_kill_is_the_earliest_pending_one)
{
    struct launcher *l = fake_create();
    struct launch_core *c = (struct launch_core *)l;
    cr_assert_eq(launch_core_next_kill(c), -1);
    struct launch_proc *a = start(l, "0", 0), *b = start(l, "1", 0);
    launch_fake_set_now(l, 100);
    launch_stop(l, a, 900);
    launch_stop(l, b, 400);
    cr_assert_eq(launch_core_next_kill(c), 500);
    launch_fake_exit(l, b, 0, 0);
    dispatch(l, NULL);
    cr_assert_eq(launch_core_next_kill(c), 1000, "an exited process has no deadline");
    launcher_destroy(l);
}

/* Releasing a running process kills it; its exit is never reported and it is freed quietly. */
Test(fake, release_while_running_kills_quietly)
{
    struct launcher *l = fake_create();
    struct launch_proc *p = start(l, "0", 0);
    struct launch_proc *q = start(l, "1", 0);
    launch_release(l, p);
    cr_assert_eq(dispatch(l, NULL), 0, "a released process is not reported");
    cr_assert_eq(launch_core_live((struct launch_core *)l), 1);
    cr_assert_eq(((struct launch_core *)l)->n, 1, "and it is freed once it has ended");
    cr_assert_eq(((struct launch_core *)l)->v[0], q);
    launcher_destroy(l);
}
