// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv session: the coordinator deletes the per-round keys of old rounds (issue 30). Every round
 * leaves keys behind — rounds/<r>/… (master, tracker, detect, recovery), done/<r>/<id>,
 * failures/<r>, reform/<r> — and a joining node lists rounds/: without this, what a join reads
 * and what the store holds grow with the run's age. The coordinator deletes those of rounds
 * before the previous one (the current and the previous round are read: the previous round's
 * detect time and failure by the recovery and failure reports), keeping the few older keys a
 * reader still needs: the run's first failure, the failure that failed the run, and the newest
 * recovery record (`status`). Deletes go in transactions fenced like the commit, on the
 * mod_revision of `state` and of `coord`: a coordinator that lost its key deletes nothing.
 */
#include "session_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum gc_kind { GC_NONE, GC_ROUNDS, GC_DONE, GC_FAILURE, GC_REFORM };

/* A decimal round number at *p, which then points past it. */
static bool parse_round(const char **p, int64_t *ret)
{
    const char *s = *p;
    int64_t v = 0;
    size_t n = 0;
    for (; s[n] >= '0' && s[n] <= '9' && n < 18; n++)
        v = v * 10 + (s[n] - '0');
    if (n == 0)
        return false;
    *p = s + n;
    *ret = v;
    return true;
}

/* The kind of a per-round key (rel: the key after the run's prefix) and its round. */
static enum gc_kind per_round_key(const char *rel, int64_t *ret_round, bool *ret_recovery)
{
    static const struct {
        const char *dir;
        enum gc_kind kind;
        bool leaf; /* the round is the whole last component (failures/<r>), not a folder */
    } kinds[] = {{"rounds/", GC_ROUNDS, false},
                 {"done/", GC_DONE, false},
                 {"failures/", GC_FAILURE, true},
                 {"reform/", GC_REFORM, true}};
    *ret_recovery = false;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        size_t len = strlen(kinds[i].dir);
        const char *p = rel + len;
        if (strncmp(rel, kinds[i].dir, len) != 0 || !parse_round(&p, ret_round))
            continue;
        if (kinds[i].leaf ? *p != '\0' : *p != '/')
            return GC_NONE;
        *ret_recovery = kinds[i].kind == GC_ROUNDS && strcmp(p, "/recovery") == 0;
        return kinds[i].kind;
    }
    return GC_NONE;
}

/* Delete keys[0..n) in transactions fenced on `state` and `coord`. 0, KV_ECONFLICT, or an
 * error; the keys deleted are dropped from the mirror at once. */
static int delete_fenced(struct rdzv_session *s, char **keys, size_t n, struct ea_error *err)
{
    struct kv_cmp cmps[2] = {{s->state_key, s->state_rev}, {s->coord_key, s->coord_rev}};
    struct kv_op ops[KV_TXN_OPS_MAX];
    for (size_t at = 0; at < n;) {
        size_t m = n - at < KV_TXN_OPS_MAX ? n - at : KV_TXN_OPS_MAX;
        for (size_t k = 0; k < m; k++)
            ops[k] = (struct kv_op){.key = keys[at + k], .del = true};
        s->stats.requests++;
        s->stats.writes++;
        s->stats.keys_written += m;
        int r = kv_txn(s->kv, cmps, 2, ops, m, NULL, err);
        if (r < 0)
            return r;
        for (size_t k = 0; k < m; k++)
            rdzv_mirror_del(&s->m, keys[at + k]);
        at += m;
    }
    return 0;
}

int rdzv_gc_old_rounds(struct rdzv_session *s, int64_t now_ms, struct ea_error *err)
{
    if (!s->is_coord || !s->full || !s->have_state || s->state.round - 1 <= s->gc_below)
        return 0;
    int64_t keep_from = s->state.round - 1, round, first_failure = -1, last_recovery = -1;
    size_t plen = strlen(s->prefix);
    bool recovery;
    /* what readers need from older rounds: the run's first failure and the newest recovery */
    for (size_t i = 0; i < s->m.n_keys; i++) {
        enum gc_kind kind = per_round_key(s->m.keys[i].key + plen, &round, &recovery);
        if (kind == GC_FAILURE && (first_failure < 0 || round < first_failure))
            first_failure = round;
        if (recovery && round > last_recovery)
            last_recovery = round;
    }
    char **keys = NULL;
    size_t n = 0, cap = 0;
    int r = 0;
    for (size_t i = 0; i < s->m.n_keys && r == 0; i++) {
        const char *key = s->m.keys[i].key;
        enum gc_kind kind = per_round_key(key + plen, &round, &recovery);
        if (kind == GC_NONE || round >= keep_from || (recovery && round == last_recovery) ||
            (kind == GC_FAILURE && (round == first_failure || round == s->state.failure_round ||
                                    round == s->state.charge_failed_round ||
                                    round == s->state.last_failure)))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **k = realloc(keys, cap * sizeof(*keys));
            if (!k) {
                r = ea_errorf(err, -ENOMEM, "out of memory");
                break;
            }
            keys = k;
        }
        if (!(keys[n] = strdup(key)))
            r = ea_errorf(err, -ENOMEM, "out of memory");
        else
            n++;
    }
    if (r == 0)
        r = delete_fenced(s, keys, n, err);
    for (size_t k = 0; k < n; k++)
        free(keys[k]);
    free(keys);
    if (r == KV_ECONFLICT) { /* we no longer coordinate, or `state` moved: look again */
        ea_error_clear(err);
        r = rdzv_refresh_fences(s, now_ms, err);
        return r < 0 ? r : 0;
    }
    if (r < 0)
        return r;
    s->gc_below = keep_from;
    return n > 0;
}
