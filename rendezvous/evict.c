// SPDX-License-Identifier: Apache-2.0
/* rdzv evict: the coordinator's rounds/<r>/evict and who may write it (evict.h). */
#include "evict.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session_internal.h"

int rdzv_straggler_check(const char *value, size_t len, int64_t key_lease, const char *coord_id,
                         int64_t coord_lease, char *ret_node)
{
    if (!value || len > 1024)
        return -EBADMSG;
    json_t *root = json_loadb(value, len, JSON_REJECT_DUPLICATES, NULL);
    const char *schema = NULL, *by = NULL, *node = NULL;
    int r = root &&
                    json_unpack(root, "{s:s, s:s, s:s}", "schema", &schema, "by", &by, "node",
                                &node) == 0 &&
                    strcmp(schema, RDZV_SCHEMA) == 0 && node[0] &&
                    rdzv_strlcpy(ret_node, RDZV_ID_MAX, node) == 0
                ? 0
                : -EBADMSG;
    /* the writer: the node `coord` names, on the lease `coord` is attached to */
    if (r == 0 && (!coord_id || !coord_id[0] || strcmp(by, coord_id) != 0))
        r = -EPERM;
    if (r == 0 && (coord_lease == 0 || key_lease != coord_lease))
        r = -EPERM;
    json_decref(root);
    return r;
}

/* The mirrored `coord`: its node id and lease; false when none is known. */
static bool coord_of(const struct rdzv_session *s, const char **id, int64_t *lease)
{
    ssize_t i = rdzv_mirror_find(&s->m, s->coord_key);
    if (!s->have_coord || i < 0)
        return false;
    *id = s->coord.node_id;
    *lease = s->m.keys[i].lease;
    return true;
}

int rdzv_straggler_evict(struct rdzv_session *s, int64_t round, const char *node_id,
                         struct ea_error *err)
{
    if (!s->is_coord || !s->have_state || s->state.round != round || !s->lease)
        return ea_errorf(err, -EPERM, "only the coordinator of round %" PRId64 " evicts", round);
    if (strcmp(node_id, s->cfg.self.node_id) == 0)
        return ea_errorf(err, -EINVAL, "the coordinator does not evict itself");
    char key[KEY_MAX];
    rdzv_key_of(s, key, "rounds/%" PRId64 "/evict", round);
    int64_t expected = 0; /* absent */
    ssize_t i = rdzv_mirror_find(&s->m, key);
    if (i >= 0) {
        const struct kv_entry *e = &s->m.keys[i];
        char named[RDZV_ID_MAX];
        if (rdzv_straggler_check(e->value, e->value_len, e->lease, s->cfg.self.node_id, s->lease,
                                 named) == 0)
            return 0;               /* ours already: the first word stands */
        expected = e->mod_revision; /* planted: overwritten */
    }
    json_t *j = json_pack("{s:s, s:s, s:s}", "schema", RDZV_SCHEMA, "by", s->cfg.self.node_id,
                          "node", node_id);
    char *v = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    if (!v)
        return ea_errorf(err, -ENOMEM, "out of memory");
    struct kv_cmp cmps[] = {{s->coord_key, s->coord_rev}, {key, expected}};
    struct kv_op op = {.key = key, .value = v, .len = strlen(v), .lease = s->lease};
    int64_t rev = 0;
    s->stats.requests++;
    s->stats.writes++;
    s->stats.keys_written++;
    int r = kv_txn(s->kv, cmps, 2, &op, 1, &rev, err);
    if (r == 0 && rdzv_mirror_put_own(&s->m, key, v, rev, rev, s->lease) < 0)
        r = ea_errorf(err, -ENOMEM, "out of memory");
    free(v);
    return r;
}

int rdzv_straggler_evicted(struct rdzv_session *s, int64_t round, char *ret_node)
{
    char key[KEY_MAX];
    rdzv_key_of(s, key, "rounds/%" PRId64 "/evict", round);
    ssize_t i = rdzv_mirror_find(&s->m, key);
    if (i < 0)
        return -ENOENT;
    const struct kv_entry *e = &s->m.keys[i];
    const char *coord = NULL;
    int64_t lease = 0;
    bool known = coord_of(s, &coord, &lease);
    int r = rdzv_straggler_check(e->value, e->value_len, e->lease, known ? coord : NULL, lease,
                                 ret_node);
    if (r < 0) {
        char msg[EA_ERROR_MSG_MAX];
        snprintf(msg, sizeof(msg), "ignoring key '%s': %s", key,
                 r == -EPERM ? "not written by the coordinator (an eviction only the "
                               "coordinator may order)"
                             : "not an eviction");
        for (char *p = msg; *p; p++)
            *p = isprint((unsigned char)*p) ? *p : '?';
        rdzv_warn(s, msg);
    }
    return r;
}
