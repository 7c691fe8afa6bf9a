// SPDX-License-Identifier: Apache-2.0
/*
 * The checkpoint store (agent/checkpoint/, issue 39): its decisions as pure functions (bounds,
 * the memory bound, commit verification, completion, eviction), the request parser against
 * malformed input, CRC-32, and the server in this process over a real unix socket (memfds,
 * seals, the peer's uid, --checkpoint-dir written and read back, a corrupt file skipped).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoint.h"
#include "ckpt_cli.h"
#include "ckpt_pump.h"
#include "ckpt_disk.h"
#include "elastic_agent_checkpoint.h"
#include "ckpt_proto.h"
#include "ckpt_store.h"

/* ---- the store's decisions ---------------------------------------------------------------- */

static struct ckpt_store st;

static void st_fini(void)
{
    ckpt_store_clear(&st);
}

TestSuite(ckpt_store, .fini = st_fini);

static uint64_t reserve_ok(uint64_t owner, int64_t step, int shard, int shards, uint64_t len)
{
    uint64_t id = 0;
    struct ea_error e = {0};
    int r = ckpt_store_reserve(&st, owner, step, shard, shards, len, &id, &e);
    cr_assert_eq(r, 0, "reserve step %lld shard %d/%d len %llu: %d %s", (long long)step, shard,
                 shards, (unsigned long long)len, r, e.msg);
    return id;
}

static int reserve(int64_t step, int shard, int shards, uint64_t len)
{
    uint64_t id = 0;
    return ckpt_store_reserve(&st, 1, step, shard, shards, len, &id, NULL);
}

Test(ckpt_store, bounds_of_a_save)
{
    ckpt_store_init(&st, "r", 1000);
    cr_assert_eq(reserve(-1, 0, 1, 10), -EINVAL);
    cr_assert_eq(reserve(CKPT_MAX_STEP + 1, 0, 1, 10), -EINVAL);
    cr_assert_eq(reserve(1, 0, 0, 10), -EINVAL);
    cr_assert_eq(reserve(1, 0, CKPT_MAX_SHARDS + 1, 10), -EINVAL);
    cr_assert_eq(reserve(1, 2, 2, 10), -EINVAL);
    cr_assert_eq(reserve(1, -1, 2, 10), -EINVAL);
    cr_assert_eq(reserve(1, 0, 2, 10), 0);
    cr_assert_eq(reserve(1, 1, 3, 10), -EINVAL, "a step's shard count is fixed by its first save");
    cr_assert_eq(reserve(1, 0, 2, 10), -EBUSY, "the same shard is being saved");
    cr_assert_eq(st.n, 1);
}

Test(ckpt_store, memory_bound_counts_pending_saves)
{
    ckpt_store_init(&st, "r", 100);
    cr_assert_eq(reserve(1, 0, 2, 101), -ENOSPC, "larger than the bound");
    uint64_t a = reserve_ok(1, 1, 0, 2, 60);
    cr_assert_eq(reserve(1, 1, 2, 41), -ENOSPC, "60 pending + 41 > 100");
    cr_assert_eq(st.used, 60);
    ckpt_store_drop_owner(&st, 1);
    cr_assert_eq(st.used, 0, "a closed connection's pending save is given back");
    (void)a;
}

Test(ckpt_store, newest_complete_step_is_never_evicted_for_a_newer_save)
{
    ckpt_store_init(&st, "r", 100);
    uint64_t a = reserve_ok(1, 1, 0, 1, 60);
    cr_assert_eq(ckpt_store_commit(&st, 1, a, 60, true, 7, 7, NULL), 1, "step 1 complete");
    cr_assert_eq(reserve(2, 0, 1, 60), -ENOSPC, "60 held for step 1 + 60 > 100");
    int64_t step;
    int shards;
    cr_assert_eq(ckpt_store_latest(&st, &step, &shards), 0);
    cr_assert_eq(step, 1);
    cr_assert_neq(ckpt_store_find(&st, 1, 0), NULL);
}

Test(ckpt_store, a_complete_step_evicts_older_ones)
{
    ckpt_store_init(&st, "r", 130);
    uint64_t a = reserve_ok(1, 1, 0, 1, 60);
    cr_assert_eq(ckpt_store_commit(&st, 1, a, 60, true, 7, 7, NULL), 1);
    uint64_t b = reserve_ok(1, 2, 0, 1, 60);
    cr_assert_eq(st.used, 120);
    cr_assert_eq(ckpt_store_commit(&st, 1, b, 60, true, 9, 9, NULL), 1);
    cr_assert_eq(st.used, 60, "step 1 dropped once step 2 is complete");
    cr_assert_eq(ckpt_store_find(&st, 1, 0), NULL);
    cr_assert_neq(ckpt_store_find(&st, 2, 0), NULL);
    cr_assert_eq(reserve(1, 0, 1, 10), -ESTALE, "older than the newest complete step");
}

Test(ckpt_store, complete_needs_every_shard)
{
    ckpt_store_init(&st, "r", 1000);
    uint64_t a = reserve_ok(1, 5, 0, 3, 10), b = reserve_ok(1, 5, 2, 3, 10);
    cr_assert_eq(ckpt_store_commit(&st, 1, a, 10, true, 1, 1, NULL), 0);
    cr_assert_eq(ckpt_store_commit(&st, 1, b, 10, true, 1, 1, NULL), 0);
    int64_t step;
    int shards;
    cr_assert_eq(ckpt_store_latest(&st, &step, &shards), -ENOENT, "shard 1 missing");
    uint64_t c = reserve_ok(1, 5, 1, 3, 10);
    cr_assert_eq(ckpt_store_commit(&st, 1, c, 10, true, 1, 1, NULL), 1);
    cr_assert_eq(ckpt_store_latest(&st, &step, &shards), 0);
    cr_assert_eq(step, 5);
    cr_assert_eq(shards, 3);
}

Test(ckpt_store, a_resave_replaces_and_does_not_count_twice)
{
    ckpt_store_init(&st, "r", 1000);
    uint64_t a = reserve_ok(1, 5, 0, 2, 10);
    cr_assert_eq(ckpt_store_commit(&st, 1, a, 10, true, 1, 1, NULL), 0);
    uint64_t b = reserve_ok(2, 5, 0, 2, 20); /* a restarted worker saves shard 0 again */
    cr_assert_eq(ckpt_store_commit(&st, 2, b, 20, true, 3, 3, NULL), 0, "one shard of two: not complete");
    cr_assert_eq(st.used, 20);
    cr_assert_eq(ckpt_store_find(&st, 5, 0)->crc, 3);
}

Test(ckpt_store, commit_verifies_length_and_checksum)
{
    ckpt_store_init(&st, "r", 1000);
    struct ea_error e = {0};
    uint64_t a = reserve_ok(1, 1, 0, 1, 10);
    cr_assert_eq(ckpt_store_commit(&st, 1, a, 9, true, 5, 5, &e), -EBADMSG, "a short shard");
    cr_assert(strstr(e.msg, "9 bytes"), "%s", e.msg);
    cr_assert_eq(st.n, 0, "dropped");
    cr_assert_eq(st.used, 0);
    uint64_t b = reserve_ok(1, 1, 0, 1, 10);
    cr_assert_eq(ckpt_store_commit(&st, 1, b, 10, true, 5, 6, &e), -EBADMSG, "a garbled shard");
    cr_assert(strstr(e.msg, "checksum"), "%s", e.msg);
    cr_assert_eq(st.n, 0);
    int64_t step;
    int shards;
    cr_assert_eq(ckpt_store_latest(&st, &step, &shards), -ENOENT, "never complete");
    uint64_t c = reserve_ok(1, 1, 0, 1, 10);
    cr_assert_eq(ckpt_store_commit(&st, 2, c, 10, true, 5, 5, NULL), -ENOENT, "another connection's");
    cr_assert_eq(ckpt_store_commit(&st, 1, c + 100, 10, true, 5, 5, NULL), -ENOENT, "no such save");
}

Test(ckpt_store, older_incomplete_steps_make_room_for_a_newer_save)
{
    ckpt_store_init(&st, "r", 100);
    uint64_t a = reserve_ok(1, 1, 0, 2, 60); /* the other shard lives on another node */
    cr_assert_eq(ckpt_store_commit(&st, 1, a, 60, true, 1, 1, NULL), 0);
    uint64_t b = reserve_ok(1, 2, 0, 2, 60);
    cr_assert_eq(st.used, 60, "step 1 dropped for step 2");
    cr_assert_eq(ckpt_store_find(&st, 1, 0), NULL);
    (void)b;
}

/* Room is made the oldest first and only as much as needed, superseded entries before the
 * newest of a shard: a replica's newest step stays until the next one commits (the goodput bench
 * found a save's room taking every older step, replicas too: a node then briefly held no copy of
 * its dead predecessor's shard). */
Test(ckpt_store, room_is_made_the_oldest_first_keeping_each_shards_newest)
{
    ckpt_store_init(&st, "r", 25);
    uint64_t a = reserve_ok(1, 1, 1, 4, 10); /* replicas of shard 1 of 4 (no step complete) */
    cr_assert_eq(ckpt_store_commit(&st, 1, a, 10, false, 0, 0, NULL), 0);
    uint64_t b = reserve_ok(1, 2, 1, 4, 10);
    cr_assert_eq(ckpt_store_commit(&st, 1, b, 10, false, 0, 0, NULL), 0);
    reserve_ok(1, 3, 1, 4, 10);
    cr_assert_eq(ckpt_store_find(&st, 1, 1), NULL, "step 1, superseded, made the room");
    cr_assert_neq(ckpt_store_find(&st, 2, 1), NULL, "step 2, shard 1's newest, dropped too");
    cr_assert_eq(st.used, 20);
}

Test(ckpt_store, a_shards_newest_goes_only_when_nothing_older_is_left)
{
    ckpt_store_init(&st, "r", 40);
    uint64_t r1 = reserve_ok(1, 1, 1, 4, 10); /* a replica: the only copy of shard 1 */
    cr_assert_eq(ckpt_store_commit(&st, 1, r1, 10, false, 0, 0, NULL), 0);
    for (int64_t step = 2; step <= 4; step++) { /* own shard 0, three steps */
        uint64_t id = reserve_ok(1, step, 0, 4, 10);
        cr_assert_eq(ckpt_store_commit(&st, 1, id, 10, false, 0, 0, NULL), 0);
    }
    reserve_ok(1, 5, 0, 4, 10); /* 40 held: one goes */
    cr_assert_eq(ckpt_store_find(&st, 2, 0), NULL, "the oldest superseded entry goes");
    cr_assert_neq(ckpt_store_find(&st, 3, 0), NULL, "not a newer one");
    cr_assert_neq(ckpt_store_find(&st, 1, 1), NULL, "not the replica's only copy, though older");
    reserve_ok(1, 6, 2, 4, 10);
    cr_assert_eq(ckpt_store_find(&st, 3, 0), NULL);
    cr_assert_neq(ckpt_store_find(&st, 1, 1), NULL);
}

Test(ckpt_store, room_for_a_big_save_takes_as_many_entries_as_it_needs)
{
    ckpt_store_init(&st, "r", 30);
    for (int64_t step = 1; step <= 3; step++) {
        uint64_t id = reserve_ok(1, step, 0, 4, 10);
        cr_assert_eq(ckpt_store_commit(&st, 1, id, 10, false, 0, 0, NULL), 0);
    }
    reserve_ok(1, 4, 0, 4, 30);
    cr_assert_eq(st.used, 30, "the bound held: %llu bytes", (unsigned long long)st.used);
}

/* ---- the request parser -------------------------------------------------------------------- */

static int parse(const char *s, struct ckpt_req *q)
{
    return ckpt_req_parse(s, strlen(s), q, NULL);
}

Test(ckpt_proto, requests)
{
    struct ckpt_req q;
    cr_assert_eq(parse("save run-1 7 2 4 1048576", &q), 0);
    cr_assert_eq(q.op, CKPT_SAVE);
    cr_assert_str_eq(q.run, "run-1");
    cr_assert_eq(q.step, 7);
    cr_assert_eq(q.shard, 2);
    cr_assert_eq(q.shards, 4);
    cr_assert_eq(q.len, 1048576);
    cr_assert_eq(parse("commit 12 cbf43926", &q), 0);
    cr_assert_eq(q.id, 12);
    cr_assert_eq(q.crc, 0xcbf43926u);
    cr_assert_eq(parse("latest r", &q), 0);
    cr_assert_eq(q.op, CKPT_LATEST);
    cr_assert_eq(parse("load r 9007199254740992 3", &q), 0);
    cr_assert_eq(q.step, CKPT_MAX_STEP);
}

Test(ckpt_proto, malformed_requests_are_errors)
{
    const char *bad[] = {
        "", "save", "save r 1 0 1", "save r 1 0 1 10 11", "save  r 1 0 1 10", "save r -1 0 1 10",
        "save r 1 0 1 +10", "save r 9007199254740993 0 1 10", "save r 1 0 65537 10",
        "save r 1 0 1 281474976710657", "commit 1 CBF43926", "commit 1 cbf4392", "commit x cbf43926",
        "latest", "latest r ", "load r 1", "load r 1 1 1", "LOAD r 1 1", "frobnicate",
        "save rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr 1 0 1 10",
        "save r 99999999999999999999 0 1 10",
    };
    struct ckpt_req q;
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        struct ea_error e = {0};
        cr_expect_eq(ckpt_req_parse(bad[i], strlen(bad[i]), &q, &e), -EBADMSG, "'%s' parsed",
                     bad[i]);
        cr_expect(e.msg[0], "'%s': no message", bad[i]);
    }
    char nul[] = "latest r\0x";
    cr_assert_eq(ckpt_req_parse(nul, sizeof(nul) - 1, &q, NULL), -EBADMSG);
    char big[CKPT_MSG_MAX + 2];
    memset(big, 'a', sizeof(big));
    memcpy(big, "latest ", 7); /* refused for its size before any field is looked at */
    struct ea_error e = {0};
    cr_assert_eq(ckpt_req_parse(big, sizeof(big), &q, &e), -EBADMSG);
    cr_assert(strstr(e.msg, "bytes (1..512)"), "%s", e.msg);
}

Test(ckpt_proto, crc32_is_zlibs)
{
    cr_assert_eq(ckpt_crc32(0, "123456789", 9), 0xCBF43926u);
    cr_assert_eq(ckpt_crc32(ckpt_crc32(0, "1234", 4), "56789", 5), 0xCBF43926u);
    cr_assert_eq(ckpt_crc32(0, "", 0), 0);
}

/* ---- the server, over a real socket -------------------------------------------------------- */

static char tdir[256], sdir[300], pdir[300];
static struct ckpt *srv;

static void srv_init(void)
{
    snprintf(tdir, sizeof(tdir), "/tmp/ckpt-test-XXXXXX");
    cr_assert(mkdtemp(tdir));
    snprintf(sdir, sizeof(sdir), "%s/sock", tdir);
    snprintf(pdir, sizeof(pdir), "%s/disk", tdir);
}

static void srv_fini(void)
{
    ckpt_destroy(srv);
    srv = NULL;
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
    cr_expect_eq(system(cmd), 0);
}

TestSuite(ckpt_server, .init = srv_init, .fini = srv_fini, .timeout = 60);

static int64_t srv_open(uint64_t memory, const char *persist)
{
    struct ckpt_config cc = {.socket_dir = sdir, .run_id = "run", .memory = memory,
                             .persist_dir = persist, .persist_every = 1, .uid = geteuid()};
    struct ea_error e = {0};
    int64_t restored = -2;
    cr_assert_eq(ckpt_create(&cc, &srv, &restored, &e), 0, "%s", e.msg);
    return restored;
}

static int cli_connect(void)
{
    return ckpt_cli_connect(srv);
}

static int ask(int fd, const char *req, size_t reqlen, char *buf, size_t size)
{
    return ckpt_cli_ask(srv, fd, req, reqlen, buf, size);
}

static int asks(int fd, const char *req, char *buf, size_t size)
{
    return ask(fd, req, strlen(req), buf, size);
}

/* Save `data` as shard 0 of 1 of `step`: the commit's reply in buf. */
static void save(int fd, int64_t step, const void *data, size_t len, uint32_t crc, char *buf,
                 size_t size)
{
    char req[128];
    snprintf(req, sizeof(req), "save run %lld 0 1 %zu", (long long)step, len);
    int mfd = asks(fd, req, buf, size);
    cr_assert_eq(strncmp(buf, "ok ", 3), 0, "%s", buf);
    cr_assert_geq(mfd, 0);
    char id[32];
    snprintf(id, sizeof(id), "%s", buf + 3);
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    cr_assert_neq(m, MAP_FAILED);
    memcpy(m, data, len);
    munmap(m, len);
    close(mfd);
    snprintf(req, sizeof(req), "commit %s %08x", id, crc);
    cr_assert_lt(asks(fd, req, buf, size), 0);
}

Test(ckpt_server, save_then_load_the_same_sealed_bytes)
{
    srv_open(1 << 20, NULL);
    int fd = cli_connect();
    char buf[600], data[4096];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (char)(i * 7);
    save(fd, 3, data, sizeof(data), ckpt_crc32(0, data, sizeof(data)), buf, sizeof(buf));
    cr_assert_str_eq(buf, "ok 3 0");
    cr_assert_lt(asks(fd, "latest run", buf, sizeof(buf)), 0);
    cr_assert_str_eq(buf, "ok 3 1");
    int lfd = asks(fd, "load run 3 0", buf, sizeof(buf));
    cr_assert_geq(lfd, 0, "%s", buf);
    cr_assert_eq(fcntl(lfd, F_GET_SEALS) & (F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL),
                 F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
    cr_assert_eq(write(lfd, "x", 1), -1, "sealed: nobody changes the bytes");
    void *m = mmap(NULL, sizeof(data), PROT_READ, MAP_SHARED, lfd, 0);
    cr_assert_neq(m, MAP_FAILED);
    cr_assert_eq(memcmp(m, data, sizeof(data)), 0);
    munmap(m, sizeof(data));
    close(lfd);
    cr_assert_lt(asks(fd, "load run 4 0", buf, sizeof(buf)), 0);
    cr_assert_eq(strncmp(buf, "err ENOENT", 10), 0, "%s", buf);
    close(fd);
}

Test(ckpt_server, a_garbled_commit_is_refused_and_never_served)
{
    srv_open(1 << 20, NULL);
    int fd = cli_connect();
    char buf[600], data[1000] = {1, 2, 3};
    save(fd, 1, data, sizeof(data), ckpt_crc32(0, data, sizeof(data)) ^ 1, buf, sizeof(buf));
    cr_assert_eq(strncmp(buf, "err EBADMSG", 11), 0, "%s", buf);
    asks(fd, "latest run", buf, sizeof(buf));
    cr_assert_str_eq(buf, "none");
    cr_assert_lt(asks(fd, "load run 1 0", buf, sizeof(buf)), 0);
    cr_assert_eq(strncmp(buf, "err ENOENT", 10), 0, "%s", buf);
    struct ckpt_note n;
    bool bad = false;
    while (ckpt_next_note(srv, &n) > 0)
        bad |= n.kind == CKPT_NOTE_BAD;
    cr_assert(bad);
    close(fd);
}

Test(ckpt_server, a_shard_still_mapped_writable_is_not_committed)
{
    srv_open(1 << 20, NULL);
    int fd = cli_connect();
    char buf[600];
    int mfd = asks(fd, "save run 1 0 1 4096", buf, sizeof(buf));
    cr_assert_geq(mfd, 0, "%s", buf);
    void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    memset(m, 5, 4096);
    char req[64];
    snprintf(req, sizeof(req), "commit %s %08x", buf + 3, ckpt_crc32(0, m, 4096));
    asks(fd, req, buf, sizeof(buf));
    cr_assert_eq(strncmp(buf, "err EBUSY", 9), 0, "%s", buf);
    munmap(m, 4096);
    asks(fd, req, buf, sizeof(buf));
    cr_assert_str_eq(buf, "ok 1 0", "unmapped: the retry commits");
    cr_assert_eq(ftruncate(mfd, 10), -1, "its size is sealed from the start");
    close(mfd);
    close(fd);
}

Test(ckpt_server, bad_input_is_an_error_reply_never_a_crash)
{
    srv_open(1 << 20, NULL);
    int fd = cli_connect();
    char buf[600], big[CKPT_MSG_MAX + 100];
    memset(big, 'x', sizeof(big));
    ask(fd, big, sizeof(big), buf, sizeof(buf));
    cr_assert_eq(strncmp(buf, "err EBADMSG", 11), 0, "%s", buf);
    ask(fd, "save run 1 0 1 10\0", 18, buf, sizeof(buf));
    cr_assert_eq(strncmp(buf, "err EBADMSG", 11), 0, "%s", buf);
    asks(fd, "save run 1 5 2 10", buf, sizeof(buf));
    cr_assert_eq(strncmp(buf, "err EINVAL", 10), 0, "%s", buf);
    asks(fd, "save other 1 0 1 10", buf, sizeof(buf));
    cr_assert_eq(strncmp(buf, "err EACCES", 10), 0, "another run's save: %s", buf);
    asks(fd, "latest other", buf, sizeof(buf));
    cr_assert_eq(strncmp(buf, "err EACCES", 10), 0, "%s", buf);
    asks(fd, "commit 99 00000000", buf, sizeof(buf));
    cr_assert_eq(strncmp(buf, "err ENOENT", 10), 0, "%s", buf);
    asks(fd, "save run 1 0 1 2000000", buf, sizeof(buf));
    cr_assert_eq(strncmp(buf, "err ENOSPC", 10), 0, "%s", buf);
    struct ckpt_note n;
    bool nofit = false;
    while (ckpt_next_note(srv, &n) > 0)
        nofit |= n.kind == CKPT_NOTE_NOFIT;
    cr_assert(nofit, "a save that does not fit is an event");
    asks(fd, "latest run", buf, sizeof(buf));
    cr_assert_str_eq(buf, "none", "still serving");
    close(fd);
}

Test(ckpt_server, a_peer_of_another_uid_is_refused)
{
    srv_open(1 << 20, NULL);
    cr_assert_eq(chmod(tdir, 0755), 0);
    cr_assert_eq(chmod(sdir, 0777), 0);
    cr_assert_eq(chmod(ckpt_socket_path(srv), 0777), 0); /* the 0700 directory is the first fence; this is the second */
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(65534) < 0 || setuid(65534) < 0)
            _exit(2);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", ckpt_socket_path(srv));
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
            _exit(3);
        if (send(fd, "latest run", 10, MSG_NOSIGNAL) < 0)
            _exit(0); /* closed already */
        char b[600];
        ssize_t n = recv(fd, b, sizeof(b), 0);
        _exit(n <= 0 ? 0 : 1); /* any reply is a failure */
    }
    int status = -1;
    for (int i = 0; i < 1000; i++) {
        pump_ckpt(srv, 0);
        if (waitpid(pid, &status, WNOHANG) == pid)
            break;
        pump_ckpt(srv, 10); /* work, or the child's exit */
    }
    cr_assert(WIFEXITED(status), "status %d", status);
    cr_assert_eq(WEXITSTATUS(status), 0, "a peer of another uid got an answer (%d)",
                 WEXITSTATUS(status));
    struct ckpt_note n;
    bool refused = false;
    while (ckpt_next_note(srv, &n) > 0)
        refused |= n.kind == CKPT_NOTE_REFUSED;
    cr_assert(refused);
}

/* Serve until the writer has reported `count` shards written. */
static void wait_persisted(int count)
{
    int seen = 0;
    for (int i = 0; i < 1000 && seen < count; i++) {
        pump_ckpt(srv, 10);
        struct ckpt_note n;
        while (ckpt_next_note(srv, &n) > 0) {
            cr_assert_neq(n.kind, CKPT_NOTE_PERSIST_FAILED, "%s", n.message);
            seen += n.kind == CKPT_NOTE_PERSISTED;
        }
    }
    cr_assert_eq(seen, count);
}

Test(ckpt_server, checkpoint_dir_is_read_back_and_a_corrupt_step_skipped)
{
    srv_open(1 << 20, pdir);
    int fd = cli_connect();
    char buf[600], d1[3000], d2[3000];
    memset(d1, 1, sizeof(d1));
    memset(d2, 2, sizeof(d2));
    save(fd, 1, d1, sizeof(d1), ckpt_crc32(0, d1, sizeof(d1)), buf, sizeof(buf));
    wait_persisted(1);
    save(fd, 2, d2, sizeof(d2), ckpt_crc32(0, d2, sizeof(d2)), buf, sizeof(buf));
    wait_persisted(1);
    close(fd);
    ckpt_destroy(srv);
    srv = NULL;
    /* the newest step comes back */
    cr_assert_eq(srv_open(1 << 20, pdir), 2);
    fd = cli_connect();
    int lfd = asks(fd, "load run 2 0", buf, sizeof(buf));
    cr_assert_geq(lfd, 0, "%s", buf);
    void *m = mmap(NULL, sizeof(d2), PROT_READ, MAP_SHARED, lfd, 0);
    cr_assert_eq(memcmp(m, d2, sizeof(d2)), 0);
    munmap(m, sizeof(d2));
    close(lfd);
    save(fd, 3, d1, sizeof(d1), ckpt_crc32(0, d1, sizeof(d1)), buf, sizeof(buf));
    wait_persisted(1);
    close(fd);
    ckpt_destroy(srv);
    srv = NULL;
    /* step 1 was pruned once step 3 was on disk (step 2 is kept as a fallback) */
    char path[400];
    struct stat sb;
    snprintf(path, sizeof(path), "%s/run/step-%020d", pdir, 1);
    cr_assert_eq(stat(path, &sb), -1, "step 1 pruned");
    /* one byte of step 3's data garbled: step 3 is skipped, the older whole step 2 read back */
    snprintf(path, sizeof(path), "%s/run/step-%020d/shard-0-of-1", pdir, 3);
    int f = open(path, O_RDWR);
    cr_assert_geq(f, 0, "%s", path);
    cr_assert_eq(pwrite(f, "\x7f", 1, 200), 1);
    close(f);
    cr_assert_eq(srv_open(1 << 20, pdir), 2, "a corrupt step is never read back: the older one");
    struct ckpt_note n;
    bool skipped = false;
    while (ckpt_next_note(srv, &n) > 0)
        skipped |= strstr(n.message, "skipped") != NULL;
    cr_assert(skipped);
}

/* include/elastic_agent_checkpoint.h, the C workers' helper, in a child against this server */
Test(ckpt_server, the_c_header_saves_and_loads)
{
    srv_open(1 << 20, NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("ELASTIC_AGENT_CHECKPOINT_SOCKET", ckpt_socket_path(srv), 1);
        setenv("TORCHELASTIC_RUN_ID", "run", 1);
        setenv("RANK", "1", 1);
        setenv("WORLD_SIZE", "2", 1);
        char err[256], a[5000], b[3000];
        memset(a, 'a', sizeof(a));
        memset(b, 'b', sizeof(b));
        int64_t step = -1;
        int shards = 0;
        if (ea_ckpt_latest(&step, &shards, err, sizeof(err)) != 0)
            _exit(10);
        if (ea_ckpt_save(7, a, sizeof(a), -1, 0, err, sizeof(err)) < 0 ||
            ea_ckpt_save(7, b, sizeof(b), 0, 0, err, sizeof(err)) < 0)
            _exit(11);
        if (ea_ckpt_latest(&step, &shards, err, sizeof(err)) != 1 || step != 7 || shards != 2)
            _exit(12);
        const void *p = NULL;
        size_t n = 0;
        if (ea_ckpt_load(7, -1, &p, &n, err, sizeof(err)) < 0 || n != sizeof(a) ||
            memcmp(p, a, n) != 0)
            _exit(13);
        ea_ckpt_unmap(p, n);
        if (ea_ckpt_save(8, a, 2 << 20, -1, 0, err, sizeof(err)) != -ENOSPC || !strstr(err, "fit"))
            _exit(14);
        _exit(0);
    }
    int status = -1;
    for (int i = 0; i < 1000; i++) {
        pump_ckpt(srv, 0);
        if (waitpid(pid, &status, WNOHANG) == pid)
            break;
        pump_ckpt(srv, 10);
    }
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the C helper failed: status %d",
              status);
}

/* A commit without a declared checksum ('-'): the seal vouches; the writer computes the CRC for
 * the file, and one that was known re-checks it (bytes changed in memory are never written). */
Test(ckpt_server, the_writer_computes_or_rechecks_the_checksum)
{
    srv_open(1 << 20, pdir);
    int fd = cli_connect();
    char buf[600];
    int mfd = asks(fd, "save run 1 0 1 5", buf, sizeof(buf));
    cr_assert_geq(mfd, 0, "%s", buf);
    cr_assert_eq(pwrite(mfd, "hello", 5, 0), 5);
    close(mfd);
    char req[64];
    snprintf(req, sizeof(req), "commit %s -", buf + 3);
    asks(fd, req, buf, sizeof(buf));
    cr_assert_str_eq(buf, "ok 1 0");
    int lfd = asks(fd, "load run 1 0", buf, sizeof(buf));
    cr_assert_str_eq(buf, "ok 5 -", "no checksum known yet");
    wait_persisted(1);
    close(fd);
    /* the file carries the CRC the writer computed: read back whole */
    ckpt_destroy(srv);
    srv = NULL;
    cr_assert_eq(srv_open(1 << 20, pdir), 1);
    fd = cli_connect();
    close(asks(fd, "load run 1 0", buf, sizeof(buf)));
    cr_assert_str_eq(buf, "ok 5 3610a686", "zlib.crc32(b'hello')");
    close(fd);
    struct ckpt_shard_hdr h = {.run = "run", .step = 2, .shard = 0, .shards = 1, .len = 5,
                               .crc = 0x3610a686 ^ 1, .crc_known = true};
    struct ea_error e = {0};
    cr_assert_eq(ckpt_disk_write(pdir, &h, lfd, &e), -EBADMSG, "%s", e.msg);
    cr_assert(strstr(e.msg, "changed in memory"), "%s", e.msg);
    h.crc ^= 1;
    cr_assert_eq(ckpt_disk_write(pdir, &h, lfd, &e), 0, "%s", e.msg);
    close(lfd);
}

/* A whole shard file of another run, put under this run's directory: never read back. */
Test(ckpt_server, another_runs_file_is_never_read_back)
{
    int mfd = memfd_create("t", MFD_CLOEXEC);
    cr_assert_eq(pwrite(mfd, "other", 5, 0), 5);
    struct ckpt_shard_hdr h = {.run = "other", .step = 4, .shard = 0, .shards = 1, .len = 5};
    struct ea_error e = {0};
    cr_assert_eq(mkdir(pdir, 0700), 0);
    cr_assert_eq(ckpt_disk_write(pdir, &h, mfd, &e), 0, "%s", e.msg);
    close(mfd);
    char from[400], to[400];
    snprintf(from, sizeof(from), "%s/other", pdir);
    snprintf(to, sizeof(to), "%s/run", pdir);
    cr_assert_eq(rename(from, to), 0);
    cr_assert_eq(srv_open(1 << 20, pdir), -1, "a shard of run 'other' is not run 'run''s");
}
