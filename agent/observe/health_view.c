// SPDX-License-Identifier: Apache-2.0
/* hview: held-out nodes and the last recovery, from a listing of the run's keys. */
#include "health_view.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ea_escape.h"
#include "keys.h"

char *hview_held_json(const char *node, const char *reason, long long since_ms)
{
    json_t *o = json_pack("{s:s, s:s, s:I}", "node", node, "reason", reason, "since_ms",
                          (json_int_t)since_ms);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

static int add_held(struct hview *v, const char *value)
{
    json_t *o = json_loads(value, 0, NULL);
    const char *node = NULL, *reason = NULL;
    json_int_t since = 0;
    int r = 0;
    if (o && json_unpack(o, "{s:s, s:s, s:I}", "node", &node, "reason", &reason, "since_ms",
                         &since) == 0) {
        struct hview_held *h = realloc(v->held, (v->n_held + 1) * sizeof(*h));
        if (!h) {
            r = -ENOMEM;
        } else {
            v->held = h;
            h = &v->held[v->n_held++];
            snprintf(h->node, sizeof(h->node), "%s", node);
            snprintf(h->reason, sizeof(h->reason), "%s", reason);
            h->since_ms = since;
        }
    }
    json_decref(o);
    return r;
}

static int by_node(const void *a, const void *b)
{
    return strcmp(((const struct hview_held *)a)->node, ((const struct hview_held *)b)->node);
}

int hview_decode(const char *prefix, const struct kv_entry *e, size_t n, struct hview *ret)
{
    struct hview v = {0};
    for (size_t i = 0; i < n; i++) {
        int64_t round = 0;
        const char *rest = NULL;
        enum rdzv_key_kind kind = e[i].value ? rdzv_key_parse(prefix, e[i].key, &round, &rest)
                                             : RDZV_KEY_OUTSIDE;
        if (kind == RDZV_KEY_HELD) {
            if (add_held(&v, e[i].value) < 0) {
                hview_clear(&v);
                return -ENOMEM;
            }
        } else if (kind == RDZV_KEY_ROUND && strcmp(rest, "recovery") == 0) {
            struct ph_record rec;
            if ((!v.have_recovery || round > v.recovery.round) &&
                ph_record_parse(e[i].value, &rec) == 0) {
                v.recovery = rec;
                v.have_recovery = true;
            }
        }
    }
    if (v.n_held > 1)
        qsort(v.held, v.n_held, sizeof(*v.held), by_node);
    *ret = v;
    return 0;
}

void hview_clear(struct hview *v)
{
    if (!v)
        return;
    free(v->held);
    memset(v, 0, sizeof(*v));
}

void hview_print_text(FILE *out, const struct hview *v)
{
    if (v->have_recovery) {
        char text[160];
        ph_format(&v->recovery, text, sizeof(text));
        ea_fprintf(out, "\nlast recovery: %s (round %lld, %s)\n", text,
                   (long long)v->recovery.round, v->recovery.cause);
    }
    if (v->n_held == 0)
        return;
    ea_fprintf(out, "\nheld out by --preflight:\n");
    for (size_t i = 0; i < v->n_held; i++) {
        char when[32] = "?";
        time_t t = (time_t)(v->held[i].since_ms / 1000);
        struct tm tm;
        if (gmtime_r(&t, &tm))
            strftime(when, sizeof(when), "%m-%d %H:%M:%SZ", &tm);
        /* the reason's first line here; every line is in --json */
        const char *r = v->held[i].reason;
        ea_fprintf(out, "  %s (since %s): %.*s\n", v->held[i].node, when, (int)strcspn(r, "\n"), r);
    }
}

void hview_add_json(json_t *o, const struct hview *v)
{
    /* each field appears once there is something to say */
    if (v->n_held) {
        json_t *held = json_array();
        for (size_t i = 0; held && i < v->n_held; i++)
            json_array_append_new(held, json_pack("{s:s, s:s, s:I}", "node", v->held[i].node,
                                                  "reason", v->held[i].reason, "since_ms",
                                                  (json_int_t)v->held[i].since_ms));
        json_object_set_new(o, "held", held ? held : json_null());
    }
    if (v->have_recovery) {
        char *s = ph_record_json(&v->recovery);
        json_t *rec = s ? json_loads(s, 0, NULL) : NULL;
        free(s);
        json_object_set_new(o, "last_recovery", rec ? rec : json_null());
    }
}
