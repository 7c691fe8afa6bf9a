// SPDX-License-Identifier: Apache-2.0
/*
 * Fetch a shard from any member (agent/checkpoint/ckpt_fetch.c, ckpt_summary.c, the fetch request
 * of ckpt_wire.c; issue 39 item 3): the request's codec and its admission (members of this round
 * only) against malformed input, the per-round summary's codec against hostile values, the step
 * complete across members (pure), and two stores in this process over loopback TCP: a worker's
 * load of a shard only the other store holds is fetched (the same bytes) and latest() names the
 * step complete across both; a non-member, a corrupt shard (CRC) and an oversized header are
 * refused and never stored.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
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
#include "ckpt_proto.h"
#include "ckpt_pump.h"
#include "ckpt_store.h"
#include "ckpt_summary.h"
#include "ckpt_wire.h"
#include "ea_time.h"

/* ---- the fetch request (pure) ------------------------------------------------------------- */

static struct ckpt_fetch_req req_of(const char *run, int64_t round, const char *from,
                                    const char *to, int64_t step, int shard)
{
    struct ckpt_fetch_req q = {.h.round = round, .step = step, .shard = shard};
    snprintf(q.h.run, sizeof(q.h.run), "%s", run);
    snprintf(q.h.from, sizeof(q.h.from), "%s", from);
    snprintf(q.h.to, sizeof(q.h.to), "%s", to);
    return q;
}

Test(ckpt_fetch_wire, request_round_trip)
{
    uint8_t b[CKPT_FETCH_MAX];
    struct ckpt_fetch_req q = req_of("run", 7, "a", "bb", 123456789, 65535), d;
    int n = ckpt_fetch_encode(&q, b, sizeof(b));
    cr_assert_eq(n, CKPT_FETCH_HEADER + 3 + 1 + 2);
    size_t used = 0;
    struct ea_error e = {0};
    for (int k = 0; k < n; k++)
        cr_assert_eq(ckpt_fetch_decode(b, (size_t)k, &d, &used, &e), 0, "%d bytes: more", k);
    cr_assert_eq(ckpt_fetch_decode(b, (size_t)n, &d, &used, &e), 1, "%s", e.msg);
    cr_assert_eq(used, (size_t)n);
    cr_assert_str_eq(d.h.run, "run");
    cr_assert_str_eq(d.h.from, "a");
    cr_assert_str_eq(d.h.to, "bb");
    cr_assert_eq(d.h.round, 7);
    cr_assert_eq(d.step, 123456789);
    cr_assert_eq(d.shard, 65535);
}

Test(ckpt_fetch_wire, malformed_requests_are_refused)
{
    uint8_t b[CKPT_FETCH_MAX + 8], c[sizeof(b)];
    struct ckpt_fetch_req q = req_of("run", 7, "a", "b", 5, 1), d;
    int n = ckpt_fetch_encode(&q, b, sizeof(b));
    size_t used;
    struct ea_error e = {0};
    memcpy(c, b, sizeof(b));
    memcpy(c, "EAC1", 4);
    cr_assert_eq(ckpt_fetch_decode(c, (size_t)n, &d, &used, &e), -EBADMSG, "a hello is no fetch");
    memcpy(c, b, sizeof(b));
    c[16] = 0x80; /* step negative */
    cr_assert_eq(ckpt_fetch_decode(c, (size_t)n, &d, &used, &e), -EBADMSG);
    memcpy(c, b, sizeof(b));
    c[17] = 0x40; /* step above 2^53 */
    cr_assert_eq(ckpt_fetch_decode(c, (size_t)n, &d, &used, &e), -EBADMSG);
    cr_assert(strstr(e.msg, "step"), "%s", e.msg);
    memcpy(c, b, sizeof(b));
    c[25] = 1; /* shard 65536 + 1 */
    cr_assert_eq(ckpt_fetch_decode(c, (size_t)n, &d, &used, &e), -EBADMSG);
    cr_assert(strstr(e.msg, "shard"), "%s", e.msg);
    memcpy(c, b, sizeof(b));
    c[4] = 200; /* a run id longer than 127 bytes */
    cr_assert_eq(ckpt_fetch_decode(c, sizeof(c), &d, &used, &e), -EBADMSG);
    memcpy(c, b, sizeof(b));
    c[CKPT_FETCH_HEADER] = ' '; /* a name with a space */
    cr_assert_eq(ckpt_fetch_decode(c, (size_t)n, &d, &used, &e), -EBADMSG);
    memcpy(c, b, sizeof(b));
    c[4] = 0; /* an empty run id */
    cr_assert_eq(ckpt_fetch_decode(c, (size_t)n, &d, &used, &e), -EBADMSG);
    q = req_of("run", 7, "a", "b", CKPT_MAX_STEP + 1, 0);
    cr_assert_eq(ckpt_fetch_encode(&q, b, sizeof(b)), -EINVAL, "never sent either");
    q = req_of("run", 7, "a", "b", 1, CKPT_MAX_SHARDS);
    cr_assert_eq(ckpt_fetch_encode(&q, b, sizeof(b)), -EINVAL);
}

Test(ckpt_fetch_wire, only_members_of_this_round_may_fetch)
{
    struct ckpt_view v = {.run = "run", .round = 4, .me = "b"};
    struct ea_error e = {0};
    struct ckpt_fetch_req q = req_of("run", 4, "c", "b", 5, 0);
    cr_assert_eq(ckpt_fetch_admit(&q, &v, 1, &e), CKPT_W_OK, "any member, not only the ring "
                 "predecessor: %s", e.msg);
    cr_assert_eq(ckpt_fetch_admit(&q, &v, 0, &e), CKPT_W_NOT_MEMBER);
    cr_assert(strstr(e.msg, "'c' is not a member of round 4"), "%s", e.msg);
    cr_assert_eq(ckpt_fetch_admit(&q, &v, -EAGAIN, &e), CKPT_W_NOT_MEMBER, "unknown: refused");
    q = req_of("other", 4, "c", "b", 5, 0);
    cr_assert_eq(ckpt_fetch_admit(&q, &v, 1, &e), CKPT_W_BAD_RUN);
    q = req_of("run", 4, "c", "x", 5, 0);
    cr_assert_eq(ckpt_fetch_admit(&q, &v, 1, &e), CKPT_W_NOT_ME);
    q = req_of("run", 3, "c", "b", 5, 0);
    cr_assert_eq(ckpt_fetch_admit(&q, &v, 1, &e), CKPT_W_STALE);
    q = req_of("run", 5, "c", "b", 5, 0);
    cr_assert_eq(ckpt_fetch_admit(&q, &v, 1, &e), CKPT_W_LATER);
    struct ckpt_view idle = {.run = "run", .round = -1, .me = "b"};
    q = req_of("run", 4, "c", "b", 5, 0);
    cr_assert_neq(ckpt_fetch_admit(&q, &idle, 1, &e), CKPT_W_OK, "no round running: nobody");
}

/* ---- the summary (pure) ------------------------------------------------------------------- */

/* A store of fd -1 entries: shard `shard` of `shards` of `step` committed. */
static void hold(struct ckpt_store *s, int64_t step, int shard, int shards)
{
    uint64_t id = 0;
    struct ea_error e = {0};
    cr_assert_eq(ckpt_store_reserve(s, 1, step, shard, shards, 10, &id, &e), 0, "%s", e.msg);
    cr_assert_geq(ckpt_store_commit(s, 1, id, 10, false, 0, 0, &e), 0, "%s", e.msg);
}

Test(ckpt_summary, round_trip_of_a_stores_holdings)
{
    struct ckpt_store st;
    ckpt_store_init(&st, "run", 1 << 20);
    for (int sh = 0; sh < 10; sh++)
        if (sh != 4)
            hold(&st, 7, sh, 12);
    hold(&st, 8, 3, 4);
    struct ckpt_summary s, d;
    ckpt_summary_of(&st, "n1", 9, &s);
    cr_assert_eq(s.n, 2);
    cr_assert_eq(s.s[0].step, 8, "newest first");
    cr_assert_eq(s.s[1].n, 2);
    cr_assert_eq(s.s[1].lo[0], 0);
    cr_assert_eq(s.s[1].hi[0], 3);
    cr_assert_eq(s.s[1].lo[1], 5);
    cr_assert_eq(s.s[1].hi[1], 9);
    char *json = NULL;
    struct ea_error e = {0};
    cr_assert_eq(ckpt_summary_encode(&s, "run", &json, &e), 0, "%s", e.msg);
    cr_assert_eq(ckpt_summary_decode(json, strlen(json), "run", "n1", &d, &e), 0, "%s: %s", json,
                 e.msg);
    cr_assert_eq(d.round, 9);
    cr_assert_eq(d.n, 2);
    cr_assert_eq(d.s[1].shards, 12);
    cr_assert_eq(d.s[1].hi[1], 9);
    free(json);
    ckpt_store_clear(&st);
}

Test(ckpt_summary, hostile_values_are_refused)
{
    static const char *const bad[] = {
        "not json",
        "[]",
        "{\"schema\":\"elastic-agent/v1\",\"run\":\"run\",\"node\":\"n1\",\"round\":1,\"steps\":[]}",
        "{\"schema\":\"elastic-agent/v2\",\"run\":\"other\",\"node\":\"n1\",\"round\":1,\"steps\":[]}",
        "{\"schema\":\"elastic-agent/v2\",\"run\":\"run\",\"node\":\"n2\",\"round\":1,\"steps\":[]}",
        "{\"schema\":\"elastic-agent/v2\",\"run\":\"run\",\"node\":\"n1\",\"round\":-1,\"steps\":[]}",
        "{\"schema\":\"elastic-agent/v2\",\"run\":\"run\",\"node\":\"n1\",\"round\":1,\"steps\":[],"
        "\"x\":1}",
        /* a shard range beyond the shard count, reversed, overlapping, a step twice */
        "{\"schema\":\"elastic-agent/v2\",\"run\":\"run\",\"node\":\"n1\",\"round\":1,"
        "\"steps\":[[5,2,[[0,2]]]]}",
        "{\"schema\":\"elastic-agent/v2\",\"run\":\"run\",\"node\":\"n1\",\"round\":1,"
        "\"steps\":[[5,4,[[2,1]]]]}",
        "{\"schema\":\"elastic-agent/v2\",\"run\":\"run\",\"node\":\"n1\",\"round\":1,"
        "\"steps\":[[5,4,[[0,2],[1,3]]]]}",
        "{\"schema\":\"elastic-agent/v2\",\"run\":\"run\",\"node\":\"n1\",\"round\":1,"
        "\"steps\":[[5,4,[[0,1]]],[5,4,[[2,3]]]]}",
        "{\"schema\":\"elastic-agent/v2\",\"run\":\"run\",\"node\":\"n1\",\"round\":1,"
        "\"steps\":[[5,0,[]]]}",
        "{\"schema\":\"elastic-agent/v2\",\"run\":\"run\",\"node\":\"n1\",\"round\":1,"
        "\"steps\":[[9007199254740993,1,[[0,0]]]]}",
        "{\"schema\":\"elastic-agent/v2\",\"run\":\"run\",\"node\":\"n1\",\"round\":1,"
        "\"steps\":[[5,1,[[0,0]]],[4,1,[[0,0]]],[3,1,[[0,0]]],[2,1,[[0,0]]],[1,1,[[0,0]]]]}",
        "{\"schema\":\"elastic-agent/v2\",\"run\":\"run\",\"node\":\"n1\",\"round\":1,"
        "\"steps\":[[5,99,[[0,0],[2,2],[4,4],[6,6],[8,8],[10,10],[12,12],[14,14],[16,16]]]]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct ckpt_summary d;
        struct ea_error e = {0};
        cr_assert_eq(ckpt_summary_decode(bad[i], strlen(bad[i]), "run", "n1", &d, &e), -EBADMSG,
                     "accepted: %s", bad[i]);
        cr_assert(e.msg[0], "a reason for %s", bad[i]);
    }
    char big[CKPT_SUM_BYTES + 2];
    memset(big, ' ', sizeof(big));
    const char *ok = "{\"schema\":\"elastic-agent/v2\",\"run\":\"run\",\"node\":\"n1\",\"round\":1,"
                     "\"steps\":[]}";
    memcpy(big, ok, strlen(ok));
    struct ckpt_summary d;
    struct ea_error e = {0};
    cr_assert_eq(ckpt_summary_decode(big, strlen(ok), "run", "n1", &d, &e), 0, "%s", e.msg);
    cr_assert_eq(ckpt_summary_decode(big, sizeof(big), "run", "n1", &d, &e), -EBADMSG,
                 "over the bound, even if it parses");
}

static struct ckpt_summary sum_of(int64_t step, int shards, int lo, int hi)
{
    struct ckpt_summary s = {.n = 1};
    s.s[0] = (struct ckpt_sum_step){.step = step, .shards = shards, .n = 1};
    s.s[0].lo[0] = lo;
    s.s[0].hi[0] = hi;
    return s;
}

Test(ckpt_summary, the_newest_step_complete_across_members)
{
    /* three nodes, each its own shard and its predecessor's: complete at none, across all */
    struct ckpt_summary v[3] = {sum_of(3, 3, 0, 0), sum_of(3, 3, 1, 1), sum_of(3, 3, 2, 2)};
    v[0].s[0].n = 2;
    v[0].s[0].lo[1] = v[0].s[0].hi[1] = 2;
    int64_t step;
    int shards;
    cr_assert_eq(ckpt_sum_latest(v, 3, &step, &shards), 0);
    cr_assert_eq(step, 3);
    cr_assert_eq(shards, 3);
    cr_assert_eq(ckpt_sum_latest(v, 2, &step, &shards), 0, "shard 2 on v[0] too");
    cr_assert_eq(ckpt_sum_latest(v + 1, 2, &step, &shards), -ENOENT, "shard 0 nowhere");
    cr_assert_eq(ckpt_sum_holder(v, 3, 3, 2, 1), 2, "from 1 on: v[2]");
    cr_assert_eq(ckpt_sum_holder(v, 3, 3, 2, 0), 0);
    cr_assert_eq(ckpt_sum_holder(v + 1, 2, 3, 0, 0), -ENOENT);
    /* a newer step incomplete: the older complete one */
    struct ckpt_summary w[2] = {sum_of(5, 2, 0, 0), sum_of(4, 1, 0, 0)};
    cr_assert_eq(ckpt_sum_latest(w, 2, &step, &shards), 0);
    cr_assert_eq(step, 4);
    /* two shard counts for one step: not one checkpoint */
    struct ckpt_summary x[2] = {sum_of(6, 2, 0, 0), sum_of(6, 3, 1, 2)};
    cr_assert_eq(ckpt_sum_latest(x, 2, &step, &shards), -ENOENT);
}

Test(ckpt_summary, a_step_saved_again_at_another_world_size_supersedes_its_partial_shards)
{
    /* a run of 4 saved shards 0 and 2 of step 30 here, then lost a node; it resumed from step
     * 29 at world 3 and saves step 30 again with 3 shards */
    struct ckpt_store st;
    ckpt_store_init(&st, "run", 1 << 20);
    hold(&st, 29, 0, 1);
    hold(&st, 30, 0, 4);
    hold(&st, 30, 2, 4);
    uint64_t id = 0;
    struct ea_error e = {0};
    cr_assert_eq(ckpt_store_reserve(&st, 2, 30, 0, 3, 10, &id, &e), -EINVAL, "without it");
    cr_assert_eq(ckpt_store_supersede(&st, 30, 4), 0, "the same count: nothing");
    cr_assert_eq(ckpt_store_supersede(&st, 30, 3), 2);
    cr_assert_eq(ckpt_store_reserve(&st, 2, 30, 0, 3, 10, &id, &e), 0, "%s", e.msg);
    cr_assert_eq(ckpt_store_supersede(&st, 30, 4), 0, "a shard being saved: never dropped");
    cr_assert_eq(ckpt_store_supersede(&st, 29, 2), 0, "the newest complete step: never");
    cr_assert_not_null(ckpt_store_find(&st, 29, 0));
    ckpt_store_clear(&st);
}

/* ---- two stores over loopback TCP --------------------------------------------------------- */

static char tdir[256];
static struct ckpt *A, *B;
static int port_a;
static int a_member = 1;            /* A's answer: is B a member? */
static int holder_port;             /* where B fetches from (A's port, or a fake holder) */
static struct ckpt_summary a_sum;   /* what B's view says A holds */
static int view_calls;              /* listings of ckpt/ (ops.view) */
static int pub_have;                /* the coordinator's value: 1 there, 0 not yet, -1 untrusted */
static int64_t pub_step = 5;
static int pub_shards = 2;
static int pub_calls;

static void two_init(void)
{
    snprintf(tdir, sizeof(tdir), "/tmp/ckpt-fetch-XXXXXX");
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

TestSuite(ckpt_fetch, .init = two_init, .fini = two_fini, .timeout = 60);

static int view(void *ctx, struct ckpt_summary **ret, size_t *ret_n, struct ea_error *err)
{
    (void)ctx, (void)err;
    view_calls++;
    *ret = malloc(sizeof(**ret));
    **ret = a_sum;
    *ret_n = 1;
    return 0;
}

static int where(void *ctx, const char *id, int64_t lease, char addr[64], int *ret_port,
                 struct ea_error *err)
{
    (void)ctx, (void)lease, (void)err;
    cr_assert_str_eq(id, "a");
    snprintf(addr, 64, "127.0.0.1");
    *ret_port = holder_port;
    return 1;
}

static int is_member(void *ctx, const char *id, int64_t round, struct ea_error *err)
{
    (void)ctx, (void)err;
    cr_assert_str_eq(id, "b");
    cr_assert_eq(round, 3);
    return a_member;
}

static int published(void *ctx, int64_t round, int64_t *ret_step, int *ret_shards,
                     struct ea_error *err)
{
    (void)ctx;
    cr_assert_eq(round, 3);
    pub_calls++;
    if (pub_have < 0)
        return ea_errorf(err, -EPERM, "written by 'mallory'");
    if (pub_have > 0) {
        *ret_step = pub_step;
        *ret_shards = pub_shards;
    }
    return pub_have;
}

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
    struct ckpt_fetch_ops ops = {.view = view, .where = where, .is_member = is_member,
                                 .published = published};
    cr_assert_eq(ckpt_fetch_start(c, &ops, 5000, &e), 0, "%s", e.msg);
    ckpt_repl_round(c, 3, "", "", "", 0); /* round 3, no ring neighbours: no replication */
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

static int worker(struct ckpt *c)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", ckpt_socket_path(c));
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "%s", strerror(errno));
    return fd;
}

/* The reply to the request sent on fd (waiting for it on the stores' events, 10 s at most):
 * the fd it carries, or -1. */
static int reply_of(int fd, const char *req, char *buf, size_t size)
{
    int64_t end = ea_now_ms() + 10000;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (poll(&p, 1, 0) == 0 && ea_now_ms() < end)
        serve();
    return ckpt_cli_recv(fd, req, strlen(req), buf, size);
}

static int ask(int fd, const char *req, char *buf, size_t size)
{
    cr_assert_eq(send(fd, req, strlen(req), 0), (ssize_t)strlen(req));
    return reply_of(fd, req, buf, size);
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

static char data[300000];

/* A holds shard 0 of step 5 (of 2), B shard 1: complete at neither, across both. */
static void two_halves(void)
{
    A = open_store("a", 1 << 20, &port_a);
    B = open_store("b", 1 << 20, &holder_port);
    holder_port = port_a;
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (char)(i * 7 + 3);
    save(A, 5, 0, 2, data, sizeof(data));
    save(B, 5, 1, 2, data, 1000);
    ckpt_summary_of(ckpt_store_of(A), "a", 3, &a_sum);
}

Test(ckpt_fetch, a_shard_held_only_by_a_member_is_fetched_and_latest_counts_it)
{
    two_halves();
    pub_have = 1; /* the coordinator's value: step 5 of 2 shards, complete across members */
    int64_t step;
    int shards;
    cr_assert_eq(ckpt_store_latest(ckpt_store_of(B), &step, &shards), -ENOENT, "not at B alone");
    int fd = worker(B);
    char buf[600];
    ask(fd, "latest run", buf, sizeof(buf));
    cr_assert_str_eq(buf, "ok 5 2", "complete across members");
    int lfd = ask(fd, "load run 5 0", buf, sizeof(buf));
    cr_assert_geq(lfd, 0, "%s", buf);
    cr_assert_eq(strncmp(buf, "ok 300000 ", 10), 0, "%s", buf);
    void *m = mmap(NULL, sizeof(data), PROT_READ, MAP_SHARED, lfd, 0);
    cr_assert_neq(m, MAP_FAILED);
    cr_assert_eq(memcmp(m, data, sizeof(data)), 0, "the same bytes");
    munmap(m, sizeof(data));
    close(lfd);
    close(fd);
    struct ckpt_fetch_stats fa, fb;
    ckpt_fetch_stats(A, &fa);
    ckpt_fetch_stats(B, &fb);
    cr_assert_eq(fa.served, 1);
    cr_assert_eq(fb.fetched, 1);
    cr_assert_eq(ckpt_store_latest(ckpt_store_of(B), &step, &shards), 0, "now held at B");
    cr_assert_eq(step, 5);
}

static bool has_note(struct ckpt *c, enum ckpt_note_kind kind, const char *needle)
{
    struct ckpt_note n;
    bool found = false;
    while (ckpt_next_note(c, &n) > 0)
        found |= n.kind == kind && strstr(n.message, needle) != NULL;
    return found;
}

Test(ckpt_fetch, a_non_member_is_refused)
{
    two_halves();
    a_member = 0;
    int fd = worker(B);
    char buf[600];
    int lfd = ask(fd, "load run 5 0", buf, sizeof(buf));
    cr_assert_lt(lfd, 0);
    cr_assert(strstr(buf, "err ENOENT") && strstr(buf, "not a member of round 3"), "%s", buf);
    cr_assert(has_note(A, CKPT_NOTE_REFUSED, "not a member"), "said at the holder");
    cr_assert_null(ckpt_store_find(ckpt_store_of(B), 5, 0));
    struct ckpt_fetch_stats fa;
    ckpt_fetch_stats(A, &fa);
    cr_assert_eq(fa.served, 0);
    close(fd);
}

/* A fake holder at holder_port: reads a request, answers ok, then `hdr` and `len` bytes. */
static int fake_holder(void)
{
    return listen_lo(&holder_port);
}

static void fake_answer(int lfd, const struct ckpt_shard_wire *hdr, uint64_t len)
{
    int fd = -1;
    int64_t end = ea_now_ms() + 10000;
    while (fd < 0 && ea_now_ms() < end) {
        serve();
        fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    }
    cr_assert_geq(fd, 0, "B connects");
    uint8_t b[CKPT_ANSWER_MAX + CKPT_SHARD_HDR_LEN];
    size_t n = ckpt_answer_encode(CKPT_W_OK, "ok", b);
    ckpt_shard_encode(hdr, b + n);
    cr_assert_eq(send(fd, b, n + CKPT_SHARD_HDR_LEN, MSG_NOSIGNAL), (ssize_t)(n + CKPT_SHARD_HDR_LEN));
    if (len)
        send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    /* left open: B decides on what it got */
}

Test(ckpt_fetch, a_corrupt_fetched_shard_is_never_loaded)
{
    two_halves();
    int lfd = fake_holder();
    int fd = worker(B);
    char buf[600];
    cr_assert_eq(send(fd, "load run 5 0", 12, 0), 12);
    struct ckpt_shard_wire h = {.step = 5, .shard = 0, .shards = 2, .len = 1000,
                                .crc = ckpt_crc32(0, data, 1000) ^ 1};
    fake_answer(lfd, &h, 1000);
    int got = reply_of(fd, "load", buf, sizeof(buf));
    cr_assert_lt(got, 0);
    cr_assert(strstr(buf, "checksum"), "%s", buf);
    cr_assert_null(ckpt_store_find(ckpt_store_of(B), 5, 0), "not stored");
    cr_assert(has_note(B, CKPT_NOTE_FETCH_FAILED, "checksum"));
    close(fd);
    close(lfd);
}

Test(ckpt_fetch, an_oversized_or_other_shard_is_refused_before_its_bytes)
{
    two_halves();
    int lfd = fake_holder();
    int fd = worker(B);
    char buf[600];
    cr_assert_eq(send(fd, "load run 5 0", 12, 0), 12);
    struct ckpt_shard_wire h = {.step = 5, .shard = 0, .shards = 2, .len = (1 << 20) + 1};
    fake_answer(lfd, &h, 0);
    reply_of(fd, "load", buf, sizeof(buf));
    cr_assert(strstr(buf, "err ENOENT") && strstr(buf, "bytes, outside 1..1048576"), "%s", buf);
    cr_assert_null(ckpt_store_find(ckpt_store_of(B), 5, 0));
    cr_assert_eq(send(fd, "load run 5 0", 12, 0), 12);
    h = (struct ckpt_shard_wire){.step = 5, .shard = 1, .shards = 2, .len = 10};
    fake_answer(lfd, &h, 10);
    reply_of(fd, "load", buf, sizeof(buf));
    cr_assert(strstr(buf, "instead"), "another shard than asked: %s", buf);
    cr_assert_null(ckpt_store_find(ckpt_store_of(B), 5, 0));
    close(fd);
    close(lfd);
}

/* ---- latest(): the coordinator's value of the round, no listing --------------------------- */

Test(ckpt_fetch, latest_answers_from_the_published_value_without_a_listing)
{
    two_halves();
    pub_have = 1;
    int fd = worker(B);
    char buf[600];
    ask(fd, "latest run", buf, sizeof(buf));
    cr_assert_str_eq(buf, "ok 5 2", "the step complete across the run, as published");
    cr_assert_eq(view_calls, 0, "latest() alone never lists ckpt/");
    struct ckpt_fetch_stats fb;
    ckpt_fetch_stats(B, &fb);
    cr_assert_eq(fb.views, 0);
    save(B, 6, 0, 1, data, 100); /* newer here than the round's value: this store's wins */
    ask(fd, "latest run", buf, sizeof(buf));
    cr_assert_str_eq(buf, "ok 6 1");
    cr_assert_eq(view_calls, 0);
    close(fd);
}

Test(ckpt_fetch, latest_waits_for_the_published_value)
{
    two_halves();
    pub_have = 0;
    int fd = worker(B);
    char buf[600];
    cr_assert_eq(send(fd, "latest run", 10, 0), 10);
    int64_t end = ea_now_ms() + 10000;
    while (pub_calls < 3 && ea_now_ms() < end)
        serve();
    cr_assert_geq(pub_calls, 3, "asked the coordinator's value");
    struct pollfd p = {.fd = fd, .events = POLLIN};
    cr_assert_eq(poll(&p, 1, 0), 0, "no answer before the value is there");
    pub_have = 1; /* the watch brought it */
    reply_of(fd, "latest", buf, sizeof(buf));
    cr_assert_str_eq(buf, "ok 5 2");
    cr_assert_eq(view_calls, 0);
    close(fd);
}

/* A clock of its own: the wait is measured on the steps' clock, never on this machine's load. */
Test(ckpt_fetch, latest_falls_back_to_this_store_when_nothing_is_published)
{
    two_halves();
    save(B, 4, 0, 1, data, 100);
    pub_have = 0;
    int fd = worker(B);
    char buf[600];
    cr_assert_eq(send(fd, "latest run", 10, 0), 10);
    int64_t end = ea_now_ms() + 10000;
    while (pub_calls < 1 && ea_now_ms() < end)
        pump_ckpt(B, 5); /* the request is read and parked; no step yet */
    cr_assert_eq(pub_calls, 1);
    const int64_t t = INT64_C(1) << 40;
    ckpt_repl_step(B, t); /* the wait begins */
    ckpt_repl_step(B, t + 4999);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    cr_assert_eq(poll(&p, 1, 0), 0, "not before 5 s (3 s for the coordinator and a margin)");
    ckpt_repl_step(B, t + 5000);
    cr_assert_eq(poll(&p, 1, 0), 1, "answered at 5 s");
    reply_of(fd, "latest", buf, sizeof(buf));
    cr_assert_str_eq(buf, "ok 4 1", "this store alone");
    cr_assert(has_note(B, CKPT_NOTE_LATEST_ALONE, "published no newest step"), "and said so");
    cr_assert_eq(view_calls, 0);
    close(fd);
}

Test(ckpt_fetch, an_untrusted_published_value_is_not_used)
{
    two_halves();
    save(B, 4, 0, 1, data, 100);
    pub_have = -1;
    pub_step = 9;
    pub_shards = 1;
    int fd = worker(B);
    char buf[600];
    ask(fd, "latest run", buf, sizeof(buf));
    cr_assert_str_eq(buf, "ok 4 1", "this store alone, at once");
    cr_assert(has_note(B, CKPT_NOTE_LATEST_ALONE, "not used (written by 'mallory')"));
    close(fd);
}

/* ---- the coordinator's value (pure) ------------------------------------------------------- */

static int member_answer;
static int member_calls;

static int is_member_of(void *ctx, const char *id)
{
    (void)ctx, (void)id;
    member_calls++;
    return member_answer;
}

static int accept_of(const char *json, int64_t round, const char *holder, struct ckpt_pub *ret,
                     struct ea_error *e)
{
    return ckpt_pub_accept(json, strlen(json), round, holder, is_member_of, NULL, ret, e);
}

Test(ckpt_pub, round_trip)
{
    struct ckpt_pub p = {.node = "n0", .round = 7, .step = CKPT_MAX_STEP, .shards = 65536}, d;
    char *json = NULL;
    struct ea_error e = {0};
    cr_assert_eq(ckpt_pub_encode(&p, &json, &e), 0, "%s", e.msg);
    cr_assert_eq(accept_of(json, 7, "n0", &d, &e), 0, "%s: %s", json, e.msg);
    cr_assert_str_eq(d.node, "n0");
    cr_assert_eq(d.round, 7);
    cr_assert_eq(d.step, CKPT_MAX_STEP);
    cr_assert_eq(d.shards, 65536);
    free(json);
    p = (struct ckpt_pub){.node = "n0", .round = 7, .step = -1};
    cr_assert_eq(ckpt_pub_encode(&p, &json, &e), 0, "%s", e.msg);
    cr_assert_str_eq(json, "{\"schema\":1,\"node\":\"n0\",\"round\":7,\"step\":-1,\"shards\":0}");
    cr_assert_eq(accept_of(json, 7, "n0", &d, &e), 0, "%s", e.msg);
    cr_assert_eq(d.step, -1, "nothing complete");
    free(json);
}

Test(ckpt_pub, hostile_values_are_refused)
{
    static const char *const bad[] = {
        "not json",
        "[]",
        "{\"schema\":1,\"node\":\"n0\",\"round\":7,\"step\":5}",
        "{\"schema\":1,\"node\":\"n0\",\"round\":7,\"step\":5,\"shards\":2,\"x\":1}",
        "{\"schema\":2,\"node\":\"n0\",\"round\":7,\"step\":5,\"shards\":2}",
        "{\"schema\":1,\"node\":\"n0\",\"round\":6,\"step\":5,\"shards\":2}",
        "{\"schema\":1,\"node\":\"n0\",\"round\":8,\"step\":5,\"shards\":2}",
        "{\"schema\":1,\"node\":\"n0\",\"round\":7,\"step\":9007199254740993,\"shards\":2}",
        "{\"schema\":1,\"node\":\"n0\",\"round\":7,\"step\":99999999999999999999999,\"shards\":2}",
        "{\"schema\":1,\"node\":\"n0\",\"round\":7,\"step\":1e30,\"shards\":2}",
        "{\"schema\":1,\"node\":\"n0\",\"round\":7,\"step\":-2,\"shards\":0}",
        "{\"schema\":1,\"node\":\"n0\",\"round\":7,\"step\":\"5\",\"shards\":2}",
        "{\"schema\":1,\"node\":\"n0\",\"round\":7,\"step\":5,\"shards\":0}",
        "{\"schema\":1,\"node\":\"n0\",\"round\":7,\"step\":5,\"shards\":-3}",
        "{\"schema\":1,\"node\":\"n0\",\"round\":7,\"step\":5,\"shards\":65537}",
        "{\"schema\":1,\"node\":\"n0\",\"round\":7,\"step\":-1,\"shards\":2}",
        "{\"schema\":1,\"node\":\"\",\"round\":7,\"step\":5,\"shards\":2}",
        "{\"schema\":1,\"node\":\"n0\",\"node\":\"n1\",\"round\":7,\"step\":5,\"shards\":2}",
    };
    member_answer = 1;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct ckpt_pub d;
        struct ea_error e = {0};
        cr_assert_eq(accept_of(bad[i], 7, "n0", &d, &e), -EBADMSG, "accepted: %s", bad[i]);
        cr_assert(e.msg[0], "a reason for %s", bad[i]);
    }
    char big[CKPT_PUB_BYTES + 64], id[CKPT_SUM_ID_MAX + 8];
    memset(id, 'n', sizeof(id) - 1);
    id[sizeof(id) - 1] = 0;
    snprintf(big, sizeof(big), "{\"schema\":1,\"node\":\"%s\",\"round\":7,\"step\":5,\"shards\":2}",
             id);
    struct ckpt_pub d;
    struct ea_error e = {0};
    cr_assert_eq(accept_of(big, 7, id, &d, &e), -EBADMSG, "a node id over the bound");
    memset(big, ' ', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    const char *ok = "{\"schema\":1,\"node\":\"n0\",\"round\":7,\"step\":5,\"shards\":2}";
    memcpy(big, ok, strlen(ok)); /* then spaces: JSON, but over the bound */
    cr_assert_eq(accept_of(big, 7, "n0", &d, &e), -EBADMSG, "over %d bytes", CKPT_PUB_BYTES);
    cr_assert(strstr(e.msg, "bytes"), "%s", e.msg);
}

Test(ckpt_pub, only_the_coordinator_or_a_member_writes_it)
{
    const char *v = "{\"schema\":1,\"node\":\"n3\",\"round\":7,\"step\":5,\"shards\":2}";
    struct ckpt_pub d;
    struct ea_error e = {0};
    member_answer = 0;
    cr_assert_eq(accept_of(v, 7, "n3", &d, &e), 0, "the coordinator: %s", e.msg);
    cr_assert_eq(member_calls, 0, "no member check needed (no read)");
    cr_assert_eq(accept_of(v, 7, "n0", &d, &e), -EPERM, "neither the coordinator nor a member");
    cr_assert(strstr(e.msg, "'n3'"), "%s", e.msg);
    cr_assert_eq(accept_of(v, 7, "", &d, &e), -EPERM, "no coordinator known, not a member");
    member_answer = -EAGAIN;
    cr_assert_eq(accept_of(v, 7, "n0", &d, &e), -EPERM, "cannot tell: not trusted");
    member_answer = 1;
    cr_assert_eq(accept_of(v, 7, "n0", &d, &e), 0, "a member (the coordinator changed since)");
}

Test(ckpt_pub, published_when_every_member_is_in_or_at_the_deadline)
{
    cr_assert_not(ckpt_pub_due(3, 2, 1000, 1000, 3000), "one member's summary missing");
    cr_assert_not(ckpt_pub_due(3, 2, 1000, 3999, 3000));
    cr_assert(ckpt_pub_due(3, 3, 1000, 1000, 3000), "all in: at once");
    cr_assert(ckpt_pub_due(3, 2, 1000, 4000, 3000), "3 s after the round began: as it is");
    cr_assert(ckpt_pub_due(0, 0, 1000, 1000, 3000), "a round of the coordinator alone");
    /* the summaries in: those published for the round, not a node's of the round before */
    struct ckpt_summary v[3] = {{.node = "n1", .round = 4}, {.node = "n2", .round = 3},
                                {.node = "n3", .round = 5}};
    cr_assert_eq(ckpt_sum_fresh(v, 3, 4), 2);
    cr_assert_not(ckpt_pub_due(3, ckpt_sum_fresh(v, 3, 4), 1000, 1000, 3000), "n2's is older");
}

Test(ckpt_pub, the_newest_step_complete_across_the_summaries)
{
    struct ckpt_summary v[2] = {
        {.node = "n0", .n = 2, .s = {{.step = 9, .shards = 2, .n = 1, .lo = {0}, .hi = {0}},
                                     {.step = 8, .shards = 2, .n = 1, .lo = {0}, .hi = {1}}}},
        {.node = "n1", .n = 1, .s = {{.step = 9, .shards = 3, .n = 1, .lo = {1}, .hi = {2}}}},
    };
    struct ckpt_pub p;
    ckpt_pub_of(v, 2, "n0", 4, &p);
    cr_assert_eq(p.step, 8, "9 is named with two shard counts: not one checkpoint");
    cr_assert_eq(p.shards, 2);
    cr_assert_eq(p.round, 4);
    cr_assert_str_eq(p.node, "n0");
    ckpt_pub_of(v + 1, 1, "n0", 4, &p);
    cr_assert_eq(p.step, -1);
    cr_assert_eq(p.shards, 0);
}
