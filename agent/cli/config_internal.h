// SPDX-License-Identifier: Apache-2.0
/*
 * cfg internals shared by config.c (the option table and parser), config_resolve.c (the
 * checks across options) and config_help.c
 * (--help, the option accessors): the shape of a table entry. Not a public interface.
 */
#ifndef EA_AGENT_CONFIG_INTERNAL_H
#define EA_AGENT_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

enum opt_type { OPT_INT, OPT_SEC, OPT_STR, OPT_BOOL, OPT_NNODES, OPT_SSHOPT };

struct opt {
    const char *flag;  /* long name without "--" */
    enum opt_type type;
    size_t off;        /* offset in struct cfg */
    const char *def;   /* default as text (NULL = unset) */
    double lo, hi;     /* bounds for INT/SEC */
    const char *pet;   /* torchrun's PET_ variable, or NULL */
    const char *meta;  /* value name in --help */
    const char *help;
    unsigned cmds;     /* the commands (enum cfg_cmd bits) that accept it */
};

/* The one option table (config.c) and its length. */
extern const struct opt cfg_opts[];
extern const size_t cfg_n_opts;

/* What set each option, for conflict checks (config.c records it, config_resolve.c reads it). */
enum cfg_source { SRC_DEFAULT, SRC_PET, SRC_ENV, SRC_CLI };

/* The table's entry for --name (name[0..len), '_' read as '-') that `cmd` accepts, or NULL; its
 * index in cfg_opts (the per-option source array's). */
const struct opt *cfg_find_opt(const char *name, size_t len, enum cfg_cmd cmd);
size_t cfg_opt_index(const struct opt *o);
/* A whole decimal integer (no sign-less garbage, no leading space): 0, or -EINVAL. */
int cfg_parse_int(const char *s, long *ret);
/* The parsed options of `c` checked against each other and completed (config_resolve.c), with
 * srcs[i] saying what set cfg_opts[i]. -EINVAL (or another -errno) in err. */
int cfg_resolve(struct cfg *c, const enum cfg_source *srcs, struct ea_error *err);

/* Whether command `cmd` accepts option `o`. */
bool cfg_opt_in_cmd(const struct opt *o, enum cfg_cmd cmd);
/* ELASTIC_<FLAG> of `o` (upper case, '-' -> '_') into buf. */
void cfg_opt_env_name(const struct opt *o, char *buf, size_t size);

/* The etcd password of `c` (config_secret.c): from --password-fd, --password-file or
 * ELASTIC_ETCD_PASSWORD in envp, only with --user, and refused over a plaintext connection
 * without --insecure-transport. When envp is this process's own environment, the variable is
 * taken out of it (its bytes overwritten in place, then unset), read or not. -EINVAL in err. */
int cfg_read_password(struct cfg *c, char **envp, struct ea_error *err);

/* Backend, endpoints, run id, state dir and prefix of `c` checked and defaulted (config_secret.c):
 * what every command needs to find the run. -EINVAL in err. */
int cfg_resolve_store(struct cfg *c, struct ea_error *err);
/* A run or node id: 1-100 characters of A-Z a-z 0-9 . _ - (not . or ..). */
bool cfg_valid_id(const char *s);

#endif
