// SPDX-License-Identifier: Apache-2.0
/* group: start, stop and account for this node's workers of one round. */
#include "group.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <signal.h>
#include <unistd.h>

#include "log.h"
#include "workdir.h"
#include "workerenv.h"

void group_clear(struct group *g)
{
    for (int i = 0; i < g->n; i++)
        launch_release(g->launcher, g->w[i].proc);
    free(g->w);
    g->w = NULL;
    g->n = g->live = g->warm = g->inplace = 0;
}

/* Is local rank `r` in the --local-ranks-filter list (validated by cfg: "0,3")? NULL: all are. */
bool group_rank_shown(const char *filter, int r)
{
    if (!filter)
        return true;
    for (const char *p = filter; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            return false;
        if (v == r)
            return true;
        p = *end == ',' ? end + 1 : end;
    }
    return false;
}

static int start_one(struct group *g, const struct group_start *s, int local_rank,
                     const char *rounddir, const char *topo, const char *logdir,
                     struct ea_error *err)
{
    const struct rdzv_member *me = s->self;
    struct group_worker *w = &g->w[local_rank];
    memset(w, 0, sizeof(*w));
    w->local_rank = local_rank;
    w->rank = me->rank_base + local_rank;
    snprintf(w->error_file, sizeof(w->error_file), "%s/rank_%d.error.json", rounddir, w->rank);
    unlink(w->error_file);

    struct wenv_params wp = {
        .state = s->state,
        .self = s->self,
        .local_rank = local_rank,
        .master_addr = s->master_addr,
        .master_port = s->master_port,
        .generation = s->generation,
        .run_id = g->cfg->run_id,
        .error_file = w->error_file,
        .topology_file = topo,
        .base_env = s->envp,
        .dmlc_tracker = s->dmlc_tracker ? s->dmlc_tracker : g->cfg->dmlc_tracker,
        .ifaces = s->ifaces,
    };
    char hb[PATH_MAX], cks[PATH_MAX];
    if (g->cfg->checkpoint_memory_mb > 0) {
        snprintf(cks, sizeof(cks), WENV_CHECKPOINT_SOCKET_FMT, g->workdir);
        wp.checkpoint_socket = cks;
    }
    if (s->heartbeat_dir) {
        snprintf(hb, sizeof(hb), "%s/rank_%d", s->heartbeat_dir, w->rank);
        wp.heartbeat_file = hb;
    }
    if (g->cfg->env_style && wenv_parse_styles(g->cfg->env_style, &wp.styles, NULL) < 0)
        wp.styles = WENV_TORCH; /* validated by cfg; never reached */
    char **env = NULL;
    if (wenv_build(&wp, &env) < 0)
        return ea_errorf(err, -ENOMEM, "out of memory building the worker environment");
    char label[32], out[PATH_MAX], errp[PATH_MAX];
    snprintf(label, sizeof(label), "%d", w->rank);
    if (logdir) {
        snprintf(out, sizeof(out), "%s/rank_%d.out", logdir, w->rank);
        snprintf(errp, sizeof(errp), "%s/rank_%d.err", logdir, w->rank);
        int r = workdir_log_file(out, err);
        if (r < 0 || (r = workdir_log_file(errp, err)) < 0) {
            wenv_free(env);
            return r;
        }
    }
    /* a rank left out by --local-ranks-filter writes to its log files only, or nowhere */
    bool shown = group_rank_shown(g->cfg->local_ranks_filter, local_rank);
    struct launch_spec spec = {
        .argv = (const char *const *)g->cfg->command,
        .envp = (const char *const *)env,
        .label = label,
        .stdout_path = logdir ? out : shown ? NULL : "/dev/null",
        .stderr_path = logdir ? errp : shown ? NULL : "/dev/null",
        .tee = g->cfg->tee && shown,
        .stderr_tail = GROUP_STDERR_TAIL,
    };
    int r = -ENOENT;
    if (s->warm) { /* a parked spare gets what a cold worker's environment would hold */
        struct warm_take t = {.env = env, .generation = s->generation, .round = g->round,
                              .label = label, .stdout_path = logdir ? out : NULL,
                              .stderr_path = logdir ? errp : NULL};
        struct ea_error werr = {0};
        r = warm_assign(s->warm, local_rank, &t, &w->proc, &w->pid, &werr);
        for (int tries = 0; r < 0 && r != -ENOENT && tries < 2; tries++) {
            /* the in-place worker or spare is stopped: the parked spare next, else cold */
            log_warn("round %lld: local rank %d: %s; taking a parked spare or starting it cold",
                     (long long)g->round, local_rank, werr.msg);
            ea_error_clear(&werr);
            r = warm_assign(s->warm, local_rank, &t, &w->proc, &w->pid, &werr);
        }
        g->warm += r >= 0;
        g->inplace += r == 1;
        r = r > 0 ? 0 : r;
    }
    if (r < 0) {
        r = launch_start(g->launcher, &spec, &w->proc, err);
        if (r == 0)
            w->pid = launch_pid(g->launcher, w->proc);
    }
    wenv_free(env);
    if (r < 0)
        return r;
    w->alive = true;
    g->live++;
    return 0;
}

int group_start(struct group *g, const struct group_start *s, int *ret_failed_rank,
                struct ea_error *err)
{
    group_clear(g);
    const struct rdzv_member *me = s->self;
    g->w = calloc((size_t)me->nproc, sizeof(*g->w));
    if (!g->w)
        return ea_errorf(err, -ENOMEM, "out of memory");
    g->generation = s->generation;
    g->round = s->state->round;

    char rounddir[PATH_MAX], topo[PATH_MAX], logdir[PATH_MAX];
    snprintf(rounddir, sizeof(rounddir), "%s/round_%lld", g->workdir, (long long)g->round);
    int r = workdir_mkdirs(rounddir);
    if (r < 0)
        return ea_errorf(err, r, "cannot create '%s': %s", rounddir, strerror(-r));
    snprintf(topo, sizeof(topo), "%s/topology.json", rounddir);
    bool with_topo = s->topology && s->state->members;
    if (with_topo && (r = wenv_write_topology(s->state, topo, err)) < 0)
        return r;
    if (g->cfg->log_dir) {
        snprintf(logdir, sizeof(logdir), "%s/%s/%lld", g->cfg->log_dir, g->cfg->run_id,
                 (long long)g->round);
        if ((r = workdir_mkdirs(logdir)) < 0)
            return ea_errorf(err, r, "--log-dir: cannot create '%s': %s", logdir, strerror(-r));
        struct statvfs vfs;
        if (statvfs(logdir, &vfs) == 0 && (vfs.f_bavail == 0 || (vfs.f_files && !vfs.f_favail)))
            log_warn("--log-dir: no space left on the file system of '%s': worker output there "
                     "is lost", logdir);
    }
    for (int i = 0; i < me->nproc; i++) {
        g->n = i + 1;
        r = start_one(g, s, i, rounddir, with_topo ? topo : NULL, g->cfg->log_dir ? logdir : NULL,
                      err);
        if (r < 0) {
            g->n = i; /* the failed slot holds no process */
            *ret_failed_rank = i;
            return r;
        }
    }
    return 0;
}

void group_detach(struct group *g, int i)
{
    struct group_worker *w = &g->w[i];
    if (!w->alive)
        return;
    w->alive = false;
    w->proc = NULL; /* not released here: it is warm's */
    g->live--;
}

void group_stop(struct group *g)
{
    for (int i = 0; i < g->n; i++)
        if (g->w[i].alive)
            launch_stop(g->launcher, g->w[i].proc, g->cfg->stop_timeout_ms);
}

void group_kill(struct group *g)
{
    for (int i = 0; i < g->n; i++)
        if (g->w[i].alive)
            launch_signal(g->launcher, g->w[i].proc, SIGKILL);
}

void group_sync_pids(struct group *g)
{
    for (int i = 0; i < g->n; i++)
        if (g->w[i].alive && !g->w[i].pid && g->w[i].proc)
            g->w[i].pid = launch_pid(g->launcher, g->w[i].proc);
}

struct group_worker *group_on_exit(struct group *g, const struct launch_exit *e)
{
    for (int i = 0; i < g->n; i++) {
        struct group_worker *w = &g->w[i];
        if (w->proc == e->proc && w->alive) {
            w->alive = false;
            w->exit_code = e->exit_code;
            w->term_signal = e->term_signal;
            w->stderr_tail = e->stderr_tail;
            w->pid = w->pid ? w->pid : launch_pid(g->launcher, w->proc); /* 0 while starting */
            g->live--;
            return w;
        }
    }
    return NULL;
}

bool group_all_succeeded(const struct group *g)
{
    if (g->live > 0 || g->n == 0)
        return false;
    for (int i = 0; i < g->n; i++)
        if (g->w[i].exit_code != 0 || g->w[i].term_signal != 0)
            return false;
    return true;
}
