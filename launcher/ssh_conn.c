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

/* One of `n` slot files in `dir`, exclusively flock'ed while connecting (closing it releases
 * it). Opened once (slots_open), then tried without waiting (slots_try) each time something may
 * have freed one: a holder's close of its slot file (its release, or its death) is an inotify
 * event on c->slot_in, watched before the first try so none is missed. Without inotify (a
 * thousand nodes waiting at once exceed fs.inotify.max_user_instances, 128 by default) the
 * tries come every SSH_SLOT_RETRY_MS. */
#define SSH_SLOT_RETRY_MS 100

static void slots_close(struct ssh_conn *c)
{
    for (int i = 0; i < c->nslots; i++)
        if (c->slots[i] >= 0 && c->slots[i] != c->slot_fd)
            close(c->slots[i]);
    free(c->slots);
    c->slots = NULL;
    c->nslots = 0;
    if (c->slot_in >= 0)
        close(c->slot_in);
    c->slot_in = -1;
}

static int slots_open(struct ssh_conn *c, const char *dir, int n, struct ea_error *err)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return ea_errorf(err, -errno, "cannot create the ssh connection-slot directory '%s': %s",
                         dir, strerror(errno));
    c->slot_in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (c->slot_in >= 0 && inotify_add_watch(c->slot_in, dir, IN_CLOSE_WRITE) < 0) {
        close(c->slot_in);
        c->slot_in = -1;
    }
    if (!(c->slots = malloc((size_t)n * sizeof(*c->slots))))
        return ea_errorf(err, -ENOMEM, "out of memory");
    char path[4096];
    for (; c->nslots < n; c->nslots++) {
        snprintf(path, sizeof(path), "%s/slot.%d", dir, c->nslots);
        /* kept open while waiting: a try that fails must not itself wake the other waiters */
        if ((c->slots[c->nslots] = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0)
            return ea_errorf(err, -errno, "cannot open the ssh connection slot '%s': %s", path,
                             strerror(errno));
    }
    c->slot_start = (int)(getpid() % n); /* agents starting together spread over the slots */
    return 0;
}

/* 1 with c->slot_fd held, 0 when every slot is taken (try again on c->slot_in or later), or a
 * negative errno. */
static int slots_try(struct ssh_conn *c, const char *dir, struct ea_error *err)
{
    char ev[sizeof(struct inotify_event) + NAME_MAX + 1];
    while (c->slot_in >= 0 && read(c->slot_in, ev, sizeof(ev)) > 0)
        ; /* whatever was freed, the tries below find it */
    for (int k = 0; k < c->nslots; k++) {
        int i = (c->slot_start + k) % c->nslots;
        if (flock(c->slots[i], LOCK_EX | LOCK_NB) == 0) {
            c->slot_fd = c->slots[i];
            slots_close(c);
            return 1;
        }
        if (errno != EWOULDBLOCK && errno != EINTR)
            return ea_errorf(err, -errno, "cannot lock '%s/slot.%d': %s", dir, i, strerror(errno));
    }
    return 0;
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
    if (c->state == SSH_CONN_SLOT || c->state == SSH_CONN_HELLO) { /* a set-up given up */
        slots_close(c);
        if (c->slot_fd >= 0)
            close(c->slot_fd);
        c->slot_fd = -1;
    }
    c->state = SSH_CONN_DOWN;
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

/* The helper's "R" (or "Z why") among what ssh printed, skipping what a login script may have
 * printed: 1 with it, 0 while nothing decisive came, else the failure. */
static int hello(struct ssh_conn *c, const struct ssh_target *t, int64_t now, struct ea_error *err)
{
    char msg[600];
    char *line;
    size_t len;
    while (ssh_conn_line(c, &line, &len)) {
        if (strncmp(line, "R ", 2) == 0) {
            snprintf(c->mode, sizeof(c->mode), "%.*s", (int)strcspn(line + 2, " "), line + 2);
            return 1;
        }
        if (strncmp(line, "Z ", 2) == 0)
            return ea_errorf(err, -EPROTO, "ssh to '%s': the remote helper failed: %s", t->host,
                             line + 2);
    }
    if (c->out_fd < 0) {
        ssh_conn_close(c, 2000); /* ssh is ending (its stdout closed): its status and stderr */
        int code = WIFEXITED(c->status) ? WEXITSTATUS(c->status) : -1;
        ssh_conn_stderr(c, msg, sizeof(msg));
        return ea_errorf(err, -EHOSTUNREACH,
                         "cannot connect to host '%s' over ssh (ssh %s %d)%s%s", t->host,
                         code >= 0 ? "exited with" : "killed by signal",
                         code >= 0 ? code : WTERMSIG(c->status), msg[0] ? ": " : "", msg);
    }
    if (now >= c->deadline) {
        ssh_conn_close(c, 0);
        ssh_conn_stderr(c, msg, sizeof(msg));
        return ea_errorf(err, -ETIMEDOUT,
                         "ssh to host '%s': no answer from the remote helper in time%s%s",
                         t->host, msg[0] ? "; ssh said: " : "", msg);
    }
    return 0;
}

static void slot_release(struct ssh_conn *c)
{
    slots_close(c);
    if (c->slot_fd >= 0)
        close(c->slot_fd); /* releases the flock */
    c->slot_fd = -1;
}

int ssh_conn_begin(struct ssh_conn *c, const struct ssh_target *t, int64_t timeout_ms,
                   int64_t now, struct ea_error *err)
{
    *c = (struct ssh_conn){.pidfd = -1, .in_fd = -1, .out_fd = -1, .err_fd = -1, .slot_fd = -1,
                           .slot_in = -1, .state = SSH_CONN_SLOT, .timeout_ms = timeout_ms};
    int r = t->lock_dir && t->parallel > 0 ? slots_open(c, t->lock_dir, t->parallel, err) : 0;
    if (r < 0) {
        slot_release(c);
        c->state = SSH_CONN_DOWN;
        return r;
    }
    return ssh_conn_step(c, t, now, err);
}

int ssh_conn_step(struct ssh_conn *c, const struct ssh_target *t, int64_t now,
                  struct ea_error *err)
{
    int r = 0;
    if (c->state == SSH_CONN_SLOT) {
        if (c->nslots > 0 && (r = slots_try(c, t->lock_dir, err)) <= 0) {
            c->slot_retry = now + SSH_SLOT_RETRY_MS;
            if (r == 0)
                return 0;
            goto fail;
        }
        c->deadline = now + c->timeout_ms; /* once it is our turn */
        r = spawn_client(c, t, err);
        if (r == -ENOENT)
            r = ea_errorf(err, r, "cannot run ssh for host '%s': %s", t->host, err ? err->msg : "");
        if (r < 0)
            goto fail;
        char head[32];
        size_t script = strlen(ssh_helper_script);
        int n = snprintf(head, sizeof(head), "%zu\n", script);
        /* a few KB into an empty socket: it does not wait. A send error means ssh has gone (or
         * hangs): the handshake reports why */
        if (ssh_conn_send(c, head, (size_t)n, SSH_HELLO_SEND_MS) == 0)
            ssh_conn_send(c, ssh_helper_script, script, SSH_HELLO_SEND_MS);
        c->state = SSH_CONN_HELLO;
    }
    if (c->state == SSH_CONN_HELLO) {
        ssh_conn_pump(c);
        if ((r = hello(c, t, now, err)) == 0)
            return 0;
        if (r < 0)
            goto fail;
        slot_release(c);
        c->state = SSH_CONN_UP;
    }
    return c->state == SSH_CONN_UP ? 1 : ea_errorf(err, -ENOTCONN, "not connected");
fail:
    slot_release(c);
    ssh_conn_close(c, 0);
    c->state = SSH_CONN_DOWN;
    return r;
}

int64_t ssh_conn_wake(const struct ssh_conn *c)
{
    if (c->state == SSH_CONN_SLOT)
        return c->slot_in >= 0 ? -1 : c->slot_retry;
    return c->state == SSH_CONN_HELLO ? c->deadline : -1;
}

int ssh_conn_fds(const struct ssh_conn *c, int fds[4])
{
    int n = 0;
    const int all[4] = {c->slot_in, c->out_fd, c->err_fd, c->pidfd};
    for (int i = 0; i < 4; i++)
        if (all[i] >= 0)
            fds[n++] = all[i];
    return n;
}
