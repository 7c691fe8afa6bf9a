// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv session: what the coordinator keeps per event instead of scanning every node (issue 30).
 * A lease expiry in a fleet of 20,000 is one delete event; the coordinator's work for it must
 * not grow with the fleet (a 20% departure is 4,000 of them, in the loop that renews its lease).
 * Kept as events arrive: the number of the committed round's members whose node key is live
 * (the mirror reports every valid node record that comes or goes; a hash set of the members' ids
 * answers "is it a member" in O(1)), and the list of `done/<round>/` markers (rebuilt only when a
 * done key changed). The sorted list of live nodes is built only when the plan writes a round
 * of them (rdzv_plan's RDZV_PLAN_NEED_NODES): O(N log N) once per commit, never per event.
 */
#include "session_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static size_t id_hash(const char *id)
{
    size_t h = 14695981039346656037u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 1099511628211u;
    return h;
}

static bool is_member(const struct rdzv_session *s, const char *id)
{
    if (!s->member_slots)
        return false;
    size_t mask = s->member_slots - 1;
    for (size_t i = id_hash(id) & mask; s->member_set[i]; i = (i + 1) & mask)
        if (strcmp(s->member_set[i], id) == 0)
            return true;
    return false;
}

void rdzv_count_on_node(void *ctx, const struct rdzv_node *n, int delta)
{
    struct rdzv_session *s = ctx;
    /* the members changed since the set was built: rdzv_count_members() counts afresh */
    if (s->counted_version == s->members_version && is_member(s, n->node_id))
        s->n_survivors += delta;
}

int rdzv_count_members(struct rdzv_session *s, struct ea_error *err)
{
    if (s->counted_version == s->members_version)
        return 0;
    free(s->member_set);
    s->member_set = NULL;
    s->member_slots = 0;
    s->n_survivors = 0;
    size_t n = s->full && s->have_state ? s->state.n_members : 0, slots = 16;
    while (slots < 2 * n)
        slots *= 2;
    if (!(s->member_set = calloc(slots, sizeof(*s->member_set))))
        return ea_errorf(err, -ENOMEM, "out of memory");
    s->member_slots = slots;
    for (size_t k = 0; k < n; k++) {
        const char *id = s->state.members[k].node_id;
        size_t i = id_hash(id) & (slots - 1);
        while (s->member_set[i] && strcmp(s->member_set[i], id) != 0)
            i = (i + 1) & (slots - 1);
        s->member_set[i] = id;
        char key[KEY_MAX];
        rdzv_key_of(s, key, "nodes/%s", id);
        ssize_t e = rdzv_mirror_find(&s->m, key);
        s->n_survivors += e >= 0 && s->m.dec[e];
    }
    s->counted_version = s->members_version;
    return 0;
}

void rdzv_count_free(struct rdzv_session *s)
{
    free(s->member_set);
    s->member_set = NULL;
    s->member_slots = 0;
    free(s->done);
    s->done = NULL;
    s->n_done = 0;
    free(s->nodes);
    s->nodes = NULL;
    s->n_nodes = 0;
}

int rdzv_count_done(struct rdzv_session *s, struct ea_error *err)
{
    if (!s->full || !s->have_state) {
        free(s->done);
        s->done = NULL;
        s->n_done = 0;
        s->done_round = -1;
        return 0;
    }
    if (!s->m.done_dirty && s->done_round == s->state.round && s->done)
        return 0;
    const char **done = calloc(s->m.n_keys ? s->m.n_keys : 1, sizeof(*done));
    if (!done)
        return ea_errorf(err, -ENOMEM, "out of memory");
    char dprefix[KEY_MAX];
    rdzv_key_of(s, dprefix, "done/%" PRId64 "/", s->state.round);
    size_t dlen = strlen(dprefix), n = 0;
    for (size_t i = 0; i < s->m.n_keys; i++)
        if (strncmp(s->m.keys[i].key, dprefix, dlen) == 0)
            done[n++] = s->m.keys[i].key + dlen; /* the key's string stays put until it goes,
                                                    and a done key going rebuilds this */
    free(s->done);
    s->done = done;
    s->n_done = n;
    s->done_round = s->state.round;
    s->m.done_dirty = false;
    return 0;
}

static int cmp_node(const void *a, const void *b)
{
    const struct rdzv_node *x = *(const struct rdzv_node *const *)a,
                           *y = *(const struct rdzv_node *const *)b;
    return (x->create_revision > y->create_revision) - (x->create_revision < y->create_revision);
}

int rdzv_count_sorted_nodes(struct rdzv_session *s, struct ea_error *err)
{
    if (!s->m.nodes_dirty && s->nodes)
        return 0;
    /* the records are big (their NIC addresses): sort pointers, then copy each once */
    size_t n = 0, cap = s->m.n_keys ? s->m.n_keys : 1;
    struct rdzv_node *nodes = malloc(cap * sizeof(*nodes));
    const struct rdzv_node **order = malloc(cap * sizeof(*order));
    if (!nodes || !order) {
        free(nodes);
        free(order);
        return ea_errorf(err, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < s->m.n_keys; i++)
        if (s->m.dec[i])
            order[n++] = s->m.dec[i];
    qsort(order, n, sizeof(*order), cmp_node);
    for (size_t i = 0; i < n; i++)
        nodes[i] = *order[i];
    free(order);
    free(s->nodes);
    s->nodes = nodes;
    s->n_nodes = n;
    s->m.nodes_dirty = false;
    return 0;
}
