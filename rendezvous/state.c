// SPDX-License-Identifier: Apache-2.0
/* rdzv state codec: JSON (jansson) for the state, node and failure records, with validation. */
#include "state.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const status_names[] = {
    [RDZV_WAITING] = "waiting",   [RDZV_RUNNING] = "running", [RDZV_SUCCEEDED] = "succeeded",
    [RDZV_FAILED] = "failed",     [RDZV_CLOSED] = "closed",
    [RDZV_FAILING] = "failing", /* issue 19 */
};

const char *rdzv_status_name(enum rdzv_status s)
{
    if ((size_t)s < sizeof(status_names) / sizeof(status_names[0]))
        return status_names[s];
    return "?";
}

static int status_parse(const char *name, enum rdzv_status *ret)
{
    for (size_t i = 0; i < sizeof(status_names) / sizeof(status_names[0]); i++)
        if (strcmp(status_names[i], name) == 0) {
            *ret = (enum rdzv_status)i;
            return 0;
        }
    return -EBADMSG;
}

int rdzv_strlcpy(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size)
        return -ENAMETOOLONG;
    memcpy(dst, src, n + 1);
    return 0;
}

/* Dump `j` (stolen) compactly into *ret_json. */
static int dump(json_t *j, char **ret_json, struct ea_error *err)
{
    if (!j)
        return ea_errorf(err, -ENOMEM, "out of memory encoding a record");
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    if (!s)
        return ea_errorf(err, -ENOMEM, "out of memory encoding a record");
    *ret_json = s;
    return 0;
}

/* Parse `json` and check the schema tag; *ret_root is a new reference. */
static int load(const char *json, size_t len, const char *what, size_t max, json_t **ret_root,
                struct ea_error *err)
{
    json_error_t jerr;
    if (len > max) /* before parsing: a huge value is someone else's, never ours */
        return ea_errorf(err, -EBADMSG,
                         "%s is %zu bytes, more than the %zu a valid one can be (written by "
                         "another program?)",
                         what, len, max);
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return ea_errorf(err, -EBADMSG, "%s is not valid JSON (%s at position %d)", what,
                         jerr.text, jerr.position);
    if (!json_is_object(root)) {
        json_decref(root);
        return ea_errorf(err, -EBADMSG, "%s is not a JSON object", what);
    }
    const char *schema = json_string_value(json_object_get(root, "schema"));
    if (!schema || strcmp(schema, RDZV_SCHEMA) != 0) {
        int r = ea_errorf(err, -EBADMSG,
                          "%s has schema '%s', expected '" RDZV_SCHEMA
                          "' (written by another program or version?)",
                          what, schema ? schema : "(none)");
        json_decref(root);
        return r;
    }
    *ret_root = root;
    return 0;
}

/* Copy a string field into a fixed buffer, failing with a message naming it. */
static int copy_field(char *dst, size_t size, const char *src, const char *what,
                      const char *field, struct ea_error *err)
{
    if (!src || !src[0] || rdzv_strlcpy(dst, size, src) < 0)
        return ea_errorf(err, -EBADMSG, "%s: field '%s' is missing, empty or too long", what,
                         field);
    return 0;
}

static json_t *member_json(const struct rdzv_member *m)
{
    return json_pack("{s:s, s:s, s:s, s:i, s:i, s:i}", "node", m->node_id, "host", m->host,
                     "addr", m->addr, "nproc", m->nproc, "group_rank", m->group_rank,
                     "rank_base", m->rank_base);
}

int rdzv_state_encode(const struct rdzv_state *s, char **ret_json, struct ea_error *err)
{
    json_t *members = json_array();
    for (size_t i = 0; members && i < s->n_members; i++)
        if (json_array_append_new(members, member_json(&s->members[i])) < 0) {
            json_decref(members);
            members = NULL;
        }
    if (!members)
        return ea_errorf(err, -ENOMEM, "out of memory encoding the state");
    json_t *j = json_pack("{s:s, s:I, s:s, s:o, s:i, s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:I, "
                          "s:i}",
                          "schema", RDZV_SCHEMA, "round", (json_int_t)s->round, "status",
                          rdzv_status_name(s->status), "members", members, "world_size",
                          s->world_size, "restart_count", s->restart_count, "max_restarts",
                          s->max_restarts, "min", s->min_nodes, "max", s->max_nodes,
                          "failure_round", (json_int_t)s->failure_round, "generation",
                          (json_int_t)s->generation, "charge_round",
                          (json_int_t)s->charge_round, "charge_failed_round",
                          (json_int_t)s->charge_failed_round, "scale_events", s->scale_events);
    return dump(j, ret_json, err);
}

static int member_parse(json_t *jm, size_t idx, struct rdzv_member *m, struct ea_error *err)
{
    const char *node = NULL, *host = NULL, *addr = NULL;
    json_error_t jerr;
    memset(m, 0, sizeof(*m));
    if (json_unpack_ex(jm, &jerr, 0, "{s:s, s:s, s:s, s:i, s:i, s:i}", "node", &node, "host",
                       &host, "addr", &addr, "nproc", &m->nproc, "group_rank", &m->group_rank,
                       "rank_base", &m->rank_base) < 0)
        return ea_errorf(err, -EBADMSG, "state: member %zu: %s", idx, jerr.text);
    int r;
    if ((r = copy_field(m->node_id, sizeof(m->node_id), node, "state member", "node", err)) ||
        (r = copy_field(m->host, sizeof(m->host), host, "state member", "host", err)) ||
        (r = copy_field(m->addr, sizeof(m->addr), addr, "state member", "addr", err)))
        return r;
    if (m->nproc < 1 || m->group_rank != (int)idx || m->rank_base < 0)
        return ea_errorf(err, -EBADMSG,
                         "state: member %zu ('%s') has inconsistent nproc/group_rank/rank_base",
                         idx, m->node_id);
    return 0;
}

int rdzv_state_decode(const char *json, size_t len, struct rdzv_state *ret, struct ea_error *err)
{
    json_t *root;
    int r = load(json, len, "state", RDZV_STATE_BYTES_MAX, &root, err);
    if (r < 0)
        return r;
    struct rdzv_state s = {0};
    const char *status = NULL;
    json_t *members = NULL;
    json_int_t round = 0, failure_round = 0, generation = 0, charge = 0, charge_failed = 0;
    json_error_t jerr;
    if (json_unpack_ex(root, &jerr, 0,
                       "{s:I, s:s, s:o, s:i, s:i, s:i, s:i, s:i, s?I, s?I, s?I, s?I, s?i}",
                       "round", &round, "status", &status, "members", &members, "world_size",
                       &s.world_size, "restart_count", &s.restart_count, "max_restarts",
                       &s.max_restarts, "min", &s.min_nodes, "max", &s.max_nodes,
                       "failure_round", &failure_round, "generation", &generation,
                       "charge_round", &charge, "charge_failed_round", &charge_failed,
                       "scale_events", &s.scale_events) < 0) {
        r = ea_errorf(err, -EBADMSG, "state: %s", jerr.text);
        goto out;
    }
    s.round = round;
    s.failure_round = failure_round;
    s.generation = generation;
    s.charge_round = charge;
    s.charge_failed_round = charge_failed;
    if (status_parse(status, &s.status) < 0) {
        r = ea_errorf(err, -EBADMSG, "state: unknown status '%s'", status);
        goto out;
    }
    if (!json_is_array(members)) {
        r = ea_errorf(err, -EBADMSG, "state: 'members' is not an array");
        goto out;
    }
    s.n_members = json_array_size(members);
    if (s.n_members) {
        s.members = calloc(s.n_members, sizeof(*s.members));
        if (!s.members) {
            r = ea_errorf(err, -ENOMEM, "out of memory decoding the state");
            goto out;
        }
    }
    int sum = 0;
    for (size_t i = 0; i < s.n_members; i++) {
        if ((r = member_parse(json_array_get(members, i), i, &s.members[i], err)) < 0)
            goto out;
        if (s.members[i].rank_base != sum || s.members[i].nproc > INT_MAX - sum) {
            r = ea_errorf(err, -EBADMSG, "state: member %zu has rank_base %d, expected %d", i,
                          s.members[i].rank_base, sum);
            goto out;
        }
        for (size_t k = 0; k < i; k++)
            if (strcmp(s.members[k].node_id, s.members[i].node_id) == 0) {
                r = ea_errorf(err, -EBADMSG, "state: node '%s' is member %zu and %zu",
                              s.members[i].node_id, k, i);
                goto out;
            }
        sum += s.members[i].nproc;
    }
    if (round < 0 || s.min_nodes < 1 || s.max_nodes < s.min_nodes || s.restart_count < 0 ||
        generation < 0 || charge < 0 || charge_failed < 0 || s.scale_events < 0 ||
        s.max_restarts < 0 || s.world_size != sum ||
        (s.status == RDZV_RUNNING && (s.n_members == 0 || round < 1))) {
        r = ea_errorf(err, -EBADMSG,
                      "state: inconsistent values (round %lld, status %s, %zu members, "
                      "world_size %d, min %d, max %d)",
                      (long long)round, status, s.n_members, s.world_size, s.min_nodes,
                      s.max_nodes);
        goto out;
    }
    *ret = s;
    s.members = NULL;
    r = 0;
out:
    free(s.members);
    json_decref(root);
    return r;
}

void rdzv_state_clear(struct rdzv_state *s)
{
    if (!s)
        return;
    free(s->members);
    memset(s, 0, sizeof(*s));
}

int rdzv_state_copy(struct rdzv_state *dst, const struct rdzv_state *src)
{
    struct rdzv_state c = *src;
    c.members = NULL;
    if (src->n_members) {
        c.members = malloc(src->n_members * sizeof(*c.members));
        if (!c.members)
            return -ENOMEM;
        memcpy(c.members, src->members, src->n_members * sizeof(*c.members));
    }
    *dst = c;
    return 0;
}

int64_t rdzv_state_generation(const struct rdzv_state *s, int64_t mod_revision)
{
    return s->generation > 0 ? s->generation : mod_revision;
}

int rdzv_state_find(const struct rdzv_state *s, const char *node_id)
{
    for (size_t i = 0; i < s->n_members; i++)
        if (strcmp(s->members[i].node_id, node_id) == 0)
            return (int)i;
    return -1;
}

int rdzv_node_encode(const struct rdzv_node *n, char **ret_json, struct ea_error *err)
{
    json_t *root = json_pack("{s:s, s:s, s:s, s:s, s:i, s:I, s:s}", "schema", RDZV_SCHEMA, "node",
                             n->node_id, "host", n->host, "addr", n->addr, "nproc", n->nproc,
                             "pid", (json_int_t)n->pid, "version", EA_VERSION);
    if (root && n->probe_port > 0) {
        json_t *ifs = json_array();
        for (size_t i = 0; i < n->n_ifaces && i < RDZV_IFACE_MAX; i++)
            json_array_append_new(ifs, json_pack("{s:s, s:s, s:i}", "name", n->ifaces[i].name,
                                                 "addr", n->ifaces[i].addr, "prefix",
                                                 n->ifaces[i].prefix));
        json_object_set_new(root, "ifaces", ifs);
        json_object_set_new(root, "probe_port", json_integer(n->probe_port));
    }
    if (root && n->joined_ms > 0)
        json_object_set_new(root, "joined_ms", json_integer(n->joined_ms));
    return dump(root, ret_json, err);
}

/* The optional NIC discovery fields of a node record. */
static int node_ifaces_parse(json_t *root, struct rdzv_node *n, struct ea_error *err)
{
    json_t *port = json_object_get(root, "probe_port"), *ifs = json_object_get(root, "ifaces");
    if (!port && !ifs)
        return 0; /* not taking part in NIC discovery */
    json_int_t p = json_is_integer(port) ? json_integer_value(port) : -1;
    if (p < 1 || p > 65535 || !json_is_array(ifs) || json_array_size(ifs) > RDZV_IFACE_MAX)
        return ea_errorf(err, -EBADMSG,
                         "node record '%s': probe_port must be 1-65535 and ifaces an array of at "
                         "most %d",
                         n->node_id, RDZV_IFACE_MAX);
    n->probe_port = (int)p;
    for (size_t i = 0; i < json_array_size(ifs); i++) {
        struct rdzv_iface *f = &n->ifaces[i];
        const char *name = NULL, *addr = NULL;
        json_error_t jerr;
        int r;
        if (json_unpack_ex(json_array_get(ifs, i), &jerr, 0, "{s:s, s:s, s:i}", "name", &name,
                           "addr", &addr, "prefix", &f->prefix) < 0)
            return ea_errorf(err, -EBADMSG, "node record '%s': ifaces[%zu]: %s", n->node_id, i,
                             jerr.text);
        if ((r = copy_field(f->name, sizeof(f->name), name, "node record", "ifaces.name", err)) ||
            (r = copy_field(f->addr, sizeof(f->addr), addr, "node record", "ifaces.addr", err)))
            return r;
        if (f->prefix < 0 || f->prefix > 128 || !name[0])
            return ea_errorf(err, -EBADMSG, "node record '%s': ifaces[%zu] is not valid",
                             n->node_id, i);
        n->n_ifaces = i + 1;
    }
    return 0;
}

int rdzv_node_decode(const char *json, size_t len, struct rdzv_node *ret, struct ea_error *err)
{
    json_t *root;
    int r = load(json, len, "node record", RDZV_RECORD_BYTES_MAX, &root, err);
    if (r < 0)
        return r;
    struct rdzv_node n = {0};
    const char *node = NULL, *host = NULL, *addr = NULL;
    json_int_t pid = 0, joined = 0;
    json_error_t jerr;
    if (json_unpack_ex(root, &jerr, 0, "{s:s, s:s, s:s, s:i, s:I, s?I}", "node", &node, "host",
                       &host, "addr", &addr, "nproc", &n.nproc, "pid", &pid, "joined_ms",
                       &joined) < 0)
        r = ea_errorf(err, -EBADMSG, "node record: %s", jerr.text);
    else if (!(r = copy_field(n.node_id, sizeof(n.node_id), node, "node record", "node", err)) &&
             !(r = copy_field(n.host, sizeof(n.host), host, "node record", "host", err)) &&
             !(r = copy_field(n.addr, sizeof(n.addr), addr, "node record", "addr", err))) {
        if (n.nproc < 1)
            r = ea_errorf(err, -EBADMSG, "node record '%s': nproc %d < 1", node, n.nproc);
        else
            r = node_ifaces_parse(root, &n, err);
    }
    json_decref(root);
    if (r < 0)
        return r;
    n.pid = pid;
    n.joined_ms = joined > 0 ? joined : 0;
    *ret = n;
    return 0;
}

int rdzv_failure_encode(const struct rdzv_failure *f, char **ret_json, struct ea_error *err)
{
    return dump(json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:s}", "schema",
                          RDZV_SCHEMA, "node", f->node_id, "host", f->host, "rank", f->rank,
                          "local_rank", f->local_rank, "exit_code", f->exit_code, "signal",
                          f->signal, "pid", (json_int_t)f->pid, "time_ms",
                          (json_int_t)f->time_ms, "message", f->message),
                ret_json, err);
}

int rdzv_failure_decode(const char *json, size_t len, struct rdzv_failure *ret,
                        struct ea_error *err)
{
    json_t *root;
    int r = load(json, len, "failure record", RDZV_RECORD_BYTES_MAX, &root, err);
    if (r < 0)
        return r;
    struct rdzv_failure f = {0};
    const char *node = NULL, *host = NULL, *msg = NULL;
    json_int_t pid = 0, t = 0;
    json_error_t jerr;
    if (json_unpack_ex(root, &jerr, 0, "{s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:s}", "node",
                       &node, "host", &host, "rank", &f.rank, "local_rank", &f.local_rank,
                       "exit_code", &f.exit_code, "signal", &f.signal, "pid", &pid, "time_ms",
                       &t, "message", &msg) < 0)
        r = ea_errorf(err, -EBADMSG, "failure record: %s", jerr.text);
    else if (!(r = copy_field(f.node_id, sizeof(f.node_id), node, "failure record", "node",
                              err)) &&
             !(r = copy_field(f.host, sizeof(f.host), host, "failure record", "host", err))) {
        /* messages may be long: cut rather than reject */
        snprintf(f.message, sizeof(f.message), "%s", msg);
    }
    json_decref(root);
    if (r < 0)
        return r;
    f.pid = pid;
    f.time_ms = t;
    *ret = f;
    return 0;
}
