// SPDX-License-Identifier: Apache-2.0
/* rdzv mirror: watched keys with a hash index and decoded node records. */
#include "mirror.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t key_hash(const char *key)
{
    size_t h = 14695981039346656037u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211u;
    return h;
}

/* The slot holding `key`, or the empty slot where it would go (n_slots is a power of two, at
 * least twice n_keys, so there always is one). */
static size_t slot_of(const struct rdzv_mirror *m, const char *key)
{
    size_t mask = m->n_slots - 1, i = key_hash(key) & mask;
    while (m->slots[i] && strcmp(m->keys[m->slots[i] - 1].key, key) != 0)
        i = (i + 1) & mask;
    return i;
}

ssize_t rdzv_mirror_find(const struct rdzv_mirror *m, const char *key)
{
    if (!m->n_slots)
        return -1;
    size_t i = m->slots[slot_of(m, key)];
    return i ? (ssize_t)(i - 1) : -1;
}

const char *rdzv_mirror_value(const struct rdzv_mirror *m, const char *key)
{
    ssize_t i = rdzv_mirror_find(m, key);
    return i >= 0 ? m->keys[i].value : NULL;
}

/* Rebuild the index for `want` keys (after a delete or when it is too full). */
static int index_rebuild(struct rdzv_mirror *m, size_t want)
{
    size_t n = m->n_slots ? m->n_slots : 64;
    while (n < 2 * want)
        n *= 2;
    if (n != m->n_slots) {
        size_t *slots = calloc(n, sizeof(*slots));
        if (!slots)
            return -ENOMEM;
        free(m->slots);
        m->slots = slots;
        m->n_slots = n;
    } else {
        memset(m->slots, 0, n * sizeof(*m->slots));
    }
    for (size_t k = 0; k < m->n_keys; k++)
        m->slots[slot_of(m, m->keys[k].key)] = k + 1;
    return 0;
}

bool rdzv_mirror_under(const struct rdzv_mirror *m, const char *key, const char *rel)
{
    size_t plen = strlen(m->prefix);
    return strncmp(key, m->prefix, plen) == 0 && strncmp(key + plen, rel, strlen(rel)) == 0;
}

/* The record of a nodes/<id> entry, decoded (malloc'ed), or NULL with a warning. */
static struct rdzv_node *node_decode(struct rdzv_mirror *m, const struct kv_entry *e)
{
    const char *id = e->key + strlen(m->prefix) + 6;
    struct ea_error nerr = {0};
    struct rdzv_node *n = malloc(sizeof(*n));
    if (n && rdzv_node_decode(e->value, e->value_len, n, &nerr) == 0 &&
        strcmp(n->node_id, id) == 0) {
        n->create_revision = e->create_revision;
        return n;
    }
    char msg[EA_ERROR_MSG_MAX + 64];
    snprintf(msg, sizeof(msg), "ignoring node key '%s': %s", e->key,
             !n            ? "out of memory"
             : nerr.msg[0] ? nerr.msg
                           : "node id does not match the key");
    if (m->warn)
        m->warn(m->warn_ctx, msg);
    free(n);
    return NULL;
}

int rdzv_mirror_put(struct rdzv_mirror *m, struct kv_entry *e)
{
    bool node = rdzv_mirror_under(m, e->key, "nodes/");
    ssize_t i = rdzv_mirror_find(m, e->key);
    if (i < 0) {
        if (m->n_keys == m->cap_keys) {
            size_t cap = m->cap_keys ? m->cap_keys * 2 : 32;
            struct kv_entry *k = realloc(m->keys, cap * sizeof(*k));
            if (!k)
                return -ENOMEM;
            m->keys = k;
            struct rdzv_node **d = realloc(m->dec, cap * sizeof(*d));
            if (!d)
                return -ENOMEM;
            m->dec = d;
            m->cap_keys = cap;
        }
        if (2 * (m->n_keys + 1) > m->n_slots && index_rebuild(m, m->n_keys + 1) < 0)
            return -ENOMEM;
        i = (ssize_t)m->n_keys++;
        m->keys[i] = (struct kv_entry){.key = e->key};
        m->dec[i] = NULL;
        m->slots[slot_of(m, e->key)] = (size_t)i + 1;
        e->key = NULL; /* now the mirror's */
        m->node_arrived |= node;
    }
    char *key = m->keys[i].key;
    m->keys[i].key = NULL;
    kv_entry_clear(&m->keys[i]);
    free(e->key);
    m->keys[i] = *e;
    m->keys[i].key = key;
    free(m->dec[i]);
    m->dec[i] = node ? node_decode(m, &m->keys[i]) : NULL;
    memset(e, 0, sizeof(*e));
    m->dirty = true;
    m->changes++;
    m->nodes_dirty |= node;
    return 0;
}

int rdzv_mirror_put_own(struct rdzv_mirror *m, const char *key, const char *value,
                        int64_t mod_revision, int64_t create_revision, int64_t lease)
{
    struct kv_entry e = {.key = (char *)key,
                         .value = (char *)value,
                         .value_len = strlen(value),
                         .mod_revision = mod_revision,
                         .create_revision = create_revision,
                         .lease = lease},
                    copy;
    if (kv_entry_copy(&copy, &e) < 0)
        return -ENOMEM;
    int r = rdzv_mirror_put(m, &copy);
    kv_entry_clear(&copy);
    return r;
}

void rdzv_mirror_del(struct rdzv_mirror *m, const char *key)
{
    ssize_t i = rdzv_mirror_find(m, key);
    if (i < 0)
        return;
    m->nodes_dirty |= rdzv_mirror_under(m, key, "nodes/");
    kv_entry_clear(&m->keys[i]);
    free(m->dec[i]);
    m->keys[i] = m->keys[--m->n_keys];
    m->dec[i] = m->dec[m->n_keys];
    index_rebuild(m, m->n_keys); /* deletes are rare: nodes leaving */
    m->dirty = true;
    m->changes++;
}

void rdzv_mirror_clear(struct rdzv_mirror *m)
{
    for (size_t i = 0; i < m->n_keys; i++) {
        kv_entry_clear(&m->keys[i]);
        free(m->dec[i]);
    }
    m->n_keys = 0;
    if (m->slots)
        memset(m->slots, 0, m->n_slots * sizeof(*m->slots));
    m->dirty = m->nodes_dirty = true;
    m->changes++;
}

void rdzv_mirror_free(struct rdzv_mirror *m)
{
    rdzv_mirror_clear(m);
    free(m->keys);
    free(m->dec);
    free(m->slots);
    m->keys = NULL;
    m->dec = NULL;
    m->slots = NULL;
    m->n_slots = m->cap_keys = 0;
}
