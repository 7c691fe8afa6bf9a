// SPDX-License-Identifier: Apache-2.0
/* The preemption-notice component (preempt.h): a notice is the same graceful leave as SIGTERM. */
#include <signal.h>

#include "agent_internal.h"
#include "log.h"

static void on_notice(struct agent *a)
{
    if (!preempt_check(&a->quit.preempt) || a->quit.term_signal)
        return;
    log_info("preemption notice '%s': stopping workers and leaving the run", a->quit.preempt.path);
    a->quit.term_signal = SIGTERM; /* the same graceful leave, and exit 143 */
}

/* the notice's watch: -1 without --preemption-file */
AGENT_FD_SOURCE(preempt, agent_in_run(a), a->quit.preempt.fd, on_notice(a))

static const struct ea_loop_source preempt_sources[] = {
    {"preempt", 1, fd_preempt, on_preempt, false},
};

const struct agent_component agent_preempt_component = {
    .name = "preempt",
    AGENT_SOURCES(preempt_sources),
};
