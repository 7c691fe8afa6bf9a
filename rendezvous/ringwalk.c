// SPDX-License-Identifier: Apache-2.0
/* rdzv ringwalk: the members past a suspected neighbour, from this node's own chunk. */
#include "ringwalk.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session_internal.h"

static const struct rdzv_member *member_named(const struct rdzv_member *m, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(m[i].node_id, id) == 0)
            return &m[i];
    return NULL;
}

size_t rdzv_ring_walk_order(const struct rdzv_member *m, size_t n, const char *self,
                            const char *from, bool backward, struct rdzv_walk_step *ret, size_t max)
{
    size_t k = 0;
    const struct rdzv_member *at = from && from[0] ? member_named(m, n, from) : NULL;
    /* each step moves to the next member of a cycle through the chunk: n steps at most */
    for (size_t steps = 0; at && steps < n; steps++) {
        if (k >= max)
            break; /* the bound: a rack */
        const char *to = backward ? at->prev : at->next;
        if (!to[0] || strcmp(to, self) == 0 || strcmp(to, from) == 0)
            break; /* no link, or the ring has come round */
        struct rdzv_walk_step *w = &ret[k++];
        snprintf(w->node_id, sizeof(w->node_id), "%s", to);
        w->group_rank = backward ? at->prev_rank : at->next_rank;
        w->slot = backward ? -1 : at->next_slot;
        at = member_named(m, n, to); /* past the chunk's end: no further */
    }
    return k;
}

int rdzv_ring_walk(struct rdzv_session *s, const char *from, bool backward,
                   struct rdzv_walk_step *ret, size_t max, size_t *ret_n, struct ea_error *err)
{
    *ret_n = 0;
    if (!s->have_state || s->state.status != RDZV_RUNNING || s->state.n_chunks < 1)
        return 0;
    char key[KEY_MAX];
    rdzv_key_of(s, key, "assign/%06d", rdzv_chunk_of(s->slot, s->state.n_chunks));
    ssize_t i = rdzv_mirror_find(&s->m, key);
    if (i < 0)
        return 0;
    const struct kv_entry *e = &s->m.keys[i];
    int64_t gen = rdzv_state_generation(&s->state, s->state_rev);
    if (rdzv_chunk_commit_cmp(&s->state, gen, e->mod_revision) != 0)
        return 0; /* another commit's chunk: the order it gives is not this round's */
    int64_t round = 0;
    int chunk = -1;
    struct rdzv_member *m = NULL;
    size_t n = 0;
    int r = rdzv_chunk_decode(e->value, e->value_len, &round, &chunk, &m, &n, err);
    if (r < 0)
        return ea_error_wrap(err, r, "key '%s'", e->key);
    if (round == s->state.round)
        *ret_n = rdzv_ring_walk_order(m, n, s->cfg.self.node_id, from, backward, ret, max);
    free(m);
    return 0;
}
