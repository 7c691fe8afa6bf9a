// SPDX-License-Identifier: Apache-2.0
/* cfg: the store — which backend and run (cfg_resolve_store) and its secret: where the etcd password comes from (--password-fd, --password-file,
 * ELASTIC_ETCD_PASSWORD), taking it out of this process's environment, refusing it on a
 * plaintext connection, and the socket a parent (serve, driver mode) hands its agents it by. The
 * rest of the fds a parent hands over (--worker-env-fd) are checked here too. See
 * docs/security.md, "Credentials and process hygiene". */
#include "config.h"
#include "config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

extern char **environ;

#define PW_VAR "ELASTIC_ETCD_PASSWORD"

static const char *env_value(char **envp, const char *name)
{
    size_t len = strlen(name);
    for (char **e = envp; e && *e; e++)
        if (strncmp(*e, name, len) == 0 && (*e)[len] == '=')
            return *e + len + 1;
    return NULL;
}

/* Take the password variable out of this process's environment: its value's bytes are
 * overwritten where they lie first — the initial environment block, which /proc/<pid>/environ
 * shows whatever unsetenv() does to `environ` — then the entries go, so no child inherits it. */
static void scrub_own_env(void)
{
    size_t len = strlen(PW_VAR);
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, PW_VAR, len) == 0 && (*e)[len] == '=')
            explicit_bzero(*e + len + 1, strlen(*e + len + 1));
    unsetenv(PW_VAR);
}

int cfg_parse_fd(const char *origin, const char *v, int *ret_fd, struct ea_error *err)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (!isdigit((unsigned char)v[0]) || errno || *end || n > INT_MAX)
        return ea_errorf(err, -EINVAL, "%s: '%s' is not a file descriptor number", origin, v);
    if (fcntl((int)n, F_GETFD) < 0)
        return ea_errorf(err, -EINVAL, "%s: file descriptor %ld is not open", origin, n);
    *ret_fd = (int)n;
    return 0;
}

/* Who traces this process (TracerPid in /proc/self/status): 0 when nobody, or unknown. */
static long tracer_pid(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return 0;
    char line[256];
    long pid = 0;
    while (fgets(line, sizeof(line), f) && sscanf(line, "TracerPid: %ld", &pid) != 1)
        ;
    fclose(f);
    return pid;
}

/* The password from fd `fd`: the one message waiting on a SOCK_SEQPACKET socket (a parent's
 * hand-over, cfg_password_socket: peeked, so that serve can check a run's options with it and
 * still hand it on), else read from its start when it can seek (a memfd, a file), else to
 * its end (a pipe). The fd is made close-on-exec: nothing this process starts inherits it. */
static int read_fd(struct cfg *c, int fd, struct ea_error *err)
{
    size_t size = sizeof(c->password_buf), n = 0;
    int type = 0;
    socklen_t tlen = sizeof(type);
    ssize_t r;
    bool handed = getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) == 0 &&
                  type == SOCK_SEQPACKET; /* a parent's hand-over (cfg_password_socket) */
    /* a tracer attached while this fresh exec was still dumpable stays attached after the
     * prctl and would read the password from memory: not under a tracer */
    long tracer = handed ? tracer_pid() : 0;
    if (tracer) {
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        return ea_errorf(err, -EPERM,
                         "--password-fd: process %ld traces this one: the password handed "
                         "over is not read under a tracer",
                         tracer);
    }
    if (handed)
        r = recv(fd, c->password_buf, size, MSG_PEEK | MSG_DONTWAIT);
    else
        r = pread(fd, c->password_buf, size, 0);
    if (r < 0 && errno == ESPIPE) {
        r = 0;
        while (n < size &&
               ((r = read(fd, c->password_buf + n, size - n)) > 0 || (r < 0 && errno == EINTR)))
            n += r > 0 ? (size_t)r : 0;
    } else if (r > 0) {
        n = (size_t)r;
    }
    int e = errno;
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    if (r < 0)
        return ea_errorf(err, -EINVAL, "--password-fd: cannot read file descriptor %d: %s", fd,
                         strerror(e));
    if (n == size)
        return ea_errorf(err, -EINVAL, "--password-fd: the password is longer than %zu bytes",
                         size - 1);
    c->password_buf[n] = '\0';
    c->password_buf[strcspn(c->password_buf, "\r\n")] = '\0';
    if (!c->password_buf[0])
        return ea_errorf(err, -EINVAL, "--password-fd: file descriptor %d holds no password", fd);
    return 0;
}

bool cfg_store_plaintext(const struct cfg *c)
{
    if (!c->backend || !c->endpoints)
        return false;
    if (strcmp(c->backend, "etcd") == 0)
        return !c->cacert && !c->cert && !c->key; /* gRPC: TLS only with TLS files */
    if (strcmp(c->backend, "etcd-gateway") != 0)
        return false;
    for (const char *p = c->endpoints; *p; p += strcspn(p, ",")) { /* any http:// endpoint */
        p += strspn(p, ", ");
        if (strncasecmp(p, "http://", 7) == 0)
            return true;
    }
    return false;
}

/* --user over plaintext sends the password in clear to whoever sees the traffic. */
static int check_transport(const struct cfg *c, struct ea_error *err)
{
    if (!c->user && c->insecure_transport)
        return ea_errorf(err, -EINVAL,
                         "--insecure-transport only lets --user's password cross "
                         "a plaintext connection: without --user it means nothing");
    if (!c->user || c->insecure_transport || !cfg_store_plaintext(c))
        return 0;
    bool gw = strcmp(c->backend, "etcd-gateway") == 0;
    return ea_errorf(err, -EINVAL,
                     "--user '%s': the password would cross a plaintext connection to '%s'; %s, "
                     "or give --insecure-transport to send it in clear anyway",
                     c->user, c->endpoints,
                     gw ? "use https:// endpoints"
                        : "give etcd's CA with --cacert (TLS; --cert/--key for client "
                          "certificates)");
}

int cfg_read_password(struct cfg *c, char **envp, struct ea_error *err)
{
    int r = 0, fd = -1;
    const char *env = env_value(envp, PW_VAR);
    if (c->password_fd && (r = cfg_parse_fd("--password-fd", c->password_fd, &fd, err)) < 0)
        goto out;
    if (c->password_fd && c->password_file) {
        r = ea_errorf(err, -EINVAL, "give one of --password-fd and --password-file");
        goto out;
    }
    if (!c->user) {
        if (c->password_file || c->password_fd)
            r = ea_errorf(err, -EINVAL, "%s needs --user",
                          c->password_file ? "--password-file" : "--password-fd");
        else
            r = check_transport(c, err);
        goto out;
    }
    if ((r = check_transport(c, err)) < 0)
        goto out;
    if (fd >= 0) {
        r = read_fd(c, fd, err);
    } else if (c->password_file) {
        FILE *f = fopen(c->password_file, "re");
        if (!f) {
            r = ea_errorf(err, -EINVAL, "--password-file: cannot read '%s': %s", c->password_file,
                          strerror(errno));
            goto out;
        }
        char *ok = fgets(c->password_buf, sizeof(c->password_buf), f);
        fclose(f);
        if (!ok)
            r = ea_errorf(err, -EINVAL, "--password-file: '%s' is empty", c->password_file);
        else
            c->password_buf[strcspn(c->password_buf, "\r\n")] = '\0';
    } else if (env) {
        if (strlen(env) >= sizeof(c->password_buf))
            r = ea_errorf(err, -EINVAL, PW_VAR " is too long");
        else
            memcpy(c->password_buf, env, strlen(env) + 1);
    } else {
        r = ea_errorf(err, -EINVAL,
                      "--user needs a password: set " PW_VAR ", --password-file "
                      "or --password-fd");
    }
    if (r == 0)
        c->password = c->password_buf;
out:
    if (envp == environ && env)
        scrub_own_env(); /* read or not, it never stays for a child to inherit */
    if (r < 0)
        explicit_bzero(c->password_buf, sizeof(c->password_buf));
    return r;
}

int cfg_password_socket(const struct cfg *c, int *ret_fd, struct ea_error *err)
{
    if (!c->password)
        return ea_errorf(err, -EINVAL, "no password to hand over");
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return ea_errorf(err, -errno, "socketpair: %s", strerror(errno));
    /* one message, then the sending end is gone: the message waits in sv[0]'s queue, which
     * only a holder of sv[0] can read — /proc/<pid>/fd/N of a socket cannot be opened */
    size_t len = strlen(c->password);
    ssize_t n = send(sv[1], c->password, len, MSG_NOSIGNAL);
    int e = n < 0 ? errno : EIO;
    close(sv[1]);
    int fd = sv[0];
    if (n == (ssize_t)len && fd < 3) { /* proc_spawn's keep_fd needs 3 or more */
        fd = fcntl(sv[0], F_DUPFD_CLOEXEC, 3);
        e = errno;
        close(sv[0]);
    }
    if (n != (ssize_t)len || fd < 0) {
        if (fd >= 0)
            close(fd);
        return ea_errorf(err, -e, "handing over the password: %s", strerror(e));
    }
    *ret_fd = fd;
    return 0;
}

/* The store connection the options name, the password included (kept in the cfg, never in the
 * environment). */
struct kv_config cfg_kv_config(const struct cfg *c, int request_timeout_ms)
{
    return (struct kv_config){.backend = c->backend,
                              .endpoints = c->endpoints,
                              .state_dir = c->state_dir,
                              .cacert = c->cacert,
                              .cert = c->cert,
                              .key = c->key,
                              .user = c->user,
                              .password = c->password,
                              .request_timeout_ms = request_timeout_ms};
}

static const char *const backends[] = {"memory", "file", "etcd", "etcd-gateway"};

bool cfg_valid_id(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 100 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0) /* ids name paths */
        return false;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
            return false;
    return true;
}

/* Backend, endpoints, run id, state dir and prefix: what every command needs to find the run. */
int cfg_resolve_store(struct cfg *c, struct ea_error *err)
{
    if (!c->backend) {
        if (c->endpoints)
            c->backend = strncmp(c->endpoints, "http://", 7) == 0 ||
                                 strncmp(c->endpoints, "https://", 8) == 0
                             ? "etcd-gateway"
                             : "etcd";
        else
            c->backend = "file";
    }
    bool known = false;
    for (size_t i = 0; i < sizeof(backends) / sizeof(*backends); i++)
        known |= strcmp(c->backend, backends[i]) == 0;
    if (!known)
        return ea_errorf(err, -EINVAL,
                         "--rdzv-backend: unknown backend '%s' (use memory, file, etcd or "
                         "etcd-gateway%s)",
                         c->backend,
                         strcmp(c->backend, "c10d") == 0 || strncmp(c->backend, "etcd-v", 6) == 0 ||
                                 strcmp(c->backend, "static") == 0
                             ? "; that name is a torchrun backend"
                             : "");
    bool remote = strncmp(c->backend, "etcd", 4) == 0;
    if (remote && !c->endpoints)
        return ea_errorf(err, -EINVAL, "the %s backend needs --rdzv-endpoint", c->backend);
    if (!remote && c->endpoints)
        return ea_errorf(err, -EINVAL, "--rdzv-endpoint '%s' has no meaning for the %s backend",
                         c->endpoints, c->backend);
    if (!c->run_id)
        c->run_id = c->standalone ? "standalone" : "default";
    if (!cfg_valid_id(c->run_id))
        return ea_errorf(err, -EINVAL,
                         "--run-id: '%s' must be 1-100 characters of A-Z a-z 0-9 . _ - "
                         "(not . or ..)",
                         c->run_id);
    if (!c->state_dir) {
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        if (xdg && xdg[0])
            snprintf(c->state_dir_buf, sizeof(c->state_dir_buf), "%s/elastic-agent", xdg);
        else
            snprintf(c->state_dir_buf, sizeof(c->state_dir_buf), "/tmp/elastic-agent-%ld",
                     (long)getuid());
        c->state_dir = c->state_dir_buf;
    }
    if (c->prefix[0] != '/' || c->prefix[strlen(c->prefix) - 1] != '/')
        return ea_errorf(err, -EINVAL, "--prefix: '%s' must start and end with '/'", c->prefix);
    return 0;
}
