// SPDX-License-Identifier: Apache-2.0
/*
 * The agent's decisions on a fake clock with the fake launcher (issue 37: tests that need no
 * clock): the whole agent — its one loop, the in-process (memory) store, the session's timers,
 * the lifecycle — runs in this process, time jumps from one deadline to the next, and a script
 * registered in the agent's loop decides when each "worker" exits and how it answers signals.
 * A run of minutes of agent time takes milliseconds, and no verdict depends on the machine's load.
 * The same behaviours keep their end-to-end tests with real processes (tests/e2e/).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "config.h"
#include "ea_loop.h"
#include "ea_time.h"
#include "fake.h"

extern char **environ;

#define MAX_PROCS 16
/* The fake clock's start (ms): far past the real CLOCK_MONOTONIC, so that the memory store's
 * lease timer (a real timerfd, armed at fake deadlines) never fires on its own: leases expire
 * when the store is next used, on the fake clock. */
#define T0 1000000000000LL

/* How a worker behaves: ends by itself at `after` ms (code), or runs until signalled; SIGTERM
 * obeyed or not. */
struct behaviour {
    int64_t after; /* -1: never by itself */
    int code;
    bool ignores_term;
};

struct script {
    struct launcher *l;
    struct behaviour (*plan)(int k); /* the k-th worker started */
    int64_t last_now;
    size_t seen;
    struct launch_proc *p[MAX_PROCS];
    pid_t pid[MAX_PROCS]; /* a new record may reuse an ended one's memory: the pid tells them apart */
    int64_t start[MAX_PROCS], term_at[MAX_PROCS], end_at[MAX_PROCS];
    int sigs[MAX_PROCS][4]; /* the first signals each got (the launcher is gone after the run) */
    size_t nsigs[MAX_PROCS];
    int64_t agent_sigterm_at; /* send SIGTERM to the agent then (-1: never) */
    int64_t (*step_of)(int k); /* the step the k-th worker beats when it starts (NULL: none) */
    bool sigterm_sent;
    /* the first start: held unconfirmed for this long (an ssh connection that does not answer),
     * or failed with this errno (a missing program); 0: neither */
    int64_t hold_first_ms;
    int fail_first;
    bool first_armed;
    bool hold_over; /* the held first start ended: its proc is not looked at again */
    int64_t prev_pass, max_gap_while_held; /* the loop's passes while the first start is held */
};

static struct ea_fake_clock fc;

static void run_script(void *ctx, int64_t now)
{
    struct script *s = ctx;
    cr_assert_lt(now - T0, 3600 * 1000, "an hour of agent time passed: the run never ended");
    if (!s->l)
        return;
    if (now != s->last_now) { /* the launcher's clock follows (its fd is raised only then) */
        launch_fake_set_now(s->l, now);
        s->last_now = now;
    }
    if (!s->first_armed) { /* the first pass, before the agent's own steps start anyone */
        s->first_armed = true;
        if (s->hold_first_ms)
            launch_fake_hold_next(s->l, s->hold_first_ms);
        if (s->fail_first)
            launch_fake_fail_next(s->l, -s->fail_first);
    }
    /* only while the held start is held: once it is not, its proc may be released (freed) */
    if (s->hold_first_ms && !s->hold_over && s->seen > 0) {
        if (!launch_fake_starting(s->p[0]))
            s->hold_over = true;
        else if (now - s->prev_pass > s->max_gap_while_held)
            s->max_gap_while_held = now - s->prev_pass;
    }
    s->prev_pass = now;
    struct launch_proc *p;
    for (size_t i = 0; (p = launch_fake_proc(s->l, i)); i++) {
        size_t k = 0;
        while (k < s->seen && (s->p[k] != p || s->pid[k] != launch_pid(s->l, p)))
            k++;
        if (k == s->seen) { /* started since the last pass */
            cr_assert_lt(s->seen, MAX_PROCS);
            s->p[k] = p;
            s->pid[k] = launch_pid(s->l, p);
            s->start[k] = now;
            s->term_at[k] = s->end_at[k] = -1;
            s->seen++;
            const char *hb = launch_fake_env(p, "ELASTIC_HEARTBEAT_FILE");
            if (s->step_of && hb) { /* what elastic_agent.beat(step) writes */
                FILE *f = fopen(hb, "w");
                cr_assert_not_null(f, "%s", hb);
                fprintf(f, "%lld\n", (long long)s->step_of((int)k));
                fclose(f);
            }
        }
        const int *sigs;
        size_t n = launch_fake_signals(p, &sigs);
        for (s->nsigs[k] = 0; s->nsigs[k] < n && s->nsigs[k] < 4; s->nsigs[k]++)
            s->sigs[k][s->nsigs[k]] = sigs[s->nsigs[k]];
        if (launch_fake_ended(p)) {
            if (s->end_at[k] < 0)
                s->end_at[k] = now;
            continue;
        }
        if (launch_fake_starting(p))
            continue; /* not running yet: it cannot end by itself */
        struct behaviour b = s->plan((int)k);
        bool term = false;
        for (size_t j = 0; j < n && j < LAUNCH_FAKE_SIGNALS_MAX; j++)
            term |= sigs[j] == SIGTERM;
        if (term && s->term_at[k] < 0)
            s->term_at[k] = now;
        if (term && !b.ignores_term) {
            launch_fake_exit(s->l, p, -1, SIGTERM);
            s->end_at[k] = now;
        } else if (b.after >= 0 && now >= s->start[k] + b.after) {
            launch_fake_exit(s->l, p, b.code, 0);
            s->end_at[k] = now;
        }
    }
    if (s->agent_sigterm_at >= 0 && now >= s->agent_sigterm_at && !s->sigterm_sent) {
        s->sigterm_sent = true;
        cr_assert_eq(kill(getpid(), SIGTERM), 0); /* blocked: it waits in the agent's signalfd */
    }
}

/* The next thing the script will do: a worker's own end, the agent's SIGTERM, a SIGKILL due. */
static int64_t script_wake(void *ctx)
{
    struct script *s = ctx;
    int64_t t = s->l ? launch_fake_next_kill(s->l) : -1;
#define EARLIER(x) t = t < 0 || ((x) >= 0 && (x) < t) ? (x) : t
    for (size_t k = 0; k < s->seen; k++) {
        struct behaviour b = s->plan((int)k);
        if (s->end_at[k] < 0 && b.after >= 0 && !launch_fake_starting(s->p[k]))
            EARLIER(s->start[k] + b.after);
    }
    if (!s->sigterm_sent)
        EARLIER(s->agent_sigterm_at);
#undef EARLIER
    return t;
}

static const struct ea_loop_step script_step = {"test-script", run_script, script_wake, false};

/* Run an agent with `args` (after the program name; the worker command after "--") on the fake
 * clock and the fake launcher, following `s`. Its exit code. */
static int run_agent(struct script *s, const char *const *args)
{
    char *argv[32] = {"elastic-agent"};
    int argc = 1;
    for (; args[argc - 1]; argc++)
        argv[argc] = (char *)args[argc - 1];
    struct cfg cfg;
    struct ea_error err = {0};
    cr_assert_eq(cfg_parse(argc, argv, environ, &cfg, &err), 0, "%s", err.msg);
    ea_fake_clock_init(&fc, T0);
    ea_time_override(fc.clock.now_ms, fc.clock.ctx);
    s->last_now = -1;
    struct agent_hooks hooks = {.clock = &fc.clock, .launcher = "fake", .step = &script_step,
                                .step_ctx = s, .ret_launcher = &s->l};
    int64_t real0 = 0;
    ea_time_override(NULL, NULL);
    real0 = ea_now_ms();
    ea_time_override(fc.clock.now_ms, fc.clock.ctx);
    int code = agent_run_hooked(&cfg, environ, &hooks);
    ea_time_override(NULL, NULL);
    cr_log_info("agent exit %d after %.1f s of agent time, %lld ms of real time, %lld waits",
                code, (double)(fc.now - T0) / 1000.0, (long long)(ea_now_ms() - real0),
                (long long)fc.waits);
    return code;
}

TestSuite(agent_decisions, .timeout = 30);

static struct behaviour rank0_fails_after_a_second(int k)
{
    return k % 2 == 0 ? (struct behaviour){.after = 1000, .code = 1}
                      : (struct behaviour){.after = -1};
}

/* A failed worker stops its group and starts a new round, until --max-restarts is spent: then the
 * agent exits 1. Mutation (scripts/mutants.d): the restart budget not checked. */
Test(agent_decisions, a_failed_worker_restarts_its_group_until_the_budget_is_spent)
{
    struct script s = {.plan = rank0_fails_after_a_second, .agent_sigterm_at = -1};
    const char *args[] = {"--standalone", "--nproc-per-node", "2", "--max-restarts", "2",
                          "--", "train", NULL};
    int code = run_agent(&s, args);
    cr_assert_eq(code, AGENT_EXIT_FAILED, "exit %d", code);
    cr_assert_eq(s.seen, 6, "3 rounds of 2 workers (the first and 2 restarts), %zu started",
                 s.seen);
    for (size_t k = 1; k < s.seen; k += 2)
        cr_assert_geq(s.term_at[k], 0, "the failed worker's peer %zu got SIGTERM", k);
    for (size_t k = 2; k < s.seen; k += 2)
        cr_assert_geq(s.start[k], s.end_at[k - 1], "round %zu started after the last one ended",
                      k / 2);
}

static struct behaviour everyone_succeeds(int k)
{
    return (struct behaviour){.after = 500 + 100 * k, .code = 0};
}

Test(agent_decisions, workers_that_all_succeed_end_the_run_with_0)
{
    struct script s = {.plan = everyone_succeeds, .agent_sigterm_at = -1};
    const char *args[] = {"--standalone", "--nproc-per-node", "3", "--", "train", NULL};
    cr_assert_eq(run_agent(&s, args), AGENT_EXIT_OK);
    cr_assert_eq(s.seen, 3, "one round, %zu started", s.seen);
    for (size_t k = 0; k < s.seen; k++)
        cr_assert_eq(s.term_at[k], -1, "nobody signalled (%zu)", k);
}

static struct behaviour rank1_ignores_sigterm(int k)
{
    return k == 0 ? (struct behaviour){.after = 2000, .code = 3}
                  : (struct behaviour){.after = -1, .ignores_term = true};
}

/* A worker that ignores SIGTERM is killed when --stop-timeout has passed, not before. Mutation
 * (scripts/mutants.d): the grace's deadline. */
Test(agent_decisions, a_worker_that_ignores_sigterm_is_killed_after_the_stop_timeout)
{
    struct script s = {.plan = rank1_ignores_sigterm, .agent_sigterm_at = -1};
    const char *args[] = {"--standalone", "--nproc-per-node", "2", "--max-restarts", "0",
                          "--stop-timeout", "7", "--", "train", NULL};
    cr_assert_eq(run_agent(&s, args), AGENT_EXIT_FAILED);
    cr_assert_eq(s.seen, 2);
    cr_assert_geq(s.term_at[1], 0, "SIGTERM first");
    cr_assert_eq(s.nsigs[1], 2, "%zu signals", s.nsigs[1]);
    cr_assert_eq(s.sigs[1][0], SIGTERM);
    cr_assert_eq(s.sigs[1][1], SIGKILL);
    cr_assert_eq(s.end_at[1] - s.term_at[1], 7000, "killed %lld ms after SIGTERM",
                 (long long)(s.end_at[1] - s.term_at[1]));
}

static struct behaviour run_forever(int k)
{
    (void)k;
    return (struct behaviour){.after = -1};
}

/* SIGTERM to the agent: its workers are stopped, it leaves the run, it exits 128+15. */
Test(agent_decisions, sigterm_stops_the_workers_and_exits_143)
{
    struct script s = {.plan = run_forever, .agent_sigterm_at = T0 + 5000};
    const char *args[] = {"--standalone", "--nproc-per-node", "2", "--", "train", NULL};
    cr_assert_eq(run_agent(&s, args), 128 + SIGTERM);
    cr_assert_eq(s.seen, 2);
    for (size_t k = 0; k < 2; k++) {
        cr_assert_geq(s.term_at[k], T0 + 5000, "worker %zu: SIGTERM after the agent's", k);
        cr_assert_geq(s.end_at[k], 0, "worker %zu ended", k);
    }
}

/* The failure event of the run's events file (--events) for `local_rank`, spaces taken out:
 * whether it holds `want` (e.g. "\"exit_code\":126"). */
static bool failure_event_has(const char *path, int local_rank, const char *want)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    char line[4096], flat[4096], lr[64];
    snprintf(lr, sizeof(lr), "\"local_rank\":%d,", local_rank);
    bool found = false;
    while (!found && fgets(line, sizeof(line), f)) {
        size_t k = 0;
        for (const char *c = line; *c && k + 1 < sizeof(flat); c++)
            if (*c != ' ' && *c != '\n')
                flat[k++] = *c;
        flat[k] = '\0';
        found = strstr(flat, "\"event\":\"failure\"") && strstr(flat, lr) && strstr(flat, want);
    }
    fclose(f);
    return found;
}

static bool events_mention(const char *path, const char *what)
{
    char buf[1 << 16];
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, what) != NULL;
}

/* A start the launcher has not confirmed yet (an ssh connection being set up that never answers)
 * does not hold the agent's loop: its passes go on (the lease's renewals among them: no pass is
 * further apart than a third of --lease-ttl 3, and the lease is never lost), and at the start's
 * deadline (60 s here) it is a failure charged to that local rank with exit code 126; the
 * restart's round then succeeds. Before issue 37 the ssh launcher's start() blocked the loop for
 * the whole connect. */
Test(agent_decisions, an_unconfirmed_start_does_not_hold_the_loop_and_fails_its_rank_at_its_deadline)
{
    char events[] = "/tmp/ea_decisions_events_XXXXXX";
    int fd = mkstemp(events);
    cr_assert_geq(fd, 0);
    close(fd);
    struct script s = {.plan = everyone_succeeds, .agent_sigterm_at = -1, .hold_first_ms = 60000};
    const char *args[] = {"--standalone", "--nproc-per-node", "2", "--max-restarts", "1",
                          "--lease-ttl", "3", "--events", events, "--", "train", NULL};
    int code = run_agent(&s, args);
    cr_assert_eq(code, AGENT_EXIT_OK, "exit %d", code);
    cr_assert_eq(s.seen, 4, "2 rounds of 2 workers, %zu started", s.seen);
    cr_assert_eq(s.end_at[0] - s.start[0], 60000, "the held start ended at its deadline (%lld)",
                 (long long)(s.end_at[0] - s.start[0]));
    cr_assert_gt(s.max_gap_while_held, 0);
    cr_assert_leq(s.max_gap_while_held, 1000, "the loop's passes stayed a renewal apart: %lld ms",
                  (long long)s.max_gap_while_held);
    cr_assert(failure_event_has(events, 0, "\"exit_code\":126"), "a failure of local rank 0, 126");
    cr_assert_not(events_mention(events, "lease_lost"), "the lease was never lost");
    unlink(events);
}

/* A start that fails (its program is missing) is a failure charged to that local rank with exit
 * code 127, as when start() reported it itself: no restart budget, the agent exits 1. */
Test(agent_decisions, a_missing_program_is_a_failure_of_its_rank_with_127)
{
    char events[] = "/tmp/ea_decisions_events_XXXXXX";
    int fd = mkstemp(events);
    cr_assert_geq(fd, 0);
    close(fd);
    struct script s = {.plan = run_forever, .agent_sigterm_at = -1, .fail_first = ENOENT};
    const char *args[] = {"--standalone", "--nproc-per-node", "2", "--events", events, "--",
                          "train", NULL};
    cr_assert_eq(run_agent(&s, args), AGENT_EXIT_FAILED);
    cr_assert(failure_event_has(events, 0, "\"exit_code\":127"), "a failure of local rank 0, 127");
    cr_assert_geq(s.term_at[1], 0, "its peer was stopped");
    unlink(events);
}

static struct behaviour fails_after_a_second(int k)
{
    (void)k;
    return (struct behaviour){.after = 1000, .code = 3};
}

static int64_t always_step_50(int k)
{
    (void)k;
    return 50;
}

static int64_t ten_steps_further_each_time(int k)
{
    return 10 * (k + 1);
}

/* Progress-aware restarts (issue 40): the same failure at step 50, three times in a row, ends
 * the run although --max-restarts allows 100. Mutation (scripts/mutants.d/progress.sh): the
 * coordinator not reading the record's stop. */
Test(agent_decisions, the_same_failure_at_the_same_step_ends_the_run_after_3)
{
    struct script s = {.plan = fails_after_a_second, .agent_sigterm_at = -1,
                       .step_of = always_step_50};
    const char *args[] = {"--standalone", "--max-restarts", "100", "--", "train", NULL};
    int code = run_agent(&s, args);
    cr_assert_eq(code, AGENT_EXIT_FAILED, "exit %d", code);
    cr_assert_eq(s.seen, 3, "the first round and 2 restarts without progress, %zu started",
                 s.seen);
}

/* ... and a run that gets further each time is never stopped by it: --max-restarts is spent. */
Test(agent_decisions, failures_that_progress_spend_max_restarts)
{
    struct script s = {.plan = fails_after_a_second, .agent_sigterm_at = -1,
                       .step_of = ten_steps_further_each_time};
    const char *args[] = {"--standalone", "--max-restarts", "8", "--", "train", NULL};
    int code = run_agent(&s, args);
    cr_assert_eq(code, AGENT_EXIT_FAILED, "exit %d", code);
    cr_assert_eq(s.seen, 9, "the first round and 8 restarts, %zu started", s.seen);
}
