// SPDX-License-Identifier: Apache-2.0
/* ckpt_repl: the replication port (inbound replicas from the ring predecessor) and the sender of
 * this node's newest shards to its successor; non-blocking, its fds polled by the agent's loop. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_internal.h"
#include "ckpt_proto.h"
#include "ckpt_wire.h"

#define REPL_CONNS 8               /* inbound connections at once (one predecessor, and strays) */
#define REPL_CHUNK (256 * 1024)    /* bytes per send() of a body */
#define REPL_RETRY_MS 1000         /* a failed connect or a refused hello: try again after */
#define REPL_OWNER_BASE (UINT64_C(1) << 62) /* store owners of inbound connections */

enum in_state { IN_FREE, IN_HELLO, IN_HDR, IN_BODY };

struct inbound {
    enum in_state st;
    int fd;
    uint64_t owner;
    int64_t deadline; /* monotonic ms: the hello, or the current shard's bytes, by then (0: none,
                         -1: from the next step on) */
    struct ckpt_hello hello;
    uint8_t buf[CKPT_HELLO_MAX];
    size_t have;
    struct ckpt_shard_wire sh;
    uint64_t id;     /* the store's pending entry, 0: the body is read and dropped */
    int mfd;         /* its memfd */
    uint64_t got;
    char why[256];   /* a refusal said after the body */
    enum ckpt_wire_status why_st;
};

enum out_state { OUT_IDLE, OUT_CONNECTING, OUT_HELLO, OUT_READY, OUT_HDR, OUT_BODY, OUT_ANSWER };

struct ckpt_repl {
    struct ckpt_repl_config cfg;
    char node[CKPT_WIRE_NAME_MAX + 1];
    int lfd;
    int64_t now;
    /* the round */
    int64_t round;
    char prev[CKPT_WIRE_NAME_MAX + 1], next[CKPT_WIRE_NAME_MAX + 1];
    char next_addr[64];
    int next_port;
    struct inbound in[REPL_CONNS];
    uint64_t next_owner;
    /* the sender */
    enum out_state ost;
    int ofd;
    bool ofd_out; /* poll it for room to write too */
    int64_t retry_at;
    uint8_t obuf[CKPT_HELLO_MAX];
    size_t olen, ooff;
    uint8_t abuf[CKPT_ANSWER_MAX];
    size_t ahave;
    const uint8_t *map;
    struct ckpt_shard_wire cur;
    uint64_t boff;
    uint64_t *sent; /* entry ids sent to this successor in this round */
    size_t nsent, capsent;
    double tokens;
    int64_t refill_at;
    struct ckpt_repl_stats stats;
};

static void in_close(struct ckpt *c, struct inbound *in)
{
    if (in->st == IN_FREE)
        return;
    ckpt_store_drop_owner(&c->store, in->owner); /* a shard half received is dropped */
    if (in->id == 0 && in->mfd >= 0)
        close(in->mfd);
    if (in->fd >= 0)
        close(in->fd);
    *in = (struct inbound){.st = IN_FREE, .fd = -1, .mfd = -1};
}

static void out_unmap(struct ckpt_repl *r)
{
    if (r->map)
        munmap((void *)r->map, r->cur.len);
    r->map = NULL;
}

static void out_close(struct ckpt *c, int64_t retry_ms)
{
    struct ckpt_repl *r = c->repl;
    out_unmap(r);
    if (r->ofd >= 0)
        close(r->ofd);
    r->ofd = -1;
    r->ofd_out = false;
    r->ost = OUT_IDLE;
    r->retry_at = r->now + retry_ms;
}

int ckpt_repl_start(struct ckpt *c, const struct ckpt_repl_config *rc, struct ea_error *err)
{
    struct ckpt_repl *r = calloc(1, sizeof(*r));
    if (!r) {
        close(rc->listen_fd);
        return ea_errorf(err, -ENOMEM, "out of memory");
    }
    r->cfg = *rc;
    snprintf(r->node, sizeof(r->node), "%s", rc->node_id);
    r->cfg.node_id = r->node;
    if (r->cfg.hello_ms <= 0)
        r->cfg.hello_ms = 10000;
    r->lfd = rc->listen_fd;
    r->ofd = -1;
    r->round = -1;
    r->next_owner = REPL_OWNER_BASE;
    for (int i = 0; i < REPL_CONNS; i++)
        r->in[i] = (struct inbound){.st = IN_FREE, .fd = -1, .mfd = -1};
    (void)err;
    c->repl = r; /* its fds are polled from now on (ckpt_repl_pollfds) */
    return 0;
}

void ckpt_repl_destroy(struct ckpt *c)
{
    struct ckpt_repl *r = c->repl;
    ckpt_fetch_destroy(c);
    if (!r)
        return;
    for (int i = 0; i < REPL_CONNS; i++)
        in_close(c, &r->in[i]);
    out_close(c, 0);
    close(r->lfd);
    free(r->sent);
    free(r);
    c->repl = NULL;
}

int64_t ckpt_repl_round_of(const struct ckpt *c)
{
    return c->repl ? c->repl->round : -1;
}

const char *ckpt_repl_node(const struct ckpt *c)
{
    return c->repl ? c->repl->node : "";
}

void ckpt_repl_stats(const struct ckpt *c, struct ckpt_repl_stats *ret)
{
    *ret = c && c->repl ? c->repl->stats : (struct ckpt_repl_stats){0};
}

void ckpt_repl_round(struct ckpt *c, int64_t round, const char *prev, const char *next,
                     const char *next_addr, int next_port)
{
    struct ckpt_repl *r = c ? c->repl : NULL;
    if (!r)
        return;
    bool target = strcmp(r->next, next) != 0 || strcmp(r->next_addr, next_addr) != 0 ||
                  r->next_port != next_port || r->round != round;
    if (round != r->round)
        for (int i = 0; i < REPL_CONNS; i++)
            if (r->in[i].st != IN_FREE && r->in[i].st != IN_HELLO)
                in_close(c, &r->in[i]); /* admitted for a round that is over */
    r->round = round;
    ckpt_fetch_round(c, round);
    snprintf(r->prev, sizeof(r->prev), "%s", prev);
    if (!target)
        return;
    snprintf(r->next, sizeof(r->next), "%s", next);
    snprintf(r->next_addr, sizeof(r->next_addr), "%s", next_addr);
    r->next_port = next_port;
    out_close(c, 0);
    r->nsent = 0; /* a new successor, or a new round: everything again */
}

/* ---- inbound ------------------------------------------------------------------------------ */

/* 0, or -EPIPE when it did not go out whole (small: the socket's buffer takes it unless the
 * peer stopped reading its answers; such a peer is cut). */
static int in_answer(struct inbound *in, enum ckpt_wire_status st, const char *msg)
{
    uint8_t a[CKPT_ANSWER_MAX];
    size_t n = ckpt_answer_encode(st, msg, a);
    return send(in->fd, a, n, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)n ? 0 : -EPIPE;
}

static void on_listen(struct ckpt *c)
{
    struct ckpt_repl *r = c->repl;
    for (;;) {
        int fd = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        int i = 0;
        while (i < REPL_CONNS && r->in[i].st != IN_FREE)
            i++;
        if (i == REPL_CONNS) {
            ckpt_note_add(c, CKPT_NOTE_REFUSED, -1, -1, 0, 0, "replication port: a connection "
                          "refused: %d open already", REPL_CONNS);
            close(fd);
            continue;
        }
        /* its deadline is set by the next ckpt_repl_step, on the step's clock */
        r->in[i] = (struct inbound){.st = IN_HELLO, .fd = fd, .owner = r->next_owner++,
                                    .deadline = -1, .mfd = -1};
    }
}

/* A header read: reserve room for it (or note why not and drop its bytes as they come). */
static void in_begin(struct ckpt *c, struct inbound *in)
{
    struct ckpt_repl *r = c->repl;
    struct ea_error e = {0};
    const struct ckpt_shard_wire *s = &in->sh;
    in->got = 0;
    in->id = 0;
    in->why[0] = '\0';
    in->why_st = CKPT_W_OK;
    in->deadline = r->now + r->cfg.hello_ms;
    const struct ckpt_entry *have = ckpt_store_find(&c->store, s->step, s->shard);
    if (have && have->len == s->len && (!have->crc_known || have->crc == s->crc))
        return; /* held already (an own save of it, or an earlier copy): the bytes are dropped */
    int rc = ckpt_store_reserve(&c->store, in->owner, s->step, s->shard, s->shards, s->len, &in->id,
                                &e);
    if (rc == 0) {
        in->mfd = memfd_create("ckpt-replica", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (in->mfd < 0 || ftruncate(in->mfd, (off_t)s->len) < 0) {
            rc = ea_errorf(&e, -errno, "cannot make a memfd of %" PRIu64 " bytes: %s", s->len,
                           strerror(errno));
            if (in->mfd >= 0)
                close(in->mfd);
            in->mfd = -1;
            ckpt_store_drop(&c->store, in->id);
            in->id = 0;
        } else {
            ckpt_store_set_fd(&c->store, in->id, in->mfd); /* the store closes it if dropped */
        }
    }
    if (rc == 0)
        return;
    in->id = 0;
    in->why_st = rc == -ENOSPC ? CKPT_W_NOFIT : CKPT_W_BAD;
    snprintf(in->why, sizeof(in->why), "replica of shard %d of step %" PRId64 " from node '%s' "
             "refused: %s", s->shard, s->step, in->hello.from, e.msg);
    ckpt_note_add(c, rc == -ENOSPC ? CKPT_NOTE_NOFIT : CKPT_NOTE_BAD, s->step, s->shard, s->shards,
                  s->len, "%s", in->why);
}

/* Every byte of a shard is in its memfd: seal it, check length and checksum, commit, answer
 * (its result). */
static int in_finish(struct ckpt *c, struct inbound *in)
{
    struct ckpt_repl *r = c->repl;
    const struct ckpt_shard_wire *s = &in->sh;
    if (in->id == 0)
        return in_answer(in, in->why_st, in->why[0] ? in->why : "held already");
    struct ea_error e = {0};
    uint64_t size = UINT64_MAX;
    uint32_t crc = 0;
    struct stat st;
    int fd = in->mfd;
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) == 0 &&
        fstat(fd, &st) == 0) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED) {
            size = (uint64_t)st.st_size;
            crc = ckpt_crc32(0, m, size);
            munmap(m, size);
        }
    }
    int rc = ckpt_store_commit(&c->store, in->owner, in->id, size, true, crc, s->crc, &e);
    in->id = 0;
    in->mfd = -1;
    if (rc < 0) {
        ckpt_note_add(c, CKPT_NOTE_BAD, s->step, s->shard, s->shards, s->len, "replica of shard %d "
                      "of step %" PRId64 " from node '%s' dropped: %s", s->shard, s->step,
                      in->hello.from, e.msg);
        return in_answer(in, CKPT_W_BAD, e.msg);
    }
    fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL);
    for (size_t i = 0; i < c->store.n; i++)
        if (c->store.e[i].fd == fd)
            c->store.e[i].replica = true;
    r->stats.recv_shards++;
    r->stats.recv_bytes += s->len;
    ckpt_note_add(c, CKPT_NOTE_REPLICA, s->step, s->shard, s->shards, s->len,
                  "replica of shard %d of step %" PRId64 " (%" PRIu64 " bytes) from node '%s'",
                  s->shard, s->step, s->len, in->hello.from);
    if (rc == 1)
        ckpt_note_add(c, CKPT_NOTE_COMPLETE, s->step, -1, s->shards, 0,
                      "step %" PRId64 " complete (%d shard(s)), with replicas", s->step, s->shards);
    return in_answer(in, CKPT_W_OK, "stored");
}

static void on_inbound(struct ckpt *c, struct inbound *in)
{
    struct ckpt_repl *r = c->repl;
    uint8_t buf[64 * 1024];
    for (int k = 0; k < 16 && in->st != IN_FREE; k++) { /* bounded work per pass */
        size_t want = sizeof(buf);
        if (in->st == IN_HELLO)
            want = sizeof(in->buf) - in->have;
        else if (in->st == IN_HDR)
            want = CKPT_SHARD_HDR_LEN - in->have;
        else if (in->sh.len - in->got < want)
            want = (size_t)(in->sh.len - in->got);
        uint8_t *to = in->st == IN_BODY ? buf : in->buf + in->have;
        ssize_t n = recv(in->fd, to, want, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) {
            in_close(c, in);
            return;
        }
        struct ea_error e = {0};
        if (in->st == IN_BODY) {
            if (in->id != 0 && pwrite(in->mfd, buf, (size_t)n, (off_t)in->got) != n) {
                in_close(c, in);
                return;
            }
            in->got += (uint64_t)n;
            in->deadline = r->now + r->cfg.hello_ms;
            if (in->got == in->sh.len) {
                if (in_finish(c, in) < 0) {
                    in_close(c, in);
                    return;
                }
                in->st = IN_HDR;
                in->have = 0;
                in->deadline = 0;
            }
            continue;
        }
        in->have += (size_t)n;
        if (in->st == IN_HELLO && in->have >= 4 && !memcmp(in->buf, CKPT_FETCH_MAGIC, 4)) {
            if (ckpt_fetch_adopt(c, in->fd, in->buf, in->have) == 0)
                in->fd = -1; /* ckpt_fetch.c's connection now (docs/checkpoint.md "Fetch") */
            in_close(c, in);
            return;
        }
        if (in->st == IN_HELLO) {
            size_t used = 0;
            int d = ckpt_hello_decode(in->buf, in->have, &in->hello, &used, &e);
            if (d == 0)
                continue;
            struct ckpt_view v = {.run = c->run, .round = r->round, .me = r->node, .prev = r->prev};
            enum ckpt_wire_status st = d < 0 ? CKPT_W_BAD : ckpt_admit(&in->hello, &v, &e);
            if (st != CKPT_W_OK || used != in->have) {
                if (st == CKPT_W_OK)
                    ea_errorf(&e, -EBADMSG, "bytes after the hello before its answer");
                ckpt_note_add(c, CKPT_NOTE_REFUSED, -1, -1, 0, 0, "replication port: a "
                              "connection refused: %s", e.msg);
                r->stats.refused++;
                in_answer(in, st == CKPT_W_OK ? CKPT_W_BAD : st, e.msg);
                in_close(c, in);
                return;
            }
            if (in_answer(in, CKPT_W_OK, "ok") < 0) {
                in_close(c, in);
                return;
            }
            in->st = IN_HDR;
            in->have = 0;
            in->deadline = 0; /* admitted: the predecessor sends when it has something */
            continue;
        }
        /* IN_HDR */
        int d = ckpt_shard_decode(in->buf, in->have, c->store.limit, &in->sh, &e);
        if (d == 0)
            continue;
        if (d < 0) {
            ckpt_note_add(c, CKPT_NOTE_BAD, -1, -1, 0, 0, "replication port: node '%s': %s",
                          in->hello.from, e.msg);
            in_answer(in, CKPT_W_BAD, e.msg);
            in_close(c, in);
            return;
        }
        in_begin(c, in);
        in->st = IN_BODY;
    }
}

/* ---- outbound ----------------------------------------------------------------------------- */

static bool was_sent(const struct ckpt_repl *r, uint64_t id)
{
    for (size_t i = 0; i < r->nsent; i++)
        if (r->sent[i] == id)
            return true;
    return false;
}

static void mark_sent(struct ckpt_repl *r, uint64_t id)
{
    if (r->nsent == r->capsent) {
        size_t cap = r->capsent ? r->capsent * 2 : 16;
        uint64_t *p = realloc(r->sent, cap * sizeof(*p));
        if (!p)
            return; /* sent again later: harmless */
        r->sent = p;
        r->capsent = cap;
    }
    r->sent[r->nsent++] = id;
}

/* The next own shard to send: of the newest step this node saved shards of, not sent yet. */
static struct ckpt_entry *next_shard(struct ckpt *c)
{
    struct ckpt_store *s = &c->store;
    int64_t newest = -1;
    for (size_t i = 0; i < s->n; i++)
        if (s->e[i].committed && !s->e[i].replica && s->e[i].step > newest)
            newest = s->e[i].step;
    struct ckpt_entry *best = NULL;
    for (size_t i = 0; i < s->n; i++) {
        struct ckpt_entry *e = &s->e[i];
        if (e->committed && !e->replica && e->step == newest && e->fd >= 0 &&
            !was_sent(c->repl, e->id) && (!best || e->shard < best->shard))
            best = e;
    }
    return best;
}

static int out_connect(struct ckpt *c)
{
    struct ckpt_repl *r = c->repl;
    int fd = ckpt_connect(r->next_addr, r->next_port);
    if (fd < 0)
        return fd;
    r->ofd = fd;
    r->ofd_out = true; /* the connect's end is a write readiness */
    struct ckpt_hello h = {.round = r->round};
    snprintf(h.run, sizeof(h.run), "%s", c->run);
    snprintf(h.from, sizeof(h.from), "%s", r->node);
    snprintf(h.to, sizeof(h.to), "%s", r->next);
    int n = ckpt_hello_encode(&h, r->obuf, sizeof(r->obuf));
    if (n < 0)
        return n;
    r->olen = (size_t)n;
    r->ooff = 0;
    r->ahave = 0;
    r->ost = OUT_CONNECTING;
    return 0;
}

static void out_want_write(struct ckpt *c, bool w)
{
    c->repl->ofd_out = w;
}

/* Write obuf[ooff..olen): 1 when all of it is out, 0 when the socket is full, <0 error. */
static int out_flush(struct ckpt_repl *r)
{
    while (r->ooff < r->olen) {
        ssize_t n = send(r->ofd, r->obuf + r->ooff, r->olen - r->ooff, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        r->ooff += (size_t)n;
    }
    return 1;
}

/* Read an answer: 1 with *st and msg, 0 not yet, <0 the connection is gone or bad. */
static int out_answer(struct ckpt_repl *r, enum ckpt_wire_status *st, char msg[256])
{
    ssize_t n = recv(r->ofd, r->abuf + r->ahave, sizeof(r->abuf) - r->ahave, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        n = 0;
    else if (n <= 0)
        return -EPIPE;
    r->ahave += (size_t)n;
    size_t used = 0;
    int d = ckpt_answer_decode(r->abuf, r->ahave, st, msg, 256, &used);
    if (d > 0) {
        memmove(r->abuf, r->abuf + used, r->ahave - used);
        r->ahave -= used;
    }
    return d;
}

static void refill(struct ckpt_repl *r)
{
    if (r->cfg.bytes_per_sec == 0)
        return;
    double cap = (double)r->cfg.bytes_per_sec / 10 > REPL_CHUNK ? (double)r->cfg.bytes_per_sec / 10
                                                                : REPL_CHUNK;
    if (r->refill_at == 0)
        r->refill_at = r->now;
    r->tokens += (double)(r->now - r->refill_at) * (double)r->cfg.bytes_per_sec / 1000.0;
    r->refill_at = r->now;
    if (r->tokens > cap)
        r->tokens = cap;
}

static void out_progress(struct ckpt *c)
{
    struct ckpt_repl *r = c->repl;
    char msg[256];
    enum ckpt_wire_status st;
    for (int k = 0; k < 64; k++) {
        int d;
        switch (r->ost) {
        case OUT_IDLE:
            if (r->cfg.replicas < 1 || r->round < 0 || !r->next[0] || r->next_port <= 0 ||
                r->now < r->retry_at || !next_shard(c))
                return;
            if ((d = out_connect(c)) < 0) {
                out_close(c, REPL_RETRY_MS);
                return;
            }
            break;
        case OUT_CONNECTING:
            if ((d = out_flush(r)) < 0) {
                out_close(c, REPL_RETRY_MS);
                return;
            }
            if (d == 0)
                return;
            r->ost = OUT_HELLO;
            out_want_write(c, false);
            break;
        case OUT_HELLO:
            if ((d = out_answer(r, &st, msg)) < 0) {
                out_close(c, REPL_RETRY_MS);
                return;
            }
            if (d == 0)
                return;
            if (st != CKPT_W_OK) {
                ckpt_note_add(c, CKPT_NOTE_REPLICA_REFUSED, -1, -1, 0, 0, "node '%s' refused this "
                              "node's replicas: %s (%s)", r->next, ckpt_wire_status_name(st), msg);
                out_close(c, REPL_RETRY_MS * (st == CKPT_W_LATER ? 1 : 5));
                return;
            }
            r->ost = OUT_READY;
            break;
        case OUT_READY: {
            struct ckpt_entry *e = next_shard(c);
            if (!e)
                return;
            mark_sent(r, e->id);
            void *m = mmap(NULL, e->len, PROT_READ, MAP_SHARED, e->fd, 0);
            if (m == MAP_FAILED)
                break;
            if (!e->crc_known) {
                e->crc = ckpt_crc32(0, m, e->len);
                e->crc_known = true;
            }
            r->map = m;
            r->cur = (struct ckpt_shard_wire){.step = e->step, .shard = e->shard,
                                              .shards = e->shards, .len = e->len, .crc = e->crc};
            ckpt_shard_encode(&r->cur, r->obuf);
            r->olen = CKPT_SHARD_HDR_LEN;
            r->ooff = 0;
            r->boff = 0;
            r->ost = OUT_HDR;
            break;
        }
        case OUT_HDR:
            if ((d = out_flush(r)) < 0) {
                out_close(c, REPL_RETRY_MS);
                return;
            }
            if (d == 0) {
                out_want_write(c, true);
                return;
            }
            r->ost = OUT_BODY;
            break;
        case OUT_BODY: {
            uint64_t left = r->cur.len - r->boff, n = left < REPL_CHUNK ? left : REPL_CHUNK;
            refill(r);
            if (r->cfg.bytes_per_sec > 0 && (double)n > r->tokens)
                n = r->tokens >= 1 ? (uint64_t)r->tokens : 0;
            if (n == 0) {
                out_want_write(c, false); /* the clock (ckpt_repl_wake) brings more */
                return;
            }
            ssize_t w = send(r->ofd, r->map + r->boff, n, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
                out_want_write(c, true);
                return;
            }
            if (w <= 0) {
                out_close(c, REPL_RETRY_MS);
                return;
            }
            r->boff += (uint64_t)w;
            if (r->cfg.bytes_per_sec > 0)
                r->tokens -= (double)w;
            if (r->boff == r->cur.len) {
                out_unmap(r);
                out_want_write(c, false);
                r->ost = OUT_ANSWER;
            }
            break;
        }
        case OUT_ANSWER:
            if ((d = out_answer(r, &st, msg)) < 0) {
                out_close(c, REPL_RETRY_MS);
                return;
            }
            if (d == 0)
                return;
            if (st == CKPT_W_OK) {
                r->stats.sent_shards++;
                r->stats.sent_bytes += r->cur.len;
                ckpt_note_add(c, CKPT_NOTE_REPLICATED, r->cur.step, r->cur.shard, r->cur.shards,
                              r->cur.len, "shard %d of step %" PRId64 " replicated to node '%s' "
                              "(%s)", r->cur.shard, r->cur.step, r->next, msg);
            } else {
                ckpt_note_add(c, CKPT_NOTE_REPLICA_REFUSED, r->cur.step, r->cur.shard,
                              r->cur.shards, r->cur.len, "node '%s' refused shard %d of step %"
                              PRId64 ": %s (%s)", r->next, r->cur.shard, r->cur.step,
                              ckpt_wire_status_name(st), msg);
            }
            r->ost = OUT_READY;
            break;
        }
    }
}

size_t ckpt_repl_pollfds(const struct ckpt *c, struct pollfd *fds, size_t max)
{
    const struct ckpt_repl *r = c->repl;
    size_t n = 0;
    if (!r)
        return 0;
    if (n < max)
        fds[n++] = (struct pollfd){.fd = r->lfd, .events = POLLIN};
    for (int i = 0; i < REPL_CONNS && n < max; i++)
        if (r->in[i].st != IN_FREE)
            fds[n++] = (struct pollfd){.fd = r->in[i].fd, .events = POLLIN};
    if (r->ofd >= 0 && n < max)
        fds[n++] = (struct pollfd){.fd = r->ofd, .events = POLLIN | (r->ofd_out ? POLLOUT : 0)};
    return n;
}

uint64_t ckpt_repl_tag_of(const struct ckpt *c, int fd)
{
    const struct ckpt_repl *r = c->repl;
    if (!r || fd < 0)
        return 0;
    if (fd == r->lfd)
        return CKPT_TAG_REPL;
    for (int i = 0; i < REPL_CONNS; i++)
        if (r->in[i].st != IN_FREE && r->in[i].fd == fd)
            return CKPT_TAG_REPL + 1 + (uint64_t)i;
    return fd == r->ofd ? CKPT_TAG_REPL + 1 + REPL_CONNS : 0;
}

void ckpt_repl_on_event(struct ckpt *c, uint64_t tag, uint32_t events)
{
    (void)events;
    struct ckpt_repl *r = c->repl;
    if (!r)
        return;
    uint64_t i = tag - CKPT_TAG_REPL;
    if (i == 0)
        on_listen(c);
    else if (i <= REPL_CONNS && r->in[i - 1].st != IN_FREE)
        on_inbound(c, &r->in[i - 1]);
    else if (i == REPL_CONNS + 1 && r->ofd >= 0)
        out_progress(c);
}

void ckpt_repl_step(struct ckpt *c, int64_t now)
{
    struct ckpt_repl *r = c ? c->repl : NULL;
    if (!r)
        return;
    r->now = now;
    for (int i = 0; i < REPL_CONNS; i++)
        if (r->in[i].st != IN_FREE && r->in[i].deadline < 0)
            r->in[i].deadline = now + r->cfg.hello_ms;
        else if (r->in[i].st != IN_FREE && r->in[i].deadline > 0 && now > r->in[i].deadline) {
            ckpt_note_add(c, CKPT_NOTE_REFUSED, -1, -1, 0, 0, "replication port: a connection "
                          "closed: nothing from it for %" PRId64 " ms", r->cfg.hello_ms);
            in_close(c, &r->in[i]);
        }
    out_progress(c);
    ckpt_fetch_step(c, now);
}

int64_t ckpt_repl_wake(const struct ckpt *c)
{
    const struct ckpt_repl *r = c ? c->repl : NULL;
    if (!r)
        return -1;
    int64_t w = -1;
    for (int i = 0; i < REPL_CONNS; i++)
        if (r->in[i].st != IN_FREE && r->in[i].deadline > 0 && (w < 0 || r->in[i].deadline < w))
            w = r->in[i].deadline + 1;
    int64_t o = -1;
    if (r->ost == OUT_IDLE && r->retry_at > r->now && r->next_port > 0)
        o = r->retry_at;
    else if (r->ost == OUT_BODY && r->cfg.bytes_per_sec > 0)
        o = r->now + 1 + (int64_t)(REPL_CHUNK * 1000 / r->cfg.bytes_per_sec);
    if (o >= 0 && (w < 0 || o < w))
        w = o;
    int64_t f = ckpt_fetch_wake(c);
    return f >= 0 && (w < 0 || f < w) ? f : w;
}
