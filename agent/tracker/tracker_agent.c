// SPDX-License-Identifier: Apache-2.0
/* The rabit tracker component (tracker.h): with --env-style dmlc and no --dmlc-tracker, group
 * rank 0 serves the round's tracker, published before the master (agent_publish_master), so that
 * workers start only when both are known; it is closed once the round moves on. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_internal.h"
#include "ea_time.h"
#include "log.h"
#include "roster.h"

/* --env-style with dmlc and no --dmlc-tracker: group rank 0 serves the rabit tracker. */
bool agent_builtin_tracker(const struct agent *a)
{
    return a->cfg->env_style && strstr(a->cfg->env_style, "dmlc") && !a->cfg->dmlc_tracker;
}

/* Create this round's tracker, admitting the addresses of its members' node records (`ro`, n
 * of them), and loopback when every member runs on this host. */
static int create_tracker(struct agent *a, const struct rdzv_state *s, const char *addr,
                          const struct rdzv_roster_node *ro, size_t n, struct ea_error *err)
{
    struct tracker_host *hosts = calloc(n * RDZV_ROSTER_ADDRS + 1, sizeof(*hosts));
    if (!hosts)
        return ea_errorf(err, -ENOMEM, "out of memory");
    size_t n_hosts = 0;
    bool all_here = true;
    for (size_t i = 0; i < n; i++) {
        all_here &= strcmp(ro[i].host, a->me.host) == 0;
        for (size_t k = 0; k < ro[i].n_addrs; k++)
            hosts[n_hosts++] = (struct tracker_host){.addr = ro[i].addrs[k],
                                                     .workers = ro[i].nproc};
    }
    struct tracker_params p = {.addr = addr, .world_size = s->world_size, .round = s->round,
                               .avoid_port = a->tracker.last_port, .hosts = hosts,
                               .n_hosts = n_hosts, .loopback = all_here};
    int r = tracker_create(&p, &a->tracker.srv, err);
    free(hosts);
    return r;
}

/* Serve this round's rabit tracker on `addr` (a fresh port) and publish it as rounds/<r>/tracker
 * before the master, so that workers start only when both are known. */
int agent_publish_tracker(struct agent *a, const struct rdzv_state *s, const char *addr)
{
    struct ea_error err = {0};
    if (a->tracker.srv && tracker_round(a->tracker.srv) != s->round) {
        tracker_destroy(a->tracker.srv);
        a->tracker.srv = NULL;
    }
    if (!a->tracker.srv) {
        struct rdzv_roster_node *ro = NULL;
        size_t n = 0;
        int r = rdzv_round_roster(a->node.rdzv, &ro, &n, &err);
        if (r == -EAGAIN) { /* the round is moving on: its commit is on its way */
            a->node.retry_at_ms = ea_now_ms() + 200;
            return r;
        }
        if (r < 0) {
            agent_store_problem(a, r, &err);
            return r;
        }
        r = create_tracker(a, s, addr, ro, n, &err);
        free(ro);
        if (r < 0) {
            log_error("round %" PRId64 ": cannot serve the rabit tracker: %s", s->round, err.msg);
            a->node.retry_at_ms = ea_now_ms() + 500;
            return r;
        }
        a->tracker.last_port = tracker_port(a->tracker.srv);
        log_info("round %" PRId64 ": serving the rabit tracker for %d worker(s) on %s port %d",
                 s->round, s->world_size, tracker_addr(a->tracker.srv), tracker_port(a->tracker.srv));
    }
    const char *ta = tracker_addr(a->tracker.srv);
    char ap[128];
    snprintf(ap, sizeof(ap), strchr(ta, ':') ? "[%s]:%d" : "%s:%d", ta, tracker_port(a->tracker.srv));
    int r = rdzv_publish_round_key(a->node.rdzv, s->round, "tracker", ap, &err);
    if (r < 0)
        agent_store_problem(a, r, &err);
    return r;
}

/* The round moved on (or this node no longer hosts it): its tracker's workers are gone. */
void agent_retire_tracker(struct agent *a)
{
    int64_t gen = 0;
    const struct rdzv_state *s = rdzv_current(a->node.rdzv, &gen);
    if (!a->tracker.srv || (s && s->status == RDZV_RUNNING && s->round == tracker_round(a->tracker.srv) &&
                        rdzv_my_index(a->node.rdzv) == 0 && !a->quit.exiting))
        return;
    log_debug("round %" PRId64 ": rabit tracker closed", tracker_round(a->tracker.srv));
    tracker_destroy(a->tracker.srv);
    a->tracker.srv = NULL;
}


/* ---- the component ----------------------------------------------------------------------- */

static void retire(void *c, int64_t now)
{
    (void)now;
    if (agent_in_run(c))
        agent_retire_tracker(c);
}

static int64_t tracker_wake(void *c)
{
    const struct agent *a = c;
    return agent_in_run(c) && a->tracker.srv ? tracker_wake_ms(a->tracker.srv) : -1;
}

static size_t fds_tracker(void *c, struct pollfd *fds, size_t max)
{
    const struct agent *a = c;
    return agent_in_run(c) && a->tracker.srv ? tracker_pollfds(a->tracker.srv, fds, max) : 0;
}

static void on_tracker(void *c, const struct pollfd *fds, size_t n, int64_t now)
{
    struct agent *a = c;
    if (agent_in_run(c) && a->tracker.srv) /* also on a timeout: its deadlines */
        tracker_on_poll(a->tracker.srv, fds, n, now);
}

static void tracker_starting(struct agent *a, const struct rdzv_state *s, struct group_start *gs)
{
    if (agent_builtin_tracker(a))
        gs->dmlc_tracker = rdzv_round_key(a->node.rdzv, s->round, "tracker");
}

static bool tracker_published(const struct agent *a, const struct rdzv_state *s)
{
    return !agent_builtin_tracker(a) || rdzv_round_key(a->node.rdzv, s->round, "tracker");
}

static const struct agent_step tracker_steps[] = {
    {AGENT_AT_END, {"tracker", retire, tracker_wake, false}},
};

static const struct ea_loop_source tracker_sources[] = {
    {"tracker", TRACKER_POLL_MAX, fds_tracker, on_tracker, true},
};

const struct agent_component agent_tracker_component = {
    .name = "tracker",
    AGENT_STEPS(tracker_steps),
    AGENT_SOURCES(tracker_sources),
    .starting = tracker_starting,
    .published = tracker_published,
};
