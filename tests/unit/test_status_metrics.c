// SPDX-License-Identifier: Apache-2.0
/*
 * metrics (the data behind /metrics, /healthz, /readyz): the Prometheus text of a snapshot, the
 * reasons /healthz gives (it flips to 503 when the store is lost or the lease is gone), and the
 * timing kv wrapper counting every request into the latency histogram.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics.h"

static struct metrics_snapshot snap(void)
{
    struct metrics_snapshot m = {.joined = true,
                                 .round = 3,
                                 .generation = 42,
                                 .world_size = 8,
                                 .members = 2,
                                 .live_nodes = 3,
                                 .restart_count = 1,
                                 .max_restarts = 5,
                                 .scale_events = 2,
                                 .group_rank = 1,
                                 .workers_running = 4,
                                 .rounds_started = 3,
                                 .lease_renew_failures = 2,
                                 .last_rendezvous_seconds = 1.25};
    snprintf(m.run_id, sizeof(m.run_id), "job");
    snprintf(m.node_id, sizeof(m.node_id), "n1");
    snprintf(m.run_status, sizeof(m.run_status), "running");
    snprintf(m.group_state, sizeof(m.group_state), "running");
    m.store.bucket[0] = 5;
    m.store.bucket[3] = 2;
    m.store.count = 8; /* one slower than the last bucket */
    m.store.sum = 6.5;
    return m;
}

Test(metrics, prometheus_text)
{
    struct metrics_snapshot m = snap();
    char *t = metrics_render(&m);
    cr_assert(t);
    const char *want[] = {
        "# TYPE elastic_agent_round gauge\nelastic_agent_round 3\n",
        "elastic_agent_generation 42\n",
        "elastic_agent_info{run_id=\"job\",node=\"n1\",version=\"" EA_VERSION "\"} 1\n",
        "elastic_agent_up 1\n",
        "elastic_agent_world_size 8\n",
        "elastic_agent_group_rank 1\n",
        "# TYPE elastic_agent_restarts gauge\nelastic_agent_restarts 1\n",
        "# TYPE elastic_agent_scale_events_total counter\nelastic_agent_scale_events_total 2\n",
        "elastic_agent_workers_running 4\n",
        "# TYPE elastic_agent_rounds_started_total counter\nelastic_agent_rounds_started_total 3\n",
        "elastic_agent_lease_renew_failures_total 2\n",
        "elastic_agent_last_rendezvous_seconds 1.25\n",
        "elastic_agent_run_status{state=\"running\"} 1\n",
        "elastic_agent_run_status{state=\"waiting\"} 0\n",
        "elastic_agent_state{state=\"running\"} 1\n",
        "# TYPE elastic_agent_store_request_duration_seconds histogram\n",
        "elastic_agent_store_request_duration_seconds_bucket{le=\"0.001\"} 5\n",
        "elastic_agent_store_request_duration_seconds_bucket{le=\"0.01\"} 7\n",
        "elastic_agent_store_request_duration_seconds_bucket{le=\"5\"} 7\n",
        "elastic_agent_store_request_duration_seconds_bucket{le=\"+Inf\"} 8\n",
        "elastic_agent_store_request_duration_seconds_sum 6.5\n",
        "elastic_agent_store_request_duration_seconds_count 8\n",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++)
        cr_expect(strstr(t, want[i]), "missing: %s\nin:\n%s", want[i], t);
    free(t);
}

/* Issue 19: the failing status has its series like every other status. */
Test(metrics, run_status_failing)
{
    /* mutation checked: "failing" removed from run_states in agent/observe/metrics.c: fails */
    struct metrics_snapshot m = snap();
    snprintf(m.run_status, sizeof(m.run_status), "failing");
    char *t = metrics_render(&m);
    cr_assert(t);
    cr_expect(strstr(t, "elastic_agent_run_status{state=\"failing\"} 1\n"), "%s", t);
    cr_expect(strstr(t, "elastic_agent_run_status{state=\"running\"} 0\n"), "%s", t);
    free(t);
}

Test(metrics, health_reasons)
{
    struct metrics_snapshot m = snap();
    cr_assert_str_eq(metrics_unhealthy(&m), "");
    m.store_down = true;
    cr_assert_str_eq(metrics_unhealthy(&m), "store unreachable");
    m.lease_lost = true;
    cr_assert(strstr(metrics_unhealthy(&m), "lease lost"));
    m.joined = false;
    cr_assert_str_eq(metrics_unhealthy(&m), "not joined");
    m.exiting = true;
    cr_assert_str_eq(metrics_unhealthy(&m), "exiting");
    char *t = metrics_render(&m);
    cr_assert(strstr(t, "elastic_agent_up 0\n"));
    free(t);
}

/* A store whose pinned read answers otherwise than its get: the timing wrapper must pass
 * kv_get_at through (a node's first-round chunk read), not turn it into a get. */
static int fake_get(struct kv *kv, const char *key, struct kv_entry *ret, struct ea_error *err)
{
    (void)kv;
    (void)err;
    *ret = (struct kv_entry){.key = strdup(key), .value = strdup("latest"), .value_len = 6};
    return 0;
}

static int fake_get_at(struct kv *kv, const char *key, int64_t at, struct kv_entry *ret,
                       struct ea_error *err)
{
    (void)kv;
    (void)err;
    *ret = (struct kv_entry){
        .key = strdup(key), .value = strdup("at"), .value_len = 2, .mod_revision = at};
    return 0;
}

static void fake_close(struct kv *kv)
{
    (void)kv;
}

Test(metrics, timed_kv_passes_the_pinned_read_through)
{
    static const struct kv_ops fake_ops = {
        .name = "fake", .close = fake_close, .get = fake_get, .get_at = fake_get_at};
    struct kv fake = {.ops = &fake_ops};
    struct metrics_latency lat = {0};
    struct kv *kv = NULL;
    struct ea_error err = {0};
    cr_assert_eq(metrics_kv_wrap(&fake, &lat, &kv, &err), 0);
    struct kv_entry e = {0};
    cr_assert_eq(kv_get_at(kv, "/k", 7, &e, &err), 0);
    cr_assert_str_eq(e.value, "at", "the wrapper read the latest instead");
    cr_assert_eq(e.mod_revision, 7);
    kv_entry_clear(&e);
    cr_assert_eq(lat.count, 1, "counted as a request");
    kv_close(kv);
}

Test(metrics, timed_kv_counts_every_request)
{
    struct kv_config kc = {.backend = "memory"};
    struct kv *inner = NULL, *kv = NULL;
    struct ea_error err = {0};
    cr_assert_eq(kv_open(&kc, &inner, &err), 0, "%s", err.msg);
    struct metrics_latency lat = {0};
    cr_assert_eq(metrics_kv_wrap(inner, &lat, &kv, &err), 0);
    int64_t lease = 0, rev = 0, watch = 0;
    cr_assert_eq(kv_lease_grant(kv, 5000, &lease, &err), 0);
    cr_assert_eq(kv_put(kv, "/a", "1", 1, lease, &rev, &err), 0);
    cr_assert_eq(kv_cas(kv, "/a", "2", 1, rev, 0, NULL, NULL, &err), 0);
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/a", &e, &err), 0);
    cr_assert_str_eq(e.value, "2");
    kv_entry_clear(&e);
    cr_assert_eq(kv_get(kv, "/b", &e, &err), KV_ENOTFOUND);
    struct kv_list l = {0};
    cr_assert_eq(kv_list(kv, "/", &l, &err), 0);
    cr_assert_eq(l.n, 1);
    kv_list_clear(&l);
    cr_assert_eq(kv_watch(kv, "/", 0, &watch, &err), 0);
    cr_assert_eq(kv_del(kv, "/a", &err), 0);
    struct kv_event *ev = NULL;
    size_t n = 0;
    cr_assert_geq(kv_event_fd(kv), 0);
    cr_assert_eq(kv_read_events(kv, &ev, &n, &err), 0); /* delivery is not a request */
    kv_events_free(ev, n);
    kv_watch_cancel(kv, watch);
    cr_assert_eq(kv_lease_keepalive(kv, lease, NULL, &err), 0);
    cr_assert_eq(kv_lease_revoke(kv, lease, &err), 0);
    cr_assert_eq(lat.count, 10);
    uint64_t in_buckets = 0;
    for (size_t i = 0; i < METRICS_N_BUCKETS; i++)
        in_buckets += lat.bucket[i];
    cr_assert_eq(in_buckets, 10, "an in-memory request takes far less than 5 s");
    cr_assert_eq(lat.errors, 0);
    kv_close(kv); /* closes the memory store too (ASan checks) */
}

/* Issue 31: the ring's counters, and the heartbeat age of each link that is up (none for a link
 * that is not); the page passes `promtool check metrics` (its lint's older complaint about
 * elastic_agent_restart_count aside). */
Test(metrics, liveness_links_and_counters)
{
    struct metrics_snapshot m = snap();
    m.liveness_suspicions = 2;
    m.liveness_confirmed = 1;
    m.liveness_false_alarms = 1;
    m.liveness_no_route = 7;
    m.liveness_links_up = 1;
    m.coord_claims = 3;
    snprintf(m.liveness_out.peer, sizeof(m.liveness_out.peer), "n2");
    snprintf(m.liveness_out.state, sizeof(m.liveness_out.state), "up");
    m.liveness_out.heartbeat_age_s = 0.125;
    snprintf(m.liveness_in.peer, sizeof(m.liveness_in.peer), "n0");
    snprintf(m.liveness_in.state, sizeof(m.liveness_in.state), "retrying");
    m.liveness_in.heartbeat_age_s = 4;
    char *t = metrics_render(&m);
    cr_assert(t);
    const char *want[] = {
        "elastic_agent_liveness_suspicions_total 2\n",
        "elastic_agent_liveness_confirmed_total 1\n",
        "elastic_agent_liveness_false_alarms_total 1\n",
        "elastic_agent_liveness_no_route_total 7\n",
        "elastic_agent_liveness_links_up 1\n",
        "elastic_agent_coordinator_claims_total 3\n",
        ("# TYPE elastic_agent_liveness_heartbeat_age_seconds gauge\n"
         "elastic_agent_liveness_heartbeat_age_seconds{link=\"successor\"} 0.125\n"),
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++)
        cr_expect(strstr(t, want[i]), "missing: %s\nin:\n%s", want[i], t);
    cr_expect_null(strstr(t, "{link=\"predecessor\"}"), "a link that is not up has no age");
    char path[] = "/tmp/ea-metrics-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs(t, f);
    fclose(f);
    char cmd[128], out[4096] = "";
    snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
    FILE *pr = popen(cmd, "r");
    cr_assert_not_null(pr, "cannot run promtool (package prometheus)");
    size_t n = fread(out, 1, sizeof(out) - 1, pr);
    out[n] = '\0';
    pclose(pr);
    unlink(path);
    cr_expect_null(strstr(out, "liveness"), "%s", out);
    cr_expect_null(strstr(out, "error while linting"), "%s", out);
    free(t);
}
