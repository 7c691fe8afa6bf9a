// SPDX-License-Identifier: Apache-2.0
/* The NIC discovery component (nic.h): it probes as soon as a round with this node is committed,
 * and gates the start of that round's workers until it knows the common interfaces. */
#include <inttypes.h>
#include <jansson.h>

#include "agent.h"
#include "agent_internal.h"
#include "ea_time.h"
#include "log.h"

/* NIC discovery must finish before a round's master is chosen or its workers start. No common
 * interface fails the round: a rendezvous failure, exit 4. */
static bool nic_round_ready(struct agent *a, const struct rdzv_state *s, int64_t gen)
{
    (void)gen;
    struct ea_error err = {0};
    int r = nic_step(a->nic, a->node.rdzv, s, rdzv_my_index(a->node.rdzv), ea_now_ms(), &err);
    if (r == NIC_DONE) {
        log_info("round %" PRId64 ": NIC discovery: common interface(s) %s, master address %s "
                 "(%" PRId64 " ms)",
                 s->round, nic_ifaces(a->nic),
                 nic_master_addr(a->nic) ? nic_master_addr(a->nic) : "?", nic_last_ms(a->nic));
        agent_emit(a, "nic_discovered", "{s:s, s:I}", "ifaces", nic_ifaces(a->nic), "ms",
                   (json_int_t)nic_last_ms(a->nic));
    } else if (r == NIC_FAILED) {
        /* close the run, so that members that have not got this far stop too (exit 4) */
        int64_t now_gen = 0;
        rdzv_current(a->node.rdzv, &now_gen);
        log_error("round %" PRId64 ": %s; closing the run", s->round, err.msg);
        agent_emit(a, "nic_failed", "{s:s}", "message", err.msg);
        struct ea_error cerr = {0};
        if (rdzv_close(a->node.rdzv, now_gen, &cerr) < 0)
            log_warn("could not close the run: %s", cerr.msg);
        a->quit.exiting = true;
        a->quit.exit_code = AGENT_EXIT_RDZV;
    } else if (r < 0) {
        agent_store_problem(a, r, &err);
    }
    return r == NIC_READY || r == NIC_DONE;
}

static void nic_starting(struct agent *a, const struct rdzv_state *s, struct group_start *gs)
{
    (void)s;
    gs->ifaces = nic_ifaces(a->nic);
}

static int64_t nic_wake(void *c)
{
    return agent_in_run(c) ? nic_wake_ms(((const struct agent *)c)->nic) : -1;
}

static size_t fds_nic(void *c, struct pollfd *fds, size_t max)
{
    const struct agent *a = c;
    return agent_in_run(c) ? nic_pollfds(a->nic, fds, max) : 0; /* listener, probes */
}

static void on_nic(void *c, const struct pollfd *fds, size_t n, int64_t now)
{
    (void)now;
    nic_on_poll(((struct agent *)c)->nic, fds, n);
}

static const struct agent_step nic_steps[] = {
    {AGENT_AT_END, {"nic", NULL, nic_wake, false}},
};

static const struct ea_loop_source nic_sources[] = {
    {"nic", NIC_POLL_MAX, fds_nic, on_nic, false},
};

const struct agent_component agent_nic_component = {
    .name = "nic",
    AGENT_STEPS(nic_steps),
    AGENT_SOURCES(nic_sources),
    .round_ready = nic_round_ready,
    .starting = nic_starting,
};
