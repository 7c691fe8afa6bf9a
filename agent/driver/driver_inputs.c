// SPDX-License-Identifier: Apache-2.0
/* driver: what tells the driver about hosts — the discovery script and the store's failures/
 * records (see driver.h, driver_internal.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver_internal.h"
#include "ea_time.h"
#include "log.h"
#include "proc.h"
#include "state.h"

/* ---- discovery script ---------------------------------------------------------------------- */

void driver_disc_start(struct driver *d)
{
    int p[2];
    struct ea_error err = {0};
    if (pipe2(p, O_CLOEXEC) < 0) {
        log_error("discovery: pipe: %s", strerror(errno));
        d->disc_next = driver_now(d) + d->cfg->discovery_interval_ms;
        return;
    }
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    const char *argv[] = {d->cfg->host_discovery_script, NULL};
    struct proc_spawn_opts o = {.argv = argv,
                                .envp = (const char *const *)d->child_env,
                                .stdin_fd = devnull,
                                .stdout_fd = p[1],
                                .stderr_fd = -1,
                                .flags = PROC_NEW_PGROUP | PROC_DEATHSIG | PROC_CLOSE_FDS,
                                .deathsig = SIGKILL,
                                .report_fd = -1};
    pid_t pid;
    int r = proc_spawn(&o, &pid, NULL, &err);
    close(p[1]);
    if (devnull >= 0)
        close(devnull);
    if (r == 0 && proc_table_add(pid) < 0) {
        kill(pid, SIGKILL);
        r = ea_errorf(&err, -ENOMEM, "out of memory");
    }
    if (r < 0) {
        close(p[0]);
        if (!d->have_list) {
            log_error("cannot run the discovery script: %s", err.msg);
            d->done = true;
            d->exit_code = AGENT_EXIT_USAGE;
        } else {
            log_warn("cannot run the discovery script: %s; keeping the %zu host(s) known", err.msg,
                     d->n);
        }
        d->disc_next = driver_now(d) + d->cfg->discovery_interval_ms;
        return;
    }
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    d->disc_pid = pid;
    d->disc_fd = p[0];
    d->disc_len = 0;
    d->disc_overflow = d->disc_killed = false;
    d->disc_deadline = driver_now(d) + d->disc_timeout_ms;
    d->disc_next = -1;
}

void driver_disc_read(struct driver *d)
{
    char tmp[4096];
    while (d->disc_fd >= 0) {
        ssize_t n = read(d->disc_fd, tmp, sizeof(tmp));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            close(d->disc_fd);
            d->disc_fd = -1;
            return;
        }
        if (d->disc_len + (size_t)n > HOSTS_TEXT_MAX) {
            d->disc_overflow = true;
            continue;
        }
        memcpy(d->disc_buf + d->disc_len, tmp, (size_t)n);
        d->disc_len += (size_t)n;
    }
}

/* The script has exited with `status`: judge its output. */
void driver_disc_finish(struct driver *d, int status)
{
    const char *path = d->cfg->host_discovery_script;
    driver_disc_read(d);
    if (d->disc_fd >= 0) { /* a background child still holds the pipe: what came is all */
        close(d->disc_fd);
        d->disc_fd = -1;
    }
    proc_table_remove(d->disc_pid);
    d->disc_pid = -1;
    d->disc_next = driver_now(d) + d->cfg->discovery_interval_ms;
    if (d->term_signal || d->outcome >= 0)
        return; /* ending: killed on purpose, and no list matters any more */
    struct ea_error err = {0};
    struct host_list l = {0};
    if (d->disc_killed)
        ea_errorf(&err, -ETIMEDOUT, "discovery script '%s' did not finish within %.1f s: killed",
                  path, (double)d->disc_timeout_ms / 1000.0);
    else if (WIFSIGNALED(status))
        ea_errorf(&err, -EINTR, "discovery script '%s' was killed by SIG%s", path,
                  sigabbrev_np(WTERMSIG(status)));
    else if (WEXITSTATUS(status) != 0)
        ea_errorf(&err, -EIO, "discovery script '%s' exited with %d", path, WEXITSTATUS(status));
    else if (d->disc_overflow)
        ea_errorf(&err, -E2BIG, "discovery script '%s' printed more than %d bytes", path,
                  HOSTS_TEXT_MAX);
    else if (hosts_parse(d->disc_buf, d->disc_len, HOSTS_SCRIPT, &l, &err) < 0)
        ea_error_wrap(&err, err.code, "discovery script '%s' printed", path);
    if (err.code == 0 && driver_apply_list(d, &l) < 0)
        ea_errorf(&err, -ENOMEM, "out of memory");
    hosts_list_free(&l);
    if (err.code == 0) {
        d->have_list = true;
        return;
    }
    if (!d->have_list) {
        log_error("%s", err.msg);
        d->done = true;
        d->exit_code = AGENT_EXIT_USAGE;
        return;
    }
    size_t known = 0;
    for (size_t i = 0; i < d->n; i++)
        known += d->h[i].listed;
    log_warn("%s; keeping the previous %zu host(s)", err.msg, known);
}

/* ---- the store's failures/ records ---------------------------------------------------------- */

void driver_watch_open(struct driver *d)
{
    const struct cfg *c = d->cfg;
    struct kv_config kc = cfg_kv_config(c, 5000);
    struct ea_error err = {0};
    snprintf(d->fprefix, sizeof(d->fprefix), "%s%s/failures/", c->prefix, c->run_id);
    if (kv_open(&kc, &d->kv, &err) < 0 || kv_watch(d->kv, d->fprefix, 0, &d->watch_id, &err) < 0) {
        log_warn("cannot watch the store for worker failures (%s): hosts are blamed only when "
                 "their node exits",
                 err.msg);
        kv_close(d->kv);
        d->kv = NULL;
    }
}

static void on_failure_record(struct driver *d, const struct kv_entry *e)
{
    struct rdzv_failure f;
    struct ea_error err = {0};
    if (rdzv_failure_decode(e->value, e->value_len, &f, &err) < 0)
        return; /* the agents report it */
    for (size_t i = 0; i < d->n; i++) {
        struct dhost *h = &d->h[i];
        if (strcmp(h->node_id, f.node_id) != 0 || h->st != DH_RUNNING)
            continue;
        if (d->term_signal || d->outcome >= 0 || d->cfg->max_restarts == 0)
            return; /* no restart follows: nothing to protect */
        char why[160];
        if (f.signal)
            snprintf(why, sizeof(why), "worker rank %d died by SIG%s", f.rank,
                     sigabbrev_np(f.signal));
        else
            snprintf(why, sizeof(why), "worker rank %d exited with %d", f.rank, f.exit_code);
        h->blame = true;
        driver_stop_host(d, h, SIGTERM, why);
        return;
    }
}

void driver_on_store(struct driver *d)
{
    struct kv_event *ev = NULL;
    size_t n = 0;
    struct ea_error err = {0};
    if (kv_read_events(d->kv, &ev, &n, &err) < 0)
        return;
    bool rewatch = false;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == KV_EVENT_PUT && ev[i].watch_id == d->watch_id)
            on_failure_record(d, &ev[i].entry);
        rewatch |= ev[i].type == KV_EVENT_ERROR && ev[i].watch_id == d->watch_id;
    }
    kv_events_free(ev, n);
    if (rewatch && kv_watch(d->kv, d->fprefix, 0, &d->watch_id, &err) < 0) {
        log_warn("lost the store watch: %s", err.msg);
        kv_close(d->kv);
        d->kv = NULL;
    }
}
