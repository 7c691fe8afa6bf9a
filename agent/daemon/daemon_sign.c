// SPDX-License-Identifier: Apache-2.0
/* daemon_sign: sign a run spec with ssh-keygen -Y sign (daemon_sign.h). */
#include "daemon_sign.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ea_loop.h"
#include "proc.h"
#include "specsig.h"

#define OUT_MAX SSHSIG_ARMOR_MAX
#define ERR_MAX 2048

int daemon_parse_validity(const char *v, int64_t *ret_ms, struct ea_error *err)
{
    char *end = NULL;
    errno = 0;
    double n = strtod(v, &end);
    double unit = 1000;
    if (end && *end && !end[1])
        unit = *end == 's' ? 1000 : *end == 'm' ? 60e3 : *end == 'h' ? 3600e3
                                                 : *end == 'd' ? 86400e3 : 0;
    else if (end && *end)
        unit = 0;
    double ms = n * unit;
    if (errno || end == v || unit == 0 || !(ms >= (double)SPECSIG_VALID_MIN_MS) ||
        !(ms <= (double)SPECSIG_VALID_MAX_MS))
        return ea_errorf(err, -EINVAL,
                         "--valid-for '%s': not a duration from 1m to 30d (N[s|m|h|d])", v);
    *ret_ms = (int64_t)ms;
    return 0;
}

/* ssh-keygen's three pipes, pumped on an ea_loop: `in` to its stdin, its stdout into out (OUT_MAX),
 * its stderr into errbuf (ERR_MAX - 1); a pipe is closed (-1) when done. */
struct pump {
    int fd[3]; /* stdin (write end), stdout, stderr (read ends) */
    const char *in;
    size_t in_len, sent;
    char *out, *errbuf;
    size_t got, egot;
};

static size_t pump_fds(void *ctx, struct pollfd *fds, size_t max)
{
    const struct pump *pu = ctx;
    (void)max;
    for (int i = 0; i < 3; i++)
        fds[i] = (struct pollfd){.fd = pu->fd[i], .events = i == 0 ? POLLOUT : POLLIN};
    return 3;
}

static void pump_ready(void *ctx, const struct pollfd *p, size_t n, int64_t now)
{
    struct pump *pu = ctx;
    (void)n, (void)now;
    if (pu->fd[0] >= 0 && p[0].revents) {
        ssize_t k = write(pu->fd[0], pu->in + pu->sent, pu->in_len - pu->sent);
        if (k > 0)
            pu->sent += (size_t)k;
        if ((k < 0 && errno != EAGAIN && errno != EINTR) || pu->sent == pu->in_len) {
            close(pu->fd[0]); /* done, or ssh-keygen stopped reading (EPIPE) */
            pu->fd[0] = -1;
        }
    }
    for (int i = 1; i < 3; i++) {
        if (pu->fd[i] < 0 || !p[i].revents)
            continue;
        char *buf = i == 1 ? pu->out : pu->errbuf;
        size_t *got = i == 1 ? &pu->got : &pu->egot, cap = i == 1 ? OUT_MAX : ERR_MAX - 1;
        char sink[512];
        ssize_t k = *got < cap ? read(pu->fd[i], buf + *got, cap - *got)
                               : read(pu->fd[i], sink, sizeof(sink));
        if (k > 0 && *got < cap)
            *got += (size_t)k;
        if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN)) {
            close(pu->fd[i]);
            pu->fd[i] = -1;
        }
    }
}

static const struct ea_loop_source pump_source = {"ssh-keygen", 3, pump_fds, pump_ready, false};

static bool pump_done(void *ctx)
{
    const struct pump *pu = ctx;
    return pu->fd[0] < 0 && pu->fd[1] < 0 && pu->fd[2] < 0;
}

/* Run ssh-keygen with `in` on its stdin; its stdout into out (OUT_MAX), stderr into errbuf. */
static int run_keygen(char **envp, const char *key, const char *in, size_t in_len, char *out,
                      size_t *out_len, char *errbuf, int *ret_status, struct ea_error *err)
{
    int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1};
    if (pipe2(pin, O_CLOEXEC) < 0 || pipe2(pout, O_CLOEXEC) < 0 || pipe2(perr, O_CLOEXEC) < 0) {
        int e = errno;
        for (int i = 0; i < 2; i++) {
            if (pin[i] >= 0)
                close(pin[i]);
            if (pout[i] >= 0)
                close(pout[i]);
            if (perr[i] >= 0)
                close(perr[i]);
        }
        return ea_errorf(err, -e, "pipe: %s", strerror(e));
    }
    const char *argv[] = {"ssh-keygen", "-Y", "sign", "-f", key, "-n", SPECSIG_NAMESPACE, NULL};
    struct proc_spawn_opts o = {.argv = argv, .envp = (const char *const *)envp,
                                .stdin_fd = pin[0], .stdout_fd = pout[1], .stderr_fd = perr[1],
                                .flags = PROC_SEARCH_PATH | PROC_CLOSE_FDS, .report_fd = -1};
    pid_t pid = 0;
    int r = proc_spawn(&o, &pid, NULL, err);
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    if (r < 0) {
        close(pin[1]);
        close(pout[0]);
        close(perr[0]);
        return r;
    }
    fcntl(pin[1], F_SETFL, O_NONBLOCK);
    struct pump pu = {.fd = {pin[1], pout[0], perr[0]}, .in = in, .in_len = in_len, .out = out,
                      .errbuf = errbuf};
    if (in_len == 0) {
        close(pin[1]);
        pu.fd[0] = -1;
    }
    struct ea_loop *l = ea_loop_create(NULL, pump_done, &pu);
    if (l && ea_loop_add_source(l, &pump_source, &pu) == 0)
        ea_loop_run(l); /* until every pipe is closed, or the wait fails */
    ea_loop_destroy(l);
    for (int i = 0; i < 3; i++)
        if (pu.fd[i] >= 0)
            close(pu.fd[i]);
    size_t got = pu.got, egot = pu.egot;
    errbuf[egot] = '\0';
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    *out_len = got;
    *ret_status = status;
    return 0;
}

int daemon_sign(char **envp, const char *key, struct runspec *s, char *ret_fp,
                struct ea_error *err)
{
    char *msg = NULL;
    size_t len = 0;
    int r = runspec_canonical(s, &msg, &len, err);
    if (r < 0)
        return r;
    char *out = malloc(OUT_MAX + 1), errbuf[ERR_MAX];
    size_t n = 0;
    int status = 0;
    void (*old)(int) = signal(SIGPIPE, SIG_IGN); /* ssh-keygen may stop reading, failing */
    if (!out)
        r = ea_errorf(err, -ENOMEM, "out of memory");
    else
        r = run_keygen(envp, key, msg, len, out, &n, errbuf, &status, err);
    signal(SIGPIPE, old);
    if (r == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        size_t e = strlen(errbuf);
        while (e && (errbuf[e - 1] == '\n' || errbuf[e - 1] == '\r'))
            errbuf[--e] = '\0';
        const char *last = strrchr(errbuf, '\n');
        r = ea_errorf(err, -EPERM, "--sign-with '%s': ssh-keygen -Y sign failed (%s %d)%s%s", key,
                      WIFEXITED(status) ? "exit" : "signal",
                      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                      errbuf[0] ? ": " : "", last ? last + 1 : errbuf);
    }
    struct sshsig sig;
    struct ea_error perr = {0};
    if (r == 0) {
        out[n] = '\0';
        if (sshsig_parse(out, n, &sig, &perr) < 0 ||
            sshsig_verify(&sig, SPECSIG_NAMESPACE, msg, len, &perr) < 0)
            r = ea_errorf(err, -EINVAL, "--sign-with '%s': the signature ssh-keygen made cannot "
                          "be used: %s", key, perr.msg);
    }
    if (r == 0) {
        sshsig_fingerprint(sig.key, ret_fp, SSHSIG_FP_MAX);
        free(s->signature);
        s->signature = out;
        out = NULL;
    }
    free(out);
    free(msg);
    return r;
}
