// SPDX-License-Identifier: Apache-2.0
/* ph: detect → rendezvous → spawn → ready, per round: records, histograms, text. */
#include "phases.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>

const double ph_buckets[PH_N_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                         1,     2.5,  5,     10,   30,  60,   300};

static const char *const names[PH_N] = {"detect", "rendezvous", "spawn", "ready", "assigned"};
/* the order of the text and of the histograms: the order they happen in */
static const enum ph_phase shown[PH_N] = {PH_DETECT, PH_RENDEZVOUS, PH_SPAWN, PH_ASSIGNED,
                                          PH_READY};

static void reset_current(struct ph *p)
{
    p->fault_wall = p->detect_wall = p->commit_wall = p->spawn_wall = -1;
    p->rdzv_start_wall = -1;
    p->spawn_mono = -1;
    p->assigned_wall = p->ready_mono = -1;
    p->waiting_ready = p->warm = p->waiting_assigned = false;
    p->cause[0] = '\0';
}

void ph_init(struct ph *p)
{
    memset(p, 0, sizeof(*p));
    reset_current(p);
}

static void complete(struct ph *p, int64_t ready_mono);

void ph_detect(struct ph *p, int64_t fault_wall, int64_t now_wall, const char *cause)
{
    if (p->detect_wall >= 0)
        return;
    if (p->waiting_ready || p->waiting_assigned) /* the round ends first: no ready (assigned) */
        complete(p, -1);
    p->fault_wall = fault_wall;
    p->detect_wall = now_wall;
    snprintf(p->cause, sizeof(p->cause), "%s", cause);
}

void ph_detect_json(int64_t fault_wall, int64_t now_wall, const char *cause, const char *node,
                    int rank, char *buf, size_t size)
{
    snprintf(buf, size,
             "{\"fault_ms\":%lld,\"detected_ms\":%lld,\"cause\":\"%s\",\"node\":\"%s\","
             "\"rank\":%d}",
             (long long)fault_wall, (long long)now_wall, cause, node, rank);
}

void ph_detect_remote(struct ph *p, const char *json)
{
    if (!json)
        return;
    json_t *o = json_loads(json, 0, NULL);
    json_int_t fault = -1, detected = -1;
    const char *cause = NULL;
    /* the earlier observation is the root cause: a local failure seen later (a peer's worker
     * dying in a collective with the hung rank's group) is its symptom */
    if (o &&
        json_unpack(o, "{s:I, s:I, s:s}", "fault_ms", &fault, "detected_ms", &detected, "cause",
                    &cause) == 0 &&
        detected > 0 && (p->detect_wall < 0 || detected < p->detect_wall)) {
        p->detect_wall = -1;
        ph_detect(p, fault, detected, cause);
    }
    json_decref(o);
}

void ph_committed(struct ph *p, int64_t round, int64_t now_wall, int64_t since_wall)
{
    if (round == p->round && p->commit_wall >= 0)
        return;
    p->round = round;
    p->commit_wall = now_wall;
    p->rdzv_start_wall = p->detect_wall >= 0 ? p->detect_wall : since_wall;
    if (p->detect_wall < 0)
        snprintf(p->cause, sizeof(p->cause), "%s", p->last.round == 0 ? "first" : "membership");
}

static double secs(int64_t from, int64_t to)
{
    if (from < 0 || to < 0)
        return -1;
    return to > from ? (double)(to - from) / 1000.0 : 0.0;
}

static void observe(struct ph_hist *h, double s)
{
    if (s < 0)
        return;
    size_t i = 0;
    while (i < PH_N_BUCKETS && s > ph_buckets[i])
        i++;
    if (i < PH_N_BUCKETS)
        h->bucket[i]++;
    h->count++;
    h->sum += s;
}

static void complete(struct ph *p, int64_t ready_mono)
{
    struct ph_record r = {.round = p->round};
    snprintf(r.cause, sizeof(r.cause), "%s", p->cause);
    r.s[PH_DETECT] = p->fault_wall >= 0 ? secs(p->fault_wall, p->detect_wall) : -1;
    r.s[PH_RENDEZVOUS] = secs(p->rdzv_start_wall, p->commit_wall);
    r.s[PH_SPAWN] = p->warm ? -1 : secs(p->commit_wall, p->spawn_wall);
    r.s[PH_ASSIGNED] = p->warm ? secs(p->commit_wall, p->assigned_wall) : -1;
    r.s[PH_READY] = ready_mono >= 0 ? secs(p->spawn_mono, ready_mono) : -1;
    for (int i = 0; i < PH_N; i++)
        observe(&p->hist[i], r.s[i]);
    p->last = r;
    reset_current(p);
}

bool ph_spawned(struct ph *p, int64_t now_wall, int64_t now_mono, bool wait_ready, bool warm)
{
    if (p->commit_wall < 0)
        return false;
    p->spawn_wall = now_wall;
    p->spawn_mono = now_mono;
    p->warm = p->waiting_assigned = warm;
    p->waiting_ready = wait_ready;
    if (!wait_ready && !warm) {
        complete(p, -1);
        return true;
    }
    return false;
}

bool ph_ready(struct ph *p, int64_t ready_mono)
{
    if (!p->waiting_ready)
        return false;
    p->waiting_ready = false;
    p->ready_mono = ready_mono;
    if (p->waiting_assigned)
        return false;
    complete(p, ready_mono);
    return true;
}

bool ph_assigned(struct ph *p, int64_t assigned_wall)
{
    if (!p->waiting_assigned)
        return false;
    p->waiting_assigned = false;
    p->assigned_wall = assigned_wall;
    if (p->waiting_ready)
        return false;
    complete(p, p->ready_mono);
    return true;
}

bool ph_waiting_ready(const struct ph *p)
{
    return p->waiting_ready;
}

bool ph_waiting_assigned(const struct ph *p)
{
    return p->waiting_assigned;
}

static void duration(double s, char *buf, size_t size)
{
    if (s < 1.0)
        snprintf(buf, size, "%.0f ms", s * 1000.0);
    else
        snprintf(buf, size, "%.1f s", s);
}

void ph_format(const struct ph_record *r, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int k = 0; k < PH_N && n < size; k++) {
        enum ph_phase i = shown[k];
        if (r->s[i] < 0)
            continue;
        char d[32];
        duration(r->s[i], d, sizeof(d));
        n += (size_t)snprintf(buf + n, size - n, "%s%s %s", n ? ", " : "", names[i], d);
    }
}

static json_t *num_or_null(double s)
{
    return s < 0 ? json_null() : json_real((double)(int64_t)(s * 1000.0 + 0.5) / 1000.0);
}

char *ph_record_json(const struct ph_record *r)
{
    json_t *o = json_pack("{s:I, s:s, s:o, s:o, s:o, s:o}", "round", (json_int_t)r->round, "cause",
                          r->cause, "detect_s", num_or_null(r->s[PH_DETECT]), "rendezvous_s",
                          num_or_null(r->s[PH_RENDEZVOUS]), "spawn_s", num_or_null(r->s[PH_SPAWN]),
                          "ready_s", num_or_null(r->s[PH_READY]));
    if (o && r->s[PH_ASSIGNED] >= 0) /* warm rounds only: a cold round's record is unchanged */
        json_object_set_new(o, "assigned_s", num_or_null(r->s[PH_ASSIGNED]));
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
    json_decref(o);
    return s;
}

int ph_record_parse(const char *json, struct ph_record *ret)
{
    json_t *o = json_loads(json, 0, NULL);
    json_int_t round = 0;
    const char *cause = NULL;
    json_t *v[PH_N] = {0};
    int r = -EBADMSG;
    if (o && json_unpack(o, "{s:I, s:s, s:o, s:o, s:o, s:o}", "round", &round, "cause", &cause,
                         "detect_s", &v[0], "rendezvous_s", &v[1], "spawn_s", &v[2], "ready_s",
                         &v[3]) == 0) {
        struct ph_record rec = {.round = round};
        snprintf(rec.cause, sizeof(rec.cause), "%s", cause);
        r = 0;
        v[PH_ASSIGNED] = json_object_get(o, "assigned_s");
        if (!v[PH_ASSIGNED])
            v[PH_ASSIGNED] = json_null(); /* a cold round, or an agent from before warm spares */
        for (int i = 0; i < PH_N; i++) {
            if (json_is_number(v[i]))
                rec.s[i] = json_number_value(v[i]);
            else if (json_is_null(v[i]))
                rec.s[i] = -1;
            else
                r = -EBADMSG;
        }
        if (r == 0)
            *ret = rec;
    }
    json_decref(o);
    return r;
}

void ph_render_metrics(FILE *f, const struct ph_hist hist[PH_N])
{
    const char *n = "elastic_agent_recovery_phase_seconds";
    fprintf(f,
            "# HELP %s Time of each recovery phase per round: detect (fault to observed), "
            "rendezvous (to round committed), spawn (to local workers started), assigned (warm "
            "spares: to every local worker's assignment taken), ready (to every local rank's "
            "first heartbeat).\n# TYPE %s histogram\n",
            n, n);
    for (int k = 0; k < PH_N; k++) {
        enum ph_phase p = shown[k];
        uint64_t cum = 0;
        for (size_t i = 0; i < PH_N_BUCKETS; i++) {
            cum += hist[p].bucket[i];
            fprintf(f, "%s_bucket{phase=\"%s\",le=\"%g\"} %llu\n", n, names[p], ph_buckets[i],
                    (unsigned long long)cum);
        }
        fprintf(f, "%s_bucket{phase=\"%s\",le=\"+Inf\"} %llu\n", n, names[p],
                (unsigned long long)hist[p].count);
        fprintf(f, "%s_sum{phase=\"%s\"} %.9g\n%s_count{phase=\"%s\"} %llu\n", n, names[p],
                hist[p].sum, n, names[p], (unsigned long long)hist[p].count);
    }
}
