// SPDX-License-Identifier: Apache-2.0
/* warm: parked spares, their sockets, their deadlines and their hand-over. */
#include "warm.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ea_time.h"
#include "warm_internal.h"
#include "warm_proto.h"

/* ---- bookkeeping -------------------------------------------------------------------------- */

void warm_close_fd(struct warm *w, struct spare *s)
{
    (void)w;
    if (s->fd < 0)
        return;
    close(s->fd);
    s->fd = -1;
}

/* Forget a spare (its process is released, or the caller's). */
void warm_remove_spare(struct warm *w, struct spare *s)
{
    warm_close_fd(w, s);
    free(s->out);
    for (size_t i = 0; i < w->n; i++)
        if (w->v[i] == s) {
            memmove(&w->v[i], &w->v[i + 1], (w->n - i - 1) * sizeof(*w->v));
            w->n--;
            break;
        }
    free(s);
}

void warm_stop_spare(struct warm *w, struct spare *s)
{
    warm_close_fd(w, s);
    s->state = SP_STOPPING;
    launch_stop(w->c.launcher, s->proc, w->c.stop_grace_ms);
}

/* A taken spare holds its rank: count it done for warm_assigned_ms. */
void warm_taken_done(struct warm *w, struct spare *s)
{
    bool pending = s->state == SP_TAKEN || s->state == SP_REASSIGNED; /* not settled yet */
    if (pending && s->gen == w->cur_gen && --w->cur_pending == 0)
        w->cur_done_ms = ea_now_ms();
}

/* A spare or an in-place worker was sent generation `gen`: warm_assigned_ms waits for it too. */
void warm_count_assigned(struct warm *w, int64_t gen)
{
    if (w->cur_gen != gen) {
        w->cur_gen = gen;
        w->cur_pending = 0;
        w->cur_done_ms = -1;
    }
    w->cur_pending++;
}

pid_t spare_pid(const struct warm *w, struct spare *s)
{
    if (!s->pid && s->proc)
        s->pid = launch_pid(w->c.launcher, s->proc);
    return s->pid;
}

void warm_add_fault(struct warm *w, struct spare *s, const char *fmt, ...)
{
    if (w->n_faults == w->cap_faults) {
        size_t cap = w->cap_faults ? w->cap_faults * 2 : 4;
        struct warm_fault *f = realloc(w->faults, cap * sizeof(*f));
        if (!f)
            return; /* the spare is dealt with all the same; only the message is lost */
        w->faults = f;
        w->cap_faults = cap;
    }
    struct warm_fault *f = &w->faults[w->n_faults++];
    memset(f, 0, sizeof(*f));
    f->local_rank = s->local_rank;
    f->pid = spare_pid(w, s);
    f->assigned = s->state == SP_TAKEN || s->state == SP_RUNNING || s->state == SP_REASSIGNED;
    f->held = s->state == SP_HELD;
    bool inplace = s->state == SP_RUNNING || s->state == SP_HELD || s->state == SP_REASSIGNED;
    int n = snprintf(f->message, sizeof(f->message), "local rank %d's %s (pid %ld) ",
                     s->local_rank, inplace ? "in-place worker" : "warm spare", (long)f->pid);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof(f->message))
        vsnprintf(f->message + n, sizeof(f->message) - (size_t)n, fmt, ap);
    va_end(ap);
}

/* Stop every parked spare; with `suspend`, park none until the next round started. */
static void drop_parked(struct warm *w, bool suspend)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->v[i]->state == SP_PARKED)
            warm_stop_spare(w, w->v[i]);
    if (suspend)
        w->suspended = true;
}

/* A spare broke the protocol or missed its deadline. A parked one takes its whole set with it
 * (the next round starts cold); a held one is stopped (its local rank starts from a spare or
 * cold); a taken one is the caller's to fail, we only let go of it. */
void warm_fault_spare(struct warm *w, struct spare *s)
{
    if (s->state == SP_PARKED) {
        drop_parked(w, true);
    } else if (s->state == SP_HELD) {
        warm_stop_spare(w, s);
    } else if (s->state != SP_STOPPING) {
        warm_taken_done(w, s);
        warm_remove_spare(w, s);
    }
}

/* ---- create, destroy ---------------------------------------------------------------------- */

static char **copy_env(char *const *env)
{
    size_t n = 0;
    while (env && env[n])
        n++;
    char **v = calloc(n + 1, sizeof(*v));
    for (size_t i = 0; v && i < n; i++)
        if (!(v[i] = strdup(env[i]))) {
            for (size_t k = 0; k < i; k++)
                free(v[k]);
            free(v);
            return NULL;
        }
    return v;
}

static void free_env(char **env)
{
    for (size_t i = 0; env && env[i]; i++)
        free(env[i]);
    free(env);
}

int warm_create(const struct warm_config *c, struct warm **ret, struct ea_error *err)
{
    if (c->nproc < 1 || !c->command || !c->command[0])
        return ea_errorf(err, -EINVAL, "warm: no command or no worker slot");
    struct warm *w = calloc(1, sizeof(*w));
    if (!w)
        return ea_errorf(err, -ENOMEM, "out of memory");
    w->c = *c;
    w->env = copy_env(c->env);
    w->log_dir = c->log_dir ? strdup(c->log_dir) : NULL;
    w->shown = calloc((size_t)c->nproc, sizeof(*w->shown));
    w->last_gen = calloc((size_t)c->nproc, sizeof(*w->last_gen));
    w->cur_done_ms = -1;
    if (!w->env || (c->log_dir && !w->log_dir) || !w->shown || !w->last_gen) {
        int e = ENOMEM;
        warm_destroy(w);
        return ea_errorf(err, -e, "cannot set up warm spares: %s", strerror(e));
    }
    for (int i = 0; i < c->nproc; i++)
        w->shown[i] = !c->shown || c->shown[i];
    w->c.env = NULL;
    w->c.log_dir = NULL;
    w->c.shown = NULL;
    *ret = w;
    return 0;
}

void warm_destroy(struct warm *w)
{
    if (!w)
        return;
    while (w->n > 0) {
        struct spare *s = w->v[w->n - 1];
        bool ours = s->state == SP_PARKED || s->state == SP_STOPPING || s->state == SP_HELD;
        if (ours) /* a running one is SIGKILLed (its group), reaped later; the rest the group's */
            launch_release(w->c.launcher, s->proc);
        warm_remove_spare(w, s);
    }
    free(w->v);
    free(w->faults);
    free(w->last_gen);
    free(w->shown);
    free(w->log_dir);
    free_env(w->env);
    free(w);
}

/* ---- parking ------------------------------------------------------------------------------ */

/* Start the spare of local rank i: a socketpair, the worker's end passed as ELASTIC_ASSIGN_FD. */
static int spawn(struct warm *w, int i, int64_t floor_gen, struct ea_error *err)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 8;
        struct spare **v = realloc(w->v, cap * sizeof(*v));
        if (!v)
            return ea_errorf(err, -ENOMEM, "out of memory");
        w->v = v;
        w->cap = cap;
    }
    struct spare *s = calloc(1, sizeof(*s));
    if (!s)
        return ea_errorf(err, -ENOMEM, "out of memory");
    s->fd = -1;
    s->local_rank = i;
    s->floor_gen = floor_gen;
    int sv[2] = {-1, -1}, wfd = -1, r = 0;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
        (wfd = fcntl(sv[1], F_DUPFD_CLOEXEC, WARM_FD_MIN)) < 0 ||
        fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0) {
        r = ea_errorf(err, -errno, "cannot create a spare's socket: %s", strerror(errno));
        goto out;
    }
    size_t n_env = 0;
    while (w->env[n_env])
        n_env++;
    char **env = calloc(n_env + 3, sizeof(*env));
    char fdvar[48], lrvar[48]; /* the local rank it will take: a GPU can be chosen while parked */
    snprintf(fdvar, sizeof(fdvar), "ELASTIC_ASSIGN_FD=%d", wfd);
    snprintf(lrvar, sizeof(lrvar), "ELASTIC_ASSIGN_LOCAL_RANK=%d", i);
    if (!env) {
        r = ea_errorf(err, -ENOMEM, "out of memory");
        goto out;
    }
    memcpy(env, w->env, n_env * sizeof(*env));
    env[n_env] = fdvar;
    env[n_env + 1] = lrvar;
    char label[32];
    snprintf(label, sizeof(label), "warm%d", i);
    bool shown = w->shown[i];
    if (w->log_dir) {
        snprintf(s->out_path, sizeof(s->out_path), "%s/%lu.local_%d.out", w->log_dir, w->sets, i);
        snprintf(s->err_path, sizeof(s->err_path), "%s/%lu.local_%d.err", w->log_dir, w->sets, i);
    }
    struct launch_spec spec = {
        .argv = (const char *const *)w->c.command,
        .envp = (const char *const *)env,
        .label = label,
        .stdout_path = w->log_dir ? s->out_path : shown ? NULL : "/dev/null",
        .stderr_path = w->log_dir ? s->err_path : shown ? NULL : "/dev/null",
        .tee = w->c.tee && shown,
        .stderr_tail = w->c.stderr_tail,
        .pass_fd = wfd,
    };
    r = launch_start(w->c.launcher, &spec, &s->proc, err);
    free(env);
    if (r < 0)
        goto out;
    s->pid = launch_pid(w->c.launcher, s->proc);
    s->fd = sv[0];
    sv[0] = -1;
    s->deadline_ms = ea_now_ms() + w->c.ready_timeout_ms;
    w->v[w->n++] = s; /* its socket is polled from now on (warm_pollfds) */
    s = NULL;
out:
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    if (wfd >= 0)
        close(wfd); /* the worker's end is the worker's (through its guard) */
    free(s);
    return r;
}

int warm_parked(const struct warm *w)
{
    int n = 0;
    for (size_t i = 0; i < w->n; i++)
        n += w->v[i]->state == SP_PARKED;
    return n;
}

int warm_parked_ready(const struct warm *w)
{
    int n = 0;
    for (size_t i = 0; i < w->n; i++)
        n += w->v[i]->state == SP_PARKED && w->v[i]->ready;
    return n;
}

int warm_park(struct warm *w, int64_t floor_gen, struct ea_error *err)
{
    if (w->suspended || warm_parked(w) > 0)
        return 0;
    for (int i = 0; i < w->c.nproc; i++) {
        int r = spawn(w, i, floor_gen, err);
        if (r < 0) {
            drop_parked(w, true);
            return r;
        }
    }
    w->sets++;
    return 1;
}

/* Stop every held in-place worker: the round they were held for did not take them. */
static void drop_held(struct warm *w)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->v[i]->state == SP_HELD)
            warm_stop_spare(w, w->v[i]);
}

void warm_round_started(struct warm *w)
{
    w->suspended = false;
    drop_held(w); /* a local rank the new round does not have */
}

void warm_drop_held(struct warm *w)
{
    if (w)
        drop_held(w);
}

void warm_stop(struct warm *w)
{
    if (w) {
        drop_parked(w, false);
        drop_held(w);
    }
}

/* ---- the socket --------------------------------------------------------------------------- */

/* A taken spare that has sent its ready line and got its whole assignment: the caller's now. */
static void maybe_done(struct warm *w, struct spare *s)
{
    if (s->out || !s->ready)
        return;
    if (s->state == SP_TAKEN || (s->state == SP_REASSIGNED && s->acked)) {
        warm_taken_done(w, s);
        if (s->inplace) /* the socket stays: the next round's assignment comes on it */
            s->state = SP_RUNNING;
        else
            warm_remove_spare(w, s);
    }
}

static void want_out(struct warm *w, struct spare *s, bool on)
{
    (void)w;
    s->want_out = on;
}

/* Write what the socket takes of the assignment. 0, or -EPIPE (the worker's end is gone). */
int warm_flush_out(struct warm *w, struct spare *s)
{
    while (s->out && s->out_off < s->out_len) {
        ssize_t n = send(s->fd, s->out + s->out_off, s->out_len - s->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            want_out(w, s, true);
            return 0;
        }
        if (n < 0)
            return -EPIPE;
        s->out_off += (size_t)n;
    }
    if (s->out) {
        free(s->out);
        s->out = NULL;
        want_out(w, s, false);
    }
    return 0;
}

/* The worker's first line: `{"ready":1,"pid":N}` (with "inplace":1 it may re-form later). */
static int on_ready(struct warm *w, struct spare *s, const char *line, size_t len)
{
    struct ea_error perr = {0};
    long pid = 0;
    bool inplace = false;
    if (warm_parse_ready(line, len, &pid, &inplace, &perr) < 0) {
        warm_add_fault(w, s, "sent a malformed line on ELASTIC_ASSIGN_FD: %s: '%.*s' (expected "
                             "{\"ready\":1,\"pid\":N})",
                       perr.msg, (int)(len < 120 ? len : 120), line);
        warm_fault_spare(w, s);
        return -1;
    }
    s->ready = true;
    s->inplace = inplace && w->c.inplace_timeout_ms > 0;
    return 0;
}

/* Bytes from the worker: one ready line, then nothing (or, in-place, its acks). */
static void on_input(struct warm *w, struct spare *s)
{
    for (;;) {
        char *dst = s->line + s->len;
        size_t room = sizeof(s->line) - s->len;
        char sink[256];
        bool lines = !s->ready || s->inplace;
        if (!lines) { /* anything after the ready line breaks the protocol */
            dst = sink;
            room = sizeof(sink);
        }
        ssize_t n = recv(s->fd, dst, room, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) { /* closed: its exit or its deadline tells the rest */
            s->eof = true;
            warm_close_fd(w, s);
            if (s->state == SP_REASSIGNED && !s->acked) {
                warm_add_fault(w, s, "closed ELASTIC_ASSIGN_FD before it acknowledged its "
                                     "re-assignment to generation %lld",
                               (long long)s->gen);
                warm_fault_spare(w, s);
            }
            return;
        }
        if (!lines) {
            warm_add_fault(w, s, "sent more after its ready line on ELASTIC_ASSIGN_FD (the "
                                 "protocol is one ready line, then wait for the assignment: "
                                 "docs/warm.md)");
            warm_fault_spare(w, s);
            return;
        }
        s->len += (size_t)n;
        char *nl;
        while ((nl = memchr(s->line, '\n', s->len))) {
            size_t len = (size_t)(nl - s->line);
            bool first = !s->ready;
            if (first ? on_ready(w, s, s->line, len) < 0 : warm_inplace_line(w, s, s->line, len) < 0)
                return; /* faulted: the spare may be gone */
            s->len -= len + 1;
            memmove(s->line, nl + 1, s->len);
            if (first && !s->inplace && s->len > 0) {
                warm_add_fault(w, s, "sent more after its ready line on ELASTIC_ASSIGN_FD (the "
                                     "protocol is one ready line, then wait for the assignment: "
                                     "docs/warm.md)");
                warm_fault_spare(w, s);
                return;
            }
            if (!s->inplace) {
                maybe_done(w, s); /* may forget it (handed over) */
                return;           /* nothing more may come */
            }
            maybe_done(w, s);
        }
        if (s->len == sizeof(s->line)) {
            warm_add_fault(w, s, "sent a malformed line on ELASTIC_ASSIGN_FD: no newline in its "
                                 "first %d bytes (expected {\"%s\":...})",
                           WARM_LINE_MAX, s->ready ? "ack" : "ready");
            warm_fault_spare(w, s);
            return;
        }
    }
}

size_t warm_pollfds(const struct warm *w, struct pollfd *fds, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; w && i < w->n && n < max; i++)
        if (w->v[i]->fd >= 0)
            fds[n++] = (struct pollfd){.fd = w->v[i]->fd,
                                       .events = POLLIN | (w->v[i]->want_out ? POLLOUT : 0)};
    return n;
}

/* The spare whose socket is fd, or NULL (an earlier event of the batch dropped it). */
static struct spare *spare_of_fd(const struct warm *w, int fd)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->v[i]->fd == fd)
            return w->v[i];
    return NULL;
}

static bool alive(const struct warm *w, const struct spare *s)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->v[i] == s)
            return true;
    return false;
}

void warm_on_poll(struct warm *w, const struct pollfd *fds, size_t n)
{
    for (size_t i = 0; w && i < n; i++) {
        if (!fds[i].revents || fds[i].fd < 0)
            continue;
        /* an earlier event of this batch may have dropped it (a fault takes the whole set) */
        struct spare *s = spare_of_fd(w, fds[i].fd);
        if (!s)
            continue;
        if ((fds[i].revents & POLLOUT) && warm_flush_out(w, s) < 0) {
            warm_add_fault(w, s, "closed ELASTIC_ASSIGN_FD before it read its assignment");
            warm_fault_spare(w, s);
            continue;
        }
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
            on_input(w, s);
        if (alive(w, s))
            maybe_done(w, s);
    }
}

/* ---- hand-over ---------------------------------------------------------------------------- */

static struct spare *parked_for(const struct warm *w, int local_rank)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->v[i]->state == SP_PARKED && w->v[i]->local_rank == local_rank)
            return w->v[i];
    return NULL;
}

/* The round's log file names point at the spare's (a hard link, else a symbolic one). */
static void link_log(const char *spare_path, const char *round_path)
{
    if (!spare_path[0] || !round_path)
        return;
    unlink(round_path);
    if (link(spare_path, round_path) < 0 && symlink(spare_path, round_path) < 0)
        return; /* the output is still in the spare's file */
}

int warm_assign(struct warm *w, int local_rank, const struct warm_take *t,
                struct launch_proc **ret_proc, pid_t *ret_pid, struct ea_error *err)
{
    if (local_rank < 0 || local_rank >= w->c.nproc)
        return -ENOENT;
    struct spare *s = warm_inplace_held(w, local_rank); /* --in-place: the worker it had */
    if (s) {
        int r = warm_inplace_reassign(w, s, t, err);
        if (r < 0)
            return r; /* stopped; the caller asks again: a parked spare, else cold */
        *ret_proc = s->proc;
        *ret_pid = spare_pid(w, s);
        return 1;
    }
    s = parked_for(w, local_rank);
    if (!s)
        return -ENOENT;
    /* a spare is for a round after the workers that ran when it was parked, and a rank's
     * assignments only go forward: a stale generation never reaches a worker */
    if (t->generation <= s->floor_gen || t->generation <= w->last_gen[local_rank]) {
        int64_t floor = s->floor_gen > w->last_gen[local_rank] ? s->floor_gen
                                                                : w->last_gen[local_rank];
        warm_stop_spare(w, s);
        return ea_errorf(err, -ESTALE,
                         "generation %lld is not newer than %lld: the spare (pid %ld) is not for "
                         "it",
                         (long long)t->generation, (long long)floor, (long)spare_pid(w, s));
    }
    char *line = NULL;
    size_t len = 0;
    int r = warm_format_assignment(t->generation, t->round, t->env, &line, &len);
    if (r < 0)
        return ea_errorf(err, r, "cannot encode the assignment: %s", strerror(-r));
    if (s->fd < 0) { /* it closed its end: it is exiting */
        free(line);
        warm_stop_spare(w, s);
        return ea_errorf(err, -EPIPE, "the spare (pid %ld) closed ELASTIC_ASSIGN_FD",
                         (long)spare_pid(w, s));
    }
    s->out = line;
    s->out_len = len;
    s->out_off = 0;
    if (warm_flush_out(w, s) < 0) {
        warm_stop_spare(w, s);
        return ea_errorf(err, -EPIPE, "the spare (pid %ld) closed ELASTIC_ASSIGN_FD",
                         (long)spare_pid(w, s));
    }
    s->state = SP_TAKEN;
    s->gen = t->generation;
    w->last_gen[local_rank] = t->generation;
    warm_count_assigned(w, t->generation);
    if (t->label)
        launch_relabel(w->c.launcher, s->proc, t->label);
    link_log(s->out_path, t->stdout_path);
    link_log(s->err_path, t->stderr_path);
    *ret_proc = s->proc;
    *ret_pid = spare_pid(w, s);
    maybe_done(w, s);
    return 0;
}

int64_t warm_assigned_ms(const struct warm *w, int64_t gen)
{
    return w && gen == w->cur_gen ? w->cur_done_ms : -1;
}

/* ---- exits and deadlines ------------------------------------------------------------------ */

int warm_on_exit(struct warm *w, const struct launch_exit *e)
{
    if (!w)
        return 0;
    struct spare *s = NULL;
    for (size_t i = 0; i < w->n && !s; i++)
        if (w->v[i]->proc == e->proc)
            s = w->v[i];
    if (!s)
        return 0;
    if (s->state == SP_TAKEN || s->state == SP_RUNNING || s->state == SP_REASSIGNED) {
        /* the caller's worker now: its exit is the caller's */
        warm_taken_done(w, s);
        warm_remove_spare(w, s);
        return 0;
    }
    if (s->state == SP_PARKED) {
        char how[64];
        if (e->term_signal)
            snprintf(how, sizeof(how), "killed by signal %d (SIG%s)", e->term_signal,
                     sigabbrev_np(e->term_signal) ? sigabbrev_np(e->term_signal) : "?");
        else
            snprintf(how, sizeof(how), "exit code %d", e->exit_code);
        warm_add_fault(w, s, "exited while parked (%s), %s", how,
                  s->ready ? "after its ready line"
                           : "before it called elastic_agent.wait_for_assignment()");
        drop_parked(w, true);
    } else if (s->state == SP_HELD) {
        warm_add_fault(w, s, "exited while held for the next round (%s %d)",
                       e->term_signal ? "signal" : "exit code",
                       e->term_signal ? e->term_signal : e->exit_code);
    }
    launch_release(w->c.launcher, s->proc);
    warm_remove_spare(w, s);
    return 1;
}

int warm_tick(struct warm *w, int64_t now, struct warm_fault *ret)
{
    if (!w)
        return 0;
    warm_inplace_tick(w, now);
    for (size_t i = 0; i < w->n; i++) {
        struct spare *s = w->v[i];
        if (s->state == SP_STOPPING || s->ready || now < s->deadline_ms)
            continue;
        warm_add_fault(w, s,
                  "did not call elastic_agent.wait_for_assignment() (no ready line on "
                  "ELASTIC_ASSIGN_FD) within --worker-startup-timeout %.0f s of its start: with "
                  "--warm-workers the worker must call it (docs/warm.md)",
                  (double)w->c.ready_timeout_ms / 1000.0);
        warm_fault_spare(w, s);
        i = (size_t)-1; /* the set may be gone: look again from the start */
    }
    if (w->n_faults == 0)
        return 0;
    *ret = w->faults[0];
    memmove(&w->faults[0], &w->faults[1], (w->n_faults - 1) * sizeof(*w->faults));
    w->n_faults--;
    return 1;
}

int64_t warm_wake_ms(const struct warm *w)
{
    int64_t t = -1;
    for (size_t i = 0; w && i < w->n; i++) {
        const struct spare *s = w->v[i];
        bool due = !s->ready || (s->state == SP_REASSIGNED && !s->acked);
        if (s->state != SP_STOPPING && due && (t < 0 || s->deadline_ms < t))
            t = s->deadline_ms;
    }
    if (w && w->n_faults)
        t = 0; /* a fault to hand out */
    return t;
}
