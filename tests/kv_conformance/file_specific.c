// SPDX-License-Identifier: Apache-2.0
/*
 * File-backend tests beyond the conformance suite: what only several processes sharing one
 * directory can show — a SIGKILLed owner's lease expiring for another process's watcher, inotify
 * wake-ups across processes, the flock, crash leftovers, corrupt/foreign snapshots, snapshots
 * from another boot. Waits are poll() with deadlines, never sleeps.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ea_time.h"
#include "kvstore.h"
#include "kvtest.h"

static struct kvt_ctx ctx;
static char snap[600], tmp[600], lockp[600];

static void init(void)
{
    kvt_ctx_init(&ctx, "file");
    snprintf(ctx.path, sizeof(ctx.path), "%s/store", ctx.dir);
    ctx.cfg.backend = "file";
    ctx.cfg.state_dir = ctx.path;
    snprintf(snap, sizeof(snap), "%s/snapshot.json", ctx.path);
    snprintf(tmp, sizeof(tmp), "%s/snapshot.json.tmp", ctx.path);
    snprintf(lockp, sizeof(lockp), "%s/lock", ctx.path);
}

static void fini(void)
{
    kvt_ctx_fini(&ctx);
}

TestSuite(file_kv, .init = init, .fini = fini, .timeout = 30);

static struct kv *open_kv(void)
{
    struct kv *kv = NULL;
    struct ea_error err = {0};
    int r = kv_open(&ctx.cfg, &kv, &err);
    cr_assert_eq(r, 0, "open: %s (%s)", kv_strerror(r), err.msg);
    return kv;
}

static int64_t watch(struct kv *kv, const char *prefix, int64_t from)
{
    int64_t w = 0;
    struct ea_error err = {0};
    cr_assert_eq(kv_watch(kv, prefix, from, &w, &err), 0, "watch: %s", err.msg);
    return w;
}

/* Replace `path` atomically with `len` bytes, the way another writer would. */
static void replace_file(const char *path, const char *data, size_t len)
{
    char t[700];
    snprintf(t, sizeof(t), "%s.test", path);
    FILE *fp = fopen(t, "w");
    cr_assert_not_null(fp);
    cr_assert_eq(fwrite(data, 1, len, fp), len);
    cr_assert_eq(fclose(fp), 0);
    cr_assert_eq(rename(t, path), 0);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "r");
    cr_assert_not_null(fp, "open %s", path);
    char *buf = malloc(1 << 22);
    *len = fread(buf, 1, (1 << 22) - 1, fp);
    buf[*len] = '\0';
    fclose(fp);
    return buf;
}

static bool readable_within(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1;
}

Test(file_kv, state_dir_is_created_0700_with_parents)
{
    snprintf(ctx.path, sizeof(ctx.path), "%s/a/b/c", ctx.dir);
    struct kv *kv = open_kv();
    const char *dirs[] = {"a", "a/b", "a/b/c"};
    for (size_t i = 0; i < 3; i++) {
        char p[700];
        snprintf(p, sizeof(p), "%s/%s", ctx.dir, dirs[i]);
        struct stat st;
        cr_assert_eq(stat(p, &st), 0, "%s missing", p);
        cr_assert(S_ISDIR(st.st_mode));
        cr_assert_eq(st.st_mode & 0777, 0700, "%s has mode %o", p, st.st_mode & 0777);
    }
    kv_close(kv);
}

Test(file_kv, sigkilled_owner_lease_expires_for_a_watcher_in_another_process)
{
    struct kv *kv = open_kv();
    int64_t w = watch(kv, "/live/", 0);
    int ready[2];
    cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        struct kv *mine = NULL;
        int64_t lease = 0;
        if (kv_open(&ctx.cfg, &mine, NULL) < 0 || kv_lease_grant(mine, 300, &lease, NULL) < 0 ||
            kv_put(mine, "/live/node", "me", 2, lease, NULL, NULL) < 0)
            _exit(2);
        if (write(ready[1], "r", 1) != 1)
            _exit(3);
        for (;;)
            pause(); /* until SIGKILL: no close, no revoke */
    }
    close(ready[1]);
    cr_assert(readable_within(ready[0], 5000), "child never got ready");
    int64_t t_ready = ea_now_ms();
    char c;
    cr_assert_eq(read(ready[0], &c, 1), 1, "child failed before ready");
    close(ready[0]);
    cr_assert_eq(kill(pid, SIGKILL), 0);
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

    /* Nobody else touches the store now: only this handle's lease timer can expire the key. */
    struct kvt_events acc = {0};
    kvt_wait_events(kv, w, &acc, 2, 3000);
    int64_t took = ea_now_ms() - t_ready;
    cr_assert_eq(acc.n, 2, "got %zu events", acc.n);
    cr_assert_eq(acc.ev[0].type, KV_EVENT_PUT);
    cr_assert_eq(acc.ev[1].type, KV_EVENT_DELETE);
    cr_assert_str_eq(acc.ev[1].entry.key, "/live/node");
    cr_assert_leq(took, 300 + 1000, "expiry seen only after %lld ms", (long long)took);
    kvt_events_clear(&acc);

    struct kv *fresh = open_kv();
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(fresh, "/live/node", &e, NULL), KV_ENOTFOUND);
    kv_close(fresh);
    kv_close(kv);
}

Test(file_kv, a_write_in_another_process_wakes_the_watcher_through_inotify)
{
    struct kv *kv = open_kv();
    int64_t w = watch(kv, "/w/", 0);
    struct kvt_events acc = {0};
    kvt_wait_events(kv, w, &acc, 0, 0);
    int fd = kv_event_fd(kv);
    cr_assert(kvt_fd_quiet(fd, 100), "event fd readable before anyone wrote");

    int go[2];
    cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        struct kv *mine = NULL;
        char c;
        close(go[1]);
        if (kv_open(&ctx.cfg, &mine, NULL) < 0 || read(go[0], &c, 1) != 1 ||
            kv_put(mine, "/w/x", "1", 1, 0, NULL, NULL) < 0)
            _exit(2);
        kv_close(mine);
        _exit(0);
    }
    close(go[0]);
    cr_assert_eq(write(go[1], "g", 1), 1);
    close(go[1]);
    /* no read_events before this poll: only the other process's rename can wake it */
    cr_assert(readable_within(fd, 3000), "watcher not woken by another process's write");
    kvt_wait_events(kv, w, &acc, 1, 3000);
    cr_assert_eq(acc.n, 1);
    cr_assert_str_eq(acc.ev[0].entry.key, "/w/x");
    kvt_events_clear(&acc);
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer failed (%d)", st);
    kv_close(kv);
}

Test(file_kv, every_op_waits_for_the_directory_lock)
{
    struct kv *kv = open_kv();
    int lk = open(lockp, O_RDWR | O_CLOEXEC);
    cr_assert_geq(lk, 0);
    cr_assert_eq(flock(lk, LOCK_EX), 0);
    int done[2];
    cr_assert_eq(pipe2(done, O_CLOEXEC), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        struct kv *mine = NULL;
        close(lk); /* shares our lock's open file: must not hold it in the child */
        int r = kv_open(&ctx.cfg, &mine, NULL);
        if (r == 0)
            r = kv_put(mine, "/l/k", "1", 1, 0, NULL, NULL);
        _exit(r == 0 && write(done[1], "d", 1) == 1 ? 0 : 2);
    }
    close(done[1]);
    cr_assert(!readable_within(done[0], 300), "an op completed while the lock was held");
    cr_assert_eq(flock(lk, LOCK_UN), 0);
    cr_assert(readable_within(done[0], 3000), "op did not complete after unlock");
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(done[0]);
    close(lk);
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/l/k", &e, NULL), 0);
    kv_entry_clear(&e);
    kv_close(kv);
}

Test(file_kv, handles_share_one_revision_sequence)
{
    struct kv *a = open_kv(), *b = open_kv();
    int64_t wa = watch(a, "/s/", 0);
    int64_t last = 0;
    for (int i = 0; i < 10; i++) {
        struct kv *kv = i % 2 ? b : a;
        char key[16];
        snprintf(key, sizeof(key), "/s/%d", i);
        int64_t r = kvt_put(kv, key, "v");
        cr_assert_gt(r, last, "revision went from %lld to %lld", (long long)last, (long long)r);
        last = r;
        struct kv_entry e = {0};
        cr_assert_eq(kv_get(i % 2 ? a : b, key, &e, NULL), 0, "other handle misses %s", key);
        kv_entry_clear(&e);
    }
    struct kvt_events acc = {0};
    kvt_wait_events(a, wa, &acc, 10, 3000);
    cr_assert_eq(acc.n, 10, "watch saw %zu of 10 writes", acc.n);
    kvt_events_clear(&acc);
    kv_close(a);
    kv_close(b);
}

Test(file_kv, keepalive_in_one_handle_defers_expiry_in_another)
{
    struct kv *owner = open_kv(), *watcher = open_kv();
    int64_t w = watch(watcher, "/ka/", 0);
    int64_t lease = 0;
    cr_assert_eq(kv_lease_grant(owner, 300, &lease, NULL), 0);
    kvt_put_lease(owner, "/ka/node", "1", lease);
    struct kvt_events acc = {0};
    int64_t until = ea_now_ms() + 1000;
    while (ea_now_ms() < until) {
        kvt_wait_events(watcher, w, &acc, 2, 75); /* the watcher's timer fires at old deadlines */
        cr_assert_eq(kvt_find_event(&acc, KV_EVENT_DELETE, "/ka/node"), -1,
                     "watcher expired a lease its owner keeps renewing");
        cr_assert_eq(kv_lease_keepalive(owner, lease, NULL, NULL), 0);
    }
    kvt_wait_events(watcher, w, &acc, 2, 2000);
    cr_assert_geq(kvt_find_event(&acc, KV_EVENT_DELETE, "/ka/node"), 0);
    kvt_events_clear(&acc);
    kv_close(owner);
    kv_close(watcher);
}

static void assert_corrupt(struct kv *kv, const char *what)
{
    struct ea_error err = {0};
    struct kv_entry e = {0};
    int r = kv ? kv_get(kv, "/c/a", &e, &err) : kv_open(&ctx.cfg, &kv, &err);
    cr_assert_eq(r, KV_ECORRUPT, "%s: got %s (%s)", what, kv_strerror(r), err.msg);
    cr_assert_not_null(strstr(err.msg, snap), "%s: message does not name the file: %s", what,
                       err.msg);
}

Test(file_kv, corrupt_or_foreign_snapshot_is_ecorrupt_naming_the_file)
{
    struct kv *kv = open_kv();
    kvt_put(kv, "/c/a", "1");
    size_t len = 0;
    char *good = slurp(snap, &len);

    const char *bad[] = {"garbage", "", "{\"hello\": 1}", "[1,2,3]",
                         "{\"format\":\"elastic-agent-kv-snapshot\",\"version\":99}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        replace_file(snap, bad[i], strlen(bad[i]));
        assert_corrupt(kv, bad[i]);   /* an open handle notices the replaced file */
        assert_corrupt(NULL, bad[i]); /* and a new one refuses to open */
        size_t now_len = 0;
        char *now = slurp(snap, &now_len);
        cr_assert(now_len == strlen(bad[i]) && memcmp(now, bad[i], now_len) == 0,
                  "the corrupt store was overwritten");
        free(now);
    }
    replace_file(snap, good, len / 2); /* truncated */
    assert_corrupt(NULL, "truncated");
    replace_file(snap, good, len); /* and back: readable again */
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/c/a", &e, NULL), 0);
    kv_entry_clear(&e);
    free(good);
    kv_close(kv);
}

Test(file_kv, leftover_temp_file_from_a_crash_does_not_corrupt_reads)
{
    struct kv *kv = open_kv();
    kvt_put(kv, "/t/a", "1");
    size_t len = 0;
    char *good = slurp(snap, &len);
    kvt_put(kv, "/t/b", "2");
    kv_close(kv);

    /* crashed half-way through writing the temp file */
    FILE *fp = fopen(tmp, "w");
    cr_assert_not_null(fp);
    fwrite(good, 1, len / 2, fp);
    fclose(fp);
    kv = open_kv();
    struct kv_list l = {0};
    cr_assert_eq(kv_list(kv, "/t/", &l, NULL), 0);
    cr_assert_eq(l.n, 2, "reads saw %zu keys", l.n);
    cr_assert_str_eq(l.entries[1].value, "2");
    kv_list_clear(&l);
    kvt_put(kv, "/t/c", "3"); /* writes go on over the leftover */
    kv_close(kv);

    /* crashed after writing a complete temp file, before the rename: not published */
    fp = fopen(tmp, "w");
    fwrite(good, 1, len, fp);
    fclose(fp);
    kv = open_kv();
    cr_assert_eq(kv_list(kv, "/t/", &l, NULL), 0);
    cr_assert_eq(l.n, 3, "an unrenamed temp file was read as the store");
    kv_list_clear(&l);
    kv_close(kv);
    free(good);
}

Test(file_kv, snapshot_from_another_boot_has_every_lease_expired)
{
    struct kv *kv = open_kv();
    int64_t lease = 0;
    cr_assert_eq(kv_lease_grant(kv, 600000, &lease, NULL), 0);
    int64_t r1 = kvt_put_lease(kv, "/b/leased", "1", lease);
    kvt_put(kv, "/b/plain", "1");
    kv_close(kv);

    json_error_t jerr;
    json_t *root = json_load_file(snap, 0, &jerr);
    cr_assert_not_null(root, "%s", jerr.text);
    json_object_set_new(root, "boot_id", json_string("00000000-0000-0000-0000-000000000000"));
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    replace_file(snap, text, strlen(text));
    free(text);

    kv = open_kv();
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/b/leased", &e, NULL), KV_ENOTFOUND, "lease survived a reboot");
    cr_assert_eq(kv_get(kv, "/b/plain", &e, NULL), 0, "an unleased key was lost");
    kv_entry_clear(&e);
    cr_assert_eq(kv_lease_keepalive(kv, lease, NULL, NULL), KV_ENOLEASE);
    int64_t w = watch(kv, "/b/", r1 + 1);
    struct kvt_events acc = {0};
    kvt_wait_events(kv, w, &acc, 2, 3000);
    cr_assert_eq(acc.n, 2);
    cr_assert_eq(acc.ev[1].type, KV_EVENT_DELETE, "the expiry is in the history");
    kvt_events_clear(&acc);
    kv_close(kv);
}

/* 1,024 writes, each an fsync and a rename of the snapshot: under ASan on a disk that other
 * builds keep busy that took over 30 s (a CI with helpers' builds beside it), so it has more. */
Test(file_kv, snapshot_stays_bounded, .timeout = 180)
{
    struct kv *kv = open_kv();
    char value[201];
    memset(value, 'v', 200);
    value[200] = '\0';
    for (int i = 0; i < 2 * KVS_FILE_LOG_EVENTS; i++)
        cr_assert_eq(kv_put(kv, "/big/k", value, 200, 0, NULL, NULL), 0);
    struct stat st;
    cr_assert_eq(stat(snap, &st), 0);
    cr_assert_lt(st.st_size, 2 * KVS_FILE_LOG_BYTES, "snapshot is %lld bytes",
                 (long long)st.st_size);
    json_t *root = json_load_file(snap, 0, NULL);
    cr_assert_not_null(root);
    cr_assert_leq(json_array_size(json_object_get(root, "events")), KVS_FILE_LOG_EVENTS);
    json_decref(root);
    int64_t w = 0;
    cr_assert_eq(kv_watch(kv, "/big/", 1, &w, NULL), KV_ECOMPACTED);
    kv_close(kv);
}
