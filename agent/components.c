// SPDX-License-Identifier: Apache-2.0
/* The agent's components (component.h), in the order their hooks, steps and sources run. A new
 * feature is a folder of its own under agent/ and one line here (docs/architecture.md). */
#include "component.h"

extern const struct agent_component agent_tracker_component; /* tracker/tracker_agent.c */
extern const struct agent_component agent_nic_component;     /* nic/nic_agent.c */
extern const struct agent_component agent_warm_component;    /* warm/warm_agent.c */
extern const struct agent_component agent_health_component;  /* health/health_agent.c */
extern const struct agent_component agent_preflight_component; /* health/preflight_agent.c */
extern const struct agent_component agent_preempt_component; /* preempt/preempt_agent.c */
extern const struct agent_component agent_progress_component; /* progress/progress_agent.c */
extern const struct agent_component agent_checkpoint_component; /* checkpoint/checkpoint_agent.c */

const struct agent_component *const agent_components[] = {
    &agent_tracker_component, /* its connections first: a worker waits on them */
    &agent_nic_component,
    &agent_warm_component, /* its exits, faults and phase before health's */
    &agent_health_component,
    &agent_preflight_component,
    &agent_preempt_component,
    &agent_progress_component, /* after health's: it reads the heartbeat directory health set */
    &agent_checkpoint_component,
};
const size_t agent_n_components = sizeof(agent_components) / sizeof(agent_components[0]);
