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

#include "agent.h"
#include "daemon.h"
#include "daemon_cg.h"
#include "daemon_internal.h"
#include "daemon_trust.h"
#include "ea_signal.h"
#include "ea_time.h"
#include "http.h"
#include "events.h"
#include "log.h"
#include "metrics.h"
#include "pool.h"
#include "proc.h"
#include "state.h"

#define SKIP_MAX 16
#define SKIP_MS 10000 /* a run this node could not run is looked at again after this long */
#define BAD_MAX 16

struct daemon {
    struct cfg cfg;    /* the node's options (store, node id, lease TTL, log, --http) */
    char **cfg_argv;   /* what cfg points into */
    char **node_args;  /* handed to every run's agent (no --pool, no --http; the password
                          only as --password-fd pwfd_arg: each run's own hand-over socket) */
    size_t n_node;
    char pwfd_arg[16];
    char **envp;
    char exe[PATH_MAX];
    struct kv *kv;
    struct pool pool;
    struct daemon_trust trust; /* which specs it runs (--allowed-signers, --allow-unsigned) */
    struct daemon_cg cg;       /* the run's cgroup, and the end of what a run left behind */
    struct pool_hooks hooks;
    struct events *events;
    const char *signers_path;
    bool allow_unsigned;
    int sigfd, chldfd;
    struct http *http;
    struct metrics_snapshot m;
    int64_t lease, keepalive_at, watch_id, retry_at;
    int64_t backoff_ms; /* store retries: doubling from 250 ms to 5 s; 0 after a success */
    bool pick, full_scan;
    pid_t child;
    int seat;           /* the child's run's seat this daemon holds */
    int run_max;        /* its --max */
    int64_t state_watch; /* its `state` (O(1): one small value per round) */
    int64_t room_rev;   /* revision of the round that left the run room, 0 = none pending */
    int64_t advance_at; /* when this daemon recomputes `next` for that room (0 = not armed) */
    int64_t rescan_at;  /* idle: look at the queue again (seats all taken; a scan's gap) */
    int64_t scan_ms;    /* when this daemon last scanned the queue (0: never) */
    char run[128];      /* the run the child runs */
    char run_signer[256], run_fp[SSHSIG_FP_MAX]; /* who signed it ("": unsigned) */
    int64_t run_since;  /* wall ms */
    int term_signal;
    struct { char run[128]; int64_t until; } skip[SKIP_MAX];
    struct { char key[POOL_KEY_MAX]; int64_t rev; } bad[BAD_MAX];
    size_t n_bad;
};

static const char serve_help[] =
    "Usage: elastic-agent serve [--pool NAME] [--http [ADDR]:PORT]\n"
    "                           (--allowed-signers FILE | --allow-unsigned) [NODE OPTIONS]\n"
    "\n"
    "A node daemon that stays up between runs. Idle, it watches its pool (one small key) and\n"
    "joins the oldest run submitted with `elastic-agent submit` that has room (fewer nodes than\n"
    "its --max); it runs it exactly as `elastic-agent [OPTIONS] -- COMMAND` would, with this\n"
    "node's options and the run's spec, and is idle again when the run ends or it leaves.\n"
    "SIGTERM/SIGINT: leave the current run gracefully, then exit 0.\n"
    "\n"
    "  --pool NAME                  the pool to serve [default default] [env ELASTIC_POOL]\n"
    "  --http [ADDR]:PORT           /healthz (200 while the daemon holds its lease), /readyz\n"
    "                               (says idle or the run), /metrics, kept up between runs\n"
    "  --allowed-signers FILE       run only specs signed (submit --sign-with) by a key of FILE,\n"
    "                               an OpenSSH allowed_signers file (ssh-keygen(1)); re-read\n"
    "                               when it changes [env ELASTIC_ALLOWED_SIGNERS]\n"
    "  --allow-unsigned             also run unsigned specs: anyone who can write to the store\n"
    "                               can then run commands here (logged, shown by status --pool)\n"
    "                               [env ELASTIC_ALLOW_UNSIGNED]\n"
    "\nNode options (each also from ELASTIC_<NAME>, as in `elastic-agent --help`; the run's own\n"
    "options go to submit; --nproc-per-node and --stop-timeout are this node's defaults, which a\n"
    "run's spec may override):\n";

static const char serve_help_end[] =
    "\nWhile the store is unreachable the daemon retries (backing off to 5 s; /healthz says so).\n"
    "A spec refused (unsigned, not signed by an allowed key, expired, for another pool, changed\n"
    "after signing) is never run: the daemon that finds it first moves it to the pool's\n"
    "refused/ keys and says why once (also an entry that is not a spec); status --pool lists it.\n"
    "Exit status: 0 after SIGTERM/SIGINT, 2 usage error (also: neither --allowed-signers nor\n"
    "--allow-unsigned), 3 the store cannot be opened.\n";

/* ---- options ------------------------------------------------------------------------------ */

static int parse(struct daemon *d, int argc, char **argv, char **envp, const char **ret_pool,
                 bool *ret_help)
{
    const char *pool = daemon_default_pool(envp), *http = NULL;
    d->node_args = calloc((size_t)argc + 5, sizeof(char *));
    if (!d->node_args)
        return -ENOMEM;
    d->signers_path = daemon_env(envp, "ELASTIC_ALLOWED_SIGNERS");
    if (daemon_env_bool("serve", envp, "ELASTIC_ALLOW_UNSIGNED", &d->allow_unsigned) < 0)
        return -EINVAL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            *ret_help = true;
            return 0;
        }
        if (strncmp(a, "--", 2) != 0 || !a[2]) {
            fprintf(stderr, "elastic-agent serve: '%s': serve takes no command (runs come from "
                            "'elastic-agent submit'; see serve --help)\n", a);
            return -EINVAL;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        if ((len == 4 && strncmp(name, "pool", 4) == 0) ||
            (len == 4 && strncmp(name, "http", 4) == 0)) {
            v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
            if (!v) {
                fprintf(stderr, "elastic-agent serve: --%.*s needs a value\n", (int)len, name);
                return -EINVAL;
            }
            *(name[0] == 'p' ? &pool : &http) = v;
            continue;
        }
        if ((len == 15 && strncmp(name, "allowed-signers", 15) == 0) ||
            (len == 14 && strncmp(name, "allow-unsigned", 14) == 0)) {
            bool file = len == 15;
            v = eq ? eq + 1 : file && i + 1 < argc ? argv[++i] : NULL;
            if (file ? !v || !v[0] : eq != NULL) {
                fprintf(stderr, "elastic-agent serve: --%.*s %s\n", (int)len, name,
                        file ? "needs a value" : "takes no value");
                return -EINVAL;
            }
            if (file)
                d->signers_path = v;
            else
                d->allow_unsigned = true;
            continue;
        }
        bool value = false;
        int k = cfg_option_find(name, len, &value);
        unsigned cmds = 0;
        const char *flag = k >= 0 ? cfg_option_flag((size_t)k, &cmds) : NULL;
        const char *why = runspec_serve_refusal(flag, cmds);
        if (why) {
            fprintf(stderr, "elastic-agent serve: '--%.*s': %s\n", (int)len, name, why);
            return -EINVAL;
        }
        d->node_args[d->n_node++] = argv[i];
        if (value && !eq) {
            if (i + 1 >= argc) {
                fprintf(stderr, "elastic-agent serve: --%s needs a value\n", flag);
                return -EINVAL;
            }
            d->node_args[d->n_node++] = argv[++i];
        }
    }
    /* the node's options as the agent reads them: store, node id, lease, logging, --http */
    size_t n = 0;
    d->cfg_argv = calloc(d->n_node + 8, sizeof(char *));
    if (!d->cfg_argv)
        return -ENOMEM;
    d->cfg_argv[n++] = (char *)"elastic-agent";
    for (size_t i = 0; i < d->n_node; i++)
        d->cfg_argv[n++] = d->node_args[i];
    if (http) {
        d->cfg_argv[n++] = (char *)"--http";
        d->cfg_argv[n++] = (char *)http;
    }
    d->cfg_argv[n++] = (char *)"--";
    d->cfg_argv[n++] = (char *)"true";
    struct ea_error err = {0};
    if (cfg_parse((int)n, d->cfg_argv, envp, &d->cfg, &err) < 0) {
        fprintf(stderr, "elastic-agent serve: %s\n", err.msg);
        return -EINVAL;
    }
    if (strcmp(d->cfg.backend, "memory") == 0) {
        fprintf(stderr, "elastic-agent serve: the memory backend lives inside one process: a "
                        "pool needs a shared store (--rdzv-endpoint, or file)\n");
        return -EINVAL;
    }
    daemon_hand_password(&d->cfg, d->node_args, &d->n_node, d->pwfd_arg);
    bool given = false; /* every run's agent takes the daemon's node id */
    for (size_t i = 0; i < d->n_node; i++)
        given |= strncmp(d->node_args[i], "--node-id", 9) == 0 ||
                 strncmp(d->node_args[i], "--node_id", 9) == 0;
    if (!given) {
        d->node_args[d->n_node++] = (char *)"--node-id";
        d->node_args[d->n_node++] = (char *)d->cfg.node_id;
    }
    *ret_pool = pool;
    return 0;
}

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
static int put_record(struct daemon *d, struct ea_error *err)
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
        if ((r = put_record(d, err)) < 0) {
            kv_lease_revoke(d->kv, d->lease, NULL);
            d->lease = 0;
            return r;
        }
        d->keepalive_at = ea_now_ms() + d->cfg.lease_ttl_ms / 3;
    }
    if (!d->watch_id) {
        if ((r = kv_watch(d->kv, d->pool.next_key, 0, &d->watch_id, err)) < 0)
            return r;
        d->pick = d->full_scan = true; /* whatever changed while nobody watched */
    }
    return 0;
}

static void store_failed(struct daemon *d, const char *what, const struct ea_error *err)
{
    d->backoff_ms = d->backoff_ms ? (d->backoff_ms * 2 > 5000 ? 5000 : d->backoff_ms * 2) : 250;
    log_warn("%s: %s; retrying in %.1f s", what, err->msg, (double)d->backoff_ms / 1000.0);
    d->m.store_down = true;
    d->retry_at = ea_now_ms() + d->backoff_ms;
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

static bool skipped(struct daemon *d, const char *run)
{
    int64_t now = ea_now_ms();
    for (size_t i = 0; i < SKIP_MAX; i++)
        if (d->skip[i].until > now && strcmp(d->skip[i].run, run) == 0)
            return true;
    return false;
}

static void skip_run(struct daemon *d, const char *run)
{
    size_t k = 0;
    for (size_t i = 1; i < SKIP_MAX; i++)
        if (d->skip[i].until < d->skip[k].until)
            k = i;
    snprintf(d->skip[k].run, sizeof(d->skip[k].run), "%s", run);
    d->skip[k].until = ea_now_ms() + SKIP_MS;
    if (d->retry_at < 0 || d->retry_at > d->skip[k].until)
        d->retry_at = d->skip[k].until; /* then look again */
}

/* ---- room in the run: idle daemons learn of it --------------------------------------------
 * A run that loses a member while `next` names another run (or none) has room again, but the
 * idle daemons watch only `next`. So every daemon in a run watches the run's `state` and, when a
 * round leaves the run below its max (or waiting for its min), recomputes `next` after a delay
 * spread by its node id; the first to do it changes `next`, which every other daemon of the run
 * sees on its own watch of `next` and stands down. One queue walk per such round, not one per
 * member. */

static void watch_run_state(struct daemon *d)
{
    char key[POOL_KEY_MAX];
    pool_run_key(&d->pool, d->run, "state", key, sizeof(key));
    struct ea_error err = {0};
    if (kv_watch(d->kv, key, 0, &d->state_watch, &err) < 0) {
        log_warn("watching run '%s' for room: %s (retrying)", d->run, err.msg);
        d->state_watch = 0;
    }
}

static void on_run_state(struct daemon *d, const struct kv_event *ev)
{
    if (ev->type == KV_EVENT_ERROR) {
        d->state_watch = 0; /* the loop watches again */
        return;
    }
    struct rdzv_state st = {0};
    if (ev->type != KV_EVENT_PUT ||
        rdzv_state_decode(ev->entry.value, ev->entry.value_len, &st, NULL) < 0)
        return; /* the run's own agent reports a state that is not ours */
    bool room = pool_run_of_state(&st, d->run_max) == POOL_RUN_ROOM;
    rdzv_state_clear(&st);
    if (!room || d->advance_at)
        return;
    uint32_t h = pool_node_hash(d->cfg.node_id); /* the spread */
    int64_t window = (int64_t)d->run_max * 10;
    window = window < 20 ? 20 : window > 2000 ? 2000 : window;
    d->room_rev = ev->entry.mod_revision;
    d->advance_at = ea_now_ms() + (int64_t)(h % (uint32_t)window);
}

static void advance_for_room(struct daemon *d)
{
    struct ea_error err = {0};
    d->advance_at = 0;
    if (pool_advance(&d->pool, NULL, 0, &d->hooks, NULL, &err) < 0)
        log_warn("run '%s' has room: updating the pool's next run: %s", d->run, err.msg);
    else
        log_debug("run '%s' has room: the pool's next run recomputed", d->run);
}

/* ---- runs --------------------------------------------------------------------------------- */

/* Take a seat of run `s` and start its agent. 0 (started, or skipped here: reported), -EBUSY
 * when every seat is taken, or a store error (in err). */
static int start_run(struct daemon *d, const struct runspec *s, struct ea_error *serr)
{
    struct ea_error err = {0};
    char **env = NULL, **argv = NULL, **nargs = NULL, efd_arg[16];
    int efd = -1, pwfd = -1;
    if (skipped(d, s->run_id))
        return 0;
    struct specsig_verdict v;
    if (daemon_trust_admit(&d->trust, s, &v) < 0)
        return -EPERM; /* never run: moved aside */
    /* the agent's argv: the node's options, then the spec's --env for its workers only (an
     * inherited memfd: not the agent's environment, not its command line) */
    int r = daemon_child_env(d->envp, &env);
    if (r < 0)
        return ea_errorf(serr, r, "out of memory");
    nargs = calloc(d->n_node + 3, sizeof(char *));
    if (!nargs) {
        free(env);
        return ea_errorf(serr, -ENOMEM, "out of memory");
    }
    memcpy(nargs, d->node_args, d->n_node * sizeof(char *));
    size_t n_nargs = d->n_node;
    if (s->n_env && (r = daemon_worker_env_fd(s, &efd, &err)) == 0) {
        snprintf(efd_arg, sizeof(efd_arg), "%d", efd);
        nargs[n_nargs++] = (char *)"--worker-env-fd";
        nargs[n_nargs++] = efd_arg;
    }
    /* the password: this agent's own socket, named by the --password-fd in node_args */
    if (r == 0 && d->cfg.user && (r = cfg_password_socket(&d->cfg, &pwfd, &err)) == 0)
        snprintf(d->pwfd_arg, sizeof(d->pwfd_arg), "%d", pwfd);
    struct cfg c;
    if (r == 0)
        r = runspec_validate(s, nargs, n_nargs, env, &c, &argv, &err);
    if (r < 0) {
        log_warn("run '%s' cannot run on this node: %s; skipped", s->run_id, err.msg);
        skip_run(d, s->run_id);
        r = 0;
        goto out;
    }
    explicit_bzero(c.password_buf, sizeof(c.password_buf));
    int seat = -1;
    if ((r = pool_seat_claim(&d->pool, s, d->cfg.node_id, d->lease, &seat, serr)) < 0)
        goto out;
    argv[0] = d->exe;
    struct proc_spawn_opts o = {.argv = (const char *const *)argv,
                                .envp = (const char *const *)env, .stdin_fd = -1,
                                .stdout_fd = -1, .stderr_fd = -1, .flags = PROC_DEATHSIG,
                                .deathsig = SIGKILL, .report_fd = -1, .keep_fd = pwfd,
                                .cgroup_fd = daemon_cg_run_start(&d->cg)};
    pid_t pid = 0;
    r = proc_spawn(&o, &pid, NULL, &err);
    free(argv);
    argv = NULL;
    if (r == 0 && proc_table_add(pid) < 0) {
        kill(pid, SIGKILL);
        r = -ENOMEM;
    }
    if (r < 0) {
        log_error("cannot start the agent for run '%s': %s", s->run_id, err.msg);
        daemon_cg_run_end(&d->cg, s->run_id);
        pool_seat_release(&d->pool, s->run_id, seat, NULL);
        skip_run(d, s->run_id);
        r = 0;
        goto out;
    }
    d->child = pid;
    d->seat = seat;
    d->run_max = c.max_nodes; /* the agent's own --max (runspec_validate: the spec's) */
    snprintf(d->run, sizeof(d->run), "%s", s->run_id);
    snprintf(d->run_signer, sizeof(d->run_signer), "%s", v.principal);
    snprintf(d->run_fp, sizeof(d->run_fp), "%s", v.verified ? v.fingerprint : "");
    watch_run_state(d);
    log_info("joining run '%s' of pool '%s' (min %d, max %d) in seat %d: agent pid %ld; %s%s%s%s",
             s->run_id, d->pool.name, c.min_nodes, c.max_nodes, seat, (long)pid,
             v.verified ? "signed by '" : v.is_signed ? "signature not checked " : "unsigned",
             v.principal, v.verified ? "' " : "", v.fingerprint);
    struct ea_error perr = {0};
    if (put_record(d, &perr) < 0)
        log_warn("updating this daemon's record: %s", perr.msg);
out:
    if (efd >= 0)
        close(efd);
    if (pwfd >= 0)
        close(pwfd);
    free(argv);
    free(nargs);
    free(env);
    return r; /* 0, or the seat claim's -EBUSY or store error */
}

/* Idle: join the run `next` names when it has room, else recompute `next` (a paged scan of the
 * queue: at start, after a run, and when `next` names a run full, over or gone, that at most once
 * per POOL_RESCAN_GAP_MS: a write of `next` costs O(1) reads, whoever wrote it). A run whose
 * seats are all taken is full whatever its keys say yet: `next` moves past it. */
static void pick(struct daemon *d)
{
    struct ea_error err = {0};
    struct runspec s = {0};
    char full[4][128];
    const char *fullv[4];
    size_t n_full = 0;
    int r = 0, n_refused = 0;
    bool scan = d->full_scan;
    if (!scan) {
        char run[128];
        int64_t rev = 0;
        enum pool_run pr = POOL_RUN_FULL;
        if ((r = pool_next_get(&d->pool, run, sizeof(run), &rev, &err)) < 0)
            goto fail;
        if (!run[0]) {
            d->pick = false; /* nothing queued with room */
            return;
        }
        r = pool_spec_get(&d->pool, run, &s, NULL, &err);
        if (r == 0)
            r = pool_run_check(&d->pool, &s, &pr, NULL, 0, &err);
        if (r < 0 && r != KV_ENOTFOUND && r != -EBADMSG)
            goto fail;
        scan = r < 0 || pr != POOL_RUN_ROOM;
        if (scan)
            runspec_clear(&s);
        ea_error_clear(&err);
        int64_t now = ea_now_ms(), at = pool_rescan_at(d->scan_ms, now);
        if (scan && at > now) { /* one scan per gap however often `next` is written */
            d->rescan_at = d->rescan_at && d->rescan_at < at ? d->rescan_at : at;
            d->pick = false;
            return;
        }
    }
    for (;;) {
        if (scan)
            d->scan_ms = ea_now_ms();
        if (scan && (r = pool_advance(&d->pool, fullv, n_full, &d->hooks, &s, &err)) < 0)
            goto fail;
        if (!s.run_id[0])
            break;
        r = start_run(d, &s, &err);
        if (r == -EPERM) { /* refused and moved aside: the queue changed, look again */
            runspec_clear(&s);
            r = 0;
            scan = true;
            if (n_refused++ < 8)
                continue;
            break;
        }
        if (r != -EBUSY || n_full == sizeof(full) / sizeof(*full))
            break;
        snprintf(full[n_full], sizeof(full[n_full]), "%s", s.run_id); /* every seat taken */
        fullv[n_full] = full[n_full];
        n_full++;
        runspec_clear(&s);
        scan = true;
    }
    if (r < 0 && r != -EBUSY)
        goto fail;
    /* a run whose seats were all taken though its keys say room: a seat of a node that died
     * is freed by its lease; look again then */
    d->rescan_at = n_full && !d->child ? ea_now_ms() + d->cfg.lease_ttl_ms : 0;
    d->pick = d->full_scan = false;
    d->m.store_down = false;
    d->backoff_ms = 0;
    runspec_clear(&s);
    return;
fail:
    runspec_clear(&s);
    store_failed(d, "reading the pool", &err);
}

/* The run's agent exited: say how, close a run that timed out, and be idle again. */
static void run_ended(struct daemon *d, int status)
{
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    /* before anything else starts: what the run left behind (its cgroup; what was re-parented
     * to this subreaper, however it detached) is killed; not during the run (an ssh
     * ControlPersist master of its agent's may live here then) */
    daemon_cg_run_end(&d->cg, d->run);
    log_info("run '%s' is over on this node (agent exit %d)%s", d->run, code,
             d->term_signal ? "" : "; idle");
    struct runspec s = {0};
    struct ea_error err = {0};
    enum pool_run pr = POOL_RUN_ROOM;
    if (code == AGENT_EXIT_USAGE || (!WIFEXITED(status) && !d->term_signal))
        skip_run(d, d->run); /* e.g. the node id still held by a live agent, or a crash: not
                                again at once */
    if (code == AGENT_EXIT_RDZV && pool_spec_get(&d->pool, d->run, &s, NULL, NULL) == 0 &&
        pool_run_check(&d->pool, &s, &pr, NULL, 0, &err) == 0 && pr != POOL_RUN_ENDED &&
        pr != POOL_RUN_BAD) {
        /* the agent gave up (--join-timeout) and the run is not over: it failed to form */
        log_warn("run '%s' did not reach its minimum of %d node(s): closing it", d->run,
                 s.min_nodes);
        if (pool_close_run(&d->pool, d->run, &err) < 0)
            log_warn("closing run '%s': %s", d->run, err.msg);
    }
    runspec_clear(&s);
    if (d->lease && pool_seat_release(&d->pool, d->run, d->seat, &err) < 0)
        log_warn("giving back seat %d of run '%s': %s", d->seat, d->run, err.msg);
    if (d->state_watch)
        kv_watch_cancel(d->kv, d->state_watch);
    d->state_watch = d->advance_at = d->room_rev = 0;
    d->child = 0;
    d->run[0] = '\0';
    d->pick = d->full_scan = true;
    if (d->lease && put_record(d, &err) < 0)
        log_warn("updating this daemon's record: %s", err.msg);
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
            on_run_state(d, &ev[i]);
            continue;
        }
        if (ev[i].watch_id != d->watch_id)
            continue;
        if (d->advance_at && ev[i].type == KV_EVENT_PUT &&
            ev[i].entry.mod_revision > d->room_rev)
            d->advance_at = 0; /* another daemon recomputed `next` after the round: stand down */
        if (ev[i].type == KV_EVENT_ERROR) {
            d->watch_id = 0; /* store_up() watches again */
            d->retry_at = ea_now_ms();
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
        d->keepalive_at = ea_now_ms() + 1000;
        return;
    }
    d->m.store_down = false;
    d->keepalive_at = ea_now_ms() + d->cfg.lease_ttl_ms / 3;
}

static void loop(struct daemon *d)
{
    for (;;) {
        int64_t now = ea_now_ms();
        if (d->term_signal && !d->child)
            return;
        if (!d->term_signal && (d->retry_at < 0 || now >= d->retry_at) &&
            (!d->lease || !d->watch_id)) {
            struct ea_error err = {0};
            d->retry_at = -1;
            if (store_up(d, &err) < 0)
                store_failed(d, "registering with the pool", &err);
        }
        if (d->retry_at >= 0 && now >= d->retry_at && d->lease && d->watch_id) {
            d->retry_at = -1;
            d->pick = true;
        }
        if (!d->child && d->rescan_at && now >= d->rescan_at) {
            d->rescan_at = 0;
            d->pick = d->full_scan = true;
        }
        if (!d->term_signal && !d->child && d->pick && d->lease && d->watch_id &&
            d->retry_at < 0)
            pick(d);
        if (d->child && !d->term_signal && !d->state_watch && d->lease)
            watch_run_state(d);
        if (d->child && d->advance_at && now >= d->advance_at)
            advance_for_room(d);
        if (d->lease && now >= d->keepalive_at)
            keepalive(d);
        publish(d);
        int64_t wake = d->keepalive_at;
        if (d->retry_at >= 0 && (wake < 0 || d->retry_at < wake))
            wake = d->retry_at;
        int64_t at = d->child ? d->advance_at : d->rescan_at;
        if (at && (wake < 0 || at < wake))
            wake = at;
        struct pollfd p[3] = {{.fd = d->sigfd, .events = POLLIN},
                              {.fd = d->chldfd, .events = POLLIN},
                              {.fd = kv_event_fd(d->kv), .events = POLLIN}};
        if (poll(p, 3, ea_timeout_until(wake)) < 0 && errno != EINTR)
            return;
        if (p[0].revents)
            on_signal(d);
        if (p[1].revents) {
            proc_reap();
            int status = 0;
            if (d->child && proc_exit_status(d->child, &status, NULL) == 1) {
                proc_table_remove(d->child);
                run_ended(d, status);
            }
        }
        if (p[2].revents)
            on_store(d);
    }
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
                       .envp = envp, .cg = {.parent_fd = -1, .fd = -1}};
    const char *pool = NULL;
    bool help = false;
    int code = 0;
    if (parse(&d, argc, argv, envp, &pool, &help) < 0)
        code = AGENT_EXIT_USAGE;
    else if (help) {
        fputs(serve_help, stdout);
        daemon_print_options(stdout, runspec_serve_lists);
        fputs(serve_help_end, stdout);
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
