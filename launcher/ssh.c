// SPDX-License-Identifier: Apache-2.0
/*
 * launcher/ssh: workers on one remote host, all through ONE ssh connection and one session
 * (sshd's MaxSessions/MaxStartups never matter, however many slots). The connection (ssh_conn.c)
 * runs a small POSIX-sh helper (ssh_remote.c) that starts each slot behind a middleman in its
 * own session — the remote `elastic-agent exec-guard --watch-stdin` when installed, else setsid
 * and the helper's own reaping — and multiplexes every slot's stdout/stderr, start and exit
 * reports onto ssh's stdout. docs/ssh.md has the protocol.
 *
 * One epoll fd carries what dispatch() has to do: ssh's stdout/stderr and pidfd, the SIGCHLD
 * signalfd of the child table (the ssh client is our child), the timerfd of pending SIGKILLs,
 * and an eventfd raised on every exit (exits are also seen outside dispatch(): in start(), or
 * when stop() finds the connection gone).
 * The connection is opened by the first start() and again by the first start() after it was
 * lost; losing it ends every running slot with exit code 255 and a message in its stderr tail.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ea_time.h"
#include "launcher.h"
#include "output.h"
#include "proc.h"
#include "ssh_internal.h"

#define SSH_CONNECT_TIMEOUT_MS 60000 /* ssh's ConnectTimeout + auth + the handshake */
#define SSH_START_TIMEOUT_MS 30000   /* from the start line to the helper's P/F answer */
#define SSH_SEND_TIMEOUT_MS 10000
#define SSH_CLOSE_WAIT_MS 3000 /* destroy: the helper kills its slots, ssh ends */
#define SSH_LOST_WAIT_MS 1000

struct sstream {
    int file_fd; /* the log file, or -1 */
    int out_fd;  /* the agent's STDOUT_FILENO or STDERR_FILENO */
    bool tee;
    char *tail; /* the last tail_cap bytes (NUL-terminated), or NULL */
    size_t tail_cap, tail_len;
};

struct launch_proc {
    struct sshl *l;
    unsigned slot;
    pid_t wpid; /* the remote worker (leader of its process group there), 0 until started */
    char label[64];
    struct sstream out[2];
    int64_t kill_at; /* monotonic ms of the pending SIGKILL, -1 = none */
    bool started, failed, stopping, exited, reported, released;
    char fail_what[16];
    int fail_errno;
    int exit_code, term_signal;
    int64_t end_ms;
};

struct sshl {
    struct launcher base;
    struct ssh_target t;
    char **opts; /* owned copies behind t */
    bool table;
    int sigfd, epfd, tfd, evfd;
    struct ssh_conn conn;
    bool connected;
    int64_t fence_until, fence_sent; /* launcher_fence(): the deadline, and the one sent */
    int64_t fence_grace_ms;
    unsigned next_slot;
    char cwd[PATH_MAX];
    struct launch_proc **v;
    size_t n, cap;
};

extern const struct launcher_ops launch_ssh_ops;

/* ---- output ------------------------------------------------------------------------------- */

static void tail_add(struct sstream *s, const char *data, size_t n)
{
    launch_tail_keep(s->tail, s->tail_cap, &s->tail_len, data, n);
}

/* One record of a slot's stream: raw to the file (or to the agent's stream without file and
 * tee), "[label]:"-prefixed to the agent's stream with tee. */
static void emit(struct launch_proc *p, int k, char *data, size_t n, bool nl)
{
    struct sstream *s = &p->out[k];
    tail_add(s, data, n);
    if (nl)
        tail_add(s, "\n", 1);
    struct iovec raw[2] = {{.iov_base = data, .iov_len = n}, {.iov_base = "\n", .iov_len = nl}};
    if (s->file_fd >= 0)
        launch_write_all(s->file_fd, raw, 2);
    else if (!s->tee)
        launch_write_all(s->out_fd, raw, 2);
    if (s->tee) {
        struct iovec iov[5] = {
            {.iov_base = "[", .iov_len = 1},  {.iov_base = p->label, .iov_len = strlen(p->label)},
            {.iov_base = "]:", .iov_len = 2}, {.iov_base = data, .iov_len = n},
            {.iov_base = "\n", .iov_len = 1},
        };
        launch_write_all(s->out_fd, iov, 5);
    }
}

/* ---- processes ---------------------------------------------------------------------------- */

static void sp_free(struct launch_proc *p)
{
    for (int k = 0; k < 2; k++) {
        if (p->out[k].file_fd >= 0)
            close(p->out[k].file_fd);
        free(p->out[k].tail);
    }
    free(p);
}

static void sp_unlink(struct sshl *l, struct launch_proc *p)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i] == p) {
            memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof(*l->v));
            l->n--;
            break;
        }
    sp_free(p);
}

static struct launch_proc *find_slot(struct sshl *l, unsigned long slot)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i]->slot == slot)
            return l->v[i];
    return NULL;
}

static void raise_event(struct sshl *l)
{
    uint64_t one = 1;
    if (write(l->evfd, &one, sizeof(one)) < 0) {
        /* EAGAIN: already raised */
    }
}

/* Also raises the eventfd: an exit seen outside dispatch() (in start(), or a lost connection
 * noticed by stop()) must still wake the event loop. */
static void sp_exit(struct launch_proc *p, int code, int sig)
{
    raise_event(p->l);
    p->exited = true;
    p->exit_code = code;
    p->term_signal = sig;
    p->end_ms = ea_now_ms();
    p->kill_at = -1;
}

/* A line from the helper. */
static void on_line(struct sshl *l, char *line, size_t len)
{
    char c = line[0];
    char *end;
    unsigned long slot;
    if ((c == 'O' || c == 'o' || c == 'E' || c == 'e') && len >= 3) {
        slot = strtoul(line + 1, &end, 10);
        struct launch_proc *p = find_slot(l, slot);
        if (p && *end == ' ')
            emit(p, c == 'E' || c == 'e', end + 1, len - (size_t)(end + 1 - line),
                 c == 'O' || c == 'E');
        return;
    }
    if ((c != 'P' && c != 'F' && c != 'X') || len < 4 || line[1] != ' ')
        return; /* not ours (a login script's chatter) */
    slot = strtoul(line + 2, &end, 10);
    struct launch_proc *p = find_slot(l, slot);
    if (!p || *end != ' ')
        return;
    if (c == 'P') {
        p->wpid = (pid_t)strtol(end + 1, NULL, 10);
        p->started = true;
    } else if (c == 'F') {
        char what[16] = "";
        int e = 0;
        sscanf(end + 1, "%15s %d", what, &e);
        snprintf(p->fail_what, sizeof(p->fail_what), "%s", what);
        p->fail_errno = e > 0 ? e : EIO;
        p->failed = true;
    } else if (!p->exited) {
        int st = (int)strtol(end + 1, NULL, 10);
        /* the shell's convention: 128+N is death by signal N */
        if (st > 128 && st < 128 + 65)
            sp_exit(p, -1, st - 128);
        else
            sp_exit(p, st & 255, 0);
    }
}

/* The connection has gone: every slot that was running ends with 255, as ssh itself would. */
static void conn_lost(struct sshl *l)
{
    ssh_conn_close(&l->conn, SSH_LOST_WAIT_MS);
    l->connected = false;
    char said[600], msg[800];
    ssh_conn_stderr(&l->conn, said, sizeof(said));
    int st = l->conn.status;
    snprintf(msg, sizeof(msg),
             "elastic-agent: lost the ssh connection to host '%s' (ssh %s %d)%s%s\n", l->t.host,
             WIFEXITED(st) ? "exited with" : "killed by signal",
             WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), said[0] ? ": " : "", said);
    for (size_t i = 0; i < l->n; i++) {
        struct launch_proc *p = l->v[i];
        if (p->exited)
            continue;
        if (!p->started && !p->failed) {
            p->failed = true;
            snprintf(p->fail_what, sizeof(p->fail_what), "conn");
            p->fail_errno = EPIPE;
        }
        tail_add(&p->out[1], msg, strlen(msg));
        sp_exit(p, 255, 0);
    }
}

/* Take what the helper said; notice a lost connection. */
static void pump(struct sshl *l)
{
    if (!l->connected)
        return;
    bool alive = ssh_conn_pump(&l->conn);
    char *line;
    size_t len;
    while (ssh_conn_line(&l->conn, &line, &len))
        on_line(l, line, len);
    if (!alive) /* stdout is at EOF only once ssh (its only writer) has gone */
        conn_lost(l);
}

static int send_line(struct sshl *l, const char *line, size_t n)
{
    if (!l->connected)
        return -EPIPE;
    int r = ssh_conn_send(&l->conn, line, n, SSH_SEND_TIMEOUT_MS);
    if (r < 0)
        conn_lost(l);
    return r;
}

/* Tell the helper how long the agent's authority lasts (see ssh_remote.c, `_ea_f`). */
static void send_fence(struct sshl *l)
{
    if (!l->connected || l->fence_until <= 0 || l->fence_until == l->fence_sent)
        return;
    char line[64];
    int n = ssh_fence_line(line, sizeof(line), l->fence_until, ea_now_ms(), l->fence_grace_ms);
    if (send_line(l, line, (size_t)n) == 0)
        l->fence_sent = l->fence_until;
}

static void ssh_fence(struct launcher *base, int64_t valid_until_ms)
{
    struct sshl *l = (struct sshl *)base;
    l->fence_until = valid_until_ms;
    send_fence(l);
}

static int send_signal(struct launch_proc *p, int sig)
{
    if (p->exited || !p->started || !p->l->connected)
        return -ESRCH;
    char line[64];
    int n = snprintf(line, sizeof(line), "_ea_k %u %d\n", p->slot, sig);
    return send_line(p->l, line, (size_t)n) < 0 ? -ESRCH : 0;
}

static void arm_timer(struct sshl *l)
{
    int64_t next = -1;
    for (size_t i = 0; i < l->n; i++) {
        const struct launch_proc *p = l->v[i];
        if (!p->exited && p->kill_at >= 0 && (next < 0 || p->kill_at < next))
            next = p->kill_at;
    }
    struct itimerspec its = {0};
    if (next >= 0) {
        its.it_value.tv_sec = next / 1000;
        its.it_value.tv_nsec = (long)(next % 1000) * 1000000L;
    }
    timerfd_settime(l->tfd, next >= 0 ? TFD_TIMER_ABSTIME : 0, &its, NULL);
}

static void collect(struct sshl *l)
{
    uint64_t ticks;
    while (read(l->tfd, &ticks, sizeof(ticks)) > 0)
        ;
    while (read(l->evfd, &ticks, sizeof(ticks)) > 0)
        ;
    pump(l);
    proc_reap(); /* a lost connection's client, when pump did not see it */
    int64_t now = ea_now_ms();
    for (size_t i = 0; i < l->n; i++) {
        struct launch_proc *p = l->v[i];
        if (!p->exited && p->kill_at >= 0 && now >= p->kill_at) {
            p->kill_at = -1;
            send_signal(p, SIGKILL);
        }
    }
    arm_timer(l);
}

/* ---- ops ---------------------------------------------------------------------------------- */

static void ssh_destroy(struct launcher *base)
{
    struct sshl *l = (struct sshl *)base;
    if (!l)
        return;
    if (l->connected) {
        for (size_t i = 0; i < l->n; i++)
            send_signal(l->v[i], SIGKILL);
        /* EOF on its stdin: the helper kills what is left and exits, then ssh does */
        ssh_conn_close(&l->conn, SSH_CLOSE_WAIT_MS);
    }
    if (l->table)
        proc_reap();
    for (size_t i = 0; i < l->n; i++)
        sp_free(l->v[i]);
    free(l->v);
    if (l->tfd >= 0)
        close(l->tfd);
    if (l->evfd >= 0)
        close(l->evfd);
    if (l->epfd >= 0)
        close(l->epfd);
    if (l->table)
        proc_table_close();
    for (size_t i = 0; l->opts && l->opts[i]; i++)
        free(l->opts[i]);
    free(l->opts);
    free((char *)l->t.host);
    free((char *)l->t.user);
    free((char *)l->t.identity);
    free((char *)l->t.lock_dir);
    free(l);
}

static int epoll_add(int epfd, int fd)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    return fd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

static int dup_str(const char *s, const char **ret)
{
    *ret = NULL;
    return !s || (*ret = strdup(s)) ? 0 : -ENOMEM;
}

static int ssh_create(const struct launcher_config *cfg, struct launcher **ret,
                      struct ea_error *err)
{
    if (!cfg->host || !cfg->host[0])
        return ea_errorf(err, -EINVAL, "the ssh launcher needs a host (--host)");
    if (cfg->host[0] == '-')
        return ea_errorf(err, -EINVAL, "host '%s' is not a host name", cfg->host);
    struct sshl *l = calloc(1, sizeof(*l));
    if (!l)
        return ea_errorf(err, -ENOMEM, "out of memory");
    l->base.ops = &launch_ssh_ops;
    l->sigfd = l->epfd = l->tfd = l->evfd = -1;
    l->t.port = cfg->port;
    l->t.parallel = cfg->conn_parallel;
    l->fence_grace_ms = cfg->fence_grace_ms;
    size_t nopt = 0;
    while (cfg->ssh_options && cfg->ssh_options[nopt])
        nopt++;
    int r = -ENOMEM;
    if (dup_str(cfg->host, &l->t.host) < 0 || dup_str(cfg->user, &l->t.user) < 0 ||
        dup_str(cfg->identity, &l->t.identity) < 0 ||
        dup_str(cfg->conn_lock_dir, &l->t.lock_dir) < 0 ||
        !(l->opts = calloc(nopt + 1, sizeof(*l->opts))))
        goto nomem;
    for (size_t i = 0; i < nopt; i++)
        if (!(l->opts[i] = strdup(cfg->ssh_options[i])))
            goto nomem;
    l->t.options = (const char *const *)l->opts;
    if (!getcwd(l->cwd, sizeof(l->cwd)))
        snprintf(l->cwd, sizeof(l->cwd), "/");
    if ((r = proc_table_open(&l->sigfd, err)) < 0)
        goto error;
    l->table = true;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    l->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->epfd < 0 || l->tfd < 0 || l->evfd < 0 || (r = epoll_add(l->epfd, l->sigfd)) < 0 ||
        (r = epoll_add(l->epfd, l->tfd)) < 0 || (r = epoll_add(l->epfd, l->evfd)) < 0) {
        r = ea_errorf(err, r < 0 ? r : -errno, "cannot set up the launcher's fds: %s",
                      strerror(r < 0 ? -r : errno));
        goto error;
    }
    *ret = &l->base;
    return 0;
nomem:
    r = ea_errorf(err, -ENOMEM, "out of memory");
error:
    ssh_destroy(&l->base);
    return r;
}

static int connect_host(struct sshl *l, struct ea_error *err)
{
    int r = ssh_conn_open(&l->conn, &l->t, SSH_CONNECT_TIMEOUT_MS, err);
    if (r < 0)
        return r;
    if ((r = epoll_add(l->epfd, l->conn.out_fd)) < 0 ||
        (r = epoll_add(l->epfd, l->conn.err_fd)) < 0 ||
        (r = epoll_add(l->epfd, l->conn.pidfd)) < 0) {
        ssh_conn_close(&l->conn, 0);
        return ea_errorf(err, r, "cannot watch the ssh connection: %s", strerror(-r));
    }
    l->connected = true;
    l->fence_sent = 0;
    send_fence(l); /* a new helper: it knows nothing of the fence yet */
    return l->connected ? 0 : ea_errorf(err, -EPIPE, "lost the ssh connection to '%s'", l->t.host);
}

static int open_outputs(struct launch_proc *p, const struct launch_spec *spec, struct ea_error *err)
{
    for (int k = 0; k < 2; k++) {
        struct sstream *s = &p->out[k];
        const char *path = k ? spec->stderr_path : spec->stdout_path;
        size_t tail = k ? spec->stderr_tail : 0;
        if (tail) {
            s->tail_cap = tail < LAUNCH_TAIL_MAX ? tail : LAUNCH_TAIL_MAX;
            if (!(s->tail = calloc(1, s->tail_cap + 1)))
                return ea_errorf(err, -ENOMEM, "out of memory");
        }
        if (path && (s->file_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) < 0)
            return ea_errorf(err, -errno, "cannot open '%s' for the output of '%s': %s", path,
                             spec->argv[0], strerror(errno));
    }
    return 0;
}

/* Wait for the helper's P or F about p (other slots' records are handled meanwhile). */
static int await_answer(struct sshl *l, struct launch_proc *p)
{
    int64_t deadline = ea_now_ms() + SSH_START_TIMEOUT_MS;
    while (l->connected && !p->started && !p->failed && !p->exited) {
        int left = ea_timeout_until(deadline);
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd f[3] = {{.fd = l->conn.out_fd, .events = POLLIN},
                              {.fd = l->conn.err_fd, .events = POLLIN},
                              {.fd = l->conn.pidfd, .events = POLLIN}};
        poll(f, 3, left);
        pump(l);
    }
    return 0;
}

static int start_error(struct sshl *l, struct launch_proc *p, const struct launch_spec *spec,
                       const char *cwd, struct ea_error *err)
{
    const char *prog = spec->argv[0];
    int e = p->fail_errno;
    if (strcmp(p->fail_what, "exec") == 0)
        return ea_errorf(err, -e, "cannot run '%s' on host '%s': %s", prog, l->t.host, strerror(e));
    if (strcmp(p->fail_what, "chdir") == 0)
        return ea_errorf(err, -e, "cannot change to directory '%s' on host '%s' for '%s': %s", cwd,
                         l->t.host, prog, strerror(e));
    if (strcmp(p->fail_what, "conn") == 0 || !l->connected) {
        char said[600];
        ssh_conn_stderr(&l->conn, said, sizeof(said));
        return ea_errorf(err, -EPIPE,
                         "lost the ssh connection to host '%s' while starting '%s'%s%s", l->t.host,
                         prog, said[0] ? ": " : "", said);
    }
    return ea_errorf(err, -e, "cannot start '%s' on host '%s': set-up failed: %s", prog, l->t.host,
                     strerror(e));
}

static int ssh_start(struct launcher *base, const struct launch_spec *spec,
                     struct launch_proc **ret, struct ea_error *err)
{
    struct sshl *l = (struct sshl *)base;
    if (!spec->argv || !spec->argv[0])
        return ea_errorf(err, -EINVAL, "no program to start");
    if (spec->pass_fd >= 3)
        return ea_errorf(err, -EOPNOTSUPP, "the ssh launcher cannot pass an fd to a remote "
                                           "process");
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct launch_proc **v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return ea_errorf(err, -ENOMEM, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    struct launch_proc *p = calloc(1, sizeof(*p));
    if (!p)
        return ea_errorf(err, -ENOMEM, "out of memory");
    *p = (struct launch_proc){.l = l, .kill_at = -1, .slot = ++l->next_slot};
    for (int k = 0; k < 2; k++)
        p->out[k] = (struct sstream){.file_fd = -1, .out_fd = k ? 2 : 1, .tee = spec->tee};
    snprintf(p->label, sizeof(p->label), "%s", spec->label ? spec->label : "");
    int r = open_outputs(p, spec, err);
    if (r == 0 && !l->connected)
        r = connect_host(l, err);
    if (r < 0) {
        sp_free(p);
        return r;
    }
    const char *cwd = spec->cwd ? spec->cwd : l->cwd;
    struct ssh_buf line = {0};
    const char *const empty[] = {NULL};
    if (ssh_start_line(&line, p->slot, cwd, spec->cwd != NULL, spec->envp ? spec->envp : empty,
                       spec->argv) < 0) {
        ssh_buf_free(&line);
        sp_free(p);
        return ea_errorf(err, -ENOMEM, "out of memory");
    }
    l->v[l->n++] = p;
    r = send_line(l, line.p, line.len);
    ssh_buf_free(&line);
    if (r == 0 && await_answer(l, p) < 0) {
        /* no answer in time: it may still start; end it quietly when it does */
        p->released = true;
        p->kill_at = ea_now_ms();
        arm_timer(l);
        return ea_errorf(err, -ETIMEDOUT, "host '%s' did not confirm the start of '%s' in time",
                         l->t.host, spec->argv[0]);
    }
    if (!p->started) {
        r = start_error(l, p, spec, cwd, err);
        sp_unlink(l, p);
        return r;
    }
    if (!spec->label)
        snprintf(p->label, sizeof(p->label), "%d", (int)p->wpid);
    *ret = p;
    return 0;
}

static int ssh_signal(struct launch_proc *p, int sig)
{
    return send_signal(p, sig);
}

static int ssh_stop(struct launch_proc *p, int64_t grace_ms)
{
    if (p->exited)
        return 0;
    int64_t at = ea_now_ms() + (grace_ms > 0 ? grace_ms : 0);
    if (!p->stopping) {
        p->stopping = true;
        p->kill_at = at;
        send_signal(p, SIGTERM);
    } else if (p->kill_at >= 0 && at < p->kill_at) {
        p->kill_at = at;
    }
    arm_timer(p->l);
    return 0;
}

static int ssh_fd(struct launcher *base)
{
    return ((struct sshl *)base)->epfd;
}

static int ssh_dispatch(struct launcher *base, struct launch_exit **ret_exits, size_t *ret_n,
                        struct ea_error *err)
{
    struct sshl *l = (struct sshl *)base;
    collect(l);
    size_t n = 0;
    for (size_t i = l->n; i-- > 0;) {
        if (l->v[i]->released && l->v[i]->exited)
            sp_unlink(l, l->v[i]);
        else
            n += l->v[i]->exited && !l->v[i]->reported;
    }
    struct launch_exit *ex = NULL;
    if (n && !(ex = calloc(n, sizeof(*ex))))
        return ea_errorf(err, -ENOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++) {
        struct launch_proc *p = l->v[i];
        if (!p->exited || p->reported || p->released)
            continue;
        p->reported = true;
        ex[k++] = (struct launch_exit){
            .proc = p,
            .exit_code = p->exit_code,
            .term_signal = p->term_signal,
            .end_ms = p->end_ms,
            .stderr_tail = p->out[1].tail,
        };
    }
    *ret_exits = ex;
    *ret_n = n;
    return 0;
}

static pid_t ssh_pid(const struct launch_proc *p)
{
    return p->wpid;
}

static void ssh_release(struct launch_proc *p)
{
    if (!p)
        return;
    if (!p->exited) {
        send_signal(p, SIGKILL);
        p->released = true;
        return;
    }
    sp_unlink(p->l, p);
}

const struct launcher_ops launch_ssh_ops = {
    .name = "ssh",
    .create = ssh_create,
    .destroy = ssh_destroy,
    .start = ssh_start,
    .signal = ssh_signal,
    .stop = ssh_stop,
    .fd = ssh_fd,
    .dispatch = ssh_dispatch,
    .pid = ssh_pid,
    .release = ssh_release,
    .fence = ssh_fence,
};
