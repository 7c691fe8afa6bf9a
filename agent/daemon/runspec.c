// SPDX-License-Identifier: Apache-2.0
/* runspec: the run spec's JSON codec and its validation against the agent's option table. */
#include "runspec.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* The options a run spec may carry: what belongs to the run rather than to the node that joins
 * it. Everything else in the option table is per node (give it to `serve`), a store option or a
 * secret (never in a spec). The liveness ring's options are the run's: the two ends of a link
 * must agree on the heartbeat period and on how many misses break it, so every agent of a run
 * takes them from its spec, never from the node (a node default could differ between nodes). */
static const char *const run_options[] = {
    "min",         "max",          "nnodes",        "nproc-per-node",
    "max-restarts", "join-timeout", "last-call",     "settle",
    "rank-order",  "stop-timeout", "tee",           "local-ranks-filter",
    "env-style",   "dmlc-tracker", "nic-discovery", "topology",
    "worker-heartbeat-timeout",    "worker-startup-timeout",
    "liveness",    "liveness-interval",             "liveness-misses",
};

bool runspec_is_run_option(const char *flag)
{
    for (size_t i = 0; i < sizeof(run_options) / sizeof(*run_options); i++)
        if (strcmp(run_options[i], flag) == 0)
            return true;
    return false;
}

bool runspec_is_node_default(const char *flag)
{
    return strcmp(flag, "nproc-per-node") == 0 || strcmp(flag, "stop-timeout") == 0;
}

static void free_strv(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

void runspec_clear(struct runspec *s)
{
    if (!s)
        return;
    free_strv(s->args, s->n_args);
    free_strv(s->command, s->n_command);
    free_strv(s->env, s->n_env);
    free(s->signature);
    memset(s, 0, sizeof(*s));
}

static json_t *strv_json(char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_string(v[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static int encode(const struct runspec *s, bool with_signature, char **ret_json,
                  struct ea_error *err)
{
    json_t *j = json_pack("{s:s, s:s, s:o*, s:o*, s:o*, s:i, s:i, s:I}", "schema", RUNSPEC_SCHEMA,
                          "run", s->run_id, "args", strv_json(s->args, s->n_args), "command",
                          strv_json(s->command, s->n_command), "env",
                          strv_json(s->env, s->n_env), "min", s->min_nodes, "max", s->max_nodes,
                          "submitted_ms", (json_int_t)s->submitted_ms);
    bool ok = j != NULL;
    if (ok && s->pool[0])
        ok = json_object_set_new(j, "pool", json_string(s->pool)) == 0;
    if (ok && s->prefix[0])
        ok = json_object_set_new(j, "prefix", json_string(s->prefix)) == 0;
    if (ok && s->expires_ms)
        ok = json_object_set_new(j, "expires_ms", json_integer(s->expires_ms)) == 0;
    if (ok && with_signature && s->signature)
        ok = json_object_set_new(j, "signature", json_string(s->signature)) == 0;
    char *out = ok ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    if (!out)
        return ea_errorf(err, -ENOMEM, "out of memory encoding the run spec");
    *ret_json = out;
    return 0;
}

int runspec_encode(const struct runspec *s, char **ret_json, struct ea_error *err)
{
    return encode(s, true, ret_json, err);
}

int runspec_canonical(const struct runspec *s, char **ret, size_t *ret_len, struct ea_error *err)
{
    char *out = NULL;
    int r = encode(s, false, &out, err);
    if (r < 0)
        return r;
    *ret = out;
    *ret_len = strlen(out);
    return 0;
}

/* A JSON array of strings into a NULL-terminated malloc'ed vector. */
static int strv_of(json_t *a, const char *what, char ***ret, size_t *ret_n, struct ea_error *err)
{
    if (!json_is_array(a))
        return ea_errorf(err, -EBADMSG, "\"%s\" is not an array of strings", what);
    size_t n = json_array_size(a);
    if (n > RUNSPEC_ITEMS_MAX)
        return ea_errorf(err, -EBADMSG, "\"%s\" has %zu items (at most %d)", what, n,
                         RUNSPEC_ITEMS_MAX);
    char **v = calloc(n + 1, sizeof(*v));
    if (!v)
        return ea_errorf(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(a, i);
        if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e)) {
            free_strv(v, i);
            return ea_errorf(err, -EBADMSG, "\"%s\"[%zu] is not a string without NUL bytes",
                             what, i);
        }
        if (!(v[i] = strdup(json_string_value(e)))) {
            free_strv(v, i);
            return ea_errorf(err, -ENOMEM, "out of memory");
        }
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

static bool valid_run_id(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 100 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return false;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '_' && *p != '-')
            return false;
    return true;
}

int runspec_decode(const char *json, size_t len, struct runspec *ret, struct ea_error *err)
{
    if (len > RUNSPEC_BYTES_MAX)
        return ea_errorf(err, -EBADMSG, "run spec of %zu bytes (at most %u)", len,
                         RUNSPEC_BYTES_MAX);
    json_error_t je;
    json_t *j = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return ea_errorf(err, -EBADMSG, "not JSON: %s", je.text);
    struct runspec s = {0};
    int r = -EBADMSG;
    json_t *schema = json_object_get(j, "schema"), *run = json_object_get(j, "run");
    json_t *min = json_object_get(j, "min"), *max = json_object_get(j, "max");
    json_t *at = json_object_get(j, "submitted_ms"), *pool = json_object_get(j, "pool");
    json_t *exp = json_object_get(j, "expires_ms"), *sig = json_object_get(j, "signature");
    json_t *prefix = json_object_get(j, "prefix");
    if (!json_is_object(j)) {
        ea_errorf(err, r, "not a JSON object");
    } else if (!json_is_string(schema) || strcmp(json_string_value(schema), RUNSPEC_SCHEMA) != 0) {
        ea_errorf(err, r, "schema is %s%s%s, not \"" RUNSPEC_SCHEMA "\"",
                  json_is_string(schema) ? "\"" : "",
                  json_is_string(schema) ? json_string_value(schema) : "missing",
                  json_is_string(schema) ? "\"" : "");
    } else if (!json_is_string(run) || !valid_run_id(json_string_value(run))) {
        ea_errorf(err, r, "\"run\" is not a run id (1-100 of A-Z a-z 0-9 . _ -)");
    } else if (!json_is_integer(min) || !json_is_integer(max) || json_integer_value(min) < 1 ||
               json_integer_value(max) < json_integer_value(min) ||
               json_integer_value(max) > 100000) {
        ea_errorf(err, r, "\"min\"/\"max\" are not node counts with 1 <= min <= max");
    } else if (at && !json_is_integer(at)) {
        ea_errorf(err, r, "\"submitted_ms\" is not an integer");
    } else if (pool && (!json_is_string(pool) || json_string_length(pool) == 0 ||
                        json_string_length(pool) >= sizeof(s.pool) ||
                        strlen(json_string_value(pool)) != json_string_length(pool))) {
        ea_errorf(err, r, "\"pool\" is not a pool name");
    } else if (prefix &&
               (!json_is_string(prefix) || json_string_length(prefix) == 0 ||
                json_string_length(prefix) >= sizeof(s.prefix) ||
                strlen(json_string_value(prefix)) != json_string_length(prefix))) {
        ea_errorf(err, r, "\"prefix\" is not a key prefix");
    } else if (exp && (!json_is_integer(exp) || json_integer_value(exp) <= 0)) {
        ea_errorf(err, r, "\"expires_ms\" is not a time");
    } else if (sig && (!json_is_string(sig) || json_string_length(sig) > RUNSPEC_SIGNATURE_MAX ||
                       strlen(json_string_value(sig)) != json_string_length(sig))) {
        ea_errorf(err, r, "\"signature\" is not a string of at most %d bytes",
                  RUNSPEC_SIGNATURE_MAX);
    } else if ((r = strv_of(json_object_get(j, "args"), "args", &s.args, &s.n_args, err)) == 0 &&
               (r = strv_of(json_object_get(j, "command"), "command", &s.command, &s.n_command,
                            err)) == 0 &&
               (r = strv_of(json_object_get(j, "env"), "env", &s.env, &s.n_env, err)) == 0) {
        if (s.n_command == 0 || !s.command[0][0])
            r = ea_errorf(err, -EBADMSG, "\"command\" is empty");
        else if (runspec_check_env(s.env, s.n_env, err) < 0)
            r = -EBADMSG;
        snprintf(s.run_id, sizeof(s.run_id), "%s", json_string_value(run));
        s.min_nodes = (int)json_integer_value(min);
        s.max_nodes = (int)json_integer_value(max);
        s.submitted_ms = at ? (int64_t)json_integer_value(at) : 0;
        snprintf(s.pool, sizeof(s.pool), "%s", pool ? json_string_value(pool) : "");
        snprintf(s.prefix, sizeof(s.prefix), "%s", prefix ? json_string_value(prefix) : "");
        s.expires_ms = exp ? (int64_t)json_integer_value(exp) : 0;
        if (r == 0 && sig && !(s.signature = strdup(json_string_value(sig))))
            r = ea_errorf(err, -ENOMEM, "out of memory");
    }
    json_decref(j);
    if (r < 0) {
        runspec_clear(&s);
        return r;
    }
    *ret = s;
    return 0;
}

int runspec_check_args(char *const *args, size_t n, struct ea_error *err)
{
    for (size_t i = 0; i < n; i++) {
        const char *a = args[i];
        if (strncmp(a, "--", 2) != 0 || !a[2])
            return ea_errorf(err, -EINVAL, "'%s' is not an option (the command goes after --)",
                             a);
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        bool value = false;
        int k = cfg_option_find(name, len, &value);
        if (k < 0)
            return ea_errorf(err, -EINVAL, "unknown option '--%.*s' (see --help)", (int)len,
                             name);
        unsigned cmds = 0;
        const char *flag = cfg_option_flag((size_t)k, &cmds);
        if (cmds & CFG_STATUS)
            return ea_errorf(err, -EINVAL,
                             "--%s is a store option: a run spec never holds where the store is "
                             "or its credentials (each node has its own)",
                             flag);
        if (!runspec_is_run_option(flag))
            return ea_errorf(err, -EINVAL,
                             "--%s is a per-node option: give it to 'elastic-agent serve' on the "
                             "nodes, not to the run",
                             flag);
        if (value && !eq && ++i >= n)
            return ea_errorf(err, -EINVAL, "--%s needs a value", flag);
    }
    return 0;
}

/* Names a spec's --env may not set: they change how a process loads code, resolves names or
 * connects, and the workers' environment also reaches processes the node trusts (each worker's
 * exec-guard, the ssh launcher's remote wrapper). glibc's list of variables it ignores in
 * setuid programs (unsecvars), the TLS and gRPC libraries', the store's and the agent's own
 * state locations. A trailing '*' is a prefix. Proxy and language variables (http_proxy,
 * PYTHONPATH, ...) are the workers' business and pass. docs/security.md names the choice. */
static const char *const loader_names[] = {
    "LD_*",         "GCONV_PATH",  "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES",
    "LOCALDOMAIN",  "LOCPATH",     "MALLOC_*",    "NIS_PATH",       "NLSPATH",
    "RESOLV_HOST_CONF", "RES_OPTIONS", "TMPDIR",  "TZDIR",          "GRPC_*",
    "SSL_CERT_*",   "OPENSSL_*",   "XDG_RUNTIME_DIR", "BASH_ENV",
};

/* The loader_names entry that `name` (len bytes) matches, or NULL. */
static const char *loader_name(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(loader_names) / sizeof(*loader_names); i++) {
        const char *p = loader_names[i];
        size_t plen = strcspn(p, "*");
        if (p[plen] == '*' ? len >= plen && strncmp(name, p, plen) == 0
                           : len == plen && strncmp(name, p, len) == 0)
            return p;
    }
    return NULL;
}

int runspec_check_env(char *const *env, size_t n, struct ea_error *err)
{
    for (size_t i = 0; i < n; i++) {
        const char *e = env[i], *eq = strchr(e, '=');
        bool ok = eq && eq != e && !isdigit((unsigned char)e[0]);
        for (const char *p = e; ok && p < eq; p++)
            ok = isalnum((unsigned char)*p) || *p == '_';
        if (!ok)
            return ea_errorf(err, -EINVAL, "--env: '%s' is not NAME=VALUE", e);
        if (strncmp(e, "ELASTIC_", 8) == 0 || strncmp(e, "PET_", 4) == 0)
            return ea_errorf(err, -EINVAL,
                             "--env: '%.*s' is read by the agent as an option: give the option "
                             "itself",
                             (int)(eq - e), e);
        const char *hit = loader_name(e, (size_t)(eq - e));
        if (hit)
            return ea_errorf(err, -EINVAL,
                             "--env: '%.*s' changes how a process loads or connects (%s is "
                             "refused in a run spec); set it inside the command (env NAME=VALUE "
                             "CMD, or a wrapper script)",
                             (int)(eq - e), e, hit);
    }
    return 0;
}

int runspec_argv(const struct runspec *s, const char *prog, char *const *node_args, size_t n_node,
                 char ***ret_argv, size_t *ret_argc)
{
    size_t n = 1 + n_node + s->n_args + 3 + s->n_command;
    char **v = calloc(n + 1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    size_t k = 0;
    v[k++] = (char *)prog;
    for (size_t i = 0; i < n_node; i++)
        v[k++] = node_args[i];
    for (size_t i = 0; i < s->n_args; i++)
        v[k++] = s->args[i];
    v[k++] = (char *)"--run-id";
    v[k++] = (char *)s->run_id;
    v[k++] = (char *)"--";
    for (size_t i = 0; i < s->n_command; i++)
        v[k++] = s->command[i];
    *ret_argv = v;
    if (ret_argc)
        *ret_argc = k;
    return 0;
}

int runspec_validate(const struct runspec *s, char *const *node_args, size_t n_node, char **envp,
                     struct cfg *ret_cfg, char ***ret_argv, struct ea_error *err)
{
    int r;
    if ((r = runspec_check_args(s->args, s->n_args, err)) < 0 ||
        (r = runspec_check_env(s->env, s->n_env, err)) < 0)
        return r;
    if (s->n_command == 0 || !s->command[0][0])
        return ea_errorf(err, -EINVAL,
                         "missing the worker command: elastic-agent submit [OPTIONS] -- COMMAND "
                         "[ARGS...]");
    char **argv = NULL;
    size_t argc = 0;
    if (runspec_argv(s, "elastic-agent", node_args, n_node, &argv, &argc) < 0)
        return ea_errorf(err, -ENOMEM, "out of memory");
    struct cfg c;
    r = cfg_parse((int)argc, argv, envp, &c, err);
    if (r == 0 && (c.help || c.version))
        r = ea_errorf(err, -EINVAL, "--help/--version in a run spec");
    /* the daemon sizes the run (seats, room) by the spec's min/max, its agent by the parsed
     * options: a spec whose two disagree was not written by submit */
    if (r == 0 && s->max_nodes && (c.min_nodes != s->min_nodes || c.max_nodes != s->max_nodes))
        r = ea_errorf(err, -EINVAL,
                      "the spec says min %d, max %d but its options give --min %d --max %d "
                      "(not written by 'elastic-agent submit')",
                      s->min_nodes, s->max_nodes, c.min_nodes, c.max_nodes);
    if (r < 0 || !ret_argv) {
        explicit_bzero(c.password_buf, sizeof(c.password_buf));
        free(argv);
        return r < 0 ? r : 0;
    }
    if (ret_cfg) {
        *ret_cfg = c;
        if (c.node_id == c.node_id_buf)
            ret_cfg->node_id = ret_cfg->node_id_buf;
        if (c.state_dir == c.state_dir_buf)
            ret_cfg->state_dir = ret_cfg->state_dir_buf;
        if (c.password == c.password_buf)
            ret_cfg->password = ret_cfg->password_buf;
    }
    explicit_bzero(c.password_buf, sizeof(c.password_buf));
    *ret_argv = argv;
    return 0;
}

/* Why serve refuses option `flag` (in commands `cmds`; NULL flag: no such option), or NULL. */
const char *runspec_serve_refusal(const char *flag, unsigned cmds)
{
    if (!flag || !(cmds & CFG_AGENT))
        return "unknown option for serve (see serve --help)";
    if (!strcmp(flag, "worker-env-fd"))
        return "serve hands each run's --env to the run's workers itself";
    if (runspec_is_run_option(flag) && !runspec_is_node_default(flag))
        return "a run option: give it to 'elastic-agent submit'";
    if (!strcmp(flag, "run-id") || !strcmp(flag, "rdzv-id"))
        return "serve runs whatever is submitted to its --pool";
    static const char *const driver[] = {"standalone", "hosts", "hostfile",
                                         "host-discovery-script", "discovery-interval",
                                         "host-cooldown"};
    for (size_t i = 0; i < sizeof(driver) / sizeof(*driver); i++)
        if (!strcmp(flag, driver[i]))
            return "not for serve (a daemon is one node of its pool)";
    return NULL;
}

/* The node options serve --help lists (--http is serve's own; --help, --version: none). */
bool runspec_serve_lists(const char *flag, unsigned cmds)
{
    return !runspec_serve_refusal(flag, cmds) && strcmp(flag, "http") != 0 &&
           strcmp(flag, "help") != 0 && strcmp(flag, "version") != 0;
}
