// SPDX-License-Identifier: Apache-2.0
/* agent_store: what the loop writes to the store for its round (the master and the built-in
 * tracker's address, failure and done reports) and what it does when the store is in trouble
 * (backoff, --join-timeout, a corrupt value). Called by the loop; calls nothing of it back. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"
#include "agent_internal.h"
#include "ea_time.h"
#include "log.h"
#include "roster.h"

/* A store operation failed: log it once per outage, retry with backoff, give up (exit 3) after
 * --join-timeout. A corrupt or foreign value is not retried: exit 4. */
void agent_store_problem(struct agent *a, int code, const struct ea_error *err)
{
    int64_t now = ea_now_ms();
    if (code == KV_EAUTH) {
        log_error("the store refused our credentials: %s", err->msg);
        a->exiting = true;
        a->exit_code = AGENT_EXIT_USAGE;
        return;
    }
    if (code == -EBADMSG || code == KV_ECORRUPT) {
        log_error("refusing to use the store: %s (use another --run-id or remove the key)",
                  err->msg);
        a->exiting = true;
        a->exit_code = AGENT_EXIT_RDZV;
        return;
    }
    if (a->store_down_since_ms < 0) {
        a->store_down_since_ms = now;
        log_warn("store request failed: %s; retrying", err->msg[0] ? err->msg : kv_strerror(code));
    } else if (now - a->store_down_since_ms > a->cfg->join_timeout_ms) {
        log_error("store unreachable for %.1f s (--join-timeout): %s",
                  (double)(now - a->store_down_since_ms) / 1000.0, err->msg);
        a->exiting = true;
        a->exit_code = AGENT_EXIT_STORE;
        return;
    }
    /* back off, doubling to 5 s, with jitter: when the store is overloaded, a thousand agents
     * retrying in lockstep would keep it so */
    int64_t wait;
    a->retry_delay_ms = ea_retry_next(a->retry_delay_ms, AGENT_RETRY_BASE_MS, AGENT_RETRY_CAP_MS,
                                      ea_retry_seed(now), &wait);
    a->retry_at_ms = now + wait;
}

void agent_store_ok(struct agent *a)
{
    if (a->store_down_since_ms >= 0)
        log_info("store reachable again");
    a->store_down_since_ms = -1;
    a->retry_delay_ms = 0;
}

void agent_store_step(struct agent *a, int64_t now)
{
    struct ea_error err = {0};
    bool answered = false; /* a store request succeeded in this pass */
    int r = rdzv_keepalive(a->rdzv, now, &err);
    answered = r > 0;
    if (r < 0)
        a->m.lease_renew_failures++;
    if (r == KV_ENOLEASE) {
        log_error("lease lost (%s): this node may have been fenced out; stopping workers and "
                  "rejoining",
                  err.msg[0] ? err.msg : "expired");
        a->lease_lost = true;
        agent_emit(a, "lease_lost", "{s:s, s:i}", "reason",
                   err.msg[0] ? err.msg : "expired", "workers_running", a->group.live);
    } else if (r < 0) {
        agent_store_problem(a, r, &err);
    }
    if (a->lease_lost && a->group.live == 0 && !a->term_signal &&
        (a->retry_at_ms < 0 || now >= a->retry_at_ms) && agent_liveness_may_rejoin(a, now)) {
        ea_error_clear(&err);
        if ((r = rdzv_join(a->rdzv, &err)) < 0) {
            agent_store_problem(a, r, &err);
            return;
        }
        log_info("rejoined run '%s'", a->cfg->run_id);
        a->m.rejoins++;
        agent_emit(a, "rejoined", NULL);
        a->lease_lost = false;
        a->state = LC_IDLE;
        /* our workers of that generation are gone: the run must form a new round */
        a->reform_generation = a->group.generation;
        a->reform_pending = a->group.generation != 0;
    }
    if (a->retry_at_ms >= 0 && now < a->retry_at_ms)
        return;
    a->retry_at_ms = -1;
    if (a->failure_pending)
        agent_report_failure(a);
    if (a->done_pending)
        agent_report_done(a);
    if (a->reform_pending) {
        ea_error_clear(&err);
        if ((r = rdzv_reform(a->rdzv, a->reform_generation, &err)) < 0)
            agent_store_problem(a, r, &err);
        else
            a->reform_pending = false;
    }
    ea_error_clear(&err);
    r = rdzv_tick(a->rdzv, now, &err);
    char warning[EA_ERROR_MSG_MAX]; /* e.g. a round's master refused: logged once, at once */
    if (rdzv_take_warning(a->rdzv, warning, sizeof(warning)))
        log_warn("%s", warning);
    if (r < 0)
        agent_store_problem(a, r, &err);
    else if ((answered || r > 0) && !a->failure_pending && !a->done_pending)
        agent_store_ok(a);
}

/* Choose a free port on this node for the round's MASTER_PORT. */
static int free_port(const char *addr)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof(sa);
    int b = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    if (b < 0 && errno == EADDRNOTAVAIL) {
        /* not an address of this machine: the workers run on another host (--host, over ssh);
         * a port free here is a guess there, as good as any without asking that host */
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
        b = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    }
    int r = b < 0 || getsockname(fd, (struct sockaddr *)&sa, &len) < 0 ? -errno
                                                                       : ntohs(sa.sin_port);
    close(fd);
    return r;
}

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
        all_here &= strcmp(ro[i].host, a->host) == 0;
        for (size_t k = 0; k < ro[i].n_addrs; k++)
            hosts[n_hosts++] = (struct tracker_host){.addr = ro[i].addrs[k],
                                                     .workers = ro[i].nproc};
    }
    struct tracker_params p = {.addr = addr, .world_size = s->world_size, .round = s->round,
                               .avoid_port = a->tracker_last_port, .hosts = hosts,
                               .n_hosts = n_hosts, .loopback = all_here};
    int r = tracker_create(&p, &a->tracker, err);
    free(hosts);
    return r;
}

/* Serve this round's rabit tracker on `addr` (a fresh port) and publish it as rounds/<r>/tracker
 * before the master, so that workers start only when both are known. */
static int publish_tracker(struct agent *a, const struct rdzv_state *s, const char *addr)
{
    struct ea_error err = {0};
    if (a->tracker && tracker_round(a->tracker) != s->round) {
        tracker_destroy(a->tracker);
        a->tracker = NULL;
    }
    if (!a->tracker) {
        struct rdzv_roster_node *ro = NULL;
        size_t n = 0;
        int r = rdzv_round_roster(a->rdzv, &ro, &n, &err);
        if (r == -EAGAIN) { /* the round is moving on: its commit is on its way */
            a->retry_at_ms = ea_now_ms() + 200;
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
            a->retry_at_ms = ea_now_ms() + 500;
            return r;
        }
        a->tracker_last_port = tracker_port(a->tracker);
        log_info("round %" PRId64 ": serving the rabit tracker for %d worker(s) on %s port %d",
                 s->round, s->world_size, tracker_addr(a->tracker), tracker_port(a->tracker));
    }
    const char *ta = tracker_addr(a->tracker);
    char ap[128];
    snprintf(ap, sizeof(ap), strchr(ta, ':') ? "[%s]:%d" : "%s:%d", ta, tracker_port(a->tracker));
    int r = rdzv_publish_round_key(a->rdzv, s->round, "tracker", ap, &err);
    if (r < 0)
        agent_store_problem(a, r, &err);
    return r;
}

/* The round moved on (or this node no longer hosts it): its tracker's workers are gone. */
void agent_retire_tracker(struct agent *a)
{
    int64_t gen = 0;
    const struct rdzv_state *s = rdzv_current(a->rdzv, &gen);
    if (!a->tracker || (s && s->status == RDZV_RUNNING && s->round == tracker_round(a->tracker) &&
                        rdzv_my_index(a->rdzv) == 0 && !a->exiting))
        return;
    log_debug("round %" PRId64 ": rabit tracker closed", tracker_round(a->tracker));
    tracker_destroy(a->tracker);
    a->tracker = NULL;
}

void agent_publish_master(struct agent *a, const struct rdzv_state *s)
{
    const char *addr = nic_master_addr(a->nic); /* on a common interface, when discovery ran */
    if (!addr)
        addr = a->addr;
    if (agent_builtin_tracker(a) && publish_tracker(a, s, addr) < 0)
        return;
    int port = free_port(addr);
    if (port < 0) {
        log_error("cannot find a free port for MASTER_PORT on '%s': %s", addr, strerror(-port));
        a->retry_at_ms = ea_now_ms() + 500;
        return;
    }
    char ap[128];
    snprintf(ap, sizeof(ap), "%s:%d", addr, port);
    struct ea_error err = {0};
    int r = rdzv_publish_master(a->rdzv, s->round, ap, &err);
    if (r < 0)
        agent_store_problem(a, r, &err);
}

/* A local worker failed (or could not start): record it and move the run on. */
void agent_report_failure(struct agent *a)
{
    struct ea_error err = {0};
    int r = rdzv_report_failure(a->rdzv, a->failure_generation, &a->failure, &err);
    if (r < 0) {
        agent_store_problem(a, r, &err);
        return;
    }
    agent_store_ok(a);
    a->failure_pending = false;
}

/* All local workers of the round succeeded: say so (retried until the store takes it, or the
 * run has moved on to another round). */
void agent_report_done(struct agent *a)
{
    if (a->state != LC_FINISHED) {
        a->done_pending = false;
        return;
    }
    struct ea_error err = {0};
    int r = rdzv_report_done(a->rdzv, a->group.round, &err);
    if (r < 0) {
        agent_store_problem(a, r, &err);
        return;
    }
    agent_store_ok(a);
    a->done_pending = false;
}
