// SPDX-License-Identifier: Apache-2.0
/*
 * Checkpoint replication (agent/checkpoint/ckpt_wire.c, ckpt_repl.c; issue 39 stage 4): the
 * wire's hello, shard header and answer against malformed input, the admission of members only
 * (pure), and two stores in this process over real loopback TCP: a saved shard reaches the
 * successor and is served there; a non-member, a corrupt shard, an oversized header and a replica
 * that does not fit the memory bound are refused, said in a note, and never stored.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "checkpoint.h"
#include "ckpt_cli.h"
#include "ckpt_pump.h"
#include "ckpt_proto.h"
#include "ckpt_store.h"
#include "ckpt_wire.h"
#include "ea_time.h"

/* ---- the wire (pure) ---------------------------------------------------------------------- */

static struct ckpt_hello hello_of(const char *run, int64_t round, const char *from, const char *to)
{
    struct ckpt_hello h = {.round = round};
    snprintf(h.run, sizeof(h.run), "%s", run);
    snprintf(h.from, sizeof(h.from), "%s", from);
    snprintf(h.to, sizeof(h.to), "%s", to);
    return h;
}

Test(ckpt_wire, hello_round_trip)
{
    uint8_t b[CKPT_HELLO_MAX];
    struct ckpt_hello h = hello_of("run", 7, "a", "b"), d;
    int n = ckpt_hello_encode(&h, b, sizeof(b));
    cr_assert_gt(n, CKPT_HELLO_HEADER);
    size_t used = 0;
    struct ea_error e = {0};
    cr_assert_eq(ckpt_hello_decode(b, (size_t)n - 1, &d, &used, &e), 0, "needs more bytes");
    cr_assert_eq(ckpt_hello_decode(b, (size_t)n, &d, &used, &e), 1, "%s", e.msg);
    cr_assert_eq(used, (size_t)n);
    cr_assert_str_eq(d.run, "run");
    cr_assert_str_eq(d.from, "a");
    cr_assert_str_eq(d.to, "b");
    cr_assert_eq(d.round, 7);
}

Test(ckpt_wire, only_the_ring_predecessor_of_this_round_is_admitted)
{
    struct ckpt_view v = {.run = "run", .round = 4, .me = "b", .prev = "a"};
    struct ea_error e = {0};
    struct ckpt_hello h = hello_of("run", 4, "a", "b");
    cr_assert_eq(ckpt_admit(&h, &v, &e), CKPT_W_OK, "%s", e.msg);
    h = hello_of("other", 4, "a", "b");
    cr_assert_eq(ckpt_admit(&h, &v, &e), CKPT_W_BAD_RUN);
    h = hello_of("run", 4, "a", "c");
    cr_assert_eq(ckpt_admit(&h, &v, &e), CKPT_W_NOT_ME);
    h = hello_of("run", 3, "a", "b");
    cr_assert_eq(ckpt_admit(&h, &v, &e), CKPT_W_STALE);
    h = hello_of("run", 5, "a", "b");
    cr_assert_eq(ckpt_admit(&h, &v, &e), CKPT_W_LATER);
    h = hello_of("run", 4, "mallory", "b");
    cr_assert_eq(ckpt_admit(&h, &v, &e), CKPT_W_NOT_PEER, "a non-member is refused");
    cr_assert(strstr(e.msg, "mallory"), "%s", e.msg);
    h = hello_of("run", 4, "c", "b");
    cr_assert_eq(ckpt_admit(&h, &v, &e), CKPT_W_NOT_PEER, "a member that is not the predecessor");
    struct ckpt_view none = {.run = "run", .round = 4, .me = "b", .prev = ""};
    h = hello_of("run", 4, "a", "b");
    cr_assert_eq(ckpt_admit(&h, &none, &e), CKPT_W_NOT_PEER, "no predecessor: nobody");
    struct ckpt_view idle = {.run = "run", .round = -1, .me = "b", .prev = ""};
    cr_assert_eq(ckpt_admit(&h, &idle, &e), CKPT_W_LATER, "no round running");
}

Test(ckpt_wire, malformed_hellos_are_errors)
{
    uint8_t b[CKPT_HELLO_MAX + 64];
    struct ckpt_hello h = hello_of("run", 1, "a", "b"), d;
    int n = ckpt_hello_encode(&h, b, sizeof(b));
    size_t used;
    struct ea_error e = {0};
    uint8_t x[sizeof(b)];
    memcpy(x, b, sizeof(b));
    x[0] = 'X';
    cr_assert_eq(ckpt_hello_decode(x, (size_t)n, &d, &used, &e), -EBADMSG, "bad magic");
    memcpy(x, b, sizeof(b));
    x[4] = 200; /* a run id longer than 127 bytes */
    cr_assert_eq(ckpt_hello_decode(x, sizeof(x), &d, &used, &e), -EBADMSG, "name too long");
    memcpy(x, b, sizeof(b));
    x[CKPT_HELLO_HEADER] = '\n';
    cr_assert_eq(ckpt_hello_decode(x, (size_t)n, &d, &used, &e), -EBADMSG, "not printable");
    memcpy(x, b, sizeof(b));
    x[4] = 0;
    cr_assert_eq(ckpt_hello_decode(x, (size_t)n, &d, &used, &e), -EBADMSG, "empty run id");
    memcpy(x, b, sizeof(b));
    x[8] = 0x80;
    cr_assert_eq(ckpt_hello_decode(x, (size_t)n, &d, &used, &e), -EBADMSG, "negative round");
    h = hello_of("run", -1, "a", "b");
    cr_assert_eq(ckpt_hello_encode(&h, b, sizeof(b)), -EINVAL);
    h = hello_of("r un", 1, "a", "b");
    cr_assert_eq(ckpt_hello_encode(&h, b, sizeof(b)), -EINVAL);
    h = hello_of("run", 1, "a", "b");
    memset(h.from, 'f', sizeof(h.from)); /* 128 bytes, unterminated: one too many */
    cr_assert_eq(ckpt_hello_encode(&h, b, sizeof(b)), -EINVAL, "a name over 127 bytes");
}

Test(ckpt_wire, shard_headers_are_bounded)
{
    uint8_t b[CKPT_SHARD_HDR_LEN];
    struct ckpt_shard_wire s = {.step = 9, .shard = 1, .shards = 2, .len = 100, .crc = 0xdeadbeef},
                           d;
    struct ea_error e = {0};
    ckpt_shard_encode(&s, b);
    cr_assert_eq(ckpt_shard_decode(b, sizeof(b) - 1, 1000, &d, &e), 0);
    cr_assert_eq(ckpt_shard_decode(b, sizeof(b), 1000, &d, &e), 1, "%s", e.msg);
    cr_assert(d.step == 9 && d.shard == 1 && d.shards == 2 && d.len == 100 && d.crc == 0xdeadbeef);
    cr_assert_eq(ckpt_shard_decode(b, sizeof(b), 99, &d, &e), -EBADMSG, "larger than the bound");
    cr_assert(strstr(e.msg, "bytes"), "%s", e.msg);
    const struct ckpt_shard_wire bad[] = {
        {.step = -1, .shard = 0, .shards = 1, .len = 1},
        {.step = CKPT_MAX_STEP + 1, .shard = 0, .shards = 1, .len = 1},
        {.step = 1, .shard = 0, .shards = 0, .len = 1},
        {.step = 1, .shard = 0, .shards = CKPT_MAX_SHARDS + 1, .len = 1},
        {.step = 1, .shard = 2, .shards = 2, .len = 1},
        {.step = 1, .shard = -1, .shards = 2, .len = 1},
        {.step = 1, .shard = 0, .shards = 1, .len = 0},
        {.step = 1, .shard = 0, .shards = 1, .len = UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ckpt_shard_encode(&bad[i], b);
        cr_assert_eq(ckpt_shard_decode(b, sizeof(b), 1000, &d, &e), -EBADMSG, "case %zu", i);
    }
}

Test(ckpt_wire, answers)
{
    uint8_t b[CKPT_ANSWER_MAX];
    char msg[256];
    enum ckpt_wire_status st;
    size_t used;
    size_t n = ckpt_answer_encode(CKPT_W_NOFIT, "too big\x01", b);
    cr_assert_eq(ckpt_answer_decode(b, n - 1, &st, msg, sizeof(msg), &used), 0);
    cr_assert_eq(ckpt_answer_decode(b, n, &st, msg, sizeof(msg), &used), 1);
    cr_assert_eq(st, CKPT_W_NOFIT);
    cr_assert_str_eq(msg, "too big?", "unprintable bytes are never passed on");
    b[4] = 99;
    cr_assert_eq(ckpt_answer_decode(b, n, &st, msg, sizeof(msg), &used), -EBADMSG);
}

/* ---- two stores over loopback TCP --------------------------------------------------------- */

static char tdir[256];
static struct ckpt *A, *B;
static int port_b;

static void two_init(void)
{
    snprintf(tdir, sizeof(tdir), "/tmp/ckpt-repl-XXXXXX");
    cr_assert(mkdtemp(tdir));
}

static void two_fini(void)
{
    ckpt_destroy(A);
    ckpt_destroy(B);
    A = B = NULL;
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
    cr_expect_eq(system(cmd), 0);
}

TestSuite(ckpt_repl, .init = two_init, .fini = two_fini, .timeout = 60);

static int listen_lo(int *ret_port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(fd, 16), 0);
    socklen_t len = sizeof(sa);
    getsockname(fd, (struct sockaddr *)&sa, &len);
    *ret_port = ntohs(sa.sin_port);
    return fd;
}

static struct ckpt *open_store(const char *name, uint64_t memory, int *ret_port)
{
    char d[400];
    snprintf(d, sizeof(d), "%s/%s", tdir, name);
    struct ckpt_config cc = {.socket_dir = d, .run_id = "run", .memory = memory, .uid = geteuid()};
    struct ea_error e = {0};
    int64_t restored;
    struct ckpt *c = NULL;
    cr_assert_eq(ckpt_create(&cc, &c, &restored, &e), 0, "%s", e.msg);
    struct ckpt_repl_config rc = {.listen_fd = listen_lo(ret_port), .node_id = name,
                                  .replicas = 1, .bytes_per_sec = 0};
    cr_assert_eq(ckpt_repl_start(c, &rc, &e), 0, "%s", e.msg);
    return c;
}



static void serve(void)
{
    int64_t now = ea_now_ms();
    pump_ckpt2(A, B, 0);
    if (A)
        ckpt_repl_step(A, now);
    if (B)
        ckpt_repl_step(B, now);
    pump_ckpt2(A, B, 5);
}

/* A note of `kind` from c, waiting for it (10 s). */
static bool wait_note(struct ckpt *c, enum ckpt_note_kind kind, struct ckpt_note *ret)
{
    int64_t end = ea_now_ms() + 10000;
    while (ea_now_ms() < end) {
        serve();
        struct ckpt_note n;
        while (ckpt_next_note(c, &n) > 0)
            if (n.kind == kind) {
                if (ret)
                    *ret = n;
                return true;
            }
    }
    return false;
}

static int worker(struct ckpt *c)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", ckpt_socket_path(c));
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "%s", strerror(errno));
    return fd;
}

static int ask(int fd, const char *req, char *buf, size_t size)
{
    cr_assert_eq(send(fd, req, strlen(req), 0), (ssize_t)strlen(req));
    for (int i = 0; i < 1000; i++) {
        serve();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 0) == 1)
            break;
    }
    return ckpt_cli_recv(fd, req, strlen(req), buf, size);
}

static void save(struct ckpt *c, int64_t step, int shard, int shards, const void *data, size_t len)
{
    int fd = worker(c);
    char req[128], buf[600];
    snprintf(req, sizeof(req), "save run %lld %d %d %zu", (long long)step, shard, shards, len);
    int mfd = ask(fd, req, buf, sizeof(buf));
    cr_assert_eq(strncmp(buf, "ok ", 3), 0, "%s", buf);
    char id[32];
    snprintf(id, sizeof(id), "%s", buf + 3);
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    memcpy(m, data, len);
    munmap(m, len);
    close(mfd);
    snprintf(req, sizeof(req), "commit %s %08x", id, ckpt_crc32(0, data, len));
    ask(fd, req, buf, sizeof(buf));
    cr_assert_eq(strncmp(buf, "ok ", 3), 0, "%s", buf);
    close(fd);
}

Test(ckpt_repl, a_saved_shard_reaches_the_successor_and_is_served_there)
{
    int pa;
    A = open_store("a", 1 << 20, &pa);
    B = open_store("b", 1 << 20, &port_b);
    ckpt_repl_round(A, 3, "b", "b", "127.0.0.1", port_b);
    ckpt_repl_round(B, 3, "a", "a", "127.0.0.1", pa);
    char data[200000];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (char)(i * 13 + 1);
    save(A, 5, 0, 2, data, sizeof(data));
    cr_assert(wait_note(B, CKPT_NOTE_REPLICA, NULL), "the shard reached B");
    struct ckpt_repl_stats st;
    ckpt_repl_stats(B, &st);
    cr_assert_eq(st.recv_shards, 1);
    /* B's own shard of step 5: with the replica, step 5 is complete at B */
    save(B, 5, 1, 2, data, 1000);
    int64_t step;
    int shards;
    cr_assert_eq(ckpt_store_latest(ckpt_store_of(B), &step, &shards), 0);
    cr_assert_eq(step, 5);
    int fd = worker(B);
    char buf[600];
    int lfd = ask(fd, "load run 5 0", buf, sizeof(buf));
    cr_assert_geq(lfd, 0, "%s", buf);
    void *m = mmap(NULL, sizeof(data), PROT_READ, MAP_SHARED, lfd, 0);
    cr_assert_neq(m, MAP_FAILED);
    cr_assert_eq(memcmp(m, data, sizeof(data)), 0, "the same bytes");
    munmap(m, sizeof(data));
    close(lfd);
    close(fd);
    /* and B's shard went back to A: the step is complete there too */
    cr_assert(wait_note(A, CKPT_NOTE_REPLICA, NULL));
    cr_assert_eq(ckpt_store_latest(ckpt_store_of(A), &step, &shards), 0);
    cr_assert_eq(step, 5);
}

/* A raw client of B's port that says `h`: the answer's status. */
static int raw_connect(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port_b),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

static enum ckpt_wire_status read_answer(int fd, char msg[256])
{
    uint8_t b[CKPT_ANSWER_MAX];
    size_t have = 0, used;
    enum ckpt_wire_status st;
    int64_t end = ea_now_ms() + 10000;
    while (ea_now_ms() < end) {
        serve();
        ssize_t n = recv(fd, b + have, sizeof(b) - have, MSG_DONTWAIT);
        if (n > 0)
            have += (size_t)n;
        if (n == 0)
            return (enum ckpt_wire_status)-1;
        if (ckpt_answer_decode(b, have, &st, msg, 256, &used) == 1)
            return st;
    }
    cr_assert_fail("no answer");
    return CKPT_W_BAD;
}

static enum ckpt_wire_status raw_hello(int fd, const char *run, int64_t round, const char *from)
{
    uint8_t b[CKPT_HELLO_MAX];
    struct ckpt_hello h = hello_of(run, round, from, "b");
    int n = ckpt_hello_encode(&h, b, sizeof(b));
    cr_assert_eq(send(fd, b, (size_t)n, 0), n);
    char msg[256];
    return read_answer(fd, msg);
}

static enum ckpt_wire_status raw_shard(int fd, int64_t step, int shard, int shards,
                                       const void *data, size_t len, uint32_t crc, char msg[256])
{
    uint8_t h[CKPT_SHARD_HDR_LEN];
    struct ckpt_shard_wire s = {.step = step, .shard = shard, .shards = shards, .len = len,
                                .crc = crc};
    ckpt_shard_encode(&s, h);
    cr_assert_eq(send(fd, h, sizeof(h), MSG_NOSIGNAL), (ssize_t)sizeof(h));
    if (data)
        send(fd, data, len, MSG_NOSIGNAL);
    return read_answer(fd, msg);
}

static bool closed_by_peer(int fd)
{
    int64_t end = ea_now_ms() + 10000;
    char c;
    while (ea_now_ms() < end) {
        serve();
        ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN))
            return true;
    }
    return false;
}

Test(ckpt_repl, a_non_member_is_refused)
{
    B = open_store("b", 1 << 20, &port_b);
    ckpt_repl_round(B, 3, "a", "", "", 0);
    int fd = raw_connect();
    cr_assert_eq(raw_hello(fd, "run", 3, "mallory"), CKPT_W_NOT_PEER);
    cr_assert(closed_by_peer(fd));
    close(fd);
    struct ckpt_note n;
    cr_assert(wait_note(B, CKPT_NOTE_REFUSED, &n));
    cr_assert(strstr(n.message, "mallory"), "%s", n.message);
    fd = raw_connect();
    cr_assert_eq(raw_hello(fd, "other-run", 3, "a"), CKPT_W_BAD_RUN, "another run's node");
    close(fd);
    fd = raw_connect();
    cr_assert_eq(raw_hello(fd, "run", 2, "a"), CKPT_W_STALE, "a round that is over");
    close(fd);
    fd = raw_connect();
    cr_assert_eq(raw_hello(fd, "run", 3, "a"), CKPT_W_OK, "the predecessor");
    close(fd);
}

Test(ckpt_repl, a_corrupt_shard_is_never_stored)
{
    B = open_store("b", 1 << 20, &port_b);
    ckpt_repl_round(B, 3, "a", "", "", 0);
    int fd = raw_connect();
    cr_assert_eq(raw_hello(fd, "run", 3, "a"), CKPT_W_OK);
    char data[5000], msg[256];
    memset(data, 'x', sizeof(data));
    uint32_t crc = ckpt_crc32(0, data, sizeof(data));
    cr_assert_eq(raw_shard(fd, 4, 0, 1, data, sizeof(data), crc ^ 1, msg), CKPT_W_BAD);
    cr_assert(strstr(msg, "checksum"), "%s", msg);
    int64_t step;
    int shards;
    cr_assert_eq(ckpt_store_latest(ckpt_store_of(B), &step, &shards), -ENOENT, "nothing stored");
    cr_assert_null(ckpt_store_find(ckpt_store_of(B), 4, 0));
    cr_assert_eq(ckpt_store_of(B)->used, 0, "its memory given back");
    struct ckpt_note n;
    cr_assert(wait_note(B, CKPT_NOTE_BAD, &n));
    cr_assert_eq(raw_shard(fd, 4, 0, 1, data, sizeof(data), crc, msg), CKPT_W_OK, "%s", msg);
    cr_assert_eq(ckpt_store_latest(ckpt_store_of(B), &step, &shards), 0);
    cr_assert_eq(step, 4);
    close(fd);
}

Test(ckpt_repl, sizes_are_bounded_and_a_replica_that_does_not_fit_is_refused)
{
    B = open_store("b", 8192, &port_b);
    ckpt_repl_round(B, 3, "a", "", "", 0);
    int fd = raw_connect();
    cr_assert_eq(raw_hello(fd, "run", 3, "a"), CKPT_W_OK);
    char data[6000], msg[256];
    memset(data, 'y', sizeof(data));
    uint32_t crc = ckpt_crc32(0, data, sizeof(data));
    cr_assert_eq(raw_shard(fd, 7, 0, 2, data, sizeof(data), crc, msg), CKPT_W_OK, "%s", msg);
    /* 6000 + 6000 bytes of one step: more than the 8192 of the bound */
    cr_assert_eq(raw_shard(fd, 7, 1, 2, data, sizeof(data), crc, msg), CKPT_W_NOFIT, "%s", msg);
    cr_assert(strstr(msg, "--checkpoint-memory"), "%s", msg);
    struct ckpt_note n;
    cr_assert(wait_note(B, CKPT_NOTE_NOFIT, &n), "refused with an event, never silently");
    cr_assert(strstr(n.message, "do not fit --checkpoint-memory"), "%s", n.message);
    cr_assert_null(ckpt_store_find(ckpt_store_of(B), 7, 1));
    cr_assert_eq(ckpt_store_of(B)->used, sizeof(data));
    /* a header announcing more than the whole bound: refused before any byte is taken */
    cr_assert_eq(raw_shard(fd, 8, 0, 1, NULL, 1u << 30, 0, msg), CKPT_W_BAD);
    cr_assert(closed_by_peer(fd));
    close(fd);
}

Test(ckpt_repl, a_connection_that_says_nothing_is_closed)
{
    B = open_store("b", 8192, &port_b);
    ckpt_repl_round(B, 3, "a", "", "", 0);
    struct ckpt_repl_stats st;
    ckpt_repl_stats(B, &st);
    int fd = raw_connect();
    serve();
    /* the step at a time past the hello's deadline */
    ckpt_repl_step(B, ea_now_ms() + 60000);
    cr_assert(closed_by_peer(fd));
    close(fd);
}

/* --checkpoint-bandwidth: on the step's clock (a fake one here), 3 MB at 1 MB/s take at least
 * 2.5 s of it (one bucket of 256 KiB may go at once); the machine's load cannot make it faster. */
Test(ckpt_repl, the_sender_keeps_to_its_bandwidth_cap)
{
    int pa;
    char d[400];
    snprintf(d, sizeof(d), "%s/a", tdir);
    struct ckpt_config cc = {.socket_dir = d, .run_id = "run", .memory = 16 << 20, .uid = geteuid()};
    struct ea_error e = {0};
    int64_t restored;
    cr_assert_eq(ckpt_create(&cc, &A, &restored, &e), 0, "%s", e.msg);
    struct ckpt_repl_config rc = {.listen_fd = listen_lo(&pa), .node_id = "a", .replicas = 1,
                                  .bytes_per_sec = 1 << 20};
    cr_assert_eq(ckpt_repl_start(A, &rc, &e), 0, "%s", e.msg);
    B = open_store("b", 16 << 20, &port_b);
    ckpt_repl_round(A, 3, "b", "b", "127.0.0.1", port_b);
    ckpt_repl_round(B, 3, "a", "a", "127.0.0.1", pa);
    size_t len = 3 << 20;
    char *data = malloc(len);
    memset(data, 'z', len);
    save(A, 1, 0, 1, data, len);
    int64_t fake = 1000, t0 = fake, end = ea_now_ms() + 30000;
    bool got = false;
    while (!got && ea_now_ms() < end) {
        pump_ckpt2(A, B, 0);
        ckpt_repl_step(A, fake);
        ckpt_repl_step(B, fake);
        pump_ckpt2(A, B, 2);
        struct ckpt_note n;
        while (ckpt_next_note(B, &n) > 0)
            got |= n.kind == CKPT_NOTE_REPLICA;
        fake += 50;
    }
    free(data);
    cr_assert(got, "the shard arrived");
    cr_assert_geq(fake - t0, 2500, "3 MB at 1 MB/s in %lld ms of the step's clock",
                  (long long)(fake - t0));
    cr_assert(wait_note(A, CKPT_NOTE_REPLICATED, NULL), "and the sender heard so");
    struct ckpt_repl_stats st;
    ckpt_repl_stats(A, &st);
    cr_assert_eq(st.sent_bytes, len);
}
