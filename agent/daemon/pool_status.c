// SPDX-License-Identifier: Apache-2.0
/* status --pool: the pool's daemons (idle or in which run), its queued and running runs in
 * FIFO order with their nodes, and the specs it skips (docs/daemon.md). One reader: O(N). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "daemon.h"
#include "daemon_internal.h"
#include "pool.h"

static const char status_help[] =
    "Usage: elastic-agent status --pool NAME [--json] [STORE OPTIONS]\n"
    "\n"
    "Lists a pool of `elastic-agent serve` daemons: each daemon (idle, or the run it is in),\n"
    "the runs queued or running in FIFO order with their status, min/max and the nodes in them,\n"
    "and queued specs that are not ours (skipped, never run). `status --run-id ID` (without\n"
    "--pool) shows one run in detail.\n"
    "\n  --pool NAME                  the pool\n"
    "  --json                       one JSON object\n"
    "\nExit status: 0 shown, 2 usage error, 3 store unreachable.\n";

bool pool_status_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--pool") == 0 || strncmp(argv[i], "--pool=", 7) == 0)
            return true;
    return false;
}

struct st_args {
    const char *pool;
    bool json, help;
};

static int on_own(void *ctx, const char *flag, const char *v)
{
    struct st_args *a = ctx;
    if (strcmp(flag, "pool=") == 0)
        a->pool = v;
    else if (strcmp(flag, "json") == 0)
        a->json = true;
    else
        a->help = true;
    return 0;
}

static void when(int64_t ms, char *buf, size_t size)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (ms <= 0 || !gmtime_r(&t, &tm) || !strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, size, "-");
}

/* The pool as one JSON object (also what the text form prints from). */
static int collect(struct pool *p, json_t **ret, struct ea_error *err)
{
    char pre[POOL_KEY_MAX], next[128];
    int64_t rev = 0;
    struct kv_list dl = {0}, ql = {0};
    int r = pool_next_get(p, next, sizeof(next), &rev, err);
    pool_daemon_prefix(p, pre, sizeof(pre));
    if (r == 0)
        r = kv_list(p->kv, pre, &dl, err);
    pool_queue_prefix(p, pre, sizeof(pre));
    if (r == 0)
        r = kv_list(p->kv, pre, &ql, err);
    json_t *o = json_pack("{s:s, s:s, s:s, s:[], s:[], s:[]}", "pool", p->name, "prefix",
                          p->prefix, "next", next, "daemons", "runs", "skipped");
    for (size_t i = 0; r == 0 && i < dl.n; i++) {
        struct daemon_record d;
        if (daemon_record_decode(dl.entries[i].value, dl.entries[i].value_len, &d) < 0)
            continue;
        json_array_append_new(json_object_get(o, "daemons"),
                              json_pack("{s:s, s:s, s:I, s:s, s:s, s:I}", "node", d.node, "host",
                                        d.host, "pid", (json_int_t)d.pid, "state",
                                        d.run[0] ? "in-run" : "idle", "run", d.run, "since_ms",
                                        (json_int_t)d.since_ms));
    }
    pool_queue_sort(&ql);
    for (size_t i = 0; r == 0 && i < ql.n; i++) {
        struct runspec s = {0};
        struct ea_error derr = {0};
        if (runspec_decode(ql.entries[i].value, ql.entries[i].value_len, &s, &derr) < 0) {
            json_array_append_new(json_object_get(o, "skipped"),
                                  json_pack("{s:s, s:s}", "key", ql.entries[i].key, "error",
                                            derr.msg));
            continue;
        }
        char status[32] = "?", nodes_pre[POOL_KEY_MAX];
        enum pool_run pr;
        if ((r = pool_run_check(p, &s, &pr, status, sizeof(status), &derr)) < 0) {
            ea_errorf(err, r, "%s", derr.msg);
            runspec_clear(&s);
            break;
        }
        snprintf(nodes_pre, sizeof(nodes_pre), "%s%s/nodes/", p->prefix, s.run_id);
        struct kv_list nl = {0};
        json_t *nodes = json_array();
        if ((r = kv_list(p->kv, nodes_pre, &nl, err)) == 0)
            for (size_t k = 0; k < nl.n; k++)
                json_array_append_new(nodes, json_string(nl.entries[k].key + strlen(nodes_pre)));
        kv_list_clear(&nl);
        json_array_append_new(json_object_get(o, "runs"),
                              json_pack("{s:s, s:s, s:b, s:i, s:i, s:I, s:o}", "run", s.run_id,
                                        "status", status, "full", pr == POOL_RUN_FULL, "min",
                                        s.min_nodes, "max", s.max_nodes, "submitted_ms",
                                        (json_int_t)s.submitted_ms, "nodes", nodes));
        runspec_clear(&s);
    }
    kv_list_clear(&dl);
    kv_list_clear(&ql);
    if (r < 0) {
        json_decref(o);
        return r;
    }
    *ret = o;
    return 0;
}

static void print_text(json_t *o)
{
    json_t *v;
    size_t i;
    const char *next = json_string_value(json_object_get(o, "next"));
    printf("pool '%s' under '%s'; next: %s\n", json_string_value(json_object_get(o, "pool")),
           json_string_value(json_object_get(o, "prefix")), next && next[0] ? next : "-");
    printf("\nDAEMONS (%zu)\n%-24s %-20s %-8s %-8s %s\n",
           json_array_size(json_object_get(o, "daemons")), "NODE", "HOST", "PID", "STATE", "RUN");
    json_array_foreach(json_object_get(o, "daemons"), i, v) {
        const char *run = json_string_value(json_object_get(v, "run"));
        printf("%-24s %-20s %-8lld %-8s %s\n", json_string_value(json_object_get(v, "node")),
               json_string_value(json_object_get(v, "host")),
               (long long)json_integer_value(json_object_get(v, "pid")),
               json_string_value(json_object_get(v, "state")), run && run[0] ? run : "-");
    }
    printf("\nRUNS (%zu, oldest first)\n%-24s %-10s %-4s %-4s %-21s %s\n",
           json_array_size(json_object_get(o, "runs")), "RUN", "STATUS", "MIN", "MAX",
           "SUBMITTED", "NODES");
    json_array_foreach(json_object_get(o, "runs"), i, v) {
        char at[32], nodes[1024] = "";
        when(json_integer_value(json_object_get(v, "submitted_ms")), at, sizeof(at));
        size_t k, len = 0;
        json_t *n;
        json_array_foreach(json_object_get(v, "nodes"), k, n)
            if (len < sizeof(nodes))
                len += (size_t)snprintf(nodes + len, sizeof(nodes) - len, "%s%s", k ? "," : "",
                                        json_string_value(n));
        printf("%-24s %-10s %-4d %-4d %-21s %s\n", json_string_value(json_object_get(v, "run")),
               json_string_value(json_object_get(v, "status")),
               (int)json_integer_value(json_object_get(v, "min")),
               (int)json_integer_value(json_object_get(v, "max")), at, nodes[0] ? nodes : "-");
    }
    json_array_foreach(json_object_get(o, "skipped"), i, v)
        printf("\nskipped spec '%s': %s\n", json_string_value(json_object_get(v, "key")),
               json_string_value(json_object_get(v, "error")));
}

int pool_status_main(int argc, char **argv, char **envp)
{
    static const char *const own[] = {"help", "json", "pool=", NULL};
    struct st_args a = {0};
    struct cfg store;
    char **rest = NULL;
    size_t n_rest = 0;
    struct kv *kv = NULL;
    int code = AGENT_EXIT_USAGE;
    if (daemon_split_args("status", argc, argv, envp, own, on_own, &a, &store, &rest,
                          &n_rest) < 0)
        goto out;
    if (a.help) {
        fputs(status_help, stdout);
        code = 0;
        goto out;
    }
    if (n_rest) {
        fprintf(stderr, "elastic-agent status: '%s' is not an option of status --pool\n",
                rest[0]);
        goto out;
    }
    if (strcmp(store.backend, "memory") == 0) {
        fprintf(stderr, "elastic-agent status: the memory backend holds no pool\n");
        goto out;
    }
    if ((code = daemon_open_store("status", &store, &kv)) != 0)
        goto out;
    struct pool p;
    struct ea_error err = {0};
    json_t *o = NULL;
    if (pool_init(&p, kv, store.prefix, a.pool, &err) < 0) {
        fprintf(stderr, "elastic-agent status: %s\n", err.msg);
        code = AGENT_EXIT_USAGE;
        goto out;
    }
    if (collect(&p, &o, &err) < 0) {
        fprintf(stderr, "elastic-agent status: %s\n", err.msg);
        code = AGENT_EXIT_STORE;
        goto out;
    }
    if (a.json) {
        char *s = json_dumps(o, JSON_COMPACT);
        printf("%s\n", s ? s : "{}");
        free(s);
    } else {
        print_text(o);
    }
    json_decref(o);
    code = 0;
out:
    kv_close(kv);
    free(rest);
    return code;
}
