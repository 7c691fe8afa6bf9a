// SPDX-License-Identifier: Apache-2.0
/* daemon: the pieces serve, submit, cancel and status --pool share (daemon_internal.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <strings.h>

#include "config.h"
#include "daemon_internal.h"
#include "ea_escape.h"

char *daemon_record_encode(const struct daemon_record *d)
{
    json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:s, s:I, s:s, s:s, s:b}", "schema",
                          RUNSPEC_SCHEMA, "node", d->node, "host", d->host, "pid",
                          (json_int_t)d->pid, "run", d->run, "since_ms", (json_int_t)d->since_ms,
                          "signer", d->signer, "fingerprint", d->fingerprint, "allow_unsigned",
                          d->allow_unsigned);
    char *out = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    return out;
}

int daemon_record_decode(const char *json, size_t len, struct daemon_record *ret)
{
    json_t *j = json_loadb(json, len, 0, NULL);
    const char *schema = NULL, *node = NULL, *host = NULL, *run = NULL, *signer = "", *fp = "";
    json_int_t pid = 0, since = 0;
    int unsigned_ok = 0, r = -EBADMSG;
    if (j && json_unpack(j, "{s:s, s:s, s:s, s:I, s:s, s:I, s?s, s?s, s?b}", "schema", &schema,
                         "node", &node, "host", &host, "pid", &pid, "run", &run, "since_ms",
                         &since, "signer", &signer, "fingerprint", &fp, "allow_unsigned",
                         &unsigned_ok) == 0 &&
        strcmp(schema, RUNSPEC_SCHEMA) == 0) {
        struct daemon_record d = {.pid = pid, .since_ms = since, .allow_unsigned = unsigned_ok};
        snprintf(d.node, sizeof(d.node), "%s", node);
        snprintf(d.host, sizeof(d.host), "%s", host);
        snprintf(d.run, sizeof(d.run), "%s", run);
        snprintf(d.signer, sizeof(d.signer), "%s", signer);
        snprintf(d.fingerprint, sizeof(d.fingerprint), "%s", fp);
        *ret = d;
        r = 0;
    }
    json_decref(j);
    return r;
}

/* Whether `e` (NAME=VALUE) sets variable `name`. */
static bool sets(const char *e, const char *name, size_t len)
{
    return strncmp(e, name, len) == 0 && e[len] == '=';
}

/* Variables a run's agent must not inherit from the daemon: they would set the run's options
 * (the spec says those), the daemon's own (--http) or hold its secret (handed by fd instead). */
static bool daemon_only(const char *e)
{
    static const char *const fixed[] = {"ELASTIC_RUN_ID", "ELASTIC_RDZV_ID", "ELASTIC_HTTP",
                                        "PET_RDZV_ID", "PET_NNODES", "PET_MAX_RESTARTS",
                                        "PET_STANDALONE", "ELASTIC_STANDALONE", "ELASTIC_POOL",
                                        "ELASTIC_ETCD_PASSWORD", "ELASTIC_PASSWORD_FILE",
                                        "ELASTIC_PASSWORD_FD", "ELASTIC_WORKER_ENV_FD"};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(*fixed); i++)
        if (sets(e, fixed[i], strlen(fixed[i])))
            return true;
    if (strncmp(e, "ELASTIC_", 8) != 0)
        return false;
    for (size_t i = 0; i < cfg_option_count(); i++) {
        const char *flag = cfg_option_flag(i, NULL);
        if (!runspec_is_run_option(flag) || runspec_is_node_default(flag))
            continue;
        char name[64];
        cfg_option_env_name(i, name, sizeof(name));
        if (sets(e, name, strlen(name)))
            return true;
    }
    return false;
}

int daemon_child_env(char **envp, char ***ret)
{
    size_t n = 0;
    while (envp && envp[n])
        n++;
    char **v = calloc(n + 1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!daemon_only(envp[i]))
            v[k++] = envp[i];
    *ret = v;
    return 0;
}

void daemon_hand_password(const struct cfg *c, char **args, size_t *n, char *fd_arg)
{
    size_t k = 0;
    for (size_t i = 0; i < *n; i++) {
        const char *a = args[i];
        bool pw = !strncmp(a, "--password-file", 15) || !strncmp(a, "--password_file", 15) ||
                  !strncmp(a, "--password-fd", 13) || !strncmp(a, "--password_fd", 13);
        if (pw && !strchr(a, '='))
            i++; /* and its value */
        else if (!pw)
            args[k++] = args[i];
    }
    *n = k;
    if (!c->user)
        return;
    args[(*n)++] = (char *)"--password-fd";
    args[(*n)++] = fd_arg;
}

int daemon_worker_env_fd(const struct runspec *s, int *ret_fd, struct ea_error *err)
{
    /* inheritable on purpose: it exists from here to the spawn of the run's agent, and the
     * daemon starts nothing else in between */
    int fd = memfd_create("elastic-agent-worker-env", 0);
    if (fd < 0)
        return ea_errorf(err, -errno, "memfd_create: %s", strerror(errno));
    for (size_t i = 0; i < s->n_env; i++) {
        size_t len = strlen(s->env[i]) + 1; /* with its NUL: the separator */
        if (write(fd, s->env[i], len) != (ssize_t)len) {
            int e = errno ? errno : EIO;
            close(fd);
            return ea_errorf(err, -e, "writing the workers' environment: %s", strerror(e));
        }
    }
    *ret_fd = fd;
    return 0;
}

int daemon_split_args(const char *cmd, int argc, char **argv, char **envp,
                      const char *const *own, daemon_own_fn on_own, void *ctx,
                      struct cfg *ret_cfg, char ***ret_rest, size_t *ret_n)
{
    char **store = calloc((size_t)argc + 2, sizeof(char *));
    char **rest = calloc((size_t)argc + 1, sizeof(char *));
    size_t ns = 0, nr = 0;
    int r = -ENOMEM;
    if (!store || !rest)
        goto out;
    store[ns++] = (char *)"status";
    r = -EINVAL;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || !a[2])
            break; /* "--" or the command: the rest is the caller's */
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        bool mine = false;
        for (size_t k = 0; own[k] && !mine; k++) {
            size_t ol = strcspn(own[k], "=");
            if (ol != len || strncmp(own[k], name, len) != 0)
                continue;
            mine = true;
            const char *v = NULL;
            if (own[k][ol] == '=') {
                v = eq ? eq + 1 : i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0 ? argv[++i]
                                                                                  : NULL;
                if (!v || !v[0]) {
                    fprintf(stderr, "elastic-agent %s: --%.*s needs a value\n", cmd, (int)ol,
                            own[k]);
                    goto out;
                }
            } else if (eq) {
                fprintf(stderr, "elastic-agent %s: --%.*s takes no value\n", cmd, (int)len, name);
                goto out;
            }
            if (on_own(ctx, own[k], v) < 0)
                goto out;
        }
        if (mine)
            continue;
        bool value = false;
        int k = cfg_option_find(name, len, &value);
        unsigned cmds = 0;
        const char *flag = k >= 0 ? cfg_option_flag((size_t)k, &cmds) : "";
        bool is_store = daemon_is_store_option(flag, cmds);
        char **dst = is_store ? store : rest;
        size_t *dn = is_store ? &ns : &nr;
        dst[(*dn)++] = argv[i];
        if (value && !eq && i + 1 < argc)
            dst[(*dn)++] = argv[++i];
    }
    for (; i < argc; i++)
        rest[nr++] = argv[i];
    struct ea_error err = {0};
    if (cfg_parse_cmd(CFG_STATUS, (int)ns, store, envp, ret_cfg, &err) < 0) {
        fprintf(stderr, "elastic-agent %s: %s\n", cmd, err.msg);
        goto out;
    }
    *ret_rest = rest;
    *ret_n = nr;
    rest = NULL;
    r = 0;
out:
    free(store);
    free(rest);
    return r;
}

const char *daemon_env(char **envp, const char *name)
{
    size_t n = strlen(name);
    for (char **e = envp; e && *e; e++)
        if (sets(*e, name, n) && (*e)[n + 1])
            return *e + n + 1;
    return NULL;
}

int daemon_env_bool(const char *cmd, char **envp, const char *name, bool *ret)
{
    const char *v = daemon_env(envp, name);
    if (!v)
        return 0;
    static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false",
                                                                                  "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0 || strcasecmp(v, no[i]) == 0) {
            *ret = strcasecmp(v, yes[i]) == 0;
            return 0;
        }
    }
    fprintf(stderr, "elastic-agent %s: %s='%s': not yes or no (1/0, true/false, yes/no, on/off)\n",
            cmd, name, v);
    return -EINVAL;
}

const char *daemon_default_pool(char **envp)
{
    for (char **e = envp; e && *e; e++)
        if (sets(*e, "ELASTIC_POOL", 12) && (*e)[13])
            return *e + 13;
    return "default";
}

int daemon_open_store(const char *cmd, const struct cfg *c, struct kv **ret)
{
    struct ea_error err = {0};
    struct kv_config kc = cfg_kv_config(c, 0);
    int r = kv_open(&kc, ret, &err);
    if (r < 0) {
        ea_fprintf(stderr, "elastic-agent %s: cannot open the %s store: %s\n", cmd, c->backend,
                   err.msg);
        return r == KV_EINVAL ? AGENT_EXIT_USAGE : AGENT_EXIT_STORE;
    }
    return 0;
}

bool daemon_is_store_option(const char *flag, unsigned cmds)
{
    return (cmds & CFG_STATUS) && strcmp(flag, "json") != 0 && strcmp(flag, "watch") != 0 &&
           strcmp(flag, "help") != 0;
}

void daemon_print_options(FILE *out, bool (*keep)(const char *flag, unsigned cmds))
{
    for (size_t i = 0; i < cfg_option_count(); i++) {
        unsigned cmds = 0;
        const char *flag = cfg_option_flag(i, &cmds);
        if (keep(flag, cmds))
            cfg_print_option(out, i);
    }
}
