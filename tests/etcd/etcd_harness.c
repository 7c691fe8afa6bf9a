// SPDX-License-Identifier: Apache-2.0
/* etcd_harness: real etcd members for the tests (see etcd_harness.h). */
#include "etcd_harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ea_time.h"

/* Every test program that starts an etcd links the etcd backends' static libraries (the agent
 * may load them as modules instead, see backends/kv.c): this reference pulls them in. */
extern const struct kv_ops kv_etcd_ops, kv_etcd_gateway_ops;
__attribute__((used)) const struct kv_ops *const etcd_harness_backends[] = {&kv_etcd_ops,
                                                                          &kv_etcd_gateway_ops};

#define START_TIMEOUT_MS 20000
#define POLL_STEP_MS 20

/* Free loopback ports: bind them all at once to port 0 (so they differ), then release. */
static int free_ports(int *ports, int n)
{
    int fds[3 * ETCD_HARNESS_MAX];
    int rc = 0, i;
    for (i = 0; i < n; i++) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(a);
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&a, sizeof(a)) ||
            getsockname(fds[i], (struct sockaddr *)&a, &len)) {
            rc = -errno;
            if (fds[i] >= 0)
                close(fds[i]);
            break;
        }
        ports[i] = ntohs(a.sin_port);
    }
    while (i-- > 0)
        close(fds[i]);
    return rc;
}

/* fork + exec with stdout/stderr appended to `log`; exec failure reported through a CLOEXEC
 * pipe. The child dies with the test process (PR_SET_PDEATHSIG). */
static pid_t spawn(const char *const argv[], const char *log)
{
    int ep[2];
    if (pipe2(ep, O_CLOEXEC))
        return -errno;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(ep[0]);
        close(ep[1]);
        return -e;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0 || null < 0 || dup2(null, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) {
            int e = errno;
            (void)!write(ep[1], &e, sizeof(e));
            _exit(127);
        }
        setenv("ETCDCTL_API", "3", 1);
        execvp(argv[0], (char *const *)argv);
        int e = errno;
        (void)!write(ep[1], &e, sizeof(e));
        _exit(127);
    }
    close(ep[1]);
    int child_errno = 0;
    ssize_t r;
    do
        r = read(ep[0], &child_errno, sizeof(child_errno));
    while (r < 0 && errno == EINTR);
    close(ep[0]);
    if (r > 0) {
        waitpid(pid, NULL, 0);
        fprintf(stderr, "etcd_harness: cannot run '%s': %s\n", argv[0], strerror(child_errno));
        return -child_errno;
    }
    return pid;
}

static void print_log_tail(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char buf[4096];
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > (long)sizeof(buf) - 1 ? size - (long)sizeof(buf) + 1 : 0, SEEK_SET);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    fprintf(stderr, "---- tail of %s ----\n%s\n----\n", path, buf);
}

size_t etcd_harness_http_get(int port, const char *path, char *buf, size_t size, int timeout_ms)
{
    size_t len = 0;
    buf[0] = '\0';
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    char req[256];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", path);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && write(fd, req, (size_t)n) == n) {
        int64_t deadline = ea_now_ms() + timeout_ms;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        while (len < size - 1) {
            int left = (int)(deadline - ea_now_ms());
            if (left <= 0 || poll(&p, 1, left) <= 0)
                break;
            ssize_t r = read(fd, buf + len, size - 1 - len);
            if (r <= 0)
                break;
            len += (size_t)r;
        }
    }
    close(fd);
    buf[len] = '\0';
    return len;
}

/* GET /health on the member's plain-HTTP listener: 1 healthy, 0 not (yet). */
static int healthy(int port)
{
    char buf[1024];
    etcd_harness_http_get(port, "/health", buf, sizeof(buf), 1000);
    return strstr(buf, "\"health\":\"true\"") != NULL;
}

static int start_member(struct etcd_harness *h, int i, const char *state)
{
    struct etcd_member *m = &h->m[i];
    char client[64], peer[64], health[64];
    snprintf(client, sizeof(client), "%s://127.0.0.1:%d", h->tls ? "https" : "http",
             m->client_port);
    snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", m->peer_port);
    snprintf(health, sizeof(health), "http://127.0.0.1:%d", m->health_port);
    char scert[PATH_MAX + 32], skey[PATH_MAX + 32], sca[PATH_MAX + 32], ttl[32];
    snprintf(scert, sizeof(scert), "--cert-file=%s/server.crt", h->dir);
    snprintf(skey, sizeof(skey), "--key-file=%s/server.key", h->dir);
    snprintf(sca, sizeof(sca), "--trusted-ca-file=%s/ca.crt", h->dir);
    const char *argv[40] = {
        "etcd", "--name", m->name, "--data-dir", m->datadir, "--listen-client-urls", client,
        "--advertise-client-urls", client, "--listen-peer-urls", peer,
        "--initial-advertise-peer-urls", peer, "--listen-metrics-urls", health, "--initial-cluster",
        h->cluster, "--initial-cluster-state", state, "--initial-cluster-token", h->token,
        /* Loopback: short raft timers make elections (and the minimum lease TTL) quick. */
        "--heartbeat-interval", "25", "--election-timeout", "250", "--logger", "zap",
        "--log-outputs", "stderr"};
    size_t n = 0;
    while (argv[n])
        n++;
    if (h->tls) {
        argv[n++] = scert;
        argv[n++] = skey;
        argv[n++] = sca;
        argv[n++] = "--client-cert-auth";
    }
    if (h->auth_token_ttl > 0) {
        snprintf(ttl, sizeof(ttl), "--auth-token-ttl=%d", h->auth_token_ttl);
        argv[n++] = ttl;
    }
    char mrb[48];
    if (h->max_request_bytes > 0) {
        snprintf(mrb, sizeof(mrb), "--max-request-bytes=%ld", h->max_request_bytes);
        argv[n++] = mrb;
    }
    argv[n] = NULL;
    pid_t pid = spawn(argv, m->log);
    if (pid < 0)
        return (int)pid;
    m->pid = pid;
    return 0;
}

/* Run argv (output to `log`) to the end: 0 and its wait status, or a negative errno. */
static int spawn_wait(const char *const argv[], const char *log, int *ret_status)
{
    pid_t pid = spawn(argv, log);
    if (pid < 0)
        return (int)pid;
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -errno;
    *ret_status = status;
    return 0;
}

static int run(const char *const argv[], const char *log)
{
    int status;
    int rc = spawn_wait(argv, log, &status);
    if (rc)
        return rc;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "etcd_harness: %s failed\n", argv[0]);
        print_log_tail(log);
        return -EIO;
    }
    return 0;
}

/* A throwaway CA, a server cert for 127.0.0.1/localhost and a client cert (EC P-256, 1 day). */
static int make_certs(struct etcd_harness *h)
{
    char log[PATH_MAX + 16], ext[PATH_MAX + 16], cakey[PATH_MAX + 16], srl[PATH_MAX + 16];
    snprintf(log, sizeof(log), "%s/openssl.log", h->dir);
    snprintf(ext, sizeof(ext), "%s/ext.cnf", h->dir);
    snprintf(cakey, sizeof(cakey), "%s/ca.key", h->dir);
    snprintf(srl, sizeof(srl), "%s/ca.srl", h->dir);
    snprintf(h->cacert, sizeof(h->cacert), "%s/ca.crt", h->dir);
    snprintf(h->cert, sizeof(h->cert), "%s/client.crt", h->dir);
    snprintf(h->key, sizeof(h->key), "%s/client.key", h->dir);
    FILE *f = fopen(ext, "we");
    if (!f)
        return -errno;
    fputs("[server]\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
          "extendedKeyUsage=serverAuth,clientAuth\n"
          "[client]\nextendedKeyUsage=clientAuth\n",
          f);
    fclose(f);
    const char *ca[] = {"openssl",
                        "req",
                        "-x509",
                        "-newkey",
                        "ec",
                        "-pkeyopt",
                        "ec_paramgen_curve:prime256v1",
                        "-nodes",
                        "-keyout",
                        cakey,
                        "-out",
                        h->cacert,
                        "-days",
                        "1",
                        "-subj",
                        "/CN=ea-test-ca",
                        NULL};
    int rc = run(ca, log);
    static const char *const who[] = {"server", "client"};
    for (int i = 0; i < 2 && rc == 0; i++) {
        char key[PATH_MAX + 16], csr[PATH_MAX + 16], crt[PATH_MAX + 16];
        snprintf(key, sizeof(key), "%s/%s.key", h->dir, who[i]);
        snprintf(csr, sizeof(csr), "%s/%s.csr", h->dir, who[i]);
        snprintf(crt, sizeof(crt), "%s/%s.crt", h->dir, who[i]);
        const char *req[] = {"openssl",
                             "req",
                             "-newkey",
                             "ec",
                             "-pkeyopt",
                             "ec_paramgen_curve:prime256v1",
                             "-nodes",
                             "-keyout",
                             key,
                             "-out",
                             csr,
                             "-subj",
                             i == 0 ? "/CN=localhost" : "/CN=ea-agent",
                             NULL};
        const char *sign[] = {
            "openssl",     "x509",   "-req",  "-in",       csr,        "-CA",
            h->cacert,     "-CAkey", cakey,   "-CAserial", srl,        "-CAcreateserial",
            "-out",        crt,      "-days", "1",         "-extfile", ext,
            "-extensions", who[i],   NULL};
        rc = run(req, log);
        if (rc == 0)
            rc = run(sign, log);
    }
    return rc;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static int file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char buf[8192];
    size_t keep = 0, nl = strlen(needle);
    int found = 0;
    for (;;) {
        size_t n = fread(buf + keep, 1, sizeof(buf) - 1 - keep, f);
        if (n == 0)
            break;
        buf[keep + n] = '\0';
        if (strstr(buf, needle)) {
            found = 1;
            break;
        }
        keep = keep + n < nl ? keep + n : nl; /* a match may straddle two reads */
        memmove(buf, buf + (strlen(buf) - keep), keep);
    }
    fclose(f);
    return found;
}

/* Wait until the members in `which` (bit mask) are healthy; -EADDRINUSE when one died on a
 * port someone else took meanwhile, -ECHILD when one died otherwise. */
static int wait_members(struct etcd_harness *h, unsigned which, int timeout_ms)
{
    int64_t deadline = ea_now_ms() + timeout_ms;
    for (;;) {
        unsigned ok = 0;
        for (int i = 0; i < h->n; i++) {
            if (!(which & (1u << i)))
                continue;
            struct etcd_member *m = &h->m[i];
            int status;
            if (m->pid > 0 && waitpid(m->pid, &status, WNOHANG) == m->pid) {
                m->pid = 0;
                int inuse = file_contains(m->log, "address already in use");
                if (!inuse) {
                    fprintf(stderr, "etcd_harness: member %s exited during start\n", m->name);
                    print_log_tail(m->log);
                }
                return inuse ? -EADDRINUSE : -ECHILD;
            }
            if (m->pid > 0 && healthy(m->health_port))
                ok |= 1u << i;
        }
        if (ok == which)
            return 0;
        if (ea_now_ms() >= deadline) {
            for (int i = 0; i < h->n; i++)
                if ((which & (1u << i)) && !(ok & (1u << i))) {
                    fprintf(stderr, "etcd_harness: member %s not healthy after %d ms\n",
                            h->m[i].name, timeout_ms);
                    print_log_tail(h->m[i].log);
                }
            return -ETIMEDOUT;
        }
        poll(NULL, 0, POLL_STEP_MS); /* bounded readiness poll, not synchronisation */
    }
}

static void kill_all(struct etcd_harness *h)
{
    for (int i = 0; i < h->n; i++)
        etcd_harness_kill(h, i);
}

static int try_start(struct etcd_harness *h)
{
    int ports[3 * ETCD_HARNESS_MAX];
    int rc = free_ports(ports, 3 * h->n);
    if (rc)
        return rc;
    size_t eo = 0, co = 0;
    h->endpoints[0] = h->cluster[0] = '\0';
    for (int i = 0; i < h->n; i++) {
        struct etcd_member *m = &h->m[i];
        m->client_port = ports[3 * i];
        m->peer_port = ports[3 * i + 1];
        m->health_port = ports[3 * i + 2];
        snprintf(m->endpoint, sizeof(m->endpoint), "127.0.0.1:%d", m->client_port);
        eo += (size_t)snprintf(h->endpoints + eo, sizeof(h->endpoints) - eo, "%s%s", i ? "," : "",
                               m->endpoint);
        co += (size_t)snprintf(h->cluster + co, sizeof(h->cluster) - co, "%s%s=http://127.0.0.1:%d",
                               i ? "," : "", m->name, m->peer_port);
        nftw(m->datadir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); /* a failed attempt's leftovers */
    }
    for (int i = 0; i < h->n && rc == 0; i++)
        rc = start_member(h, i, "new");
    if (rc == 0)
        rc = wait_members(h, (1u << h->n) - 1, START_TIMEOUT_MS);
    if (rc)
        kill_all(h);
    return rc;
}

int etcd_harness_start(struct etcd_harness *h, int nmembers)
{
    struct etcd_harness_opts o = {.members = nmembers};
    return etcd_harness_start_opts(h, &o);
}

int etcd_harness_start_opts(struct etcd_harness *h, const struct etcd_harness_opts *o)
{
    int nmembers = o->members;
    memset(h, 0, sizeof(*h));
    if (nmembers < 1 || nmembers > ETCD_HARNESS_MAX)
        return -EINVAL;
    h->n = nmembers;
    h->tls = o->tls;
    h->auth_token_ttl = o->auth_token_ttl;
    h->max_request_bytes = o->max_request_bytes;
    const char *tmp = getenv("EA_ETCD_TMPDIR");
    if (!tmp || !tmp[0])
        tmp = getenv("TMPDIR");
    if (!tmp || !tmp[0])
        tmp = "/tmp";
    snprintf(h->dir, sizeof(h->dir), "%s/ea-etcd-XXXXXX", tmp);
    if (!mkdtemp(h->dir)) {
        int e = errno;
        fprintf(stderr, "etcd_harness: mkdtemp in %s: %s\n", tmp, strerror(e));
        h->dir[0] = '\0';
        return -e;
    }
    snprintf(h->token, sizeof(h->token), "ea-test-%d-%lld", (int)getpid(), (long long)ea_wall_ms());
    for (int i = 0; i < nmembers; i++) {
        struct etcd_member *m = &h->m[i];
        snprintf(m->name, sizeof(m->name), "m%d", i);
        snprintf(m->datadir, sizeof(m->datadir), "%s/m%d.etcd", h->dir, i);
        snprintf(m->log, sizeof(m->log), "%s/m%d.log", h->dir, i);
    }
    int rc = h->tls ? make_certs(h) : 0;
    if (rc == 0)
        rc = -EADDRINUSE;
    for (int attempt = 0; attempt < 3 && rc == -EADDRINUSE; attempt++)
        rc = try_start(h);
    if (rc) {
        fprintf(stderr, "etcd_harness: could not start %d member(s): %s\n", nmembers,
                strerror(-rc));
        etcd_harness_stop(h);
    }
    return rc;
}

void etcd_harness_stop(struct etcd_harness *h)
{
    kill_all(h);
    if (h->dir[0] && !getenv("EA_ETCD_KEEP"))
        nftw(h->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    h->dir[0] = '\0';
    h->n = 0;
}

int etcd_harness_create(int nmembers, struct etcd_harness **ret)
{
    struct etcd_harness *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    int rc = etcd_harness_start(h, nmembers);
    if (rc) {
        free(h);
        return rc;
    }
    *ret = h;
    return 0;
}

void etcd_harness_destroy(struct etcd_harness *h)
{
    if (h)
        etcd_harness_stop(h);
    free(h);
}

int etcd_harness_kill(struct etcd_harness *h, int i)
{
    if (i < 0 || i >= h->n)
        return -EINVAL;
    struct etcd_member *m = &h->m[i];
    if (m->pid <= 0)
        return 0;
    kill(m->pid, SIGKILL);
    while (waitpid(m->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    m->pid = 0;
    return 0;
}

int etcd_harness_restart(struct etcd_harness *h, int i)
{
    if (i < 0 || i >= h->n)
        return -EINVAL;
    etcd_harness_kill(h, i);
    int rc = start_member(h, i, "existing");
    if (rc == 0)
        rc = wait_members(h, 1u << i, START_TIMEOUT_MS);
    return rc;
}

int etcd_harness_restart_all(struct etcd_harness *h)
{
    unsigned all = (1u << h->n) - 1;
    for (int i = 0; i < h->n; i++)
        etcd_harness_kill(h, i);
    for (int i = 0; i < h->n; i++) {
        int rc = start_member(h, i, "existing");
        if (rc)
            return rc;
    }
    return wait_members(h, all, START_TIMEOUT_MS);
}

int etcd_harness_wait_healthy(struct etcd_harness *h, int i, int timeout_ms)
{
    if (i < 0 || i >= h->n)
        return -EINVAL;
    return wait_members(h, 1u << i, timeout_ms);
}

int etcd_harness_etcdctl(struct etcd_harness *h, const char *const args[])
{
    const char *argv[32];
    char eps[sizeof(h->endpoints) + 16], log[PATH_MAX + 16];
    snprintf(eps, sizeof(eps), "--endpoints=%s", h->endpoints);
    snprintf(log, sizeof(log), "%s/etcdctl.log", h->dir);
    size_t n = 0;
    char ca[PATH_MAX + 16], cert[PATH_MAX + 16], key[PATH_MAX + 16];
    argv[n++] = "etcdctl";
    argv[n++] = eps;
    if (h->tls) {
        snprintf(ca, sizeof(ca), "--cacert=%s", h->cacert);
        snprintf(cert, sizeof(cert), "--cert=%s", h->cert);
        snprintf(key, sizeof(key), "--key=%s", h->key);
        argv[n++] = ca;
        argv[n++] = cert;
        argv[n++] = key;
    }
    for (size_t i = 0; args[i] && n < sizeof(argv) / sizeof(argv[0]) - 1; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    int status;
    int rc = spawn_wait(argv, log, &status);
    if (rc)
        return rc;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "etcd_harness: etcdctl %s failed\n", args[0]);
        print_log_tail(log);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int etcd_harness_enable_auth(struct etcd_harness *h, const char *user, const char *password)
{
    char cred[256], root[256];
    snprintf(cred, sizeof(cred), "%s:%s", user, password);
    snprintf(root, sizeof(root), "--user=root:%s", password);
    const char *add_root[] = {"user", "add", "--interactive=false", "root", NULL};
    char root_cred[256];
    snprintf(root_cred, sizeof(root_cred), "root:%s", password);
    add_root[3] = root_cred;
    if (etcd_harness_etcdctl(h, add_root) != 0)
        return -1;
    if (strcmp(user, "root") != 0) {
        const char *add_user[] = {"user", "add", "--interactive=false", cred, NULL};
        if (etcd_harness_etcdctl(h, add_user) != 0)
            return -1;
    }
    /* etcdctl creates the root role and grants it to root on the way. */
    const char *enable[] = {"auth", "enable", NULL};
    if (etcd_harness_etcdctl(h, enable) != 0)
        return -1;
    if (strcmp(user, "root") != 0) {
        const char *grant[] = {root, "user", "grant-role", user, "root", NULL};
        if (etcd_harness_etcdctl(h, grant) != 0)
            return -1;
    }
    return 0;
}

static bool log_has(const char *path, const char *const needles[])
{
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    char line[8192];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f)) {
        found = true;
        for (size_t k = 0; needles[k] && found; k++)
            found = strstr(line, needles[k]) != NULL;
    }
    fclose(f);
    return found;
}

int etcd_harness_wait_log(struct etcd_harness *h, int i, const char *const needles[],
                          int timeout_ms)
{
    int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (in < 0)
        return -errno;
    if (inotify_add_watch(in, h->m[i].log, IN_MODIFY) < 0) {
        int e = errno;
        close(in);
        return -e;
    }
    int64_t deadline = ea_now_ms() + timeout_ms;
    int rc = -ETIMEDOUT;
    for (;;) {
        if (log_has(h->m[i].log, needles)) { /* after the watch: no line is missed */
            rc = 0;
            break;
        }
        int left = (int)(deadline - ea_now_ms());
        struct pollfd p = {.fd = in, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, left) <= 0)
            break;
        char ev[4096];
        while (read(in, ev, sizeof(ev)) > 0)
            ;
    }
    close(in);
    return rc;
}

long etcd_harness_metric(struct etcd_harness *h, int i, const char *name, const char *labels)
{
    size_t size = 4u << 20;
    char *buf = malloc(size);
    if (!buf || etcd_harness_http_get(h->m[i].health_port, "/metrics", buf, size, 5000) == 0) {
        free(buf);
        return -1;
    }
    long sum = 0;
    size_t nlen = strlen(name);
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *end = strchr(line, '}');
        if (strncmp(line, name, nlen) == 0 && line[nlen] == '{' && end &&
            memmem(line, (size_t)(end - line), labels, strlen(labels)))
            sum += strtol(end + 1, NULL, 10);
    }
    free(buf);
    return sum;
}

int etcd_harness_wait_token_dropped(struct etcd_harness *h, int i, const char *user, int timeout_ms)
{
    char who[128];
    snprintf(who, sizeof(who), "\"user-name\":\"%s\"", user);
    const char *const needles[] = {"\"deleted a simple token\"", who, NULL};
    return etcd_harness_wait_log(h, i, needles, timeout_ms);
}

int etcd_harness_auth_counts(struct etcd_harness *h, int i, long *logins, long *refused)
{
    *logins = etcd_harness_metric(h, i, "grpc_server_handled_total",
                                  "grpc_code=\"OK\",grpc_method=\"Authenticate\"");
    *refused =
        etcd_harness_metric(h, i, "grpc_server_handled_total", "grpc_code=\"Unauthenticated\"");
    return *logins < 0 || *refused < 0 ? -1 : 0;
}

/* ---- kv handles on the harness ---- */

int etcd_harness_open(const char *endpoints, int timeout_ms, const char *user, const char *password,
                      struct kv **ret, struct ea_error *err)
{
    struct kv_config cfg = {
        .backend = "etcd",
        .endpoints = endpoints,
        .user = user,
        .password = password,
        .request_timeout_ms = timeout_ms,
    };
    return kv_open(&cfg, ret, err);
}

static int take_events(struct kv *kv, struct kv_event **evs, size_t *n)
{
    struct kv_event *got = NULL;
    size_t ngot = 0;
    if (kv_read_events(kv, &got, &ngot, NULL) != 0)
        return -1;
    if (ngot == 0) {
        kv_events_free(got, 0);
        return 0;
    }
    struct kv_event *all = realloc(*evs, (*n + ngot) * sizeof(*all));
    if (!all) {
        kv_events_free(got, ngot);
        return -1;
    }
    memcpy(all + *n, got, ngot * sizeof(*all));
    free(got); /* entries moved into `all` */
    *evs = all;
    *n += ngot;
    return 0;
}

size_t etcd_harness_wait_events(struct kv *kv, struct kv_event **evs, size_t *n, size_t want,
                                int timeout_ms)
{
    int64_t deadline = ea_now_ms() + timeout_ms;
    for (;;) {
        if (take_events(kv, evs, n) || *n >= want)
            return *n;
        struct pollfd p = {.fd = kv_event_fd(kv), .events = POLLIN};
        int left = ea_timeout_until(deadline);
        if (left == 0 || poll(&p, 1, left) == 0) {
            take_events(kv, evs, n);
            return *n;
        }
    }
}

long etcd_harness_wait_type(struct kv *kv, struct kv_event **evs, size_t *n, int64_t watch_id,
                            int type, int timeout_ms)
{
    int64_t deadline = ea_now_ms() + timeout_ms;
    size_t seen = 0;
    for (;;) {
        for (; seen < *n; seen++)
            if ((*evs)[seen].watch_id == watch_id && (int)(*evs)[seen].type == type)
                return (long)seen;
        int left = ea_timeout_until(deadline);
        if (left == 0)
            return -1;
        etcd_harness_wait_events(kv, evs, n, *n + 1, left);
    }
}
