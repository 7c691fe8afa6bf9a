// SPDX-License-Identifier: Apache-2.0
/* agent set-up and tear-down: address, signals, store, launcher, endpoints, join, leave. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"
#include "agent_internal.h"
#include "ea_signal.h"
#include "ea_time.h"
#include "hostsel.h"
#include "log.h"
#include "preflight.h"
#include "workdir.h"

/* ---- set-up and tear-down ----------------------------------------------------------------- */

#define WORKER_ENV_MAX (256u << 10) /* a run spec's size limit */

/* Whether environment entry `e` sets the variable that entry `def` ("NAME=...") defines. */
static bool same_name(const char *e, const char *def)
{
    size_t len = strcspn(def, "=");
    return strncmp(e, def, len) == 0 && e[len] == '=';
}

/* --worker-env-fd: the workers' extra variables (a run's --env, handed over by serve), read at
 * once and closed, before anything is started. They go over this agent's environment for the
 * workers only: the agent itself, --preflight and the store connection never see them. */
static int read_worker_env(struct agent *a)
{
    int fd = -1;
    if (!a->cfg->worker_env_fd || cfg_parse_fd("--worker-env-fd", a->cfg->worker_env_fd, &fd,
                                               NULL) < 0)
        return a->cfg->worker_env_fd ? -EBADF : 0;
    char *buf = malloc(WORKER_ENV_MAX + 1);
    size_t n = 0, n_extra = 0, n_base = 0;
    ssize_t r = 1;
    bool seekable = true;
    while (buf && n < WORKER_ENV_MAX && r != 0) {
        r = seekable ? pread(fd, buf + n, WORKER_ENV_MAX - n, (off_t)n)
                     : read(fd, buf + n, WORKER_ENV_MAX - n);
        if (r < 0 && errno == ESPIPE && seekable)
            seekable = false, r = 1;
        else if (r < 0 && errno != EINTR)
            break;
        else if (r > 0)
            n += (size_t)r;
    }
    int e = r < 0 ? errno : n == WORKER_ENV_MAX ? EFBIG : 0;
    close(fd);
    if (!buf || e) {
        free(buf);
        return buf ? -e : -ENOMEM;
    }
    buf[n] = '\0';
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
        const char *eq = strchr(buf + i, '=');
        if (buf[i] && (!eq || eq == buf + i)) {
            free(buf);
            return -EBADMSG;
        }
        n_extra += buf[i] != '\0';
    }
    while (a->env.envp && a->env.envp[n_base])
        n_base++;
    char **v = calloc(n_base + n_extra + 1, sizeof(char *));
    if (!v) {
        free(buf);
        return -ENOMEM;
    }
    size_t k = 0;
    for (size_t b = 0; b < n_base; b++) {
        bool over = false;
        for (size_t i = 0; i < n && !over; i += strlen(buf + i) + 1)
            over = buf[i] && same_name(a->env.envp[b], buf + i);
        if (!over)
            v[k++] = a->env.envp[b];
    }
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
        if (buf[i])
            v[k++] = buf + i;
    a->env.worker_envp = v;
    a->env.worker_env_buf = buf;
    return 0;
}

/* The address other nodes' workers use to reach this one. */
static void choose_addr(struct agent *a)
{
    const struct cfg *c = a->cfg;
    if (c->local_addr) {
        snprintf(a->me.addr, sizeof(a->me.addr), "%s", c->local_addr);
        return;
    }
    snprintf(a->me.addr, sizeof(a->me.addr), "127.0.0.1");
    if (strcmp(c->backend, "memory") == 0 || strcmp(c->backend, "file") == 0)
        return; /* every node is on this host */
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) < 0)
        return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
            !(i->ifa_flags & IFF_LOOPBACK)) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, a->me.addr,
                      sizeof(a->me.addr));
            break;
        }
    freeifaddrs(ifs);
}

static int setup_signals(struct agent *a)
{
    sigset_t set;
    ea_term_sigset(&set);
    /* Blocked before any thread exists, so backend threads (gRPC, curl, HTTP) never take these.
     * SIGCHLD too: the launcher reads it from its own signalfd. */
    sigset_t blocked = set;
    sigaddset(&blocked, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &blocked, NULL) < 0)
        return -errno;
    signal(SIGPIPE, SIG_IGN);
    a->quit.sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    return a->quit.sigfd < 0 ? -errno : 0;
}

/* AP_JOINING: one attempt when its time has come; a failure the store may recover from is
 * retried on the jittered schedule every store request uses, never past --join-timeout. */
void agent_joining_step(struct agent *a, int64_t now)
{
    if (a->quit.term_signal) {
        agent_phase_over(a, 128 + a->quit.term_signal);
        return;
    }
    if (now < a->stage.deadline)
        return;
    struct ea_error err = {0};
    int r = rdzv_join(a->node.rdzv, &err);
    if (r == 0) {
        agent_phase_over(a, 0);
        return;
    }
    if (r == -EBADMSG || r == KV_ECORRUPT || r == KV_EINVAL || r == KV_EAUTH) {
        log_error("cannot join run '%s': %s", a->cfg->run_id, err.msg);
        agent_phase_over(a, r == KV_EINVAL || r == KV_EAUTH ? AGENT_EXIT_USAGE : AGENT_EXIT_RDZV);
        return;
    }
    now = ea_now_ms(); /* after the attempt */
    if (now - a->stage.since >= a->cfg->join_timeout_ms) {
        log_error("store unreachable for %.1f s (--join-timeout): %s",
                  (double)(now - a->stage.since) / 1000.0, err.msg);
        agent_phase_over(a, AGENT_EXIT_STORE);
        return;
    }
    /* the same jittered schedule as every later store request (node/node.c): agents that
     * start together against a down store must not retry in lockstep */
    int64_t wait;
    a->stage.delay = ea_retry_next(a->stage.delay, AGENT_RETRY_BASE_MS, AGENT_RETRY_CAP_MS,
                                   ea_retry_seed(now), &wait);
    int64_t left = a->stage.since + a->cfg->join_timeout_ms - now;
    if (wait > left)
        wait = left; /* never past --join-timeout */
    log_warn("cannot reach the store yet: %s; retrying in %.1f s", err.msg, (double)wait / 1000.0);
    a->stage.deadline = now + wait;
}

/* AP_DRAINING: whatever still runs was stopped on entry; collect the exits until none is left
 * or the stop timeout (and a margin) has passed. */
void agent_draining_step(struct agent *a, int64_t now)
{
    if (a->group.live == 0 || now >= a->stage.deadline)
        agent_phase_over(a, a->quit.exit_code);
}

static int open_all(struct agent *a)
{
    const struct cfg *c = a->cfg;
    struct ea_error err = {0};
    /* A request slower than a third of the lease TTL is as good as lost: the lease must be
     * renewed (or given up on) in time, and the loop never waits on the store longer. */
    int64_t timeout = c->lease_ttl_ms / 3;
    timeout = timeout < 300 ? 300 : timeout > 5000 ? 5000 : timeout;
    struct kv_config kc = cfg_kv_config(c, (int)timeout);
    int r = kv_open(&kc, &a->node.kv, &err);
    if (r < 0) {
        log_error("cannot open the %s store: %s", c->backend, err.msg);
        return r == KV_EINVAL ? AGENT_EXIT_USAGE : AGENT_EXIT_STORE;
    }
    struct kv *timed = NULL; /* /metrics has the store's request latency */
    if (c->http && metrics_kv_wrap(a->node.kv, &a->obs.m.store, &timed, &err) == 0)
        a->node.kv = timed;
    snprintf(a->me.prefix, sizeof(a->me.prefix), "%s%s/", c->prefix, c->run_id);
    struct rdzv_config rc = {
        .prefix = a->me.prefix,
        .params = {.min_nodes = c->min_nodes, .max_nodes = c->max_nodes,
                   .settle_ms = c->settle_ms, .last_call_ms = c->last_call_ms,
                   .max_restarts = c->max_restarts,
                   .rank_by_host = strcmp(c->rank_order, "host") == 0},
        .lease_ttl_ms = c->lease_ttl_ms,
        .full_view = cfg_full_view(c),
    };
    if (rdzv_strlcpy(rc.self.node_id, sizeof(rc.self.node_id), c->node_id) < 0 ||
        rdzv_strlcpy(rc.self.host, sizeof(rc.self.host), a->me.host) < 0 ||
        rdzv_strlcpy(rc.self.addr, sizeof(rc.self.addr), a->me.addr) < 0) {
        log_error("node id, host name or address too long");
        return AGENT_EXIT_USAGE;
    }
    if (c->host && !hostsel_is_local(c->host)) {
        /* workers on another host: the record also lists where this agent (its rabit
         * tracker) is, so that the tracker's address passes the others' check (roundguard.c) */
        char own[RDZV_ADDR_MAX];
        tracker_local_addr(a->me.addr, own, sizeof(own));
        if (strcmp(own, a->me.addr) != 0)
            snprintf(rc.self.agent_addr, sizeof(rc.self.agent_addr), "%s", own);
    }
    rc.self.nproc = c->nproc_per_node;
    rc.self.pid = getpid();
    if (c->failure_domain) /* validated by cfg: a label that fits */
        snprintf(rc.self.domain, sizeof(rc.self.domain), "%s", c->failure_domain);
    if ((r = nic_create(c->nic_discovery, c->iface, &a->nic, &err)) < 0) {
        log_error("%s", err.msg);
        return r == -ENODEV ? AGENT_EXIT_USAGE : AGENT_EXIT_RDZV;
    }
    if (nic_warning(a->nic))
        log_warn("%s", nic_warning(a->nic));
    nic_fill_self(a->nic, &rc.self);
    rc.params.ring = strcmp(c->liveness, "on") == 0;
    if ((r = agent_liveness_open(a, &rc.self)) != 0)
        return r;
    if (rdzv_session_create(a->node.kv, &rc, &a->node.rdzv, &err) < 0) {
        log_error("%s", err.msg);
        return AGENT_EXIT_USAGE;
    }
    struct launcher_config lc;
    char lock_dir[512];
    if (hostsel_config(c, &lc, lock_dir, sizeof(lock_dir), &err) < 0) {
        log_error("%s", err.msg);
        return AGENT_EXIT_USAGE;
    }
    lc.fence_grace_ms = c->stop_timeout_ms;
    if (a->hooks->launcher)
        lc.name = a->hooks->launcher;
    if (launcher_create(&lc, &a->launcher, &err) < 0) {
        log_error("cannot create the %s launcher: %s", lc.name, err.msg);
        return strcmp(lc.name, "ssh") == 0 ? AGENT_EXIT_USAGE : AGENT_EXIT_RDZV;
    }
    if (strcmp(lc.name, "ssh") == 0)
        log_info("workers run on host '%s' (%s) over ssh", c->host, a->me.addr);
    if (a->hooks->ret_launcher)
        *a->hooks->ret_launcher = a->launcher;
    if (hb_create(c->heartbeat_timeout_ms, c->startup_timeout_ms, &a->health.hb, &err) < 0) {
        log_error("%s", err.msg);
        return AGENT_EXIT_RDZV;
    }
    for (size_t i = 0; i < agent_n_components; i++) {
        int code = agent_components[i]->open ? agent_components[i]->open(a, lc.name) : 0;
        if (code)
            return code;
    }
    a->group.launcher = a->launcher;
    a->group.cfg = c;
    a->group.workdir = a->me.workdir;
    return 0;
}

/* --http: after the launcher exists (it blocks SIGCHLD), and with every signal blocked in the
 * server's thread (http_start sees to it). */
static int start_http(struct agent *a)
{
    struct ea_error err = {0};
    int port = 0;
    if (http_start(a->cfg->http_addr, a->cfg->http_port, &a->obs.http, &port, &err) < 0) {
        log_error("%s", err.msg);
        return AGENT_EXIT_USAGE;
    }
    if (a->ring.live) /* /status and /metrics read the links as they are at the request */
        http_set_links(a->obs.http, agent_liveness_links, a);
    bool v6 = strchr(a->cfg->http_addr, ':') != NULL;
    log_info("serving /healthz, /readyz and /metrics on http://%s%s%s:%d", v6 ? "[" : "",
             a->cfg->http_addr, v6 ? "]" : "", port);
    return 0;
}

static void teardown(struct agent *a)
{
    log_progress_end();
    a->quit.exiting = true;
    ea_loop_destroy(a->loop);
    agent_liveness_close(a); /* a bye on its links before leaving: nobody suspects it */
    if (a->node.rdzv && a->quit.exit_code != AGENT_EXIT_STORE) { /* no store: nothing to leave */
        struct ea_error err = {0};
        if (rdzv_leave(a->node.rdzv, &err) < 0)
            log_warn("leaving the run: %s", err.msg);
        else if (a->obs.joined)
            agent_emit(a, "left", NULL);
    }
    AGENT_EACH(close, a); /* after leaving (nobody waits on our disk), before "exited" */
    agent_emit(a, "exited", "{s:i}", "exit_code", a->quit.exit_code);
    http_stop(a->obs.http);
    events_close(a->obs.events);
    group_clear(&a->group);
    pf_destroy(a->health.pf); /* before the launcher it runs on */
    warm_destroy(a->warm.spares); /* likewise: its spares are killed (their process groups) */
    launcher_destroy(a->launcher);
    nic_destroy(a->nic);
    tracker_destroy(a->tracker.srv);
    hb_destroy(a->health.hb);
    rdzv_session_destroy(a->node.rdzv);
    kv_close(a->node.kv);
    if (a->me.workdir[0])
        workdir_remove(a->me.workdir);
    if (a->quit.sigfd >= 0)
        close(a->quit.sigfd);
    preempt_close(&a->quit.preempt);
    free(a->env.worker_envp);
    free(a->env.worker_env_buf);
}

/* Enter phase `id`; one with nothing to wait for is over at once (agent_phase_over). */
static void enter(struct agent *a, enum agent_phase id)
{
    const struct cfg *c = a->cfg;
    int64_t now = ea_now_ms();
    a->stage = (struct agent_stage){.id = id, .since = now, .deadline = -1};
    AGENT_EACH(enter, a, (int)id); /* AP_PREFLIGHT: the gate; AP_WARMING: the spares; ... */
    switch (id) {
    case AP_PREFLIGHT:
    case AP_WARMING:
        break;
    case AP_JOINING:
        a->stage.deadline = now; /* the first attempt at once */
        break;
    case AP_RUNNING:
        a->obs.joined = true;
        a->obs.rdzv_since_ms = now;
        agent_emit(a, "joined", "{s:s, s:i, s:i, s:i, s:s}", "backend", c->backend, "nproc",
                   c->nproc_per_node, "min", c->min_nodes, "max", c->max_nodes, "host", a->me.host);
        log_info("joined run '%s' (%s backend) as node '%s' with %d worker slot(s); "
                 "min %d, max %d",
                 c->run_id, c->backend, c->node_id, c->nproc_per_node, c->min_nodes,
                 c->max_nodes);
        break;
    case AP_DRAINING:
        log_progress_end();
        a->quit.exiting = true;
        agent_publish(a); /* /healthz says so while the workers drain */
        if (a->group.live == 0) {
            agent_phase_over(a, a->quit.exit_code);
            break;
        }
        group_stop(&a->group);
        a->state = LC_STOPPING;
        a->stage.deadline = now + c->stop_timeout_ms + 2000;
        break;
    case AP_DONE:
        break;
    }
}

/* The phase that follows the one that just ended (a->quit.exit_code says how it ended). */
static enum agent_phase next_phase(struct agent *a)
{
    switch (a->stage.id) {
    case AP_PREFLIGHT:
        return a->quit.exit_code ? AP_DRAINING : AP_WARMING;
    case AP_WARMING:
        return a->quit.exit_code ? AP_DRAINING : AP_JOINING;
    case AP_JOINING:
        return a->quit.exit_code ? AP_DRAINING : AP_RUNNING;
    case AP_RUNNING:
        AGENT_EACH(leaving, a); /* e.g. no spare waits for a round that will not come */
        if (!a->health.pf_out)
            return AP_DRAINING;
        struct ea_error err = {0}; /* out until the check passes: the others go on without us */
        if (rdzv_leave(a->node.rdzv, &err) < 0)
            log_warn("leaving the run: %s", err.msg);
        agent_emit(a, "left", "{s:s}", "reason", a->health.out_until ? "straggler" : "preflight");
        a->health.pf_out = a->quit.exiting = a->obs.joined = false;
        a->state = LC_IDLE;
        a->quit.exit_code = 0;
        return AP_PREFLIGHT; /* again after --preflight-every-round took the node out */
    default:
        return AP_DONE;
    }
}

/* ---- the one loop ------------------------------------------------------------------------- */

static void joining_step(void *c, int64_t now)
{
    struct agent *a = c;
    if (a->stage.id == AP_JOINING && !a->stage.over)
        agent_joining_step(a, now);
}

static void draining_step(void *c, int64_t now)
{
    struct agent *a = c;
    if (a->stage.id == AP_DRAINING && !a->stage.over)
        agent_draining_step(a, now);
}

static int64_t stage_wake(void *c) /* AP_JOINING: the next attempt; AP_DRAINING: the stop's end */
{
    const struct agent *a = c;
    bool mine = (a->stage.id == AP_JOINING && !a->stage.over) || a->stage.id == AP_DRAINING;
    return mine ? a->stage.deadline : -1;
}

static const struct ea_loop_step phase_steps[] = {
    {"joining", joining_step, stage_wake, true},
    {"draining", draining_step, stage_wake, true},
};

/* A pass ends early once its phase is over (or the run is being left): enter() moves on. */
static bool pass_done(void *c)
{
    const struct agent *a = c;
    return a->stage.over || a->stage.id == AP_DONE ||
           (a->stage.id == AP_RUNNING && a->quit.exiting);
}

/* Register the steps, slot by slot (the agent's own, then the components' in the table's
 * order), and the sources (the components', then the agent's). */
static int loop_create(struct agent *a)
{
    struct ea_loop *l = ea_loop_create(a->hooks->clock, pass_done, a);
    int r = l ? 0 : -ENOMEM;
    if (r == 0 && a->hooks->step) /* a test's script, first of all */
        r = ea_loop_add_step(l, a->hooks->step, a->hooks->step_ctx);
    for (size_t i = 0; r == 0 && i < sizeof(phase_steps) / sizeof(phase_steps[0]); i++)
        r = ea_loop_add_step(l, &phase_steps[i], a);
    for (int slot = 0; r == 0 && slot < AGENT_SLOTS; slot++) {
        for (size_t i = 0; r == 0 && i < agent_n_running_steps; i++)
            if (agent_running_steps[i].at == (enum agent_slot)slot)
                r = ea_loop_add_step(l, &agent_running_steps[i].step, a);
        for (size_t c = 0; r == 0 && c < agent_n_components; c++)
            for (size_t i = 0; r == 0 && i < agent_components[c]->n_steps; i++)
                if (agent_components[c]->steps[i].at == (enum agent_slot)slot)
                    r = ea_loop_add_step(l, &agent_components[c]->steps[i].step, a);
    }
    for (size_t c = 0; r == 0 && c < agent_n_components; c++)
        for (size_t i = 0; r == 0 && i < agent_components[c]->n_sources; i++)
            r = ea_loop_add_source(l, &agent_components[c]->sources[i], a);
    for (size_t i = 0; r == 0 && i < agent_n_sources; i++)
        r = ea_loop_add_source(l, &agent_sources[i], a);
    if (r < 0) {
        ea_loop_destroy(l);
        return r;
    }
    a->loop = l;
    return 0;
}

/* The one loop, through every phase: preflight, warming, joining, running, draining. */
static void run(struct agent *a)
{
    while (a->stage.id != AP_DONE) {
        int r = ea_loop_run_once(a->loop);
        if (r < 0 && a->stage.id != AP_DRAINING) {
            log_error("poll: %s", strerror(-r));
            a->quit.exit_code = AGENT_EXIT_RDZV;
            enter(a, AP_DRAINING);
        } else if (r < 0) {
            break;
        } else if (r > 0) {
            enter(a, next_phase(a));
        }
    }
}

int agent_run(const struct cfg *cfg, char **envp)
{
    return agent_run_hooked(cfg, envp, NULL);
}

int agent_run_hooked(const struct cfg *cfg, char **envp, const struct agent_hooks *hooks)
{
    static const struct agent_hooks none = {0};
    struct agent agent = {.cfg = cfg, .hooks = hooks ? hooks : &none, .env = {.envp = envp},
                          .quit = {.sigfd = -1, .parent = getppid(), .preempt = {.fd = -1}},
                          .wait = {.since_ms = -1, .last_generation_logged = -1}};
    struct agent *a = &agent;
    agent_node_init(a, a->hooks->clock);
    ph_init(&a->health.ph);
    log_init(cfg->log_level, cfg->node_id);
    bool json_log = strcmp(cfg->log_format, "json") == 0;
    if (json_log)
        log_set_json(cfg->run_id);
    snprintf(a->obs.m.run_id, sizeof(a->obs.m.run_id), "%s", cfg->run_id);
    snprintf(a->obs.m.node_id, sizeof(a->obs.m.node_id), "%s", cfg->node_id);
    if (cfg->user && cfg->insecure_transport && cfg_store_plaintext(cfg))
        log_warn("--insecure-transport: the etcd password of user '%s' crosses a plaintext "
                 "connection to '%s' (anyone who sees the traffic can read it)",
                 cfg->user, cfg->endpoints);
    int wr = read_worker_env(a);
    if (wr < 0) {
        log_error("--worker-env-fd %s: %s", cfg->worker_env_fd,
                  wr == -EBADMSG ? "an entry is not NAME=VALUE"
                  : wr == -EFBIG ? "more than 256 KiB"
                                 : strerror(-wr));
        return AGENT_EXIT_USAGE;
    }
    if (setup_signals(a) < 0) {
        log_error("cannot set up signal handling: %s", strerror(errno));
        free(a->env.worker_envp);
        free(a->env.worker_env_buf);
        return AGENT_EXIT_RDZV;
    }
    gethostname(a->me.host, sizeof(a->me.host) - 1);
    choose_addr(a);
    snprintf(a->me.self_addr, sizeof(a->me.self_addr), "%s", a->me.addr); /* before --host's */
    if (cfg->host) { /* the workers run there: other nodes reach this one there */
        struct ea_error herr = {0};
        snprintf(a->me.host, sizeof(a->me.host), "%s", cfg->host);
        /* this machine: keep the address chosen above (a host name may map to 127.0.1.1) */
        if (!cfg->local_addr && !hostsel_is_local(cfg->host) &&
            hostsel_resolve(cfg->host, a->me.addr, sizeof(a->me.addr), &herr) < 0) {
            /* perhaps an alias only ssh's config knows: other nodes get the name */
            log_warn("%s; publishing the name itself as this node's address", herr.msg);
            snprintf(a->me.addr, sizeof(a->me.addr), "%s", cfg->host);
        }
    }
    if (workdir_create(cfg->run_id, cfg->node_id, a->me.workdir, sizeof(a->me.workdir)) < 0) {
        log_error("cannot create a private directory under $TMPDIR or /tmp: %s",
                  strerror(errno));
        free(a->env.worker_envp);
        free(a->env.worker_env_buf);
        return AGENT_EXIT_RDZV;
    }
    struct ea_error perr = {0};
    int code = 0;
    if (cfg->log_dir && workdir_check_log_dir(cfg->log_dir, cfg->run_id, &perr) < 0) {
        log_error("%s", perr.msg); /* a configuration error: found before joining */
        code = AGENT_EXIT_USAGE;
    }
    if (code == 0)
        code = open_all(a);
    if (code == 0 && preempt_open(&a->quit.preempt, cfg->preemption_file, &perr) < 0) {
        log_error("%s", perr.msg);
        code = AGENT_EXIT_USAGE;
    }
    if (code == 0 && events_open(cfg->events_path, json_log, cfg->run_id, cfg->node_id,
                                 &a->obs.events, &perr) < 0) {
        log_error("%s", perr.msg);
        code = AGENT_EXIT_USAGE;
    }
    if (code == 0 && cfg->http)
        code = start_http(a);
    if (code == 0 && preempt_check(&a->quit.preempt)) {
        log_info("preemption notice '%s' already present: not joining", a->quit.preempt.path);
        code = 128 + SIGTERM;
    }
    if (code == 0 && loop_create(a) < 0) {
        log_error("cannot create the event loop: out of memory");
        code = AGENT_EXIT_RDZV;
    }
    if (code == 0) {
        enter(a, AP_PREFLIGHT);
        run(a);
        code = a->quit.exit_code;
    }
    a->quit.exit_code = code;
    teardown(a);
    return code;
}
