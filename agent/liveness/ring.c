// SPDX-License-Identifier: Apache-2.0
/* ring: the liveness ring's links, probes and listener, as non-blocking sockets. */
#include "ring.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* OUT_BYE: the successor closed the link on purpose (its round ended, or it left): no link
 * until the ring changes here too. */
enum out_state { OUT_NONE, OUT_CONNECTING, OUT_HELLO, OUT_UP, OUT_WAIT, OUT_BYE };

/* An accepted connection that has not said hello yet. */
struct pending {
    int fd; /* -1: free */
    int64_t deadline;
    size_t len;
    uint8_t buf[RING_HELLO_MAX];
};

/* A connection this node opened: the link to its successor, or a probe. */
struct dial {
    int fd; /* -1: none */
    bool connected;
    int64_t deadline; /* connect + answer */
    size_t len;
    uint8_t ans[RING_ANSWER_LEN];
};

struct probe {
    struct dial d;
    uint64_t id;
    int64_t round, timeout;
    char node[RING_NAME_MAX + 1];
};

struct ring {
    char run[RING_NAME_MAX + 1], self[RING_NAME_MAX + 1];
    uint64_t closed; /* sockets closed so far (ring_sockets_closed) */
    int64_t interval, silence; /* ms: beat period; misses x interval */
    int64_t await_cap;         /* ms: the most the fan-out adds to a first link's deadline */
    bool await_prev;
    int listen_fd, port;

    int64_t round;
    char prev[RING_NAME_MAX + 1];
    struct ring_peer next; /* next.node_id "": none */

    enum out_state out;
    struct dial od;
    int64_t out_retry, out_backoff, out_heard, out_sent;
    bool out_suspected; /* reported in this episode (until the link is up again) */

    int in_fd;
    int64_t in_heard, in_sent;
    bool in_suspected;
    bool in_ever;        /* a link from prev came up in this round */
    int64_t in_deadline; /* ... else it is suspected at this time (it never connected) */
    int64_t in_set;      /* when ring_set() set this round */

    struct pending pend[RING_PENDING_MAX];
    struct probe probes[RING_PROBES_MAX];
    struct ring_report reports[RING_REPORTS_MAX];
    size_t n_reports;

    uint64_t local_failures; /* connects that could not start here (ring_local_error()) */
    char local_cause[64];
};

static void report(struct ring *r, const struct ring_report *x)
{
    if (r->n_reports == RING_REPORTS_MAX) { /* nobody took them: the oldest is least useful */
        memmove(r->reports, r->reports + 1, (RING_REPORTS_MAX - 1) * sizeof(*r->reports));
        r->n_reports--;
    }
    r->reports[r->n_reports++] = *x;
}

/* Close one of r's sockets (counted: ring_sockets_closed). */
static void close_fd(struct ring *r, int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        r->closed++;
    }
    *fd = -1;
}

/* A bye on a link being closed on purpose (best effort: a full buffer means a dead peer). */
static void bye(struct ring *r, int *fd)
{
    if (*fd >= 0) {
        char b = RING_BYE;
        ssize_t w = send(*fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)w;
    }
    close_fd(r, fd);
}

int ring_create(const struct ring_params *p, struct ring **ret, struct ea_error *err)
{
    struct ring *r = calloc(1, sizeof(*r));
    if (!r)
        return ea_errorf(err, -ENOMEM, "out of memory");
    snprintf(r->run, sizeof(r->run), "%s", p->run_id);
    snprintf(r->self, sizeof(r->self), "%s", p->node_id);
    r->interval = p->interval_ms > 0 ? p->interval_ms : 200;
    r->silence = r->interval * (p->misses > 0 ? p->misses : 3);
    r->await_cap = p->await_cap_ms > 0 ? p->await_cap_ms : RING_AWAIT_CAP_DEFAULT_MS;
    r->od.fd = r->in_fd = -1;
    for (size_t i = 0; i < RING_PENDING_MAX; i++)
        r->pend[i].fd = -1;
    for (size_t i = 0; i < RING_PROBES_MAX; i++)
        r->probes[i].d.fd = -1;
    r->listen_fd = ring_listen(p->bind_addr, &r->port);
    if (r->listen_fd < 0) {
        int e = r->listen_fd;
        free(r);
        return ea_errorf(err, e, "liveness ring: cannot listen on '%s': %s",
                         p->bind_addr && p->bind_addr[0] ? p->bind_addr : "*", strerror(-e));
    }
    *ret = r;
    return 0;
}

void ring_destroy(struct ring *r)
{
    if (!r)
        return;
    bye(r, &r->od.fd);
    bye(r, &r->in_fd);
    for (size_t i = 0; i < RING_PENDING_MAX; i++)
        close_fd(r, &r->pend[i].fd);
    for (size_t i = 0; i < RING_PROBES_MAX; i++)
        close_fd(r, &r->probes[i].d.fd);
    close_fd(r, &r->listen_fd);
    free(r);
}

int ring_port(const struct ring *r)
{
    return r->port;
}

/* Start a non-blocking connect: 0 (in progress or connected: d->connected), or -errno. */
static int dial_start(struct dial *d, const struct ring_peer *p, int64_t deadline)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    socklen_t len;
    if (inet_pton(AF_INET, p->addr, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)p->port);
        len = sizeof(*a4);
    } else if (inet_pton(AF_INET6, p->addr, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)p->port);
        len = sizeof(*a6);
    } else {
        return -EAFNOSUPPORT; /* not a numeric address */
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    d->fd = fd;
    d->len = 0;
    d->deadline = deadline;
    d->connected = connect(fd, (struct sockaddr *)&ss, len) == 0;
    if (d->connected || errno == EINPROGRESS)
        return 0;
    int e = -errno;
    close(d->fd); /* never handed out: nobody has it registered */
    d->fd = -1;
    return e;
}

/* A connect that could not start here: counted, and its cause kept for the caller's log. */
static void local_failure(struct ring *r, int e)
{
    r->local_failures++;
    snprintf(r->local_cause, sizeof(r->local_cause), "%s", strerror(e));
}

static const char *errno_cause(int e)
{
    switch (e) {
    case ECONNREFUSED:
        return "connection refused";
    case ECONNRESET:
    case EPIPE:
        return "connection reset";
    case EHOSTUNREACH:
    case ENETUNREACH:
        return "unreachable";
    case ETIMEDOUT:
        return "timed out";
    default:
        return strerror(e);
    }
}

static int send_hello(struct ring *r, struct dial *d, enum ring_kind kind, const char *to,
                      int64_t round)
{
    struct ring_hello h = {.kind = kind, .round = round};
    snprintf(h.run, sizeof(h.run), "%s", r->run);
    snprintf(h.from, sizeof(h.from), "%s", r->self);
    snprintf(h.to, sizeof(h.to), "%s", to);
    uint8_t buf[RING_HELLO_MAX];
    int n = ring_hello_encode(&h, buf, sizeof(buf));
    if (n < 0)
        return n;
    /* a fresh socket's send buffer takes a few hundred bytes at once */
    ssize_t w = send(d->fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    return w == n ? 0 : w < 0 ? -errno : -EIO;
}

/*
 * Advance a dial on its fd's revents: 1 answered (*ret_status), 0 still going, or -errno (the
 * connection failed or closed before answering; -ETIMEDOUT past the deadline). The hello is
 * sent once connected.
 */
static int dial_step(struct ring *r, struct dial *d, short revents, enum ring_kind kind,
                     const char *to, int64_t round, int64_t now, enum ring_status *ret_status)
{
    if (!d->connected && (revents & (POLLOUT | POLLERR | POLLHUP))) {
        int e = 0;
        socklen_t el = sizeof(e);
        if (getsockopt(d->fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
            e = errno;
        if (e)
            return -e;
        d->connected = true;
        int s = send_hello(r, d, kind, to, round);
        if (s < 0)
            return s;
        revents = 0; /* the answer comes later */
    }
    if (d->connected && (revents & (POLLIN | POLLERR | POLLHUP))) {
        ssize_t n = recv(d->fd, d->ans + d->len, RING_ANSWER_LEN - d->len, MSG_DONTWAIT);
        if (n == 0)
            return -ECONNRESET; /* closed without answering */
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return -errno;
        if (n > 0)
            d->len += (size_t)n;
        int64_t rr = 0;
        int a = ring_answer_decode(d->ans, d->len, ret_status, &rr);
        if (a < 0)
            return -EPROTO;
        if (a > 0)
            return 1;
    }
    return now >= d->deadline ? -ETIMEDOUT : 0;
}

/* ---- the link to the successor ------------------------------------------------------------ */

static void out_suspect(struct ring *r, const char *cause, int64_t now)
{
    if (!r->out_suspected) {
        struct ring_report x = {.kind = RING_REPORT_SUSPECT,
                                .round = r->round,
                                .outbound = true,
                                .heard_ms = r->out_heard};
        snprintf(x.node_id, sizeof(x.node_id), "%s", r->next.node_id);
        snprintf(x.cause, sizeof(x.cause), "%s", cause);
        report(r, &x);
        r->out_suspected = true;
    }
    close_fd(r, &r->od.fd);
    r->out = OUT_WAIT; /* try again: a false alarm heals when the link comes back */
    r->out_retry = now + r->out_backoff;
    r->out_backoff = r->out_backoff * 2 > 10 * r->interval ? 10 * r->interval : r->out_backoff * 2;
}

/* Retry later without suspecting anyone (the peer answered: it is alive, its round
 * differs; or this node could not send it anything). */
static void out_later(struct ring *r, int64_t now, int64_t after)
{
    close_fd(r, &r->od.fd);
    r->out = OUT_WAIT;
    r->out_retry = now + after;
}

static void out_connect(struct ring *r, int64_t now)
{
    r->out = OUT_CONNECTING;
    int e = dial_start(&r->od, &r->next, now + r->silence);
    if (e == -EAFNOSUPPORT) { /* nothing to connect to: no ring with it */
        r->out = OUT_NONE;
        return;
    }
    if (e < 0 && ring_local_error(-e)) {
        /* no packet left this node: nothing is known of the successor; retry, backing off */
        local_failure(r, -e);
        out_later(r, now, r->out_backoff);
        r->out_backoff =
            r->out_backoff * 2 > 10 * r->interval ? 10 * r->interval : r->out_backoff * 2;
        return;
    }
    if (e < 0) {
        out_suspect(r, errno_cause(-e), now);
        return;
    }
    if (r->od.connected) {
        e = send_hello(r, &r->od, RING_KIND_LINK, r->next.node_id, r->round);
        if (e < 0)
            out_suspect(r, errno_cause(-e), now);
        else
            r->out = OUT_HELLO;
    }
}

static void out_answered(struct ring *r, enum ring_status st, int64_t now)
{
    switch (st) {
    case RING_OK:
        r->out = OUT_UP;
        r->out_heard = now;
        r->out_sent = 0; /* beat at once */
        r->out_suspected = false;
        r->out_backoff = r->interval;
        return;
    case RING_LATER: /* the successor has not seen this round yet */
        out_later(r, now, r->interval / 2);
        return;
    case RING_STALE:    /* this node is behind: its ring_set() comes soon */
    case RING_NOT_PEER: /* the views differ for a moment */
        out_later(r, now, r->interval);
        return;
    case RING_BAD_RUN:
    case RING_NOT_ME: { /* another program or agent has the port now: the node is gone */
        char c[64];
        snprintf(c, sizeof(c), "answered '%s'", ring_status_name(st));
        out_suspect(r, c, now);
        return;
    }
    }
}

/* Read what a link's peer sent: 1 alive, 0 a bye (closed on purpose), -errno broken. */
static int link_read(int fd, int64_t *heard, int64_t now)
{
    char buf[64];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0)
            return -ECONNRESET;
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? 1 : -errno;
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] == RING_BYE)
                return 0;
            if (buf[i] != RING_BEAT)
                return -EPROTO;
        }
        *heard = now;
    }
}

static int link_beat(int fd, int64_t *sent, int64_t interval, int64_t now)
{
    if (now < *sent + interval)
        return 0;
    char b = RING_BEAT;
    ssize_t w = send(fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && errno != EAGAIN && errno != EINTR)
        return -errno; /* EAGAIN: the peer does not read; its silence shows on our side */
    *sent = now;
    return 0;
}

static void link_cause(char *buf, size_t size, int e, int64_t silent_ms)
{
    if (e == -ETIMEDOUT)
        snprintf(buf, size, "silent for %lld ms", (long long)silent_ms);
    else if (e == -EPROTO)
        snprintf(buf, size, "protocol violation");
    else
        snprintf(buf, size, "%s", e == -ECONNRESET ? "connection closed" : errno_cause(-e));
}

static void out_step(struct ring *r, short revents, int64_t now)
{
    if (r->out == OUT_WAIT && now >= r->out_retry) {
        out_connect(r, now);
        return;
    }
    if (r->out == OUT_CONNECTING || r->out == OUT_HELLO) {
        enum ring_status st = RING_OK;
        int a = dial_step(r, &r->od, revents, RING_KIND_LINK, r->next.node_id, r->round, now, &st);
        if (a > 0) {
            out_answered(r, st, now);
        } else if (a == -ETIMEDOUT) {
            char c[64];
            snprintf(c, sizeof(c), "no answer within %lld ms", (long long)r->silence);
            out_suspect(r, c, now);
        } else if (a < 0) {
            out_suspect(r, a == -EPROTO ? "protocol violation" : errno_cause(-a), now);
        } else if (r->od.connected) {
            r->out = OUT_HELLO;
        }
        if (r->out != OUT_UP)
            return;
    }
    if (r->out != OUT_UP)
        return;
    int e = revents & (POLLIN | POLLERR | POLLHUP) ? link_read(r->od.fd, &r->out_heard, now) : 1;
    if (e == 0) { /* the successor ended its round first: reconnect when ours changes too */
        close_fd(r, &r->od.fd);
        r->out = OUT_BYE;
        return;
    }
    if (e > 0 && now >= r->out_heard + r->silence)
        e = -ETIMEDOUT;
    if (e > 0)
        e = link_beat(r->od.fd, &r->out_sent, r->interval, now);
    if (e < 0) {
        char c[64];
        link_cause(c, sizeof(c), e, now - r->out_heard);
        out_suspect(r, c, now);
    }
}

/* ---- the link from the predecessor -------------------------------------------------------- */

static void in_report(struct ring *r, const char *cause)
{
    struct ring_report x = {
        .kind = RING_REPORT_SUSPECT, .round = r->round, .heard_ms = r->in_ever ? r->in_heard : -1};
    snprintf(x.node_id, sizeof(x.node_id), "%s", r->prev);
    snprintf(x.cause, sizeof(x.cause), "%s", cause);
    report(r, &x);
    r->in_suspected = true;
}

static void in_step(struct ring *r, short revents, int64_t now)
{
    if (r->in_fd < 0 && r->prev[0] && r->await_prev && !r->in_ever && !r->in_suspected &&
        now >= r->in_deadline) {
        /* frozen or dead before its link came up: its other neighbour may have no link either */
        char c[64];
        snprintf(c, sizeof(c), "never connected within %lld ms",
                 (long long)(r->in_deadline - r->in_set));
        in_report(r, c);
    }
    if (r->in_fd < 0)
        return;
    int e = revents & (POLLIN | POLLERR | POLLHUP) ? link_read(r->in_fd, &r->in_heard, now) : 1;
    if (e == 0) {
        close_fd(r, &r->in_fd);
        return;
    }
    if (e > 0 && now >= r->in_heard + r->silence)
        e = -ETIMEDOUT;
    if (e > 0)
        e = link_beat(r->in_fd, &r->in_sent, r->interval, now);
    if (e >= 0)
        return;
    if (!r->in_suspected) {
        char c[64];
        link_cause(c, sizeof(c), e, now - r->in_heard);
        in_report(r, c);
    }
    close_fd(r, &r->in_fd);
}

/* ---- accepting: hellos -------------------------------------------------------------------- */

static enum ring_status judge(const struct ring *r, const struct ring_hello *h)
{
    if (strcmp(h->run, r->run) != 0)
        return RING_BAD_RUN;
    if (strcmp(h->to, r->self) != 0)
        return RING_NOT_ME;
    if (h->kind == RING_KIND_PROBE)
        return RING_OK; /* alive, whatever its round */
    if (r->round == 0 || h->round > r->round)
        return RING_LATER;
    if (h->round < r->round)
        return RING_STALE;
    return r->prev[0] && strcmp(h->from, r->prev) == 0 ? RING_OK : RING_NOT_PEER;
}

static void pending_step(struct ring *r, struct pending *p, short revents, int64_t now)
{
    if (revents & (POLLIN | POLLERR | POLLHUP)) {
        ssize_t n = recv(p->fd, p->buf + p->len, sizeof(p->buf) - p->len, MSG_DONTWAIT);
        if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) {
            close_fd(r, &p->fd); /* closed (or reset) before a hello */
            return;
        }
        if (n > 0)
            p->len += (size_t)n;
        struct ring_hello h;
        size_t used = 0;
        int d = ring_hello_decode(p->buf, p->len, &h, &used, NULL);
        /* a bad hello, or bytes after it before our answer: not our protocol */
        if (d < 0 || (d > 0 && used != p->len)) {
            close_fd(r, &p->fd);
            return;
        }
        if (d > 0) {
            enum ring_status st = judge(r, &h);
            uint8_t a[RING_ANSWER_LEN];
            ring_answer_encode(st, r->round, a);
            ssize_t w = send(p->fd, a, sizeof(a), MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w == (ssize_t)sizeof(a) && st == RING_OK && h.kind == RING_KIND_LINK) {
                close_fd(r, &r->in_fd); /* the predecessor reconnected: the newer link wins */
                r->in_fd = p->fd;
                r->in_heard = now;
                r->in_sent = 0;
                r->in_suspected = false;
                r->in_ever = true;
                p->fd = -1;
                return;
            }
            close_fd(r, &p->fd);
            return;
        }
    }
    if (p->fd >= 0 && now >= p->deadline)
        close_fd(r, &p->fd); /* no hello in time */
}

static void accept_all(struct ring *r, int64_t now)
{
    for (int k = 0; k < 16; k++) { /* a burst at most per pass */
        int fd = accept4(r->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        struct pending *slot = NULL, *oldest = NULL;
        for (size_t i = 0; i < RING_PENDING_MAX; i++) {
            if (r->pend[i].fd < 0) {
                slot = &r->pend[i];
                break;
            }
            if (!oldest || r->pend[i].deadline < oldest->deadline)
                oldest = &r->pend[i];
        }
        if (!slot) { /* full: whoever waited longest without a hello gives way */
            close_fd(r, &oldest->fd);
            slot = oldest;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        slot->fd = fd;
        slot->len = 0;
        slot->deadline =
            now + (r->silence > RING_HELLO_TIMEOUT_MS ? r->silence : RING_HELLO_TIMEOUT_MS);
    }
}

/* ---- probes ------------------------------------------------------------------------------- */

static void probe_done(struct ring *r, struct probe *p, bool alive, bool local, const char *cause)
{
    struct ring_report x = {.kind = RING_REPORT_PROBE,
                            .round = p->round,
                            .probe_id = p->id,
                            .alive = alive,
                            .local = local,
                            .heard_ms = -1};
    snprintf(x.node_id, sizeof(x.node_id), "%s", p->node);
    snprintf(x.cause, sizeof(x.cause), "%s", cause);
    report(r, &x);
    close_fd(r, &p->d.fd);
}

int ring_probe(struct ring *r, uint64_t id, const struct ring_peer *peer, int64_t round,
               int64_t timeout_ms, int64_t now)
{
    struct probe *p = NULL;
    for (size_t i = 0; i < RING_PROBES_MAX && !p; i++)
        if (r->probes[i].d.fd < 0)
            p = &r->probes[i];
    if (!p)
        return -EBUSY;
    p->id = id;
    p->round = round;
    p->timeout = timeout_ms;
    snprintf(p->node, sizeof(p->node), "%s", peer->node_id);
    int e = dial_start(&p->d, peer, now + timeout_ms);
    if (e == 0 && p->d.connected && (e = send_hello(r, &p->d, RING_KIND_PROBE, p->node, round)) < 0)
        close_fd(r, &p->d.fd);
    char c[64];
    if (e == -EAFNOSUPPORT) { /* not a numeric address: no evidence either way, so no eviction */
        probe_done(r, p, true, false, "not probed: not a numeric address");
    } else if (e < 0 && ring_local_error(-e)) { /* nothing left this node: no evidence either */
        local_failure(r, -e);
        snprintf(c, sizeof(c), "not probed: %s here", strerror(-e));
        probe_done(r, p, false, true, c);
    } else if (e < 0) {
        probe_done(r, p, false, false, errno_cause(-e));
    }
    return 0;
}

static void probe_step(struct ring *r, struct probe *p, short revents, int64_t now)
{
    enum ring_status st = RING_OK;
    int a = dial_step(r, &p->d, revents, RING_KIND_PROBE, p->node, p->round, now, &st);
    char c[64];
    if (a > 0 && st == RING_OK)
        probe_done(r, p, true, false, "answered");
    else if (a > 0) {
        snprintf(c, sizeof(c), "answered '%s'", ring_status_name(st));
        probe_done(r, p, false, false, c);
    } else if (a == -ETIMEDOUT) {
        snprintf(c, sizeof(c), "no answer within %lld ms", (long long)p->timeout);
        probe_done(r, p, false, false, c);
    } else if (a < 0) {
        probe_done(r, p, false, false, a == -EPROTO ? "protocol violation" : errno_cause(-a));
    }
}

/* ---- the loop's interface ----------------------------------------------------------------- */

int64_t ring_await_ms(const struct ring *r, int members)
{
    int64_t spread = members > 0 ? (int64_t)members * RING_FANOUT_US_PER_MEMBER / 1000 : 0;
    return 2 * r->silence + (spread < r->await_cap ? spread : r->await_cap);
}

void ring_set(struct ring *r, int64_t round, int members, const char *prev, bool await_prev,
              const struct ring_peer *next, int64_t now)
{
    prev = prev ? prev : "";
    const char *nid = next ? next->node_id : "";
    r->await_prev = await_prev;
    bool same_next =
        strcmp(nid, r->next.node_id) == 0 &&
        (!next || (strcmp(next->addr, r->next.addr) == 0 && next->port == r->next.port));
    if (round == r->round && strcmp(prev, r->prev) == 0 && same_next)
        return;
    /* A new round with the same neighbour keeps a link that is up (its peer is the same agent: a
     * restarted one would have broken it): no reconnect, no hello, no gap in the beats. */
    bool keep_in = round && prev[0] && strcmp(prev, r->prev) == 0 && r->in_fd >= 0 && r->in_ever;
    bool keep_out = round && nid[0] && same_next && r->out == OUT_UP;
    r->round = round;
    if (!keep_in) {
        bye(r, &r->in_fd);
        r->in_suspected = r->in_ever = false;
        snprintf(r->prev, sizeof(r->prev), "%s", round ? prev : "");
        r->in_set = now;
        r->in_deadline = now + ring_await_ms(r, members);
    }
    if (keep_out)
        return;
    bye(r, &r->od.fd);
    r->out = OUT_NONE;
    r->out_suspected = false;
    memset(&r->next, 0, sizeof(r->next));
    if (!round || !next || !next->node_id[0])
        return;
    r->next = *next;
    r->out_backoff = r->interval;
    r->out_heard = now;
    out_connect(r, now);
}

static short revents_of(const struct pollfd *fds, size_t nfds, int fd)
{
    for (size_t i = 0; fd >= 0 && i < nfds; i++)
        if (fds[i].fd == fd)
            return fds[i].revents;
    return 0;
}

uint64_t ring_sockets_closed(const struct ring *r)
{
    return r->closed;
}

size_t ring_pollfds(const struct ring *r, struct pollfd *fds, size_t max)
{
    size_t n = 0;
#define ADD(f, ev)                                                                                 \
    do {                                                                                           \
        if ((f) >= 0 && n < max)                                                                   \
            fds[n++] = (struct pollfd){.fd = (f), .events = (ev)};                                 \
    } while (0)
    ADD(r->listen_fd, POLLIN);
    for (size_t i = 0; i < RING_PENDING_MAX; i++)
        ADD(r->pend[i].fd, POLLIN);
    ADD(r->od.fd, r->od.connected ? POLLIN : POLLOUT);
    ADD(r->in_fd, POLLIN);
    for (size_t i = 0; i < RING_PROBES_MAX; i++)
        ADD(r->probes[i].d.fd, r->probes[i].d.connected ? POLLIN : POLLOUT);
#undef ADD
    return n;
}

void ring_on_poll(struct ring *r, const struct pollfd *fds, size_t nfds, int64_t now)
{
    /* links first: a heartbeat waiting in a buffer counts before any silence is judged */
    out_step(r, revents_of(fds, nfds, r->od.fd), now);
    in_step(r, revents_of(fds, nfds, r->in_fd), now);
    for (size_t i = 0; i < RING_PROBES_MAX; i++)
        if (r->probes[i].d.fd >= 0)
            probe_step(r, &r->probes[i], revents_of(fds, nfds, r->probes[i].d.fd), now);
    for (size_t i = 0; i < RING_PENDING_MAX; i++)
        if (r->pend[i].fd >= 0)
            pending_step(r, &r->pend[i], revents_of(fds, nfds, r->pend[i].fd), now);
    if (revents_of(fds, nfds, r->listen_fd) & POLLIN)
        accept_all(r, now);
}

static int64_t earliest(int64_t a, int64_t b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

int64_t ring_wake_ms(const struct ring *r)
{
    int64_t t = -1;
    if (r->out == OUT_WAIT)
        t = earliest(t, r->out_retry);
    if (r->out == OUT_CONNECTING || r->out == OUT_HELLO)
        t = earliest(t, r->od.deadline);
    if (r->out == OUT_UP) {
        t = earliest(t, r->out_sent + r->interval);
        t = earliest(t, r->out_heard + r->silence);
    }
    if (r->in_fd >= 0) {
        t = earliest(t, r->in_sent + r->interval);
        t = earliest(t, r->in_heard + r->silence);
    } else if (r->prev[0] && r->await_prev && !r->in_ever && !r->in_suspected) {
        t = earliest(t, r->in_deadline);
    }
    for (size_t i = 0; i < RING_PENDING_MAX; i++)
        if (r->pend[i].fd >= 0)
            t = earliest(t, r->pend[i].deadline);
    for (size_t i = 0; i < RING_PROBES_MAX; i++)
        if (r->probes[i].d.fd >= 0)
            t = earliest(t, r->probes[i].d.deadline);
    return t;
}

bool ring_take(struct ring *r, struct ring_report *ret)
{
    if (!r->n_reports)
        return false;
    *ret = r->reports[0];
    memmove(r->reports, r->reports + 1, (r->n_reports - 1) * sizeof(*r->reports));
    r->n_reports--;
    return true;
}

void ring_get_links(const struct ring *r, struct ring_links *ret)
{
    static const char *const outs[] = {
        [OUT_NONE] = "none", [OUT_CONNECTING] = "connecting", [OUT_HELLO] = "connecting",
        [OUT_UP] = "up",     [OUT_WAIT] = "retrying",         [OUT_BYE] = "closed by peer"};
    struct ring_links l = {.round = r->round,
                           .out = outs[r->out],
                           .in = r->in_fd >= 0 ? "up"
                                 : !r->prev[0] ? "none"
                                 : r->in_ever  ? "down"
                                               : "waiting"};
    snprintf(l.next, sizeof(l.next), "%s", r->next.node_id);
    snprintf(l.prev, sizeof(l.prev), "%s", r->prev);
    l.out_heard_ms = r->out == OUT_UP ? r->out_heard : -1;
    l.in_heard_ms = r->in_fd >= 0 ? r->in_heard : -1;
    l.local_failures = r->local_failures;
    snprintf(l.local_cause, sizeof(l.local_cause), "%s", r->local_cause);
    *ret = l;
}
