// SPDX-License-Identifier: Apache-2.0
#include "netns_harness.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../helpers/ea_ci.h"

extern char **environ;

#define NETNS_MAX 64

/* What this process created, for netns_cleanup(). */
static char namespaces[NETNS_MAX][NETNS_NAME_MAX];
static size_t n_namespaces;
static char root_links[NETNS_MAX][NETNS_NAME_MAX]; /* root-side veths and bridges */
static size_t n_root_links;
/* Switch ports made by netns_veth_bridge_in(): which namespace/interface each one serves. */
static struct {
    char ns[NETNS_NAME_MAX], ifname[NETNS_NAME_MAX], bridge_ns[NETNS_NAME_MAX],
        port[NETNS_NAME_MAX];
} ports[NETNS_MAX];
static size_t n_ports;
static pid_t spawned[NETNS_MAX];
static size_t n_spawned;
static unsigned serial;
static pid_t owner; /* the process that registered the atexit hook */

static void cmdline(const char *const *argv, char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; argv[i] && off + 1 < size; i++) {
        int n = snprintf(buf + off, size - off, "%s%s", i ? " " : "", argv[i]);
        if (n < 0)
            break;
        off += (size_t)n;
    }
}

/* Enter namespace `ns` (a name under /run/netns) in this (child) process. */
static int enter_netns(const char *ns)
{
    char path[128];
    snprintf(path, sizeof(path), "/run/netns/%s", ns);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = setns(fd, CLONE_NEWNET) == 0 ? 0 : -errno;
    close(fd);
    return r;
}

int netns_run(const char *ns, const char *const *argv, const char *out_path)
{
    int out = -1;
    if (out_path) {
        out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (out < 0)
            return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        if (out >= 0)
            close(out);
        return -1;
    }
    if (pid == 0) {
        if (out >= 0 && (dup2(out, 1) < 0 || dup2(out, 2) < 0))
            _exit(126);
        if (ns && enter_netns(ns) < 0)
            _exit(126);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    if (out >= 0)
        close(out);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Run `ip ARGS...` (in ns when not NULL) quietly; returns its exit code. */
static int ip_quiet(const char *ns, const char *const *args)
{
    const char *argv[24] = {"ip"};
    size_t n = 1;
    for (; args[n - 1] && n < 23; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    return netns_run(ns, argv, "/dev/null");
}

/* Run `ip ARGS...` and assert it succeeded, naming the command when not. */
static void ip_must(const char *ns, const char *const *args)
{
    const char *argv[24] = {"ip"};
    size_t n = 1;
    for (; args[n - 1] && n < 23; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    int rc = netns_run(ns, argv, NULL);
    char line[512];
    cmdline(argv, line, sizeof(line));
    cr_assert_eq(rc, 0, "netns harness: '%s'%s%s failed (exit %d)", line, ns ? " in netns " : "",
                 ns ? ns : "", rc);
}

int netns_socket(const char *ns, int domain, int type)
{
    if (!ns) {
        int fd = socket(domain, type | SOCK_CLOEXEC, 0);
        return fd < 0 ? -errno : fd;
    }
    int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (self < 0)
        return -errno;
    int r = enter_netns(ns);
    if (r == 0) {
        r = socket(domain, type | SOCK_CLOEXEC, 0);
        if (r < 0)
            r = -errno;
        if (setns(self, CLONE_NEWNET) < 0)
            cr_assert_fail("netns harness: cannot return to own namespace: %s", strerror(errno));
    }
    close(self);
    return r;
}

static void ensure_atexit(void)
{
    if (owner != getpid()) {
        owner = getpid();
        atexit(netns_cleanup);
    }
}

bool netns_available(char *why, size_t why_size)
{
    static int cached = -1; /* -1 unknown, 0 no, 1 yes */
    static char reason[200];
    if (cached < 0) {
        char name[NETNS_NAME_MAX];
        snprintf(name, sizeof(name), "ea%xprobe", (unsigned)getpid());
        const char *add[] = {"netns", "add", name, NULL};
        const char *which[] = {"ip", "-V", NULL};
        if (geteuid() != 0) {
            snprintf(reason, sizeof(reason), "network namespaces need root (euid %u)",
                     (unsigned)geteuid());
            cached = 0;
        } else if (netns_run(NULL, which, "/dev/null") != 0) {
            snprintf(reason, sizeof(reason), "iproute2 'ip' is not installed");
            cached = 0;
        } else if (ip_quiet(NULL, add) != 0) {
            snprintf(reason, sizeof(reason),
                     "the kernel refused 'ip netns add' (no CAP_SYS_ADMIN?)");
            cached = 0;
        } else {
            const char *del[] = {"netns", "del", name, NULL};
            ip_quiet(NULL, del);
            cached = 1;
        }
    }
    if (why && why_size)
        snprintf(why, why_size, "%s", cached ? "" : reason);
    return cached == 1;
}

/* The creating pid encoded in one of our names ("ea1a2b_h0" with prefix "ea", "b1a2b_3" with
 * "b"), or 0 when the name is not ours. */
static pid_t owner_of(const char *name, const char *prefix)
{
    size_t plen = strlen(prefix);
    if (strncmp(name, prefix, plen) != 0)
        return 0;
    char *end;
    unsigned long pid = strtoul(name + plen, &end, 16);
    return end != name + plen && *end == '_' && pid > 0 && pid < 1UL << 22 ? (pid_t)pid : 0;
}

static bool dead(pid_t pid)
{
    return pid > 0 && kill(pid, 0) < 0 && errno == ESRCH;
}

static bool is_bridge(const char *ifname)
{
    char path[128];
    snprintf(path, sizeof(path), "/sys/class/net/%s/bridge", ifname);
    return access(path, F_OK) == 0;
}

void netns_reap_stale(void)
{
    DIR *d = opendir("/run/netns");
    for (struct dirent *e; d && (e = readdir(d));)
        if (dead(owner_of(e->d_name, "ea"))) {
            const char *del[] = {"netns", "del", e->d_name, NULL};
            ip_quiet(NULL, del);
        }
    if (d)
        closedir(d);
    d = opendir("/sys/class/net");
    for (struct dirent *e; d && (e = readdir(d));)
        if (dead(owner_of(e->d_name, "b")) && is_bridge(e->d_name)) {
            const char *del[] = {"link", "del", e->d_name, NULL};
            ip_quiet(NULL, del);
        }
    if (d)
        closedir(d);
}

void netns_require(void)
{
    char why[200];
    if (!netns_available(why, sizeof(why))) {
        if (ea_test_in_ci()) /* CI runs as root with iproute2: a skip would hide these cases */
            cr_assert_fail("CI (CI=%s): network namespaces are required: %s", getenv("CI"), why);
        fprintf(stderr, "SKIP: %s\n", why);
        cr_skip_test("%s", why);
    }
    netns_reap_stale();
}

void netns_ns_create(const char *tag, char *ret_name)
{
    ensure_atexit();
    cr_assert_lt(n_namespaces, (size_t)NETNS_MAX, "netns harness: too many namespaces");
    char name[NETNS_NAME_MAX];
    snprintf(name, sizeof(name), "ea%x_%s", (unsigned)getpid(), tag);
    const char *add[] = {"netns", "add", name, NULL};
    ip_must(NULL, add);
    snprintf(namespaces[n_namespaces++], NETNS_NAME_MAX, "%s", name);
    netns_link_set(name, "lo", true);
    snprintf(ret_name, NETNS_NAME_MAX, "%s", name);
}

/* A fresh unique root-namespace interface name, registered for deletion. */
static void root_name(char prefix, char *buf)
{
    ensure_atexit();
    cr_assert_lt(n_root_links, (size_t)NETNS_MAX, "netns harness: too many links");
    snprintf(buf, NETNS_NAME_MAX, "%c%x_%u", prefix, (unsigned)getpid(), serial++);
    cr_assert_lt(strlen(buf), (size_t)16, "interface name too long: %s", buf);
    snprintf(root_links[n_root_links++], NETNS_NAME_MAX, "%s", buf);
}

void netns_link_set(const char *ns, const char *ifname, bool up)
{
    const char *args[] = {"link", "set", ifname, up ? "up" : "down", NULL};
    ip_must(ns, args);
}

void netns_addr_add(const char *ns, const char *ifname, const char *cidr)
{
    const char *args[] = {"addr", "add", cidr, "dev", ifname, NULL};
    ip_must(ns, args);
}

void netns_route_add(const char *ns, const char *dst, const char *gw)
{
    const char *args[] = {"route", "add", dst, "via", gw, NULL};
    ip_must(ns, args);
}

/* A veth pair with both ends in the root namespace: `inner` (to be moved) and a registered
 * `outer`; the inner end gets a temporary unique name, moved into ns and renamed there. */
static void veth_into(const char *ns, const char *ifname, const char *cidr, char *outer)
{
    char tmp[NETNS_NAME_MAX];
    root_name('e', outer);
    snprintf(tmp, sizeof(tmp), "t%x_%u", (unsigned)getpid(), serial++);
    const char *add[] = {"link", "add", outer, "type", "veth", "peer", "name", tmp, NULL};
    ip_must(NULL, add);
    const char *move[] = {"link", "set", tmp, "netns", ns, NULL};
    ip_must(NULL, move);
    const char *rename[] = {"link", "set", tmp, "name", ifname, NULL};
    ip_must(ns, rename);
    if (cidr)
        netns_addr_add(ns, ifname, cidr);
    netns_link_set(ns, ifname, true);
}

void netns_veth_root(const char *ns, const char *ifname, const char *ns_cidr, const char *root_cidr,
                     char *ret_root_if)
{
    char outer[NETNS_NAME_MAX];
    veth_into(ns, ifname, ns_cidr, outer);
    if (root_cidr)
        netns_addr_add(NULL, outer, root_cidr);
    netns_link_set(NULL, outer, true);
    if (ret_root_if)
        snprintf(ret_root_if, NETNS_NAME_MAX, "%s", outer);
}

void netns_bridge_create(char *ret_name, const char *root_cidr)
{
    char br[NETNS_NAME_MAX];
    root_name('b', br);
    const char *add[] = {"link", "add", br, "type", "bridge", NULL};
    ip_must(NULL, add);
    if (root_cidr)
        netns_addr_add(NULL, br, root_cidr);
    netns_link_set(NULL, br, true);
    snprintf(ret_name, NETNS_NAME_MAX, "%s", br);
}

void netns_veth_bridge(const char *ns, const char *ifname, const char *cidr, const char *bridge)
{
    char outer[NETNS_NAME_MAX];
    veth_into(ns, ifname, cidr, outer);
    const char *enslave[] = {"link", "set", outer, "master", bridge, NULL};
    ip_must(NULL, enslave);
    netns_link_set(NULL, outer, true);
}

void netns_bridge_in(const char *ns, const char *name)
{
    const char *add[] = {"link", "add", name, "type", "bridge", NULL};
    ip_must(ns, add);
    netns_link_set(ns, name, true);
}

void netns_veth_bridge_in(const char *ns, const char *ifname, const char *cidr,
                          const char *bridge_ns, const char *bridge)
{
    char outer[NETNS_NAME_MAX];
    veth_into(ns, ifname, cidr, outer);
    const char *move[] = {"link", "set", outer, "netns", bridge_ns, NULL};
    ip_must(NULL, move);
    const char *enslave[] = {"link", "set", outer, "master", bridge, NULL};
    ip_must(bridge_ns, enslave);
    netns_link_set(bridge_ns, outer, true);
    cr_assert_lt(n_ports, (size_t)NETNS_MAX, "netns: too many switch ports");
    snprintf(ports[n_ports].ns, NETNS_NAME_MAX, "%s", ns);
    snprintf(ports[n_ports].ifname, NETNS_NAME_MAX, "%s", ifname);
    snprintf(ports[n_ports].bridge_ns, NETNS_NAME_MAX, "%s", bridge_ns);
    snprintf(ports[n_ports].port, NETNS_NAME_MAX, "%s", outer);
    n_ports++;
}

void netns_port_set(const char *ns, const char *ifname, bool up)
{
    for (size_t i = n_ports; i-- > 0;)
        if (strcmp(ports[i].ns, ns) == 0 && strcmp(ports[i].ifname, ifname) == 0) {
            netns_link_set(ports[i].bridge_ns, ports[i].port, up);
            return;
        }
    cr_assert_fail("netns: no switch port for %s in %s", ifname, ns);
}

void netns_veth_pair(const char *ns_a, const char *if_a, const char *cidr_a, const char *ns_b,
                     const char *if_b, const char *cidr_b)
{
    char ta[NETNS_NAME_MAX], tb[NETNS_NAME_MAX];
    ensure_atexit();
    snprintf(ta, sizeof(ta), "t%x_%u", (unsigned)getpid(), serial++);
    snprintf(tb, sizeof(tb), "t%x_%u", (unsigned)getpid(), serial++);
    const char *add[] = {"link", "add", ta, "type", "veth", "peer", "name", tb, NULL};
    ip_must(NULL, add);
    const char *mva[] = {"link", "set", ta, "netns", ns_a, NULL};
    const char *mvb[] = {"link", "set", tb, "netns", ns_b, NULL};
    ip_must(NULL, mva);
    ip_must(NULL, mvb);
    const char *rna[] = {"link", "set", ta, "name", if_a, NULL};
    const char *rnb[] = {"link", "set", tb, "name", if_b, NULL};
    ip_must(ns_a, rna);
    ip_must(ns_b, rnb);
    if (cidr_a)
        netns_addr_add(ns_a, if_a, cidr_a);
    if (cidr_b)
        netns_addr_add(ns_b, if_b, cidr_b);
    netns_link_set(ns_a, if_a, true);
    netns_link_set(ns_b, if_b, true);
}

/* environ with `extra` ("K=V") added or replacing; a NULL-terminated malloc'ed array whose
 * strings are borrowed (the child execs right away). */
static char **merged_env(const char *const *extra)
{
    size_t n = 0, m = 0;
    while (environ[n])
        n++;
    while (extra && extra[m])
        m++;
    char **env = calloc(n + m + 1, sizeof(*env));
    cr_assert_not_null(env);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t klen = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        bool replaced = false;
        for (size_t j = 0; j < m && !replaced; j++)
            replaced = strncmp(extra[j], environ[i], klen) == 0 && extra[j][klen] == '=';
        if (!replaced)
            env[k++] = environ[i];
    }
    for (size_t j = 0; j < m; j++)
        env[k++] = (char *)extra[j];
    env[k] = NULL;
    return env;
}

pid_t netns_spawn(const struct netns_spawn_opts *opts, const char *const *argv)
{
    ensure_atexit();
    cr_assert_lt(n_spawned, (size_t)NETNS_MAX, "netns harness: too many processes");
    int out = -1, err = -1;
    if (opts->stdout_path)
        out = open(opts->stdout_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (opts->stderr_path)
        err = open(opts->stderr_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    cr_assert((!opts->stdout_path || out >= 0) && (!opts->stderr_path || err >= 0),
              "netns harness: cannot create output files: %s", strerror(errno));
    char **env = merged_env(opts->env);
    pid_t parent = getpid();
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(126);
        if ((out >= 0 && dup2(out, 1) < 0) || (err >= 0 && dup2(err, 2) < 0))
            _exit(126);
        if (opts->ns && enter_netns(opts->ns) < 0)
            _exit(126);
        if (opts->hostname &&
            (unshare(CLONE_NEWUTS) < 0 || sethostname(opts->hostname, strlen(opts->hostname)) < 0))
            _exit(126);
        execvpe(argv[0], (char *const *)argv, env);
        _exit(127);
    }
    free(env);
    if (out >= 0)
        close(out);
    if (err >= 0)
        close(err);
    spawned[n_spawned++] = pid;
    return pid;
}

void netns_forget(pid_t pid)
{
    for (size_t i = 0; i < n_spawned; i++)
        if (spawned[i] == pid)
            spawned[i] = 0;
}

void netns_cleanup(void)
{
    if (owner != getpid())
        return; /* a forked child inherited the lists: not its to clean */
    for (size_t i = 0; i < n_spawned; i++)
        if (spawned[i] > 0 && kill(spawned[i], SIGKILL) == 0)
            waitpid(spawned[i], NULL, 0);
    n_spawned = 0;
    for (size_t i = 0; i < n_namespaces; i++) {
        const char *del[] = {"netns", "del", namespaces[i], NULL};
        ip_quiet(NULL, del);
    }
    n_namespaces = 0;
    /* veth peers vanish with their namespace; bridges and leftovers are deleted here */
    for (size_t i = n_root_links; i-- > 0;) {
        const char *del[] = {"link", "del", root_links[i], NULL};
        ip_quiet(NULL, del);
    }
    n_root_links = 0;
    n_ports = 0;
}
