// SPDX-License-Identifier: Apache-2.0
/*
 * wenv: the environment of one worker (DESIGN.md §5): torchrun's variables with their exact names
 * and values, plus ELASTIC_*; and the per-round topology file (ranks, hosts, ring and tree links).
 * Pure apart from writing the topology file.
 */
#ifndef EA_AGENT_WORKERENV_H
#define EA_AGENT_WORKERENV_H

#include <stdint.h>

#include "ea_error.h"
#include "state.h"

struct wenv_params {
    const struct rdzv_state *state; /* the committed round */
    int my_index;                   /* this node's index in state->members */
    int local_rank;
    const char *master_addr;
    int master_port;
    int64_t generation;
    const char *run_id;
    const char *error_file;    /* TORCHELASTIC_ERROR_FILE for this rank */
    const char *topology_file; /* ELASTIC_TOPOLOGY_FILE */
    char *const *base_env;     /* the agent's environment, inherited by workers */
};

/* Build a NULL-terminated, malloc'ed environment (free with wenv_free). 0 or -ENOMEM. */
int wenv_build(const struct wenv_params *p, char ***ret_envp);
void wenv_free(char **envp);

/* Value of NAME in a NULL-terminated environment, or NULL. */
const char *wenv_get(char *const *envp, const char *name);

/* Write the round's topology JSON to `path` atomically (temp + rename). */
int wenv_write_topology(const struct rdzv_state *s, const char *path, struct ea_error *err);

#endif
