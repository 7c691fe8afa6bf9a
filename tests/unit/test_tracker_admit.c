// SPDX-License-Identifier: Apache-2.0
/*
 * Who the built-in rabit tracker admits (agent/tracker/tracker_admit.c and the hello checks in
 * tracker.c; docs/security.md "The built-in tracker"): a connection from an address that is not
 * a member host (a client inside a network namespace this test made) is refused at once; a
 * second `start` for a linked rank is refused; a connection that says nothing is closed at the
 * hello deadline; a host has at most TRACKER_CONNS_PER_WORKER connections per worker open.
 * The tracker runs its own poll loop on a thread, as in test_tracker.c; counters are read after
 * that thread is joined. Every client read has its own deadline, so a mutant that keeps a
 * connection open fails in seconds.
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
#include <sys/time.h>
#include <unistd.h>

#include "ea_time.h"
#include "netns_harness.h"
#include "rabit_sim.h"
#include "tracker.h"
#include "tracker_proto.h"
#include "tracker_srv.h"

/* A connected TCP socket from namespace `ns` (NULL: ours) to host:port, reads time out after
 * timeout_ms. */
static int connect_from(const char *ns, const char *host, int port, int timeout_ms)
{
    int fd = netns_socket(ns, AF_INET, SOCK_STREAM);
    cr_assert_geq(fd, 0, "socket: %s", strerror(-fd));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    cr_assert_eq(inet_pton(AF_INET, host, &sa.sin_addr), 1);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect %s:%d: %s", host,
                 port, strerror(errno));
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* Read to EOF: true when the tracker closed (EOF or reset) before the socket's read deadline;
 * *ret_got: bytes read meanwhile. */
static bool closed_by_tracker(int fd, size_t *ret_got)
{
    char buf[256];
    ssize_t k;
    size_t got = 0;
    while ((k = recv(fd, buf, sizeof(buf), 0)) > 0)
        got += (size_t)k;
    if (ret_got)
        *ret_got = got;
    return k == 0 || errno == ECONNRESET;
}

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

static void link_world(const char *host, int port, int n)
{
    struct rsim_result res[8];
    cr_assert_leq(n, 8);
    int r = rsim_run(host, port, n, n, res);
    for (int i = 0; i < n; i++)
        cr_assert_eq(res[i].err, 0, "worker %d: %s", i, res[i].msg);
    cr_assert_eq(r, 0);
}

static void expect_warning(struct srv *s, const char *what)
{
    const char *w = tracker_last_warning(s->t);
    cr_assert(strstr(w, what), "warning '%s' does not say '%s'", w, what);
}

TestSuite(tracker_admit, .timeout = 60);

/* A rank that is linked comes back only with `recover`: a second `start` for it is refused
 * (it would take the rank's place in the link map: a worker impersonating another).
 * Mutation check (scripts/test.sh): dropping the start refusal in rank_refusal() fails this. */
Test(tracker_admit, second_start_for_a_linked_rank_is_refused)
{
    struct srv s;
    struct tracker_params p = {
        .addr = "127.0.0.1", .world_size = 2, .round = 1, .io_timeout_ms = 1000};
    srv_start_params(&s, &p);
    link_world("127.0.0.1", tracker_port(s.t), 2);
    int fd = connect_from(NULL, "127.0.0.1", tracker_port(s.t), 5000);
    uint8_t b[128];
    size_t n = hello_bytes(b, sizeof(b), -1, 2, "0", "start");
    cr_assert_eq(rsim_send(fd, b, n), 0);
    size_t got = 0;
    cr_assert(closed_by_tracker(fd, &got), "the second start was not closed: %s", strerror(errno));
    close(fd);
    cr_assert_leq(got, 4, "it got more than the magic (%zu bytes): an assignment", got);
    srv_join(&s);
    cr_assert_eq(tracker_stats(s.t)->refused, 1, "%s", tracker_last_warning(s.t));
    expect_warning(&s, "start for rank 0 refused: rank 0 is linked already");
    cr_assert_eq(tracker_stats(s.t)->linked, 2);
    srv_destroy(&s);
}

/* A connection that never sends its hello is closed at the hello deadline, not at the 30 s
 * I/O deadline.
 * Mutation check: the accept deadline taken from io_timeout_ms fails this. */
Test(tracker_admit, hello_deadline_closes_an_idle_connection)
{
    struct srv s;
    struct tracker_params p = {
        .addr = "127.0.0.1", .world_size = 1, .round = 1, .hello_timeout_ms = 400};
    srv_start_params(&s, &p);
    int64_t t0 = ea_now_ms();
    int fd = connect_from(NULL, "127.0.0.1", tracker_port(s.t), 4000);
    cr_assert(closed_by_tracker(fd, NULL), "an idle connection still open after 4 s");
    close(fd);
    int64_t took = ea_now_ms() - t0;
    cr_assert_geq(took, 350, "closed after %lld ms, before its deadline", (long long)took);
    link_world("127.0.0.1", tracker_port(s.t), 1); /* still serving */
    srv_join(&s);
    expect_warning(&s, "no complete message within 400 ms");
    srv_destroy(&s);
}

/* At most TRACKER_CONNS_PER_WORKER connections per worker of a host at once: one worker, four
 * idle connections, the fifth is refused at once; once the tracker closed one, the worker links.
 * Mutation check: tracker_admit_take() always admitting fails this. */
Test(tracker_admit, per_host_cap_holds)
{
    struct srv s;
    struct tracker_host host = {.addr = "127.0.0.1", .workers = 1};
    struct tracker_params p = {.addr = "127.0.0.1",
                               .world_size = 1,
                               .round = 1,
                               .hosts = &host,
                               .n_hosts = 1,
                               .hello_timeout_ms = 30000};
    srv_start_params(&s, &p);
    int idle[TRACKER_CONNS_PER_WORKER];
    for (int i = 0; i < TRACKER_CONNS_PER_WORKER; i++)
        idle[i] = connect_from(NULL, "127.0.0.1", tracker_port(s.t), 2000);
    int fd = connect_from(NULL, "127.0.0.1", tracker_port(s.t), 2000);
    cr_assert(closed_by_tracker(fd, NULL), "connection %d over the cap is still open",
              TRACKER_CONNS_PER_WORKER + 1);
    close(fd);
    /* one idle connection says shutdown: once the tracker closed it, its slot is free */
    uint8_t b[128];
    cr_assert_eq(rsim_send(idle[0], b, hello_bytes(b, sizeof(b), 0, 1, "0", "shutdown")), 0);
    cr_assert(closed_by_tracker(idle[0], NULL));
    close(idle[0]);
    link_world("127.0.0.1", tracker_port(s.t), 1);
    for (int i = 1; i < TRACKER_CONNS_PER_WORKER; i++)
        close(idle[i]);
    srv_join(&s);
    cr_assert_eq(tracker_stats(s.t)->over_cap, 1);
    cr_assert(tracker_stats(s.t)->all_linked);
    srv_destroy(&s);
}

/* A client inside a network namespace this test made, at an address no member's record lists,
 * is refused at once (it does not even get the magic back); the members on the root side link.
 * Mutation check: every peer taken as a member (bucket 0) fails this. */
Test(tracker_admit, non_member_address_is_refused)
{
    netns_require();
    int pid = (int)getpid();
    char root_ip[32], ns_ip[32], ns[NETNS_NAME_MAX];
    snprintf(root_ip, sizeof(root_ip), "10.%d.%d.1", 190 + pid % 10, (pid / 10) % 250);
    snprintf(ns_ip, sizeof(ns_ip), "10.%d.%d.2", 190 + pid % 10, (pid / 10) % 250);
    netns_ns_create("tk", ns);
    char ns_cidr[40], root_cidr[40];
    snprintf(ns_cidr, sizeof(ns_cidr), "%s/24", ns_ip);
    snprintf(root_cidr, sizeof(root_cidr), "%s/24", root_ip);
    netns_veth_root(ns, "eth0", ns_cidr, root_cidr, NULL);
    struct srv s;
    struct tracker_host host = {.addr = root_ip, .workers = 2};
    struct tracker_params p = {.addr = root_ip,
                               .world_size = 2,
                               .round = 1,
                               .hosts = &host,
                               .n_hosts = 1,
                               .hello_timeout_ms = 30000};
    srv_start_params(&s, &p);
    int fd = connect_from(ns, root_ip, tracker_port(s.t), 3000);
    int32_t magic = TRACKER_MAGIC;
    send(fd, &magic, sizeof(magic), MSG_NOSIGNAL);
    size_t got = 0;
    cr_assert(closed_by_tracker(fd, &got), "the namespace's client is still connected");
    cr_assert_eq(got, 0, "the namespace's client got %zu byte(s) back", got);
    close(fd);
    link_world(root_ip, tracker_port(s.t), 2); /* the member host links */
    srv_join(&s);
    cr_assert_eq(tracker_stats(s.t)->not_member, 1);
    expect_warning(&s, "not a member host of this round");
    cr_assert(strstr(tracker_last_warning(s.t), ns_ip), "%s", tracker_last_warning(s.t));
    cr_assert(tracker_stats(s.t)->all_linked);
    srv_destroy(&s);
    netns_cleanup();
}
