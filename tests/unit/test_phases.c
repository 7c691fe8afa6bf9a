// SPDX-License-Identifier: Apache-2.0
/* ph (agent/observe/phases.c): the recovery clock's marks, its record, text, JSON and the
 * Prometheus histogram, which must pass `promtool check metrics`; and the last recovery as
 * `status` picks it from the run's keys (agent/observe/health_view.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "health_view.h"
#include "metrics.h"
#include "phases.h"

/* A hang that began at 1000 (wall ms), seen at 6000, committed at 6012, spawned at 6020, every
 * rank beat 3.1 s later. */
static void hang_round(struct ph *p)
{
    ph_detect(p, 1000, 6000, "hang");
    ph_detect(p, -1, 6005, "membership"); /* the stop that follows does not move the mark */
    ph_committed(p, 2, 6012, 0);
    cr_assert_not(ph_spawned(p, 6020, 500, true, false));
    cr_assert(ph_waiting_ready(p));
    cr_assert(ph_ready(p, 3600));
}

/* mutation: ph_detect() letting a later mark replace the first → detect 5.005 s, not 5.0 s */
Test(phases, a_hang_round_has_all_four_phases)
{
    struct ph p;
    ph_init(&p);
    hang_round(&p);
    cr_assert_eq(p.last.round, 2);
    cr_assert_str_eq(p.last.cause, "hang");
    cr_assert_float_eq(p.last.s[PH_DETECT], 5.0, 1e-9);
    cr_assert_float_eq(p.last.s[PH_RENDEZVOUS], 0.012, 1e-9);
    cr_assert_float_eq(p.last.s[PH_SPAWN], 0.008, 1e-9);
    cr_assert_float_eq(p.last.s[PH_READY], 3.1, 1e-9);
    char text[160];
    ph_format(&p.last, text, sizeof(text));
    cr_assert_str_eq(text, "detect 5.0 s, rendezvous 12 ms, spawn 8 ms, ready 3.1 s");
    for (int i = 0; i < PH_N; i++)
        cr_assert_eq(p.hist[i].count, i == PH_ASSIGNED ? 0 : 1, "phase %d", i);
}

/* A warm round (--warm-workers): "assigned" (commit → every spare took its rank) instead of
 * "spawn"; the record waits for both the assignments and the first beats, in either order. */
Test(phases, a_warm_round_has_assigned_instead_of_spawn)
{
    struct ph p;
    ph_init(&p);
    ph_committed(&p, 3, 6000, 5990);
    cr_assert_not(ph_spawned(&p, 6004, 100, true, true));
    cr_assert(ph_waiting_assigned(&p));
    cr_assert_not(ph_ready(&p, 500), "complete before the assignments were taken");
    cr_assert(ph_assigned(&p, 6250));
    cr_assert_lt(p.last.s[PH_SPAWN], 0);
    cr_assert_float_eq(p.last.s[PH_ASSIGNED], 0.25, 1e-9);
    cr_assert_float_eq(p.last.s[PH_READY], 0.4, 1e-9);
    char text[160];
    ph_format(&p.last, text, sizeof(text));
    cr_assert_str_eq(text, "rendezvous 10 ms, assigned 250 ms, ready 400 ms");
    char *json = ph_record_json(&p.last);
    cr_assert(strstr(json, "\"assigned_s\":0.25"), "%s", json);
    struct ph_record back;
    cr_assert_eq(ph_record_parse(json, &back), 0);
    cr_assert_float_eq(back.s[PH_ASSIGNED], 0.25, 1e-9);
    free(json);
    cr_assert_eq(p.hist[PH_ASSIGNED].count, 1);
    cr_assert_eq(p.hist[PH_SPAWN].count, 0);

    /* without heartbeats: complete at the assignments; a cold record has no assigned_s */
    ph_committed(&p, 4, 7000, 6990);
    cr_assert_not(ph_spawned(&p, 7001, 200, false, true));
    cr_assert(ph_assigned(&p, 7003));
    cr_assert_float_eq(p.last.s[PH_ASSIGNED], 0.003, 1e-9);
    ph_committed(&p, 5, 8000, 7990);
    cr_assert(ph_spawned(&p, 8001, 300, false, false));
    json = ph_record_json(&p.last);
    cr_assert_null(strstr(json, "assigned"), "%s", json);
    cr_assert_eq(ph_record_parse(json, &back), 0);
    cr_assert_lt(back.s[PH_ASSIGNED], 0);
    free(json);
}

/* mutation: ph_detect_remote() keeping the local mark → detect 0 ms, cause "failure" */
Test(phases, an_earlier_remote_hang_replaces_a_local_symptom)
{
    struct ph p;
    ph_init(&p);
    ph_detect(&p, 6100, 6100, "failure"); /* our rank died in the collective with the hung one */
    char v[256];
    ph_detect_json(1000, 6000, "hang", "n1", 1, v, sizeof(v));
    ph_detect_remote(&p, v);
    ph_detect_json(5000, 7000, "failure", "n2", 2, v, sizeof(v)); /* later: not the cause */
    ph_detect_remote(&p, v);
    ph_committed(&p, 2, 6012, 0);
    ph_spawned(&p, 6020, 0, false, false);
    cr_assert_str_eq(p.last.cause, "hang");
    cr_assert_float_eq(p.last.s[PH_DETECT], 5.0, 1e-9);
    cr_assert_float_eq(p.last.s[PH_RENDEZVOUS], 0.012, 1e-9);
}

/* mutation: ph_detect() not closing the round that waits for its first beats → round 1's
 * record takes round 2's fault */
Test(phases, a_fault_before_ready_closes_the_round_without_ready)
{
    struct ph p;
    ph_init(&p);
    ph_committed(&p, 1, 1000, 900);
    ph_spawned(&p, 1010, 10, true, false);
    ph_detect(&p, 1020, 1020, "failure"); /* a rank failed before every rank beat */
    cr_assert_eq(p.last.round, 1);
    cr_assert_str_eq(p.last.cause, "first");
    cr_assert_lt(p.last.s[PH_READY], 0);
    cr_assert_not(ph_ready(&p, 30), "the closed round completes twice");
    ph_committed(&p, 2, 1100, 0);
    ph_spawned(&p, 1110, 110, true, false);
    cr_assert(ph_ready(&p, 150));
    cr_assert_eq(p.last.round, 2);
    cr_assert_str_eq(p.last.cause, "failure");
    cr_assert_float_eq(p.last.s[PH_RENDEZVOUS], 0.08, 1e-9);
}

/* mutation: ph_committed() not falling back to since_wall → no rendezvous phase */
Test(phases, a_cold_start_has_no_detect_and_without_heartbeats_no_ready)
{
    struct ph p;
    ph_init(&p);
    ph_committed(&p, 1, 5000, 4950); /* waited 50 ms for the round */
    cr_assert(ph_spawned(&p, 5010, 10, false, false));
    cr_assert_str_eq(p.last.cause, "first");
    cr_assert_lt(p.last.s[PH_DETECT], 0);
    cr_assert_lt(p.last.s[PH_READY], 0);
    char text[160];
    ph_format(&p.last, text, sizeof(text));
    cr_assert_str_eq(text, "rendezvous 50 ms, spawn 10 ms");
    cr_assert_eq(p.hist[PH_DETECT].count, 0);
    cr_assert_eq(p.hist[PH_SPAWN].count, 1);
}

/* mutation: ph_detect_remote() ignoring the key → cause "first", no detect phase */
Test(phases, another_nodes_detect_key_is_used_and_round_trips)
{
    struct ph p;
    ph_init(&p);
    char v[256];
    ph_detect_json(1000, 6000, "hang", "n1", 3, v, sizeof(v));
    ph_detect_remote(&p, v);
    ph_detect_remote(&p, "{not json");
    ph_committed(&p, 2, 6012, 0);
    ph_spawned(&p, 6020, 0, false, false);
    cr_assert_str_eq(p.last.cause, "hang");
    cr_assert_float_eq(p.last.s[PH_DETECT], 5.0, 1e-9);
    char *json = ph_record_json(&p.last);
    cr_assert_not_null(json);
    struct ph_record back;
    cr_assert_eq(ph_record_parse(json, &back), 0, "%s", json);
    cr_assert_eq(back.round, 2);
    cr_assert_float_eq(back.s[PH_RENDEZVOUS], 0.012, 1e-9);
    cr_assert_lt(back.s[PH_READY], 0);
    free(json);
    cr_assert_eq(ph_record_parse("{\"round\":1}", &back), -EBADMSG);
}

/* The rendered histograms, into a static buffer. */
static const char *rendered(const struct ph *p)
{
    static char buf[16384];
    FILE *f = fmemopen(buf, sizeof(buf), "w");
    cr_assert_not_null(f);
    ph_render_metrics(f, p->hist);
    fclose(f);
    return buf;
}

/* Prometheus buckets are inclusive: an observation equal to a bound (5 ms, 10 ms, 1 s exactly) is
 * counted in that bucket, `le` = less or equal.
 * mutation: observe() placing a value on a bound in the next bucket (`>=`) -> le="0.005" says 0 */
Test(phases, a_value_on_a_bucket_bound_is_counted_in_it)
{
    struct ph p;
    ph_init(&p);
    ph_committed(&p, 1, 5000, 4995);                /* rendezvous 5 ms */
    cr_assert_not(ph_spawned(&p, 5010, 100, true, false)); /* spawn 10 ms */
    cr_assert(ph_ready(&p, 1100));                  /* ready 1 s */
    const char *t = rendered(&p);
#define B(phase, le, n)                                                                            \
    "elastic_agent_recovery_phase_seconds_bucket{phase=\"" phase "\",le=\"" le "\"} " n "\n"
    const char *why = "a value on a bound is not counted in its bucket (le is inclusive)";
    cr_assert(strstr(t, B("rendezvous", "0.005", "1")), "%s:\n%s", why, t);
    cr_assert(strstr(t, B("spawn", "0.005", "0") B("spawn", "0.01", "1")), "%s:\n%s", why, t);
    cr_assert(strstr(t, B("ready", "0.5", "0") B("ready", "1", "1")), "%s:\n%s", why, t);
#undef B
}

/* The listing of a run's keys as `status` reads it: rounds/<r>/recovery in key order, where
 * rounds/10 comes before rounds/9. */
static void put_recovery(struct kv_entry *e, int64_t round, const char *cause, double rdzv_s)
{
    struct ph_record r = {.round = round, .s = {-1, rdzv_s, 0.01, -1}};
    snprintf(r.cause, sizeof(r.cause), "%s", cause);
    static char keys[8][64];
    static int k;
    char *key = keys[k++ % 8];
    snprintf(key, 64, "/elastic/r/rounds/%lld/recovery", (long long)round);
    char *json = ph_record_json(&r);
    cr_assert_not_null(json);
    *e = (struct kv_entry){.key = key, .value = json, .value_len = strlen(json)};
}

/* `status` shows the latest round's recovery, whatever the key order.
 * mutation: hview_decode() keeping the lower round -> round 9's */
Test(phases, status_shows_the_latest_recovery)
{
    struct kv_entry e[4];
    put_recovery(&e[0], 10, "failure", 0.1);
    put_recovery(&e[1], 11, "hang", 0.2);
    put_recovery(&e[2], 9, "membership", 0.3);
    e[3] = (struct kv_entry){.key = "/elastic/r/rounds/11/master", .value = "h:1", .value_len = 3};
    struct hview v;
    cr_assert_eq(hview_decode("/elastic/r/", e, 4, &v), 0);
    cr_assert(v.have_recovery);
    cr_assert_eq(v.recovery.round, 11, "status shows round %lld's recovery, not the latest",
                 (long long)v.recovery.round);
    cr_assert_str_eq(v.recovery.cause, "hang");
    cr_assert_float_eq(v.recovery.s[PH_RENDEZVOUS], 0.2, 1e-9);
    hview_clear(&v);
    for (int i = 0; i < 3; i++)
        free(e[i].value);
}

/* Run `promtool check metrics` on `text`: its exit status, its complaints in out. */
static int promtool(const char *text, char *out, size_t size)
{
    char path[] = "/tmp/ea-phases-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
    FILE *pr = popen(cmd, "r");
    cr_assert_not_null(pr, "cannot run promtool (package prometheus)");
    size_t n = fread(out, 1, size - 1, pr);
    out[n] = '\0';
    int st = pclose(pr);
    unlink(path);
    return st;
}

/* mutation: ph_render_metrics printing le=0.005 unquoted → promtool cannot parse it */
Test(phases, the_phase_histograms_pass_promtool)
{
    struct ph p;
    ph_init(&p);
    hang_round(&p);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ph_render_metrics(f, p.hist);
    fclose(f);
    char out[4096];
    cr_assert_eq(promtool(text, out, sizeof(out)), 0, "promtool check metrics:\n%s\n%s", out, text);
    free(text);

    /* on the whole /metrics page: parsed, and nothing said about them (promtool's lint has an
     * older complaint about elastic_agent_restart_count's name, not ours to rename here) */
    struct metrics_snapshot m = {.run_id = "r", .node_id = "n"};
    memcpy(m.phases, p.hist, sizeof(m.phases));
    text = metrics_render(&m);
    cr_assert_not_null(text);
    cr_assert(
        strstr(text, "elastic_agent_recovery_phase_seconds_bucket{phase=\"ready\",le=\"5\"} 1"),
        "%s", text);
    promtool(text, out, sizeof(out));
    cr_assert_null(strstr(out, "recovery_phase"), "%s", out);
    cr_assert_null(strstr(out, "error while linting"), "%s", out);
    free(text);
}
