// SPDX-License-Identifier: Apache-2.0
/* The netns harness itself: namespaces, veth links (root, bridge, pair), link down, run/spawn
 * inside a namespace with its own host name, and cleanup. */
#include "netns_harness.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(netns_harness, .init = netns_require, .fini = netns_cleanup, .timeout = 60);

/* Listen in ns_l on addr:port, connect from ns_c: true when the TCP handshake completes within
 * timeout_ms. */
static bool tcp_reaches_ms(const char *ns_l, const char *ns_c, const char *addr, int port,
                           int timeout_ms)
{
    int l = netns_socket(ns_l, AF_INET, SOCK_STREAM);
    int c = netns_socket(ns_c, AF_INET, SOCK_STREAM | SOCK_NONBLOCK);
    cr_assert(l >= 0 && c >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    cr_assert_eq(inet_pton(AF_INET, addr, &sa.sin_addr), 1);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    cr_assert_eq(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0, "bind %s: %s", addr,
                 strerror(errno));
    cr_assert_eq(listen(l, 4), 0);
    int r = connect(c, (struct sockaddr *)&sa, sizeof(sa));
    bool ok = r == 0;
    if (!ok && errno == EINPROGRESS) {
        struct pollfd p = {.fd = c, .events = POLLOUT};
        if (poll(&p, 1, timeout_ms) == 1) {
            int e = 0;
            socklen_t len = sizeof(e);
            getsockopt(c, SOL_SOCKET, SO_ERROR, &e, &len);
            ok = e == 0;
        }
    }
    close(c);
    close(l);
    return ok;
}

/* Reachable (generous deadline: a loaded machine), and not reachable (a down link never answers:
 * half a second is proof enough, and keeps the suite fast). */
static bool tcp_reaches(const char *ns_l, const char *ns_c, const char *addr, int port)
{
    return tcp_reaches_ms(ns_l, ns_c, addr, port, 5000);
}

static bool tcp_unreachable(const char *ns_l, const char *ns_c, const char *addr, int port)
{
    return !tcp_reaches_ms(ns_l, ns_c, addr, port, 500);
}

Test(netns_harness, veth_pair_link_down_and_socket)
{
    char a[NETNS_NAME_MAX], b[NETNS_NAME_MAX];
    netns_ns_create("a", a);
    netns_ns_create("b", b);
    netns_veth_pair(a, "eth0", "10.231.0.1/24", b, "eth0", "10.231.0.2/24");
    cr_assert(tcp_reaches(b, a, "10.231.0.2", 7001), "a cannot reach b over the veth pair");
    netns_link_set(a, "eth0", false);
    cr_assert(tcp_unreachable(b, a, "10.231.0.2", 7001), "link down still reachable");
    netns_link_set(a, "eth0", true);
    cr_assert(tcp_reaches(b, a, "10.231.0.2", 7002), "link back up but unreachable");
}

Test(netns_harness, bridge_root_and_routes)
{
    char a[NETNS_NAME_MAX], b[NETNS_NAME_MAX], br[NETNS_NAME_MAX], rootif[NETNS_NAME_MAX];
    netns_ns_create("a", a);
    netns_ns_create("b", b);
    netns_bridge_create(br, NULL);
    netns_veth_bridge(a, "lan0", "10.232.0.1/24", br);
    netns_veth_bridge(b, "lan0", "10.232.0.2/24", br);
    cr_assert(tcp_reaches(b, a, "10.232.0.2", 7003), "bridge does not connect a and b");
    netns_veth_root(a, "up0", "10.233.0.2/24", "10.233.0.1/24", rootif);
    cr_assert_neq(rootif[0], '\0');
    cr_assert(tcp_reaches(a, NULL, "10.233.0.2", 7004), "root cannot reach a over its veth");
    /* b reaches a's up0 address only through a route via a's lan0 address */
    netns_route_add(b, "10.233.0.0/24", "10.232.0.1");
    cr_assert(tcp_reaches(a, b, "10.233.0.2", 7005), "route via a does not work");
}

Test(netns_harness, bridge_in_switch_namespace)
{
    char a[NETNS_NAME_MAX], b[NETNS_NAME_MAX], sw[NETNS_NAME_MAX];
    netns_ns_create("a", a);
    netns_ns_create("b", b);
    netns_ns_create("sw", sw);
    netns_bridge_in(sw, "br0");
    netns_veth_bridge_in(a, "eth0", "10.235.0.1/24", sw, "br0");
    netns_veth_bridge_in(b, "eth0", "10.235.0.2/24", sw, "br0");
    cr_assert(tcp_reaches(b, a, "10.235.0.2", 7006), "switch namespace does not connect a and b");
    netns_link_set(b, "eth0", false);
    cr_assert(tcp_unreachable(b, a, "10.235.0.2", 7007), "link down still reachable");
}

Test(netns_harness, run_and_spawn_with_hostname)
{
    char a[NETNS_NAME_MAX], dir[] = "/tmp/ea-nn-XXXXXX", path[128];
    cr_assert(mkdtemp(dir));
    netns_ns_create("h", a);
    netns_veth_root(a, "probe7", "10.234.0.2/24", NULL, NULL);
    snprintf(path, sizeof(path), "%s/addr.txt", dir);
    const char *show[] = {"ip", "-o", "addr", "show", "dev", "probe7", NULL};
    cr_assert_eq(netns_run(a, show, path), 0);
    char buf[1024] = "";
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    cr_assert(strstr(buf, "10.234.0.2/24"), "address not seen inside the namespace: %s", buf);
    /* the interface is not in the root namespace */
    cr_assert_neq(netns_run(NULL, show, "/dev/null"), 0);

    snprintf(path, sizeof(path), "%s/host.txt", dir);
    const char *env[] = {"NETNS_TEST_VAR=hello", NULL};
    const char *argv[] = {"/bin/sh", "-c",
                          "echo $(hostname) $NETNS_TEST_VAR; ip -o link show probe7", NULL};
    pid_t pid = netns_spawn(
        &(struct netns_spawn_opts){
            .ns = a, .hostname = "fakehost7", .stdout_path = path, .env = env},
        argv);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    netns_forget(pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    f = fopen(path, "r");
    cr_assert_not_null(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    cr_assert(strstr(buf, "fakehost7 hello"), "hostname/env not applied: %s", buf);
    cr_assert(strstr(buf, "probe7"), "not run inside the namespace: %s", buf);
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* netns_cleanup removes namespaces and kills spawned processes (run in a forked child so this
 * test's own cleanup is not involved). */
Test(netns_harness, cleanup_removes_everything)
{
    char a[NETNS_NAME_MAX], br[NETNS_NAME_MAX];
    netns_ns_create("c", a);
    netns_bridge_create(br, NULL);
    const char *argv[] = {"/bin/sleep", "600", NULL};
    pid_t pid = netns_spawn(&(struct netns_spawn_opts){.ns = a}, argv);
    char path[128];
    snprintf(path, sizeof(path), "/run/netns/%s", a);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    netns_cleanup();
    cr_assert_neq(stat(path, &st), 0, "namespace %s still exists", a);
    cr_assert_eq(kill(pid, 0), -1, "spawned process still alive");
    const char *show[] = {"ip", "link", "show", br, NULL};
    cr_assert_neq(netns_run(NULL, show, "/dev/null"), 0, "bridge %s still exists", br);
}
