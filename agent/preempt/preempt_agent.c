// SPDX-License-Identifier: Apache-2.0
/* The preemption-notice component (preempt.h): a notice is the same graceful leave as SIGTERM. */
#include <signal.h>

#include "agent_internal.h"
#include "log.h"

static size_t fd_preempt(void *c, struct pollfd *fds, size_t max)
{
    (void)max;
    const struct agent *a = c;
    if (!agent_in_run(c))
        return 0;
    fds[0] = (struct pollfd){.fd = a->quit.preempt.fd, .events = POLLIN}; /* -1 without the flag */
    return 1;
}

static void on_preempt(void *c, const struct pollfd *fds, size_t n, int64_t now)
{
    (void)now;
    struct agent *a = c;
    if (!n || !(fds[0].revents & POLLIN) || !preempt_check(&a->quit.preempt) || a->quit.term_signal)
        return;
    log_info("preemption notice '%s': stopping workers and leaving the run", a->quit.preempt.path);
    a->quit.term_signal = SIGTERM; /* the same graceful leave, and exit 143 */
}

static const struct ea_loop_source preempt_sources[] = {
    {"preempt", 1, fd_preempt, on_preempt, false},
};

const struct agent_component agent_preempt_component = {
    .name = "preempt",
    .sources = preempt_sources,
    .n_sources = sizeof(preempt_sources) / sizeof(preempt_sources[0]),
};
