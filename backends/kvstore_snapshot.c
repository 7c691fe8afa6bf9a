// SPDX-License-Identifier: Apache-2.0
/* kvstore_snapshot: the JSON snapshot of a kvstore (keys, leases, the event log) that the file
 * backend writes and reads back; a foreign or corrupt snapshot is refused with a message. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvstore.h"
#include "kvstore_internal.h"

/* ---- snapshot codec ---- */

/* Bytes as a JSON string when they are valid UTF-8, else {"hex": "..."}. */
static json_t *bytes_to_json(const char *p, size_t len)
{
    json_t *j = json_stringn(p, len);
    if (j)
        return j;
    char *h = malloc(2 * len + 1);
    if (!h)
        return NULL;
    for (size_t i = 0; i < len; i++)
        snprintf(h + 2 * i, 3, "%02x", (unsigned char)p[i]);
    j = json_pack("{s:s}", "hex", h);
    free(h);
    return j;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Inverse of bytes_to_json; a C string (`cstr`) may not contain NUL. 0 or -1 (malformed/ENOMEM). */
static int json_to_bytes(const json_t *j, bool cstr, char **ret, size_t *ret_len)
{
    const char *src;
    size_t len;
    bool hex = false;
    if (json_is_string(j)) {
        src = json_string_value(j);
        len = json_string_length(j);
    } else {
        const json_t *h = json_object_get(j, "hex");
        if (!json_is_object(j) || json_object_size(j) != 1 || !json_is_string(h) ||
            json_string_length(h) % 2)
            return -1;
        src = json_string_value(h);
        len = json_string_length(h) / 2;
        hex = true;
    }
    char *d = malloc(len + 1);
    if (!d)
        return -1;
    for (size_t i = 0; i < len; i++) {
        int hi = hex ? hexval(src[2 * i]) : 0, lo = hex ? hexval(src[2 * i + 1]) : 0;
        if (hi < 0 || lo < 0) {
            free(d);
            return -1;
        }
        d[i] = hex ? (char)(hi << 4 | lo) : src[i];
    }
    d[len] = '\0';
    if (cstr && strlen(d) != len) {
        free(d);
        return -1;
    }
    *ret = d;
    if (ret_len)
        *ret_len = len;
    return 0;
}

/* json array append that steals `v` and reports failure. */
static int append(json_t *arr, json_t *v)
{
    return v && json_array_append_new(arr, v) == 0 ? 0 : -1;
}

static json_t *entry_tuple(const struct kv_entry *e, int type)
{
    json_t *t = json_array();
    if (!t)
        return NULL;
    int r = type ? append(t, json_integer(type)) : 0;
    r |= append(t, bytes_to_json(e->key, strlen(e->key)));
    r |= append(t, bytes_to_json(e->value ? e->value : "", e->value_len));
    r |= append(t, json_integer(e->mod_revision));
    r |= append(t, json_integer(e->create_revision));
    r |= append(t, json_integer(e->lease));
    if (r) {
        json_decref(t);
        return NULL;
    }
    return t;
}

int kvs_dump(const struct kvs *s, const char *boot_id, char **ret_json, size_t *ret_len)
{
    json_t *keys = json_array(), *leases = json_array(), *events = json_array();
    json_t *root = json_pack("{s:s, s:i, s:s, s:I, s:I, s:I}", "format", KVS_SNAPSHOT_FORMAT,
                             "version", KVS_SNAPSHOT_VERSION, "boot_id", boot_id, "revision",
                             (json_int_t)s->revision, "first_revision", (json_int_t)s->first_rev,
                             "last_lease", (json_int_t)s->last_lease);
    int r = keys && leases && events && root ? 0 : -1;
    for (size_t i = 0; i < s->n_keys && !r; i++)
        r = append(keys, entry_tuple(&s->keys[i], 0));
    for (size_t i = 0; i < s->n_leases && !r; i++)
        r = append(leases, json_pack("[I,I,I]", (json_int_t)s->leases[i].id,
                                     (json_int_t)s->leases[i].ttl_ms,
                                     (json_int_t)s->leases[i].deadline_ms));
    for (size_t i = s->ev_off; i < s->ev_end && !r; i++)
        r = append(events, entry_tuple(&s->ev[i].e, s->ev[i].type));
    char *text = NULL;
    if (!r && json_object_set(root, "keys", keys) == 0 &&
        json_object_set(root, "leases", leases) == 0 &&
        json_object_set(root, "events", events) == 0)
        text = json_dumps(root, JSON_COMPACT);
    json_decref(keys);
    json_decref(leases);
    json_decref(events);
    json_decref(root);
    if (!text)
        return -ENOMEM;
    *ret_json = text;
    *ret_len = strlen(text);
    return 0;
}

/* Parse one [type?, key, value, mod, create, lease] tuple. */
static int tuple_entry(json_t *t, bool typed, int *ret_type, struct kv_entry *ret)
{
    json_t *k, *v;
    json_int_t type = 0, mod, create, lease;
    int r = typed ? json_unpack(t, "[I,o,o,I,I,I!]", &type, &k, &v, &mod, &create, &lease)
                  : json_unpack(t, "[o,o,I,I,I!]", &k, &v, &mod, &create, &lease);
    if (r < 0)
        return -1;
    struct kv_entry e = {.mod_revision = mod, .create_revision = create, .lease = lease};
    if (json_to_bytes(k, true, &e.key, NULL) < 0)
        return -1;
    if (json_to_bytes(v, false, &e.value, &e.value_len) < 0) {
        free(e.key);
        return -1;
    }
    *ret = e;
    if (ret_type)
        *ret_type = (int)type;
    return 0;
}

static int load_keys(struct kvs *s, const json_t *keys, struct ea_error *err)
{
    for (size_t i = 0; i < json_array_size(keys); i++) {
        json_t *t = json_array_get(keys, i);
        struct kv_entry e;
        if (tuple_entry(t, false, NULL, &e) < 0)
            return ea_errorf(err, KV_ECORRUPT, "key #%zu is malformed", i);
        bool bad = e.create_revision < 1 || e.mod_revision < e.create_revision ||
                   e.mod_revision > s->revision || (e.lease && !kvs_lease_find(s, e.lease)) ||
                   (s->n_keys && strcmp(s->keys[s->n_keys - 1].key, e.key) >= 0);
        if (bad || kvs_reserve((void **)&s->keys, &s->cap_keys, s->n_keys + 1, sizeof(e)) < 0) {
            kv_entry_clear(&e);
            return bad ? ea_errorf(err, KV_ECORRUPT, "key #%zu is inconsistent", i)
                       : ea_errorf(err, -ENOMEM, "out of memory loading key #%zu", i);
        }
        s->keys[s->n_keys++] = e;
    }
    return 0;
}

static int load_events(struct kvs *s, const json_t *events, struct ea_error *err)
{
    for (size_t i = 0; i < json_array_size(events); i++) {
        json_t *t = json_array_get(events, i);
        struct kv_entry e;
        int type;
        if (tuple_entry(t, true, &type, &e) < 0)
            return ea_errorf(err, KV_ECORRUPT, "event #%zu is malformed", i);
        int64_t prev = s->ev_end > s->ev_off ? s->ev[s->ev_end - 1].e.mod_revision : 0;
        bool bad = (type != KV_EVENT_PUT && type != KV_EVENT_DELETE) || e.mod_revision < prev ||
                   e.mod_revision < 1 || e.mod_revision > s->revision;
        if (bad || kvs_ev_reserve(s, 1) < 0) {
            kv_entry_clear(&e);
            return bad ? ea_errorf(err, KV_ECORRUPT, "event #%zu is inconsistent", i)
                       : ea_errorf(err, -ENOMEM, "out of memory loading event #%zu", i);
        }
        kvs_ev_push(s, type, e);
    }
    return 0;
}

int kvs_load(const char *json, size_t len, size_t max_events, size_t max_bytes,
             struct kvs **ret_store, char *ret_boot_id, size_t boot_id_size, struct ea_error *err)
{
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return ea_errorf(err, KV_ECORRUPT, "not JSON (line %d: %s)", jerr.line, jerr.text);
    const char *format = NULL, *boot_id = NULL;
    json_int_t version = 0, revision, first_rev, last_lease;
    json_t *keys, *leases, *events;
    struct kvs *s = NULL;
    int r = json_unpack_ex(root, &jerr, 0, "{s:s, s:I, s:s, s:I, s:I, s:I, s:o, s:o, s:o}",
                           "format", &format, "version", &version, "boot_id", &boot_id, "revision",
                           &revision, "first_revision", &first_rev, "last_lease", &last_lease,
                           "keys", &keys, "leases", &leases, "events", &events);
    if (r < 0 || strcmp(format, KVS_SNAPSHOT_FORMAT) != 0) {
        r = ea_errorf(err, KV_ECORRUPT, "not an elastic-agent kv snapshot (%s)",
                      r < 0 ? jerr.text : "wrong format tag");
        goto out;
    }
    if (version != KVS_SNAPSHOT_VERSION) {
        r = ea_errorf(err, KV_ECORRUPT, "snapshot version %lld, this build reads %d",
                      (long long)version, KVS_SNAPSHOT_VERSION);
        goto out;
    }
    if (revision < 0 || first_rev < 1 || first_rev > revision + 1 || last_lease < 0 ||
        !json_is_array(keys) || !json_is_array(leases) || !json_is_array(events) ||
        strlen(boot_id) >= boot_id_size) {
        r = ea_errorf(err, KV_ECORRUPT, "inconsistent snapshot header");
        goto out;
    }
    r = kvs_create(max_events, max_bytes, &s);
    if (r < 0) {
        r = ea_errorf(err, r, "out of memory loading a snapshot");
        goto out;
    }
    s->revision = revision;
    s->first_rev = first_rev;
    s->last_lease = last_lease;
    for (size_t i = 0; i < json_array_size(leases); i++) {
        json_t *t = json_array_get(leases, i);
        json_int_t id, ttl, deadline;
        if (json_unpack(t, "[I,I,I!]", &id, &ttl, &deadline) < 0 || id < 1 || id > last_lease ||
            ttl < 1 || kvs_lease_find(s, id) ||
            kvs_reserve((void **)&s->leases, &s->cap_leases, s->n_leases + 1, sizeof(*s->leases))) {
            r = ea_errorf(err, KV_ECORRUPT, "lease #%zu is malformed", i);
            goto out;
        }
        s->leases[s->n_leases++] =
            (struct kvs_lease){.id = id, .ttl_ms = ttl, .deadline_ms = deadline};
    }
    r = load_keys(s, keys, err);
    if (r == 0)
        r = load_events(s, events, err);
    if (r < 0)
        goto out;
    kvs_ev_trim(s);
    snprintf(ret_boot_id, boot_id_size, "%s", boot_id);
    *ret_store = s;
    s = NULL;
out:
    kvs_destroy(s);
    json_decref(root);
    return r;
}
