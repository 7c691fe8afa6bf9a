// SPDX-License-Identifier: Apache-2.0
/*
 * The built-in rabit tracker (agent/tracker/) against simulated rabit workers (tests/helpers/
 * rabit_sim.c, XGBoost 1.7's client side of the protocol) and against bad peers: garbage, a
 * wrong magic, truncated and oversized messages, unknown commands, task ids outside the world,
 * a worker of an older round, many connections at once. The tracker runs its own poll loop on a
 * thread (as in the agent: one loop, non-blocking sockets); every assertion on its counters is
 * made after that thread is joined. Each bad peer must be closed (the client reads EOF) with
 * exactly one warning naming it, and the tracker must go on serving good workers.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ea_time.h"
#include "rabit_sim.h"
#include "topology.h"
#include "tracker.h"
#include "tracker_proto.h"
#include "tracker_srv.h"

#define HOST "127.0.0.1"

/* bind() as the tracker calls it, wrapped (-Wl,--wrap=bind, tests/tracker.cmake): the next bind
 * of an IPv4 socket to port 0 gets `offer_port` instead, as if the kernel had picked it, once. */
int __wrap_bind(int fd, const struct sockaddr *sa, socklen_t len);
int __real_bind(int fd, const struct sockaddr *sa, socklen_t len);
static int offer_port;    /* set by the test; 0: bind as asked */
static bool port_offered; /* the offer was bound */

int __wrap_bind(int fd, const struct sockaddr *sa, socklen_t len)
{
    if (offer_port && sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in) &&
        ((const struct sockaddr_in *)sa)->sin_port == 0) {
        struct sockaddr_in at = *(const struct sockaddr_in *)sa;
        at.sin_port = htons((uint16_t)offer_port);
        offer_port = 0;
        int r = __real_bind(fd, (const struct sockaddr *)&at, sizeof(at));
        port_offered = r == 0;
        return r;
    }
    return __real_bind(fd, sa, len);
}

static void srv_start(struct srv *s, int world, int64_t round, int avoid_port, int timeout_ms)
{
    struct tracker_params p = {.addr = HOST,
                               .world_size = world,
                               .round = round,
                               .avoid_port = avoid_port,
                               .io_timeout_ms = timeout_ms};
    srv_start_params(s, &p);
}

/* The rank's links from the topology module, as a bit set. */
static unsigned expected_links(int world, int r)
{
    struct rdzv_link links[256];
    cr_assert_eq(rdzv_topo_build(world, links), 0);
    unsigned m = 0;
    if (links[r].parent >= 0)
        m |= 1u << links[r].parent;
    for (int i = 0; i < links[r].n_children; i++)
        m |= 1u << links[r].children[i];
    if (links[r].ring_prev != r)
        m |= 1u << links[r].ring_prev;
    if (links[r].ring_next != r)
        m |= 1u << links[r].ring_next;
    return m;
}

/* n workers link; each gets its task id as rank and exactly the topology's links. */
static void run_world(struct srv *s, int n, int world_flag)
{
    struct rsim_result res[32];
    cr_assert_leq(n, 32);
    int r = rsim_run(HOST, tracker_port(s->t), n, world_flag, res);
    for (int i = 0; i < n; i++)
        cr_assert_eq(res[i].err, 0, "worker %d: %s", i, res[i].msg);
    cr_assert_eq(r, 0);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(res[i].rank, i, "task %d got rank %d", i, res[i].rank);
        cr_assert_eq(res[i].world, n);
        unsigned asked = 0, got = 0;
        for (int k = 0; k < res[i].n_nn; k++)
            asked |= 1u << res[i].nn[k];
        for (int k = 0; k < res[i].n_linked; k++)
            got |= 1u << res[i].linked[k];
        cr_assert_eq(asked, expected_links(n, i), "rank %d: links %#x, topology %#x", i, asked,
                     expected_links(n, i));
        cr_assert_eq(got, asked, "rank %d: linked to %#x, asked %#x", i, got, asked);
        struct rdzv_link links[32];
        rdzv_topo_build(n, links);
        cr_assert_eq(res[i].prev, n > 1 ? links[i].ring_prev : -1, "rank %d: ring prev", i);
        cr_assert_eq(res[i].next, n > 1 ? links[i].ring_next : -1, "rank %d: ring next", i);
        cr_assert_eq(res[i].parent, links[i].parent, "rank %d: parent", i);
    }
}

/* Send raw bytes as a peer, then expect the tracker to close the connection (EOF, or a reset).
 * With `hold`, the client keeps its side open and waits for the tracker's deadline. */
static void expect_closed(int port, const void *bytes, size_t n, bool half_close)
{
    int fd = rsim_connect(HOST, port);
    cr_assert_geq(fd, 0, "connect: %s", strerror(-fd));
    if (n > 0)
        cr_assert_eq(rsim_send(fd, bytes, n), 0);
    if (half_close)
        shutdown(fd, SHUT_WR);
    char buf[64];
    ssize_t k;
    size_t got = 0;
    /* the tracker may have answered the magic first: read to EOF (20 s receive timeout) */
    while ((k = recv(fd, buf, sizeof(buf), 0)) > 0)
        got += (size_t)k;
    cr_assert(k == 0 || errno == ECONNRESET, "not closed by the tracker: %s (%zu bytes read)",
              strerror(errno), got);
    close(fd);
}

/* The hello of a worker as bytes: magic, rank, world, task id, command. */
static size_t hello_bytes(uint8_t *out, size_t cap, int rank, int world, const char *task,
                          const char *cmd)
{
    size_t n = 0;
    tracker_put_int(out, cap, &n, TRACKER_MAGIC);
    tracker_put_int(out, cap, &n, rank);
    tracker_put_int(out, cap, &n, world);
    tracker_put_str(out, cap, &n, task);
    tracker_put_str(out, cap, &n, cmd);
    return n;
}

/* After the loop stopped: exactly `refused` warnings, the last one naming a local peer and
 * containing `what`. */
static void expect_warned(struct srv *s, int refused, const char *what)
{
    const char *w = tracker_last_warning(s->t);
    cr_assert_eq(tracker_stats(s->t)->refused, refused, "refused %d, expected %d; last: %s",
                 tracker_stats(s->t)->refused, refused, w);
    cr_assert(strstr(w, "from 127.0.0.1:"), "warning names no peer: %s", w);
    cr_assert(strstr(w, what), "warning '%s' does not say '%s'", w, what);
}

TestSuite(tracker, .timeout = 60);

/* Mutation check: swapping ring prev and next in tracker_neighbors() fails the ring check. */
Test(tracker, workers_get_their_task_rank_and_the_topology_links)
{
    struct srv s;
    srv_start(&s, 8, 1, 0, 0);
    run_world(&s, 8, -1);
    for (int r = 0; r < 8; r++)
        cr_assert_eq(rsim_shutdown(HOST, tracker_port(s.t), r), 0);
    cr_assert_eq(rsim_print(HOST, tracker_port(s.t), 3, "hello from rank 3\n"), 0);
    /* a connection that says nothing and leaves is a port probe, not a warning */
    expect_closed(tracker_port(s.t), NULL, 0, true);
    /* the print and shutdown connections are closed by the tracker once read: wait for that */
    uint8_t b[64];
    expect_closed(tracker_port(s.t), b, hello_bytes(b, sizeof(b), 0, 8, "0", "shutdown"), false);
    srv_join(&s);
    const struct tracker_stats *st = tracker_stats(s.t);
    cr_assert(st->all_linked);
    cr_assert_eq(st->linked, 8);
    cr_assert_eq(st->shutdown, 8);
    cr_assert_eq(st->printed, 1);
    cr_assert_eq(st->refused, 0, "%s", tracker_last_warning(s.t));
    srv_destroy(&s);
}

Test(tracker, one_worker_world)
{
    struct srv s;
    srv_start(&s, 1, 1, 0, 0);
    run_world(&s, 1, 1);
    srv_join(&s);
    cr_assert(tracker_stats(s.t)->all_linked);
    srv_destroy(&s);
}

/* Mutation check: accepting any magic (dropping the TRACKER_MAGIC comparison) fails this. */
Test(tracker, garbage_and_wrong_magic_are_closed_with_one_warning)
{
    struct srv s;
    srv_start(&s, 2, 1, 0, 0);
    const char *http = "GET / HTTP/1.0\r\n\r\n";
    expect_closed(tracker_port(s.t), http, strlen(http), false);
    int32_t wrong = 0xff98;
    expect_closed(tracker_port(s.t), &wrong, sizeof(wrong), false);
    run_world(&s, 2, 2); /* still serving */
    srv_join(&s);
    expect_warned(&s, 2, "wrong magic number 0xff98");
    srv_destroy(&s);
}

/* Mutation check: treating EOF mid-message as a quiet close fails the first half. */
Test(tracker, truncated_messages)
{
    struct srv s;
    srv_start(&s, 2, 1, 0, 300);
    uint8_t b[128];
    size_t n = hello_bytes(b, sizeof(b), -1, 2, "0", "start");
    /* the peer leaves in the middle of its hello */
    expect_closed(tracker_port(s.t), b, n - 3, true);
    srv_join(&s);
    expect_warned(&s, 1, "closed in the middle of a message");
    srv_destroy(&s);
    /* the peer stays, silent, in the middle of its hello: the deadline closes it */
    srv_start(&s, 2, 1, 0, 300);
    int64_t t0 = ea_now_ms();
    expect_closed(tracker_port(s.t), b, 6, false);
    cr_assert_lt(ea_now_ms() - t0, 5000);
    run_world(&s, 2, -1);
    srv_join(&s);
    expect_warned(&s, 1, "no complete message within 300 ms");
    srv_destroy(&s);
}

/* A worker that stops answering while it holds the brokering (it got its rank, never reports
 * its links) is closed at its deadline, and the next worker is served. */
Test(tracker, silent_worker_does_not_block_the_others)
{
    struct srv s;
    srv_start(&s, 1, 1, 0, 300);
    uint8_t b[128];
    size_t n = hello_bytes(b, sizeof(b), -1, 1, "0", "start");
    expect_closed(tracker_port(s.t), b, n, false); /* reads magic + assignment, then EOF */
    run_world(&s, 1, -1);
    srv_join(&s);
    expect_warned(&s, 1, "(truncated?)");
    cr_assert(tracker_stats(s.t)->all_linked);
    srv_destroy(&s);
}

/* Mutation check: raising TRACKER_STR_MAX above the length sent fails the first case. */
Test(tracker, oversized_messages)
{
    struct srv s;
    srv_start(&s, 2, 1, 0, 0);
    uint8_t b[128];
    size_t n = 0;
    tracker_put_int(b, sizeof(b), &n, TRACKER_MAGIC);
    tracker_put_int(b, sizeof(b), &n, -1);
    tracker_put_int(b, sizeof(b), &n, -1);
    tracker_put_int(b, sizeof(b), &n, 1 << 20); /* a task id of 1 MiB */
    expect_closed(tracker_port(s.t), b, n, false);
    n = hello_bytes(b, sizeof(b), 0, -1, "0", "print");
    tracker_put_int(b, sizeof(b), &n, TRACKER_PRINT_MAX + 1);
    expect_closed(tracker_port(s.t), b, n, false);
    n = hello_bytes(b, sizeof(b), 0, -1, "0", "print");
    tracker_put_int(b, sizeof(b), &n, -5);
    expect_closed(tracker_port(s.t), b, n, false);
    run_world(&s, 2, -1);
    srv_join(&s);
    expect_warned(&s, 3, "oversized print message");
    srv_destroy(&s);
}

/* Mutation check: mapping an unknown command to "start" in tracker_parse_hello() fails this. */
Test(tracker, unknown_command)
{
    struct srv s;
    srv_start(&s, 2, 1, 0, 0);
    uint8_t b[128];
    expect_closed(tracker_port(s.t), b, hello_bytes(b, sizeof(b), -1, 2, "0", "bogus"), false);
    srv_join(&s);
    expect_warned(&s, 1, "unknown command 'bogus'");
    srv_destroy(&s);
}

/* Mutation check: dropping the range check in tracker_hello_rank() fails this (and would index
 * past the rank table). */
Test(tracker, task_id_outside_the_world)
{
    struct srv s;
    srv_start(&s, 4, 1, 0, 0);
    uint8_t b[128];
    expect_closed(tracker_port(s.t), b, hello_bytes(b, sizeof(b), -1, -1, "4", "start"), false);
    expect_closed(tracker_port(s.t), b, hello_bytes(b, sizeof(b), -1, -1, "NULL", "start"), false);
    expect_closed(tracker_port(s.t), b, hello_bytes(b, sizeof(b), 9, -1, "9", "recover"), false);
    expect_closed(tracker_port(s.t), b, hello_bytes(b, sizeof(b), -2, -1, "-1", "shutdown"), false);
    srv_join(&s);
    expect_warned(&s, 4, "not a rank of this round's world of 4");
    srv_destroy(&s);
}

/* A worker of the previous round: that round's tracker (and port) is gone, and the new one
 * refuses a worker that believes in another world size.
 * Mutation check: dropping the world-size check fails the second half. (Ignoring p->avoid_port
 * seldom shows here, the kernel rarely repeats a port: avoided_port_is_refused_when_the_kernel_
 * offers_it makes it do so.) */
Test(tracker, stale_round_is_refused)
{
    struct srv s;
    srv_start(&s, 3, 1, 0, 0);
    int old = tracker_port(s.t);
    run_world(&s, 3, 3);
    srv_join(&s);
    srv_destroy(&s);
    for (int i = 0; i < 20; i++) { /* the kernel hands out recently freed ports too */
        srv_start(&s, 2, 2, old, 0);
        cr_assert_neq(tracker_port(s.t), old, "round 2 got round 1's port again");
        if (i < 19) {
            srv_join(&s);
            srv_destroy(&s);
        }
    }
    int fd = rsim_connect(HOST, old);
    cr_assert_eq(fd, -ECONNREFUSED, "round 1's port still answers (%d)", fd);
    uint8_t b[128];
    expect_closed(tracker_port(s.t), b, hello_bytes(b, sizeof(b), -1, 3, "2", "start"), false);
    run_world(&s, 2, 2);
    srv_join(&s);
    expect_warned(&s, 1, "from a world of 3, this round's is 2");
    srv_destroy(&s);
}

/* A free loopback port: bound, never connected, closed (nothing left in TIME_WAIT). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    inet_pton(AF_INET, HOST, &sa.sin_addr);
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
              getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    close(fd);
    return ntohs(sa.sin_port);
}

/* The kernel may hand the previous round's port out again; here it does, deterministically: the
 * tracker's first bind gets exactly the port it must avoid. It holds that port, takes another
 * and serves there.
 * Mutation: ignoring p->avoid_port (scripts/test.sh runs it) -> the new round's tracker listens
 * on the old round's port. */
Test(tracker, avoided_port_is_refused_when_the_kernel_offers_it)
{
    int old = free_port();
    offer_port = old;
    port_offered = false;
    struct srv s;
    srv_start(&s, 2, 2, old, 0);
    cr_assert(port_offered, "port %d was not offered to the tracker's bind (taken meanwhile?)",
              old);
    cr_assert_neq(tracker_port(s.t), old, "round 2's tracker took the port it must avoid");
    run_world(&s, 2, 2);
    srv_join(&s);
    cr_assert(tracker_stats(s.t)->all_linked);
    srv_destroy(&s);
}

/* Connect as a worker and say hello; then read the magic and the assignment the tracker sends
 * when it is this worker's turn (its rank in a world of `world`). The fd. */
static int hand_worker(int port, int rank, int world, const char *task, const char *cmd)
{
    int fd = rsim_connect(HOST, port);
    cr_assert_geq(fd, 0, "connect: %s", strerror(-fd));
    uint8_t b[128];
    cr_assert_eq(rsim_send(fd, b, hello_bytes(b, sizeof(b), rank, world, task, cmd)), 0);
    struct rdzv_link links[8];
    cr_assert_eq(rdzv_topo_build(world, links), 0);
    size_t n = 0;
    tracker_put_int(b, sizeof(b), &n, TRACKER_MAGIC);
    cr_assert_eq(tracker_put_assignment(b, sizeof(b), &n, links, world, atoi(task)), 0);
    uint8_t got[128];
    cr_assert_eq(rsim_recv(fd, got, n), 0, "no assignment for task %s", task);
    cr_assert_eq(memcmp(got, b, n), 0, "task %s: another assignment", task);
    return fd;
}

static int32_t recv_i32(int fd)
{
    int32_t v = 0;
    cr_assert_eq(rsim_recv(fd, &v, sizeof(v)), 0);
    return v;
}

static void send_i32(int fd, int32_t v)
{
    cr_assert_eq(rsim_send(fd, &v, sizeof(v)), 0);
}

/* Read until the tracker closes the connection. */
static void expect_eof(int fd)
{
    char c;
    ssize_t k;
    while ((k = recv(fd, &c, 1, 0)) > 0)
        ;
    cr_assert(k == 0 || errno == ECONNRESET, "not closed by the tracker: %s", strerror(errno));
    close(fd);
}

/* Rank 0 links first (nobody listens yet: it will accept rank 1's link on its port) and then
 * recovers (its worker restarted: that listener is gone), and dies before reporting its new
 * links. Rank 1 must not be sent to rank 0's old listener: it accepts the link instead.
 * Mutation: activate_next() keeping a recovering rank's pending accepts -> rank 1 is told to
 * connect to rank 0's dead port. */
Test(tracker, a_recovering_rank_no_longer_accepts_on_its_old_port)
{
    struct srv s;
    srv_start(&s, 2, 1, 0, 0);
    int port = tracker_port(s.t);
    int fd = hand_worker(port, -1, 2, "0", "start");
    send_i32(fd, 0); /* no good links */
    cr_assert_eq(recv_i32(fd), 0, "rank 0: nobody to connect to");
    cr_assert_eq(recv_i32(fd), 1, "rank 0: accepts rank 1");
    send_i32(fd, 0);     /* no failed connects */
    send_i32(fd, 40000); /* its link listener */
    expect_eof(fd);
    /* restarted: it recovers, gets its rank, and dies */
    fd = hand_worker(port, 0, 2, "0", "recover");
    close(fd);
    fd = hand_worker(port, -1, 2, "1", "start");
    send_i32(fd, 0);
    int32_t n_con = recv_i32(fd), n_accept = recv_i32(fd);
    cr_assert_eq(n_con, 0, "rank 1 was sent to rank 0's old listener");
    cr_assert_eq(n_accept, 1);
    close(fd);
    srv_join(&s);
    cr_assert_eq(tracker_stats(s.t)->refused, 2, "the two that left mid-message: %s",
                 tracker_last_warning(s.t));
    srv_destroy(&s);
}

struct rec_arg {
    int port, rank;
    struct rsim_result r;
    pthread_t th;
};

static void *recover_one(void *p)
{
    struct rec_arg *a = p;
    char task[16];
    snprintf(task, sizeof(task), "%d", a->rank);
    rsim_worker(HOST, a->port, "recover", a->rank, -1, task, &a->r);
    return NULL;
}

/* `recover` within a round gives a worker its rank back (here both ends of the one link, as
 * rabit recovers them), with its links brokered again.
 * Mutation check: assigning recover the task id's rank instead of its own fails this (the task
 * ids sent below are swapped). */
Test(tracker, recover_gives_the_rank_back)
{
    struct srv s;
    srv_start(&s, 2, 1, 0, 0);
    run_world(&s, 2, -1);
    struct rec_arg a[2] = {{.port = tracker_port(s.t), .rank = 1},
                           {.port = tracker_port(s.t), .rank = 0}};
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&a[i].th, NULL, recover_one, &a[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(a[i].th, NULL);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(a[i].r.err, 0, "rank %d: %s", a[i].rank, a[i].r.msg);
        cr_assert_eq(a[i].r.rank, a[i].rank);
        cr_assert_eq(a[i].r.n_linked, 1);
        cr_assert_eq(a[i].r.linked[0], 1 - a[i].rank);
    }
    srv_join(&s);
    cr_assert(tracker_stats(s.t)->all_linked);
    cr_assert_eq(tracker_stats(s.t)->refused, 0, "%s", tracker_last_warning(s.t));
    srv_destroy(&s);
}

/* Many workers and idle connections at once: 32 workers link while 90 connections that never
 * say anything stay open (within loopback's cap: 4 per worker of the world). */
Test(tracker, many_connections_at_once)
{
    struct srv s;
    srv_start(&s, 32, 1, 0, 0);
    int idle[90];
    for (int i = 0; i < 90; i++) {
        idle[i] = rsim_connect(HOST, tracker_port(s.t));
        cr_assert_geq(idle[i], 0, "connection %d: %s", i, strerror(-idle[i]));
    }
    run_world(&s, 32, 32);
    for (int i = 0; i < 90; i++)
        close(idle[i]);
    srv_join(&s);
    cr_assert(tracker_stats(s.t)->all_linked);
    cr_assert_geq(tracker_stats(s.t)->accepted, 90 + 32);
    srv_destroy(&s);
}

/* The parsers, fed one byte at a time: "need more" until the last byte, then the whole hello,
 * with nothing consumed before.
 * Mutation check: consuming the ints of a partial hello (advancing *off early) fails this. */
Test(tracker_proto, hello_byte_by_byte)
{
    uint8_t b[128];
    size_t n = hello_bytes(b, sizeof(b), 3, 8, "3", "recover");
    for (size_t len = 4; len < n; len++) {
        size_t off = 4;
        struct tracker_hello h;
        cr_assert_eq(tracker_parse_hello(b, len, &off, &h), 0, "complete at %zu of %zu", len, n);
        cr_assert_eq(off, 4);
    }
    size_t off = 4;
    struct tracker_hello h;
    cr_assert_eq(tracker_parse_hello(b, n, &off, &h), 1);
    cr_assert_eq(off, n);
    cr_assert_eq(h.cmd, TRACKER_RECOVER);
    cr_assert_eq(h.rank, 3);
    cr_assert_eq(h.world_size, 8);
    cr_assert_str_eq(h.task_id, "3");
    cr_assert_eq(tracker_hello_rank(&h, 8), 3);
    cr_assert_eq(tracker_hello_rank(&h, 3), -ERANGE);
}

Test(tracker_proto, task_ids)
{
    struct tracker_hello h = {.rank = -1};
    static const struct {
        const char *task;
        int want;
    } cases[] = {{"0", 0}, {"7", 7}, {"8", -ERANGE}, {"-1", -ERANGE}, {"NULL", -EINVAL},
                 {"", -EINVAL}, {"3x", -EINVAL}, {"99999999999999999999", -EINVAL}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        snprintf(h.task_id, sizeof(h.task_id), "%s", cases[i].task);
        cr_assert_eq(tracker_hello_rank(&h, 8), cases[i].want, "task id '%s'", cases[i].task);
    }
}

/* The assignment as the Python tracker encodes it, for rank 1 of 5 (tree 0-{1,4}, 1-{2,3}; the
 * ring 0..4): rank, parent, world, tree neighbours (parent, children), ring prev, ring next. */
Test(tracker_proto, assignment_encoding)
{
    struct rdzv_link links[5];
    cr_assert_eq(rdzv_topo_build(5, links), 0);
    uint8_t out[128];
    size_t len = 0;
    cr_assert_eq(tracker_put_assignment(out, sizeof(out), &len, links, 5, 1), 0);
    int32_t want[] = {1, 0, 5, 3, 0, 2, 3, 0, 2}, got[9];
    cr_assert_eq(len, sizeof(want));
    memcpy(got, out, sizeof(got));
    for (int i = 0; i < 9; i++)
        cr_assert_eq(got[i], want[i], "int %d: %d, expected %d", i, got[i], want[i]);
    len = 0;
    cr_assert_eq(tracker_put_assignment(out, 20, &len, links, 5, 1), -ENOBUFS);
    cr_assert_eq(len, 0);
}
