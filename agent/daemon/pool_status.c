// SPDX-License-Identifier: Apache-2.0
/* status --pool: the pool's daemons (idle or in which run), its queued and running runs in
 * FIFO order with their nodes and signers, the specs it skips and those its daemons refused
 * (docs/daemon.md). One reader: O(N). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "daemon.h"
#include "daemon_internal.h"
#include "ea_escape.h"
#include "ea_time.h"
#include "pool.h"
#include "signers.h"
#include "specsig.h"

static const char status_help[] =
    "Usage: elastic-agent status --pool NAME [--json] [STORE OPTIONS]\n"
    "\n"
    "Lists a pool of `elastic-agent serve` daemons: each daemon (idle, or the run it is in),\n"
    "the runs queued or running in FIFO order with their status, min/max and the nodes in them,\n"
    "who signed each run (as a daemon in it verified, or as --allowed-signers does), queued\n"
    "specs that are not ours (skipped) and the specs the daemons refused (unsigned, a key not\n"
    "allowed, expired, another pool, changed after signing), with the reason and the key's\n"
    "fingerprint: never run. `status --run-id ID` (without --pool) shows one run in detail.\n"
    "\n  --pool NAME                  the pool\n"
    "  --json                       one JSON object\n"
    "  --allowed-signers FILE       verify each queued run's signature against FILE (as a\n"
    "                               daemon would) [env ELASTIC_ALLOWED_SIGNERS]\n"
    "\nExit status: 0 shown, 2 usage error, 3 store unreachable.\n";

bool pool_status_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--pool") == 0 || strncmp(argv[i], "--pool=", 7) == 0)
            return true;
    return false;
}

struct st_args {
    const char *pool, *signers_path;
    bool json, help;
};

static int on_own(void *ctx, const char *flag, const char *v)
{
    struct st_args *a = ctx;
    if (strcmp(flag, "pool=") == 0)
        a->pool = v;
    else if (strcmp(flag, "json") == 0)
        a->json = true;
    else if (strcmp(flag, "allowed-signers=") == 0)
        a->signers_path = v;
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

/* Who signed run `s`: verified against `signers` when given (as a daemon would), else the
 * principal a daemon in the run verified (its record) and the key the signature names. */
static json_t *signer_of(const struct pool *p, const struct runspec *s,
                         const struct signers *signers, json_t *daemons)
{
    struct specsig_verdict v;
    const char *refusal = NULL;
    if (signers) {
        struct specsig_policy pol = {.signers = signers, .allow_unsigned = true,
                                     .pool = p->name, .prefix = p->prefix};
        if (specsig_check(&pol, s, ea_wall_ms(), &v) < 0)
            refusal = v.reason;
    } else {
        specsig_describe(s, &v);
        size_t i;
        json_t *d;
        json_array_foreach(daemons, i, d) {
            const char *signer = json_string_value(json_object_get(d, "signer"));
            const char *fp = json_string_value(json_object_get(d, "fingerprint"));
            if (strcmp(json_string_value(json_object_get(d, "run")), s->run_id) == 0 && signer &&
                signer[0] && fp && strcmp(fp, v.fingerprint) == 0) {
                snprintf(v.principal, sizeof(v.principal), "%s", signer);
                v.verified = true;
            }
        }
        refusal = v.reason[0] ? v.reason : NULL;
    }
    json_t *o = json_pack("{s:b, s:b, s:s, s:s}", "signed", v.is_signed, "verified", v.verified,
                          "principal", v.principal, "fingerprint", v.fingerprint);
    if (refusal)
        json_object_set_new(o, "problem", json_string(refusal));
    return o;
}

/* An entry the listing skips. A key or message that is not UTF-8 (a store writer's; JSON cannot
 * hold it) goes in escaped to ASCII (ea_escape) rather than vanish from the list. */
static json_t *skipped(const char *key, const char *why)
{
    json_t *o = json_pack("{s:s, s:s}", "key", key, "error", why);
    if (o)
        return o;
    char k[EA_ESCAPED_SIZE(POOL_KEY_MAX)], w[EA_ESCAPED_SIZE(EA_ERROR_MSG_MAX)];
    ea_escape(k, sizeof(k), key, EA_ESCAPE_ASCII);
    ea_escape(w, sizeof(w), why, EA_ESCAPE_ASCII);
    return json_pack("{s:s, s:s}", "key", k, "error", w);
}

/* The pool as one JSON object (also what the text form prints from). */
static int collect(struct pool *p, const struct signers *signers, json_t **ret,
                   struct ea_error *err)
{
    char pre[POOL_KEY_MAX], next[128];
    int64_t rev = 0;
    struct kv_list dl = {0}, ql = {0}, rl = {0};
    int r = pool_next_get(p, next, sizeof(next), &rev, err);
    pool_daemon_prefix(p, pre, sizeof(pre));
    if (r == 0)
        r = kv_list(p->kv, pre, &dl, err);
    pool_queue_prefix(p, pre, sizeof(pre));
    if (r == 0)
        r = kv_list(p->kv, pre, &ql, err);
    pool_refused_prefix(p, pre, sizeof(pre));
    if (r == 0)
        r = kv_list(p->kv, pre, &rl, err);
    json_t *o = json_pack("{s:s, s:s, s:s, s:[], s:[], s:[], s:[], s:[]}", "pool", p->name,
                          "prefix", p->prefix, "next", next, "daemons", "runs", "skipped",
                          "refused", "allow_unsigned");
    json_t *daemons = json_object_get(o, "daemons");
    for (size_t i = 0; r == 0 && i < dl.n; i++) {
        struct daemon_record d;
        if (daemon_record_decode(dl.entries[i].value, dl.entries[i].value_len, &d) < 0)
            continue;
        json_array_append_new(daemons,
                              json_pack("{s:s, s:s, s:I, s:s, s:s, s:I, s:s, s:s, s:b}", "node",
                                        d.node, "host", d.host, "pid", (json_int_t)d.pid,
                                        "state", d.run[0] ? "in-run" : "idle", "run", d.run,
                                        "since_ms", (json_int_t)d.since_ms, "signer", d.signer,
                                        "fingerprint", d.fingerprint, "allow_unsigned",
                                        d.allow_unsigned));
        if (d.allow_unsigned)
            json_array_append_new(json_object_get(o, "allow_unsigned"), json_string(d.node));
    }
    pool_queue_sort(&ql);
    for (size_t i = 0; r == 0 && i < ql.n; i++) {
        struct runspec s = {0};
        struct ea_error derr = {0};
        if (runspec_decode(ql.entries[i].value, ql.entries[i].value_len, &s, &derr) < 0) {
            json_array_append_new(json_object_get(o, "skipped"),
                                  skipped(ql.entries[i].key, derr.msg));
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
                              json_pack("{s:s, s:s, s:b, s:i, s:i, s:I, s:I, s:o, s:o}", "run",
                                        s.run_id, "status", status, "full", pr == POOL_RUN_FULL,
                                        "min", s.min_nodes, "max", s.max_nodes, "submitted_ms",
                                        (json_int_t)s.submitted_ms, "expires_ms",
                                        (json_int_t)s.expires_ms, "nodes", nodes, "signer",
                                        signer_of(p, &s, signers, daemons)));
        runspec_clear(&s);
    }
    for (size_t i = 0; r == 0 && i < rl.n; i++) {
        json_t *e = json_loadb(rl.entries[i].value, rl.entries[i].value_len, 0, NULL);
        const char *run = NULL, *reason = NULL, *principal = "", *fp = "", *by = "";
        json_int_t at = 0;
        int is_signed = 0;
        if (json_unpack(e, "{s:s, s:s, s?b, s?s, s?s, s?s, s?I}", "run", &run, "reason", &reason,
                        "signed", &is_signed, "principal", &principal, "fingerprint", &fp, "by",
                        &by, "at_ms", &at) == 0)
            json_array_append_new(json_object_get(o, "refused"),
                                  json_pack("{s:s, s:s, s:b, s:s, s:s, s:s, s:I}", "run", run,
                                            "reason", reason, "signed", is_signed, "principal",
                                            principal, "fingerprint", fp, "by", by, "at_ms", at));
        else
            json_array_append_new(json_object_get(o, "skipped"),
                                  skipped(rl.entries[i].key, "not a refusal record of ours"));
        json_decref(e);
    }
    kv_list_clear(&dl);
    kv_list_clear(&ql);
    kv_list_clear(&rl);
    if (r < 0) {
        json_decref(o);
        return r;
    }
    *ret = o;
    return 0;
}

/* "alice SHA256:..." / "unsigned" / "SHA256:... (unverified)" */
static void signer_text(json_t *g, char *buf, size_t size)
{
    const char *principal = json_string_value(json_object_get(g, "principal"));
    const char *fp = json_string_value(json_object_get(g, "fingerprint"));
    const char *problem = json_string_value(json_object_get(g, "problem"));
    if (!json_is_true(json_object_get(g, "signed")))
        snprintf(buf, size, "unsigned");
    else if (json_is_true(json_object_get(g, "verified")))
        snprintf(buf, size, "%s %s", principal, fp);
    else
        snprintf(buf, size, "%s (unverified)", fp && fp[0] ? fp : "?");
    if (problem)
        snprintf(buf + strlen(buf), size - strlen(buf), "; refused here: %s", problem);
}

static void print_text(json_t *o)
{
    json_t *v;
    size_t i;
    const char *next = json_string_value(json_object_get(o, "next"));
    ea_fprintf(stdout, "pool '%s' under '%s'; next: %s\n",
               json_string_value(json_object_get(o, "pool")),
               json_string_value(json_object_get(o, "prefix")), next && next[0] ? next : "-");
    json_t *unsigned_ok = json_object_get(o, "allow_unsigned");
    if (json_array_size(unsigned_ok)) {
        ea_fprintf(stdout, "warning: %zu daemon(s) run unsigned specs (--allow-unsigned):",
                   json_array_size(unsigned_ok));
        json_array_foreach(unsigned_ok, i, v)
            ea_fprintf(stdout, "%s %s", i ? "," : "", json_string_value(v));
        ea_fprintf(stdout, ": anyone who can write to the store can run commands on them\n");
    }
    ea_fprintf(stdout, "\nDAEMONS (%zu)\n%-24s %-20s %-8s %-8s %s\n",
               json_array_size(json_object_get(o, "daemons")), "NODE", "HOST", "PID", "STATE",
               "RUN");
    json_array_foreach(json_object_get(o, "daemons"), i, v) {
        const char *run = json_string_value(json_object_get(v, "run"));
        ea_fprintf(stdout, "%-24s %-20s %-8lld %-8s %s\n",
                   json_string_value(json_object_get(v, "node")),
                   json_string_value(json_object_get(v, "host")),
                   (long long)json_integer_value(json_object_get(v, "pid")),
                   json_string_value(json_object_get(v, "state")), run && run[0] ? run : "-");
    }
    ea_fprintf(stdout, "\nRUNS (%zu, oldest first)\n%-24s %-10s %-4s %-4s %-21s %-16s %s\n",
               json_array_size(json_object_get(o, "runs")), "RUN", "STATUS", "MIN", "MAX",
               "SUBMITTED", "NODES", "SIGNER");
    json_array_foreach(json_object_get(o, "runs"), i, v) {
        char at[32], nodes[1024] = "", who[800];
        when(json_integer_value(json_object_get(v, "submitted_ms")), at, sizeof(at));
        signer_text(json_object_get(v, "signer"), who, sizeof(who));
        size_t k, len = 0;
        json_t *n;
        json_array_foreach(json_object_get(v, "nodes"), k, n)
            if (len < sizeof(nodes))
                len += (size_t)snprintf(nodes + len, sizeof(nodes) - len, "%s%s", k ? "," : "",
                                        json_string_value(n));
        ea_fprintf(stdout, "%-24s %-10s %-4d %-4d %-21s %-16s %s\n",
                   json_string_value(json_object_get(v, "run")),
                   json_string_value(json_object_get(v, "status")),
                   (int)json_integer_value(json_object_get(v, "min")),
                   (int)json_integer_value(json_object_get(v, "max")), at, nodes[0] ? nodes : "-",
                   who);
    }
    json_t *refused = json_object_get(o, "refused");
    if (json_array_size(refused))
        ea_fprintf(stdout, "\nREFUSED (%zu, never run; `cancel ID` forgets one)\n",
                   json_array_size(refused));
    json_array_foreach(refused, i, v) {
        const char *fp = json_string_value(json_object_get(v, "fingerprint"));
        const char *principal = json_string_value(json_object_get(v, "principal"));
        const char *reason = json_string_value(json_object_get(v, "reason"));
        bool named = !fp[0] || strstr(reason, fp);
        ea_fprintf(stdout, "%-24s %s%s%s%s%s (by %s)\n",
                   json_string_value(json_object_get(v, "run")), reason, named ? "" : "; key ",
                   named ? "" : fp, principal[0] ? " of " : "", principal,
                   json_string_value(json_object_get(v, "by")));
    }
    json_array_foreach(json_object_get(o, "skipped"), i, v)
    {
        ea_fprintf(stdout, "\nskipped spec '%s': %s\n",
                   json_string_value(json_object_get(v, "key")),
                   json_string_value(json_object_get(v, "error")));
    }
}

int pool_status_main(int argc, char **argv, char **envp)
{
    static const char *const own[] = {"help", "json", "pool=", "allowed-signers=", NULL};
    struct st_args a = {.signers_path = daemon_env(envp, "ELASTIC_ALLOWED_SIGNERS")};
    struct signers *signers = NULL;
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
        ea_fprintf(stderr, "elastic-agent status: '%s' is not an option of status --pool\n",
                   rest[0]);
        goto out;
    }
    if (strcmp(store.backend, "memory") == 0) {
        ea_fprintf(stderr, "elastic-agent status: the memory backend holds no pool\n");
        goto out;
    }
    struct ea_error err = {0};
    if (a.signers_path && signers_load(a.signers_path, &signers, &err) < 0) {
        ea_fprintf(stderr, "elastic-agent status: --allowed-signers: %s\n", err.msg);
        goto out;
    }
    if ((code = daemon_open_store("status", &store, &kv)) != 0)
        goto out;
    struct pool p;
    json_t *o = NULL;
    if (pool_init(&p, kv, store.prefix, a.pool, &err) < 0) {
        ea_fprintf(stderr, "elastic-agent status: %s\n", err.msg);
        code = AGENT_EXIT_USAGE;
        goto out;
    }
    if (collect(&p, signers, &o, &err) < 0) {
        ea_fprintf(stderr, "elastic-agent status: %s\n", err.msg);
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
    signers_free(signers);
    free(rest);
    return code;
}
