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
    bool started, failed;
    char fail_what[16];
    int fail_errno;
};

struct sshl {
    struct launch_core core; /* first: a struct launcher * is a struct sshl * */
    struct ssh_target t;
    char **opts; /* owned copies behind t */
    bool table;
    int sigfd, evfd;
    struct ssh_conn conn;
    bool connected;
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
        p->pid = (pid_t)strtol(end + 1, NULL, 10);
        sp(p)->started = true;
    } else if (c == 'F') {
        char what[16] = "";
        int e = 0;
        sscanf(end + 1, "%15s %d", what, &e);
        snprintf(sp(p)->fail_what, sizeof(sp(p)->fail_what), "%s", what);
        sp(p)->fail_errno = e > 0 ? e : EIO;
        sp(p)->failed = true;
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
        if (!x->started && !x->failed) {
            x->failed = true;
            snprintf(x->fail_what, sizeof(x->fail_what), "conn");
            x->fail_errno = EPIPE;
        }
        launch_core_tail(p, msg, strlen(msg));
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
    if (p->exited || !sp(p)->started || !l->connected)
        return -ESRCH;
    char line[64];
    int n = snprintf(line, sizeof(line), "_ea_k %u %d\n", sp(p)->slot, sig);
    return send_line(l, line, (size_t)n) < 0 ? -ESRCH : 0;
}

static void ssh_reap(struct launch_core *c)
{
    struct sshl *l = (struct sshl *)c;
    uint64_t ticks;
    while (read(l->evfd, &ticks, sizeof(ticks)) > 0)
        ;
    pump(l);
    proc_reap(); /* a lost connection's client, when pump did not see it */
}

static void ssh_destroy(struct launch_core *c)
{
    struct sshl *l = (struct sshl *)c;
    if (l->connected) {
        launch_core_signal_all(&l->core, SIGKILL);
        /* EOF on its stdin: the helper kills what is left and exits, then ssh does */
        ssh_conn_close(&l->conn, SSH_CLOSE_WAIT_MS);
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

static int connect_host(struct sshl *l, struct ea_error *err)
{
    int r = ssh_conn_open(&l->conn, &l->t, SSH_CONNECT_TIMEOUT_MS, err);
    if (r < 0)
        return r;
    if ((r = launch_core_watch(&l->core, l->conn.out_fd, NULL)) < 0 ||
        (r = launch_core_watch(&l->core, l->conn.err_fd, NULL)) < 0 ||
        (r = launch_core_watch(&l->core, l->conn.pidfd, NULL)) < 0) {
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
        struct sstream *s = &sp(p)->out[k];
        const char *path = k ? spec->stderr_path : spec->stdout_path;
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
    while (l->connected && !sp(p)->started && !sp(p)->failed && !p->exited) {
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
    int e = sp(p)->fail_errno;
    if (strcmp(sp(p)->fail_what, "exec") == 0)
        return ea_errorf(err, -e, "cannot run '%s' on host '%s': %s", prog, l->t.host, strerror(e));
    if (strcmp(sp(p)->fail_what, "chdir") == 0)
        return ea_errorf(err, -e, "cannot change to directory '%s' on host '%s' for '%s': %s", cwd,
                         l->t.host, prog, strerror(e));
    if (strcmp(sp(p)->fail_what, "conn") == 0 || !l->connected) {
        char said[600];
        ssh_conn_stderr(&l->conn, said, sizeof(said));
        return ea_errorf(err, -EPIPE,
                         "lost the ssh connection to host '%s' while starting '%s'%s%s", l->t.host,
                         prog, said[0] ? ": " : "", said);
    }
    return ea_errorf(err, -e, "cannot start '%s' on host '%s': set-up failed: %s", prog, l->t.host,
                     strerror(e));
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
    if (r == 0 && !l->connected)
        r = connect_host(l, err);
    if (r < 0)
        return r;
    const char *cwd = spec->cwd ? spec->cwd : l->cwd;
    struct ssh_buf line = {0};
    const char *const empty[] = {NULL};
    if (ssh_start_line(&line, x->slot, cwd, spec->cwd != NULL, spec->envp ? spec->envp : empty,
                       spec->argv) < 0) {
        ssh_buf_free(&line);
        return ea_errorf(err, -ENOMEM, "out of memory");
    }
    r = send_line(l, line.p, line.len);
    ssh_buf_free(&line);
    if (r == 0 && await_answer(l, p) < 0) {
        /* no answer in time: it may still start; end it quietly when it does */
        launch_core_drop(p, ea_now_ms());
        return ea_errorf(err, -ETIMEDOUT, "host '%s' did not confirm the start of '%s' in time",
                         l->t.host, spec->argv[0]);
    }
    return x->started ? 0 : start_error(l, p, spec, cwd, err);
}

static const struct launch_core_ops ssh_core_ops = {
    .impl_size = sizeof(struct sproc), .spawn = ssh_spawn, .signal = send_signal,
    .reap = ssh_reap, .destroy = ssh_destroy, .free = sp_free};

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
