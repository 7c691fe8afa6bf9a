// SPDX-License-Identifier: Apache-2.0
/*
 * agent: one node's elastic agent (DESIGN.md §4, §7). A single poll() loop over the signal fd,
 * the store's event fd and the launcher's fd; joins the rendezvous, starts this node's workers for
 * every round it is a member of, stops them when the round moves on, reports failures and
 * completion, and exits with DESIGN.md's codes.
 */
#ifndef EA_AGENT_AGENT_H
#define EA_AGENT_AGENT_H

#include "config.h"

/* Exit codes (DESIGN.md §7). */
enum {
    AGENT_EXIT_OK = 0,
    AGENT_EXIT_FAILED = 1,
    AGENT_EXIT_USAGE = 2,
    AGENT_EXIT_STORE = 3,
    AGENT_EXIT_RDZV = 4,
};

/* Run the agent with a parsed configuration until the run ends; returns the exit code.
 * `envp` is the environment workers inherit. */
int agent_run(const struct cfg *cfg, char **envp);

#endif
