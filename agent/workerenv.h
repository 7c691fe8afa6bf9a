// SPDX-License-Identifier: Apache-2.0
/*
 * wenv: the environment of one worker (DESIGN.md §5, docs/env.md): torchrun's variables with their
 * exact names and values, plus ELASTIC_*; optional Horovod and DMLC maps (--env-style); the NIC
 * discovery result; and the per-round topology file (hosts, ranks, ring and tree links).
 * Pure apart from writing the topology file.
 */
#ifndef EA_AGENT_WORKERENV_H
#define EA_AGENT_WORKERENV_H

#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"
#include "state.h"

/* --env-style maps (a bit set; 0 means WENV_TORCH). */
enum {
    WENV_TORCH = 1,   /* torchrun: RANK, LOCAL_RANK, WORLD_SIZE, MASTER_*, TORCHELASTIC_* ... */
    WENV_HOROVOD = 2, /* HOROVOD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE, _CROSS_RANK, ... */
    WENV_DMLC = 4,    /* DMLC_TASK_ID, DMLC_NUM_WORKER, DMLC_ROLE, DMLC_TRACKER_* */
};

struct wenv_params {
    const struct rdzv_state *state; /* the committed round */
    const struct rdzv_member *self; /* this node's assignment (state->members may be NULL) */
    int local_rank;
    const char *master_addr;
    int master_port;
    int64_t generation;
    const char *run_id;
    const char *error_file;    /* TORCHELASTIC_ERROR_FILE for this rank */
    const char *topology_file; /* ELASTIC_TOPOLOGY_FILE, or NULL (not written) */
    char *const *base_env;     /* the agent's environment, inherited by workers */
    unsigned styles;           /* WENV_* bits; 0 = WENV_TORCH */
    const char *dmlc_tracker;  /* "HOST:PORT" (validated) for DMLC_TRACKER_URI/PORT, or NULL */
    const char *ifaces;        /* NIC discovery result "eth0,eth1" (ELASTIC_IFACES, and
                                  NCCL_/GLOO_SOCKET_IFNAME unless set), or NULL */
    const char *heartbeat_file; /* ELASTIC_HEARTBEAT_FILE (hang detection on), or NULL */
    const char *checkpoint_socket; /* ELASTIC_AGENT_CHECKPOINT_SOCKET (--checkpoint-memory), or
                                      NULL */
};

/* Parse a --env-style list ("torch,horovod") into WENV_* bits; -EINVAL with a message. */
int wenv_parse_styles(const char *list, unsigned *ret_styles, struct ea_error *err);

/* Build a NULL-terminated, malloc'ed environment (free with wenv_free). 0 or -ENOMEM. */
int wenv_build(const struct wenv_params *p, char ***ret_envp);
void wenv_free(char **envp);

/* A warm spare's environment (--warm-workers, docs/warm.md): no rank yet. */
struct wenv_parked {
    char *const *base_env; /* the agent's environment */
    unsigned styles;       /* WENV_* bits; 0 = WENV_TORCH */
    int nproc;             /* this node's workers (OMP_NUM_THREADS=1 when > 1 and unset) */
    const char *node_id;   /* ELASTIC_NODE_ID */
    const char *checkpoint_socket; /* ELASTIC_AGENT_CHECKPOINT_SOCKET, or NULL */
};

/* The checkpoint socket's path in the agent's workdir (agent/checkpoint/ listens on it). */
#define WENV_CHECKPOINT_SOCKET_FMT "%s/checkpoint/sock"

/* The spare's environment: what wenv_build gives every worker whatever the round (the inherited
 * variables but the names it owns, TORCH_NCCL_ASYNC_ERROR_HANDLING, OMP_NUM_THREADS,
 * ELASTIC_NODE_ID); none of the round's (RANK, WORLD_SIZE, MASTER_*, ELASTIC_GENERATION ...):
 * those come in the assignment; ELASTIC_ASSIGN_FD is added by warm. 0 or -ENOMEM; free with
 * wenv_free. */
int wenv_build_parked(const struct wenv_parked *p, char ***ret_envp);

/* Value of NAME in a NULL-terminated environment, or NULL. */
const char *wenv_get(char *const *envp, const char *name);

/* Write the round's topology JSON to `path` atomically (temp + rename): "hosts" (distinct, in
 * rank order), "nodes" (group-rank order) and "ranks" (every global rank once: host, node,
 * local_rank, group_rank, ring_prev/next, tree_parent/children — rdzv_topo_build's link maps). */
int wenv_write_topology(const struct rdzv_state *s, const char *path, struct ea_error *err);

#endif
