// SPDX-License-Identifier: Apache-2.0
/*
 * http: the --http server limits connections per client address. One address that holds idle
 * connections gets no more than its share (the next one is closed unanswered), while a request
 * from another address is still answered; closing one of them gives that address room again.
 * Two loopback addresses (127.0.0.1 and 127.0.0.2) play the two clients.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http.h"

#define PER_IP 8 /* agent/observe/http.c's HTTP_PER_IP_LIMIT */

static struct http *h;

static void teardown(void)
{
    http_stop(h);
}

TestSuite(http, .fini = teardown, .timeout = 30);

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static bool ok_200(const char *reply)
{
    return strncmp(reply, "HTTP/1.", 7) == 0 && strncmp(reply + 8, " 200 ", 5) == 0;
}

/* A TCP connection from `from` to 127.0.0.1:port. */
static int dial(const char *from, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in src = {.sin_family = AF_INET};
    inet_pton(AF_INET, from, &src.sin_addr);
    cr_assert_eq(bind(fd, (struct sockaddr *)&src, sizeof(src)), 0, "bind %s: %s", from,
                 strerror(errno));
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    cr_assert_eq(connect(fd, (struct sockaddr *)&dst, sizeof(dst)), 0, "%s", strerror(errno));
    return fd;
}

/* GET /metrics on fd; the reply's first bytes into buf ("" when the server closed the
 * connection without an answer), waiting at most timeout_ms. */
static const char *get(int fd, char *buf, size_t size, int timeout_ms)
{
    static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
    buf[0] = '\0';
    if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) < 0)
        return buf; /* already closed by the server */
    size_t n = 0;
    long long deadline = now_ms() + timeout_ms;
    while (n + 1 < size) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        long long left = deadline - now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t r = recv(fd, buf + n, size - 1 - n, 0);
        if (r <= 0)
            break; /* EOF or reset */
        n += (size_t)r;
        buf[n] = '\0';
    }
    return buf;
}

Test(http, one_address_gets_its_share_others_still_get_answers)
{
    struct ea_error err = {0};
    int port = 0;
    cr_assert_eq(http_start("127.0.0.1", 0, &h, &port, &err), 0, "%s", err.msg);
    char buf[256];

    /* the share of 127.0.0.1, held idle (each would live until the 10 s timeout) */
    int held[PER_IP];
    for (int i = 0; i < PER_IP; i++)
        held[i] = dial("127.0.0.1", port);
    /* accepted in order: by the time the server takes this one it holds the others */
    int extra = dial("127.0.0.1", port);
    cr_assert_str_eq(get(extra, buf, sizeof(buf), 5000), "",
                     "connection %d from one address is closed unanswered, got [%s]", PER_IP + 1,
                     buf);
    close(extra);

    /* another client is served meanwhile */
    int other = dial("127.0.0.2", port);
    cr_assert(ok_200(get(other, buf, sizeof(buf), 5000)),
              "127.0.0.2 is answered while 127.0.0.1 is at its limit: [%s]", buf);
    close(other);

    /* one held connection closed: 127.0.0.1 has room again (the server notices the close on
     * its own thread, so retry until a deadline) */
    close(held[0]);
    bool served = false;
    for (long long deadline = now_ms() + 5000; !served && now_ms() < deadline;) {
        int fd = dial("127.0.0.1", port);
        served = ok_200(get(fd, buf, sizeof(buf), 1000));
        close(fd);
    }
    cr_assert(served, "a freed slot is usable again");
    for (int i = 1; i < PER_IP; i++)
        close(held[i]);
}
