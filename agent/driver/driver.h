// SPDX-License-Identifier: Apache-2.0
/*
 * driver: driver mode (--hosts, --hostfile, --host-discovery-script). One process acting for many
 * hosts: it runs one child elastic-agent per host (`--host H --nproc-per-node SLOTS --node-id
 * <from H>`), each a node of the ordinary rendezvous, so rounds, ranks, restarts and exit codes
 * are the agent's. The driver only decides which hosts have a node: it re-runs the discovery
 * script, starts nodes for hosts that appear, stops those of hosts that vanish, and sits out a
 * failing host for a growing, capped cooldown (docs/driver.md). Not for: anything a node does.
 */
#ifndef EA_AGENT_DRIVER_H
#define EA_AGENT_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "ea_error.h"

/* Cooldowns: the first is --host-cooldown, each further consecutive failure doubles it, up to
 * DRIVER_COOLDOWN_CAP_MS (or the first, when that is longer). A host that ran for the cap
 * without failing starts again from the first. */
#define DRIVER_COOLDOWN_CAP_MS (300 * 1000)

/* True when cfg asks for driver mode. */
bool driver_wanted(const struct cfg *cfg);

/* Run driver mode until the run ends; returns the exit code (agent.h). `argc`/`argv` are
 * main()'s (the children's options are taken from them), `envp` the environment. */
int driver_run(const struct cfg *cfg, int argc, char **argv, char **envp);

/* The cooldown after `failures` (>= 1) consecutive failures, first period `base_ms`. Pure. */
int64_t driver_cooldown_ms(int64_t base_ms, int failures);

/* What one child agent is given (driver_child_argv). */
struct driver_child {
    const char *exe;     /* the program (argv[0]), e.g. this binary's path */
    const char *host;    /* --host */
    int slots;           /* --nproc-per-node */
    const char *node_id; /* --node-id */
    int min_nodes, max_nodes;
    const char *password_fd; /* --password-fd N for the child, or NULL */
};

/*
 * The argv of one child agent: argv[0] c->exe (the program run), the user's options from argv[1..]
 * (up to the worker command, which is cfg->command inside argv) without the driver's own ones
 * (--hosts, --hostfile, --host-discovery-script, --discovery-interval, --host-cooldown) and those
 * the driver sets (--nproc-per-node, --node-id, --min, --max, --nnodes, --nic-discovery,
 * --password-file, --password-fd), then c's (the password as --password-fd c->password_fd),
 * "--nic-discovery off" (the nodes' agents all run on the driver's machine: probing from
 * there says nothing about the hosts' interfaces), "--" and the worker command. *ret is one
 * malloc'ed block (free()); the strings point into it, argv or c.
 */
int driver_child_argv(int argc, char **argv, char *const *command, const struct driver_child *c,
                      char ***ret, struct ea_error *err);

/* Whether the user fixed the node bounds (--min/--max/--nnodes on the command line before the
 * worker command, or ELASTIC_MIN/ELASTIC_MAX/ELASTIC_NNODES/PET_NNODES in envp). */
bool driver_bounds_given(int argc, char **argv, char *const *command, char **envp);

#endif
