// SPDX-License-Identifier: Apache-2.0
/* wenv: torchrun-compatible worker environment and the topology file. */
#include "workerenv.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Names we always set; inherited values of these are replaced. */
static const char *const owned[] = {
    "LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE",
    "WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_ERROR_FILE", "TORCHELASTIC_USE_AGENT_STORE", "ELASTIC_GENERATION",
    "ELASTIC_ROUND", "ELASTIC_NODE_ID", "ELASTIC_TOPOLOGY_FILE",
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

int wenv_build(const struct wenv_params *p, char ***ret_envp)
{
    const struct rdzv_state *s = p->state;
    const struct rdzv_member *me = &s->members[p->my_index];
    int rank = me->rank_base + p->local_rank;
    struct envbuf b = {0};
    for (char *const *e = p->base_env; e && *e; e++)
        if (!is_owned(*e))
            add(&b, "%s", *e);
    add(&b, "LOCAL_RANK=%d", p->local_rank);
    add(&b, "RANK=%d", rank);
    add(&b, "GROUP_RANK=%d", me->group_rank);
    add(&b, "ROLE_RANK=%d", rank); /* one role: role rank = global rank */
    add(&b, "ROLE_NAME=default");
    add(&b, "LOCAL_WORLD_SIZE=%d", me->nproc);
    add(&b, "WORLD_SIZE=%d", s->world_size);
    add(&b, "GROUP_WORLD_SIZE=%zu", s->n_members);
    add(&b, "ROLE_WORLD_SIZE=%d", s->world_size);
    add(&b, "MASTER_ADDR=%s", p->master_addr);
    add(&b, "MASTER_PORT=%d", p->master_port);
    add(&b, "TORCHELASTIC_RESTART_COUNT=%d", s->restart_count); /* job-wide, unlike torch */
    add(&b, "TORCHELASTIC_MAX_RESTARTS=%d", s->max_restarts);
    add(&b, "TORCHELASTIC_RUN_ID=%s", p->run_id);
    add(&b, "TORCHELASTIC_ERROR_FILE=%s", p->error_file ? p->error_file : "");
    add(&b, "TORCHELASTIC_USE_AGENT_STORE=False"); /* we serve no TCPStore: rank 0 hosts it */
    if (!wenv_get(p->base_env, "TORCH_NCCL_ASYNC_ERROR_HANDLING"))
        add(&b, "TORCH_NCCL_ASYNC_ERROR_HANDLING=1");
    if (!wenv_get(p->base_env, "OMP_NUM_THREADS") && me->nproc > 1)
        add(&b, "OMP_NUM_THREADS=1");
    add(&b, "ELASTIC_GENERATION=%lld", (long long)p->generation);
    add(&b, "ELASTIC_ROUND=%lld", (long long)s->round);
    add(&b, "ELASTIC_NODE_ID=%s", me->node_id);
    if (p->topology_file)
        add(&b, "ELASTIC_TOPOLOGY_FILE=%s", p->topology_file);
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
static json_t *rank_json(const struct rdzv_state *s, size_t m, int local, int world)
{
    int r = s->members[m].rank_base + local;
    json_t *children = json_array();
    for (int c = 2 * r + 1; c <= 2 * r + 2 && c < world; c++)
        json_array_append_new(children, json_integer(c));
    return json_pack("{s:i, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:o}", "rank", r, "host",
                     s->members[m].host, "node", s->members[m].node_id, "local_rank", local,
                     "group_rank", s->members[m].group_rank, "ring_prev",
                     (r + world - 1) % world, "ring_next", (r + 1) % world, "tree_parent",
                     r == 0 ? -1 : (r - 1) / 2, "tree_children", children);
}

int wenv_write_topology(const struct rdzv_state *s, const char *path, struct ea_error *err)
{
    json_t *ranks = json_array(), *hosts = json_array();
    for (size_t m = 0; m < s->n_members; m++) {
        json_array_append_new(hosts, json_string(s->members[m].host));
        for (int l = 0; l < s->members[m].nproc; l++)
            json_array_append_new(ranks, rank_json(s, m, l, s->world_size));
    }
    json_t *root = json_pack("{s:I, s:i, s:o, s:o}", "round", (json_int_t)s->round,
                             "world_size", s->world_size, "hosts", hosts, "ranks", ranks);
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
