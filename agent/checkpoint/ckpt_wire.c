// SPDX-License-Identifier: Apache-2.0
/* ckpt_wire: the replication port's hello, shard header and answer; who is admitted (pure). */
#include "ckpt_wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ckpt_store.h"

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static bool name_ok(const char *s, size_t n)
{
    if (n < 1 || n > CKPT_WIRE_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] <= ' ' || s[i] > '~')
            return false;
    return true;
}

int ckpt_hello_encode(const struct ckpt_hello *h, uint8_t *buf, size_t size)
{
    const char *names[3] = {h->run, h->from, h->to};
    size_t lens[3], total = CKPT_HELLO_HEADER;
    for (int i = 0; i < 3; i++) {
        lens[i] = strnlen(names[i], CKPT_WIRE_NAME_MAX + 1);
        if (!name_ok(names[i], lens[i]))
            return -EINVAL;
        total += lens[i];
    }
    if (h->round < 0 || size < total)
        return -EINVAL;
    memcpy(buf, CKPT_WIRE_MAGIC, 4);
    for (int i = 0; i < 3; i++)
        buf[4 + i] = (uint8_t)lens[i];
    buf[7] = 0;
    put64(buf + 8, (uint64_t)h->round);
    size_t at = CKPT_HELLO_HEADER;
    for (int i = 0; i < 3; i++) {
        memcpy(buf + at, names[i], lens[i]);
        at += lens[i];
    }
    return (int)total;
}

int ckpt_hello_decode(const uint8_t *buf, size_t len, struct ckpt_hello *ret, size_t *ret_used,
                      struct ea_error *err)
{
    if (len >= 4 && memcmp(buf, CKPT_WIRE_MAGIC, 4) != 0)
        return ea_errorf(err, -EBADMSG, "not a checkpoint replication hello (bad magic)");
    if (len < CKPT_HELLO_HEADER)
        return 0;
    size_t total = CKPT_HELLO_HEADER + (size_t)buf[4] + buf[5] + buf[6];
    if (buf[4] > CKPT_WIRE_NAME_MAX || buf[5] > CKPT_WIRE_NAME_MAX || buf[6] > CKPT_WIRE_NAME_MAX)
        return ea_errorf(err, -EBADMSG, "hello: a name longer than %d bytes", CKPT_WIRE_NAME_MAX);
    if (len < total)
        return 0;
    struct ckpt_hello h = {.round = (int64_t)get64(buf + 8)};
    if (h.round < 0)
        return ea_errorf(err, -EBADMSG, "hello: negative round");
    char *names[3] = {h.run, h.from, h.to};
    static const char *const what[3] = {"run", "from", "to"};
    size_t at = CKPT_HELLO_HEADER;
    for (int i = 0; i < 3; i++) {
        if (!name_ok((const char *)buf + at, buf[4 + i]))
            return ea_errorf(err, -EBADMSG, "hello: field '%s' is not 1-%d printable bytes",
                             what[i], CKPT_WIRE_NAME_MAX);
        memcpy(names[i], buf + at, buf[4 + i]);
        names[i][buf[4 + i]] = '\0';
        at += buf[4 + i];
    }
    *ret = h;
    *ret_used = total;
    return 1;
}

enum ckpt_wire_status ckpt_admit(const struct ckpt_hello *h, const struct ckpt_view *v,
                                 struct ea_error *err)
{
    if (strcmp(h->run, v->run) != 0) {
        ea_errorf(err, -EPERM, "run '%s' is not this node's run", h->run);
        return CKPT_W_BAD_RUN;
    }
    if (strcmp(h->to, v->me) != 0) {
        ea_errorf(err, -EPERM, "addressed to node '%s', not this one", h->to);
        return CKPT_W_NOT_ME;
    }
    if (v->round < 0 || h->round > v->round) {
        ea_errorf(err, -EAGAIN, "round %" PRId64 " is not running here yet", h->round);
        return CKPT_W_LATER;
    }
    if (h->round < v->round) {
        ea_errorf(err, -EPERM, "round %" PRId64 " is over (round %" PRId64 " runs)", h->round,
                  v->round);
        return CKPT_W_STALE;
    }
    if (!v->prev || !v->prev[0] || strcmp(h->from, v->prev) != 0) {
        ea_errorf(err, -EPERM, "node '%s' is not this node's ring predecessor in round %" PRId64,
                  h->from, v->round);
        return CKPT_W_NOT_PEER;
    }
    return CKPT_W_OK;
}

void ckpt_shard_encode(const struct ckpt_shard_wire *s, uint8_t out[CKPT_SHARD_HDR_LEN])
{
    memcpy(out, CKPT_WIRE_MAGIC, 4);
    put64(out + 4, (uint64_t)s->step);
    put32(out + 12, (uint32_t)s->shard);
    put32(out + 16, (uint32_t)s->shards);
    put64(out + 20, s->len);
    put32(out + 28, s->crc);
}

int ckpt_shard_decode(const uint8_t *buf, size_t len, uint64_t max_len,
                      struct ckpt_shard_wire *ret, struct ea_error *err)
{
    if (len >= 4 && memcmp(buf, CKPT_WIRE_MAGIC, 4) != 0)
        return ea_errorf(err, -EBADMSG, "not a shard header (bad magic)");
    if (len < CKPT_SHARD_HDR_LEN)
        return 0;
    struct ckpt_shard_wire s = {.step = (int64_t)get64(buf + 4), .shard = (int)get32(buf + 12),
                                .shards = (int)get32(buf + 16), .len = get64(buf + 20),
                                .crc = get32(buf + 28)};
    if (s.step < 0 || s.step > CKPT_MAX_STEP)
        return ea_errorf(err, -EBADMSG, "shard header: step outside 0..2^53");
    if (s.shards < 1 || s.shards > CKPT_MAX_SHARDS)
        return ea_errorf(err, -EBADMSG, "shard header: shards outside 1..%d", CKPT_MAX_SHARDS);
    if (s.shard < 0 || s.shard >= s.shards)
        return ea_errorf(err, -EBADMSG, "shard header: shard outside 0..%d", s.shards - 1);
    if (s.len == 0 || s.len > max_len)
        return ea_errorf(err, -EBADMSG, "shard header: %" PRIu64 " bytes, outside 1..%" PRIu64,
                         s.len, max_len);
    *ret = s;
    return 1;
}

size_t ckpt_answer_encode(enum ckpt_wire_status st, const char *msg, uint8_t out[CKPT_ANSWER_MAX])
{
    size_t n = msg ? strnlen(msg, 255) : 0;
    memcpy(out, CKPT_WIRE_MAGIC, 4);
    out[4] = (uint8_t)st;
    out[5] = (uint8_t)n;
    if (n)
        memcpy(out + 6, msg, n);
    return 6 + n;
}

int ckpt_answer_decode(const uint8_t *buf, size_t len, enum ckpt_wire_status *ret_status,
                       char *msg, size_t msg_size, size_t *ret_used)
{
    if (len >= 4 && memcmp(buf, CKPT_WIRE_MAGIC, 4) != 0)
        return -EBADMSG;
    if (len < 6)
        return 0;
    if (buf[4] > CKPT_W_LAST || msg_size < 256)
        return -EBADMSG;
    size_t n = buf[5];
    if (len < 6 + n)
        return 0;
    for (size_t i = 0; i < n; i++)
        msg[i] = buf[6 + i] >= ' ' && buf[6 + i] <= '~' ? (char)buf[6 + i] : '?';
    msg[n] = '\0';
    *ret_status = (enum ckpt_wire_status)buf[4];
    *ret_used = 6 + n;
    return 1;
}

const char *ckpt_wire_status_name(enum ckpt_wire_status s)
{
    static const char *const names[] = {"ok", "not this run", "not this node", "round over",
                                        "round not seen yet", "not the ring predecessor",
                                        "does not fit", "malformed", "not held here",
                                        "not a member of this round"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

/* ---- fetch -------------------------------------------------------------------------------- */

int ckpt_fetch_encode(const struct ckpt_fetch_req *q, uint8_t *buf, size_t size)
{
    uint8_t hb[CKPT_HELLO_MAX];
    int n = ckpt_hello_encode(&q->h, hb, sizeof(hb));
    if (n < 0 || q->step < 0 || q->step > CKPT_MAX_STEP || q->shard < 0 ||
        q->shard >= CKPT_MAX_SHARDS || size < (size_t)n + 12)
        return -EINVAL;
    memcpy(buf, CKPT_FETCH_MAGIC, 4);
    memcpy(buf + 4, hb + 4, 12); /* the lengths, the pad, the round */
    put64(buf + 16, (uint64_t)q->step);
    put32(buf + 24, (uint32_t)q->shard);
    memcpy(buf + CKPT_FETCH_HEADER, hb + CKPT_HELLO_HEADER, (size_t)n - CKPT_HELLO_HEADER);
    return n + 12;
}

int ckpt_fetch_decode(const uint8_t *buf, size_t len, struct ckpt_fetch_req *ret, size_t *ret_used,
                      struct ea_error *err)
{
    if (len >= 4 && memcmp(buf, CKPT_FETCH_MAGIC, 4) != 0)
        return ea_errorf(err, -EBADMSG, "not a checkpoint fetch request (bad magic)");
    if (len < CKPT_FETCH_HEADER)
        return 0;
    int64_t step = (int64_t)get64(buf + 16);
    uint32_t shard = get32(buf + 24);
    if (step < 0 || step > CKPT_MAX_STEP)
        return ea_errorf(err, -EBADMSG, "fetch: step outside 0..2^53");
    if (shard >= CKPT_MAX_SHARDS)
        return ea_errorf(err, -EBADMSG, "fetch: shard outside 0..%d", CKPT_MAX_SHARDS - 1);
    /* the rest is a hello's: its header without step and shard, then the names */
    uint8_t hb[CKPT_HELLO_MAX];
    size_t names = len - CKPT_FETCH_HEADER;
    if (names > CKPT_HELLO_MAX - CKPT_HELLO_HEADER)
        names = CKPT_HELLO_MAX - CKPT_HELLO_HEADER;
    memcpy(hb, CKPT_WIRE_MAGIC, 4);
    memcpy(hb + 4, buf + 4, 12);
    memcpy(hb + CKPT_HELLO_HEADER, buf + CKPT_FETCH_HEADER, names);
    struct ckpt_fetch_req q = {.step = step, .shard = (int)shard};
    size_t used = 0;
    struct ea_error e = {0};
    int d = ckpt_hello_decode(hb, CKPT_HELLO_HEADER + names, &q.h, &used, &e);
    if (d <= 0)
        return d < 0 ? ea_errorf(err, -EBADMSG, "fetch: %s", e.msg) : 0;
    *ret = q;
    *ret_used = used + 12;
    return 1;
}

enum ckpt_wire_status ckpt_fetch_admit(const struct ckpt_fetch_req *q, const struct ckpt_view *v,
                                       int member, struct ea_error *err)
{
    struct ckpt_view any = *v;
    any.prev = q->h.from; /* every member may fetch, not only the ring predecessor */
    enum ckpt_wire_status st = ckpt_admit(&q->h, &any, err);
    if (st != CKPT_W_OK)
        return st;
    if (member != 1) {
        ea_errorf(err, -EPERM, "node '%s' is not a member of round %" PRId64, q->h.from,
                  v->round);
        return CKPT_W_NOT_MEMBER;
    }
    return CKPT_W_OK;
}

int ckpt_connect(const char *addr, int port)
{
    struct sockaddr_storage ss = {0};
    socklen_t len;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, addr, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        len = sizeof(*v4);
    } else if (inet_pton(AF_INET6, addr, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        len = sizeof(*v6);
    } else {
        return -EINVAL;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}
