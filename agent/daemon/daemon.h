// SPDX-License-Identifier: Apache-2.0
/*
 * daemon: the pool commands (docs/daemon.md). `serve` is a node daemon that stays up between
 * runs and runs each run it joins as the one-shot agent (`elastic-agent [OPTIONS] -- COMMAND`,
 * a child process with the node's options and the run's spec); `submit` queues a run spec,
 * `cancel` closes a run, `status --pool` lists a pool. Each returns the process exit code
 * (agent.h). argv[0] is the subcommand's name.
 */
#ifndef EA_AGENT_DAEMON_DAEMON_H
#define EA_AGENT_DAEMON_DAEMON_H

#include <stdbool.h>

int serve_main(int argc, char **argv, char **envp);
int submit_main(int argc, char **argv, char **envp);
int cancel_main(int argc, char **argv, char **envp);
/* `status --pool NAME [--json]` (main.c sends `status` here when --pool is given). */
int pool_status_main(int argc, char **argv, char **envp);
/* True when a `status` command line asks for a pool (--pool given). */
bool pool_status_wanted(int argc, char **argv);

#endif
