// SPDX-License-Identifier: Apache-2.0
/* metrics: Prometheus text for the agent's snapshot, and a timing kv wrapper. */
#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

const double metrics_buckets[METRICS_N_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                   0.1,   0.25,   0.5,   1,    2.5,   5};

/* ---- Prometheus text ------------------------------------------------------------------- */

/* Label values are our ids (A-Z a-z 0-9 . _ -): nothing to escape. */
static void metric(FILE *f, const char *name, const char *type, const char *help,
                   const char *labels, double value)
{
    fprintf(f, "# HELP elastic_agent_%s %s\n# TYPE elastic_agent_%s %s\n", name, help, name, type);
    if (value > -9e15 && value < 9e15 && value == (double)(long long)value) /* whole numbers */
        fprintf(f, "elastic_agent_%s%s %lld\n", name, labels, (long long)value);
    else
        fprintf(f, "elastic_agent_%s%s %.9g\n", name, labels, value);
}

static void states(FILE *f, const char *name, const char *help, const char *const *names, size_t n,
                   const char *current)
{
    fprintf(f, "# HELP elastic_agent_%s %s\n# TYPE elastic_agent_%s gauge\n", name, help, name);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "elastic_agent_%s{state=\"%s\"} %d\n", name, names[i],
                strcmp(names[i], current) == 0);
}

static void latency(FILE *f, const struct metrics_latency *l)
{
    const char *n = "elastic_agent_store_request_duration_seconds";
    fprintf(f, "# HELP %s Latency of requests to the rendezvous store.\n# TYPE %s histogram\n", n,
            n);
    uint64_t cum = 0;
    for (size_t i = 0; i < METRICS_N_BUCKETS; i++) {
        cum += l->bucket[i];
        fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", n, metrics_buckets[i], (unsigned long long)cum);
    }
    fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", n,
            (unsigned long long)l->count, n, l->sum, n, (unsigned long long)l->count);
    metric(f, "store_request_errors_total", "counter",
           "Store requests that failed because the store was unreachable or too slow.", "",
           (double)l->errors);
}

char *metrics_render(const struct metrics_snapshot *m)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    char info[400];
    snprintf(info, sizeof(info), "{run_id=\"%s\",node=\"%s\",version=\"%s\"}", m->run_id,
             m->node_id, EA_VERSION);
    metric(f, "info", "gauge", "The agent's run, node and version.", info, 1);
    metric(f, "up", "gauge", "1 while the agent is joined and healthy (as /healthz).", "",
           metrics_unhealthy(m)[0] == '\0');
    metric(f, "round", "gauge", "Round of the run's current state.", "", (double)m->round);
    metric(f, "generation", "gauge", "Generation (store revision) of the current round.", "",
           (double)m->generation);
    metric(f, "world_size", "gauge", "Workers in the current round, all nodes.", "", m->world_size);
    metric(f, "members", "gauge", "Nodes in the current round.", "", m->members);
    metric(f, "live_nodes", "gauge", "Nodes holding a lease in the run.", "", m->live_nodes);
    metric(f, "group_rank", "gauge", "This node's group rank, -1 when not a member.", "",
           m->group_rank);
    /* Prometheus naming: a gauge never ends in _count (promtool: that suffix is a histogram's or
     * a summary's); it is a gauge because a refund can lower it */
    metric(f, "restarts", "gauge",
           "Job-wide restarts charged to --max-restarts (a refund can lower it).", "",
           m->restart_count);
    metric(f, "max_restarts", "gauge", "The run's restart budget.", "", m->max_restarts);
    metric(f, "scale_events_total", "counter", "Rounds the run started because membership changed.",
           "", m->scale_events);
    metric(f, "workers_running", "gauge", "Local worker processes running.", "",
           m->workers_running);
    metric(f, "progress_step", "gauge",
           "Highest step this node's ranks beat in the running round (-1: none yet, or "
           "--max-restarts-without-progress 0).",
           "", (double)m->progress_step);
    metric(f, "progress_best_step", "gauge",
           "The run's highest step before its last worker failure (-1: none known).", "",
           (double)m->progress_best);
    metric(f, "restarts_without_progress", "gauge",
           "Restarts in a row after which the run did not get past its best step (reset by "
           "progress; --max-restarts-without-progress).",
           "", m->restarts_without_progress);
    metric(f, "compute_seconds", "gauge",
           "Median compute time of this node's ranks' recent steps (elastic_agent.compute(); 0: "
           "none timed).",
           "", m->compute_seconds);
    metric(f, "stragglers_reported_total", "counter",
           "Stragglers this node reported while it coordinated (--straggler-threshold).", "",
           (double)m->stragglers_reported);
    metric(f, "rounds_started_total", "counter", "Rounds this node started workers for.", "",
           (double)m->rounds_started);
    metric(f, "worker_failures_total", "counter", "Local workers that exited with a failure.", "",
           (double)m->worker_failures);
    metric(f, "lease_renew_failures_total", "counter", "Lease keepalives that failed.", "",
           (double)m->lease_renew_failures);
    metric(f, "rejoins_total", "counter", "Joins after this node's lease was lost.", "",
           (double)m->rejoins);
    metric(f, "coordinator_claims_total", "counter",
           "Tries this node made to take the coordinator's key after it vanished (a successor's "
           "claim; issue 41 bounds them per takeover).",
           "", (double)m->coord_claims);
    metric(f, "store_resyncs_total", "counter",
           "Times a store watch ended (restart, compaction) and the run was read again.", "",
           (double)m->store_resyncs);
    metric(f, "liveness_suspicions_total", "counter",
           "Ring links of this node that broke: suspicions it reported.", "",
           (double)m->liveness_suspicions);
    metric(f, "liveness_confirmed_total", "counter",
           "Suspicions this node confirmed with its own probe (the suspect's lease revoked).", "",
           (double)m->liveness_confirmed);
    metric(f, "liveness_false_alarms_total", "counter",
           "Suspicions this node's probe found answered (nobody evicted).", "",
           (double)m->liveness_false_alarms);
    metric(f, "liveness_no_route_total", "counter",
           "Ring connects and probes this node could not start (no route, address or port here): "
           "no evidence against the peer, so nobody was suspected or evicted on them.",
           "", (double)m->liveness_no_route);
    metric(f, "liveness_links_up", "gauge", "This node's ring links that are up (0-2).", "",
           m->liveness_links_up);
    const struct metrics_link *links[2] = {&m->liveness_out, &m->liveness_in};
    static const char *const link_names[2] = {"successor", "predecessor"};
    bool head = false;
    for (size_t i = 0; i < 2; i++) {
        if (strcmp(links[i]->state, "up") != 0 || links[i]->heartbeat_age_s < 0)
            continue; /* not up: no heartbeat to time */
        if (!head)
            fprintf(f, "# HELP elastic_agent_liveness_heartbeat_age_seconds Time since the last "
                       "heartbeat heard on each ring link that is up.\n"
                       "# TYPE elastic_agent_liveness_heartbeat_age_seconds gauge\n");
        head = true;
        fprintf(f, "elastic_agent_liveness_heartbeat_age_seconds{link=\"%s\"} %.3f\n",
                link_names[i], links[i]->heartbeat_age_s);
    }
    metric(f, "last_rendezvous_seconds", "gauge",
           "Time from stopping (or joining) to starting the latest workers.", "",
           m->last_rendezvous_seconds);
    static const char *const run_states[] = {"none",   "waiting", "running", "succeeded",
                                             "failed", "closed",  "failing"};
    states(f, "run_status", "The run's status (1 for the current one).", run_states, 7,
           m->run_status);
    static const char *const group_states[] = {"idle", "running", "stopping", "finished", "failed"};
    states(f, "state", "This node's worker group state (1 for the current one).", group_states, 5,
           m->group_state);
    latency(f, &m->store);
    ph_render_metrics(f, m->phases);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

const char *metrics_unhealthy(const struct metrics_snapshot *m)
{
    if (m->exiting)
        return "exiting";
    if (!m->joined)
        return "not joined";
    if (m->lease_lost)
        return "lease lost: fenced out, rejoining";
    if (m->store_down)
        return "store unreachable";
    return "";
}

/* ---- timing kv wrapper ----------------------------------------------------------------- */

struct timed_kv {
    struct kv base;
    struct kv *inner;
    struct metrics_latency *lat;
};

#define INNER(kv) (((struct timed_kv *)(kv))->inner)

/* Monotonic nanoseconds: store requests on loopback take well under a millisecond. */
static int64_t begin(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int done(struct kv *kv, int64_t t0, int r)
{
    struct metrics_latency *l = ((struct timed_kv *)kv)->lat;
    double s = (double)(begin() - t0) / 1e9;
    size_t i = 0;
    while (i < METRICS_N_BUCKETS && s > metrics_buckets[i])
        i++;
    if (i < METRICS_N_BUCKETS)
        l->bucket[i]++;
    l->count++;
    l->sum += s;
    if (r == KV_ECONN)
        l->errors++;
    return r;
}

static void t_close(struct kv *kv)
{
    if (!kv)
        return;
    kv_close(INNER(kv));
    free(kv);
}

static int t_get(struct kv *kv, const char *key, struct kv_entry *ret, struct ea_error *err)
{
    int64_t t0 = begin();
    return done(kv, t0, kv_get(INNER(kv), key, ret, err));
}

static int t_get_at(struct kv *kv, const char *key, int64_t at, struct kv_entry *ret,
                    struct ea_error *err)
{
    int64_t t0 = begin();
    return done(kv, t0, kv_get_at(INNER(kv), key, at, ret, err));
}

static int t_list(struct kv *kv, const char *prefix, struct kv_list *ret, struct ea_error *err)
{
    int64_t t0 = begin();
    return done(kv, t0, kv_list(INNER(kv), prefix, ret, err));
}

static int t_list_page(struct kv *kv, const char *prefix, const char *after, size_t limit,
                       struct kv_list *ret, struct ea_error *err)
{
    int64_t t0 = begin();
    return done(kv, t0, kv_list_page(INNER(kv), prefix, after, limit, ret, err));
}

static int t_cas(struct kv *kv, const char *key, const char *value, size_t len, int64_t expected,
                 int64_t lease, int64_t *ret_rev, struct kv_entry *ret_current,
                 struct ea_error *err)
{
    int64_t t0 = begin();
    return done(kv, t0,
                kv_cas(INNER(kv), key, value, len, expected, lease, ret_rev, ret_current, err));
}

static int t_txn(struct kv *kv, const struct kv_cmp *cmps, size_t n_cmps, const struct kv_op *ops,
                 size_t n_ops, int64_t *ret_rev, struct ea_error *err)
{
    int64_t t0 = begin();
    return done(kv, t0, kv_txn(INNER(kv), cmps, n_cmps, ops, n_ops, ret_rev, err));
}

static int t_put(struct kv *kv, const char *key, const char *value, size_t len, int64_t lease,
                 int64_t *ret_rev, struct ea_error *err)
{
    int64_t t0 = begin();
    return done(kv, t0, kv_put(INNER(kv), key, value, len, lease, ret_rev, err));
}

static int t_del(struct kv *kv, const char *key, struct ea_error *err)
{
    int64_t t0 = begin();
    return done(kv, t0, kv_del(INNER(kv), key, err));
}

static int t_grant(struct kv *kv, int64_t ttl_ms, int64_t *ret_lease, struct ea_error *err)
{
    int64_t t0 = begin();
    return done(kv, t0, kv_lease_grant(INNER(kv), ttl_ms, ret_lease, err));
}

static int t_keepalive(struct kv *kv, int64_t lease, int64_t *ret_ttl_ms, struct ea_error *err)
{
    int64_t t0 = begin();
    return done(kv, t0, kv_lease_keepalive(INNER(kv), lease, ret_ttl_ms, err));
}

static int t_revoke(struct kv *kv, int64_t lease, struct ea_error *err)
{
    int64_t t0 = begin();
    return done(kv, t0, kv_lease_revoke(INNER(kv), lease, err));
}

static int t_revoke_each(struct kv *kv, const int64_t *leases, size_t n, int *ret_codes,
                         struct ea_error *err)
{
    int64_t t0 = begin(); /* one request's time: the batch is about one round trip */
    return done(kv, t0, kv_lease_revoke_each(INNER(kv), leases, n, ret_codes, err));
}

static int t_keepalive_each(struct kv *kv, const int64_t *leases, size_t n, int *ret_codes,
                            struct ea_error *err)
{
    int64_t t0 = begin();
    return done(kv, t0, kv_lease_keepalive_each(INNER(kv), leases, n, ret_codes, err));
}

static int t_watch(struct kv *kv, const char *prefix, int64_t from, int64_t *ret_id,
                   struct ea_error *err)
{
    int64_t t0 = begin();
    return done(kv, t0, kv_watch(INNER(kv), prefix, from, ret_id, err));
}

static void t_watch_cancel(struct kv *kv, int64_t id)
{
    kv_watch_cancel(INNER(kv), id);
}

static int t_event_fd(struct kv *kv)
{
    return kv_event_fd(INNER(kv));
}

static int t_read_events(struct kv *kv, struct kv_event **ret, size_t *ret_n, struct ea_error *err)
{
    return kv_read_events(INNER(kv), ret, ret_n, err);
}

static const struct kv_ops timed_ops = {
    .name = "timed",
    .close = t_close,
    .get = t_get,
    .get_at = t_get_at,
    .list = t_list,
    .list_page = t_list_page,
    .cas = t_cas,
    .txn = t_txn,
    .put = t_put,
    .del = t_del,
    .lease_grant = t_grant,
    .lease_keepalive = t_keepalive,
    .lease_revoke = t_revoke,
    .lease_revoke_each = t_revoke_each,
    .lease_keepalive_each = t_keepalive_each,
    .watch = t_watch,
    .watch_cancel = t_watch_cancel,
    .event_fd = t_event_fd,
    .read_events = t_read_events,
};

int metrics_kv_wrap(struct kv *inner, struct metrics_latency *lat, struct kv **ret,
                    struct ea_error *err)
{
    struct timed_kv *t = calloc(1, sizeof(*t));
    if (!t)
        return ea_errorf(err, -ENOMEM, "out of memory");
    t->base.ops = &timed_ops;
    t->inner = inner;
    t->lat = lat;
    *ret = &t->base;
    return 0;
}
