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

/* Run the agent with a parsed configuration until the run ends; returns the exit code.
 * `envp` is the environment workers inherit. */
int agent_run(const struct cfg *cfg, char **envp);

struct ea_clock;
struct ea_loop_step;
struct launcher;

/* For tests that decide the agent's behaviour without real time or processes (flux-core's
 * testexec habit): the loop's clock, the launcher by name ("fake": launcher/fake.h), and one more
 * step the test registers in the agent's loop, first of all (a script: when a worker exits, when
 * a signal comes), which sees the launcher through *ret_launcher once it exists. Any member may be
 * NULL (the default). */
struct agent_hooks {
    const struct ea_clock *clock;
    const char *launcher;
    const struct ea_loop_step *step;
    void *step_ctx;
    struct launcher **ret_launcher;
};
int agent_run_hooked(const struct cfg *cfg, char **envp, const struct agent_hooks *hooks);

#endif
