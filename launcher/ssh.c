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
 *
 * Nothing waits (the agent's loop drives it all through the epoll fd and the core's timerfd):
 * the connection is set up as a state machine (ssh_conn_begin/step), a start() made meanwhile
 * queues its line until the helper said "R", and a start is "starting" until the helper's P (or
 * F: a start failure, exit code 127/126) or its deadline. A connection that cannot be set up is
 * a start failure of every start queued behind it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ea_time.h"
#include "launch_core.h"
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
};

/* The ssh part of a record (launch_proc.impl); launch_proc.pid is the remote worker (leader of
 * its process group there), 0 until started. */
struct sproc {
    unsigned slot;
    struct sstream out[2];
    bool started;
    struct ssh_buf line; /* its start line, until sent (queued behind the connection's set-up) */
    char *cwd;           /* for messages */
    int kill_sig;        /* signalled before the helper confirmed it: sent on its P */
};

struct sshl {
    struct launch_core core; /* first: a struct launcher * is a struct sshl * */
    struct ssh_target t;
    char **opts; /* owned copies behind t */
    bool table;
    int sigfd, evfd;
    struct ssh_conn conn;
    bool connected;
    int64_t connect_timeout_ms;
    int64_t fence_until, fence_sent; /* launcher_fence(): the deadline, and the one sent */
    int64_t fence_grace_ms;
    unsigned next_slot;
    char cwd[PATH_MAX];
};

extern const struct launcher_ops launch_ssh_ops;

/* ---- output ------------------------------------------------------------------------------- */

static struct sproc *sp(const struct launch_proc *p)
{
    return p->impl;
}


/* One record of a slot's stream: raw to the file (or to the agent's stream without file and
 * tee), "[label]:"-prefixed to the agent's stream with tee. */
static void emit(struct launch_proc *p, int k, char *data, size_t n, bool nl)
{
    struct sstream *s = &sp(p)->out[k];
    if (k) {
        launch_core_tail(p, data, n);
        if (nl)
            launch_core_tail(p, "\n", 1);
    }
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
    ssh_buf_free(&sp(p)->line);
    free(sp(p)->cwd);
    for (int k = 0; k < 2; k++)
        if (sp(p)->out[k].file_fd >= 0)
            close(sp(p)->out[k].file_fd);
}

static struct launch_proc *find_slot(struct sshl *l, unsigned long slot)
{
    for (size_t i = 0; i < l->core.n; i++)
        if (sp(l->core.v[i])->slot == slot)
            return l->core.v[i];
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
    raise_event((struct sshl *)p->core);
    launch_core_exit(p, code, sig, ea_now_ms());
}

static int send_line(struct sshl *l, const char *line, size_t n);

/* The helper could not start p (F <what> <errno>, or "conn": no connection): a start failure,
 * reported as p's exit. */
static void start_failed(struct sshl *l, struct launch_proc *p, const char *what, int e)
{
    const char *prog = p->prog;
    if (strcmp(what, "exec") == 0)
        launch_core_start_failed(p, -e, "cannot run '%s' on host '%s': %s", prog, l->t.host,
                                 strerror(e));
    else if (strcmp(what, "chdir") == 0)
        launch_core_start_failed(p, -e, "cannot change to directory '%s' on host '%s' for '%s': %s",
                                 sp(p)->cwd ? sp(p)->cwd : "", l->t.host, prog, strerror(e));
    else if (strcmp(what, "conn") == 0) {
        char said[600];
        ssh_conn_stderr(&l->conn, said, sizeof(said));
        launch_core_start_failed(p, -EPIPE,
                                 "lost the ssh connection to host '%s' while starting '%s'%s%s",
                                 l->t.host, prog, said[0] ? ": " : "", said);
    } else
        launch_core_start_failed(p, -e, "cannot start '%s' on host '%s': set-up failed: %s", prog,
                                 l->t.host, strerror(e));
    sp_exit(p, 127, 0); /* the code is the start failure's */
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
        sp(p)->started = true;
        if (p->exited || sp(p)->kill_sig) { /* given up, or stopped, before it was confirmed */
            char k[64];
            int n = snprintf(k, sizeof(k), "_ea_k %u %d\n", sp(p)->slot,
                             p->exited ? SIGKILL : sp(p)->kill_sig);
            send_line(l, k, (size_t)n);
        }
        if (p->exited)
            return;
        p->pid = (pid_t)strtol(end + 1, NULL, 10);
        launch_core_started(p);
    } else if (c == 'F') {
        char what[16] = "";
        int e = 0;
        sscanf(end + 1, "%15s %d", what, &e);
        start_failed(l, p, what, e > 0 ? e : EIO);
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
    for (size_t i = 0; i < l->core.n; i++) {
        struct launch_proc *p = l->core.v[i];
        struct sproc *x = sp(p);
        if (p->exited)
            continue;
        launch_core_tail(p, msg, strlen(msg));
        if (!x->started)
            start_failed(l, p, "conn", EPIPE);
        else
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
    struct sshl *l = (struct sshl *)p->core;
    if (!p->exited && !sp(p)->started && sp(p)->line.len) {
        /* still queued behind the connection's set-up: it never runs */
        ssh_buf_free(&sp(p)->line);
        launch_core_started(p);
        sp_exit(p, -1, sig);
        return 0;
    }
    if (!p->exited && !sp(p)->started && l->connected) {
        sp(p)->kill_sig = sig; /* sent: the helper has not confirmed it yet; done on its P */
        return 0;
    }
    if (p->exited || !sp(p)->started || !l->connected)
        return -ESRCH;
    char line[64];
    int n = snprintf(line, sizeof(line), "_ea_k %u %d\n", sp(p)->slot, sig);
    return send_line(l, line, (size_t)n) < 0 ? -ESRCH : 0;
}

static void connect_step(struct sshl *l);

static void ssh_reap(struct launch_core *c)
{
    struct sshl *l = (struct sshl *)c;
    uint64_t ticks;
    while (read(l->evfd, &ticks, sizeof(ticks)) > 0)
        ;
    connect_step(l);
    pump(l);
    proc_reap(); /* a lost connection's client, when pump did not see it */
}

static int64_t ssh_wake(struct launch_core *c)
{
    return ssh_conn_wake(&((struct sshl *)c)->conn);
}

/* The helper did not confirm p in time (the core recorded why): its exit, now; should it still
 * start, its P finds it exited and kills it. */
static void ssh_abort_start(struct launch_proc *p, int64_t now_ms)
{
    (void)now_ms;
    ssh_buf_free(&sp(p)->line);
    sp_exit(p, -1, 0);
}

static void ssh_destroy(struct launch_core *c)
{
    struct sshl *l = (struct sshl *)c;
    if (l->connected) {
        launch_core_signal_all(&l->core, SIGKILL);
        /* EOF on its stdin: the helper kills what is left and exits, then ssh does */
        ssh_conn_close(&l->conn, SSH_CLOSE_WAIT_MS);
    } else if (l->conn.state != SSH_CONN_DOWN) {
        ssh_conn_close(&l->conn, 0); /* a set-up under way: nothing runs behind it yet */
    }
    if (l->table)
        proc_reap();
    launch_core_fini(&l->core);
    if (l->evfd >= 0)
        close(l->evfd);
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

/* ---- ops ---------------------------------------------------------------------------------- */

/* Watch what the connection (or its set-up) waits on; an fd watched already is fine. */
static int watch_conn(struct sshl *l)
{
    int fds[4];
    int n = ssh_conn_fds(&l->conn, fds);
    for (int i = 0; i < n; i++) {
        int r = launch_core_watch(&l->core, fds[i], NULL);
        if (r < 0 && r != -EEXIST)
            return r;
    }
    return 0;
}

/* Send p's queued start line: it is then starting until the helper's P or F, or its deadline. */
static void send_start(struct sshl *l, struct launch_proc *p)
{
    struct sproc *x = sp(p);
    if (!x->line.len || p->exited)
        return;
    launch_core_starting(p, ea_now_ms() + SSH_START_TIMEOUT_MS);
    int r = send_line(l, x->line.p, x->line.len); /* a failure: conn_lost ended p already */
    ssh_buf_free(&x->line);
    (void)r;
}

/* The set-up failed: every start queued behind it fails with its reason. */
static void connect_failed(struct sshl *l, int r, const char *msg)
{
    for (size_t i = 0; i < l->core.n; i++) {
        struct launch_proc *p = l->core.v[i];
        if (p->exited || !sp(p)->line.len)
            continue;
        ssh_buf_free(&sp(p)->line);
        launch_core_start_failed(p, r, "%s", msg);
        sp_exit(p, 127, 0); /* the code is the start failure's */
    }
}

/* Drive the connection's set-up: on "R", send the fence and the queued start lines. */
static void connect_step(struct sshl *l)
{
    if (l->connected || l->conn.state == SSH_CONN_DOWN)
        return;
    struct ea_error err = {0};
    int r = ssh_conn_step(&l->conn, &l->t, ea_now_ms(), &err);
    if (r == 0 && (r = watch_conn(l)) == 0)
        return; /* pending */
    if (r < 0) {
        if (l->conn.state != SSH_CONN_DOWN) { /* the watch failed */
            ssh_conn_close(&l->conn, 0);
            ea_errorf(&err, r, "cannot watch the ssh connection: %s", strerror(-r));
        }
        connect_failed(l, r, err.msg);
        return;
    }
    if ((r = watch_conn(l)) < 0) {
        ssh_conn_close(&l->conn, 0);
        ea_errorf(&err, r, "cannot watch the ssh connection: %s", strerror(-r));
        connect_failed(l, r, err.msg);
        return;
    }
    l->connected = true;
    l->fence_sent = 0;
    send_fence(l); /* a new helper: it knows nothing of the fence yet */
    for (size_t i = 0; i < l->core.n && l->connected; i++)
        send_start(l, l->core.v[i]);
}

static int open_outputs(struct launch_proc *p, const struct launch_spec *spec, struct ea_error *err)
{
    for (int k = 0; k < 2; k++) {
        struct sstream *s = &sp(p)->out[k];
        const char *path = k ? spec->stderr_path : spec->stdout_path;
        if (path && (s->file_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) < 0)
            return ea_errorf(err, -errno, "cannot open '%s' for the output of '%s': %s", path,
                             spec->argv[0], strerror(errno));
    }
    return 0;
}

static int ssh_spawn(struct launch_proc *p, const struct launch_spec *spec, struct ea_error *err)
{
    struct sshl *l = (struct sshl *)p->core;
    struct sproc *x = sp(p);
    for (int k = 0; k < 2; k++)
        x->out[k] = (struct sstream){.file_fd = -1, .out_fd = k ? 2 : 1, .tee = spec->tee};
    if (spec->pass_fd >= 3)
        return ea_errorf(err, -EOPNOTSUPP, "the ssh launcher cannot pass an fd to a remote "
                                           "process");
    x->slot = ++l->next_slot;
    int r = open_outputs(p, spec, err);
    if (r < 0)
        return r;
    const char *cwd = spec->cwd ? spec->cwd : l->cwd;
    const char *const empty[] = {NULL};
    if (!(x->cwd = strdup(cwd)) ||
        ssh_start_line(&x->line, x->slot, cwd, spec->cwd != NULL, spec->envp ? spec->envp : empty,
                       spec->argv) < 0)
        return ea_errorf(err, -ENOMEM, "out of memory");
    launch_core_starting(p, -1); /* until its line is sent: the set-up's own deadline */
    if (l->connected) {
        send_start(l, p);
        return 0;
    }
    if (l->conn.state == SSH_CONN_DOWN) {
        struct ea_error cerr = {0};
        r = ssh_conn_begin(&l->conn, &l->t, l->connect_timeout_ms, ea_now_ms(), &cerr);
        if (r < 0) { /* at once (no ssh, no slot directory): a start failure all the same */
            connect_failed(l, r, cerr.msg);
            return 0;
        }
    }
    connect_step(l); /* up already (r == 1), or watch what the set-up waits on */
    return 0;
}

static const struct launch_core_ops ssh_core_ops = {
    .impl_size = sizeof(struct sproc), .spawn = ssh_spawn, .signal = send_signal,
    .reap = ssh_reap, .destroy = ssh_destroy, .free = sp_free, .wake = ssh_wake,
    .abort_start = ssh_abort_start};

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
    launch_core_init(&l->core, &launch_ssh_ops, &ssh_core_ops);
    l->sigfd = l->evfd = -1;
    l->t.port = cfg->port;
    l->t.parallel = cfg->conn_parallel;
    l->fence_grace_ms = cfg->fence_grace_ms;
    l->connect_timeout_ms =
        cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : SSH_CONNECT_TIMEOUT_MS;
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
    if ((r = launch_core_open(&l->core, l->sigfd, err)) < 0)
        goto error;
    l->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->evfd < 0 || (r = launch_core_watch(&l->core, l->evfd, NULL)) < 0) {
        r = ea_errorf(err, r < 0 ? r : -errno, "cannot set up the launcher's fds: %s",
                      strerror(r < 0 ? -r : errno));
        goto error;
    }
    *ret = &l->core.base;
    return 0;
nomem:
    r = ea_errorf(err, -ENOMEM, "out of memory");
error:
    ssh_destroy(&l->core);
    return r;
}

const struct launcher_ops launch_ssh_ops = {
    .name = "ssh", .create = ssh_create, .fence = ssh_fence, LAUNCH_CORE_OPS};
