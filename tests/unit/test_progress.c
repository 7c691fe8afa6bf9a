// SPDX-License-Identifier: Apache-2.0
/* agent/progress: the no-progress rule on synthetic failure sequences (no clock, no store), the
 * step a rank's file says, the failure record's progress codec, and the plan's stop. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plan.h"
#include "progress.h"
#include "state.h"

static struct rdzv_failure fail_at(const char *node, int rank, int code, int sig)
{
    struct rdzv_failure f;
    memset(&f, 0, sizeof(f));
    snprintf(f.node_id, sizeof(f.node_id), "%s", node);
    snprintf(f.host, sizeof(f.host), "h-%s", node);
    f.rank = rank;
    f.exit_code = sig ? -1 : code;
    f.signal = sig;
    snprintf(f.message, sizeof(f.message), "bad batch\nTraceback: boom");
    return f;
}

/* Run a sequence of failures (each at steps[i]) through pg_next as the agents would, each record
 * following on from the previous one; the index of the first stop, or -1. */
static int run_sequence(const struct rdzv_failure *fs, const int64_t *steps, int n, int limit,
                        struct rdzv_failure *ret_last)
{
    struct rdzv_failure prev, cur;
    for (int i = 0; i < n; i++) {
        cur = fs[i];
        pg_next(i ? &prev : NULL, &cur, steps[i], limit, &cur.progress);
        prev = cur;
        if (ret_last)
            *ret_last = cur;
        if (cur.progress.stop)
            return i;
    }
    return -1;
}

Test(progress, the_same_failure_at_the_same_step_stops_at_the_limit)
{
    struct rdzv_failure fs[10];
    int64_t steps[10];
    for (int i = 0; i < 10; i++) {
        fs[i] = fail_at("n1", 0, 3, 0);
        steps[i] = 50;
    }
    struct rdzv_failure last;
    /* the first failure sets the step, the 2nd and 3rd come after restarts without progress */
    cr_assert_eq(run_sequence(fs, steps, 10, 3, &last), 2);
    cr_assert_eq(last.progress.repeat, 3);
    cr_assert_eq(last.progress.no_progress, 2);
    cr_assert_eq(last.progress.best, 50);
    cr_assert_eq(run_sequence(fs, steps, 10, 5, NULL), 4);
    cr_assert_eq(run_sequence(fs, steps, 10, 0, NULL), -1, "0: off");
}

Test(progress, a_run_that_progresses_is_never_stopped)
{
    /* random failures, each after the run got past the last one's step (it resumes from a
     * checkpoint): whatever the limit, never a stop */
    struct rdzv_failure fs[200];
    int64_t steps[200];
    unsigned seed = 40;
    int64_t step = 0;
    for (int i = 0; i < 200; i++) {
        fs[i] = fail_at("n1", 0, 1, 0); /* the same rank, the same way, every time */
        step += 1 + rand_r(&seed) % 30;
        steps[i] = step;
    }
    struct rdzv_failure last;
    cr_assert_eq(run_sequence(fs, steps, 200, 1, &last), -1);
    cr_assert_eq(last.progress.no_progress, 0);
    cr_assert_eq(last.progress.repeat, 1);
    cr_assert_eq(last.progress.best, step);
}

Test(progress, progress_resets_the_counts)
{
    struct rdzv_failure fs[6];
    for (int i = 0; i < 6; i++)
        fs[i] = fail_at("n1", 2, 1, 0);
    /* 100, 100 (no progress), 150 (progress: counts start again), 150, 150 (stop at 3) */
    int64_t steps[6] = {100, 100, 150, 150, 150, 150};
    struct rdzv_failure last;
    cr_assert_eq(run_sequence(fs, steps, 6, 3, &last), 4);
    cr_assert_eq(last.progress.best, 150);
    cr_assert_eq(last.progress.repeat, 3);
    cr_assert_eq(last.progress.no_progress, 2);
}

Test(progress, a_lower_step_after_a_restart_is_no_progress)
{
    /* restarted from an old checkpoint: failing at 80 after 100 did not get anywhere */
    struct rdzv_failure fs[3] = {fail_at("n1", 0, 1, 0), fail_at("n1", 0, 1, 0),
                                 fail_at("n1", 0, 1, 0)};
    int64_t steps[3] = {100, 80, 90};
    struct rdzv_failure last;
    cr_assert_eq(run_sequence(fs, steps, 3, 3, &last), 2);
    cr_assert_eq(last.progress.best, 100);
}

Test(progress, different_failures_count_as_restarts_without_progress)
{
    /* never the same failure twice in a row, never progress: the job-wide count stops it once
     * `limit` restarts went nowhere */
    struct rdzv_failure fs[6] = {fail_at("n1", 0, 1, 0), fail_at("n2", 4, 1, 0),
                                 fail_at("n1", 0, 2, 0), fail_at("n3", 8, 0, 9),
                                 fail_at("n1", 1, 1, 0), fail_at("n2", 5, 1, 0)};
    int64_t steps[6] = {10, 10, 10, 10, 10, 10};
    struct rdzv_failure last;
    cr_assert_eq(run_sequence(fs, steps, 6, 3, &last), 3);
    cr_assert_eq(last.progress.repeat, 1);
    cr_assert_eq(last.progress.no_progress, 3);
}

Test(progress, the_same_failure_is_the_same_rank_or_node_and_the_same_exit)
{
    struct rdzv_failure a = fail_at("n1", 3, 1, 0);
    struct rdzv_failure b = fail_at("n1", 5, 1, 0); /* same node, other rank */
    cr_assert(pg_same(&a, &b));
    b = fail_at("n9", 3, 1, 0); /* same rank position, other node (it was replaced) */
    cr_assert(pg_same(&a, &b));
    b = fail_at("n9", 4, 1, 0);
    cr_assert_not(pg_same(&a, &b));
    b = fail_at("n1", 3, 2, 0);
    cr_assert_not(pg_same(&a, &b), "another exit code");
    b = fail_at("n1", 3, 0, 11);
    struct rdzv_failure c = fail_at("n1", 3, 0, 6);
    cr_assert_not(pg_same(&b, &c), "another signal");
    /* a different failure at the same step: no progress, but the repeat starts again */
    struct rdzv_failure fs[3] = {fail_at("n1", 0, 1, 0), fail_at("n1", 0, 1, 0),
                                 fail_at("n2", 4, 7, 0)};
    int64_t steps[3] = {10, 10, 10};
    struct rdzv_failure last;
    cr_assert_eq(run_sequence(fs, steps, 3, 3, &last), -1);
    cr_assert_eq(last.progress.repeat, 1);
    cr_assert_eq(last.progress.no_progress, 2);
}

Test(progress, no_step_known_is_never_a_stop)
{
    /* workers that never beat a step: nothing can be said about progress */
    struct rdzv_failure fs[10];
    int64_t steps[10];
    for (int i = 0; i < 10; i++) {
        fs[i] = fail_at("n1", 0, 1, 0);
        steps[i] = -1;
    }
    cr_assert_eq(run_sequence(fs, steps, 10, 2, NULL), -1);
    /* but a run that had beaten and now fails before its first beat got nowhere */
    steps[0] = 30;
    cr_assert_eq(run_sequence(fs, steps, 10, 2, NULL), 1);
    /* a previous record without progress (an older writer's) is no failure to compare with */
    struct rdzv_failure old = fail_at("n1", 0, 1, 0), f = fail_at("n1", 0, 1, 0);
    pg_next(&old, &f, 30, 1, &f.progress);
    cr_assert_eq(f.progress.repeat, 1);
    cr_assert_eq(f.progress.no_progress, 0);
    cr_assert_not(f.progress.stop);
}

Test(progress, the_stop_message_says_it_once)
{
    struct rdzv_failure fs[3] = {fail_at("n1", 0, 3, 0), fail_at("n1", 0, 3, 0),
                                 fail_at("n1", 0, 3, 0)};
    int64_t steps[3] = {1200, 1200, 1200};
    struct rdzv_failure last;
    cr_assert_eq(run_sequence(fs, steps, 3, 3, &last), 2);
    char msg[8192];
    pg_stop_message(&last, msg, sizeof(msg));
    cr_assert_str_eq(msg, "the same failure 3 times in a row at step 1200, no progress: rank 0 "
                          "(node 'n1'): bad batch | Traceback: boom");
    struct rdzv_failure fs2[4] = {fail_at("n1", 0, 1, 0), fail_at("n2", 4, 1, 0),
                                  fail_at("n1", 0, 2, 0), fail_at("n3", 8, 0, 9)};
    int64_t steps2[4] = {7, 7, 7, 7};
    cr_assert_eq(run_sequence(fs2, steps2, 4, 3, &last), 3);
    snprintf(last.message, sizeof(last.message), "killed\x1b[2J");
    pg_stop_message(&last, msg, sizeof(msg));
    cr_assert_str_eq(msg, "3 restarts in a row without progress past step 7: rank 8 (node 'n3'): "
                          "killed?[2J");
    char small[20];
    pg_stop_message(&last, small, sizeof(small));
    cr_assert_lt(strlen(small), sizeof(small));
}

Test(progress, a_rank_file_says_its_step)
{
    cr_assert_eq(pg_parse_step("1234\n", 5), 1234);
    cr_assert_eq(pg_parse_step("  77 0.25\n", 10), 77);
    cr_assert_eq(pg_parse_step("0", 1), 0);
    cr_assert_eq(pg_parse_step("checkpoint\n", 11), -1);
    cr_assert_eq(pg_parse_step("3rd\n", 4), -1);
    cr_assert_eq(pg_parse_step("\n", 1), -1);
    cr_assert_eq(pg_parse_step("", 0), -1);
    cr_assert_eq(pg_parse_step("-5\n", 3), -1);
    cr_assert_eq(pg_parse_step("99999999999999999999999\n", 24), -1);
}

Test(progress, the_steps_are_read_from_the_round_s_files)
{
    char dir[] = "/tmp/test_progress.XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char hb[256], path[300];
    snprintf(hb, sizeof(hb), "%s/heartbeat", dir);
    struct pg *p = NULL;
    cr_assert_eq(pg_create(0, false, 0, &p, NULL), 0);
    cr_assert_null(p, "0: off");
    cr_assert_eq(pg_create(3, false, 0, &p, NULL), 0);
    cr_assert_eq(pg_arm(p, hb, true, 2, 4, 1000, NULL), 0);
    cr_assert_eq(pg_read(p, 1000), -1, "nobody beat yet");
    snprintf(path, sizeof(path), "%s/rank_4", hb);
    FILE *f = fopen(path, "w");
    fputs("41\n", f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/rank_5", hb);
    f = fopen(path, "w");
    fputs("43 0.5\n", f); /* with a compute time (straggler detection) */
    fclose(f);
    cr_assert_not(pg_due(p, 1000 + PG_READ_MS - 1));
    cr_assert(pg_due(p, 1000 + PG_READ_MS));
    cr_assert_eq(pg_read(p, 2000), 43);
    cr_assert_float_eq(p->compute[0], 0, 1e-12, "a step alone");
    cr_assert_float_eq(p->compute[1], 0.5, 1e-12);
    cr_assert_eq(pg_wake_ms(p), 2000 + PG_READ_MS);
    /* the run's last failure was at 42: 43 is past it, reported once */
    p->run = (struct rdzv_progress){.step = 42, .best = 42, .no_progress = 2, .repeat = 3};
    p->run_round = 7;
    cr_assert_eq(pg_no_progress(p), 2);
    cr_assert(pg_passed(p));
    cr_assert_not(pg_passed(p));
    cr_assert_eq(pg_no_progress(p), 0);
    /* the next round starts with its files gone */
    cr_assert_eq(pg_arm(p, hb, true, 2, 4, 3000, NULL), 0);
    cr_assert_eq(pg_read(p, 3000), -1);
    pg_destroy(p);
    snprintf(path, sizeof(path), "rm -rf '%s'", dir);
    cr_assert_eq(system(path), 0);
}

Test(progress, the_record_carries_progress)
{
    struct rdzv_failure f = fail_at("n1", 2, 1, 0), back;
    char *json = NULL;
    cr_assert_eq(rdzv_failure_encode(&f, &json, NULL), 0);
    cr_assert_null(strstr(json, "progress"), "nothing known: not written");
    cr_assert_eq(rdzv_failure_decode(json, strlen(json), &back, NULL), 0);
    cr_assert_eq(back.progress.step, -1);
    cr_assert_eq(back.progress.best, -1);
    cr_assert_eq(back.progress.repeat, 0);
    free(json);
    f.progress =
        (struct rdzv_progress){.step = 50, .best = 60, .no_progress = 2, .repeat = 3, .stop = true};
    cr_assert_eq(rdzv_failure_encode(&f, &json, NULL), 0);
    cr_assert_eq(rdzv_failure_decode(json, strlen(json), &back, NULL), 0);
    cr_assert_eq(back.progress.step, 50);
    cr_assert_eq(back.progress.best, 60);
    cr_assert_eq(back.progress.no_progress, 2);
    cr_assert_eq(back.progress.repeat, 3);
    cr_assert(back.progress.stop);
    free(json);
    const char *bad[] = {
        "{\"schema\":\"elastic-agent/"
        "v2\",\"node\":\"n\",\"host\":\"h\",\"rank\":0,\"local_rank\":0,\"exit_code\":1,\"signal\":"
        "0,"
        "\"pid\":1,\"time_ms\":1,\"message\":\"m\",\"progress\":{\"step\":9,\"best\":8,"
        "\"no_progress\":0,\"repeat\":1,\"stop\":false}}",
        "{\"schema\":\"elastic-agent/"
        "v2\",\"node\":\"n\",\"host\":\"h\",\"rank\":0,\"local_rank\":0,\"exit_code\":1,\"signal\":"
        "0,"
        "\"pid\":1,\"time_ms\":1,\"message\":\"m\",\"progress\":{\"step\":9,\"best\":9,"
        "\"no_progress\":-1,\"repeat\":1,\"stop\":false}}",
        "{\"schema\":\"elastic-agent/"
        "v2\",\"node\":\"n\",\"host\":\"h\",\"rank\":0,\"local_rank\":0,\"exit_code\":1,\"signal\":"
        "0,"
        "\"pid\":1,\"time_ms\":1,\"message\":\"m\",\"progress\":{\"step\":9,\"best\":9,"
        "\"no_progress\":0,\"repeat\":0,\"stop\":true}}",
        "{\"schema\":\"elastic-agent/"
        "v2\",\"node\":\"n\",\"host\":\"h\",\"rank\":0,\"local_rank\":0,\"exit_code\":1,\"signal\":"
        "0,"
        "\"pid\":1,\"time_ms\":1,\"message\":\"m\",\"progress\":\"yes\"}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct ea_error err = {0};
        cr_assert_eq(rdzv_failure_decode(bad[i], strlen(bad[i]), &back, &err), -EBADMSG, "bad %zu",
                     i);
        cr_assert(strstr(err.msg, "field 'progress'"), "bad %zu: %s", i, err.msg);
    }
    /* the same record with a good progress is ours */
    const char *good = "{\"schema\":\"elastic-agent/v2\",\"node\":\"n\",\"host\":\"h\",\"rank\":0,"
                       "\"local_rank\":0,\"exit_code\":1,\"signal\":0,\"pid\":1,\"time_ms\":1,"
                       "\"message\":\"m\",\"progress\":{\"step\":-1,\"best\":8,\"no_progress\":1,"
                       "\"repeat\":1,\"stop\":false}}";
    cr_assert_eq(rdzv_failure_decode(good, strlen(good), &back, NULL), 0);
    cr_assert_eq(back.progress.step, -1);
}

Test(progress, the_state_names_the_last_failure)
{
    struct rdzv_params P = {
        .min_nodes = 1, .max_nodes = 2, .max_restarts = 100, .lease_ttl_ms = 10000};
    struct rdzv_node nodes[2] = {
        {.node_id = "a", .host = "a", .addr = "10.0.0.1", .nproc = 1, .create_revision = 5},
        {.node_id = "b", .host = "b", .addr = "10.0.0.2", .nproc = 1, .create_revision = 6}};
    struct rdzv_member m[2] = {{.node_id = "a", .nproc = 1, .group_rank = 0, .rank_base = 0},
                               {.node_id = "b", .nproc = 1, .group_rank = 1, .rank_base = 1}};
    struct rdzv_state s = {.round = 4,
                           .status = RDZV_RUNNING,
                           .members = m,
                           .n_members = 2,
                           .group_world_size = 2,
                           .n_chunks = 1,
                           .world_size = 2,
                           .restart_count = 1,
                           .max_restarts = 100,
                           .min_nodes = 1,
                           .max_nodes = 2,
                           .last_failure = 2};
    struct rdzv_state next = {0};
    /* a failure with budget left restarts, and the next round's record follows on from it */
    cr_assert_eq(rdzv_plan_failure_ex(&P, &s, nodes, 2, false, &next, NULL), 1);
    cr_assert_eq(next.status, RDZV_RUNNING);
    cr_assert_eq(next.last_failure, 4);
    char *json = NULL;
    struct rdzv_state back = {0};
    cr_assert_eq(rdzv_state_encode(&next, &json, NULL), 0);
    cr_assert_eq(rdzv_state_decode(json, strlen(json), &back, NULL), 0);
    cr_assert_eq(back.last_failure, 4);
    free(json);
    rdzv_state_clear(&back);
    /* a last failure after the state's own round is not ours: refused, never followed */
    next.last_failure = next.round + 1;
    cr_assert_eq(rdzv_state_encode(&next, &json, NULL), 0);
    cr_assert_eq(rdzv_state_decode(json, strlen(json), &back, NULL), -EBADMSG);
    free(json);
    rdzv_state_clear(&next);
    /* the record says stop: never a restart, whatever the budget */
    cr_assert_eq(rdzv_plan_failure_ex(&P, &s, nodes, 2, true, &next, NULL), 1);
    cr_assert_eq(next.status, RDZV_FAILING);
    cr_assert_eq(next.charge_failed_round, 4);
    cr_assert_eq(next.last_failure, 4);
    rdzv_state_clear(&next); /* its members are a copy of s's (rdzv_state_copy): ours to free */
    s.n_members = 1;
    s.group_world_size = 1;
    s.world_size = 1;
    cr_assert_eq(rdzv_plan_failure_ex(&P, &s, nodes, 1, true, &next, NULL), 1);
    cr_assert_eq(next.status, RDZV_FAILED);
    cr_assert_eq(next.failure_round, 4);
    rdzv_state_clear(&next);
}
