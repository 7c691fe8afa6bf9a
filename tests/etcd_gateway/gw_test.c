// SPDX-License-Identifier: Apache-2.0
/* gw_test: helpers shared by the etcd-gateway tests (see gw_test.h). */
#include "gw_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ea_time.h"

void gwt_url(const struct etcd_harness *h, int i, char *out, size_t len)
{
    snprintf(out, len, "%s://%s", h->tls ? "https" : "http", h->m[i].endpoint);
}

void gwt_urls(const struct etcd_harness *h, char *out, size_t len)
{
    size_t off = 0;
    out[0] = '\0';
    for (int i = 0; i < h->n && off < len; i++)
        off += (size_t)snprintf(out + off, len - off, "%s%s://%s", i ? "," : "",
                                h->tls ? "https" : "http", h->m[i].endpoint);
}

int gwt_open(const struct etcd_harness *h, const char *urls, int timeout_ms, const char *user,
             const char *password, struct kv **ret, struct ea_error *err)
{
    struct kv_config cfg = {
        .backend = "etcd-gateway",
        .endpoints = urls,
        .user = user,
        .password = password,
        .request_timeout_ms = timeout_ms,
    };
    if (h && h->tls) {
        cfg.cacert = h->cacert;
        cfg.cert = h->cert;
        cfg.key = h->key;
    }
    return kv_open(&cfg, ret, err);
}

static int bound_socket(int *ret_port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
        getsockname(fd, (struct sockaddr *)&a, &len)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *ret_port = ntohs(a.sin_port);
    return fd;
}

int gwt_dead_port(void)
{
    int port = 0, fd = bound_socket(&port); /* bound, never listened, then closed */
    if (fd >= 0)
        close(fd);
    return port;
}

int gwt_blackhole(int *ret_port)
{
    int fd = bound_socket(ret_port);
    if (fd >= 0 && listen(fd, 16)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Read one HTTP request (headers and a Content-Length body) with a deadline. */
static void read_request(int c)
{
    char buf[8192];
    size_t len = 0;
    long body = -1;
    int64_t deadline = ea_now_ms() + 3000;
    for (;;) {
        if (body < 0) {
            char *end = memmem(buf, len, "\r\n\r\n", 4);
            if (end) {
                char *cl = memmem(buf, (size_t)(end - buf), "Content-Length:", 15);
                size_t hdr = (size_t)(end + 4 - buf);
                body = cl ? strtol(cl + 15, NULL, 10) : 0;
                memmove(buf, buf + hdr, len - hdr);
                len -= hdr;
            }
        }
        if (body >= 0 && (long)len >= body)
            return;
        struct pollfd p = {.fd = c, .events = POLLIN};
        int left = ea_timeout_until(deadline);
        if (left == 0 || poll(&p, 1, left) != 1)
            return;
        if (len == sizeof(buf))
            len = 0; /* only the length matters once past the headers */
        ssize_t r = read(c, buf + len, sizeof(buf) - len);
        if (r <= 0)
            return;
        len += (size_t)r;
    }
}

static void *fake_main(void *arg)
{
    struct gwt_fake *f = arg;
    for (size_t i = 0;; i++) {
        int c = accept4(f->fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            return NULL; /* shut down */
        if (i < f->n) {
            read_request(c);
            const char *a = f->answers[i];
            size_t len = strlen(a), off = 0;
            while (off < len) {
                ssize_t w = write(c, a + off, len - off);
                if (w <= 0)
                    break;
                off += (size_t)w;
            }
        }
        close(c);
    }
}

int gwt_fake_start(struct gwt_fake *f, const char *const *answers, size_t n)
{
    memset(f, 0, sizeof(*f));
    f->answers = answers;
    f->n = n;
    f->fd = gwt_blackhole(&f->port);
    if (f->fd < 0)
        return -errno;
    int rc = pthread_create(&f->thread, NULL, fake_main, f);
    if (rc) {
        close(f->fd);
        f->fd = -1;
        return -rc;
    }
    return 0;
}

void gwt_fake_stop(struct gwt_fake *f)
{
    if (f->fd < 0)
        return;
    shutdown(f->fd, SHUT_RDWR); /* accept() fails: the thread returns */
    pthread_join(f->thread, NULL);
    close(f->fd);
    f->fd = -1;
}
