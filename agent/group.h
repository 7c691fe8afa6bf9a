// SPDX-License-Identifier: Apache-2.0
/*
 * group: this node's worker group for one round: start the nproc workers of a committed round
 * with their environment, log files and error files; stop them; account for their exits. Talks to
 * the launcher only; the rendezvous side (reporting failures, done) stays in agent.c.
 */
#ifndef EA_AGENT_GROUP_H
#define EA_AGENT_GROUP_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "launcher.h"
#include "state.h"
#include "warm.h"

struct group_worker {
    struct launch_proc *proc;
    int local_rank, rank;
    pid_t pid;
    bool alive;
    int exit_code, term_signal;
    char error_file[PATH_MAX];
    const char *stderr_tail; /* once exited: the last bytes of its stderr (GROUP_STDERR_TAIL), or
                                NULL; owned by the launcher until the next start or clear */
};

/* How much of each worker's stderr is kept for the failure report. */
#define GROUP_STDERR_TAIL 2048

struct group {
    struct launcher *launcher; /* borrowed */
    const struct cfg *cfg;     /* borrowed */
    const char *workdir;       /* agent-private directory for error and topology files */
    struct group_worker *w;
    int n;    /* workers of the current/last start */
    int live; /* still running */
    int warm; /* of those, how many were warm spares (--warm-workers) or in-place workers */
    int inplace; /* of those, how many are the same process re-assigned in place (--in-place) */
    int64_t generation, round;
};

/* Where a round's files go, everything after `workdir`. */
struct group_start {
    const struct rdzv_state *state; /* members loaded only with the full view */
    const struct rdzv_member *self; /* this node's assignment */
    bool topology;                  /* write ELASTIC_TOPOLOGY_FILE (needs the members) */
    int64_t generation;
    const char *master_addr;
    int master_port;
    char **envp; /* agent environment the workers inherit */
    const char *ifaces; /* NIC discovery's common interfaces ("eth0,eth1"), or NULL */
    const char *dmlc_tracker; /* the round's built-in rabit tracker "ADDR:PORT", or NULL */
    const char *heartbeat_dir; /* hang detection: workers beat <dir>/rank_<rank>; or NULL */
    struct warm *warm;         /* take the parked spares (their assignment instead of a start),
                                  local ranks without one start cold; NULL: all start cold */
};

/*
 * Start every local worker of the round. On failure to start local rank i (e.g. the program does
 * not exist), the workers already started keep running, *ret_failed_rank = i, and the error names
 * the program: the caller reports it like a worker failure.
 */
int group_start(struct group *g, const struct group_start *s, int *ret_failed_rank,
                struct ea_error *err);

/* Forget local rank i's live worker without stopping it (--in-place: warm holds it now). */
void group_detach(struct group *g, int i);

/* Begin stopping every live worker (SIGTERM now, SIGKILL after the stop timeout). */
void group_stop(struct group *g);

/* Escalate: SIGKILL every live worker's process group now. */
void group_kill(struct group *g);

/* A worker started cold has its pid once the launcher confirmed its start: take the ones known
 * now (called after each dispatch). */
void group_sync_pids(struct group *g);

/* Record an exit; returns the worker, or NULL when the process is not one of ours. */
struct group_worker *group_on_exit(struct group *g, const struct launch_exit *e);

/* True when every worker of the last start exited 0. */
bool group_all_succeeded(const struct group *g);

/* Release finished processes and free. */
void group_clear(struct group *g);

/* Is local rank `r` on the console under --local-ranks-filter `filter` (NULL: every rank)? */
bool group_rank_shown(const char *filter, int r);

#endif
