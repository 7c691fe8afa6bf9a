// SPDX-License-Identifier: Apache-2.0
/* agent_signal: the termination signals the agent takes through its signal fd (the first starts
 * a graceful leave, a second kills the workers). Used by the loop and the preflight gate. */
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "agent_internal.h"
#include "log.h"

void agent_on_signal(struct agent *a)
{
    struct signalfd_siginfo si;
    while (read(a->quit.sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        int sig = (int)si.ssi_signo;
        if (a->quit.term_signal) {
            log_warn("second signal %d: killing workers now", sig);
            group_kill(&a->group);
            continue;
        }
        a->quit.term_signal = sig;
        if ((pid_t)si.ssi_pid == a->quit.parent && getppid() != a->quit.parent) {
            /* our death signal: the process that started us died (a driver killed with SIGKILL;
             * the kernel sends it in the dying parent's name). Nobody waits for a graceful stop
             * any more, so the workers end now; the node still leaves the run cleanly. (A
             * SIGTERM from anyone else, e.g. after a shell that started us exited, stays
             * graceful.) */
            log_warn("received SIG%s and the process that started this agent is gone: killing "
                     "workers now and leaving the run",
                     sigabbrev_np(sig));
            group_kill(&a->group);
            continue;
        }
        log_info("received SIG%s: stopping workers and leaving the run", sigabbrev_np(sig));
    }
}
