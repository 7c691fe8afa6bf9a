// SPDX-License-Identifier: Apache-2.0
/* rdzv ckpt_keys: ckpt/<node-id> (the checkpoint summaries) and the member check of a fetch. */
#include "ckpt_keys.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session_internal.h"
#include "state.h"

int rdzv_ckpt_publish(struct rdzv_session *s, const char *json, struct ea_error *err)
{
    char key[KEY_MAX];
    rdzv_key_of(s, key, "ckpt/%s", s->cfg.self.node_id);
    if (s->lease <= 0)
        return ea_errorf(err, KV_ENOLEASE, "no lease yet");
    s->stats.requests++;
    s->stats.writes++;
    s->stats.keys_written++;
    return kv_put(s->kv, key, json, strlen(json), s->lease, NULL, err);
}

int rdzv_ckpt_list(struct rdzv_session *s, struct kv_list *ret, bool *ret_truncated,
                   struct ea_error *err)
{
    char prefix[KEY_MAX];
    rdzv_key_of(s, prefix, "ckpt/");
    struct kv_list l = {0};
    s->stats.requests++;
    int r = kv_list_page(s->kv, prefix, prefix, RDZV_CKPT_LIST_MAX, &l, err);
    if (r < 0)
        return r;
    for (size_t i = 0; i < l.n; i++)
        s->stats.bytes_received += strlen(l.entries[i].key) + l.entries[i].value_len;
    *ret_truncated = l.more;
    *ret = l;
    return 0;
}

const char *rdzv_ckpt_id_of(const struct rdzv_session *s, const char *key)
{
    char prefix[KEY_MAX];
    rdzv_key_of(s, prefix, "ckpt/");
    size_t n = strlen(prefix);
    return strncmp(key, prefix, n) == 0 ? key + n : NULL;
}

int rdzv_ckpt_each(struct rdzv_session *s, int64_t round,
                   void (*fn)(void *ctx, const struct rdzv_ckpt_entry *e), void *ctx,
                   struct ea_error *err)
{
    if (!s->full || !s->have_state || s->state.round != round || !s->state.members)
        return ea_errorf(err, -EAGAIN, "the members of round %" PRId64 " are not mirrored here",
                         round);
    int others = 0;
    for (size_t i = 0; i < s->state.n_members; i++) {
        const struct rdzv_member *m = &s->state.members[i];
        if (strcmp(m->node_id, s->cfg.self.node_id) == 0)
            continue;
        others++;
        char key[KEY_MAX];
        rdzv_key_of(s, key, "nodes/%s", m->node_id);
        ssize_t n = rdzv_mirror_find(&s->m, key);
        if (n < 0 || !s->m.dec[n] || s->m.keys[n].create_revision != m->slot)
            continue; /* gone, or another incarnation than the round's */
        rdzv_key_of(s, key, "ckpt/%s", m->node_id);
        ssize_t k = rdzv_mirror_find(&s->m, key);
        if (k < 0 || s->m.keys[k].lease != s->m.keys[n].lease)
            continue; /* none, or not written by that node */
        const struct kv_entry *e = &s->m.keys[k];
        fn(ctx, &(struct rdzv_ckpt_entry){.id = m->node_id, .value = e->value, .len = e->value_len,
                                           .lease = e->lease, .mod_revision = e->mod_revision});
    }
    return others;
}

/* The slot (create_revision) of node `id`'s key now: 1 with it, 0 no such node, <0 error. */
static int slot_of(struct rdzv_session *s, const char *id, int64_t *ret, struct ea_error *err)
{
    char key[KEY_MAX];
    rdzv_key_of(s, key, "nodes/%s", id);
    if (s->full) {
        ssize_t i = rdzv_mirror_find(&s->m, key);
        if (i < 0 || !s->m.dec[i])
            return 0;
        *ret = s->m.keys[i].create_revision;
        return 1;
    }
    struct kv_entry e = {0};
    s->stats.requests++;
    int r = kv_get(s->kv, key, &e, err);
    if (r == KV_ENOTFOUND) {
        ea_error_clear(err);
        return 0;
    }
    if (r < 0)
        return r;
    s->stats.bytes_received += strlen(e.key) + e.value_len;
    *ret = e.create_revision;
    kv_entry_clear(&e);
    return 1;
}

int rdzv_is_member(struct rdzv_session *s, const char *id, int64_t round, struct ea_error *err)
{
    if (!s->have_state || s->state.round != round)
        return ea_errorf(err, -EAGAIN, "round %" PRId64 " is not the committed round here", round);
    int64_t slot = 0;
    int r = slot_of(s, id, &slot, err);
    if (r <= 0)
        return r; /* not live: not a member */
    if (s->full) {
        for (size_t i = 0; s->state.members && i < s->state.n_members; i++)
            if (strcmp(s->state.members[i].node_id, id) == 0)
                return s->state.members[i].slot == slot;
        return s->state.members ? 0 : ea_errorf(err, -EAGAIN, "the members are not known yet");
    }
    int64_t cround = 0;
    struct rdzv_member *m = NULL;
    size_t nm = 0;
    if ((r = rdzv_read_chunk_of(s, slot, &cround, &m, &nm, err)) <= 0)
        return r; /* no chunk there, or it does not decode: not a member */
    int found = 0;
    for (size_t i = 0; cround == round && i < nm; i++)
        found |= strcmp(m[i].node_id, id) == 0 && m[i].slot == slot;
    free(m);
    return cround == round ? found : ea_errorf(err, -EAGAIN, "chunk of another round");
}
