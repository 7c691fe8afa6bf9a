// SPDX-License-Identifier: Apache-2.0
/* sshd_harness: see the header. */
#include "sshd_harness.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SSHD_BIN "/usr/sbin/sshd"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool sshd_h_available(char *why, size_t size)
{
    const char *need[] = {SSHD_BIN, "/usr/bin/ssh-keygen", "/usr/bin/ssh"};
    for (size_t i = 0; i < sizeof(need) / sizeof(*need); i++)
        if (access(need[i], X_OK) < 0) {
            snprintf(why, size, "%s is not installed (scripts/install-deps.sh --test)", need[i]);
            return false;
        }
    return true;
}

/* Run argv to completion with stdout/stderr to /dev/null; its exit code. */
static int run(const char *const *argv)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 1);
        dup2(null, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void enter_netns(const char *ns)
{
    char path[300];
    snprintf(path, sizeof(path), "/run/netns/%s", ns);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
        _exit(120);
    close(fd);
}

/* In a child (inside the namespace when asked): port 0 = bind a free port and return it, else
 * connect to `port` once: 0 when accepted, -1 on failure. */
static int probe(const struct sshd_h *s, int port)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(p[0]);
        if (s->netns[0])
            enter_netns(s->netns);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        if (inet_pton(AF_INET, s->addr, &sa.sin_addr) != 1)
            _exit(121);
        int result = -1;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        socklen_t len = sizeof(sa);
        if (port == 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
            getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
            result = ntohs(sa.sin_port);
        else if (port != 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            result = 0;
        close(fd);
        if (write(p[1], &result, sizeof(result)) < 0)
            _exit(122);
        _exit(0);
    }
    close(p[1]);
    int result = -1;
    if (read(p[0], &result, sizeof(result)) != (ssize_t)sizeof(result))
        result = -1;
    close(p[0]);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    return result;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n = getdelim(&buf, &cap, '\0', f);
    fclose(f);
    if (n < 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fputs(text, f);
    fclose(f);
}

static void show_log(const struct sshd_h *s)
{
    char *log = slurp(s->log);
    fprintf(stderr, "---- sshd log %s ----\n%s\n----\n", s->log, log ? log : "(none)");
    free(log);
}

static void keygen(const char *path)
{
    const char *argv[] = {
        "/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ea-test", "-f", path, NULL};
    cr_assert_eq(run(argv), 0, "ssh-keygen -f %s failed", path);
}

/* Until sshd logs that it listens (inotify on its log), or exits, or the deadline. */
static bool wait_listening(const struct sshd_h *s, int64_t deadline)
{
    int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    cr_assert_geq(in, 0);
    inotify_add_watch(in, s->log, IN_MODIFY);
    bool ok = false;
    for (;;) {
        char *log = slurp(s->log);
        ok = log && strstr(log, "Server listening on");
        free(log);
        int left = (int)(deadline - now_ms());
        if (ok || left <= 0)
            break;
        struct pollfd p[2] = {{.fd = in, .events = POLLIN}, {.fd = s->pidfd, .events = POLLIN}};
        if (poll(p, 2, left) > 0 && p[1].revents)
            break; /* sshd exited */
        char buf[4096];
        while (read(in, buf, sizeof(buf)) > 0)
            ;
    }
    close(in);
    return ok;
}

static bool try_start(struct sshd_h *s, const struct sshd_h_opts *o)
{
    s->port = probe(s, 0);
    cr_assert_gt(s->port, 0, "no free port on %s", s->addr);
    snprintf(s->port_str, sizeof(s->port_str), "%d", s->port);
    char cfg[300], text[4096];
    snprintf(cfg, sizeof(cfg), "%s/sshd_config", s->dir);
    snprintf(text, sizeof(text),
             "Port %d\nListenAddress %s\nHostKey %s/host_key\nPidFile none\n"
             "AuthorizedKeysFile %s/authorized_keys\nStrictModes no\nUsePAM no\n"
             "PubkeyAuthentication yes\nPasswordAuthentication no\n"
             "KbdInteractiveAuthentication no\nPermitRootLogin yes\nLogLevel INFO\n"
             "MaxStartups 100:30:200\n%s\n",
             s->port, s->addr, s->dir, s->dir, o && o->extra_config ? o->extra_config : "");
    write_file(cfg, text);
    /* known_hosts: the generated host key under every name a test may use */
    char pubpath[300];
    snprintf(pubpath, sizeof(pubpath), "%s/host_key.pub", s->dir);
    char *pub = slurp(pubpath);
    cr_assert_not_null(pub);
    snprintf(text, sizeof(text), "[%s]:%d %s[localhost]:%d %s", s->addr, s->port, pub, s->port,
             pub);
    free(pub);
    write_file(s->known_hosts, text);
    mkdir("/run/sshd", 0755); /* privilege separation directory */

    int logfd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    cr_assert_geq(logfd, 0);
    pid_t parent = getpid();
    s->pid = fork();
    cr_assert_geq(s->pid, 0);
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* a test process that dies takes its sshd along */
        if (getppid() != parent)
            _exit(126);
        dup2(logfd, 2);
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        if (s->netns[0]) {
            execl("/usr/sbin/ip", "ip", "netns", "exec", s->netns, SSHD_BIN, "-D", "-e", "-f", cfg,
                  (char *)NULL);
            execl("/sbin/ip", "ip", "netns", "exec", s->netns, SSHD_BIN, "-D", "-e", "-f", cfg,
                  (char *)NULL);
        } else {
            execl(SSHD_BIN, SSHD_BIN, "-D", "-e", "-f", cfg, (char *)NULL);
        }
        _exit(127);
    }
    close(logfd);
    s->pidfd = (int)syscall(SYS_pidfd_open, s->pid, 0);
    int timeout = o && o->ready_timeout_ms > 0 ? o->ready_timeout_ms : 10000;
    if (wait_listening(s, now_ms() + timeout) && probe(s, s->port) == 0)
        return true;
    show_log(s);
    kill(s->pid, SIGKILL);
    while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    close(s->pidfd);
    s->pid = 0;
    s->pidfd = -1;
    return false;
}

void sshd_h_start(struct sshd_h *s, const struct sshd_h_opts *o)
{
    memset(s, 0, sizeof(*s));
    s->pidfd = -1;
    char why[256];
    cr_assert(sshd_h_available(why, sizeof(why)), "%s", why);
    snprintf(s->addr, sizeof(s->addr), "%s", o && o->addr ? o->addr : "127.0.0.1");
    snprintf(s->netns, sizeof(s->netns), "%s", o && o->netns ? o->netns : "");
    snprintf(s->dir, sizeof(s->dir), "/tmp/ea-sshd-XXXXXX");
    cr_assert_not_null(mkdtemp(s->dir));
    chmod(s->dir, 0755);
    snprintf(s->log, sizeof(s->log), "%s/sshd.log", s->dir);
    snprintf(s->identity, sizeof(s->identity), "%s/id", s->dir);
    snprintf(s->known_hosts, sizeof(s->known_hosts), "%s/known_hosts", s->dir);
    char path[300];
    snprintf(path, sizeof(path), "%s/host_key", s->dir);
    keygen(path);
    keygen(s->identity);
    snprintf(path, sizeof(path), "%s/id.pub", s->dir);
    char *pub = slurp(path);
    cr_assert_not_null(pub);
    snprintf(path, sizeof(path), "%s/authorized_keys", s->dir);
    write_file(path, pub);
    free(pub);

    bool up = false;
    for (int attempt = 0; attempt < 3 && !up; attempt++) /* a port taken meanwhile: retry */
        up = try_start(s, o);
    cr_assert(up, "sshd did not come up on %s (netns '%s')", s->addr, s->netns);

    snprintf(s->opt_buf[0], sizeof(s->opt_buf[0]), "UserKnownHostsFile=%s", s->known_hosts);
    snprintf(s->opt_buf[1], sizeof(s->opt_buf[1]), "StrictHostKeyChecking=yes");
    snprintf(s->opt_buf[2], sizeof(s->opt_buf[2]), "IdentitiesOnly=yes");
    snprintf(s->opt_buf[3], sizeof(s->opt_buf[3]), "LogLevel=ERROR");
    int a = 0, c = 0, k = 0;
    s->agent_args[a++] = "--ssh-port";
    s->agent_args[a++] = s->port_str;
    s->agent_args[a++] = "--ssh-identity";
    s->agent_args[a++] = s->identity;
    s->ssh_args[c++] = "-p";
    s->ssh_args[c++] = s->port_str;
    s->ssh_args[c++] = "-i";
    s->ssh_args[c++] = s->identity;
    for (int i = 0; i < 4; i++) {
        s->agent_args[a++] = "--ssh-option";
        s->agent_args[a++] = s->opt_buf[i];
        s->ssh_args[c++] = "-o";
        s->ssh_args[c++] = s->opt_buf[i];
        s->ssh_options[k++] = s->opt_buf[i];
    }
    s->agent_args[a] = s->ssh_args[c] = s->ssh_options[k] = NULL;
}

int sshd_h_sessions(const struct sshd_h *s, pid_t *out, int max)
{
    if (s->pid <= 0)
        return 0;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)s->pid, (int)s->pid);
    char *text = slurp(path);
    int n = 0;
    for (char *t = text, *end; t && *t && n < max; t = end) {
        long v = strtol(t, &end, 10);
        if (end == t)
            break;
        out[n++] = (pid_t)v;
    }
    free(text);
    return n;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void sshd_h_stop(struct sshd_h *s)
{
    if (s->pid > 0) {
        pid_t kids[64];
        int n = sshd_h_sessions(s, kids, 64);
        for (int i = 0; i < n; i++)
            kill(kids[i], SIGKILL);
        kill(s->pid, SIGTERM);
        struct pollfd p = {.fd = s->pidfd, .events = POLLIN};
        if (s->pidfd < 0 || poll(&p, 1, 2000) <= 0)
            kill(s->pid, SIGKILL);
        while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
            ;
        s->pid = 0;
    }
    if (s->pidfd >= 0)
        close(s->pidfd);
    s->pidfd = -1;
    if (s->dir[0])
        nftw(s->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    s->dir[0] = '\0';
}

int sshd_h_accepted(const struct sshd_h *s)
{
    char *log = slurp(s->log);
    int n = 0;
    for (const char *p = log; p && (p = strstr(p, "Accepted publickey")); p++)
        n++;
    free(log);
    return n;
}

bool sshd_h_wait_accepted(const struct sshd_h *s, int n, int timeout_ms)
{
    int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (in >= 0)
        inotify_add_watch(in, s->log, IN_MODIFY);
    int64_t deadline = now_ms() + timeout_ms;
    bool ok;
    while (!(ok = sshd_h_accepted(s) >= n) && now_ms() < deadline) {
        struct pollfd p = {.fd = in, .events = POLLIN};
        poll(&p, 1, (int)(deadline - now_ms()));
        char buf[4096];
        while (in >= 0 && read(in, buf, sizeof(buf)) > 0)
            ;
    }
    if (in >= 0)
        close(in);
    return ok;
}
