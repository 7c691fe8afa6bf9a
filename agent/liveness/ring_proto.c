// SPDX-License-Identifier: Apache-2.0
/* ring_proto: the liveness ring's hello and answer, big-endian, every field checked. */
#include "ring_proto.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static bool name_ok(const char *s, size_t len)
{
    if (len == 0 || len > RING_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] < 0x21 || s[i] > 0x7e)
            return false;
    return true;
}

static void put64(uint8_t *p, int64_t v)
{
    for (int i = 7; i >= 0; i--, v = (int64_t)((uint64_t)v >> 8))
        p[i] = (uint8_t)v;
}

static int64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return (int64_t)v;
}

int ring_hello_encode(const struct ring_hello *h, uint8_t *buf, size_t size)
{
    size_t lr = strlen(h->run), lf = strlen(h->from), lt = strlen(h->to);
    if (!name_ok(h->run, lr) || !name_ok(h->from, lf) || !name_ok(h->to, lt) || h->round < 0 ||
        (h->kind != RING_KIND_LINK && h->kind != RING_KIND_PROBE) ||
        size < RING_HELLO_HEADER + lr + lf + lt)
        return -EINVAL;
    memcpy(buf, RING_MAGIC, 4);
    buf[4] = (uint8_t)h->kind;
    buf[5] = (uint8_t)lr;
    buf[6] = (uint8_t)lf;
    buf[7] = (uint8_t)lt;
    put64(buf + 8, h->round);
    uint8_t *p = buf + RING_HELLO_HEADER;
    memcpy(p, h->run, lr);
    memcpy(p + lr, h->from, lf);
    memcpy(p + lr + lf, h->to, lt);
    return (int)(RING_HELLO_HEADER + lr + lf + lt);
}

static int bad(struct ea_error *err, const char *what)
{
    return ea_errorf(err, -EBADMSG, "liveness hello: %s", what);
}

int ring_hello_decode(const uint8_t *buf, size_t len, struct ring_hello *ret, size_t *ret_used,
                      struct ea_error *err)
{
    /* the magic first, on as many bytes as there are: garbage is refused without waiting */
    if (memcmp(buf, RING_MAGIC, len < 4 ? len : 4) != 0)
        return bad(err, "not an elastic-agent liveness hello (bad magic)");
    if (len < RING_HELLO_HEADER)
        return 0;
    size_t lr = buf[5], lf = buf[6], lt = buf[7];
    if (buf[4] != RING_KIND_LINK && buf[4] != RING_KIND_PROBE)
        return bad(err, "unknown kind");
    if (!lr || !lf || !lt || lr > RING_NAME_MAX || lf > RING_NAME_MAX || lt > RING_NAME_MAX)
        return bad(err, "a name length is 0 or over 127");
    int64_t round = get64(buf + 8);
    if (round < 0)
        return bad(err, "negative round");
    size_t need = RING_HELLO_HEADER + lr + lf + lt;
    if (len < need)
        return 0;
    const char *p = (const char *)buf + RING_HELLO_HEADER;
    if (!name_ok(p, lr) || !name_ok(p + lr, lf) || !name_ok(p + lr + lf, lt))
        return bad(err, "a name is not printable ASCII");
    struct ring_hello h = {.kind = (enum ring_kind)buf[4], .round = round};
    memcpy(h.run, p, lr);
    memcpy(h.from, p + lr, lf);
    memcpy(h.to, p + lr + lf, lt);
    *ret = h;
    *ret_used = need;
    return 1;
}

void ring_answer_encode(enum ring_status status, int64_t round, uint8_t out[RING_ANSWER_LEN])
{
    memcpy(out, RING_MAGIC, 4);
    out[4] = (uint8_t)status;
    put64(out + 5, round);
}

int ring_answer_decode(const uint8_t *buf, size_t len, enum ring_status *ret_status,
                       int64_t *ret_round)
{
    if (memcmp(buf, RING_MAGIC, len < 4 ? len : 4) != 0)
        return -EBADMSG;
    if (len < RING_ANSWER_LEN)
        return 0;
    if (buf[4] > RING_NOT_PEER || get64(buf + 5) < 0)
        return -EBADMSG;
    *ret_status = (enum ring_status)buf[4];
    *ret_round = get64(buf + 5);
    return 1;
}

const char *ring_status_name(enum ring_status s)
{
    switch (s) {
    case RING_OK:
        return "ok";
    case RING_BAD_RUN:
        return "not this run";
    case RING_NOT_ME:
        return "not this node";
    case RING_STALE:
        return "an older round";
    case RING_LATER:
        return "a round not seen yet";
    case RING_NOT_PEER:
        return "not its predecessor";
    }
    return "?";
}

/* Said by socket()/connect() at once, before a packet left: no route, interface or source
 * address here (ENETUNREACH, EHOSTUNREACH, ENETDOWN, EADDRNOTAVAIL), no local port (EADDRINUSE,
 * EAGAIN), fd or buffer (EMFILE, ENFILE, ENOBUFS, ENOMEM), a local firewall rule (EPERM, EACCES).
 * The same errnos later, from SO_ERROR (an ICMP error, a failed ARP), are evidence as before. */
bool ring_local_error(int e)
{
    return e == ENETUNREACH || e == EHOSTUNREACH || e == ENETDOWN || e == EADDRNOTAVAIL ||
           e == EADDRINUSE || e == EAGAIN || e == EMFILE || e == ENFILE || e == ENOBUFS ||
           e == ENOMEM || e == EPERM || e == EACCES;
}

int ring_listen(const char *addr, int *ret_port)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    socklen_t len = sizeof(*a6);
    int fd;
    if (addr && addr[0] && inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        len = sizeof(*a4);
    } else if (addr && addr[0] && inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
    } else {
        a6->sin6_family = AF_INET6;
        a6->sin6_addr = in6addr_any;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 && ss.ss_family == AF_INET6 && !(addr && addr[0])) { /* no IPv6 here */
        memset(&ss, 0, sizeof(ss));
        a4->sin_family = AF_INET;
        a4->sin_addr.s_addr = htonl(INADDR_ANY);
        len = sizeof(*a4);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    }
    if (fd < 0)
        return -errno;
    int off = 0;
    if (ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 64) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    *ret_port = ntohs(ss.ss_family == AF_INET6 ? a6->sin6_port : a4->sin_port);
    return fd;
}
