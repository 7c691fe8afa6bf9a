// SPDX-License-Identifier: Apache-2.0
/* status, the command: read a run from the store and print it (status.c's view); --watch
 * follows the store's watch. */
#include "status.h"
#include "health_view.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <time.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "ea_escape.h"
#include "ea_loop.h"
#include "ea_time.h"
#include "kv.h"
#include "status_node.h"

/* --agent: how long the node's agent has to answer /status. */
#define NODE_TIMEOUT_MS 2000
/* A one-shot status that catches a commit half-way waits this long for its `state`. */
#define COMMIT_WAIT_MS 5000
#define COMMIT_POLL_MS 20

/* ---- reading the store ----------------------------------------------------------------- */

struct status_cmd {
    const struct cfg *cfg;
    struct kv *kv;
    char prefix[512];
    struct kv_entry *keys; /* mirror of the run's keys (order irrelevant) */
    size_t n_keys, cap_keys;
    int64_t watch_id;
    char *last; /* the last view printed, to print only changes */
    bool tty;
};

/* A store error as an exit code, with one line on stderr. */
static int fail(int code, const struct ea_error *err, const char *what)
{
    ea_fprintf(stderr, "elastic-agent status: %s: %s\n", what,
               err->msg[0] ? err->msg : kv_strerror(code));
    if (code == KV_EINVAL || code == KV_EAUTH)
        return AGENT_EXIT_USAGE;
    if (code == KV_ECORRUPT || code == -EBADMSG)
        return AGENT_EXIT_RDZV;
    return AGENT_EXIT_STORE;
}

static void mirror_clear(struct status_cmd *sc)
{
    for (size_t i = 0; i < sc->n_keys; i++)
        kv_entry_clear(&sc->keys[i]);
    sc->n_keys = 0;
}

/* Insert or replace `e` (its strings are taken over), or delete its key. */
static int mirror_apply(struct status_cmd *sc, struct kv_entry *e, bool del)
{
    size_t i = 0;
    while (i < sc->n_keys && strcmp(sc->keys[i].key, e->key) != 0)
        i++;
    if (del) {
        if (i < sc->n_keys) {
            kv_entry_clear(&sc->keys[i]);
            sc->keys[i] = sc->keys[--sc->n_keys];
        }
        return 0;
    }
    if (i == sc->n_keys) {
        if (sc->n_keys == sc->cap_keys) {
            size_t cap = sc->cap_keys ? sc->cap_keys * 2 : 32;
            struct kv_entry *k = realloc(sc->keys, cap * sizeof(*k));
            if (!k)
                return -ENOMEM;
            sc->keys = k;
            sc->cap_keys = cap;
        }
        sc->n_keys++;
    } else {
        kv_entry_clear(&sc->keys[i]);
    }
    sc->keys[i] = *e;
    memset(e, 0, sizeof(*e));
    return 0;
}

/* List the run into the mirror; with `watch`, (re)start the watch just after the listing. */
static int resync(struct status_cmd *sc, bool watch, struct ea_error *err)
{
    if (sc->watch_id) {
        kv_watch_cancel(sc->kv, sc->watch_id);
        sc->watch_id = 0;
    }
    struct kv_list l = {0};
    int r = kv_list(sc->kv, sc->prefix, &l, err);
    if (r < 0)
        return r;
    mirror_clear(sc);
    for (size_t i = 0; i < l.n && r == 0; i++)
        r = mirror_apply(sc, &l.entries[i], false);
    int64_t rev = l.revision;
    kv_list_clear(&l);
    if (r < 0)
        return ea_errorf(err, r, "out of memory");
    return watch ? kv_watch(sc->kv, sc->prefix, rev + 1, &sc->watch_id, err) : 0;
}

/* ---- the loops (ea_loop.h) ---------------------------------------------------------------- */

/* SIGINT/SIGTERM/SIGHUP: a source of every loop here; `got` once one came (not read: the
 * process ends). */
struct sig_watch {
    int sigfd;
    bool got;
};

static size_t fds_signal(void *ctx, struct pollfd *fds, size_t max)
{
    (void)max;
    fds[0] = (struct pollfd){.fd = ((struct sig_watch *)ctx)->sigfd, .events = POLLIN};
    return 1;
}

static void ready_signal(void *ctx, const struct pollfd *fds, size_t n, int64_t now)
{
    (void)n, (void)now;
    if (fds[0].revents & POLLIN)
        ((struct sig_watch *)ctx)->got = true;
}

static const struct ea_loop_source signal_source = {"signals", 1, fds_signal, ready_signal, false};

/* A one-shot read that caught a commit half-way lists again every COMMIT_POLL_MS, until the view
 * decodes or COMMIT_WAIT_MS have passed. */
struct commit_wait {
    struct status_cmd *sc;
    struct rdzv_run_view *v;
    struct ea_error *err;
    int r;
    int64_t until, next;
    bool over;
};

static void step_commit(void *ctx, int64_t now)
{
    struct commit_wait *w = ctx;
    if (now >= w->next) {
        ea_error_clear(w->err);
        if ((w->r = resync(w->sc, false, w->err)) == 0)
            w->r = rdzv_run_view_decode(w->sc->prefix, w->sc->keys, w->sc->n_keys, w->v, w->err);
        w->next = now + COMMIT_POLL_MS;
    }
    w->over = w->r != -EAGAIN || now >= w->until;
}

static int64_t wake_commit(void *ctx)
{
    return ((const struct commit_wait *)ctx)->next;
}

static const struct ea_loop_step commit_steps[] = {{"commit", step_commit, wake_commit, true}};

static bool commit_over(void *ctx)
{
    return ((const struct commit_wait *)ctx)->over;
}

static int wait_commit(struct status_cmd *sc, struct rdzv_run_view *v, struct ea_error *err)
{
    int64_t now = ea_now_ms();
    struct commit_wait w = {.sc = sc, .v = v, .err = err, .r = -EAGAIN,
                            .until = now + COMMIT_WAIT_MS, .next = now + COMMIT_POLL_MS};
    struct ea_loop *l = ea_loop_create(NULL, commit_over, &w);
    if (!l || ea_loop_add_step(l, &commit_steps[0], &w) < 0) {
        ea_loop_destroy(l);
        return ea_errorf(err, -ENOMEM, "out of memory");
    }
    int r = ea_loop_run(l);
    ea_loop_destroy(l);
    return r < 0 ? ea_errorf(err, r, "waiting for the commit: %s", strerror(-r)) : w.r;
}

/* Print the mirrored run when it differs from the last print. -EPIPE when stdout is gone. */
static int show(struct status_cmd *sc, struct ea_error *err)
{
    struct rdzv_run_view v;
    int r = rdzv_run_view_decode(sc->prefix, sc->keys, sc->n_keys, &v, err);
    /* a commit caught half-way (chunks written, `state` not yet): --watch shows the next view,
     * which its `state` event brings; a one-shot read lists again, every COMMIT_POLL_MS for up to
     * COMMIT_WAIT_MS (the commit record follows its chunks in the coordinator's next request, but
     * a loaded coordinator can take a while: a count of quick retries ran out on a busy machine) */
    if (r == -EAGAIN && !sc->cfg->watch)
        r = wait_commit(sc, &v, err);
    if (r == -EAGAIN && sc->cfg->watch) {
        ea_error_clear(err);
        return 0;
    }
    if (r < 0)
        return r;
    struct hview hv = {0}; /* held-out nodes and the last recovery (observe/health_view.h) */
    if (hview_decode(sc->prefix, sc->keys, sc->n_keys, &hv) < 0) {
        rdzv_run_view_clear(&v);
        return ea_errorf(err, -ENOMEM, "out of memory");
    }
    char *text = NULL;
    /* --agent: one node's own view, which the store does not hold (observe/status_node.h); an
     * agent that does not answer is shown as such, not an error: it may be the one that died */
    json_t *node = NULL;
    struct ea_error nerr = {0};
    if (sc->cfg->agent_http &&
        status_node_fetch(sc->cfg->agent_http, NODE_TIMEOUT_MS, &node, &nerr) < 0)
        node = json_pack("{s:s}", "error", nerr.msg);
    if (sc->cfg->json) {
        json_t *j = status_to_json(sc->cfg->run_id, &v);
        if (j)
            hview_add_json(j, &hv);
        if (j && node)
            json_object_set(j, "agent", node);
        text = j ? json_dumps(j, sc->cfg->watch ? JSON_COMPACT : JSON_INDENT(2)) : NULL;
        json_decref(j);
    } else {
        size_t len = 0;
        FILE *m = open_memstream(&text, &len);
        if (m) {
            status_print_text(m, sc->cfg->run_id, &v);
            hview_print_text(m, &hv);
            if (node && json_object_get(node, "error"))
                ea_fprintf(m, "\nthis node: its agent at %s: %s\n", sc->cfg->agent_http,
                           json_string_value(json_object_get(node, "error")));
            else if (node)
                status_node_print_text(m, sc->cfg->agent_http, node);
            fclose(m);
        }
    }
    rdzv_run_view_clear(&v);
    hview_clear(&hv);
    json_decref(node);
    if (!text)
        return ea_errorf(err, -ENOMEM, "out of memory");
    if (sc->last && strcmp(sc->last, text) == 0) {
        free(text);
        return 0;
    }
    if (sc->cfg->watch && sc->tty)
        fputs("\033[H\033[2J", stdout); /* redraw in place */
    else if (sc->last && !sc->cfg->json)
        fputc('\n', stdout);
    fputs(text, stdout);
    if (sc->cfg->json)
        fputc('\n', stdout);
    free(sc->last);
    sc->last = text;
    if (fflush(stdout) == EOF)
        return ea_errorf(err, -EPIPE, "cannot write to stdout: %s", strerror(errno));
    return 0;
}

/* Apply what the watch delivered; a broken watch is repaired by listing again. */
static int on_events(struct status_cmd *sc, struct ea_error *err)
{
    struct kv_event *ev = NULL;
    size_t n = 0;
    int r = kv_read_events(sc->kv, &ev, &n, err);
    if (r < 0)
        return r;
    bool broken = false;
    for (size_t i = 0; i < n && r == 0; i++) {
        if (ev[i].watch_id != sc->watch_id)
            continue;
        if (ev[i].type == KV_EVENT_ERROR)
            broken = true;
        else
            r = mirror_apply(sc, &ev[i].entry, ev[i].type == KV_EVENT_DELETE);
    }
    kv_events_free(ev, n);
    if (r < 0)
        return ea_errorf(err, r, "out of memory");
    return broken ? resync(sc, true, err) : 0;
}

/* --watch: follow the store until SIGINT/SIGTERM/SIGHUP. */
struct follow {
    struct status_cmd *sc;
    struct sig_watch sig;
    struct ea_error *err;
    int r; /* a store error: the end */
};

static size_t fds_store(void *ctx, struct pollfd *fds, size_t max)
{
    (void)max;
    fds[0] = (struct pollfd){.fd = kv_event_fd(((struct follow *)ctx)->sc->kv), .events = POLLIN};
    return 1;
}

static void ready_store(void *ctx, const struct pollfd *fds, size_t n, int64_t now)
{
    struct follow *f = ctx;
    (void)n, (void)now;
    if (f->sig.got || !(fds[0].revents & POLLIN))
        return;
    int r = on_events(f->sc, f->err);
    if (r == 0)
        r = show(f->sc, f->err);
    f->r = r;
}

static const struct ea_loop_source store_source = {"store", 1, fds_store, ready_store, false};

static bool follow_over(void *ctx)
{
    const struct follow *f = ctx;
    return f->sig.got || f->r < 0;
}

/* Follow the store until SIGINT/SIGTERM (0), or a store error (its code). */
static int watch_loop(struct status_cmd *sc, int sigfd, struct ea_error *err)
{
    struct follow f = {.sc = sc, .sig = {.sigfd = sigfd}, .err = err};
    struct ea_loop *l = ea_loop_create(NULL, follow_over, &f);
    int r = l ? ea_loop_add_source(l, &signal_source, &f.sig) : -ENOMEM;
    if (r == 0)
        r = ea_loop_add_source(l, &store_source, &f);
    if (r == 0 && (r = ea_loop_run(l)) < 0)
        ea_errorf(err, r, "poll: %s", strerror(-r));
    else if (r < 0)
        ea_errorf(err, r, "out of memory");
    ea_loop_destroy(l);
    return r < 0 ? r : f.sig.got ? 0 : f.r;
}

/* --watch on a file store that does not exist yet: each pass watches the nearest existing
 * ancestor of `path` (inotify) and waits for something to appear in it, or a signal. */
struct dir_wait {
    const char *path;
    int ifd, wd;
    struct sig_watch sig;
    struct ea_error *err;
    int r;       /* 0 waiting, 1 it exists, or a negative errno */
    bool again;  /* look again at once: something appeared between the stat and the watch */
};

static void step_dir(void *ctx, int64_t now)
{
    struct dir_wait *w = ctx;
    (void)now;
    if (w->wd >= 0)
        inotify_rm_watch(w->ifd, w->wd);
    w->wd = -1;
    w->again = false;
    struct stat st;
    if (stat(w->path, &st) == 0) {
        w->r = 1;
        return;
    }
    char anc[PATH_MAX];
    snprintf(anc, sizeof(anc), "%s", w->path);
    for (;;) { /* cut components until an existing directory takes the watch */
        char *slash = strrchr(anc, '/');
        if (slash == anc)
            slash[1] = '\0';
        else if (slash)
            *slash = '\0';
        else
            snprintf(anc, sizeof(anc), ".");
        if ((w->wd = inotify_add_watch(w->ifd, anc, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR)) >= 0 ||
            (errno != ENOENT && errno != ENOTDIR) || !slash || slash == anc)
            break;
    }
    if (w->wd < 0) {
        w->r = ea_errorf(w->err, -errno, "cannot watch '%s' for '%s' to appear: %s", anc,
                         w->path, strerror(errno));
        return;
    }
    /* something may have been created between the stat and the watch: look again first */
    char next[PATH_MAX];
    const char *path = w->path;
    size_t alen = strlen(anc);
    size_t nlen = strcspn(path + alen + (path[alen] == '/'), "/");
    snprintf(next, sizeof(next), "%.*s", (int)(alen + (path[alen] == '/') + nlen), path);
    w->again = stat(next, &st) == 0;
}

static int64_t wake_dir(void *ctx)
{
    return ((const struct dir_wait *)ctx)->again ? 0 : -1; /* 0: a deadline passed already */
}

static const struct ea_loop_step dir_steps[] = {{"directory", step_dir, wake_dir, true}};

static size_t fds_dir(void *ctx, struct pollfd *fds, size_t max)
{
    (void)max;
    fds[0] = (struct pollfd){.fd = ((struct dir_wait *)ctx)->ifd, .events = POLLIN};
    return 1;
}

static void ready_dir(void *ctx, const struct pollfd *fds, size_t n, int64_t now)
{
    char buf[4096];
    (void)fds, (void)n, (void)now;
    while (read(((struct dir_wait *)ctx)->ifd, buf, sizeof(buf)) > 0)
        ;
}

static const struct ea_loop_source dir_source = {"inotify", 1, fds_dir, ready_dir, false};

static bool dir_over(void *ctx)
{
    const struct dir_wait *w = ctx;
    return w->r != 0 || w->sig.got;
}

/* Wait until `path` exists, without creating anything. 0 when it does, 1 on SIGINT/SIGTERM, or a
 * negative errno. */
static int wait_for_dir(const char *path, int sigfd, struct ea_error *err)
{
    struct dir_wait w = {.path = path, .wd = -1, .sig = {.sigfd = sigfd}, .err = err};
    if ((w.ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK)) < 0)
        return ea_errorf(err, -errno, "inotify: %s", strerror(errno));
    struct ea_loop *l = ea_loop_create(NULL, dir_over, &w);
    int r = l ? ea_loop_add_step(l, &dir_steps[0], &w) : -ENOMEM;
    if (r == 0)
        r = ea_loop_add_source(l, &signal_source, &w.sig);
    if (r == 0)
        r = ea_loop_add_source(l, &dir_source, &w);
    if (r == 0)
        r = ea_loop_run(l);
    ea_loop_destroy(l);
    close(w.ifd);
    if (r < 0)
        return ea_errorf(err, r, "waiting for '%s': %s", path, strerror(-r));
    return w.r < 0 ? w.r : w.r == 1 ? 0 : 1;
}

static int run(struct status_cmd *sc, int sigfd)
{
    const struct cfg *c = sc->cfg;
    struct ea_error err = {0};
    struct stat st;
    bool announced = false;
    /* a file store that does not exist holds no run; opening it would create it */
    if (strcmp(c->backend, "file") == 0 && stat(c->state_dir, &st) < 0) {
        if (!c->watch) {
            ea_fprintf(stderr,
                       "elastic-agent status: no run '%s': the file store '%s' does not exist\n",
                       c->run_id, c->state_dir);
            return AGENT_EXIT_RDZV;
        }
        ea_fprintf(stderr,
                   "elastic-agent status: waiting for run '%s' to appear (the file store "
                   "'%s' does not exist yet)\n",
                   c->run_id, c->state_dir);
        announced = true;
        int r = wait_for_dir(c->state_dir, sigfd, &err);
        if (r != 0)
            return r > 0 ? AGENT_EXIT_OK : fail(r, &err, "cannot wait for the store");
    }
    struct kv_config kc = cfg_kv_config(c, 0);
    int r = kv_open(&kc, &sc->kv, &err);
    if (r < 0)
        return fail(r, &err, "cannot open the store");
    snprintf(sc->prefix, sizeof(sc->prefix), "%s%s/", c->prefix, c->run_id);
    if ((r = resync(sc, c->watch, &err)) < 0)
        return fail(r, &err, "cannot read the run");
    if (sc->n_keys == 0 && !c->watch) {
        ea_fprintf(stderr,
                   "elastic-agent status: no run '%s' in the %s store (no keys under '%s')\n",
                   c->run_id, c->backend, sc->prefix);
        return AGENT_EXIT_RDZV;
    }
    if (sc->n_keys == 0 && !announced)
        ea_fprintf(stderr,
                   "elastic-agent status: waiting for run '%s' to appear in the %s store "
                   "(no keys under '%s' yet)\n",
                   c->run_id, c->backend, sc->prefix);
    /* --watch on a run that does not exist yet: the first view comes with its first key */
    if (sc->n_keys > 0)
        r = show(sc, &err);
    if (r == 0 && c->watch)
        r = watch_loop(sc, sigfd, &err);
    if (r == -EPIPE)
        return AGENT_EXIT_OK; /* the reader went away (| head): nothing more to say */
    return r < 0 ? fail(r, &err, "cannot show the run") : AGENT_EXIT_OK;
}

int status_main(int argc, char **argv, char **envp)
{
    struct cfg cfg;
    struct ea_error err = {0};
    if (cfg_parse_cmd(CFG_STATUS, argc, argv, envp, &cfg, &err) < 0) {
        ea_fprintf(stderr, "elastic-agent status: %s\n", err.msg);
        return AGENT_EXIT_USAGE;
    }
    if (cfg.help) {
        cfg_print_help_cmd(CFG_STATUS, stdout);
        return AGENT_EXIT_OK;
    }
    if (cfg.agent_http && status_node_check_addr(cfg.agent_http, &err) < 0) {
        ea_fprintf(stderr, "elastic-agent status: %s\n", err.msg);
        return AGENT_EXIT_USAGE;
    }
    /* blocked before the backend starts any thread, so SIGINT ends --watch through the fd */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    int sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sigfd < 0) {
        ea_fprintf(stderr, "elastic-agent status: signalfd: %s\n", strerror(errno));
        return AGENT_EXIT_STORE;
    }
    struct status_cmd sc = {.cfg = &cfg, .tty = isatty(STDOUT_FILENO) == 1};
    int code = run(&sc, sigfd);
    if (sc.watch_id)
        kv_watch_cancel(sc.kv, sc.watch_id);
    mirror_clear(&sc);
    free(sc.keys);
    free(sc.last);
    kv_close(sc.kv);
    close(sigfd);
    explicit_bzero(cfg.password_buf, sizeof(cfg.password_buf));
    return code;
}
