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

/* A valid node record came (+1) or goes (-1). */
static void node_counted(struct rdzv_mirror *m, const struct rdzv_node *n, int delta)
{
    if (!n)
        return;
    m->n_nodes_valid += delta;
    if (m->on_node)
        m->on_node(m->node_ctx, n, delta);
}

int rdzv_mirror_put(struct rdzv_mirror *m, struct kv_entry *e)
{
    bool node = rdzv_mirror_under(m, e->key, "nodes/");
    m->done_dirty |= rdzv_mirror_under(m, e->key, "done/");
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
    node_counted(m, m->dec[i], -1);
    free(m->dec[i]);
    m->dec[i] = node ? node_decode(m, &m->keys[i]) : NULL;
    node_counted(m, m->dec[i], +1);
    memset(e, 0, sizeof(*e));
    m->dirty = true;
    m->changes++;
    m->nodes_dirty |= node;
    if (m->on_put)
        m->on_put(m->put_ctx, m->keys[i].key);
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

/* Empty slot `i` and shift the entries after it in its probe run back (linear probing's delete:
 * no tombstones, so lookups stay as short as if the key had never been there). */
static void slot_remove(struct rdzv_mirror *m, size_t i)
{
    size_t mask = m->n_slots - 1, j = i;
    for (;;) {
        m->slots[i] = 0;
        size_t h;
        do {
            j = (j + 1) & mask;
            if (!m->slots[j])
                return;
            h = key_hash(m->keys[m->slots[j] - 1].key) & mask;
            /* the entry at j stays when its home h lies cyclically in (i, j] */
        } while (i <= j ? (i < h && h <= j) : (i < h || h <= j));
        m->slots[i] = m->slots[j];
        i = j;
    }
}

void rdzv_mirror_del(struct rdzv_mirror *m, const char *key)
{
    if (!m->n_slots)
        return;
    size_t si = slot_of(m, key);
    if (!m->slots[si])
        return;
    size_t i = m->slots[si] - 1, last = m->n_keys - 1;
    m->nodes_dirty |= rdzv_mirror_under(m, key, "nodes/");
    m->done_dirty |= rdzv_mirror_under(m, key, "done/");
    node_counted(m, m->dec[i], -1);
    slot_remove(m, si); /* before the entry goes: `key` may be its own string */
    kv_entry_clear(&m->keys[i]);
    free(m->dec[i]);
    if (i != last) { /* the last entry fills the hole: its slot now points there */
        m->slots[slot_of(m, m->keys[last].key)] = i + 1;
        m->keys[i] = m->keys[last];
        m->dec[i] = m->dec[last];
    }
    m->n_keys--;
    m->dirty = true;
    m->changes++;
}

void rdzv_mirror_clear(struct rdzv_mirror *m)
{
    for (size_t i = 0; i < m->n_keys; i++) {
        node_counted(m, m->dec[i], -1);
        kv_entry_clear(&m->keys[i]);
        free(m->dec[i]);
    }
    m->n_keys = 0;
    m->done_dirty = true;
    if (m->slots)
        memset(m->slots, 0, m->n_slots * sizeof(*m->slots));
    m->dirty = m->nodes_dirty = true;
    m->changes++;
    if (m->on_put)
        m->on_put(m->put_ctx, NULL);
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
