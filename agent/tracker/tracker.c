// SPDX-License-Identifier: Apache-2.0
/*
 * tracker: one round's rabit tracker on non-blocking sockets.
 *
 * A connection goes MAGIC -> HELLO, then by its command: `print` -> PRINT -> closed; `shutdown`
 * -> closed; `start`/`recover` -> QUEUED -> (its turn) GOOD <-> NERR -> PORT -> closed. The link
 * brokering (GOOD..PORT) runs for one connection at a time, in arrival order, as the Python
 * tracker does: a worker is told to connect to the neighbours that already listen (sent their
 * port) and to accept the others, so two workers must never decide at once. Its deadline bounds
 * how long a silent peer can hold the others up. Who may connect at all, and how many at once, is
 * tracker_admit.c's; one `start` per rank (a linked rank comes back only with `recover`, from
 * the address it linked from) is checked here at the hello.
 */
#include "tracker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ea_time.h"
#include "log.h"
#include "topology.h"
#include "tracker_admit.h"
#include "tracker_proto.h"

#define OUT_MAX 1024 /* the largest reply: 4 peers' host, port and rank */
#define HOST_MAX INET6_ADDRSTRLEN

enum conn_state { CS_MAGIC, CS_HELLO, CS_PRINT, CS_QUEUED, CS_GOOD, CS_NERR, CS_PORT, CS_DEAD };

struct conn {
    int fd;
    int bucket; /* its source address's (tracker_admit) */
    enum conn_state st;
    char host[HOST_MAX];     /* the peer's address, what its neighbours connect to */
    char peer[HOST_MAX + 8]; /* host:port, for messages */
    struct tracker_hello hello;
    int rank;
    uint64_t seq; /* arrival order of QUEUED connections */
    int nn[TRACKER_NEIGHBORS_MAX], n_nn;
    int con[TRACKER_NEIGHBORS_MAX], n_con, n_accept; /* the last reply to its good links */
    int64_t deadline_ms;                             /* -1 while it waits for its turn */
    uint8_t *in;
    size_t in_len, in_cap;
    uint8_t out[OUT_MAX];
    size_t out_len, out_off;
};

struct rank_entry {
    char host[HOST_MAX];
    int bucket;      /* the source address it linked from */
    int port;        /* its link listener, once it sent it */
    int wait_accept; /* links it still expects to accept; > 0: it is in the "wait" set */
    bool linked, shut;
};

struct tracker {
    int lfd, port, world, io_timeout_ms, hello_timeout_ms;
    struct tracker_admit admit;
    char addr[HOST_MAX]; /* what workers connect to */
    int64_t round;
    struct rdzv_link *links;
    struct rank_entry *ranks;
    struct conn *conns[TRACKER_CONN_MAX];
    size_t n_conns;
    struct conn *active; /* brokering its links */
    uint64_t next_seq;
    int n_waiting; /* ranks with wait_accept > 0 */
    struct tracker_stats stats;
    char last_warning[512];
    char last_refusal[256]; /* refusals at accept are logged once per host and reason */
};

static void warn_conn(struct tracker *t, struct conn *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Close c with one warning naming the peer. */
static void warn_conn(struct tracker *t, struct conn *c, const char *fmt, ...)
{
    char what[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(t->last_warning, sizeof(t->last_warning),
             "rabit tracker (round %lld): closing the connection from %s: %s", (long long)t->round,
             c->peer, what);
    log_warn("%s", t->last_warning);
    t->stats.refused++;
    c->st = CS_DEAD;
}

static void conn_free(struct tracker *t, struct conn *c)
{
    if (!c)
        return;
    tracker_admit_release(&t->admit, c->bucket);
    if (c->fd >= 0)
        close(c->fd);
    free(c->in);
    free(c);
}

/* Queue bytes for the peer and send what the socket takes now. */
static void flush_out(struct tracker *t, struct conn *c)
{
    while (c->st != CS_DEAD && c->out_off < c->out_len) {
        ssize_t n =
            send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            warn_conn(t, c, "send failed: %s", n < 0 ? strerror(errno) : "closed");
            return;
        }
        c->out_off += (size_t)n;
    }
    if (c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
}

static bool out_room(const struct conn *c, size_t n)
{
    return OUT_MAX - c->out_len >= n;
}

static void send_int(struct tracker *t, struct conn *c, int32_t v)
{
    tracker_put_int(c->out, OUT_MAX, &c->out_len, v); /* replies fit OUT_MAX: see OUT_MAX */
}

/* ---- brokering ------------------------------------------------------------------------- */

/* The next queued connection (arrival order) gets its rank and links. */
static void activate_next(struct tracker *t, int64_t now)
{
    while (!t->active) {
        struct conn *next = NULL;
        for (size_t i = 0; i < t->n_conns; i++) {
            struct conn *c = t->conns[i];
            if (c->st == CS_QUEUED && (!next || c->seq < next->seq))
                next = c;
        }
        if (!next)
            return;
        struct rank_entry *e = &t->ranks[next->rank];
        if (e->wait_accept > 0) { /* it starts over (recover): its old listener is gone */
            e->wait_accept = 0;
            t->n_waiting--;
        }
        int prev, nxt;
        next->n_nn = tracker_neighbors(t->links, next->rank, next->nn, &prev, &nxt);
        tracker_put_assignment(next->out, OUT_MAX, &next->out_len, t->links, t->world, next->rank);
        next->st = CS_GOOD;
        next->deadline_ms = now + t->io_timeout_ms;
        t->active = next;
        flush_out(t, next);
        if (next->st == CS_DEAD)
            t->active = NULL;
    }
}

static bool is_neighbor(const struct conn *c, int r)
{
    for (int i = 0; i < c->n_nn; i++)
        if (c->nn[i] == r)
            return true;
    return false;
}

/* GOOD: the links the worker has; reply with whom to connect to and how many to accept. */
static int on_good(struct tracker *t, struct conn *c, size_t *off)
{
    size_t o = *off;
    int32_t ngood;
    if (tracker_get_int(c->in, c->in_len, &o, &ngood) == 0)
        return 0;
    if (ngood < 0 || ngood > c->n_nn) {
        warn_conn(t, c, "rank %d reports %d good links of %d", c->rank, ngood, c->n_nn);
        return -1;
    }
    if (c->in_len - o < (size_t)ngood * sizeof(int32_t))
        return 0;
    bool good[TRACKER_NEIGHBORS_MAX] = {false};
    for (int i = 0; i < ngood; i++) {
        int32_t r;
        tracker_get_int(c->in, c->in_len, &o, &r);
        if (!is_neighbor(c, r)) {
            warn_conn(t, c, "rank %d reports a link to %d, not one of its neighbours", c->rank, r);
            return -1;
        }
        for (int k = 0; k < c->n_nn; k++)
            good[k] |= c->nn[k] == r;
    }
    c->n_con = c->n_accept = 0;
    for (int k = 0; k < c->n_nn; k++) {
        if (good[k])
            continue;
        if (t->ranks[c->nn[k]].wait_accept > 0)
            c->con[c->n_con++] = c->nn[k];
        else
            c->n_accept++;
    }
    send_int(t, c, c->n_con);
    send_int(t, c, c->n_accept);
    for (int i = 0; i < c->n_con; i++) {
        const struct rank_entry *e = &t->ranks[c->con[i]];
        if (!out_room(c, 3 * sizeof(int32_t) + strlen(e->host))) {
            warn_conn(t, c, "reply too large"); /* not reached: OUT_MAX covers 4 peers */
            return -1;
        }
        tracker_put_str(c->out, OUT_MAX, &c->out_len, e->host);
        send_int(t, c, e->port);
        send_int(t, c, c->con[i]);
    }
    c->st = CS_NERR;
    *off = o;
    return 1;
}

static void check_all_linked(struct tracker *t, int64_t now)
{
    if (t->stats.all_linked || t->stats.linked < t->world || t->n_waiting > 0)
        return;
    t->stats.all_linked = true;
    t->stats.all_linked_ms = now;
    log_info("rabit tracker (round %lld): all %d worker(s) have their ranks and links",
             (long long)t->round, t->world);
}

/* PORT: the worker connected to every peer it was given; it now accepts the rest on `port`. */
static void on_port(struct tracker *t, struct conn *c, int32_t port, int64_t now)
{
    for (int i = 0; i < c->n_con; i++) {
        struct rank_entry *p = &t->ranks[c->con[i]];
        if (p->wait_accept > 0 && --p->wait_accept == 0)
            t->n_waiting--;
    }
    struct rank_entry *e = &t->ranks[c->rank];
    snprintf(e->host, sizeof(e->host), "%s", c->host);
    e->bucket = c->bucket;
    e->port = port;
    e->wait_accept = c->n_accept;
    if (e->wait_accept > 0)
        t->n_waiting++;
    if (!e->linked) {
        e->linked = true;
        t->stats.linked++;
    }
    log_debug("rabit tracker (round %lld): rank %d at %s linked (%d connect, %d accept)",
              (long long)t->round, c->rank, c->peer, c->n_con, c->n_accept);
    c->st = CS_DEAD; /* done: the worker closes its side too */
    check_all_linked(t, now);
}

/* ---- one connection's messages ------------------------------------------------------------ */

/* Another connection that has rank r's hello accepted and is being linked (queued or active). */
static bool rank_in_flight(const struct tracker *t, const struct conn *self, int r)
{
    for (size_t i = 0; i < t->n_conns; i++) {
        const struct conn *c = t->conns[i];
        if (c != self && c->rank == r && c->st >= CS_QUEUED && c->st <= CS_PORT)
            return true;
    }
    return false;
}

/* One `start` per rank: a rank that is linked (and did not shut down) or being linked comes
 * back only with `recover`, and only from the address it linked from. NULL: admitted. */
static const char *rank_refusal(const struct tracker *t, const struct conn *c, int r)
{
    const struct rank_entry *e = &t->ranks[r];
    if (rank_in_flight(t, c, r))
        return "is being linked by another connection";
    if (c->hello.cmd == TRACKER_START && e->linked && !e->shut)
        return "is linked already (a worker comes back with recover)";
    if (c->hello.cmd == TRACKER_RECOVER && e->linked && e->bucket != c->bucket)
        return "linked from another host";
    return NULL;
}

static void on_hello(struct tracker *t, struct conn *c, int64_t now)
{
    const struct tracker_hello *h = &c->hello;
    if (h->world_size != -1 && h->world_size != t->world) {
        warn_conn(t, c, "%s from a world of %d, this round's is %d (a worker of another round?)",
                  h->cmd_name, h->world_size, t->world);
        return;
    }
    if (h->cmd == TRACKER_PRINT) {
        c->st = CS_PRINT;
        c->deadline_ms = now + t->io_timeout_ms;
        return;
    }
    int r = tracker_hello_rank(h, t->world);
    if (r < 0) {
        warn_conn(t, c, "%s with rank %d and task id '%s': not a rank of this round's world of %d",
                  h->cmd_name, h->rank, h->task_id, t->world);
        return;
    }
    if (h->cmd == TRACKER_SHUTDOWN) {
        if (!t->ranks[r].shut) {
            t->ranks[r].shut = true;
            if (++t->stats.shutdown == t->world)
                log_info("rabit tracker (round %lld): all %d worker(s) shut down",
                         (long long)t->round, t->world);
        }
        c->st = CS_DEAD;
        return;
    }
    const char *dup = rank_refusal(t, c, r);
    if (dup) {
        warn_conn(t, c, "%s for rank %d refused: rank %d %s", h->cmd_name, r, r, dup);
        return;
    }
    c->rank = r;
    c->seq = t->next_seq++;
    c->st = CS_QUEUED;
    c->deadline_ms = -1;
}

static void on_print(struct tracker *t, struct conn *c, const char *msg)
{
    t->stats.printed++;
    int who = c->hello.rank >= 0 ? c->hello.rank : tracker_hello_rank(&c->hello, t->world);
    who = who >= 0 ? who : -1;
    for (const char *p = msg; *p;) {
        size_t n = strcspn(p, "\n");
        if (n > 0)
            log_info("[%d]: %.*s", who, (int)n, p);
        p += n + (p[n] == '\n');
    }
    c->st = CS_DEAD;
}

/* Consume every complete message in c->in. */
static void parse(struct tracker *t, struct conn *c, int64_t now)
{
    size_t off = 0;
    for (int progress = 1; progress > 0 && c->st != CS_DEAD;) {
        int32_t v;
        progress = 0;
        switch (c->st) {
        case CS_MAGIC:
            if ((progress = tracker_get_int(c->in, c->in_len, &off, &v)) == 0)
                break;
            if (v != TRACKER_MAGIC) {
                warn_conn(t, c, "wrong magic number 0x%x (not a rabit worker?)", (unsigned)v);
                break;
            }
            send_int(t, c, TRACKER_MAGIC);
            c->st = CS_HELLO;
            break;
        case CS_HELLO:
            progress = tracker_parse_hello(c->in, c->in_len, &off, &c->hello);
            if (progress == -EMSGSIZE)
                warn_conn(t, c, "oversized task id or command (more than %d bytes)",
                          TRACKER_STR_MAX);
            else if (progress == -EPROTO)
                warn_conn(t, c, "unknown command '%.64s'", c->hello.cmd_name);
            else if (progress > 0)
                on_hello(t, c, now);
            break;
        case CS_PRINT: {
            char *msg = malloc(TRACKER_PRINT_MAX + 1);
            if (!msg) {
                warn_conn(t, c, "out of memory");
                break;
            }
            progress = tracker_get_str(c->in, c->in_len, &off, TRACKER_PRINT_MAX, msg);
            if (progress == -EMSGSIZE)
                warn_conn(t, c, "oversized print message (more than %d bytes)", TRACKER_PRINT_MAX);
            else if (progress > 0)
                on_print(t, c, msg);
            free(msg);
            break;
        }
        case CS_QUEUED:
            if (c->in_len > off)
                warn_conn(t, c, "unexpected bytes before its rank was assigned");
            break;
        case CS_GOOD:
            progress = on_good(t, c, &off);
            break;
        case CS_NERR:
            if ((progress = tracker_get_int(c->in, c->in_len, &off, &v)) > 0)
                c->st = v == 0 ? CS_PORT : CS_GOOD; /* failed connects: it asks again */
            break;
        case CS_PORT:
            if ((progress = tracker_get_int(c->in, c->in_len, &off, &v)) == 0)
                break;
            if (v <= 0 || v > 65535)
                warn_conn(t, c, "rank %d sent listening port %d", c->rank, v);
            else
                on_port(t, c, v, now);
            break;
        case CS_DEAD:
            break;
        }
    }
    if (off > 0) {
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
    }
    flush_out(t, c);
}

/* The most a connection may have buffered in its state: one message, plus what may follow. */
static size_t in_limit(const struct conn *c)
{
    return c->st == CS_PRINT ? TRACKER_PRINT_MAX + 64 : 2 * TRACKER_STR_MAX + 64;
}

static void on_readable(struct tracker *t, struct conn *c, int64_t now)
{
    for (;;) {
        size_t limit = in_limit(c);
        if (c->in_len == c->in_cap) {
            size_t cap = c->in_cap ? c->in_cap * 2 : 512;
            cap = cap < limit ? cap : limit;
            if (cap <= c->in_cap) {
                warn_conn(t, c, "more than %zu bytes unanswered", limit);
                return;
            }
            uint8_t *in = realloc(c->in, cap);
            if (!in) {
                warn_conn(t, c, "out of memory");
                return;
            }
            c->in = in;
            c->in_cap = cap;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n < 0) {
            warn_conn(t, c, "receive failed: %s", strerror(errno));
            return;
        }
        if (n == 0) {
            if (c->st == CS_QUEUED)
                warn_conn(t, c, "rank %d left while waiting for its turn", c->rank);
            else if (c->in_len > 0 || c->st != CS_MAGIC)
                warn_conn(t, c, "closed in the middle of a message (%zu byte(s) of it received)",
                          c->in_len);
            else
                c->st = CS_DEAD; /* connected and left: a port probe */
            return;
        }
        c->in_len += (size_t)n;
        /* ACK at once: rabit clients send a message as several small writes without
         * TCP_NODELAY, and each would otherwise wait for our delayed ACK (~40 ms) */
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
        parse(t, c, now);
        if (c->st == CS_DEAD)
            return;
    }
}

/* ---- the listener ------------------------------------------------------------------------- */

/* The peer's address as text (host) and host:port (peer). */
static void peer_name(const struct sockaddr_storage *ss, char *host, char *peer, size_t peer_size)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *sa = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &sa->sin_addr, host, HOST_MAX);
        snprintf(peer, peer_size, "%s:%d", host, ntohs(sa->sin_port));
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *sa = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &sa->sin6_addr, host, HOST_MAX);
        snprintf(peer, peer_size, "[%s]:%d", host, ntohs(sa->sin6_port));
    } else {
        snprintf(host, HOST_MAX, "?");
        snprintf(peer, peer_size, "?");
    }
}

/* Close a connection refused at accept. A host that keeps connecting is logged once per
 * reason (the counters and tracker_last_warning() see every one). */
static void refuse_at_accept(struct tracker *t, int fd, const char *host, const char *peer,
                             const char *why)
{
    close(fd);
    t->stats.refused++;
    snprintf(t->last_warning, sizeof(t->last_warning),
             "rabit tracker (round %lld): refusing the connection from %s: %s",
             (long long)t->round, peer, why);
    char once[sizeof(t->last_refusal)];
    snprintf(once, sizeof(once), "%s %s", host, why);
    if (strcmp(once, t->last_refusal) != 0) {
        snprintf(t->last_refusal, sizeof(t->last_refusal), "%s", once);
        log_warn("%s", t->last_warning);
    }
}

static void accept_all(struct tracker *t, int64_t now)
{
    while (t->n_conns < TRACKER_CONN_MAX) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = accept4(t->lfd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                log_warn("rabit tracker (round %lld): accept: %s", (long long)t->round,
                         strerror(errno));
            return;
        }
        char host[HOST_MAX], peer[HOST_MAX + 8];
        peer_name(&ss, host, peer, sizeof(peer));
        /* only the round's member hosts, and a few connections per worker behind each */
        int bucket = tracker_admit_bucket(&t->admit, &ss);
        if (bucket < 0) {
            t->stats.not_member++;
            refuse_at_accept(t, fd, host, peer, "not a member host of this round");
            continue;
        }
        if (!tracker_admit_take(&t->admit, bucket)) {
            char why[96];
            snprintf(why, sizeof(why), "that host has %d connection(s) open (%d per worker)",
                     t->admit.b[bucket].open, TRACKER_CONNS_PER_WORKER);
            t->stats.over_cap++;
            refuse_at_accept(t, fd, host, peer, why);
            continue;
        }
        struct conn *c = calloc(1, sizeof(*c));
        if (!c) {
            tracker_admit_release(&t->admit, bucket);
            close(fd);
            return;
        }
        c->fd = fd;
        c->bucket = bucket;
        c->st = CS_MAGIC;
        c->rank = -1;
        c->deadline_ms = now + t->hello_timeout_ms; /* a short one until the hello */
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        memcpy(c->host, host, sizeof(c->host));
        memcpy(c->peer, peer, sizeof(c->peer));
        t->conns[t->n_conns++] = c;
        t->stats.accepted++;
    }
}

/* This machine's source address on the route to `to` (a UDP connect sends nothing); left as it
 * is when there is no route. */
static void route_source(struct in_addr to, char *out, size_t size)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(9), .sin_addr = to};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        inet_ntop(AF_INET, &sa.sin_addr, out, (socklen_t)size);
    if (fd >= 0)
        close(fd);
}

void tracker_local_addr(const char *addr, char *out, size_t size)
{
    snprintf(out, size, "%s", addr);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
        return;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno == EADDRNOTAVAIL)
        route_source(sa.sin_addr, out, size);
    close(fd);
}

int tracker_create(const struct tracker_params *p, struct tracker **ret, struct ea_error *err)
{
    if (p->world_size < 1)
        return ea_errorf(err, -EINVAL, "rabit tracker: world size %d", p->world_size);
    struct sockaddr_storage ss = {0};
    socklen_t slen;
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    if (p->addr && inet_pton(AF_INET6, p->addr, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        slen = sizeof(*s6);
    } else {
        s4->sin_family = AF_INET;
        if (!p->addr || inet_pton(AF_INET, p->addr, &s4->sin_addr) != 1)
            s4->sin_addr.s_addr = htonl(INADDR_ANY);
        slen = sizeof(*s4);
    }
    struct tracker *t = calloc(1, sizeof(*t));
    if (!t)
        return ea_errorf(err, -ENOMEM, "out of memory");
    t->lfd = -1;
    snprintf(t->addr, sizeof(t->addr), "%s", p->addr ? p->addr : "");
    t->world = p->world_size;
    t->round = p->round;
    t->io_timeout_ms = p->io_timeout_ms > 0 ? p->io_timeout_ms : TRACKER_IO_TIMEOUT_MS;
    t->hello_timeout_ms = p->hello_timeout_ms > 0 ? p->hello_timeout_ms : TRACKER_HELLO_TIMEOUT_MS;
    if (t->hello_timeout_ms > t->io_timeout_ms)
        t->hello_timeout_ms = t->io_timeout_ms;
    t->links = calloc((size_t)t->world, sizeof(*t->links));
    t->ranks = calloc((size_t)t->world, sizeof(*t->ranks));
    int r = -ENOMEM;
    if (tracker_admit_init(&t->admit, p, err) < 0)
        goto error;
    if (!t->links || !t->ranks || (r = rdzv_topo_build(t->world, t->links)) < 0) {
        ea_errorf(err, r, "rabit tracker: link map for %d ranks: %s", t->world, strerror(-r));
        goto error;
    }
    /* a fresh port every round: while the previous round's port comes back, hold it and ask
     * again, so a worker of that round can never reach this tracker */
    int held = -1;
    for (int attempt = 0; attempt < 4; attempt++) {
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            r = ea_errorf(err, -errno, "rabit tracker: socket: %s", strerror(errno));
            break;
        }
        int b = bind(fd, (struct sockaddr *)&ss, slen);
        if (b < 0 && errno == EADDRNOTAVAIL && ss.ss_family == AF_INET) {
            /* not an address of ours: the workers run on that host (--host, over ssh); listen
             * everywhere and give them our address on the route to them */
            route_source(s4->sin_addr, t->addr, sizeof(t->addr));
            s4->sin_addr.s_addr = htonl(INADDR_ANY);
            b = bind(fd, (struct sockaddr *)&ss, slen);
        }
        struct sockaddr_storage bound;
        socklen_t blen = sizeof(bound);
        if (b < 0 || listen(fd, 1024) < 0 ||
            getsockname(fd, (struct sockaddr *)&bound, &blen) < 0) {
            r = ea_errorf(err, -errno, "rabit tracker: listen on '%s': %s", p->addr ? p->addr : "*",
                          strerror(errno));
            close(fd);
            break;
        }
        int port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                     : ((struct sockaddr_in *)&bound)->sin_port);
        if (port == p->avoid_port && attempt < 3) {
            if (held >= 0)
                close(held);
            held = fd;
            continue;
        }
        t->lfd = fd;
        t->port = port;
        break;
    }
    if (held >= 0)
        close(held);
    if (t->lfd < 0)
        goto error;
    *ret = t;
    return 0;
error:
    tracker_destroy(t);
    return r;
}

void tracker_destroy(struct tracker *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_conns; i++)
        conn_free(t, t->conns[i]);
    if (t->lfd >= 0)
        close(t->lfd);
    tracker_admit_free(&t->admit);
    free(t->links);
    free(t->ranks);
    free(t);
}

int tracker_port(const struct tracker *t)
{
    return t->port;
}

const char *tracker_addr(const struct tracker *t)
{
    return t->addr;
}

int64_t tracker_round(const struct tracker *t)
{
    return t->round;
}

const struct tracker_stats *tracker_stats(const struct tracker *t)
{
    return &t->stats;
}

const char *tracker_last_warning(const struct tracker *t)
{
    return t->last_warning;
}

size_t tracker_pollfds(const struct tracker *t, struct pollfd *fds, size_t max)
{
    size_t n = 0;
    if (max == 0)
        return 0;
    /* full: leave new connections in the backlog (a negative fd is skipped by poll) */
    fds[n++] = (struct pollfd){.fd = t->n_conns < TRACKER_CONN_MAX ? t->lfd : -1, .events = POLLIN};
    for (size_t i = 0; i < t->n_conns && n < max; i++) {
        const struct conn *c = t->conns[i];
        fds[n++] = (struct pollfd){.fd = c->fd,
                                   .events = POLLIN | (c->out_len > c->out_off ? POLLOUT : 0)};
    }
    return n;
}

static void sweep(struct tracker *t);

void tracker_on_poll(struct tracker *t, const struct pollfd *fds, size_t nfds, int64_t now_ms)
{
    /* fds[1 + i] is conns[i]: nothing changes the list between tracker_pollfds() and here */
    for (size_t i = 0; i + 1 < nfds && i < t->n_conns; i++) {
        struct conn *c = t->conns[i];
        short ev = fds[1 + i].revents;
        if (c->st != CS_DEAD && (ev & POLLOUT))
            flush_out(t, c);
        if (c->st != CS_DEAD && (ev & (POLLIN | POLLHUP | POLLERR)))
            on_readable(t, c, now_ms);
    }
    for (size_t i = 0; i < t->n_conns; i++) {
        struct conn *c = t->conns[i];
        if (c->st != CS_DEAD && c->deadline_ms >= 0 && now_ms >= c->deadline_ms)
            warn_conn(t, c, "no complete message within %d ms%s",
                      c->st == CS_MAGIC || c->st == CS_HELLO ? t->hello_timeout_ms
                                                             : t->io_timeout_ms,
                      c->st == CS_MAGIC || c->st == CS_HELLO ? "" : " (truncated?)");
    }
    sweep(t);
    if (nfds > 0 && (fds[0].revents & POLLIN))
        accept_all(t, now_ms);
    activate_next(t, now_ms);
    sweep(t); /* a connection activated above may have died on its first send */
}

/* Free the closed connections, keeping the order of the rest. */
static void sweep(struct tracker *t)
{
    size_t k = 0;
    for (size_t i = 0; i < t->n_conns; i++) {
        struct conn *c = t->conns[i];
        if (c->st == CS_DEAD) {
            if (c == t->active)
                t->active = NULL;
            conn_free(t, c);
        } else {
            t->conns[k++] = c;
        }
    }
    t->n_conns = k;
}

int64_t tracker_wake_ms(const struct tracker *t)
{
    int64_t w = -1;
    for (size_t i = 0; i < t->n_conns; i++) {
        int64_t d = t->conns[i]->deadline_ms;
        if (d >= 0 && (w < 0 || d < w))
            w = d;
    }
    return w;
}
