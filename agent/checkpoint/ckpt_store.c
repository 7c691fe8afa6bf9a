// SPDX-License-Identifier: Apache-2.0
/* ckpt_store: bounds, the memory bound, commit verification, completion and eviction, the spare
 * (pure). */
#include "ckpt_store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void ckpt_store_init(struct ckpt_store *s, const char *run, uint64_t limit)
{
    *s = (struct ckpt_store){.limit = limit, .next_id = 1, .complete = -1, .spare_fd = -1};
    snprintf(s->run, sizeof(s->run), "%s", run ? run : "");
}

/* Close fd after the reply to the request that dropped it (ckpt_store_reap). */
static void reap_later(struct ckpt_store *s, int fd)
{
    if (fd < 0)
        return;
    if (s->n_reap < CKPT_REAP_MAX)
        s->reap[s->n_reap++] = fd;
    else
        close(fd);
}

void ckpt_store_reap(struct ckpt_store *s)
{
    while (s->n_reap > 0)
        close(s->reap[--s->n_reap]);
}

static void drop_at(struct ckpt_store *s, size_t i)
{
    reap_later(s, s->e[i].fd);
    s->used -= s->e[i].len;
    s->e[i] = s->e[--s->n];
}

void ckpt_store_spare_drop(struct ckpt_store *s)
{
    reap_later(s, s->spare_fd);
    s->spare_fd = -1;
    s->spare_len = 0;
    s->spare_done = 0;
}

int ckpt_store_spare_begin(struct ckpt_store *s, uint64_t len)
{
    if (s->spare_len > 0)
        return -EEXIST;
    if (len == 0)
        return -EINVAL;
    if (s->used + len > s->limit) /* beside everything held, pending saves too: drops nothing */
        return -ENOSPC;
    s->spare_len = len;
    s->spare_done = 0;
    return 0;
}

void ckpt_store_spare_set(struct ckpt_store *s, int fd)
{
    if (s->spare_len > 0 && s->spare_fd < 0)
        s->spare_fd = fd;
    else if (fd >= 0)
        close(fd);
}

void ckpt_store_clear(struct ckpt_store *s)
{
    ckpt_store_spare_drop(s);
    while (s->n > 0)
        drop_at(s, s->n - 1);
    ckpt_store_reap(s);
    free(s->e);
    s->e = NULL;
    s->cap = 0;
    s->complete = -1;
}

/* Bytes that dropping every entry of a step older than `step` (never the newest complete one,
 * never another connection's pending save) would free. */
static uint64_t droppable(const struct ckpt_store *s, int64_t step)
{
    uint64_t b = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->e[i].step < step && s->e[i].step != s->complete && s->e[i].committed)
            b += s->e[i].len;
    return b;
}

/* A newer committed entry of entry i's shard (of the same shard count) is held. */
static bool superseded(const struct ckpt_store *s, size_t i)
{
    const struct ckpt_entry *e = &s->e[i];
    for (size_t j = 0; j < s->n; j++)
        if (j != i && s->e[j].committed && s->e[j].shard == e->shard &&
            s->e[j].shards == e->shards && s->e[j].step > e->step)
            return true;
    return false;
}

/* Room for len more bytes (a save or replica of `step`): committed entries of older steps are
 * dropped one at a time, the oldest first, until it fits — first those a newer entry of their
 * shard supersedes, then the newest of a shard; never the store's newest complete step. A node
 * so keeps its own and its predecessor's newest shards until the next ones commit: a save that
 * needs room does not leave it, for that moment, without the only copy of a dead node's shard. */
static void make_room(struct ckpt_store *s, int64_t step, uint64_t len)
{
    for (int pass = 0; pass < 2 && s->used + len > s->limit; pass++)
        while (s->used + len > s->limit) {
            size_t victim = SIZE_MAX;
            for (size_t i = 0; i < s->n; i++) {
                const struct ckpt_entry *e = &s->e[i];
                if (e->step < step && e->step != s->complete && e->committed &&
                    (pass == 1 || superseded(s, i)) &&
                    (victim == SIZE_MAX || e->step < s->e[victim].step))
                    victim = i;
            }
            if (victim == SIZE_MAX)
                break;
            drop_at(s, victim);
        }
}

static void drop_older(struct ckpt_store *s, int64_t step)
{
    for (size_t i = s->n; i-- > 0;)
        if (s->e[i].step < step)
            drop_at(s, i);
}

/* Reserve (ckpt_store.h); with ret_spare a worker's save, which takes the spare if it fits in it. */
static int reserve(struct ckpt_store *s, uint64_t owner, int64_t step, int shard, int shards,
                   uint64_t len, uint64_t *ret_id, int *ret_spare, struct ea_error *err)
{
    if (step < 0 || step > CKPT_MAX_STEP)
        return ea_errorf(err, -EINVAL, "step %" PRId64 " is outside 0..2^53", step);
    if (shards < 1 || shards > CKPT_MAX_SHARDS)
        return ea_errorf(err, -EINVAL, "shards %d is outside 1..%d", shards, CKPT_MAX_SHARDS);
    if (shard < 0 || shard >= shards)
        return ea_errorf(err, -EINVAL, "shard %d is outside 0..%d", shard, shards - 1);
    if (step < s->complete)
        return ea_errorf(err, -ESTALE, "step %" PRId64 " is older than step %" PRId64
                         ", complete in this store", step, s->complete);
    for (size_t i = 0; i < s->n; i++) {
        const struct ckpt_entry *e = &s->e[i];
        if (e->step != step)
            continue;
        if (e->shards != shards)
            return ea_errorf(err, -EINVAL, "step %" PRId64 " was saved with %d shards, not %d",
                             step, e->shards, shards);
        if (e->shard == shard && !e->committed)
            return ea_errorf(err, -EBUSY, "shard %d of step %" PRId64 " is being saved already",
                             shard, step);
    }
    /* the spare, taken, is this save's room; else it is the first thing dropped for room */
    bool take = ret_spare && s->spare_fd >= 0 && len <= s->spare_len;
    uint64_t spare = take ? 0 : s->spare_len;
    if (s->used + len - droppable(s, step) > s->limit) /* used + len: no overflow (len < 2^49) */
        return ea_errorf(err, -ENOSPC, "%" PRIu64 " bytes do not fit --checkpoint-memory (%"
                         PRIu64 " of %" PRIu64 " bytes in use)", len, s->used, s->limit);
    if (s->used + spare + len > s->limit)
        ckpt_store_spare_drop(s);
    make_room(s, step, len);
    if (s->n >= CKPT_MAX_ENTRIES)
        return ea_errorf(err, -ENOSPC, "the store holds %d shards already", CKPT_MAX_ENTRIES);
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        struct ckpt_entry *e = realloc(s->e, cap * sizeof(*e));
        if (!e)
            return ea_errorf(err, -ENOMEM, "out of memory");
        s->e = e;
        s->cap = cap;
    }
    s->e[s->n++] = (struct ckpt_entry){.id = s->next_id++, .owner = owner, .step = step,
                                       .shard = shard, .shards = shards, .len = len, .fd = -1};
    s->used += len;
    *ret_id = s->e[s->n - 1].id;
    if (ret_spare)
        *ret_spare = take ? s->spare_fd : -1;
    if (take) { /* handed out once: the store forgets it (its room is the save's now) */
        s->spare_fd = -1;
        s->spare_len = 0;
        s->spare_done = 0;
    }
    return 0;
}

int ckpt_store_reserve(struct ckpt_store *s, uint64_t owner, int64_t step, int shard, int shards,
                       uint64_t len, uint64_t *ret_id, struct ea_error *err)
{
    return reserve(s, owner, step, shard, shards, len, ret_id, NULL, err);
}

int ckpt_store_reserve_save(struct ckpt_store *s, uint64_t owner, int64_t step, int shard,
                            int shards, uint64_t len, uint64_t *ret_id, int *ret_spare,
                            struct ea_error *err)
{
    return reserve(s, owner, step, shard, shards, len, ret_id, ret_spare, err);
}

size_t ckpt_store_supersede(struct ckpt_store *s, int64_t step, int shards)
{
    if (step == s->complete)
        return 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->e[i].step == step && s->e[i].shards != shards && !s->e[i].committed)
            return 0; /* being saved with that count: the save is refused, nothing dropped */
    size_t dropped = 0;
    for (size_t i = s->n; i-- > 0;)
        if (s->e[i].step == step && s->e[i].shards != shards) {
            drop_at(s, i);
            dropped++;
        }
    return dropped;
}

static struct ckpt_entry *by_id(struct ckpt_store *s, uint64_t id, size_t *ret_i)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->e[i].id == id) {
            if (ret_i)
                *ret_i = i;
            return &s->e[i];
        }
    return NULL;
}

void ckpt_store_set_fd(struct ckpt_store *s, uint64_t id, int fd)
{
    struct ckpt_entry *e = by_id(s, id, NULL);
    if (e)
        e->fd = fd;
    else if (fd >= 0)
        close(fd);
}

struct ckpt_entry *ckpt_store_pending(struct ckpt_store *s, uint64_t owner, uint64_t id)
{
    struct ckpt_entry *e = by_id(s, id, NULL);
    return e && !e->committed && e->owner == owner ? e : NULL;
}

static bool step_complete(const struct ckpt_store *s, int64_t step, int shards)
{
    int have = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->e[i].step == step && s->e[i].committed)
            have++; /* one committed entry per shard (a re-save replaces) */
    return have == shards;
}

int ckpt_store_commit(struct ckpt_store *s, uint64_t owner, uint64_t id, uint64_t size,
                      bool declared, uint32_t crc, uint32_t crc_declared, struct ea_error *err)
{
    size_t i = 0;
    struct ckpt_entry *e = ckpt_store_pending(s, owner, id);
    if (!e)
        return ea_errorf(err, -ENOENT, "no save %" PRIu64 " pending on this connection", id);
    by_id(s, id, &i);
    if (size != e->len) {
        ea_errorf(err, -EBADMSG, "shard %d of step %" PRId64 ": %" PRIu64 " bytes, not the %"
                  PRIu64 " declared", e->shard, e->step, size, e->len);
        drop_at(s, i);
        return -EBADMSG;
    }
    if (declared && crc != crc_declared) {
        ea_errorf(err, -EBADMSG, "shard %d of step %" PRId64 ": checksum %08" PRIx32 ", not the %08"
                  PRIx32 " declared", e->shard, e->step, crc, crc_declared);
        drop_at(s, i);
        return -EBADMSG;
    }
    int64_t step = e->step;
    int shard = e->shard, shards = e->shards;
    for (size_t j = 0; j < s->n; j++)
        if (j != i && s->e[j].step == step && s->e[j].shard == shard && s->e[j].committed) {
            drop_at(s, j); /* a re-save of the same shard replaces it */
            break;
        }
    e = by_id(s, id, NULL);
    e->committed = true;
    e->crc = declared ? crc : 0;
    e->crc_known = declared;
    if (step > s->complete && step_complete(s, step, shards)) {
        s->complete = step;
        s->complete_shards = shards;
        drop_older(s, step); /* pending older saves too: their commit gets -ENOENT */
        return 1;
    }
    return 0;
}

void ckpt_store_drop(struct ckpt_store *s, uint64_t id)
{
    size_t i = 0;
    if (by_id(s, id, &i))
        drop_at(s, i);
}

void ckpt_store_drop_owner(struct ckpt_store *s, uint64_t owner)
{
    for (size_t i = s->n; i-- > 0;)
        if (!s->e[i].committed && s->e[i].owner == owner)
            drop_at(s, i);
}

int ckpt_store_latest(const struct ckpt_store *s, int64_t *ret_step, int *ret_shards)
{
    if (s->complete < 0)
        return -ENOENT;
    *ret_step = s->complete;
    *ret_shards = s->complete_shards;
    return 0;
}

const struct ckpt_entry *ckpt_store_find(const struct ckpt_store *s, int64_t step, int shard)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->e[i].step == step && s->e[i].shard == shard && s->e[i].committed)
            return &s->e[i];
    return NULL;
}
