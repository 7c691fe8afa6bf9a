// SPDX-License-Identifier: Apache-2.0
/* ckpt_summary: a node's holdings as published once per round; the step complete across the
 * run's nodes and who holds a shard (pure). */
#include "ckpt_summary.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUM_SCHEMA "elastic-agent/v2"

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

void ckpt_summary_of(const struct ckpt_store *st, const char *node, int64_t round,
                     struct ckpt_summary *ret)
{
    struct ckpt_summary s = {.round = round};
    snprintf(s.node, sizeof(s.node), "%s", node);
    int64_t below = INT64_MAX; /* the next step is the newest one below this */
    int *held = malloc((st->n ? st->n : 1) * sizeof(int));
    while (held && s.n < CKPT_SUM_STEPS) {
        int64_t step = -1;
        for (size_t i = 0; i < st->n; i++)
            if (st->e[i].committed && st->e[i].step < below && st->e[i].step > step)
                step = st->e[i].step;
        if (step < 0)
            break;
        struct ckpt_sum_step *t = &s.s[s.n++];
        *t = (struct ckpt_sum_step){.step = step};
        size_t k = 0;
        for (size_t i = 0; i < st->n; i++)
            if (st->e[i].committed && st->e[i].step == step) {
                held[k++] = st->e[i].shard;
                t->shards = st->e[i].shards;
            }
        qsort(held, k, sizeof(int), cmp_int);
        for (size_t i = 0; i < k && t->n <= CKPT_SUM_RANGES; i++) {
            if (t->n > 0 && held[i] <= t->hi[t->n - 1] + 1) {
                if (held[i] > t->hi[t->n - 1])
                    t->hi[t->n - 1] = held[i];
                continue;
            }
            if (t->n == CKPT_SUM_RANGES)
                break; /* more ranges than a summary holds: the rest is left out */
            t->lo[t->n] = t->hi[t->n] = held[i];
            t->n++;
        }
        below = step;
    }
    free(held);
    *ret = s;
}

int ckpt_summary_encode(const struct ckpt_summary *s, const char *run, char **ret_json,
                        struct ea_error *err)
{
    if (s->n > CKPT_SUM_STEPS || s->round < 0)
        return ea_errorf(err, -EINVAL, "a summary of %zu steps, round %" PRId64, s->n, s->round);
    json_t *steps = json_array();
    for (size_t i = 0; steps && i < s->n; i++) {
        json_t *r = json_array();
        for (int k = 0; r && k < s->s[i].n && k < CKPT_SUM_RANGES; k++)
            json_array_append_new(r, json_pack("[i, i]", s->s[i].lo[k], s->s[i].hi[k]));
        json_array_append_new(steps, json_pack("[I, i, o]", (json_int_t)s->s[i].step,
                                               s->s[i].shards, r));
    }
    json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:o}", "schema", SUM_SCHEMA, "run", run, "node",
                          s->node, "round", (json_int_t)s->round, "steps", steps);
    char *out = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!out)
        return ea_errorf(err, -ENOMEM, "out of memory encoding a checkpoint summary");
    if (strlen(out) > CKPT_SUM_BYTES) {
        free(out);
        return ea_errorf(err, -EINVAL, "a checkpoint summary over %d bytes", CKPT_SUM_BYTES);
    }
    *ret_json = out;
    return 0;
}

static bool int_in(const json_t *v, int64_t lo, int64_t hi, int64_t *ret)
{
    if (!json_is_integer(v))
        return false;
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return false;
    *ret = x;
    return true;
}

static int decode_step(const json_t *t, const struct ckpt_summary *s, struct ckpt_sum_step *ret,
                       struct ea_error *err)
{
    int64_t step, shards, lo, hi;
    const json_t *r = json_array_get(t, 2);
    if (!json_is_array(t) || json_array_size(t) != 3 ||
        !int_in(json_array_get(t, 0), 0, CKPT_MAX_STEP, &step) ||
        !int_in(json_array_get(t, 1), 1, CKPT_MAX_SHARDS, &shards) || !json_is_array(r) ||
        json_array_size(r) > CKPT_SUM_RANGES)
        return ea_errorf(err, -EBADMSG, "a step that is not [step 0..2^53, shards 1..%d, at most "
                         "%d ranges]", CKPT_MAX_SHARDS, CKPT_SUM_RANGES);
    if (s->n > 0 && step >= s->s[s->n - 1].step)
        return ea_errorf(err, -EBADMSG, "steps not newest first");
    struct ckpt_sum_step out = {.step = step, .shards = (int)shards};
    for (size_t k = 0; k < json_array_size(r); k++) {
        const json_t *p = json_array_get(r, k);
        int64_t floor = out.n ? out.hi[out.n - 1] + 1 : 0;
        if (!json_is_array(p) || json_array_size(p) != 2 ||
            !int_in(json_array_get(p, 0), floor, shards - 1, &lo) ||
            !int_in(json_array_get(p, 1), lo, shards - 1, &hi))
            return ea_errorf(err, -EBADMSG, "step %" PRId64 ": a shard range that is not [lo, hi] "
                             "ascending within 0..%" PRId64, step, shards - 1);
        out.lo[out.n] = (int)lo;
        out.hi[out.n] = (int)hi;
        out.n++;
    }
    *ret = out;
    return 0;
}

int ckpt_summary_decode(const char *json, size_t len, const char *run, const char *node,
                        struct ckpt_summary *ret, struct ea_error *err)
{
    if (len > CKPT_SUM_BYTES)
        return ea_errorf(err, -EBADMSG, "%zu bytes, over %d", len, CKPT_SUM_BYTES);
    json_error_t je;
    json_t *j = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return ea_errorf(err, -EBADMSG, "not JSON: %s", je.text);
    const char *schema = NULL, *r = NULL, *n = NULL;
    json_t *steps = NULL;
    json_int_t round = -1;
    int rc = 0;
    if (json_unpack_ex(j, &je, JSON_STRICT, "{s:s, s:s, s:s, s:I, s:o}", "schema", &schema, "run",
                       &r, "node", &n, "round", &round, "steps", &steps) < 0)
        rc = ea_errorf(err, -EBADMSG, "not a checkpoint summary: %s", je.text);
    else if (strcmp(schema, SUM_SCHEMA) != 0)
        rc = ea_errorf(err, -EBADMSG, "schema is not '%s'", SUM_SCHEMA);
    else if (strcmp(r, run) != 0)
        rc = ea_errorf(err, -EBADMSG, "of another run");
    else if (strcmp(n, node) != 0 || strlen(n) >= CKPT_SUM_ID_MAX)
        rc = ea_errorf(err, -EBADMSG, "names another node than its key's");
    else if (round < 0)
        rc = ea_errorf(err, -EBADMSG, "a negative round");
    else if (!json_is_array(steps) || json_array_size(steps) > CKPT_SUM_STEPS)
        rc = ea_errorf(err, -EBADMSG, "steps: not an array of at most %d", CKPT_SUM_STEPS);
    struct ckpt_summary s = {.round = round};
    if (rc == 0)
        snprintf(s.node, sizeof(s.node), "%s", n);
    for (size_t i = 0; rc == 0 && i < json_array_size(steps); i++) {
        rc = decode_step(json_array_get(steps, i), &s, &s.s[s.n], err);
        if (rc == 0)
            s.n++;
    }
    json_decref(j);
    if (rc == 0)
        *ret = s;
    return rc;
}

static const struct ckpt_sum_step *step_of(const struct ckpt_summary *s, int64_t step)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->s[i].step == step)
            return &s->s[i];
    return NULL;
}

static bool holds(const struct ckpt_sum_step *t, int shard)
{
    for (int k = 0; t && k < t->n; k++)
        if (t->lo[k] <= shard && shard <= t->hi[k])
            return true;
    return false;
}

/* Is every shard of `step` held by one of v[0..n), all naming the same shard count? */
static bool covered(const struct ckpt_summary *v, size_t n, int64_t step, int *ret_shards)
{
    int shards = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ckpt_sum_step *t = step_of(&v[i], step);
        if (t && shards && t->shards != shards)
            return false; /* two shard counts for one step: not one checkpoint */
        if (t)
            shards = t->shards;
    }
    /* sweep the shards by range ends: the lowest shard not held yet, moved past every range that
     * starts at or below it, until none does */
    int next = 0;
    for (bool moved = true; shards > 0 && moved && next < shards;) {
        moved = false;
        for (size_t i = 0; i < n; i++) {
            const struct ckpt_sum_step *t = step_of(&v[i], step);
            for (int k = 0; t && k < t->n; k++)
                if (t->lo[k] <= next && t->hi[k] >= next) {
                    next = t->hi[k] + 1;
                    moved = true;
                }
        }
    }
    *ret_shards = shards;
    return shards > 0 && next >= shards;
}

int ckpt_sum_latest(const struct ckpt_summary *v, size_t n, int64_t *ret_step, int *ret_shards)
{
    int64_t below = INT64_MAX;
    for (;;) {
        int64_t step = -1;
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < v[i].n; k++)
                if (v[i].s[k].step < below && v[i].s[k].step > step)
                    step = v[i].s[k].step;
        if (step < 0)
            return -ENOENT;
        int shards = 0;
        if (covered(v, n, step, &shards)) {
            *ret_step = step;
            *ret_shards = shards;
            return 0;
        }
        below = step;
    }
}

int ckpt_sum_holder(const struct ckpt_summary *v, size_t n, int64_t step, int shard, size_t from)
{
    for (size_t k = 0; k < n; k++) {
        size_t i = (from + k) % n;
        if (holds(step_of(&v[i], step), shard))
            return (int)i;
    }
    return -ENOENT;
}

/* ---- the coordinator's value: rounds/<r>/ckpt --------------------------------------------- */

#define PUB_SCHEMA 1

void ckpt_pub_of(const struct ckpt_summary *v, size_t n, const char *node, int64_t round,
                 struct ckpt_pub *ret)
{
    struct ckpt_pub p = {.round = round, .step = -1};
    snprintf(p.node, sizeof(p.node), "%s", node);
    if (ckpt_sum_latest(v, n, &p.step, &p.shards) < 0) {
        p.step = -1;
        p.shards = 0;
    }
    *ret = p;
}

int ckpt_pub_encode(const struct ckpt_pub *p, char **ret_json, struct ea_error *err)
{
    if (p->round < 0 || p->step < -1 || p->step > CKPT_MAX_STEP)
        return ea_errorf(err, -EINVAL, "round %" PRId64 ", step %" PRId64, p->round, p->step);
    json_t *j = json_pack("{s:i, s:s, s:I, s:I, s:i}", "schema", PUB_SCHEMA, "node", p->node,
                          "round", (json_int_t)p->round, "step", (json_int_t)p->step, "shards",
                          p->step < 0 ? 0 : p->shards);
    char *out = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!out)
        return ea_errorf(err, -ENOMEM, "out of memory encoding the run's newest step");
    *ret_json = out;
    return 0;
}

int ckpt_pub_accept(const char *json, size_t len, int64_t round, const char *holder,
                    int (*is_member)(void *ctx, const char *id), void *ctx, struct ckpt_pub *ret,
                    struct ea_error *err)
{
    if (len > CKPT_PUB_BYTES)
        return ea_errorf(err, -EBADMSG, "%zu bytes, over %d", len, CKPT_PUB_BYTES);
    json_error_t je;
    json_t *j = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return ea_errorf(err, -EBADMSG, "not JSON: %s", je.text);
    const char *n = NULL;
    json_int_t schema = 0, r = -1, step = -2, shards = -1;
    int rc = 0;
    if (json_unpack_ex(j, &je, JSON_STRICT, "{s:I, s:s, s:I, s:I, s:I}", "schema", &schema,
                       "node", &n, "round", &r, "step", &step, "shards", &shards) < 0)
        rc = ea_errorf(err, -EBADMSG, "not the run's newest step: %s", je.text);
    else if (schema != PUB_SCHEMA)
        rc = ea_errorf(err, -EBADMSG, "schema is not %d", PUB_SCHEMA);
    else if (!n[0] || strlen(n) >= CKPT_SUM_ID_MAX)
        rc = ea_errorf(err, -EBADMSG, "no node id, or one over %d bytes", CKPT_SUM_ID_MAX - 1);
    else if (r != round)
        rc = ea_errorf(err, -EBADMSG, "of round %" PRId64 " under round %" PRId64 "'s key",
                       (int64_t)r, round);
    else if (step < -1 || step > CKPT_MAX_STEP)
        rc = ea_errorf(err, -EBADMSG, "step %" PRId64 " outside -1..2^53", (int64_t)step);
    else if (step >= 0 ? shards < 1 || shards > CKPT_MAX_SHARDS : shards != 0)
        rc = ea_errorf(err, -EBADMSG, "shards %" PRId64 " (step %" PRId64 ")", (int64_t)shards,
                       (int64_t)step);
    else if (strcmp(n, holder) != 0 && is_member(ctx, n) != 1)
        rc = ea_errorf(err, -EPERM, "written by '%s', neither the coordinator nor a member of "
                       "round %" PRId64, n, round);
    struct ckpt_pub p = {.round = r, .step = step, .shards = (int)shards};
    if (rc == 0)
        snprintf(p.node, sizeof(p.node), "%s", n);
    json_decref(j);
    if (rc == 0)
        *ret = p;
    return rc;
}

size_t ckpt_sum_fresh(const struct ckpt_summary *v, size_t n, int64_t round)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += v[i].round >= round;
    return k;
}

bool ckpt_pub_due(size_t others, size_t fresh, int64_t since_ms, int64_t now_ms, int64_t wait_ms)
{
    return fresh >= others || now_ms - since_ms >= wait_ms;
}
