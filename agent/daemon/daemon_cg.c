// SPDX-License-Identifier: Apache-2.0
/* daemon_cg: see daemon_cg.h. */
#include "daemon_cg.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ea_time.h"
#include "log.h"
#include "proc.h"
#include "runcg.h"

void daemon_cg_open(struct daemon_cg *cg, const char *node_id)
{
    struct ea_error err = {0};
    *cg = (struct daemon_cg){.parent_fd = -1, .fd = -1};
    snprintf(cg->prefix, sizeof(cg->prefix), "elastic-agent-%s-", node_id);
    if (runcg_self(&cg->parent_fd, &err) < 0) {
        log_info("runs are not put into cgroups of their own (%s): what a run leaves behind is "
                 "killed as it comes to this daemon",
                 err.msg);
        return;
    }
    int n = runcg_reap_stale(cg->parent_fd, "elastic-agent-", ea_now_ms() + DAEMON_CG_END_MS);
    if (n > 0)
        log_warn("killed what %d run(s) of a killed daemon left behind in their cgroups", n);
}

int daemon_cg_run_start(struct daemon_cg *cg)
{
    if (cg->parent_fd < 0)
        return -1;
    struct ea_error err = {0};
    snprintf(cg->name, sizeof(cg->name), "%s%ld-%u", cg->prefix, (long)getpid(), cg->seq++);
    if (runcg_create(cg->parent_fd, cg->name, &cg->fd, &err) < 0) {
        log_info("runs are not put into cgroups of their own (%s): what a run leaves behind is "
                 "killed as it comes to this daemon",
                 err.msg);
        close(cg->parent_fd);
        cg->parent_fd = cg->fd = -1;
    }
    return cg->fd;
}

void daemon_cg_run_end(struct daemon_cg *cg, const char *run)
{
    int64_t deadline = ea_now_ms() + DAEMON_CG_END_MS;
    struct ea_error err = {0};
    if (cg->fd >= 0) {
        close(cg->fd);
        cg->fd = -1;
        if (runcg_kill(cg->parent_fd, cg->name, deadline, &err) < 0)
            log_warn("run '%s': %s", run, err.msg);
    }
    if (proc_kill_strays_until(deadline) < 0)
        log_warn("run '%s': processes it left behind were still being killed after %d ms", run,
                 DAEMON_CG_END_MS);
}

void daemon_cg_close(struct daemon_cg *cg)
{
    if (cg->fd >= 0)
        close(cg->fd);
    if (cg->parent_fd >= 0)
        close(cg->parent_fd);
    cg->fd = cg->parent_fd = -1;
}
