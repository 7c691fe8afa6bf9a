// SPDX-License-Identifier: Apache-2.0
/* agent: the event loop, and carrying out the lifecycle's decisions. */
#include "agent.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ea_time.h"
#include "group.h"
#include "kv.h"
#include "launcher.h"
#include "lifecycle.h"
#include "log.h"
#include "preempt.h"
#include "report.h"
#include "session.h"
#include "workdir.h"

struct agent {
    const struct cfg *cfg;
    char **envp;
    struct kv *kv;
    struct rdzv_session *rdzv;
    struct launcher *launcher;
    int sigfd;
    struct preempt preempt;
    struct group group;
    enum lc_group state;
    char workdir[PATH_MAX];
    char prefix[512];
    char addr[64];
    char host[256];

    int term_signal;  /* first SIGTERM/SIGINT/...; 0 while running */
    bool lease_lost;  /* fenced out: stop workers, then rejoin */
    bool reform_pending; /* rejoined: ask for a new round of reform_generation */
    int64_t reform_generation;
    bool exiting;
    int exit_code;

    bool failure_pending; /* a local failure still to be written to the store */
    struct rdzv_failure failure;
    int64_t failure_generation;

    int64_t waiting_since_ms; /* not in a running round since (for --join-timeout), -1 */
    int64_t store_down_since_ms;
    int64_t retry_at_ms;
    int64_t progress_at_ms;
    size_t progress_count;
    int64_t last_generation_logged;
};

static void exit_with(struct agent *a, int code);

/* ---- store trouble ---------------------------------------------------------------------- */

/* A store operation failed: log it once per outage, retry with backoff, give up (exit 3) after
 * --join-timeout. A corrupt or foreign value is not retried: exit 4. */
static void store_problem(struct agent *a, int code, const struct ea_error *err)
{
    int64_t now = ea_now_ms();
    if (code == KV_EAUTH) {
        log_error("the store refused our credentials: %s", err->msg);
        exit_with(a, AGENT_EXIT_USAGE);
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
    a->retry_at_ms = now + 200;
}

static void store_ok(struct agent *a)
{
    if (a->store_down_since_ms >= 0)
        log_info("store reachable again");
    a->store_down_since_ms = -1;
}

/* ---- actions -------------------------------------------------------------------------- */

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
    int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
                    getsockname(fd, (struct sockaddr *)&sa, &len) < 0
                ? -errno
                : ntohs(sa.sin_port);
    close(fd);
    return r;
}

static void publish_master(struct agent *a, const struct rdzv_state *s)
{
    int port = free_port(a->addr);
    if (port < 0) {
        log_error("cannot find a free port for MASTER_PORT on '%s': %s", a->addr,
                  strerror(-port));
        a->retry_at_ms = ea_now_ms() + 500;
        return;
    }
    char ap[128];
    snprintf(ap, sizeof(ap), "%s:%d", a->addr, port);
    struct ea_error err = {0};
    int r = rdzv_publish_master(a->rdzv, s->round, ap, &err);
    if (r < 0)
        store_problem(a, r, &err);
}

/* A local worker failed (or could not start): record it and move the run on. */
static void report_failure(struct agent *a)
{
    struct ea_error err = {0};
    int r = rdzv_report_failure(a->rdzv, a->failure_generation, &a->failure, &err);
    if (r < 0) {
        store_problem(a, r, &err);
        return;
    }
    store_ok(a);
    a->failure_pending = false;
}

static void fill_failure(struct agent *a, const struct group_worker *w, const char *message)
{
    struct rdzv_failure *f = &a->failure;
    memset(f, 0, sizeof(*f));
    snprintf(f->node_id, sizeof(f->node_id), "%s", a->cfg->node_id);
    snprintf(f->host, sizeof(f->host), "%s", a->host);
    f->rank = w->rank;
    f->local_rank = w->local_rank;
    f->exit_code = w->term_signal ? -1 : w->exit_code;
    f->signal = w->term_signal;
    f->pid = w->pid;
    f->time_ms = ea_wall_ms();
    if (message)
        snprintf(f->message, sizeof(f->message), "%s", message);
    else if (report_read_error_file(w->error_file, f->message, sizeof(f->message)) < 0)
        report_default_message(w->exit_code, w->term_signal, (long)w->pid, f->message,
                               sizeof(f->message));
    a->failure_generation = a->group.generation;
    a->failure_pending = true;
}

static void start_workers(struct agent *a, const struct rdzv_state *s, int64_t gen)
{
    const char *master = rdzv_master(a->rdzv, s->round);
    const char *colon = strrchr(master, ':');
    char maddr[128] = "";
    int mport = colon ? atoi(colon + 1) : 0;
    if (colon && (size_t)(colon - master) < sizeof(maddr))
        memcpy(maddr, master, (size_t)(colon - master));
    if (!maddr[0] || mport <= 0 || mport > 65535) {
        log_error("round %" PRId64 ": master '%s' is not ADDR:PORT; waiting for the next round",
                  s->round, master);
        a->state = LC_FAILED;
        a->group.generation = gen;
        return;
    }
    int me = rdzv_my_index(a->rdzv);
    struct group_start gs = {.state = s, .my_index = me, .generation = gen,
                             .master_addr = maddr, .master_port = mport, .envp = a->envp};
    struct ea_error err = {0};
    int failed_rank = -1;
    int r = group_start(&a->group, &gs, &failed_rank, &err);
    a->group.generation = gen;
    const struct rdzv_member *m = &s->members[me];
    if (r < 0) {
        log_error("round %" PRId64 ": cannot start local rank %d: %s", s->round, failed_rank,
                  err.msg);
        a->state = LC_FAILED;
        if (failed_rank >= 0) {
            struct group_worker w = {.local_rank = failed_rank,
                                     .rank = m->rank_base + failed_rank,
                                     .exit_code = r == -ENOENT ? 127 : 126};
            fill_failure(a, &w, err.msg);
            report_failure(a);
        }
        return;
    }
    a->state = LC_RUNNING;
    log_info("round %" PRId64 " (generation %" PRId64 "): started %d worker(s), ranks %d-%d of "
             "world %d, group rank %d of %zu, master %s; restarts %d/%d, scale events %d",
             s->round, gen, m->nproc, m->rank_base, m->rank_base + m->nproc - 1, s->world_size,
             m->group_rank, s->n_members, master, s->restart_count, s->max_restarts,
             s->scale_events);
}

static void exit_with(struct agent *a, int code)
{
    a->exiting = true;
    a->exit_code = code;
}

static void act(struct agent *a, enum lc_action action, const struct rdzv_state *s, int64_t gen)
{
    switch (action) {
    case LC_NOTHING:
        return;
    case LC_STOP_WORKERS:
        log_info("stopping %d worker(s) of round %" PRId64 "%s", a->group.live, a->group.round,
                 a->term_signal    ? " (interrupted)"
                 : a->lease_lost   ? " (lease lost: fenced out)"
                 : !s              ? ""
                 : s->round != a->group.round ? " (the run moved to a new round)"
                                              : "");
        group_stop(&a->group);
        a->state = LC_STOPPING;
        return;
    case LC_PUBLISH_MASTER:
        publish_master(a, s);
        return;
    case LC_START_WORKERS:
        start_workers(a, s, gen);
        return;
    case LC_EXIT_SUCCESS:
        if (a->group.generation == 0)
            log_info("run '%s' already finished (succeeded in round %" PRId64 "); nothing to "
                     "do — use a new --run-id for a new run",
                     a->cfg->run_id, s->round);
        else
            log_info("run '%s' succeeded (round %" PRId64 ", %d restart(s))", a->cfg->run_id,
                     s->round, s->restart_count);
        exit_with(a, AGENT_EXIT_OK);
        return;
    case LC_EXIT_FAILED: {
        struct rdzv_failure f;
        struct ea_error err = {0};
        log_error("run '%s' failed: worker failures exceeded --max-restarts %d", a->cfg->run_id,
                  s->max_restarts);
        if (rdzv_get_failure(a->rdzv, s->failure_round, &f, &err) == 0) {
            const char *entry = a->cfg->command[0];
            const char *slash = strrchr(entry, '/');
            report_print_failure(stderr, slash ? slash + 1 : entry, &f);
        } else {
            log_error("no failure record for round %" PRId64 ": %s", s->failure_round, err.msg);
        }
        exit_with(a, AGENT_EXIT_FAILED);
        return;
    }
    case LC_EXIT_CLOSED:
        log_error("run '%s' was closed", a->cfg->run_id);
        exit_with(a, AGENT_EXIT_RDZV);
        return;
    case LC_EXIT_INTERRUPTED:
        log_info("interrupted by signal %d (SIG%s): workers stopped, leaving", a->term_signal,
                 sigabbrev_np(a->term_signal));
        exit_with(a, 128 + a->term_signal);
        return;
    }
}

/* Ask the lifecycle what to do next, and do it, until it says nothing. */
static void reconcile(struct agent *a)
{
    for (int guard = 0; guard < 8 && !a->exiting; guard++) {
        int64_t gen = 0;
        const struct rdzv_state *s = rdzv_current(a->rdzv, &gen);
        struct lc_input in = {
            .group = a->state,
            .group_generation = a->group.generation,
            .live_workers = a->group.live,
            .terminating = a->term_signal != 0 || a->lease_lost,
            .have_state = s != NULL,
            .status = s ? s->status : RDZV_WAITING,
            .generation = gen,
            .my_index = rdzv_my_index(a->rdzv),
            .master_known = s && rdzv_master(a->rdzv, s->round) != NULL,
        };
        if (a->lease_lost && in.live_workers == 0 && !a->term_signal)
            return; /* the loop rejoins first (unless we are leaving anyway) */
        enum lc_action action = lc_decide(&in);
        if (action == LC_NOTHING)
            return;
        log_debug("lifecycle: %s", lc_action_name(action));
        act(a, action, s, gen);
        if (action == LC_PUBLISH_MASTER && a->retry_at_ms >= 0)
            return;
    }
}

/* ---- events ---------------------------------------------------------------------------- */

static void on_worker_exits(struct agent *a)
{
    struct launch_exit *ex = NULL;
    size_t n = 0;
    struct ea_error err = {0};
    if (launcher_dispatch(a->launcher, &ex, &n, &err) < 0) {
        log_error("launcher: %s", err.msg);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        struct group_worker *w = group_on_exit(&a->group, &ex[i]);
        if (!w)
            continue;
        bool ok = w->exit_code == 0 && w->term_signal == 0;
        if (a->state == LC_RUNNING && !ok) {
            fill_failure(a, w, NULL);
            log_error("worker rank %d (local rank %d, pid %ld) failed: %s", w->rank, w->local_rank,
                      (long)w->pid, a->failure.message);
            a->state = LC_FAILED;
            report_failure(a);
        } else if (a->state == LC_RUNNING || a->state == LC_STOPPING) {
            log_debug("worker rank %d (pid %ld) exited: code %d signal %d", w->rank, (long)w->pid,
                      w->exit_code, w->term_signal);
        }
    }
    free(ex);
    if (a->state == LC_RUNNING && group_all_succeeded(&a->group)) {
        log_info("round %" PRId64 ": all %d local worker(s) finished; waiting for the other nodes",
                 a->group.round, a->group.n);
        a->state = LC_FINISHED;
        int r = rdzv_report_done(a->rdzv, a->group.round, &err);
        if (r < 0)
            store_problem(a, r, &err);
    }
    if (a->state == LC_STOPPING && a->group.live == 0)
        a->state = LC_IDLE;
}

static void on_signal(struct agent *a)
{
    struct signalfd_siginfo si;
    while (read(a->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        int sig = (int)si.ssi_signo;
        if (a->term_signal) {
            log_warn("second signal %d: killing workers now", sig);
            group_kill(&a->group);
            continue;
        }
        a->term_signal = sig;
        log_info("received SIG%s: stopping workers and leaving the run", sigabbrev_np(sig));
    }
}

static void on_preemption(struct agent *a)
{
    if (a->term_signal)
        return;
    log_info("preemption notice '%s': stopping workers and leaving the run", a->preempt.path);
    a->term_signal = SIGTERM; /* the same graceful leave, and exit 143 */
}

static void on_store_events(struct agent *a)
{
    struct ea_error err = {0};
    int r = rdzv_on_events(a->rdzv, &err);
    if (r < 0)
        store_problem(a, r, &err);
    int64_t gen = 0;
    const struct rdzv_state *s = rdzv_current(a->rdzv, &gen);
    log_debug("store: %zu live node(s); state %s, round %" PRId64 ", generation %" PRId64,
              rdzv_live_count(a->rdzv), s ? rdzv_status_name(s->status) : "(none)",
              s ? s->round : 0, gen);
    char warning[EA_ERROR_MSG_MAX];
    if (rdzv_take_warning(a->rdzv, warning, sizeof(warning)))
        log_warn("%s", warning);
}

/* Progress while not running, and --join-timeout. */
static void check_waiting(struct agent *a, int64_t now)
{
    int64_t gen = 0;
    const struct rdzv_state *s = rdzv_current(a->rdzv, &gen);
    bool run_going = s && s->status == RDZV_RUNNING;
    if (run_going || (s && s->status != RDZV_WAITING)) {
        if (run_going && rdzv_my_index(a->rdzv) < 0 && a->progress_count != (size_t)-1) {
            log_info("spare: run '%s' is at its maximum of %d node(s); waiting for a slot",
                     a->cfg->run_id, s->max_nodes);
            a->progress_count = (size_t)-1;
        }
        if (run_going && gen != a->last_generation_logged && rdzv_my_index(a->rdzv) >= 0)
            a->progress_count = 0;
        a->waiting_since_ms = -1;
        return;
    }
    if (a->waiting_since_ms < 0)
        a->waiting_since_ms = now;
    size_t live = rdzv_live_count(a->rdzv);
    if (live != a->progress_count || now >= a->progress_at_ms) {
        int64_t left = a->waiting_since_ms + a->cfg->join_timeout_ms - now;
        log_info("waiting for nodes: %zu/%d (min %d, max %d), giving up in %.0f s", live,
                 a->cfg->min_nodes, a->cfg->min_nodes, a->cfg->max_nodes,
                 (double)(left > 0 ? left : 0) / 1000.0);
        a->progress_count = live;
        a->progress_at_ms = now + 5000;
    }
    if (now - a->waiting_since_ms >= a->cfg->join_timeout_ms) {
        log_error("rendezvous timed out: %zu of at least %d node(s) present after %.1f s "
                  "(--join-timeout)",
                  live, a->cfg->min_nodes, (double)a->cfg->join_timeout_ms / 1000.0);
        exit_with(a, AGENT_EXIT_RDZV);
    }
}

static int64_t earliest(int64_t a, int64_t b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

static int64_t next_wake(const struct agent *a)
{
    int64_t t = rdzv_wake_ms(a->rdzv);
    t = earliest(t, a->retry_at_ms);
    if (a->waiting_since_ms >= 0) {
        t = earliest(t, a->progress_at_ms);
        t = earliest(t, a->waiting_since_ms + a->cfg->join_timeout_ms);
    }
    return t;
}

/* Coordinator duties, lease renewal, rejoining and retries. */
static void housekeeping(struct agent *a, int64_t now)
{
    struct ea_error err = {0};
    bool answered = false; /* a store request succeeded in this pass */
    int r = rdzv_keepalive(a->rdzv, now, &err);
    answered = r > 0;
    if (r == KV_ENOLEASE) {
        log_error("lease lost (%s): this node may have been fenced out; stopping workers and "
                  "rejoining",
                  err.msg[0] ? err.msg : "expired");
        a->lease_lost = true;
    } else if (r < 0) {
        store_problem(a, r, &err);
    }
    if (a->lease_lost && a->group.live == 0 && !a->term_signal) {
        ea_error_clear(&err);
        if ((r = rdzv_join(a->rdzv, &err)) < 0) {
            store_problem(a, r, &err);
            return;
        }
        log_info("rejoined run '%s'", a->cfg->run_id);
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
        report_failure(a);
    if (a->reform_pending) {
        ea_error_clear(&err);
        if ((r = rdzv_reform(a->rdzv, a->reform_generation, &err)) < 0)
            store_problem(a, r, &err);
        else
            a->reform_pending = false;
    }
    ea_error_clear(&err);
    r = rdzv_tick(a->rdzv, now, &err);
    if (r < 0)
        store_problem(a, r, &err);
    else if ((answered || r > 0) && !a->failure_pending)
        store_ok(a);
}

static void loop(struct agent *a)
{
    struct pollfd fds[4] = {
        {.fd = a->sigfd, .events = POLLIN},
        {.fd = kv_event_fd(a->kv), .events = POLLIN},
        {.fd = launcher_fd(a->launcher), .events = POLLIN},
        {.fd = a->preempt.fd, .events = POLLIN}, /* -1 (ignored) without --preemption-file */
    };
    while (!a->exiting) {
        int64_t now = ea_now_ms();
        housekeeping(a, now);
        if (a->exiting)
            break;
        reconcile(a);
        if (a->exiting)
            break;
        check_waiting(a, now);
        if (a->exiting)
            break;
        int timeout = ea_timeout_until(next_wake(a));
        int n = poll(fds, 4, timeout);
        if (n < 0 && errno != EINTR) {
            log_error("poll: %s", strerror(errno));
            exit_with(a, AGENT_EXIT_RDZV);
            break;
        }
        if (n <= 0)
            continue;
        if (fds[0].revents & POLLIN)
            on_signal(a);
        if ((fds[3].revents & POLLIN) && preempt_check(&a->preempt))
            on_preemption(a);
        if (fds[2].revents & POLLIN)
            on_worker_exits(a);
        if (fds[1].revents & POLLIN)
            on_store_events(a);
    }
}

/* ---- set-up and tear-down ----------------------------------------------------------------- */

/* The address other nodes' workers use to reach this one. */
static void choose_addr(struct agent *a)
{
    const struct cfg *c = a->cfg;
    if (c->local_addr) {
        snprintf(a->addr, sizeof(a->addr), "%s", c->local_addr);
        return;
    }
    snprintf(a->addr, sizeof(a->addr), "127.0.0.1");
    if (strcmp(c->backend, "memory") == 0 || strcmp(c->backend, "file") == 0)
        return; /* every node is on this host */
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) < 0)
        return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
            !(i->ifa_flags & IFF_LOOPBACK)) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, a->addr,
                      sizeof(a->addr));
            break;
        }
    freeifaddrs(ifs);
}

static int setup_signals(struct agent *a)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGQUIT);
    /* blocked before any thread exists, so backend threads never take these */
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -errno;
    signal(SIGPIPE, SIG_IGN);
    a->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    return a->sigfd < 0 ? -errno : 0;
}

/* Wait up to `ms` for a signal (used between join retries). */
static void wait_or_signal(struct agent *a, int64_t ms)
{
    struct pollfd p = {.fd = a->sigfd, .events = POLLIN};
    if (poll(&p, 1, (int)ms) > 0)
        on_signal(a);
}

static int join(struct agent *a)
{
    int64_t start = ea_now_ms(), delay = 100;
    for (;;) {
        struct ea_error err = {0};
        int r = rdzv_join(a->rdzv, &err);
        if (r == 0)
            return 0;
        if (r == -EBADMSG || r == KV_ECORRUPT || r == KV_EINVAL || r == KV_EAUTH) {
            log_error("cannot join run '%s': %s", a->cfg->run_id, err.msg);
            return r == KV_EINVAL || r == KV_EAUTH ? AGENT_EXIT_USAGE : AGENT_EXIT_RDZV;
        }
        if (ea_now_ms() - start >= a->cfg->join_timeout_ms) {
            log_error("store unreachable for %.1f s (--join-timeout): %s",
                      (double)(ea_now_ms() - start) / 1000.0, err.msg);
            return AGENT_EXIT_STORE;
        }
        int64_t left = start + a->cfg->join_timeout_ms - ea_now_ms();
        int64_t wait = delay < left ? delay : left; /* never past --join-timeout */
        log_warn("cannot reach the store yet: %s; retrying in %.1f s", err.msg,
                 (double)wait / 1000.0);
        wait_or_signal(a, wait);
        if (a->term_signal)
            return 128 + a->term_signal;
        delay = delay * 2 > 5000 ? 5000 : delay * 2;
    }
}

/* Stop whatever still runs (an exit while workers were alive), bounded by the stop timeout. */
static void drain_workers(struct agent *a)
{
    if (a->group.live == 0)
        return;
    group_stop(&a->group);
    a->state = LC_STOPPING;
    int64_t deadline = ea_now_ms() + a->cfg->stop_timeout_ms + 2000;
    struct pollfd p = {.fd = launcher_fd(a->launcher), .events = POLLIN};
    while (a->group.live > 0 && ea_now_ms() < deadline)
        if (poll(&p, 1, ea_timeout_until(deadline)) > 0)
            on_worker_exits(a);
}

static int open_all(struct agent *a)
{
    const struct cfg *c = a->cfg;
    struct ea_error err = {0};
    /* A request slower than a third of the lease TTL is as good as lost: the lease must be
     * renewed (or given up on) in time, and the loop never waits on the store longer. */
    int64_t timeout = c->lease_ttl_ms / 3;
    timeout = timeout < 300 ? 300 : timeout > 5000 ? 5000 : timeout;
    struct kv_config kc = {.backend = c->backend, .endpoints = c->endpoints,
                           .state_dir = c->state_dir, .cacert = c->cacert, .cert = c->cert,
                           .key = c->key, .user = c->user, .password = c->password,
                           .request_timeout_ms = (int)timeout};
    int r = kv_open(&kc, &a->kv, &err);
    if (r < 0) {
        log_error("cannot open the %s store: %s", c->backend, err.msg);
        return r == KV_EINVAL ? AGENT_EXIT_USAGE : AGENT_EXIT_STORE;
    }
    snprintf(a->prefix, sizeof(a->prefix), "%s%s/", c->prefix, c->run_id);
    struct rdzv_config rc = {
        .prefix = a->prefix,
        .params = {.min_nodes = c->min_nodes, .max_nodes = c->max_nodes,
                   .settle_ms = c->settle_ms, .last_call_ms = c->last_call_ms,
                   .max_restarts = c->max_restarts,
                   .rank_by_host = strcmp(c->rank_order, "host") == 0},
        .lease_ttl_ms = c->lease_ttl_ms,
    };
    if (rdzv_strlcpy(rc.self.node_id, sizeof(rc.self.node_id), c->node_id) < 0 ||
        rdzv_strlcpy(rc.self.host, sizeof(rc.self.host), a->host) < 0 ||
        rdzv_strlcpy(rc.self.addr, sizeof(rc.self.addr), a->addr) < 0) {
        log_error("node id, host name or address too long");
        return AGENT_EXIT_USAGE;
    }
    rc.self.nproc = c->nproc_per_node;
    rc.self.pid = getpid();
    if (rdzv_session_create(a->kv, &rc, &a->rdzv, &err) < 0) {
        log_error("%s", err.msg);
        return AGENT_EXIT_USAGE;
    }
    struct launcher_config lc = {.name = "local"};
    if (launcher_create(&lc, &a->launcher, &err) < 0) {
        log_error("cannot create the launcher: %s", err.msg);
        return AGENT_EXIT_RDZV;
    }
    a->group.launcher = a->launcher;
    a->group.cfg = c;
    a->group.workdir = a->workdir;
    return 0;
}

static void teardown(struct agent *a)
{
    if (a->launcher)
        drain_workers(a);
    if (a->rdzv && a->exit_code != AGENT_EXIT_STORE) { /* no store: nothing to leave */
        struct ea_error err = {0};
        if (rdzv_leave(a->rdzv, &err) < 0)
            log_warn("leaving the run: %s", err.msg);
    }
    group_clear(&a->group);
    launcher_destroy(a->launcher);
    rdzv_session_destroy(a->rdzv);
    kv_close(a->kv);
    if (a->workdir[0])
        workdir_remove(a->workdir);
    if (a->sigfd >= 0)
        close(a->sigfd);
    preempt_close(&a->preempt);
}

int agent_run(const struct cfg *cfg, char **envp)
{
    struct agent a = {.cfg = cfg, .envp = envp, .sigfd = -1, .preempt = {.fd = -1},
                      .waiting_since_ms = -1,
                      .store_down_since_ms = -1, .retry_at_ms = -1, .progress_at_ms = 0,
                      .last_generation_logged = -1};
    log_init(cfg->log_level, cfg->node_id);
    if (setup_signals(&a) < 0) {
        log_error("cannot set up signal handling: %s", strerror(errno));
        return AGENT_EXIT_RDZV;
    }
    gethostname(a.host, sizeof(a.host) - 1);
    choose_addr(&a);
    if (workdir_create(cfg->run_id, cfg->node_id, a.workdir, sizeof(a.workdir)) < 0) {
        log_error("cannot create a private directory under $TMPDIR or /tmp: %s",
                  strerror(errno));
        return AGENT_EXIT_RDZV;
    }
    struct ea_error perr = {0};
    int code = open_all(&a);
    if (code == 0 && preempt_open(&a.preempt, cfg->preemption_file, &perr) < 0) {
        log_error("%s", perr.msg);
        code = AGENT_EXIT_USAGE;
    }
    if (code == 0 && preempt_check(&a.preempt)) {
        log_info("preemption notice '%s' already present: not joining", a.preempt.path);
        code = 128 + SIGTERM;
    }
    if (code == 0)
        code = join(&a);
    if (code == 0) {
        log_info("joined run '%s' (%s backend) as node '%s' with %d worker slot(s); "
                 "min %d, max %d",
                 cfg->run_id, cfg->backend, cfg->node_id, cfg->nproc_per_node, cfg->min_nodes,
                 cfg->max_nodes);
        loop(&a);
        code = a.exit_code;
    }
    a.exit_code = code;
    teardown(&a);
    return code;
}
