// SPDX-License-Identifier: Apache-2.0
/*
 * driver: driver mode's event loop (see driver.h), an ea_loop: one step (discovery, reconcile,
 * the end) that wakes at the next deadline (discovery, cooldowns, kill deadlines), and the
 * sources: the signal fd, the discovery script's stdout, the SIGCHLD signalfd of the child table
 * and the store's watch fd (failures/ records, to blame the host whose workers failed). The time
 * is the loop's clock (driver_now). No sleeps.
 *
 * Each host's child agent: proc_spawn() with its own process group (so a terminal's ^C reaches it
 * only through the driver) and PR_SET_PDEATHSIG=SIGTERM, so that a driver killed with SIGKILL
 * still gets every node to stop its workers and leave the run.
 */
#include "driver.h"
#include "driver_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ea_loop.h"
#include "ea_signal.h"
#include "ea_time.h"
#include "hostsource.h"
#include "kv.h"
#include "log.h"
#include "proc.h"

bool driver_wanted(const struct cfg *cfg)
{
    return cfg->hosts || cfg->hostfile || cfg->host_discovery_script;
}

/* ---- hosts and their child agents ------------------------------------------------------------ */

static size_t alive(const struct driver *d)
{
    size_t k = 0;
    for (size_t i = 0; i < d->n; i++)
        k += d->h[i].st == DH_RUNNING || d->h[i].st == DH_STOPPING;
    return k;
}

void driver_stop_host(struct driver *d, struct dhost *h, int sig, const char *why)
{
    if (h->st != DH_RUNNING && !(h->st == DH_STOPPING && sig == SIGKILL))
        return;
    if (why)
        log_info("host '%s': %s: stopping its node '%s' (pid %ld)", h->name, why, h->node_id,
                 (long)h->pid);
    kill(h->pid, sig);
    if (h->st == DH_RUNNING)
        h->kill_at = driver_now(d) + d->cfg->stop_timeout_ms + KILL_GRACE_MS;
    h->st = DH_STOPPING;
}

static void cool_down(struct driver *d, struct dhost *h, const char *why)
{
    int64_t now = driver_now(d);
    if (now - h->started_at >= DRIVER_COOLDOWN_CAP_MS)
        h->failures = 0; /* it had been fine for a long while: a fresh start */
    h->failures++;
    int64_t ms = driver_cooldown_ms(d->cfg->host_cooldown_ms, h->failures);
    h->retry_at = now + ms;
    h->st = DH_COOLDOWN;
    log_warn("host '%s': %s; blacklisted for %.1f s (failure %d in a row)", h->name, why,
             (double)ms / 1000.0, h->failures);
}

static void start_host(struct driver *d, struct dhost *h)
{
    char pwfd_arg[16];
    struct driver_child c = {.exe = d->exe,
                             .host = h->name,
                             .slots = h->slots,
                             .node_id = h->node_id,
                             .min_nodes = d->min_nodes,
                             .max_nodes = d->max_nodes,
                             .password_fd = d->cfg->user ? pwfd_arg : NULL};
    char **argv = NULL;
    struct ea_error err = {0};
    pid_t pid = -1;
    int pwfd = -1; /* this child's own hand-over socket (cfg_password_socket) */
    int r = d->cfg->user ? cfg_password_socket(d->cfg, &pwfd, &err) : 0;
    snprintf(pwfd_arg, sizeof(pwfd_arg), "%d", pwfd);
    if (r == 0)
        r = driver_child_argv(d->argc, d->argv, d->cfg->command, &c, &argv, &err);
    if (r == 0) {
        struct proc_spawn_opts o = {.argv = (const char *const *)argv,
                                    .envp = (const char *const *)d->child_env,
                                    .stdin_fd = -1,
                                    .stdout_fd = -1,
                                    .stderr_fd = -1,
                                    .flags = PROC_NEW_PGROUP | PROC_DEATHSIG | PROC_CLOSE_FDS,
                                    .deathsig = SIGTERM,
                                    .report_fd = -1,
                                    .keep_fd = pwfd};
        r = proc_spawn(&o, &pid, NULL, &err);
    }
    if (pwfd >= 0)
        close(pwfd);
    free(argv);
    if (r == 0 && (r = proc_table_add(pid)) < 0) {
        kill(pid, SIGKILL);
        ea_errorf(&err, r, "out of memory");
    }
    int64_t now = driver_now(d);
    if (r < 0) {
        char why[EA_ERROR_MSG_MAX + 32];
        snprintf(why, sizeof(why), "cannot start its node: %s", err.msg);
        h->started_at = now; /* a failure in a row, not after a long good run */
        cool_down(d, h, why);
        return;
    }
    h->pid = pid;
    h->st = DH_RUNNING;
    h->blame = false;
    h->started_at = now;
    log_info("host '%s': started node '%s' with %d slot(s) (pid %ld)", h->name, h->node_id,
             h->slots, (long)pid);
}

static void set_outcome(struct driver *d, int code, const struct dhost *h)
{
    if (d->outcome >= 0)
        return;
    d->outcome = code;
    d->outcome_at = driver_now(d);
    log_info("node of host '%s' exited with %d: the run %s; waiting for the other nodes", h->name,
             code,
             code == 0   ? "succeeded"
             : code == 1 ? "failed"
             : code == 3 ? "lost its store"
                         : "could not form (too few hosts)");
}

static void on_child_exit(struct driver *d, struct dhost *h, int status)
{
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    bool ours = h->st == DH_STOPPING;
    proc_table_remove(h->pid);
    h->pid = -1;
    h->st = DH_IDLE;
    char why[96];
    bool blamed = h->blame;
    h->blame = false;
    if (code == 0 || code == 1) { /* only the end of the run makes a node exit so */
        set_outcome(d, code, h);
    } else if (blamed) {
        cool_down(d, h, "its workers failed");
    } else if (ours) {
        log_info("host '%s': node stopped (exit %d)", h->name, code);
    } else if ((code == 3 || code == 4) && alive(d) == 0) {
        set_outcome(d, code, h);
    } else {
        if (WIFSIGNALED(status))
            snprintf(why, sizeof(why), "its node was killed by SIG%s",
                     sigabbrev_np(WTERMSIG(status)));
        else
            snprintf(why, sizeof(why), "its node exited with %d", code);
        cool_down(d, h, why);
    }
}

static struct dhost *host_add(struct driver *d, const char *name)
{
    for (size_t i = 0; i < d->n; i++)
        if (strcmp(d->h[i].name, name) == 0)
            return &d->h[i];
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 8;
        struct dhost *v = realloc(d->h, nc * sizeof(*v));
        if (!v)
            return NULL;
        d->h = v;
        d->cap = nc;
    }
    struct dhost *h = &d->h[d->n++];
    *h = (struct dhost){.st = DH_IDLE, .pid = -1};
    snprintf(h->name, sizeof(h->name), "%s", name);
    hosts_node_id(name, h->node_id, sizeof(h->node_id));
    return h;
}

/* Make `l` the current host list. */
int driver_apply_list(struct driver *d, const struct host_list *l)
{
    size_t before = 0;
    for (size_t i = 0; i < d->n; i++) {
        before += d->h[i].listed;
        d->h[i].was_listed = d->h[i].listed;
        d->h[i].listed = false;
    }
    char summary[512] = "";
    size_t o = 0;
    bool changed = before != l->n;
    for (size_t i = 0; i < l->n; i++) {
        struct dhost *h = host_add(d, l->v[i].name);
        if (!h)
            return -ENOMEM;
        int slots = l->v[i].slots ? l->v[i].slots : d->cfg->nproc_per_node;
        changed |= !h->was_listed || slots != h->slots;
        if (h->st == DH_RUNNING && slots != h->slots)
            driver_stop_host(d, h, SIGTERM, "its slot count changed");
        h->slots = slots;
        if (o + 1 < sizeof(summary))
            o += (size_t)snprintf(summary + o, sizeof(summary) - o, "%s%s:%d", i ? "," : "",
                                  h->name, slots);
        h->listed = true;
    }
    if (changed)
        log_info("%zu host(s): %s", l->n, summary);
    for (size_t i = 0; i < d->n; i++)
        if (!d->h[i].listed && d->h[i].st == DH_RUNNING)
            driver_stop_host(d, &d->h[i], SIGTERM, "no longer listed");
    return 0;
}

/* Start what should run, stop what should not, expire cooldowns and kill deadlines. */
static void reconcile(struct driver *d)
{
    int64_t now = driver_now(d);
    bool ending = d->term_signal || d->outcome >= 0;
    for (size_t i = 0; i < d->n; i++) {
        struct dhost *h = &d->h[i];
        if (h->st == DH_COOLDOWN && now >= h->retry_at) {
            h->st = DH_IDLE;
            if (h->listed && !ending)
                log_info("host '%s': cooldown over, retrying", h->name);
        }
        if (h->st == DH_IDLE && h->listed && !ending && d->have_list)
            start_host(d, h);
        if (h->st == DH_STOPPING && now >= h->kill_at) {
            log_warn("host '%s': node still running %.1f s after SIGTERM: SIGKILL", h->name,
                     (double)(d->cfg->stop_timeout_ms + KILL_GRACE_MS) / 1000.0);
            kill(h->pid, SIGKILL);
            h->kill_at = INT64_MAX;
        }
        /* the run has ended: nodes leave by themselves; stragglers are told to */
        if (h->st == DH_RUNNING && d->outcome >= 0 &&
            now >= d->outcome_at + d->cfg->lease_ttl_ms + d->cfg->stop_timeout_ms + KILL_GRACE_MS)
            driver_stop_host(d, h, SIGTERM, "the run has ended");
    }
    /* nothing can run for --join-timeout: give up like an agent would */
    if (!ending && d->have_list && alive(d) == 0) {
        if (d->idle_since < 0)
            d->idle_since = now;
        else if (now - d->idle_since >= d->cfg->join_timeout_ms) {
            log_error("no host could run a node for %.1f s (--join-timeout)",
                      (double)(now - d->idle_since) / 1000.0);
            d->outcome = AGENT_EXIT_RDZV;
            d->outcome_at = now;
        }
    } else {
        d->idle_since = -1;
    }
}

/* ---- the loop ---------------------------------------------------------------------------------
 */

static void on_signals(struct driver *d)
{
    struct signalfd_siginfo si;
    while (read(d->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        int sig = (int)si.ssi_signo;
        if (d->term_signal) {
            log_warn("second signal %d: killing every node now", sig);
            for (size_t i = 0; i < d->n; i++)
                driver_stop_host(d, &d->h[i], SIGKILL, NULL);
            continue;
        }
        d->term_signal = sig;
        log_info("received SIG%s: stopping every node", sigabbrev_np(sig));
        for (size_t i = 0; i < d->n; i++)
            driver_stop_host(d, &d->h[i], SIGTERM, NULL);
        if (d->disc_pid > 0) {
            kill(-d->disc_pid, SIGKILL);
            d->disc_killed = true;
        }
    }
}

static void on_children(struct driver *d)
{
    struct signalfd_siginfo si;
    while (read(d->chldfd, &si, sizeof(si)) > 0)
        ;
    proc_reap();
    int st;
    for (size_t i = 0; i < d->n; i++)
        if (d->h[i].pid > 0 && proc_exit_status(d->h[i].pid, &st, NULL) == 1)
            on_child_exit(d, &d->h[i], st);
    if (d->disc_pid > 0 && proc_exit_status(d->disc_pid, &st, NULL) == 1)
        driver_disc_finish(d, st);
}

/* The earliest deadline, or -1. */
static int64_t next_deadline(const struct driver *d)
{
    int64_t t = -1;
#define EARLIER(x) (t = (t < 0 || (x) < t) ? (x) : t)
    if (d->disc_pid > 0 && !d->disc_killed)
        EARLIER(d->disc_deadline);
    if (d->disc_next >= 0 && d->cfg->host_discovery_script && !d->term_signal && d->outcome < 0)
        EARLIER(d->disc_next);
    for (size_t i = 0; i < d->n; i++) {
        const struct dhost *h = &d->h[i];
        if (h->st == DH_COOLDOWN)
            EARLIER(h->retry_at);
        if (h->st == DH_STOPPING && h->kill_at != INT64_MAX)
            EARLIER(h->kill_at);
    }
    if (d->outcome >= 0)
        EARLIER(d->outcome_at + d->cfg->lease_ttl_ms + d->cfg->stop_timeout_ms + KILL_GRACE_MS);
    if (d->idle_since >= 0)
        EARLIER(d->idle_since + d->cfg->join_timeout_ms);
#undef EARLIER
    return t;
}

/* A pass (ea_loop.h): start or time out the discovery script, reconcile the hosts with the list,
 * and end once the run is over and every node's agent has exited; it wakes at the earliest
 * deadline (discovery, cooldowns, kill deadlines, the run's end, the join timeout). */
static void step_driver(void *ctx, int64_t now)
{
    struct driver *d = ctx;
    if (d->cfg->host_discovery_script && d->disc_pid < 0 && d->disc_next >= 0 &&
        now >= d->disc_next && !d->term_signal && d->outcome < 0)
        driver_disc_start(d);
    if (d->disc_pid > 0 && !d->disc_killed &&
        (now >= d->disc_deadline || d->term_signal || d->outcome >= 0)) {
        kill(-d->disc_pid, SIGKILL);
        d->disc_killed = true;
    }
    reconcile(d);
    if ((d->term_signal || d->outcome >= 0) && alive(d) == 0 && d->disc_pid < 0) {
        d->done = true;
        d->exit_code = d->term_signal ? 128 + d->term_signal : d->outcome;
    }
}

static int64_t wake_driver(void *ctx)
{
    return next_deadline(ctx);
}

static const struct ea_loop_step driver_steps[] = {
    {"driver", step_driver, wake_driver, true},
};

static size_t one_fd(int fd, struct pollfd *fds)
{
    fds[0] = (struct pollfd){.fd = fd, .events = POLLIN}; /* -1: none now (poll ignores it) */
    return 1;
}

static size_t fds_signals(void *ctx, struct pollfd *fds, size_t max)
{
    (void)max;
    return one_fd(((struct driver *)ctx)->sigfd, fds);
}

static void ready_signals(void *ctx, const struct pollfd *fds, size_t n, int64_t now)
{
    (void)fds, (void)n, (void)now;
    on_signals(ctx);
}

static size_t fds_discovery(void *ctx, struct pollfd *fds, size_t max)
{
    (void)max;
    return one_fd(((struct driver *)ctx)->disc_fd, fds);
}

static void ready_discovery(void *ctx, const struct pollfd *fds, size_t n, int64_t now)
{
    (void)fds, (void)n, (void)now;
    driver_disc_read(ctx);
}

static size_t fds_children(void *ctx, struct pollfd *fds, size_t max)
{
    (void)max;
    return one_fd(((struct driver *)ctx)->chldfd, fds);
}

static void ready_children(void *ctx, const struct pollfd *fds, size_t n, int64_t now)
{
    (void)fds, (void)n, (void)now;
    on_children(ctx);
}

static size_t fds_store(void *ctx, struct pollfd *fds, size_t max)
{
    const struct driver *d = ctx;
    (void)max;
    return one_fd(d->kv ? kv_event_fd(d->kv) : -1, fds);
}

static void ready_store(void *ctx, const struct pollfd *fds, size_t n, int64_t now)
{
    (void)fds, (void)n, (void)now;
    driver_on_store(ctx);
}

static const struct ea_loop_source driver_sources[] = {
    {"signals", 1, fds_signals, ready_signals, false},
    {"discovery", 1, fds_discovery, ready_discovery, false},
    {"children", 1, fds_children, ready_children, false},
    {"store", 1, fds_store, ready_store, false},
};

bool driver_done(void *ctx)
{
    return ((const struct driver *)ctx)->done;
}

int driver_loop_add(struct ea_loop *l, struct driver *d)
{
    int r = 0;
    for (size_t i = 0; r == 0 && i < sizeof(driver_steps) / sizeof(driver_steps[0]); i++)
        r = ea_loop_add_step(l, &driver_steps[i], d);
    for (size_t i = 0; r == 0 && i < sizeof(driver_sources) / sizeof(driver_sources[0]); i++)
        r = ea_loop_add_source(l, &driver_sources[i], d);
    return r;
}

static void loop(struct driver *d)
{
    struct ea_loop *l = ea_loop_create(d->clock, driver_done, d);
    int r = l ? driver_loop_add(l, d) : -ENOMEM;
    if (r == 0)
        r = ea_loop_run(l);
    ea_loop_destroy(l);
    if (r < 0) {
        log_error("the loop: %s", strerror(-r));
        d->exit_code = AGENT_EXIT_RDZV;
    }
}

/* ---- set-up -----------------------------------------------------------------------------------
 */

static bool driver_var(const char *e)
{
    static const char *const vars[] = {
        "ELASTIC_HOSTS=", "ELASTIC_HOSTFILE=", "ELASTIC_HOST_DISCOVERY_SCRIPT=",
        "ELASTIC_HOST=",  "ELASTIC_NODE_ID=",  NULL};
    for (const char *const *v = vars; *v; v++)
        if (strncmp(e, *v, strlen(*v)) == 0)
            return true;
    return false;
}

/* Refuse what driver mode cannot honour; 0 or an exit code. */
static int check(struct driver *d, char **envp)
{
    const struct cfg *c = d->cfg;
    if (c->standalone || strcmp(c->backend, "memory") == 0) {
        log_error("driver mode runs one node per host in separate processes: it needs a shared "
                  "store (file, etcd), not --standalone or the memory backend");
        return AGENT_EXIT_USAGE;
    }
    if (strcmp(c->nic_discovery, "on") == 0 || c->iface) {
        log_error("%s: NIC discovery probes from each node's agent, and in driver mode every "
                  "node's agent runs here, not on its host: not available in driver mode",
                  c->iface ? "--iface" : "--nic-discovery on");
        return AGENT_EXIT_USAGE;
    }
    if (c->http && c->http_port != 0) {
        log_error("--http with a fixed port: every host's node would serve it; in driver mode "
                  "use port 0 (each node logs its own) or none");
        return AGENT_EXIT_USAGE;
    }
    int k = 1;
    while (k < d->argc && d->argv + k != c->command)
        k++;
    for (int i = 1; i < k; i++)
        if (strncmp(d->argv[i], "--node-id", 9) == 0 &&
            (d->argv[i][9] == '\0' || d->argv[i][9] == '=')) {
            log_error("--node-id: in driver mode each host's node id is made from its name");
            return AGENT_EXIT_USAGE;
        }
    for (char **e = envp; e && *e; e++)
        if (strncmp(*e, "ELASTIC_NODE_ID=", 16) == 0 && (*e)[16]) {
            log_error("ELASTIC_NODE_ID: in driver mode each host's node id is made from its "
                      "name; unset it");
            return AGENT_EXIT_USAGE;
        }
    return 0;
}

static int initial_list(struct driver *d)
{
    const struct cfg *c = d->cfg;
    struct host_list l = {0};
    struct ea_error err = {0};
    if (c->host_discovery_script) {
        d->disc_next = driver_now(d); /* first run at once; the loop waits for it */
        d->min_nodes = d->bounds_given ? c->min_nodes : 1;
        d->max_nodes = d->bounds_given ? c->max_nodes : HOSTS_MAX;
        return 0;
    }
    int r = c->hosts
                ? hosts_parse_named("--hosts", c->hosts, strlen(c->hosts), HOSTS_LIST, &l, &err)
                : hosts_parse_file(c->hostfile, &l, &err);
    if (r < 0) {
        log_error("%s", err.msg);
        return AGENT_EXIT_USAGE;
    }
    d->min_nodes = d->bounds_given ? c->min_nodes : (int)l.n;
    d->max_nodes = d->bounds_given ? c->max_nodes : (int)l.n;
    if (l.n < (size_t)d->min_nodes) {
        log_error("%zu host(s) listed but --min is %d: the run can never start", l.n, d->min_nodes);
        hosts_list_free(&l);
        return AGENT_EXIT_RDZV;
    }
    r = driver_apply_list(d, &l);
    hosts_list_free(&l);
    if (r < 0)
        return AGENT_EXIT_RDZV;
    d->have_list = true;
    return 0;
}

int driver_run(const struct cfg *cfg, int argc, char **argv, char **envp)
{
    struct driver d = {.cfg = cfg,
                       .argc = argc,
                       .argv = argv,
                       .sigfd = -1,
                       .chldfd = -1,
                       .clock = &ea_clock_real,
                       .disc_pid = -1,
                       .disc_fd = -1,
                       .disc_next = -1,
                       .outcome = -1,
                       .idle_since = -1};
    log_init(cfg->log_level, "driver");
    if (strcmp(cfg->log_format, "json") == 0)
        log_set_json(cfg->run_id);
    int code = check(&d, envp);
    if (code)
        return code;
    ssize_t el = readlink("/proc/self/exe", d.exe, sizeof(d.exe) - 1);
    d.exe[el > 0 ? el : 0] = '\0';
    if (el <= 0 || (size_t)el >= sizeof(d.exe) - 1 || strstr(d.exe, " (deleted)"))
        snprintf(d.exe, sizeof(d.exe), "/proc/self/exe"); /* replaced on disk: still runs */
    d.bounds_given = driver_bounds_given(argc, argv, cfg->command, envp);
    int64_t to = 2 * cfg->discovery_interval_ms;
    d.disc_timeout_ms = to < DISC_TIMEOUT_MIN_MS   ? DISC_TIMEOUT_MIN_MS
                        : to > DISC_TIMEOUT_MAX_MS ? DISC_TIMEOUT_MAX_MS
                                                   : to;
    size_t ne = 0;
    for (char **e = envp; e && *e; e++)
        ne++;
    d.child_env = calloc(ne + 1, sizeof(char *));
    d.disc_buf = cfg->host_discovery_script ? malloc(HOSTS_TEXT_MAX) : NULL;
    if (!d.child_env || (cfg->host_discovery_script && !d.disc_buf)) {
        log_error("out of memory");
        code = AGENT_EXIT_RDZV;
        goto out;
    }
    ne = 0;
    for (char **e = envp; e && *e; e++)
        if (!driver_var(*e))
            d.child_env[ne++] = *e;
    if ((code = initial_list(&d)) != 0)
        goto out;
    sigset_t set;
    ea_term_sigset(&set);
    struct ea_error err = {0};
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0 ||
        (d.sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
        log_error("cannot set up signals: %s", strerror(errno));
        code = AGENT_EXIT_RDZV;
        goto out;
    }
    signal(SIGPIPE, SIG_IGN);
    /* a subreaper: what a host's agent and its guards let go of comes here, not to init, and
     * is killed when the run ends (below) */
    if (proc_table_open(&d.chldfd, &err) < 0 || proc_set_subreaper(&err) < 0) {
        log_error("%s", err.msg);
        code = AGENT_EXIT_RDZV;
        goto out;
    }
    driver_watch_open(&d);
    log_info("driver mode: run '%s' on the %s store, nodes min %d max %d, launcher %s%s%s",
             cfg->run_id, cfg->backend, d.min_nodes, d.max_nodes, cfg->launcher,
             cfg->host_discovery_script ? ", hosts from " : "",
             cfg->host_discovery_script ? cfg->host_discovery_script : "");
    loop(&d);
    code = d.exit_code;
    log_info("driver exiting with %d", code);
out:
    for (size_t i = 0; i < d.n; i++) /* only on a loop error: the loop waits for every node */
        if (d.h[i].pid > 0)
            kill(d.h[i].pid, SIGKILL);
    if (d.disc_pid > 0)
        kill(-d.disc_pid, SIGKILL);
    if (d.chldfd >= 0 && proc_kill_strays_until(ea_now_ms() + 1000) < 0) /* real time */
        log_warn("processes the run left behind were still being killed after 1 s");
    if (d.chldfd >= 0)
        proc_table_close();
    if (d.kv)
        kv_close(d.kv);
    if (d.disc_fd >= 0)
        close(d.disc_fd);
    if (d.sigfd >= 0)
        close(d.sigfd);
    free(d.disc_buf);
    free(d.child_env);
    free(d.h);
    return code;
}
