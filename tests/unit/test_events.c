// SPDX-License-Identifier: Apache-2.0
/*
 * events: every line is one JSON object with the common fields; the run-level events derived
 * from successive states come out in order with the right cause (first round, failure restart,
 * node lost, refund, scale-up, terminal status); two streams appending to one file never mix
 * within a line.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "events.h"

static char path[] = "/tmp/ea-events-XXXXXX";
static json_t *lines[64];
static size_t n_lines;

static void setup(void)
{
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
}

static void teardown(void)
{
    for (size_t i = 0; i < n_lines; i++)
        json_decref(lines[i]);
    n_lines = 0;
    unlink(path);
}

TestSuite(events, .init = setup, .fini = teardown);

/* Parse the file: every line must be a JSON object with the common fields. */
static void load(void)
{
    regex_t re;
    cr_assert_eq(regcomp(&re, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$",
                         REG_EXTENDED | REG_NOSUB),
                 0);
    FILE *f = fopen(path, "r");
    cr_assert(f);
    char buf[4096];
    while (fgets(buf, sizeof(buf), f)) {
        cr_assert(strchr(buf, '\n'), "every event ends with a newline");
        json_error_t jerr;
        json_t *o = json_loads(buf, 0, &jerr);
        cr_assert(json_is_object(o), "not a JSON object: %s (%s)", buf, jerr.text);
        const char *t = json_string_value(json_object_get(o, "time"));
        cr_assert(t && regexec(&re, t, 0, NULL, 0) == 0, "time '%s' is not RFC 3339 UTC ms",
                  t ? t : "(none)");
        cr_assert(json_is_string(json_object_get(o, "event")));
        cr_assert(json_is_string(json_object_get(o, "run_id")));
        cr_assert(json_is_string(json_object_get(o, "node")));
        cr_assert(json_is_integer(json_object_get(o, "round")));
        cr_assert(json_is_integer(json_object_get(o, "generation")));
        cr_assert_lt(n_lines, 64);
        lines[n_lines++] = o;
    }
    fclose(f);
    regfree(&re);
}

static const char *ev(size_t i)
{
    return json_string_value(json_object_get(lines[i], "event"));
}

static json_int_t num(size_t i, const char *k)
{
    return json_integer_value(json_object_get(lines[i], k));
}

static const char *str(size_t i, const char *k)
{
    return json_string_value(json_object_get(lines[i], k));
}

Test(events, emit_writes_common_and_own_fields)
{
    struct events *e = NULL;
    cr_assert_eq(events_open(path, false, "job", "n0", &e, NULL), 0);
    events_emit(e, "joined", 0, 0, "{s:s, s:i}", "backend", "file", "nproc", 2);
    events_emit(e, "left", 3, 17, NULL);
    events_close(e);
    load();
    cr_assert_eq(n_lines, 2);
    cr_assert_str_eq(ev(0), "joined");
    cr_assert_str_eq(str(0, "run_id"), "job");
    cr_assert_str_eq(str(0, "node"), "n0");
    cr_assert_str_eq(str(0, "backend"), "file");
    cr_assert_eq(num(0, "nproc"), 2);
    cr_assert_str_eq(ev(1), "left");
    cr_assert_eq(num(1, "round"), 3);
    cr_assert_eq(num(1, "generation"), 17);
}

Test(events, no_stream_is_a_no_op)
{
    struct events *e = (struct events *)1;
    cr_assert_eq(events_open(NULL, false, "job", "n0", &e, NULL), 0);
    cr_assert_null(e);
    events_emit(e, "joined", 0, 0, NULL);
    events_observe(e, NULL, 0);
    events_close(e);
    struct ea_error err = {0};
    cr_assert_lt(events_open("/nonexistent/dir/x", false, "job", "n0", &e, &err), 0);
    cr_assert(strstr(err.msg, "/nonexistent/dir/x"), "%s", err.msg);
}

/* A state with the given members (ids), 1 worker each. */
static struct rdzv_state state(enum rdzv_status st, int64_t round, int restarts,
                               int64_t charge_round, const char *ids)
{
    static struct rdzv_member ms[8];
    struct rdzv_state s = {.round = round,
                           .status = st,
                           .members = ms,
                           .restart_count = restarts,
                           .max_restarts = 2,
                           .min_nodes = 1,
                           .max_nodes = 8,
                           .charge_round = charge_round};
    memset(ms, 0, sizeof(ms));
    for (const char *p = ids; *p; p++) {
        struct rdzv_member *m = &ms[s.n_members];
        snprintf(m->node_id, sizeof(m->node_id), "%c", *p);
        snprintf(m->host, sizeof(m->host), "h%c", *p);
        m->nproc = 1;
        m->group_rank = m->rank_base = (int)s.n_members++;
    }
    s.world_size = s.group_world_size = (int)s.n_members;
    return s;
}

Test(events, observed_states_become_run_events_in_order)
{
    struct events *e = NULL;
    cr_assert_eq(events_open(path, false, "job", "b", &e, NULL), 0);
    struct rdzv_state s;
    s = state(RDZV_WAITING, 0, 0, 0, "");
    events_observe(e, &s, 2); /* nothing runs yet: nothing to say */
    s = state(RDZV_RUNNING, 1, 0, 0, "ab");
    events_observe(e, &s, 5);
    events_observe(e, &s, 5); /* unchanged: silent */
    s = state(RDZV_RUNNING, 2, 1, 2, "ab");
    events_observe(e, &s, 9);
    s = state(RDZV_RUNNING, 3, 0, 0, "b"); /* a was lost: the charge is refunded */
    events_observe(e, &s, 12);
    s = state(RDZV_RUNNING, 4, 0, 0, "bc");
    events_observe(e, &s, 15);
    s = state(RDZV_SUCCEEDED, 4, 0, 0, "bc");
    events_observe(e, &s, 18);
    events_close(e);
    load();
    const char *want[] = {"round_committed", "round_committed",  "restart",         "node_lost",
                          "round_committed", "restart_refunded", "round_committed", "status"};
    cr_assert_eq(n_lines, sizeof(want) / sizeof(*want));
    for (size_t i = 0; i < n_lines; i++)
        cr_assert_str_eq(ev(i), want[i], "event %zu", i);
    cr_assert_str_eq(str(0, "cause"), "first");
    cr_assert_eq(num(0, "round"), 1);
    cr_assert_eq(num(0, "generation"), 5);
    cr_assert_eq(num(0, "group_rank"), 1);
    cr_assert_eq(num(0, "members"), 2);
    cr_assert_str_eq(str(1, "cause"), "failure");
    cr_assert_eq(num(2, "restart_count"), 1);
    cr_assert(json_is_true(json_object_get(lines[2], "provisional")));
    cr_assert_str_eq(str(3, "lost_node"), "a");
    cr_assert_str_eq(str(4, "cause"), "node_lost");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(lines[4], "removed"), 0)),
                     "a");
    cr_assert_str_eq(str(6, "cause"), "scale_up");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(lines[6], "added"), 0)), "c");
    cr_assert_str_eq(str(7, "status"), "succeeded");
    cr_assert_str_eq(str(7, "previous"), "running");
}

/* Issue 19: a failure past the budget stops the run (failing, then failed); no "restart" event
 * claims a restart that never happened (nor shows more restarts than the budget). */
Test(events, failure_past_the_budget_is_no_restart)
{
    /* mutation checked: the `s->status != RDZV_FAILED` guard removed in events_observe: fails */
    struct events *e = NULL;
    cr_assert_eq(events_open(path, false, "job", "b", &e, NULL), 0);
    struct rdzv_state s;
    s = state(RDZV_RUNNING, 1, 2, 0, "ab");
    events_observe(e, &s, 5);
    s = state(RDZV_FAILING, 1, 2, 1, "ab");
    events_observe(e, &s, 7);
    s = state(RDZV_FAILED, 1, 3, 0, "ab");
    events_observe(e, &s, 9);
    events_close(e);
    load();
    const char *want[] = {"round_committed", "status", "status"};
    cr_assert_eq(n_lines, sizeof(want) / sizeof(*want));
    for (size_t i = 0; i < n_lines; i++)
        cr_assert_str_eq(ev(i), want[i], "event %zu", i);
    cr_assert_str_eq(str(1, "status"), "failing");
    cr_assert_str_eq(str(2, "status"), "failed");
}

Test(events, two_streams_share_one_file_line_by_line)
{
    struct events *a = NULL, *b = NULL;
    cr_assert_eq(events_open(path, false, "job", "a", &a, NULL), 0);
    cr_assert_eq(events_open(path, false, "job", "b", &b, NULL), 0);
    char big[2000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    for (int i = 0; i < 10; i++) {
        events_emit(a, "tick", i, 0, "{s:s}", "pad", big);
        events_emit(b, "tick", i, 0, "{s:s}", "pad", big);
    }
    events_close(a);
    events_close(b);
    load();
    cr_assert_eq(n_lines, 20);
}
