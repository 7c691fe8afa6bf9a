// SPDX-License-Identifier: Apache-2.0
/*
 * runspec: a submitted run as data (docs/daemon.md): its options as an argv (JSON array), the
 * worker command's argv and the extra worker environment (JSON arrays), under the schema
 * "elastic-agent/pool-v1". The codec validates everything it reads (a foreign or corrupt value is
 * an error naming what is wrong); validation runs the agent's own cfg_parse on the spec combined
 * with a node's options, so a spec is refused with the messages --help's options give. No I/O.
 */
#ifndef EA_AGENT_DAEMON_RUNSPEC_H
#define EA_AGENT_DAEMON_RUNSPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "ea_error.h"

#define RUNSPEC_SCHEMA "elastic-agent/pool-v1"
/* Largest spec value accepted (argv, command and env together). */
#define RUNSPEC_BYTES_MAX (256u << 10)
#define RUNSPEC_ITEMS_MAX 4096
/* Largest "signature" (an armoured SSHSIG) a spec may carry. */
#define RUNSPEC_SIGNATURE_MAX 4096

struct runspec {
    char run_id[128];
    char **args;    /* the run's options (e.g. "--min", "2"), NULL-terminated, n_args of them */
    size_t n_args;
    char **command; /* the worker command, NULL-terminated, at least one */
    size_t n_command;
    char **env;     /* NAME=VALUE for the workers, NULL-terminated */
    size_t n_env;
    int min_nodes, max_nodes; /* resolved from args at submit (for the pool's decisions) */
    int64_t submitted_ms;     /* wall clock */
    /* what a signature binds besides the run (docs/daemon.md, "Signed submissions") */
    char pool[128];           /* the pool it was submitted to ("" in a spec without one) */
    char prefix[512];         /* ... under this --prefix ("" in a spec without one) */
    int64_t expires_ms;       /* wall clock; 0 in a spec without one */
    char *signature;          /* armoured SSHSIG over runspec_canonical(), malloc'ed, or NULL */
    int64_t queue_rev;        /* mod_revision of the queue entry it was read from (0: none) */
};

/* Encode to malloc'ed JSON in *ret_json (keys sorted, no white space; the signature, when set,
 * as the "signature" field). 0 or -ENOMEM. */
int runspec_encode(const struct runspec *s, char **ret_json, struct ea_error *err);
/* The bytes a signature covers: runspec_encode() of `s` without its signature (so every field:
 * schema, run, pool, args, command, env, min, max, submitted_ms, expires_ms). Malloc'ed,
 * NUL-terminated; *ret_len without the NUL. 0 or -ENOMEM. */
int runspec_canonical(const struct runspec *s, char **ret, size_t *ret_len, struct ea_error *err);
/* Decode and check the shape (schema, run id, arrays of strings, a command, NAME=VALUE env);
 * -EBADMSG with a message naming what is wrong. *ret untouched on failure. */
int runspec_decode(const char *json, size_t len, struct runspec *ret, struct ea_error *err);
/* Free the arrays; NULL-safe; leaves a zeroed spec. */
void runspec_clear(struct runspec *s);

/* Whether `flag` (without "--") is a run option (one a spec may carry). */
bool runspec_is_run_option(const char *flag);
/* Whether run option `flag` may also be given to `serve` as the node's default, which a spec's
 * value overrides (--nproc-per-node, --stop-timeout). */
bool runspec_is_node_default(const char *flag);
/* Why `serve` refuses option `flag` (an option of commands `cmds`, a CFG_* mask; NULL flag: no
 * such option): a run's own option, a driver-mode one, ..., or NULL when serve takes it. */
const char *runspec_serve_refusal(const char *flag, unsigned cmds);
/* The node options serve --help lists (those it takes, but --http, --help and --version). */
bool runspec_serve_lists(const char *flag, unsigned cmds);

/* Check that args holds only run options (each with its value): -EINVAL naming the first
 * per-node, store or secret option, or one that is not an option at all. */
int runspec_check_args(char *const *args, size_t n, struct ea_error *err);
/* Check the env entries: NAME=VALUE with a shell-style name, not an ELASTIC_/PET_ variable (the
 * agent would read those as options), nor one that changes how a process loads or connects
 * (LD_*, GCONV_PATH, MALLOC_*, GRPC_*, SSL_CERT_*, OPENSSL_*, TMPDIR, XDG_RUNTIME_DIR, ...: the
 * list is in runspec.c). -EINVAL naming the entry. */
int runspec_check_env(char *const *env, size_t n, struct ea_error *err);

/*
 * The agent's argv for running `s` on a node: [prog, node_args..., s->args..., "--run-id", id,
 * "--", command...], NULL-terminated, malloc'ed (the strings are borrowed from the inputs; free
 * the array only). 0 or -ENOMEM.
 */
int runspec_argv(const struct runspec *s, const char *prog, char *const *node_args, size_t n_node,
                 char ***ret_argv, size_t *ret_argc);

/*
 * Validate `s` as a node with `node_args` and environment `envp` would run it: the checks above,
 * then cfg_parse on runspec_argv(); fills *ret_cfg when non-NULL (its strings point into `s`,
 * `node_args` and the argv, which is returned in *ret_argv when non-NULL, else freed).
 * When s->max_nodes is set (a spec read from the store), the parsed --min/--max must equal the
 * spec's min/max. -EINVAL with cfg_parse's message (the one --help's options give) on a bad
 * spec.
 */
int runspec_validate(const struct runspec *s, char *const *node_args, size_t n_node, char **envp,
                     struct cfg *ret_cfg, char ***ret_argv, struct ea_error *err);

#endif
