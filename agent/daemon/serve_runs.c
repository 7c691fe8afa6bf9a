// SPDX-License-Identifier: Apache-2.0
/* serve's runs: picking one from the queue, starting its agent, its end, and the room a run
 * gets when a member leaves (serve_internal.h, docs/daemon.md). */
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

static bool skipped(struct daemon *d, const char *run)
{
    int64_t now = serve_now(d);
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
    d->skip[k].until = serve_now(d) + SKIP_MS;
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

void serve_watch_run_state(struct daemon *d)
{
    char key[POOL_KEY_MAX];
    pool_run_key(&d->pool, d->run, "state", key, sizeof(key));
    struct ea_error err = {0};
    if (kv_watch(d->kv, key, 0, &d->state_watch, &err) < 0) {
        log_warn("watching run '%s' for room: %s (retrying)", d->run, err.msg);
        d->state_watch = 0;
    }
}

void serve_on_run_state(struct daemon *d, const struct kv_event *ev)
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
    d->advance_at = serve_now(d) + (int64_t)(h % (uint32_t)window);
}

void serve_advance_for_room(struct daemon *d)
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
    serve_watch_run_state(d);
    log_info("joining run '%s' of pool '%s' (min %d, max %d) in seat %d: agent pid %ld; %s%s%s%s",
             s->run_id, d->pool.name, c.min_nodes, c.max_nodes, seat, (long)pid,
             v.verified ? "signed by '" : v.is_signed ? "signature not checked " : "unsigned",
             v.principal, v.verified ? "' " : "", v.fingerprint);
    struct ea_error perr = {0};
    if (serve_put_record(d, &perr) < 0)
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
void serve_pick(struct daemon *d)
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
        int64_t now = serve_now(d), at = pool_rescan_at(d->scan_ms, now);
        if (scan && at > now) { /* one scan per gap however often `next` is written */
            d->rescan_at = d->rescan_at && d->rescan_at < at ? d->rescan_at : at;
            d->pick = false;
            return;
        }
    }
    for (;;) {
        if (scan)
            d->scan_ms = serve_now(d);
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
    d->rescan_at = n_full && !d->child ? serve_now(d) + d->cfg.lease_ttl_ms : 0;
    d->pick = d->full_scan = false;
    d->m.store_down = false;
    d->backoff_ms = 0;
    runspec_clear(&s);
    return;
fail:
    runspec_clear(&s);
    serve_store_failed(d, "reading the pool", &err);
}

/* The run's agent exited: say how, close a run that timed out, and be idle again. */
void serve_run_ended(struct daemon *d, int status)
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
    if (d->lease && serve_put_record(d, &err) < 0)
        log_warn("updating this daemon's record: %s", err.msg);
}
