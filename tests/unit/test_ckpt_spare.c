// SPDX-License-Identifier: Apache-2.0
/* The spare memfd of the checkpoint store (docs/checkpoint.md "The spare", issue 39's save
 * stall): its decisions as pure functions of the store (counted in the bound, dropped first,
 * handed out once, only to a save that fits in it), and the server in-process, the agent's loop
 * passes made by hand (no clock): a save after a commit gets a memfd backed before it writes. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "ckpt_cli.h"
#include "ckpt_store.h"

/* ---- the store's decisions ---------------------------------------------------------------- */

static struct ckpt_store st;

static void st_fini(void)
{
    ckpt_store_clear(&st);
}

TestSuite(ckpt_spare_store, .fini = st_fini);

static uint64_t reserve_ok(uint64_t owner, int64_t step, int shard, int shards, uint64_t len)
{
    uint64_t id = 0;
    struct ea_error e = {0};
    int r = ckpt_store_reserve(&st, owner, step, shard, shards, len, &id, &e);
    cr_assert_eq(r, 0, "reserve step %lld: %d %s", (long long)step, r, e.msg);
    return id;
}

static int reserve(int64_t step, int shard, int shards, uint64_t len)
{
    uint64_t id = 0;
    return ckpt_store_reserve(&st, 1, step, shard, shards, len, &id, NULL);
}

/* The spare (docs/checkpoint.md "The spare"): a memfd of its own, so that closing it is real. */
static int spare_fd(void)
{
    int fd = memfd_create("spare-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    cr_assert_geq(fd, 0);
    return fd;
}

static int reserve_save(uint64_t owner, int64_t step, int shard, int shards, uint64_t len, int *fd)
{
    uint64_t id = 0;
    return ckpt_store_reserve_save(&st, owner, step, shard, shards, len, &id, fd, NULL);
}

Test(ckpt_spare_store, the_spare_counts_in_the_bound_and_is_dropped_first)
{
    ckpt_store_init(&st, "r", 1000);
    uint64_t a = reserve_ok(1, 1, 0, 1, 400);
    cr_assert_eq(ckpt_store_commit(&st, 1, a, 400, false, 0, 0, NULL), 1, "step 1 complete");
    uint64_t b = reserve_ok(1, 2, 0, 2, 200); /* a partial step 2: droppable for a newer one */
    cr_assert_eq(ckpt_store_commit(&st, 1, b, 200, false, 0, 0, NULL), 0);
    cr_assert_eq(ckpt_store_spare_begin(&st, 401), -ENOSPC,
                 "600 held + 401 > 1000: a spare never drops a step to fit");
    cr_assert_neq(ckpt_store_find(&st, 2, 0), NULL);
    cr_assert_eq(ckpt_store_spare_begin(&st, 300), 0, "600 held + 300 fits");
    ckpt_store_spare_set(&st, spare_fd());
    cr_assert_eq(ckpt_store_spare_begin(&st, 10), -EEXIST, "one spare");
    cr_assert_eq(reserve(3, 0, 1, 101), 0, "its room is 1000 - 600 held - 300 spare: the spare goes");
    cr_assert_eq(st.spare_len, 0);
    cr_assert_eq(st.spare_fd, -1);
    cr_assert_neq(ckpt_store_find(&st, 2, 0), NULL, "dropped first: the partial step stays");
    cr_assert_eq(st.used, 701);
    cr_assert_eq(ckpt_store_spare_begin(&st, 300), -ENOSPC, "701 held + 300 > 1000");
    cr_assert_eq(ckpt_store_spare_begin(&st, 299), 0);
    ckpt_store_spare_set(&st, spare_fd());
    cr_assert_eq(reserve(4, 0, 1, 300), 0, "a replica needs 300: the spare, then step 2, go");
    cr_assert_eq(st.spare_fd, -1);
    cr_assert_eq(ckpt_store_find(&st, 2, 0), NULL);
    cr_assert_leq(st.used, 1000);
}

/* A memfd the store drops (a newer step complete, the spare making room) is closed only by
 * ckpt_store_reap, after the reply to the request that dropped it: closing one frees its pages,
 * tens of ms for 256 MB, which the worker waiting on that reply would otherwise wait for. */
Test(ckpt_spare_store, dropped_memfds_are_closed_after_the_reply_not_during_it)
{
    ckpt_store_init(&st, "r", 1000);
    uint64_t a = reserve_ok(1, 1, 0, 1, 400);
    int fa = spare_fd();
    ckpt_store_set_fd(&st, a, fa);
    cr_assert_eq(ckpt_store_commit(&st, 1, a, 400, false, 0, 0, NULL), 1);
    uint64_t b = reserve_ok(1, 2, 0, 1, 400);
    ckpt_store_set_fd(&st, b, spare_fd());
    cr_assert_eq(ckpt_store_commit(&st, 1, b, 400, false, 0, 0, NULL), 1, "step 2 complete");
    cr_assert_eq(ckpt_store_find(&st, 1, 0), NULL, "step 1 dropped");
    cr_assert_eq(st.used, 400, "counted out at once");
    cr_assert_geq(fcntl(fa, F_GETFD), 0, "closed in the commit itself");
    ckpt_store_reap(&st);
    cr_assert_lt(fcntl(fa, F_GETFD), 0, "not closed by the reap");
    cr_assert_eq(errno, EBADF);
}

Test(ckpt_spare_store, the_spare_is_handed_out_once_to_a_save_that_fits_in_it)
{
    ckpt_store_init(&st, "r", 1000);
    int fd = -2;
    cr_assert_eq(reserve_save(1, 1, 0, 2, 100, &fd), 0);
    cr_assert_eq(fd, -1, "no spare yet: a fresh memfd");
    cr_assert_eq(ckpt_store_spare_begin(&st, 100), 0);
    int sp = spare_fd();
    ckpt_store_spare_set(&st, sp);
    cr_assert_eq(reserve(2, 0, 1, 100), 0, "a replica or a fetch never takes it");
    cr_assert_eq(st.spare_fd, sp);
    cr_assert_eq(reserve_save(1, 1, 1, 2, 101, &fd), 0);
    cr_assert_eq(fd, -1, "101 bytes do not fit in a spare of 100: a fresh memfd");
    cr_assert_eq(st.spare_fd, sp, "and the spare stays");
    cr_assert_eq(st.used, 301);
    cr_assert_eq(reserve_save(2, 3, 0, 2, 60, &fd), 0);
    cr_assert_eq(fd, sp, "60 bytes fit in it: the spare is handed over");
    cr_assert_eq(st.used, 361, "counted at the save's length, the spare's room given back");
    cr_assert_eq(st.spare_len, 0);
    ckpt_store_set_fd(&st, st.e[st.n - 1].id, fd); /* the save's now: closed with its entry */
    cr_assert_eq(reserve_save(3, 3, 1, 2, 60, &fd), 0);
    cr_assert_eq(fd, -1, "handed out once: the next save gets a fresh memfd");
    cr_assert_eq(ckpt_store_spare_begin(&st, 100), 0);
    int sp2 = spare_fd();
    ckpt_store_spare_set(&st, sp2);
    cr_assert_eq(st.spare_fd, sp2, "a new spare is a new memfd, never the one handed out");
    cr_assert_eq(reserve_save(4, 4, 0, 1, 100, &fd), 0);
    cr_assert_eq(fd, sp2);
    ckpt_store_set_fd(&st, st.e[st.n - 1].id, fd);
}

/* ---- the server: a save after a commit ------------------------------------------------------ */

static char tdir[256], sdir[300];
static struct ckpt *srv;

static void srv_init(void)
{
    snprintf(tdir, sizeof(tdir), "/tmp/ckpt-spare-XXXXXX");
    cr_assert(mkdtemp(tdir));
    snprintf(sdir, sizeof(sdir), "%s/sock", tdir);
}

static void srv_fini(void)
{
    ckpt_destroy(srv);
    srv = NULL;
    rmdir(tdir);
}

TestSuite(ckpt_spare, .init = srv_init, .fini = srv_fini, .timeout = 60);

static void srv_open(uint64_t memory)
{
    struct ckpt_config cc = {.socket_dir = sdir, .run_id = "run", .memory = memory,
                             .uid = geteuid()};
    struct ea_error e = {0};
    int64_t restored = -2;
    cr_assert_eq(ckpt_create(&cc, &srv, &restored, &e), 0, "%s", e.msg);
}

static int asks(int fd, const char *req, char *buf, size_t size)
{
    return ckpt_cli_ask(srv, fd, req, strlen(req), buf, size);
}

/* Ask for a save: its memfd, its id in id[]. */
static int save_open(int fd, int64_t step, int shard, int shards, size_t len, char id[32])
{
    char req[128], buf[600];
    snprintf(req, sizeof(req), "save run %lld %d %d %zu", (long long)step, shard, shards, len);
    int mfd = asks(fd, req, buf, sizeof(buf));
    cr_assert_eq(strncmp(buf, "ok ", 3), 0, "%s", buf);
    cr_assert_geq(mfd, 0);
    snprintf(id, 32, "%s", buf + 3);
    return mfd;
}

/* Write `data` into the save's memfd as a worker does (pwrite), close it, commit it. */
static void save_commit(int fd, int mfd, const char *id, const void *data, size_t len)
{
    char req[64], buf[600];
    for (size_t off = 0; off < len;) {
        ssize_t n = pwrite(mfd, (const char *)data + off, len - off, (off_t)off);
        cr_assert_gt(n, 0, "%s", strerror(errno));
        off += (size_t)n;
    }
    close(mfd);
    snprintf(req, sizeof(req), "commit %s -", id);
    asks(fd, req, buf, sizeof(buf));
    cr_assert_eq(strncmp(buf, "ok ", 3), 0, "%s", buf);
}

/* The agent's loop passes until the spare is backed (one piece each; no clock involved). */
static int spare_passes(void)
{
    int passes = 0;
    for (; passes < 64 && (passes == 0 || ckpt_spare_wake(srv, 7) >= 0); passes++)
        ckpt_spare_step(srv);
    cr_assert_lt(ckpt_spare_wake(srv, 7), 0, "the spare is backed");
    return passes;
}

static uint64_t backed(int mfd)
{
    struct stat sb;
    cr_assert_eq(fstat(mfd, &sb), 0);
    return (uint64_t)sb.st_blocks * 512;
}

Test(ckpt_spare, a_save_after_a_commit_gets_a_memfd_backed_ahead_of_it)
{
    const size_t len = (size_t)CKPT_SPARE_PIECE + (4u << 20); /* two pieces */
    srv_open(4 * (uint64_t)len);
    const struct ckpt_store *s = ckpt_store_of(srv);
    int fd = ckpt_cli_connect(srv), fd2 = ckpt_cli_connect(srv);
    char *data = malloc(len), id[32];
    cr_assert(data);
    memset(data, 0x5a, len);
    int mfd = save_open(fd, 1, 0, 1, len, id);
    cr_assert_eq(backed(mfd), 0, "the first save: a fresh memfd (no length known yet)");
    save_commit(fd, mfd, id, data, len);
    cr_assert_eq(s->spare_len, 0, "not made inside the request the worker waits on");
    ckpt_spare_step(srv);
    cr_assert_eq(s->spare_len, len, "the committed save's length, counted in the bound");
    cr_assert_eq(s->spare_done, CKPT_SPARE_PIECE, "one bounded piece a pass");
    cr_assert_eq(ckpt_spare_wake(srv, 7), 7, "more to do: the loop comes back at once");
    cr_assert_eq(spare_passes(), 1);
    cr_assert_eq(s->spare_done, len);

    mfd = save_open(fd, 2, 0, 1, len, id);
    struct stat sb;
    cr_assert_eq(fstat(mfd, &sb), 0);
    cr_assert_eq((size_t)sb.st_size, len);
    cr_assert_geq(backed(mfd), len, "backed before the worker writes a byte");
    cr_assert_eq(fcntl(mfd, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_GROW), F_SEAL_SHRINK | F_SEAL_GROW);
    cr_assert_eq(s->spare_len, 0, "handed over");
    char *m = mmap(NULL, len, PROT_READ, MAP_SHARED, mfd, 0);
    cr_assert_neq(m, MAP_FAILED);
    size_t nonzero = 0;
    for (size_t i = 0; i < len; i++)
        nonzero += m[i] != 0;
    munmap(m, len);
    cr_assert_eq(nonzero, 0, "a spare holds no bytes of an earlier save");

    char id2[32];
    int mfd2 = save_open(fd2, 3, 0, 1, len, id2); /* another worker, before a new spare */
    struct stat sb2;
    cr_assert_eq(fstat(mfd2, &sb2), 0);
    cr_assert_neq(sb2.st_ino, sb.st_ino, "never one memfd to two saves");
    cr_assert_eq(backed(mfd2), 0);
    close(mfd2);

    memset(data, 0x6b, len);
    save_commit(fd, mfd, id, data, len);
    int lfd = asks(fd, "load run 2 0", id, sizeof(id));
    cr_assert_geq(lfd, 0, "%s", id);
    m = mmap(NULL, len, PROT_READ, MAP_SHARED, lfd, 0);
    cr_assert_neq(m, MAP_FAILED);
    cr_assert_eq(memcmp(m, data, len), 0, "the bytes written into the spare are the step's");
    munmap(m, len);
    close(lfd);
    free(data);
    close(fd);
    close(fd2);
}

Test(ckpt_spare, a_save_larger_than_the_spare_gets_a_fresh_memfd)
{
    const size_t small = 1u << 20, big = 2u << 20, less = 512u << 10;
    srv_open(16u << 20);
    const struct ckpt_store *s = ckpt_store_of(srv);
    int fd = ckpt_cli_connect(srv);
    char *data = calloc(1, big), id[32];
    cr_assert(data);
    save_commit(fd, save_open(fd, 1, 0, 1, small, id), id, data, small);
    spare_passes();
    int sp = s->spare_fd;
    cr_assert_eq(s->spare_len, small);
    int mfd = save_open(fd, 2, 0, 1, big, id);
    cr_assert_eq(backed(mfd), 0, "2 MiB do not fit in a spare of 1 MiB: a fresh memfd");
    cr_assert_eq(s->spare_fd, sp, "the spare stays for a save it fits");
    save_commit(fd, mfd, id, data, big);
    spare_passes(); /* the saves grew: a spare of their length instead */
    cr_assert_eq(s->spare_len, big);
    mfd = save_open(fd, 3, 0, 1, less, id);
    struct stat sb;
    cr_assert_eq(fstat(mfd, &sb), 0);
    cr_assert_eq((size_t)sb.st_size, less, "cut down to the save's length");
    cr_assert_geq(backed(mfd), less);
    cr_assert_lt(backed(mfd), big, "the pages past it are freed");
    save_commit(fd, mfd, id, data, less);
    free(data);
    close(fd);
}
