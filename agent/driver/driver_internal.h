// SPDX-License-Identifier: Apache-2.0
/*
 * driver internals, shared by driver.c (hosts, their child agents, the loop) and driver_inputs.c
 * (what tells the driver about hosts: the discovery script and the store's failures/ records).
 * Not for other modules: driver.h is the driver's interface.
 */
#ifndef EA_AGENT_DRIVER_INTERNAL_H
#define EA_AGENT_DRIVER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "ea_loop.h"
#include "hostsource.h"
#include "kv.h"

#define KILL_GRACE_MS 5000 /* after --stop-timeout, a child agent still alive is SIGKILLed */
#define DISC_TIMEOUT_MIN_MS 2000
#define DISC_TIMEOUT_MAX_MS 60000

enum dh_state { DH_IDLE, DH_RUNNING, DH_STOPPING, DH_COOLDOWN };

struct dhost {
    char name[HOSTS_NAME_MAX + 1];
    char node_id[96];
    int slots;
    bool listed; /* in the current host list */
    bool was_listed;
    enum dh_state st;
    pid_t pid;    /* its child agent while RUNNING/STOPPING */
    bool blame;   /* being stopped because its workers failed: cool down after the exit */
    int failures; /* consecutive */
    int64_t started_at, retry_at, kill_at;
};

struct driver {
    const struct ea_clock *clock; /* the loop's: every deadline below is on its scale */
    const struct cfg *cfg;
    int argc;
    char **argv;
    char exe[4096];   /* this binary, for the children */
    char **child_env; /* envp without the driver-mode variables */
    bool bounds_given;
    int min_nodes, max_nodes;
    struct dhost *h;
    size_t n, cap;
    int sigfd, chldfd;
    /* discovery script */
    pid_t disc_pid;
    int disc_fd;
    char *disc_buf;
    size_t disc_len;
    bool disc_overflow, disc_killed, have_list;
    int64_t disc_deadline, disc_next, disc_timeout_ms;
    /* failures/ watch */
    struct kv *kv;
    int64_t watch_id;
    char fprefix[600];
    /* ending */
    int term_signal;
    int outcome; /* -1 until the run ended (a node exited 0 or 1, or the last one 3 or 4) */
    int64_t outcome_at, idle_since;
    bool done;
    int exit_code;
};

/* The loop's time (monotonic ms). */
static inline int64_t driver_now(const struct driver *d)
{
    return d->clock->now_ms(d->clock->ctx);
}

/* driver.c */
/* Register the driver's steps and sources (a const table) with loop `l` on d->clock: 0, -ENOMEM;
 * the loop's done() for it (the run is over and every node's agent has exited). */
int driver_loop_add(struct ea_loop *l, struct driver *d);
bool driver_done(void *ctx);
/* Make `l` the current host list: start nothing (the loop does), stop the nodes of hosts no
 * longer listed or whose slot count changed. 0 or -ENOMEM. */
int driver_apply_list(struct driver *d, const struct host_list *l);
/* Send `sig` to a running host's node (SIGKILL also to a stopping one); logs `why` if not NULL. */
void driver_stop_host(struct driver *d, struct dhost *h, int sig, const char *why);

/* driver_inputs.c */
/* Run the discovery script (its stdout into d->disc_buf, a deadline of d->disc_timeout_ms). */
void driver_disc_start(struct driver *d);
/* Read what the script printed so far (non-blocking). */
void driver_disc_read(struct driver *d);
/* The script exited with wait status `status`: judge its output, apply or keep the list. */
void driver_disc_finish(struct driver *d, int status);
/* Open the store and watch failures/ (a warning and no watch when that fails). */
void driver_watch_open(struct driver *d);
/* Store events: blame the host whose node a failures/ record names. */
void driver_on_store(struct driver *d);

#endif
