// SPDX-License-Identifier: Apache-2.0
/* ckpt_cli.h: a worker's side of the checkpoint socket, for the unit tests that run a store
 * in-process (test_checkpoint.c, test_ckpt_spare.c, test_ckpt_repl.c, test_ckpt_fetch.c): connect, and one request answered while the
 * test serves the store (deadlines on events, not on timing). */
#ifndef EA_TESTS_CKPT_CLI_H
#define EA_TESTS_CKPT_CLI_H

#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "checkpoint.h"
#include "ckpt_pump.h"

static inline int ckpt_cli_connect(const struct ckpt *srv)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", ckpt_socket_path(srv));
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "%s", strerror(errno));
    return fd;
}

/* The reply waiting on fd (not blocking): its text in buf and its fd (or -1); a failed
 * assertion naming the request when there is none. */
static inline int ckpt_cli_recv(int fd, const char *req, size_t reqlen, char *buf, size_t size)
{
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = buf, .iov_len = size - 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
                       .msg_controllen = sizeof(u.b)};
    ssize_t n = recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    cr_assert_gt(n, 0, "no reply to '%.*s'", (int)reqlen, req);
    buf[n] = 0;
    int got = -1;
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    if (h && h->cmsg_type == SCM_RIGHTS)
        memcpy(&got, CMSG_DATA(h), sizeof(int));
    return got;
}

/* Send `req`, serve the store until the reply comes (5 s deadline): the reply text in buf and
 * its fd (or -1). */
static inline int ckpt_cli_ask(struct ckpt *srv, int fd, const char *req, size_t reqlen,
                               char *buf, size_t size)
{
    cr_assert_eq(send(fd, req, reqlen, 0), (ssize_t)reqlen);
    for (int i = 0; i < 500; i++) {
        pump_ckpt(srv, 0);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 10) == 1)
            break;
    }
    return ckpt_cli_recv(fd, req, reqlen, buf, size);
}

#endif
