// SPDX-License-Identifier: Apache-2.0
/* serve: the node daemon. Idle, it watches its pool's `next` key; it joins the oldest queued
 * run with room by running the one-shot agent for it as a child, and is idle again when that
 * child exits (docs/daemon.md). */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "daemon.h"
#include "daemon_cg.h"
#include "daemon_internal.h"
#include "daemon_trust.h"
#include "ea_loop.h"
#include "ea_signal.h"
#include "ea_time.h"
#include "http.h"
#include "events.h"
#include "log.h"
#include "metrics.h"
#include "pool.h"
#include "proc.h"
#include "state.h"
#include "serve_internal.h"

/* ---- the store ---------------------------------------------------------------------------- */

static void publish(struct daemon *d)
{
    snprintf(d->m.run_id, sizeof(d->m.run_id), "%s", d->child ? d->run : "");
    snprintf(d->m.run_status, sizeof(d->m.run_status), "%s", d->child ? "running" : "idle");
    snprintf(d->m.group_state, sizeof(d->m.group_state), "%s", d->child ? "in-run" : "idle");
    d->m.joined = d->lease != 0;
    d->m.exiting = d->term_signal != 0;
    if (d->http)
        http_publish(d->http, &d->m);
}

/* The daemon's record (status --pool lists it), on its lease. */
int serve_put_record(struct daemon *d, struct ea_error *err)
{
    char key[POOL_KEY_MAX], host[256] = "";
    gethostname(host, sizeof(host) - 1);
    pool_daemon_key(&d->pool, d->cfg.node_id, key, sizeof(key));
    struct daemon_record rec = {.pid = (long long)getpid(), .since_ms = ea_wall_ms(),
                                .allow_unsigned = d->allow_unsigned};
    snprintf(rec.node, sizeof(rec.node), "%s", d->cfg.node_id);
    snprintf(rec.host, sizeof(rec.host), "%s", host);
    if (d->child) {
        snprintf(rec.run, sizeof(rec.run), "%s", d->run);
        snprintf(rec.signer, sizeof(rec.signer), "%s", d->run_signer);
        snprintf(rec.fingerprint, sizeof(rec.fingerprint), "%s", d->run_fp);
    }
    char *json = daemon_record_encode(&rec);
    if (!json)
        return ea_errorf(err, -ENOMEM, "out of memory");
    int r = kv_put(d->kv, key, json, strlen(json), d->lease, NULL, err);
    free(json);
    return r;
}

static int store_up(struct daemon *d, struct ea_error *err)
{
    int r = 0;
    if (!d->lease) {
        if ((r = kv_lease_grant(d->kv, d->cfg.lease_ttl_ms, &d->lease, err)) < 0)
            return r;
        if ((r = serve_put_record(d, err)) < 0) {
            kv_lease_revoke(d->kv, d->lease, NULL);
            d->lease = 0;
            return r;
        }
        d->keepalive_at = serve_now(d) + d->cfg.lease_ttl_ms / 3;
    }
    if (!d->watch_id) {
        if ((r = kv_watch(d->kv, d->pool.next_key, 0, &d->watch_id, err)) < 0)
            return r;
        d->pick = d->full_scan = true; /* whatever changed while nobody watched */
    }
    return 0;
}

void serve_store_failed(struct daemon *d, const char *what, const struct ea_error *err)
{
    d->backoff_ms = d->backoff_ms ? (d->backoff_ms * 2 > 5000 ? 5000 : d->backoff_ms * 2) : 250;
    log_warn("%s: %s; retrying in %.1f s", what, err->msg, (double)d->backoff_ms / 1000.0);
    d->m.store_down = true;
    d->retry_at = serve_now(d) + d->backoff_ms;
}

/* pool_advance's report of a spec that is not ours: moved aside here (once in the pool), or a
 * run whose state is not ours (once per key revision). */
static void report_bad(void *ctx, const char *key, int64_t rev, const char *why)
{
    struct daemon *d = ctx;
    for (size_t i = 0; i < d->n_bad; i++)
        if (d->bad[i].rev == rev && strcmp(d->bad[i].key, key) == 0)
            return;
    log_warn("skipping run spec '%s': %s (never run)", key, why);
    size_t i = d->n_bad < BAD_MAX ? d->n_bad++ : (size_t)(rev % BAD_MAX);
    snprintf(d->bad[i].key, sizeof(d->bad[i].key), "%s", key);
    d->bad[i].rev = rev;
}

/* pool_advance's questions on who may run what: the daemon's policy (daemon_trust.c) */
static int gate(void *ctx, const struct runspec *s, struct specsig_verdict *v)
{
    return daemon_trust_gate(&((struct daemon *)ctx)->trust, s, v);
}

static void refused(void *ctx, const struct runspec *s, const struct specsig_verdict *v)
{
    daemon_trust_refused(&((struct daemon *)ctx)->trust, s, v);
}

/* ---- the loop ----------------------------------------------------------------------------- */

static void on_signal(struct daemon *d)
{
    struct signalfd_siginfo si;
    while (read(d->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (d->term_signal)
            continue;
        d->term_signal = (int)si.ssi_signo;
        log_info("signal %d: %s", d->term_signal,
                 d->child ? "leaving the run, then exiting" : "exiting");
        if (d->child)
            kill(d->child, SIGTERM); /* the agent's graceful leave */
    }
}

static void on_store(struct daemon *d)
{
    struct kv_event *ev = NULL;
    size_t n = 0;
    struct ea_error err = {0};
    if (kv_read_events(d->kv, &ev, &n, &err) < 0)
        return;
    for (size_t i = 0; i < n; i++) {
        if (d->state_watch && ev[i].watch_id == d->state_watch) {
            serve_on_run_state(d, &ev[i]);
            continue;
        }
        if (ev[i].watch_id != d->watch_id)
            continue;
        if (d->advance_at && ev[i].type == KV_EVENT_PUT &&
            ev[i].entry.mod_revision > d->room_rev)
            d->advance_at = 0; /* another daemon recomputed `next` after the round: stand down */
        if (ev[i].type == KV_EVENT_ERROR) {
            d->watch_id = 0; /* store_up() watches again */
            d->retry_at = serve_now(d);
        } else {
            d->pick = true;
        }
    }
    kv_events_free(ev, n);
}

static void keepalive(struct daemon *d)
{
    struct ea_error err = {0};
    int r = kv_lease_keepalive(d->kv, d->lease, NULL, &err);
    if (r == KV_ENOLEASE) {
        log_warn("this daemon's lease expired: registering again");
        d->lease = 0;
    } else if (r < 0) {
        d->m.store_down = true;
        d->keepalive_at = serve_now(d) + 1000;
        return;
    }
    d->m.store_down = false;
    d->keepalive_at = serve_now(d) + d->cfg.lease_ttl_ms / 3;
}

/* A pass's steps, in this order (ea_loop.h): (re)register with the pool, arm a rescan that is
 * due, pick a run when idle, follow the run's room, keep the lease alive, publish /metrics. */
static void step_store(void *ctx, int64_t now)
{
    struct daemon *d = ctx;
    if (!d->term_signal && (d->retry_at < 0 || now >= d->retry_at) &&
        (!d->lease || !d->watch_id)) {
        struct ea_error err = {0};
        d->retry_at = -1;
        if (store_up(d, &err) < 0)
            serve_store_failed(d, "registering with the pool", &err);
    }
    if (d->retry_at >= 0 && now >= d->retry_at && d->lease && d->watch_id) {
        d->retry_at = -1;
        d->pick = true;
    }
}

static int64_t wake_store(void *ctx)
{
    return ((struct daemon *)ctx)->retry_at;
}

static void step_rescan(void *ctx, int64_t now)
{
    struct daemon *d = ctx;
    if (!d->child && d->rescan_at && now >= d->rescan_at) {
        d->rescan_at = 0;
        d->pick = d->full_scan = true;
    }
}

static void step_pick(void *ctx, int64_t now)
{
    struct daemon *d = ctx;
    (void)now;
    if (!d->term_signal && !d->child && d->pick && d->lease && d->watch_id && d->retry_at < 0)
        serve_pick(d);
}

static void step_room(void *ctx, int64_t now)
{
    struct daemon *d = ctx;
    if (d->child && !d->term_signal && !d->state_watch && d->lease)
        serve_watch_run_state(d);
    if (d->child && d->advance_at && now >= d->advance_at)
        serve_advance_for_room(d);
}

/* idle: the rescan; in a run: recomputing `next` for its room */
static int64_t wake_run(void *ctx)
{
    const struct daemon *d = ctx;
    int64_t at = d->child ? d->advance_at : d->rescan_at;
    return at ? at : -1;
}

static void step_keepalive(void *ctx, int64_t now)
{
    struct daemon *d = ctx;
    if (d->lease && now >= d->keepalive_at)
        keepalive(d);
}

static int64_t wake_keepalive(void *ctx)
{
    return ((struct daemon *)ctx)->keepalive_at;
}

static void step_publish(void *ctx, int64_t now)
{
    (void)now;
    publish(ctx);
}

static const struct ea_loop_step serve_steps[] = {
    {"store", step_store, wake_store, false},
    {"rescan", step_rescan, wake_run, false},
    {"pick", step_pick, NULL, false},
    {"room", step_room, NULL, false},
    {"keepalive", step_keepalive, wake_keepalive, false},
    {"publish", step_publish, NULL, false},
};

static size_t one_fd(int fd, struct pollfd *fds)
{
    fds[0] = (struct pollfd){.fd = fd, .events = POLLIN};
    return 1;
}

static size_t fds_signal(void *ctx, struct pollfd *fds, size_t max)
{
    (void)max;
    return one_fd(((struct daemon *)ctx)->sigfd, fds);
}

static void ready_signal(void *ctx, const struct pollfd *fds, size_t n, int64_t now)
{
    (void)fds, (void)n, (void)now;
    on_signal(ctx);
}

static size_t fds_child(void *ctx, struct pollfd *fds, size_t max)
{
    (void)max;
    return one_fd(((struct daemon *)ctx)->chldfd, fds);
}

static void ready_child(void *ctx, const struct pollfd *fds, size_t n, int64_t now)
{
    struct daemon *d = ctx;
    (void)fds, (void)n, (void)now;
    proc_reap();
    int status = 0;
    if (d->child && proc_exit_status(d->child, &status, NULL) == 1) {
        proc_table_remove(d->child);
        serve_run_ended(d, status);
    }
}

static size_t fds_store(void *ctx, struct pollfd *fds, size_t max)
{
    (void)max;
    return one_fd(kv_event_fd(((struct daemon *)ctx)->kv), fds);
}

static void ready_store(void *ctx, const struct pollfd *fds, size_t n, int64_t now)
{
    (void)fds, (void)n, (void)now;
    on_store(ctx);
}

static const struct ea_loop_source serve_sources[] = {
    {"signals", 1, fds_signal, ready_signal, false},
    {"children", 1, fds_child, ready_child, false},
    {"store", 1, fds_store, ready_store, false},
};

/* Over once a signal came and no run's agent is left. */
bool serve_done(void *ctx)
{
    const struct daemon *d = ctx;
    return d->term_signal && !d->child;
}

int serve_loop_add(struct ea_loop *l, struct daemon *d)
{
    int r = 0;
    for (size_t i = 0; r == 0 && i < sizeof(serve_steps) / sizeof(serve_steps[0]); i++)
        r = ea_loop_add_step(l, &serve_steps[i], d);
    for (size_t i = 0; r == 0 && i < sizeof(serve_sources) / sizeof(serve_sources[0]); i++)
        r = ea_loop_add_source(l, &serve_sources[i], d);
    return r;
}

static void loop(struct daemon *d)
{
    struct ea_loop *l = ea_loop_create(d->clock, serve_done, d);
    int r = l ? serve_loop_add(l, d) : -ENOMEM;
    if (r < 0)
        log_error("the loop: %s", strerror(-r));
    else
        ea_loop_run(l); /* until done, or the wait fails */
    ea_loop_destroy(l);
}

static int setup(struct daemon *d, const char *pool)
{
    struct ea_error err = {0};
    ssize_t n = readlink("/proc/self/exe", d->exe, sizeof(d->exe) - 1);
    if (n <= 0) {
        log_error("cannot find this program (/proc/self/exe): %s", strerror(errno));
        return AGENT_EXIT_RDZV;
    }
    d->exe[n] = '\0';
    sigset_t set;
    ea_term_sigset(&set);
    sigprocmask(SIG_BLOCK, &set, NULL); /* before any thread (store, HTTP) exists */
    signal(SIGPIPE, SIG_IGN);
    /* a subreaper: what a run's agent and its guards let go of (all SIGKILLed) comes here,
     * not to init, and is killed when the run ends (run_ended), so nothing outlives its run */
    if ((d->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) < 0 ||
        proc_table_open(&d->chldfd, &err) < 0 || proc_set_subreaper(&err) < 0) {
        log_error("cannot set up signal handling: %s", err.msg[0] ? err.msg : strerror(errno));
        return AGENT_EXIT_RDZV;
    }
    int64_t timeout = d->cfg.lease_ttl_ms / 3;
    timeout = timeout < 300 ? 300 : timeout > 5000 ? 5000 : timeout;
    struct kv_config kc = cfg_kv_config(&d->cfg, (int)timeout);
    int r = kv_open(&kc, &d->kv, &err);
    if (r < 0) {
        log_error("cannot open the %s store: %s", d->cfg.backend, err.msg);
        return r == KV_EINVAL ? AGENT_EXIT_USAGE : AGENT_EXIT_STORE;
    }
    if (pool_init(&d->pool, d->kv, d->cfg.prefix, pool, &err) < 0) {
        log_error("%s", err.msg);
        return AGENT_EXIT_USAGE;
    }
    bool json_log = strcmp(d->cfg.log_format, "json") == 0;
    if (events_open(d->cfg.events_path, json_log, "", d->cfg.node_id, &d->events, &err) < 0) {
        log_error("--events: %s", err.msg);
        return AGENT_EXIT_USAGE;
    }
    d->trust.events = d->events;
    daemon_cg_open(&d->cg, d->cfg.node_id);
    d->hooks = (struct pool_hooks){.ctx = d, .node = d->cfg.node_id, .bad = report_bad,
                                   .gate = gate, .refused = refused};
    if (d->cfg.http) {
        int port = 0;
        if (http_start(d->cfg.http_addr, d->cfg.http_port, &d->http, &port, &err) < 0) {
            log_error("%s", err.msg);
            return AGENT_EXIT_USAGE;
        }
        bool v6 = strchr(d->cfg.http_addr, ':') != NULL;
        log_info("serving /healthz, /readyz and /metrics on http://%s%s%s:%d", v6 ? "[" : "",
                 d->cfg.http_addr, v6 ? "]" : "", port);
    }
    return 0;
}

int serve_main(int argc, char **argv, char **envp)
{
    struct daemon d = {.sigfd = -1, .chldfd = -1, .retry_at = -1, .keepalive_at = -1,
                       .clock = &ea_clock_real,
                       .envp = envp, .cg = {.parent_fd = -1, .fd = -1}};
    const char *pool = NULL;
    bool help = false;
    int code = 0;
    if (serve_parse(&d, argc, argv, envp, &pool, &help) < 0)
        code = AGENT_EXIT_USAGE;
    else if (help) {
        serve_print_help(stdout);
    }
    if (code || help)
        goto out;
    struct ea_error err = {0};
    if (daemon_trust_open(&d.trust, d.signers_path, d.allow_unsigned, pool, d.cfg.prefix,
                          &d.pool, d.cfg.node_id, &err) < 0) {
        fprintf(stderr, "elastic-agent serve: %s\n", err.msg);
        code = AGENT_EXIT_USAGE;
        goto out;
    }
    log_init(d.cfg.log_level, d.cfg.node_id);
    if (strcmp(d.cfg.log_format, "json") == 0)
        log_set_json("");
    snprintf(d.m.node_id, sizeof(d.m.node_id), "%s", d.cfg.node_id);
    if (d.cfg.user && d.cfg.insecure_transport && cfg_store_plaintext(&d.cfg))
        log_warn("--insecure-transport: the etcd password of user '%s' crosses a plaintext "
                 "connection to '%s' (anyone who sees the traffic can read it)",
                 d.cfg.user, d.cfg.endpoints);
    if ((code = setup(&d, pool)) == 0) {
        log_info("serving pool '%s' under '%s' (%s backend) as node '%s'", d.pool.name,
                 d.cfg.prefix, d.cfg.backend, d.cfg.node_id);
        daemon_trust_announce(&d.trust);
        loop(&d);
        code = 0;
    }
    if (d.lease)
        kv_lease_revoke(d.kv, d.lease, NULL); /* the record goes with it */
    if (d.watch_id)
        kv_watch_cancel(d.kv, d.watch_id);
    log_info("exiting");
out:
    http_stop(d.http);
    events_close(d.events);
    daemon_trust_close(&d.trust);
    daemon_cg_close(&d.cg);
    kv_close(d.kv);
    if (d.chldfd >= 0)
        proc_table_close();
    if (d.sigfd >= 0)
        close(d.sigfd);
    explicit_bzero(d.cfg.password_buf, sizeof(d.cfg.password_buf));
    free(d.node_args);
    free(d.cfg_argv);
    return code;
}
