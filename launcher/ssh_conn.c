// SPDX-License-Identifier: Apache-2.0
/*
 * ssh_conn: the one ssh connection of an ssh launcher (one host): a connection slot taken from a
 * directory of flock'ed files while it is being set up (bounding parallel setups across agent
 * processes), the client started through the spawn recipe, the helper sent and its "R" awaited,
 * then line-oriented I/O with it. The client's stdin is a socket, so writing to a dead connection
 * is -EPIPE rather than SIGPIPE.
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
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ea_loop.h"
#include "ea_time.h"
#include "proc.h"
#include "ssh_internal.h"

#define SSH_MAX_ARGS 64
#define SSH_READ_MAX (1 << 20) /* bytes read per pump, for fairness */

/* ---- connection slots --------------------------------------------------------------------- */

/* One of `n` slot files in `dir`, exclusively flock'ed (closing *ret_fd releases it); when all
 * are taken, waits for whichever is freed first: a holder's close of its slot file (its release,
 * or its death) is an inotify event, watched before the first try so none is missed. Without
 * inotify (a thousand nodes waiting at once exceed fs.inotify.max_user_instances, 128 by
 * default) it waits for the first slot it tried. Without a bound *ret_fd is -1. */
static int slot_take(const char *dir, int n, struct ea_error *err, int *ret_fd)
{
    *ret_fd = -1;
    if (!dir || n <= 0)
        return 0;
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return ea_errorf(err, -errno, "cannot create the ssh connection-slot directory '%s': %s",
                         dir, strerror(errno));
    int in = inotify_init1(IN_CLOEXEC);
    if (in >= 0 && inotify_add_watch(in, dir, IN_CLOSE_WRITE) < 0) {
        close(in);
        in = -1;
    }
    int *fd = malloc((size_t)n * sizeof(*fd));
    int r = fd ? 0 : ea_errorf(err, -ENOMEM, "out of memory");
    int opened = 0, got = -1;
    char path[4096];
    for (; r == 0 && opened < n; opened++) {
        snprintf(path, sizeof(path), "%s/slot.%d", dir, opened);
        /* kept open while waiting: a try that fails must not itself wake the other waiters */
        if ((fd[opened] = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0)
            r = ea_errorf(err, -errno, "cannot open the ssh connection slot '%s': %s", path,
                          strerror(errno));
    }
    int start = (int)(getpid() % n); /* agents starting together spread over the slots */
    while (r == 0 && got < 0) {
        for (int k = 0; k < n && got < 0; k++) {
            int i = (start + k) % n;
            if (flock(fd[i], LOCK_EX | LOCK_NB) == 0)
                got = i;
            else if (errno != EWOULDBLOCK && errno != EINTR)
                r = ea_errorf(err, -errno, "cannot lock '%s/slot.%d': %s", dir, i, strerror(errno));
        }
        if (r != 0 || got >= 0)
            break;
        char ev[sizeof(struct inotify_event) + NAME_MAX + 1];
        int w = in >= 0 ? (int)read(in, ev, sizeof(ev)) : flock(fd[start], LOCK_EX);
        if (w < 0 && errno != EINTR)
            r = ea_errorf(err, -errno, "cannot wait for an ssh connection slot in '%s': %s", dir,
                          strerror(errno));
        else if (w == 0 && in < 0)
            got = start;
    }
    for (int i = 0; i < opened; i++)
        if (i != got && fd[i] >= 0)
            close(fd[i]);
    if (got >= 0)
        *ret_fd = fd[got];
    free(fd);
    if (in >= 0)
        close(in);
    return r;
}

/* ---- I/O ---------------------------------------------------------------------------------- */

static void err_pump(struct ssh_conn *c)
{
    char buf[512];
    for (;;) {
        ssize_t n = c->err_fd >= 0 ? read(c->err_fd, buf, sizeof(buf)) : 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            if (c->err_fd >= 0)
                close(c->err_fd);
            c->err_fd = -1;
            return;
        }
        size_t cap = sizeof(c->errtail) - 1;
        size_t add = (size_t)n > cap ? cap : (size_t)n;
        const char *src = buf + n - add;
        if (c->errlen + add > cap) {
            size_t drop = c->errlen + add - cap;
            memmove(c->errtail, c->errtail + drop, c->errlen - drop);
            c->errlen -= drop;
        }
        memcpy(c->errtail + c->errlen, src, add);
        c->errlen += add;
        c->errtail[c->errlen] = '\0';
    }
}

static void reap_client(struct ssh_conn *c)
{
    if (c->exited || c->pid <= 0)
        return;
    proc_reap();
    int st;
    int64_t end;
    if (proc_exit_status(c->pid, &st, &end) == 1) {
        c->exited = true;
        c->status = st;
        proc_table_remove(c->pid);
    }
}

bool ssh_conn_pump(struct ssh_conn *c)
{
    if (c->rpos > 0) {
        memmove(c->rbuf.p, c->rbuf.p + c->rpos, c->rbuf.len - c->rpos);
        c->rbuf.len -= c->rpos;
        c->rpos = 0;
        if (c->rbuf.p)
            c->rbuf.p[c->rbuf.len] = '\0';
    }
    size_t total = 0;
    while (c->out_fd >= 0 && total < SSH_READ_MAX) {
        char buf[65536];
        ssize_t n = read(c->out_fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0 || ssh_buf_add(&c->rbuf, buf, (size_t)n) < 0) {
            close(c->out_fd);
            c->out_fd = -1;
            break;
        }
        total += (size_t)n;
    }
    err_pump(c);
    reap_client(c);
    return c->out_fd >= 0;
}

bool ssh_conn_line(struct ssh_conn *c, char **ret_line, size_t *ret_len)
{
    if (c->rpos >= c->rbuf.len)
        return false;
    char *start = c->rbuf.p + c->rpos;
    char *nl = memchr(start, '\n', c->rbuf.len - c->rpos);
    if (!nl)
        return false;
    *nl = '\0';
    *ret_line = start;
    *ret_len = (size_t)(nl - start);
    c->rpos += *ret_len + 1;
    return true;
}

int ssh_conn_send(struct ssh_conn *c, const char *data, size_t n, int timeout_ms)
{
    int64_t deadline = ea_now_ms() + timeout_ms;
    while (n > 0) {
        if (c->in_fd < 0)
            return -EPIPE;
        ssize_t w = send(c->in_fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN) {
            /* the helper is not reading: keep draining its output meanwhile */
            struct pollfd p[2] = {{.fd = c->in_fd, .events = POLLOUT},
                                  {.fd = c->out_fd, .events = POLLIN}};
            int left = ea_timeout_until(deadline);
            if (left <= 0)
                return -ETIMEDOUT;
            if (ea_wait_fds(p, 2, deadline) > 0 && p[1].revents)
                ssh_conn_pump(c);
            continue;
        }
        if (w < 0)
            return -EPIPE;
        data += w;
        n -= (size_t)w;
    }
    return 0;
}

const char *ssh_conn_stderr(const struct ssh_conn *c, char *buf, size_t size)
{
    /* the tail, whitespace folded: "Permission denied (publickey)." and the like */
    size_t k = 0;
    bool space = false;
    for (const char *s = c->errtail; *s && k + 1 < size; s++) {
        if (*s == '\n' || *s == '\r' || *s == '\t' || *s == ' ') {
            space = k > 0;
            continue;
        }
        if (space && k + 2 < size)
            buf[k++] = ' ';
        space = false;
        buf[k++] = *s;
    }
    buf[k] = '\0';
    return buf;
}

/* ---- set-up and tear-down ----------------------------------------------------------------- */

void ssh_conn_close(struct ssh_conn *c, int wait_ms)
{
    if (c->in_fd >= 0)
        close(c->in_fd);
    c->in_fd = -1;
    if (c->pid > 0 && !c->exited) {
        int64_t deadline = ea_now_ms() + wait_ms;
        while (!c->exited && ea_timeout_until(deadline) > 0) {
            struct pollfd p[3] = {{.fd = c->pidfd, .events = POLLIN},
                                  {.fd = c->out_fd, .events = POLLIN},
                                  {.fd = c->err_fd, .events = POLLIN}};
            ea_wait_fds(p, 3, c->pidfd >= 0 ? deadline : ea_now_ms() + 50);
            ssh_conn_pump(c);
        }
        if (!c->exited) {
            kill(c->pid, SIGKILL);
            while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
                ;
            proc_table_remove(c->pid);
            c->exited = true;
        }
    }
    if (c->out_fd >= 0)
        close(c->out_fd);
    if (c->err_fd >= 0)
        close(c->err_fd);
    if (c->pidfd >= 0)
        close(c->pidfd);
    c->out_fd = c->err_fd = c->pidfd = -1;
    ssh_buf_free(&c->rbuf);
    c->rpos = 0;
    c->pid = 0;
}

static int build_argv(const struct ssh_target *t, const char **argv, char *port)
{
    int n = 0;
    argv[n++] = "ssh";
    argv[n++] = "-o";
    argv[n++] = "BatchMode=yes";
    if (t->port > 0) {
        snprintf(port, 16, "%d", t->port);
        argv[n++] = "-p";
        argv[n++] = port;
    }
    if (t->identity) {
        argv[n++] = "-i";
        argv[n++] = t->identity;
    }
    if (t->user) {
        argv[n++] = "-l";
        argv[n++] = t->user;
    }
    for (size_t i = 0; t->options && t->options[i]; i++) {
        if (n + 12 >= SSH_MAX_ARGS)
            return -E2BIG;
        argv[n++] = "-o";
        argv[n++] = t->options[i];
    }
    /* after the user's options: for ssh the first value given wins */
    static const char *const defaults[] = {"ConnectTimeout=10", "ServerAliveInterval=5",
                                           "ServerAliveCountMax=3"};
    for (size_t i = 0; i < sizeof(defaults) / sizeof(*defaults); i++) {
        argv[n++] = "-o";
        argv[n++] = defaults[i];
    }
    argv[n++] = "-T"; /* no tty: signals and EOF stay ours */
    argv[n++] = "-e";
    argv[n++] = "none";
    argv[n++] = "--";
    argv[n++] = t->host;
    argv[n++] = ssh_bootstrap;
    argv[n] = NULL;
    return 0;
}

static int spawn_client(struct ssh_conn *c, const struct ssh_target *t, struct ea_error *err)
{
    const char *argv[SSH_MAX_ARGS];
    char port[16];
    if (build_argv(t, argv, port) < 0)
        return ea_errorf(err, -E2BIG, "too many --ssh-option values");
    int sv[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1};
    int r = 0;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 || pipe2(out, O_CLOEXEC) < 0 ||
        pipe2(er, O_CLOEXEC) < 0) {
        r = ea_errorf(err, -errno, "cannot create pipes for ssh: %s", strerror(errno));
        goto out;
    }
    shutdown(sv[0], SHUT_RD); /* ours only writes: the helper's EOF is our close */
    struct proc_spawn_opts o = {
        .argv = argv,
        .stdin_fd = sv[1],
        .stdout_fd = out[1],
        .stderr_fd = er[1],
        .flags = PROC_NEW_SESSION | PROC_DEATHSIG | PROC_SEARCH_PATH | PROC_CLOSE_FDS,
        .deathsig = SIGKILL, /* the agent's death drops the connection: the helper reaps */
        .report_fd = -1,
    };
    r = proc_spawn(&o, &c->pid, NULL, err);
    if (r < 0)
        goto out;
    if ((r = proc_table_add(c->pid)) < 0) {
        kill(c->pid, SIGKILL);
        while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        c->pid = 0;
        r = ea_errorf(err, r, "out of memory");
        goto out;
    }
    c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
    c->in_fd = sv[0];
    c->out_fd = out[0];
    c->err_fd = er[0];
    sv[0] = out[0] = er[0] = -1;
    fcntl(c->out_fd, F_SETFL, O_NONBLOCK);
    fcntl(c->err_fd, F_SETFL, O_NONBLOCK);
out:
    for (int k = 0; k < 2; k++) {
        if (sv[k] >= 0)
            close(sv[k]);
        if (out[k] >= 0)
            close(out[k]);
        if (er[k] >= 0)
            close(er[k]);
    }
    return r;
}

/* Wait for the helper's "R" (or "Z why"), skipping what a login script may have printed. */
static int handshake(struct ssh_conn *c, const struct ssh_target *t, int64_t deadline,
                     struct ea_error *err)
{
    char msg[600];
    for (;;) {
        char *line;
        size_t len;
        while (ssh_conn_line(c, &line, &len)) {
            if (strncmp(line, "R ", 2) == 0) {
                snprintf(c->mode, sizeof(c->mode), "%.*s", (int)strcspn(line + 2, " "), line + 2);
                return 0;
            }
            if (strncmp(line, "Z ", 2) == 0)
                return ea_errorf(err, -EPROTO, "ssh to '%s': the remote helper failed: %s", t->host,
                                 line + 2);
        }
        if (c->out_fd < 0) {
            ssh_conn_close(c, 2000);
            int code = WIFEXITED(c->status) ? WEXITSTATUS(c->status) : -1;
            ssh_conn_stderr(c, msg, sizeof(msg));
            return ea_errorf(err, -EHOSTUNREACH,
                             "cannot connect to host '%s' over ssh (ssh %s %d)%s%s", t->host,
                             code >= 0 ? "exited with" : "killed by signal",
                             code >= 0 ? code : WTERMSIG(c->status), msg[0] ? ": " : "", msg);
        }
        int left = ea_timeout_until(deadline);
        if (left <= 0) {
            ssh_conn_close(c, 0);
            ssh_conn_stderr(c, msg, sizeof(msg));
            return ea_errorf(err, -ETIMEDOUT,
                             "ssh to host '%s': no answer from the remote helper "
                             "in time%s%s",
                             t->host, msg[0] ? "; ssh said: " : "", msg);
        }
        struct pollfd p[2] = {{.fd = c->out_fd, .events = POLLIN},
                              {.fd = c->err_fd, .events = POLLIN}};
        poll(p, 2, left);
        ssh_conn_pump(c);
    }
}

int ssh_conn_open(struct ssh_conn *c, const struct ssh_target *t, int64_t timeout_ms,
                  struct ea_error *err)
{
    *c = (struct ssh_conn){.pidfd = -1, .in_fd = -1, .out_fd = -1, .err_fd = -1};
    int slot = -1;
    int r = slot_take(t->lock_dir, t->parallel, err, &slot);
    if (r < 0)
        return r;
    int64_t deadline = ea_now_ms() + timeout_ms; /* once it is our turn */
    r = spawn_client(c, t, err);
    if (r == -ENOENT) {
        r = ea_errorf(err, r, "cannot run ssh for host '%s': %s", t->host, err ? err->msg : "");
    } else if (r == 0) {
        char head[32];
        size_t script = strlen(ssh_helper_script);
        int n = snprintf(head, sizeof(head), "%zu\n", script);
        /* a send error means ssh has gone (or hangs): the handshake reports why */
        if (ssh_conn_send(c, head, (size_t)n, ea_timeout_until(deadline)) == 0)
            ssh_conn_send(c, ssh_helper_script, script, ea_timeout_until(deadline));
        r = handshake(c, t, deadline, err);
    }
    if (slot >= 0)
        close(slot); /* releases the flock */
    if (r < 0)
        ssh_conn_close(c, 0);
    return r;
}
