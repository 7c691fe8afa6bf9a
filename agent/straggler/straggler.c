// SPDX-License-Identifier: Apache-2.0
/* sg: straggler scoring (straggler.h). */
#include "straggler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void sg_rank_add(struct sg_rank *r, double seconds)
{
    if (!(seconds > 0) || !isfinite(seconds))
        return;
    r->s[r->next] = seconds;
    r->next = (r->next + 1) % SG_SAMPLES;
    if (r->n < SG_SAMPLES)
        r->n++;
    r->last = seconds;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double sg_median(double *v, size_t n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double sg_node_time(const struct sg_rank *ranks, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += (size_t)ranks[i].n;
    if (total == 0)
        return 0;
    double *all = malloc(total * sizeof(*all));
    if (!all)
        return 0;
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        memcpy(all + k, ranks[i].s, (size_t)ranks[i].n * sizeof(*all));
        k += (size_t)ranks[i].n;
    }
    double m = sg_median(all, total);
    free(all);
    return m;
}

void sg_scores(const double *t, size_t n, double *ret_scores)
{
    double *others = n > 1 ? malloc((n - 1) * sizeof(*others)) : NULL;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        for (size_t j = 0; others && j < n; j++)
            if (j != i && t[j] > 0)
                others[k++] = t[j];
        double m = sg_median(others, k);
        ret_scores[i] = t[i] > 0 && m > 0 ? t[i] / m : 0;
    }
    free(others);
}

int sg_observe(struct sg_track *t, double score, double threshold, int64_t window_ms, int64_t now)
{
    /* hysteresis: a stretch begins at the threshold and ends only below halfway back to 1, so
     * that one noisy sample does not restart the window of a node that is really slow */
    double floor = 1 + (threshold - 1) / 2;
    bool in = t->above_since >= 0 ? score >= floor : score >= threshold;
    if (!in || score <= 0) {
        t->above_since = -1;
        t->reported = false;
        return 0;
    }
    if (t->above_since < 0)
        t->above_since = now;
    if (t->reported || now - t->above_since < window_ms)
        return 0;
    t->reported = true;
    return 1;
}

double sg_parse_compute(const char *buf, size_t len)
{
    char line[96];
    if (len >= sizeof(line))
        len = sizeof(line) - 1;
    memcpy(line, buf, len);
    line[len] = '\0';
    char *sp = strpbrk(line, " \t");
    if (!sp)
        return 0;
    char *end;
    double v = strtod(sp, &end);
    if (end == sp || (*end && *end != '\n' && *end != ' ') || !(v > 0) || !isfinite(v) || v > 86400)
        return 0;
    return v;
}

enum sg_action sg_evict_decide(bool evict, size_t live, size_t members, bool is_coordinator)
{
    if (!evict)
        return SG_REPORT;
    if (is_coordinator)
        return SG_REPORT_SELF;
    if (live <= members) /* no node waits outside the round: evicting would shrink the run */
        return SG_REPORT_NO_SPARE;
    return SG_EVICT;
}

const char *sg_action_name(enum sg_action a)
{
    static const char *const names[] = {
        [SG_REPORT] = "report",
        [SG_EVICT] = "evict",
        [SG_REPORT_NO_SPARE] = "report_no_spare",
        [SG_REPORT_SELF] = "report_coordinator",
    };
    return (unsigned)a < sizeof(names) / sizeof(*names) ? names[a] : "?";
}

void sg_hold_start(struct sg_hold *h, int64_t now, int64_t cooldown_ms)
{
    h->until = now + (cooldown_ms > 0 ? cooldown_ms : 0);
    if (h->until == 0)
        h->until = 1; /* held, if only until the next pass */
}

bool sg_hold_active(const struct sg_hold *h, int64_t now)
{
    return h->until != 0 && now < h->until;
}
