// SPDX-License-Identifier: Apache-2.0
/*
 * daemon internals shared by serve.c, submit.c and pool_status.c (daemon_common.c): a daemon's
 * record in its pool, the environment of a run's agent, and opening the store from a
 * subcommand's store options. Not a public interface.
 */
#ifndef EA_AGENT_DAEMON_DAEMON_INTERNAL_H
#define EA_AGENT_DAEMON_DAEMON_INTERNAL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

#include "config.h"
#include "kv.h"
#include "runspec.h"

/* A daemon's record in its pool: {"schema","node","host","pid","run","since_ms","signer",
 * "fingerprint","allow_unsigned"} (run "" = idle; signer/fingerprint: who signed the run it runs,
 * as it verified them, "" when unsigned). */
struct daemon_record {
    char node[128], host[256], run[128];
    long long pid;
    int64_t since_ms;
    char signer[256], fingerprint[64];
    bool allow_unsigned; /* it runs unsigned specs (serve --allow-unsigned) */
};
/* Encode `d`: malloc'ed JSON, NULL on OOM. */
char *daemon_record_encode(const struct daemon_record *d);
/* -EBADMSG when the value is not a daemon record of ours. */
int daemon_record_decode(const char *json, size_t len, struct daemon_record *ret);

/* The environment of a run's agent: `envp` without the variables that would set the run's
 * options or the daemon's own (ELASTIC_<run option>, ELASTIC_RUN_ID, ELASTIC_HTTP, PET_NNODES,
 * ...) and without the store password's (its agent gets it by --password-fd). The spec's --env
 * entries are NOT in it: they are the workers' only (daemon_worker_env_fd). A malloc'ed
 * NULL-terminated array of borrowed strings (free the array only). 0 or -ENOMEM. */
int daemon_child_env(char **envp, char ***ret);
/* The store password of the daemon's options `c` for its runs' agents: the password options
 * (--password-file, --password-fd and their values) leave args[0..*n), and with --user
 * "--password-fd" `fd_arg` is appended (room for 2 more entries needed). Each run's agent gets
 * its own cfg_password_socket(), whose number the caller writes into fd_arg before it parses
 * or spawns. Never the environment (the agent's would be every worker's), never a memfd (its
 * /proc/<pid>/fd link can be opened while the new agent is still dumpable). */
void daemon_hand_password(const struct cfg *c, char **args, size_t *n, char *fd_arg);
/* A memfd holding the spec's --env entries, NUL-separated, for the run's agent's
 * --worker-env-fd: NOT close-on-exec (the run's agent inherits it; close it once that one is
 * started). 0 and *ret_fd, or -errno. */
int daemon_worker_env_fd(const struct runspec *s, int *ret_fd, struct ea_error *err);

/*
 * A subcommand's command line split into its own flags and the store options: `own` lists the
 * subcommand's flags (without "--"; a trailing '=' marks one taking a value), each found is
 * handed to `on_own` (value NULL for a plain flag). Store options (the `status` ones) are parsed
 * into *ret_cfg like `status` parses them; anything else is returned in *ret_rest (malloc'ed
 * array of borrowed strings, NULL-terminated) for the caller to judge. -EINVAL after printing
 * the reason prefixed with "elastic-agent <cmd>: ".
 */
typedef int (*daemon_own_fn)(void *ctx, const char *flag, const char *value);
int daemon_split_args(const char *cmd, int argc, char **argv, char **envp,
                      const char *const *own, daemon_own_fn on_own, void *ctx,
                      struct cfg *ret_cfg, char ***ret_rest, size_t *ret_n);

/* The pool a command serves when --pool is not given: ELASTIC_POOL from `envp`, else "default". */
const char *daemon_default_pool(char **envp);
/* Variable `name` of `envp` when set and not empty, else NULL. */
const char *daemon_env(char **envp, const char *name);
/* A yes/no variable (1/0, true/false, yes/no, on/off; unset or empty: *ret untouched): 0, or
 * -EINVAL after printing "elastic-agent <cmd>: NAME=...: not yes or no". */
int daemon_env_bool(const char *cmd, char **envp, const char *name, bool *ret);

/* Whether option `flag` (in commands `cmds`) is a store option: one `status` takes to find the
 * store (endpoints, prefix, TLS, credentials), not its --json/--watch/--help. */
bool daemon_is_store_option(const char *flag, unsigned cmds);
/* Print the --help line of every option of the table for which keep() is true. */
void daemon_print_options(FILE *out, bool (*keep)(const char *flag, unsigned cmds));

/* Open the store `c` names: 0, or an exit code after printing why. */
int daemon_open_store(const char *cmd, const struct cfg *c, struct kv **ret);

#endif
