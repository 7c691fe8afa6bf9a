// SPDX-License-Identifier: Apache-2.0
/* wenv: torchrun-compatible worker environment, Horovod/DMLC maps and the topology file. */
#include "workerenv.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "topology.h"

/* Names we own; inherited values of these are replaced or dropped (a stale RANK or
 * HOROVOD_RANK from the agent's own environment must never reach a worker). */
static const char *const owned[] = {
    "LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE",
    "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_ERROR_FILE", "TORCHELASTIC_USE_AGENT_STORE", "ELASTIC_GENERATION",
    "ELASTIC_ROUND", "ELASTIC_NODE_ID", "ELASTIC_TOPOLOGY_FILE", "ELASTIC_IFACES",
    "ELASTIC_HEARTBEAT_FILE", "ELASTIC_AGENT_CHECKPOINT_SOCKET", "ELASTIC_ASSIGN_FD", "ELASTIC_ASSIGN_LOCAL_RANK",
    "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
    "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE", "HOROVOD_HOSTNAME", "DMLC_TASK_ID",
    "DMLC_NUM_WORKER", "DMLC_NUM_SERVER", "DMLC_ROLE", "DMLC_TRACKER_URI", "DMLC_TRACKER_PORT",
    "ELASTIC_ETCD_PASSWORD", /* the agent's store secret is never a worker's */
};

const char *wenv_get(char *const *envp, const char *name)
{
    size_t len = strlen(name);
    for (char *const *e = envp; e && *e; e++)
        if (strncmp(*e, name, len) == 0 && (*e)[len] == '=')
            return *e + len + 1;
    return NULL;
}

static bool is_owned(const char *entry)
{
    for (size_t i = 0; i < sizeof(owned) / sizeof(*owned); i++) {
        size_t len = strlen(owned[i]);
        if (strncmp(entry, owned[i], len) == 0 && entry[len] == '=')
            return true;
    }
    return false;
}

struct envbuf {
    char **v;
    size_t n, cap;
    bool oom;
};

static void add(struct envbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct envbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    if (b->n + 2 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        char **v = realloc(b->v, cap * sizeof(*v));
        if (!v) {
            b->oom = true;
            return;
        }
        b->v = v;
        b->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&b->v[b->n], fmt, ap) < 0)
        b->oom = true;
    else
        b->v[++b->n] = NULL;
    va_end(ap);
}

int wenv_parse_styles(const char *list, unsigned *ret_styles, struct ea_error *err)
{
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {{"torch", WENV_TORCH}, {"horovod", WENV_HOROVOD}, {"dmlc", WENV_DMLC}};
    unsigned bits = 0;
    for (const char *p = list ? list : "";;) {
        size_t len = strcspn(p, ",");
        bool known = false;
        for (size_t i = 0; i < sizeof(names) / sizeof(*names) && !known; i++)
            if (len == strlen(names[i].name) && strncmp(p, names[i].name, len) == 0) {
                bits |= names[i].bit;
                known = true;
            }
        if (!known)
            return ea_errorf(err, -EINVAL,
                             "--env-style: '%s' is not a comma list of torch, horovod, dmlc",
                             list ? list : "");
        if (!p[len])
            break;
        p += len + 1;
    }
    *ret_styles = bits;
    return 0;
}

static void add_torch(struct envbuf *b, const struct wenv_params *p, int rank)
{
    const struct rdzv_state *s = p->state;
    const struct rdzv_member *me = p->self;
    add(b, "LOCAL_RANK=%d", p->local_rank);
    add(b, "RANK=%d", rank);
    add(b, "GROUP_RANK=%d", me->group_rank);
    add(b, "ROLE_RANK=%d", rank); /* one role: role rank = global rank */
    add(b, "ROLE_NAME=default");
    add(b, "LOCAL_WORLD_SIZE=%d", me->nproc);
    add(b, "WORLD_SIZE=%d", s->world_size);
    add(b, "GROUP_WORLD_SIZE=%d", s->group_world_size);
    add(b, "ROLE_WORLD_SIZE=%d", s->world_size);
    add(b, "MASTER_ADDR=%s", p->master_addr);
    add(b, "MASTER_PORT=%d", p->master_port);
    add(b, "TORCHELASTIC_RESTART_COUNT=%d", s->restart_count); /* job-wide, unlike torch */
    add(b, "TORCHELASTIC_MAX_RESTARTS=%d", s->max_restarts);
    add(b, "TORCHELASTIC_RUN_ID=%s", p->run_id);
    add(b, "TORCHELASTIC_ERROR_FILE=%s", p->error_file ? p->error_file : "");
    add(b, "TORCHELASTIC_USE_AGENT_STORE=False"); /* we serve no TCPStore: rank 0 hosts it */
    if (!wenv_get(p->base_env, "TORCH_NCCL_ASYNC_ERROR_HANDLING"))
        add(b, "TORCH_NCCL_ASYNC_ERROR_HANDLING=1");
}

/* Horovod's host assignment (horovod/runner/common/util/hosts.py), with a node as the "host":
 * local size = the node's slots; cross rank = index of this node among the nodes that have a
 * worker with this local rank, in group-rank order; cross size = how many such nodes. */
static void add_horovod(struct envbuf *b, const struct wenv_params *p, int rank)
{
    const struct rdzv_state *s = p->state;
    const struct rdzv_member *me = p->self;
    /* every node runs the same number of workers unless the members say otherwise (they are
     * loaded whenever horovod is in --env-style: cfg_full_view) */
    int cross_rank = me->group_rank, cross_size = s->group_world_size;
    if (s->members) {
        cross_rank = cross_size = 0;
        for (size_t k = 0; k < s->n_members; k++)
            if (s->members[k].nproc > p->local_rank) {
                cross_rank += s->members[k].group_rank < me->group_rank;
                cross_size++;
            }
    }
    add(b, "HOROVOD_RANK=%d", rank);
    add(b, "HOROVOD_SIZE=%d", s->world_size);
    add(b, "HOROVOD_LOCAL_RANK=%d", p->local_rank);
    add(b, "HOROVOD_LOCAL_SIZE=%d", me->nproc);
    add(b, "HOROVOD_CROSS_RANK=%d", cross_rank);
    add(b, "HOROVOD_CROSS_SIZE=%d", cross_size);
    add(b, "HOROVOD_HOSTNAME=%s", me->host);
}

/* What dmlc-submit gives a worker; the tracker's address only when one was named. */
static void add_dmlc(struct envbuf *b, const struct wenv_params *p, int rank)
{
    add(b, "DMLC_TASK_ID=%d", rank);
    add(b, "DMLC_NUM_WORKER=%d", p->state->world_size);
    add(b, "DMLC_NUM_SERVER=0");
    add(b, "DMLC_ROLE=worker");
    char host[256];
    int port;
    if (p->dmlc_tracker &&
        cfg_parse_tracker(p->dmlc_tracker, host, sizeof(host), &port, NULL) == 0) {
        add(b, "DMLC_TRACKER_URI=%s", host);
        add(b, "DMLC_TRACKER_PORT=%d", port);
    }
}

int wenv_build(const struct wenv_params *p, char ***ret_envp)
{
    const struct rdzv_state *s = p->state;
    const struct rdzv_member *me = p->self;
    int rank = me->rank_base + p->local_rank;
    unsigned styles = p->styles ? p->styles : WENV_TORCH;
    struct envbuf b = {0};
    for (char *const *e = p->base_env; e && *e; e++)
        if (!is_owned(*e))
            add(&b, "%s", *e);
    if (styles & WENV_TORCH)
        add_torch(&b, p, rank);
    if (styles & WENV_HOROVOD)
        add_horovod(&b, p, rank);
    if (styles & WENV_DMLC)
        add_dmlc(&b, p, rank);
    if (!wenv_get(p->base_env, "OMP_NUM_THREADS") && me->nproc > 1)
        add(&b, "OMP_NUM_THREADS=1");
    add(&b, "ELASTIC_GENERATION=%lld", (long long)p->generation);
    add(&b, "ELASTIC_ROUND=%lld", (long long)s->round);
    add(&b, "ELASTIC_NODE_ID=%s", me->node_id);
    if (p->topology_file)
        add(&b, "ELASTIC_TOPOLOGY_FILE=%s", p->topology_file);
    if (p->heartbeat_file)
        add(&b, "ELASTIC_HEARTBEAT_FILE=%s", p->heartbeat_file);
    if (p->checkpoint_socket)
        add(&b, "ELASTIC_AGENT_CHECKPOINT_SOCKET=%s", p->checkpoint_socket);
    if (p->ifaces) {
        add(&b, "ELASTIC_IFACES=%s", p->ifaces);
        if (!wenv_get(p->base_env, "NCCL_SOCKET_IFNAME"))
            add(&b, "NCCL_SOCKET_IFNAME=%s", p->ifaces);
        if (!wenv_get(p->base_env, "GLOO_SOCKET_IFNAME"))
            add(&b, "GLOO_SOCKET_IFNAME=%s", p->ifaces);
    }
    if (b.oom) {
        wenv_free(b.v);
        return -ENOMEM;
    }
    *ret_envp = b.v;
    return 0;
}

int wenv_build_parked(const struct wenv_parked *p, char ***ret_envp)
{
    unsigned styles = p->styles ? p->styles : WENV_TORCH;
    struct envbuf b = {0};
    for (char *const *e = p->base_env; e && *e; e++)
        if (!is_owned(*e))
            add(&b, "%s", *e);
    /* what wenv_build adds that no round changes; OMP_NUM_THREADS before `import torch` */
    if ((styles & WENV_TORCH) && !wenv_get(p->base_env, "TORCH_NCCL_ASYNC_ERROR_HANDLING"))
        add(&b, "TORCH_NCCL_ASYNC_ERROR_HANDLING=1");
    if (!wenv_get(p->base_env, "OMP_NUM_THREADS") && p->nproc > 1)
        add(&b, "OMP_NUM_THREADS=1");
    add(&b, "ELASTIC_NODE_ID=%s", p->node_id);
    if (p->checkpoint_socket)
        add(&b, "ELASTIC_AGENT_CHECKPOINT_SOCKET=%s", p->checkpoint_socket);
    if (b.oom) {
        wenv_free(b.v);
        return -ENOMEM;
    }
    *ret_envp = b.v;
    return 0;
}

void wenv_free(char **envp)
{
    for (char **e = envp; e && *e; e++)
        free(*e);
    free(envp);
}

/* One global rank's entry: host, node, local rank, ring and binary-tree links (DMLC's maps). */
static json_t *rank_json(const struct rdzv_state *s, size_t m, int local, const struct rdzv_link *l)
{
    int r = s->members[m].rank_base + local;
    json_t *children = json_array();
    for (int c = 0; c < l->n_children; c++)
        json_array_append_new(children, json_integer(l->children[c]));
    return json_pack("{s:i, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:o}", "rank", r, "host",
                     s->members[m].host, "node", s->members[m].node_id, "local_rank", local,
                     "group_rank", s->members[m].group_rank, "ring_prev", l->ring_prev,
                     "ring_next", l->ring_next, "tree_parent", l->parent, "tree_children",
                     children);
}

int wenv_write_topology(const struct rdzv_state *s, const char *path, struct ea_error *err)
{
    int world = s->world_size > 0 ? s->world_size : 1;
    struct rdzv_link *links = calloc((size_t)world, sizeof(*links));
    if (!links || rdzv_topo_build(world, links) < 0) {
        free(links);
        return ea_errorf(err, -ENOMEM, "out of memory writing the topology");
    }
    json_t *ranks = json_array(), *hosts = json_array(), *nodes = json_array();
    for (size_t m = 0; m < s->n_members; m++) {
        const struct rdzv_member *mb = &s->members[m];
        bool seen = false; /* hosts: distinct, in order of their first rank */
        for (size_t k = 0; k < m && !seen; k++)
            seen = strcmp(s->members[k].host, mb->host) == 0;
        if (!seen)
            json_array_append_new(hosts, json_string(mb->host));
        json_array_append_new(nodes, json_pack("{s:s, s:s, s:i, s:i, s:i}", "node", mb->node_id,
                                               "host", mb->host, "group_rank", mb->group_rank,
                                               "rank_base", mb->rank_base, "nproc", mb->nproc));
        for (int l = 0; l < mb->nproc && mb->rank_base + l < world; l++)
            json_array_append_new(ranks, rank_json(s, m, l, &links[mb->rank_base + l]));
    }
    free(links);
    json_t *root = json_pack("{s:I, s:i, s:o, s:o, s:o}", "round", (json_int_t)s->round,
                             "world_size", s->world_size, "hosts", hosts, "nodes", nodes,
                             "ranks", ranks);
    if (!root)
        return ea_errorf(err, -ENOMEM, "out of memory writing the topology");
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int r = json_dump_file(root, tmp, JSON_INDENT(1));
    json_decref(root);
    if (r < 0 || rename(tmp, path) < 0) {
        int e = errno ? errno : EIO;
        unlink(tmp);
        return ea_errorf(err, -e, "cannot write topology file '%s': %s", path, strerror(e));
    }
    return 0;
}
