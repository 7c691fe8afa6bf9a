// SPDX-License-Identifier: Apache-2.0
/* rdzv state codec: JSON (jansson) for the state, node and failure records, with validation. */
#include "state.h"
#include "domain.h"
#include "state_internal.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const status_names[] = {
    [RDZV_WAITING] = "waiting",     [RDZV_RUNNING] = "running",
    [RDZV_SUCCEEDED] = "succeeded", [RDZV_FAILED] = "failed",
    [RDZV_CLOSED] = "closed",       [RDZV_FAILING] = "failing", /* issue 19 */
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

int rdzv_json_dump(json_t *j, char **ret_json, struct ea_error *err)
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

int rdzv_json_load(const char *json, size_t len, const char *what, size_t max, json_t **ret_root,
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
        return ea_errorf(err, -EBADMSG, "%s is not valid JSON (%s at position %d)", what, jerr.text,
                         jerr.position);
    if (!json_is_object(root)) {
        json_decref(root);
        return ea_errorf(err, -EBADMSG, "%s is not a JSON object", what);
    }
    const char *schema = json_string_value(json_object_get(root, "schema"));
    if (schema && strcmp(schema, RDZV_SCHEMA_V1) == 0) {
        json_decref(root);
        return ea_errorf(
            err, -EBADMSG,
            "%s was written by an older elastic-agent (schema '" RDZV_SCHEMA_V1
            "', which sent every member list to every node); this agent speaks '" RDZV_SCHEMA
            "': let that run finish with the old agents, or use "
            "another --run-id",
            what);
    }
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

int rdzv_copy_field(char *dst, size_t size, const char *src, const char *what, const char *field,
                    struct ea_error *err)
{
    if (!src || !src[0] || rdzv_strlcpy(dst, size, src) < 0)
        return ea_errorf(err, -EBADMSG, "%s: field '%s' is missing, empty or too long", what,
                         field);
    return 0;
}

int rdzv_state_encode(const struct rdzv_state *s, char **ret_json, struct ea_error *err)
{
    json_t *j = json_pack(
        "{s:s, s:I, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "schema", RDZV_SCHEMA, "round",
        (json_int_t)s->round, "status", rdzv_status_name(s->status), "members", s->group_world_size,
        "chunks", s->n_chunks, "world_size", s->world_size, "restart_count", s->restart_count,
        "max_restarts", s->max_restarts, "min", s->min_nodes, "max", s->max_nodes);
    /* every node receives this at every commit: the fields that are mostly 0 only when set */
    const struct {
        const char *name;
        json_int_t v;
    } opt[] = {{"failure_round", s->failure_round}, {"generation", s->generation},
               {"charge_round", s->charge_round},   {"charge_failed_round", s->charge_failed_round},
               {"scale_events", s->scale_events},   {"chunks_rev", s->chunks_rev},
               {"last_failure", s->last_failure}};
    for (size_t i = 0; j && i < sizeof(opt) / sizeof(opt[0]); i++)
        if (opt[i].v && json_object_set_new(j, opt[i].name, json_integer(opt[i].v)) < 0) {
            json_decref(j);
            j = NULL;
        }
    if (j && s->leader.node_id[0]) {
        json_t *addrs = json_array();
        for (size_t i = 0; addrs && i < s->leader.n_addrs && i < RDZV_LEADER_ADDRS; i++)
            if (json_array_append_new(addrs, json_string(s->leader.addrs[i])) < 0) {
                json_decref(addrs);
                addrs = NULL;
            }
        json_t *l = addrs ? json_pack("{s:s, s:I, s:o}", "node", s->leader.node_id, "slot",
                                      (json_int_t)s->leader.slot, "addrs", addrs)
                          : NULL;
        if (!l || json_object_set_new(j, "leader", l) < 0) {
            json_decref(j);
            j = NULL;
        }
    }
    /* issue 41: [coordinator's rank, confirmer, (confirmer)] when the commit chose any */
    if (j && s->n_confirm > 0) {
        json_t *c = json_pack("[i, i]", s->confirm_coord, s->confirm[0]);
        if (!c || (s->n_confirm > 1 && json_array_append_new(c, json_integer(s->confirm[1])) < 0) ||
            json_object_set_new(j, "confirm", c) < 0) {
            json_decref(j);
            j = NULL;
        }
    }
    return rdzv_json_dump(j, ret_json, err);
}

/* The commit record's "confirm": [coordinator's group rank, 1-2 confirmers' group ranks], all
 * ranks of the round and all different. */
static int confirm_decode(const json_t *c, struct rdzv_state *s, struct ea_error *err)
{
    size_t n = json_array_size(c);
    int v[3] = {-1, -1, -1};
    bool ok = json_is_array(c) && n >= 2 && n <= 3;
    for (size_t i = 0; ok && i < n; i++) {
        json_t *x = json_array_get(c, i);
        json_int_t r = json_is_integer(x) ? json_integer_value(x) : -1;
        ok = r >= 0 && r < s->group_world_size;
        v[i] = (int)r;
        for (size_t k = 0; ok && k < i; k++)
            ok = v[k] != v[i];
    }
    if (!ok)
        return ea_errorf(err, -EBADMSG,
                         "state: field 'confirm' is not [coordinator, 1-2 confirmers]: distinct "
                         "group ranks of the round's %d members",
                         s->group_world_size);
    s->confirm_coord = v[0];
    s->confirm[0] = v[1];
    s->confirm[1] = v[2];
    s->n_confirm = (int)n - 1;
    return 0;
}

/* The commit record's "leader": {"node","slot","addrs":[numeric addresses]}. */
static int leader_decode(const json_t *l, struct rdzv_leader *ret, struct ea_error *err)
{
    const char *node = NULL;
    json_int_t slot = 0;
    json_t *addrs = NULL;
    struct rdzv_leader out = {0};
    bool ok = json_unpack((json_t *)l, "{s:s, s:I, s:o}", "node", &node, "slot", &slot, "addrs",
                          &addrs) == 0 &&
              node[0] && rdzv_strlcpy(out.node_id, sizeof(out.node_id), node) == 0 && slot > 0 &&
              json_is_array(addrs) && json_array_size(addrs) >= 1 &&
              json_array_size(addrs) <= RDZV_LEADER_ADDRS;
    for (size_t i = 0; ok && i < json_array_size(addrs); i++) {
        const char *a = json_string_value(json_array_get(addrs, i));
        ok = a && a[0] && rdzv_strlcpy(out.addrs[i], RDZV_ADDR_MAX, a) == 0;
    }
    if (!ok)
        return ea_errorf(err, -EBADMSG,
                         "state: field 'leader' is not {\"node\",\"slot\",\"addrs\":[1-%d "
                         "addresses]}",
                         RDZV_LEADER_ADDRS);
    out.slot = slot;
    out.n_addrs = json_array_size(addrs);
    *ret = out;
    return 0;
}

int rdzv_state_decode(const char *json, size_t len, struct rdzv_state *ret, struct ea_error *err)
{
    json_t *root;
    int r = rdzv_json_load(json, len, "state", RDZV_STATE_BYTES_MAX, &root, err);
    if (r < 0)
        return r;
    struct rdzv_state s = {0};
    const char *status = NULL;
    json_int_t round = 0, failure_round = 0, generation = 0, charge = 0, charge_failed = 0;
    json_int_t chunks_rev = 0, last_failure = 0;
    json_t *leader = NULL, *confirm = NULL;
    json_error_t jerr;
    if (json_unpack_ex(
            root, &jerr, 0,
            "{s:I, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s?I, s?I, s?I, s?I, s?i, s?I, "
            "s?o, s?I, s?o}",
            "round", &round, "status", &status, "members", &s.group_world_size, "chunks",
            &s.n_chunks, "world_size", &s.world_size, "restart_count", &s.restart_count,
            "max_restarts", &s.max_restarts, "min", &s.min_nodes, "max", &s.max_nodes,
            "failure_round", &failure_round, "generation", &generation, "charge_round", &charge,
            "charge_failed_round", &charge_failed, "scale_events", &s.scale_events, "chunks_rev",
            &chunks_rev, "leader", &leader, "last_failure", &last_failure, "confirm",
            &confirm) < 0) {
        r = ea_errorf(err, -EBADMSG, "state: %s", jerr.text);
        goto out;
    }
    s.round = round;
    s.failure_round = failure_round;
    s.generation = generation;
    s.charge_round = charge;
    s.charge_failed_round = charge_failed;
    s.chunks_rev = chunks_rev;
    s.last_failure = last_failure;
    if (leader && (r = leader_decode(leader, &s.leader, err)) < 0)
        goto out;
    if (status_parse(status, &s.status) < 0) {
        r = ea_errorf(err, -EBADMSG, "state: unknown status '%s'", status);
        goto out;
    }
    if (round < 0 || s.min_nodes < 1 || s.max_nodes < s.min_nodes || s.restart_count < 0 ||
        generation < 0 || charge < 0 || charge_failed < 0 || s.scale_events < 0 || chunks_rev < 0 ||
        last_failure < 0 || last_failure > round ||
        s.max_restarts < 0 || s.group_world_size < 0 || s.world_size < s.group_world_size ||
        !rdzv_chunk_count_ok(s.n_chunks, (size_t)s.group_world_size) ||
        (s.status == RDZV_RUNNING && (s.group_world_size == 0 || round < 1))) {
        r = ea_errorf(err, -EBADMSG,
                      "state: inconsistent values (round %lld, status %s, %d members in %d "
                      "chunks, world_size %d, min %d, max %d)",
                      (long long)round, status, s.group_world_size, s.n_chunks, s.world_size,
                      s.min_nodes, s.max_nodes);
        goto out;
    }
    if (confirm && (r = confirm_decode(confirm, &s, err)) < 0)
        goto out;
    *ret = s;
    r = 0;
out:
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

int rdzv_chunk_commit_cmp(const struct rdzv_state *s, int64_t generation, int64_t chunk_rev)
{
    if (chunk_rev >= generation)
        return 1;
    return chunk_rev < s->chunks_rev ? -1 : 0;
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
                             n->node_id, "host", n->host, "addr", n->addr, "nproc", n->nproc, "pid",
                             (json_int_t)n->pid, "version", EA_VERSION);
    if (root && n->probe_port > 0) {
        json_t *ifs = json_array();
        for (size_t i = 0; i < n->n_ifaces && i < RDZV_IFACE_MAX; i++)
            json_array_append_new(ifs,
                                  json_pack("{s:s, s:s, s:i}", "name", n->ifaces[i].name, "addr",
                                            n->ifaces[i].addr, "prefix", n->ifaces[i].prefix));
        json_object_set_new(root, "ifaces", ifs);
        json_object_set_new(root, "probe_port", json_integer(n->probe_port));
    }
    if (root && n->joined_ms > 0)
        json_object_set_new(root, "joined_ms", json_integer(n->joined_ms));
    if (root && n->agent_addr[0])
        json_object_set_new(root, "agent_addr", json_string(n->agent_addr));
    if (root && n->live_port > 0)
        json_object_set_new(root, "live_port", json_integer(n->live_port));
    if (root && n->live_port > 0 && n->live_addr[0])
        json_object_set_new(root, "live_addr", json_string(n->live_addr));
    if (root && n->live_port > 0 && n->live_ns[0])
        json_object_set_new(root, "live_ns", json_string(n->live_ns));
    if (root && n->domain[0])
        json_object_set_new(root, "domain", json_string(n->domain));
    if (root && n->ckpt_port > 0)
        json_object_set_new(root, "ckpt_port", json_integer(n->ckpt_port));
    return rdzv_json_dump(root, ret_json, err);
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
        if ((r = rdzv_copy_field(f->name, sizeof(f->name), name, "node record", "ifaces.name",
                                 err)) ||
            (r = rdzv_copy_field(f->addr, sizeof(f->addr), addr, "node record", "ifaces.addr",
                                 err)))
            return r;
        if (f->prefix < 0 || f->prefix > 128 || !name[0])
            return ea_errorf(err, -EBADMSG, "node record '%s': ifaces[%zu] is not valid",
                             n->node_id, i);
        n->n_ifaces = i + 1;
    }
    return 0;
}

/* The optional liveness ring fields of a node record: a port (and an address of its own). */
static int node_live_parse(json_t *root, struct rdzv_node *n, struct ea_error *err)
{
    json_t *port = json_object_get(root, "live_port"), *addr = json_object_get(root, "live_addr");
    json_t *ns = json_object_get(root, "live_ns");
    if (!port && !addr && !ns)
        return 0; /* not taking part in the ring */
    json_int_t p = json_is_integer(port) ? json_integer_value(port) : -1;
    if (p < 1 || p > 65535 || (addr && (!json_is_string(addr) || !json_string_length(addr))) ||
        (ns && (!json_is_string(ns) || !json_string_length(ns))))
        return ea_errorf(err, -EBADMSG,
                         "node record '%s': live_port must be 1-65535 and live_addr a non-empty "
                         "string",
                         n->node_id);
    n->live_port = (int)p;
    int r = addr ? rdzv_copy_field(n->live_addr, sizeof(n->live_addr), json_string_value(addr),
                                   "node record", "live_addr", err)
                 : 0;
    if (r == 0 && ns)
        r = rdzv_copy_field(n->live_ns, sizeof(n->live_ns), json_string_value(ns), "node record",
                            "live_ns", err);
    return r;
}

int rdzv_node_decode(const char *json, size_t len, struct rdzv_node *ret, struct ea_error *err)
{
    json_t *root;
    int r = rdzv_json_load(json, len, "node record", RDZV_RECORD_BYTES_MAX, &root, err);
    if (r < 0)
        return r;
    struct rdzv_node n = {0};
    const char *node = NULL, *host = NULL, *addr = NULL, *agent_addr = "";
    json_int_t pid = 0, joined = 0;
    json_t *domain = NULL;
    json_error_t jerr;
    if (json_unpack_ex(root, &jerr, 0, "{s:s, s:s, s:s, s:i, s:I, s?I, s?s, s?o}", "node", &node,
                       "host", &host, "addr", &addr, "nproc", &n.nproc, "pid", &pid, "joined_ms",
                       &joined, "agent_addr", &agent_addr, "domain", &domain) < 0)
        r = ea_errorf(err, -EBADMSG, "node record: %s", jerr.text);
    else if (!(r = rdzv_copy_field(n.node_id, sizeof(n.node_id), node, "node record", "node",
                                   err)) &&
             !(r = rdzv_copy_field(n.host, sizeof(n.host), host, "node record", "host", err)) &&
             !(r = rdzv_copy_field(n.addr, sizeof(n.addr), addr, "node record", "addr", err)) &&
             (!agent_addr[0] ||
              !(r = rdzv_copy_field(n.agent_addr, sizeof(n.agent_addr), agent_addr, "node record",
                                    "agent_addr", err)))) {
        if (n.nproc < 1)
            r = ea_errorf(err, -EBADMSG, "node record '%s': nproc %d < 1", node, n.nproc);
        else if ((r = node_ifaces_parse(root, &n, err)) == 0)
            r = node_live_parse(root, &n, err);
        /* the failure domain is the node's own word: a label, never anything longer or odder */
        if (r == 0 && domain && !rdzv_domain_ok(json_string_value(domain)))
            r = ea_errorf(err, -EBADMSG,
                          "node record '%s': field 'domain' is not 1-%d characters of A-Z a-z "
                          "0-9 . _ : / -",
                          node, RDZV_DOMAIN_MAX - 1);
        else if (r == 0 && domain)
            snprintf(n.domain, sizeof(n.domain), "%s", json_string_value(domain));
        /* optional (older records have none): a port, or the record does not decode */
        json_t *cp = json_object_get(root, "ckpt_port");
        json_int_t cpv = json_is_integer(cp) ? json_integer_value(cp) : -1;
        if (r == 0 && cp && (cpv < 1 || cpv > 65535))
            r = ea_errorf(err, -EBADMSG, "node record '%s': ckpt_port must be 1-65535", node);
        else if (r == 0 && cp)
            n.ckpt_port = (int)cpv;
    }
    json_decref(root);
    if (r < 0)
        return r;
    n.pid = pid;
    n.joined_ms = joined > 0 ? joined : 0;
    *ret = n;
    return 0;
}

int rdzv_coord_encode(const struct rdzv_coord *c, char **ret_json, struct ea_error *err)
{
    return rdzv_json_dump(json_pack("{s:s, s:s, s:i, s:I}", "schema", RDZV_SCHEMA, "node",
                                    c->node_id, "live", c->live, "last_call_in_ms",
                                    (json_int_t)c->last_call_in_ms),
                          ret_json, err);
}

int rdzv_coord_decode(const char *json, size_t len, struct rdzv_coord *ret, struct ea_error *err)
{
    json_t *root;
    int r = rdzv_json_load(json, len, "coordinator record", RDZV_RECORD_BYTES_MAX, &root, err);
    if (r < 0)
        return r;
    struct rdzv_coord c = {0};
    const char *node = NULL;
    json_int_t last = -1;
    json_error_t jerr;
    if (json_unpack_ex(root, &jerr, 0, "{s:s, s:i, s:I}", "node", &node, "live", &c.live,
                       "last_call_in_ms", &last) < 0)
        r = ea_errorf(err, -EBADMSG, "coordinator record: %s", jerr.text);
    else if (!(r = rdzv_copy_field(c.node_id, sizeof(c.node_id), node, "coordinator record", "node",
                                   err)) &&
             (c.live < 0 || last < -1))
        r = ea_errorf(err, -EBADMSG, "coordinator record: negative counts");
    json_decref(root);
    if (r < 0)
        return r;
    c.last_call_in_ms = last;
    *ret = c;
    return 0;
}

int rdzv_failure_encode(const struct rdzv_failure *f, char **ret_json, struct ea_error *err)
{
    json_t *j = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:s}", "schema",
                          RDZV_SCHEMA, "node", f->node_id, "host", f->host, "rank", f->rank,
                          "local_rank", f->local_rank, "exit_code", f->exit_code, "signal",
                          f->signal, "pid", (json_int_t)f->pid, "time_ms", (json_int_t)f->time_ms,
                          "message", f->message);
    const struct rdzv_progress *p = &f->progress;
    if (j && p->repeat > 0 && p->best >= 0) { /* only a record that knows where the run was */
        json_t *o = json_pack("{s:I, s:I, s:i, s:i, s:b}", "step", (json_int_t)p->step, "best",
                              (json_int_t)p->best, "no_progress", p->no_progress, "repeat",
                              p->repeat, "stop", p->stop);
        if (!o || json_object_set_new(j, "progress", o) < 0) {
            json_decref(j);
            j = NULL;
        }
    }
    return rdzv_json_dump(j, ret_json, err);
}

/* The record's optional "progress": absent, the run's progress is unknown. */
static int progress_decode(const json_t *o, struct rdzv_progress *ret, struct ea_error *err)
{
    json_int_t step = -1, best = -1;
    int np = 0, repeat = 0, stop = 0;
    if (o && (json_unpack((json_t *)o, "{s:I, s:I, s:i, s:i, s:b}", "step", &step, "best", &best,
                          "no_progress", &np, "repeat", &repeat, "stop", &stop) < 0 ||
              step < -1 || best < step || np < 0 || repeat < 1))
        return ea_errorf(err, -EBADMSG, "failure record: field 'progress' is not {\"step\", "
                                        "\"best\" >= step, \"no_progress\" >= 0, \"repeat\" >= 1, "
                                        "\"stop\"}");
    *ret = (struct rdzv_progress){.step = step, .best = best, .no_progress = np,
                                  .repeat = repeat, .stop = stop};
    return 0;
}

int rdzv_failure_decode(const char *json, size_t len, struct rdzv_failure *ret,
                        struct ea_error *err)
{
    json_t *root;
    int r = rdzv_json_load(json, len, "failure record", RDZV_RECORD_BYTES_MAX, &root, err);
    if (r < 0)
        return r;
    struct rdzv_failure f = {0};
    const char *node = NULL, *host = NULL, *msg = NULL;
    json_int_t pid = 0, t = 0;
    json_t *progress = NULL;
    json_error_t jerr;
    if (json_unpack_ex(root, &jerr, 0, "{s:s, s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:s, s?o}",
                       "node", &node, "host", &host, "rank", &f.rank, "local_rank", &f.local_rank,
                       "exit_code", &f.exit_code, "signal", &f.signal, "pid", &pid, "time_ms", &t,
                       "message", &msg, "progress", &progress) < 0)
        r = ea_errorf(err, -EBADMSG, "failure record: %s", jerr.text);
    else if (!(r = progress_decode(progress, &f.progress, err)) &&
             !(r = rdzv_copy_field(f.node_id, sizeof(f.node_id), node, "failure record", "node",
                                   err)) &&
             !(r = rdzv_copy_field(f.host, sizeof(f.host), host, "failure record", "host", err))) {
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
