// SPDX-License-Identifier: Apache-2.0
/* rabit_sim: simulated rabit workers for the tracker's tests and benchmark. */
#include "rabit_sim.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAGIC 0xff99

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void timeouts(int fd)
{
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int rsim_connect(const char *host, int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        return -EINVAL;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    timeouts(fd);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    return fd;
}

int rsim_send(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? -errno : -EPIPE;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int rsim_recv(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t k = recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -errno;
        if (k == 0)
            return -ECONNRESET;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int send_int(int fd, int32_t v)
{
    return rsim_send(fd, &v, sizeof(v));
}

static int recv_int(int fd, int32_t *v)
{
    return rsim_recv(fd, v, sizeof(*v));
}

static int send_str(int fd, const char *s)
{
    int r = send_int(fd, (int32_t)strlen(s));
    return r < 0 ? r : rsim_send(fd, s, strlen(s));
}

/* Connect and say hello; the tracker fd or a negative errno. */
static int hello(const char *host, int port, const char *cmd, int rank, int world, const char *task)
{
    int fd = rsim_connect(host, port), r;
    if (fd < 0)
        return fd;
    int32_t magic = 0;
    if ((r = send_int(fd, MAGIC)) < 0 || (r = recv_int(fd, &magic)) < 0 ||
        (r = magic == MAGIC ? 0 : -EPROTO) < 0 || (r = send_int(fd, rank)) < 0 ||
        (r = send_int(fd, world)) < 0 || (r = send_str(fd, task)) < 0 ||
        (r = send_str(fd, cmd)) < 0) {
        close(fd);
        return r;
    }
    return fd;
}

static int fail(struct rsim_result *res, int e, const char *what)
{
    res->err = e;
    snprintf(res->msg, sizeof(res->msg), "%s: %s", what, strerror(-e));
    return e;
}

int rsim_worker(const char *host, int port, const char *cmd, int rank, int world, const char *task,
                struct rsim_result *res)
{
    memset(res, 0, sizeof(*res));
    res->rank = -1;
    int t = hello(host, port, cmd, rank, world, task), r, lfd = -1;
    if (t < 0)
        return fail(res, t, "hello");
    int32_t v[4], ntree, prev, next;
    if ((r = rsim_recv(t, v, 4 * sizeof(int32_t))) < 0) {
        close(t);
        return fail(res, r, "assignment");
    }
    res->rank = v[0], res->parent = v[1], res->world = v[2], ntree = v[3];
    if (ntree < 0 || ntree > 3) {
        close(t);
        return fail(res, -EPROTO, "tree size");
    }
    for (int i = 0; i < ntree && r == 0; i++)
        r = recv_int(t, &v[0]), res->nn[res->n_nn++] = v[0];
    if (r < 0 || (r = recv_int(t, &prev)) < 0 || (r = recv_int(t, &next)) < 0) {
        close(t);
        return fail(res, r, "links");
    }
    res->prev = prev, res->next = next;
    for (int k = 0; k < 2; k++) {
        int x = k ? next : prev, seen = x < 0;
        for (int i = 0; i < res->n_nn; i++)
            seen |= res->nn[i] == x;
        if (!seen)
            res->nn[res->n_nn++] = x;
    }
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 16) < 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &len) < 0) {
        r = -errno;
        goto out;
    }
    int32_t nconn, naccept, zero = 0;
    if ((r = send_int(t, zero)) < 0 || (r = recv_int(t, &nconn)) < 0 ||
        (r = recv_int(t, &naccept)) < 0)
        goto out;
    if (nconn < 0 || naccept < 0 || nconn + naccept > 4) {
        r = -EPROTO;
        goto out;
    }
    for (int i = 0; i < nconn; i++) {
        int32_t hlen, hport, hrank, theirs;
        char h[64];
        if ((r = recv_int(t, &hlen)) < 0)
            goto out;
        if (hlen < 0 || hlen >= (int32_t)sizeof(h)) {
            r = -EPROTO;
            goto out;
        }
        if ((r = rsim_recv(t, h, (size_t)hlen)) < 0 || (r = recv_int(t, &hport)) < 0 ||
            (r = recv_int(t, &hrank)) < 0)
            goto out;
        h[hlen] = '\0';
        int p = rsim_connect(h, hport);
        if (p < 0) {
            r = p;
            goto out;
        }
        r = send_int(p, res->rank);
        if (r == 0)
            r = recv_int(p, &theirs);
        close(p);
        if (r < 0)
            goto out;
        if (theirs != hrank) {
            r = -EPROTO;
            goto out;
        }
        res->linked[res->n_linked++] = theirs;
    }
    if ((r = send_int(t, zero)) < 0 || (r = send_int(t, ntohs(sa.sin_port))) < 0)
        goto out;
    close(t);
    t = -1;
    for (int i = 0; i < naccept; i++) {
        int p = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        int32_t theirs;
        if (p < 0) {
            r = -errno;
            goto out;
        }
        timeouts(p);
        r = send_int(p, res->rank);
        if (r == 0)
            r = recv_int(p, &theirs);
        close(p);
        if (r < 0)
            goto out;
        res->linked[res->n_linked++] = theirs;
    }
    res->linked_ms = now_ms();
out:
    if (t >= 0)
        close(t);
    if (lfd >= 0)
        close(lfd);
    return r < 0 ? fail(res, r, "linking") : 0;
}

struct job {
    const char *host;
    int port, world;
    char task[16];
    struct rsim_result *res;
    pthread_t th;
};

static void *run_one(void *arg)
{
    struct job *j = arg;
    rsim_worker(j->host, j->port, "start", -1, j->world, j->task, j->res);
    return NULL;
}

int rsim_run(const char *host, int port, int n, int world, struct rsim_result *res)
{
    struct job *jobs = calloc((size_t)n, sizeof(*jobs));
    if (!jobs)
        return -ENOMEM;
    int started = 0, r = 0;
    for (; started < n; started++) {
        struct job *j = &jobs[started];
        *j = (struct job){.host = host, .port = port, .world = world, .res = &res[started]};
        snprintf(j->task, sizeof(j->task), "%d", started);
        if (pthread_create(&j->th, NULL, run_one, j) != 0) {
            r = -EAGAIN;
            break;
        }
    }
    for (int i = 0; i < started; i++) {
        pthread_join(jobs[i].th, NULL);
        if (res[i].err && !r)
            r = res[i].err;
    }
    free(jobs);
    return r;
}

int rsim_shutdown(const char *host, int port, int rank)
{
    char task[16];
    snprintf(task, sizeof(task), "%d", rank);
    int fd = hello(host, port, "shutdown", rank, -1, task);
    if (fd < 0)
        return fd;
    close(fd);
    return 0;
}

int rsim_print(const char *host, int port, int rank, const char *msg)
{
    char task[16];
    snprintf(task, sizeof(task), "%d", rank);
    int fd = hello(host, port, "print", rank, -1, task);
    if (fd < 0)
        return fd;
    int r = send_str(fd, msg);
    close(fd);
    return r;
}
