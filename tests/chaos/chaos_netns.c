// SPDX-License-Identifier: Apache-2.0
/*
 * chaos_netns: the last --ns-nodes agents each run in a network namespace of their own
 * (tests/netns/netns_harness.h), joined to the root namespace by a veth pair. etcd listens on
 * 127.0.0.1 only, so the driver relays: for every such agent and every etcd member it listens on
 * the root end of the veth (same port as the member) and copies bytes both ways to 127.0.0.1.
 * The partition fault is `ip link set eth0 down` inside the agent's namespace: its packets stop,
 * its connections stall (no reset) until the link is up again.
 * Without the netns harness (or without root) the partition fault is left out.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "chaos.h"

#ifndef EA_CHAOS_NETNS

bool ch_netns_setup(struct ch_run *r)
{
    (void)r;
    printf("chaos: partition fault disabled: built without tests/netns/netns_harness\n");
    return false;
}

void ch_netns_cleanup(struct ch_run *r)
{
    (void)r;
}

void ch_netns_link(struct ch_run *r, int slot, bool up)
{
    (void)r;
    (void)slot;
    (void)up;
}

#else

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "netns_harness.h"

#define MAX_LISTEN (CH_SLOTS_MAX * ETCD_HARNESS_MAX)
#define MAX_CONN 256

static struct {
    pthread_mutex_t mu;
    pthread_t acceptor;
    bool running, quit;
    int wakefd;
    int lfd[MAX_LISTEN];
    int port[MAX_LISTEN];
    size_t nl;
    int conn[MAX_CONN]; /* open relay sockets, shut down at cleanup */
} rl = {.mu = PTHREAD_MUTEX_INITIALIZER, .wakefd = -1};

struct pair {
    int fd[2];
    int refs; /* pumps still running (under rl.mu) */
};

struct pump {
    struct pair *pair;
    int dir; /* copies fd[dir] -> fd[1 - dir] */
};

static void track(int fd, bool add)
{
    for (size_t i = 0; i < MAX_CONN; i++)
        if (add ? rl.conn[i] == 0 : rl.conn[i] == fd + 1) {
            rl.conn[i] = add ? fd + 1 : 0;
            break;
        }
}

/* One direction of a relayed connection; the last direction to end closes both sockets. */
static void *pump(void *arg)
{
    struct pump *p = arg;
    int from = p->pair->fd[p->dir], to = p->pair->fd[1 - p->dir];
    char buf[16384];
    for (;;) {
        ssize_t n = read(from, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = send(to, buf + off, (size_t)(n - off), MSG_NOSIGNAL); /* no SIGPIPE */
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                goto done;
            off += w;
        }
    }
done:
    shutdown(to, SHUT_WR);
    shutdown(from, SHUT_RD);
    pthread_mutex_lock(&rl.mu);
    if (--p->pair->refs == 0) {
        track(from, false);
        track(to, false);
        close(from);
        close(to);
        free(p->pair);
    }
    pthread_mutex_unlock(&rl.mu);
    free(p);
    return NULL;
}

static int connect_local(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void start_pair(int client, int upstream)
{
    int one = 1;
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct pair *pr = malloc(sizeof(*pr));
    struct pump *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
    if (!pr || !a || !b)
        abort();
    *pr = (struct pair){.fd = {client, upstream}, .refs = 2};
    *a = (struct pump){pr, 0};
    *b = (struct pump){pr, 1};
    pthread_mutex_lock(&rl.mu);
    track(client, true);
    track(upstream, true);
    pthread_mutex_unlock(&rl.mu);
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_create(&t, &at, pump, a);
    pthread_create(&t, &at, pump, b);
    pthread_attr_destroy(&at);
}

static void *acceptor(void *arg)
{
    (void)arg;
    struct pollfd fds[MAX_LISTEN + 1];
    for (;;) {
        fds[0] = (struct pollfd){.fd = rl.wakefd, .events = POLLIN};
        for (size_t i = 0; i < rl.nl; i++)
            fds[i + 1] = (struct pollfd){.fd = rl.lfd[i], .events = POLLIN};
        if (poll(fds, rl.nl + 1, -1) < 0 && errno != EINTR)
            break;
        if (fds[0].revents)
            break;
        for (size_t i = 0; i < rl.nl; i++) {
            if (!fds[i + 1].revents)
                continue;
            int c = accept4(rl.lfd[i], NULL, NULL, SOCK_CLOEXEC);
            if (c < 0)
                continue;
            int u = connect_local(rl.port[i]); /* refused while the member is down: so be it */
            if (u < 0) {
                close(c);
                continue;
            }
            start_pair(c, u);
        }
    }
    return NULL;
}

static int listen_on(const char *addr, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, addr, &sa.sin_addr);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
        fprintf(stderr, "chaos: cannot listen on %s:%d: %s\n", addr, port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

bool ch_netns_setup(struct ch_run *r)
{
    char why[256];
    if (!netns_available(why, sizeof(why))) {
        printf("chaos: partition fault disabled: %s\n", why);
        return false;
    }
    rl.wakefd = eventfd(0, EFD_CLOEXEC);
    int net = 100 + (int)(getpid() % 100); /* 10.<net>.<slot>.0/24, unlikely to be in use */
    for (int s = r->nodes - r->ns_nodes; s < r->nodes; s++) {
        char tag[16], ns_cidr[32], root_cidr[32], root_addr[24];
        snprintf(tag, sizeof(tag), "c%d", s);
        netns_ns_create(tag, r->ns[s]);
        snprintf(ns_cidr, sizeof(ns_cidr), "10.%d.%d.2/24", net, s);
        snprintf(root_cidr, sizeof(root_cidr), "10.%d.%d.1/24", net, s);
        snprintf(root_addr, sizeof(root_addr), "10.%d.%d.1", net, s);
        snprintf(r->ns_if[s], sizeof(r->ns_if[s]), "eth0");
        netns_veth_root(r->ns[s], "eth0", ns_cidr, root_cidr, NULL);
        size_t off = 0;
        for (int i = 0; i < r->etcd.n; i++) {
            int port = r->etcd.m[i].client_port;
            int fd = listen_on(root_addr, port);
            if (fd < 0)
                return false;
            rl.lfd[rl.nl] = fd;
            rl.port[rl.nl++] = port;
            off += (size_t)snprintf(r->ns_endpoints[s] + off, sizeof(r->ns_endpoints[s]) - off,
                                    "%s%s:%d", i ? "," : "", root_addr, port);
        }
    }
    rl.running = pthread_create(&rl.acceptor, NULL, acceptor, NULL) == 0;
    return rl.running;
}

void ch_netns_cleanup(struct ch_run *r)
{
    (void)r;
    if (rl.running) {
        uint64_t one = 1;
        if (write(rl.wakefd, &one, sizeof(one)) < 0)
            perror("chaos: eventfd");
        pthread_join(rl.acceptor, NULL);
        rl.running = false;
    }
    for (size_t i = 0; i < rl.nl; i++)
        close(rl.lfd[i]);
    rl.nl = 0;
    pthread_mutex_lock(&rl.mu);
    for (size_t i = 0; i < MAX_CONN; i++)
        if (rl.conn[i]) /* the pumps end; their sockets go with the process */
            shutdown(rl.conn[i] - 1, SHUT_RDWR);
    pthread_mutex_unlock(&rl.mu);
    netns_cleanup();
}

void ch_netns_link(struct ch_run *r, int slot, bool up)
{
    netns_link_set(r->ns[slot], r->ns_if[slot], up);
}

#endif
