// SPDX-License-Identifier: Apache-2.0
/* serve's options and --help (serve_internal.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "daemon_internal.h"
#include "serve_internal.h"

static const char serve_help[] =
    "Usage: elastic-agent serve [--pool NAME] [--http [ADDR]:PORT]\n"
    "                           (--allowed-signers FILE | --allow-unsigned) [NODE OPTIONS]\n"
    "\n"
    "A node daemon that stays up between runs. Idle, it watches its pool (one small key) and\n"
    "joins the oldest run submitted with `elastic-agent submit` that has room (fewer nodes than\n"
    "its --max); it runs it exactly as `elastic-agent [OPTIONS] -- COMMAND` would, with this\n"
    "node's options and the run's spec, and is idle again when the run ends or it leaves.\n"
    "SIGTERM/SIGINT: leave the current run gracefully, then exit 0.\n"
    "\n"
    "  --pool NAME                  the pool to serve [default default] [env ELASTIC_POOL]\n"
    "  --http [ADDR]:PORT           /healthz (200 while the daemon holds its lease), /readyz\n"
    "                               (says idle or the run), /metrics, kept up between runs\n"
    "  --allowed-signers FILE       run only specs signed (submit --sign-with) by a key of FILE,\n"
    "                               an OpenSSH allowed_signers file (ssh-keygen(1)); re-read\n"
    "                               when it changes [env ELASTIC_ALLOWED_SIGNERS]\n"
    "  --allow-unsigned             also run unsigned specs: anyone who can write to the store\n"
    "                               can then run commands here (logged, shown by status --pool)\n"
    "                               [env ELASTIC_ALLOW_UNSIGNED]\n"
    "\nNode options (each also from ELASTIC_<NAME>, as in `elastic-agent --help`; the run's own\n"
    "options go to submit; --nproc-per-node and --stop-timeout are this node's defaults, which a\n"
    "run's spec may override):\n";

static const char serve_help_end[] =
    "\nWhile the store is unreachable the daemon retries (backing off to 5 s; /healthz says so).\n"
    "A spec refused (unsigned, not signed by an allowed key, expired, for another pool, changed\n"
    "after signing) is never run: the daemon that finds it first moves it to the pool's\n"
    "refused/ keys and says why once (also an entry that is not a spec); status --pool lists it.\n"
    "Exit status: 0 after SIGTERM/SIGINT, 2 usage error (also: neither --allowed-signers nor\n"
    "--allow-unsigned), 3 the store cannot be opened.\n";

/* ---- options ------------------------------------------------------------------------------ */

int serve_parse(struct daemon *d, int argc, char **argv, char **envp, const char **ret_pool,
                 bool *ret_help)
{
    const char *pool = daemon_default_pool(envp), *http = NULL;
    d->node_args = calloc((size_t)argc + 5, sizeof(char *));
    if (!d->node_args)
        return -ENOMEM;
    d->signers_path = daemon_env(envp, "ELASTIC_ALLOWED_SIGNERS");
    if (daemon_env_bool("serve", envp, "ELASTIC_ALLOW_UNSIGNED", &d->allow_unsigned) < 0)
        return -EINVAL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            *ret_help = true;
            return 0;
        }
        if (strncmp(a, "--", 2) != 0 || !a[2]) {
            fprintf(stderr, "elastic-agent serve: '%s': serve takes no command (runs come from "
                            "'elastic-agent submit'; see serve --help)\n", a);
            return -EINVAL;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        if ((len == 4 && strncmp(name, "pool", 4) == 0) ||
            (len == 4 && strncmp(name, "http", 4) == 0)) {
            v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
            if (!v) {
                fprintf(stderr, "elastic-agent serve: --%.*s needs a value\n", (int)len, name);
                return -EINVAL;
            }
            *(name[0] == 'p' ? &pool : &http) = v;
            continue;
        }
        if ((len == 15 && strncmp(name, "allowed-signers", 15) == 0) ||
            (len == 14 && strncmp(name, "allow-unsigned", 14) == 0)) {
            bool file = len == 15;
            v = eq ? eq + 1 : file && i + 1 < argc ? argv[++i] : NULL;
            if (file ? !v || !v[0] : eq != NULL) {
                fprintf(stderr, "elastic-agent serve: --%.*s %s\n", (int)len, name,
                        file ? "needs a value" : "takes no value");
                return -EINVAL;
            }
            if (file)
                d->signers_path = v;
            else
                d->allow_unsigned = true;
            continue;
        }
        bool value = false;
        int k = cfg_option_find(name, len, &value);
        unsigned cmds = 0;
        const char *flag = k >= 0 ? cfg_option_flag((size_t)k, &cmds) : NULL;
        const char *why = runspec_serve_refusal(flag, cmds);
        if (why) {
            fprintf(stderr, "elastic-agent serve: '--%.*s': %s\n", (int)len, name, why);
            return -EINVAL;
        }
        d->node_args[d->n_node++] = argv[i];
        if (value && !eq) {
            if (i + 1 >= argc) {
                fprintf(stderr, "elastic-agent serve: --%s needs a value\n", flag);
                return -EINVAL;
            }
            d->node_args[d->n_node++] = argv[++i];
        }
    }
    /* the node's options as the agent reads them: store, node id, lease, logging, --http */
    size_t n = 0;
    d->cfg_argv = calloc(d->n_node + 8, sizeof(char *));
    if (!d->cfg_argv)
        return -ENOMEM;
    d->cfg_argv[n++] = (char *)"elastic-agent";
    for (size_t i = 0; i < d->n_node; i++)
        d->cfg_argv[n++] = d->node_args[i];
    if (http) {
        d->cfg_argv[n++] = (char *)"--http";
        d->cfg_argv[n++] = (char *)http;
    }
    d->cfg_argv[n++] = (char *)"--";
    d->cfg_argv[n++] = (char *)"true";
    struct ea_error err = {0};
    if (cfg_parse((int)n, d->cfg_argv, envp, &d->cfg, &err) < 0) {
        fprintf(stderr, "elastic-agent serve: %s\n", err.msg);
        return -EINVAL;
    }
    if (strcmp(d->cfg.backend, "memory") == 0) {
        fprintf(stderr, "elastic-agent serve: the memory backend lives inside one process: a "
                        "pool needs a shared store (--rdzv-endpoint, or file)\n");
        return -EINVAL;
    }
    daemon_hand_password(&d->cfg, d->node_args, &d->n_node, d->pwfd_arg);
    bool given = false; /* every run's agent takes the daemon's node id */
    for (size_t i = 0; i < d->n_node; i++)
        given |= strncmp(d->node_args[i], "--node-id", 9) == 0 ||
                 strncmp(d->node_args[i], "--node_id", 9) == 0;
    if (!given) {
        d->node_args[d->n_node++] = (char *)"--node-id";
        d->node_args[d->n_node++] = (char *)d->cfg.node_id;
    }
    *ret_pool = pool;
    return 0;
}

void serve_print_help(FILE *f)
{
    fputs(serve_help, f);
    daemon_print_options(f, runspec_serve_lists);
    fputs(serve_help_end, f);
}
