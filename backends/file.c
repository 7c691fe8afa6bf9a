// SPDX-License-Identifier: Apache-2.0
/*
 * file backend: several agent processes on one host share a directory (cfg->state_dir) holding
 *   lock               flock()ed exclusively around every operation
 *   snapshot.json      the whole store (kvstore JSON: keys, leases, a bounded event log)
 *   snapshot.json.tmp  the next snapshot while it is written, then rename()d over snapshot.json
 * Every op: lock, load the snapshot (cached while its inode is unchanged), expire due leases,
 * apply, write temp + fsync + rename, unlock. A crash at any point leaves the old or the new
 * snapshot, never a partial one, and the kernel drops the lock of a dead process.
 *
 * Lease deadlines are CLOCK_BOOTTIME milliseconds, comparable between processes and across
 * suspend; the snapshot records the boot id, and a snapshot from another boot has all its leases
 * expired on load. Watches wake without polling: each handle's event fd is an epoll set of an
 * inotify watch on the directory (a snapshot was renamed in: someone wrote), a timerfd armed for
 * the earliest lease deadline in the snapshot it last saw (so a lease of a SIGKILLed process is
 * expired by whoever is watching), and an eventfd for events already due to this handle's watches.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "kv.h"
#include "kvstore.h"

#define SNAPSHOT_NAME "snapshot.json"
#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"
#define BOOT_ID_MAX 64

struct file_kv {
    struct kv base;
    pthread_mutex_t mu; /* one op at a time per handle (flock is per open file, not per thread) */
    char *dir, *snap_path, *tmp_path, *lock_path;
    int lock_fd, inotify_fd, timer_fd, wake_fd, epoll_fd;
    char boot_id[BOOT_ID_MAX];
    /* Cache of the snapshot last read or written. store_fd keeps that file open, which pins its
     * inode number: an unchanged (dev, ino) at the path then means an unchanged snapshot, because
     * snapshots are only ever replaced by rename, never modified in place. */
    struct kvs *store;
    int store_fd; /* -1: store is the empty store of a directory without a snapshot yet */
    dev_t store_dev;
    ino_t store_ino;
    struct kvs_watchset watches;
    int64_t armed_ms; /* deadline the timer is armed for, INT64_MAX = disarmed */
};

#define FKV(kv) ((struct file_kv *)(kv))

static int64_t boottime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int sys_error(struct ea_error *err, const char *what, const char *path)
{
    int e = errno ? errno : EIO;
    return ea_errorf(err, -e, "file store: %s '%s': %s", what, path, strerror(e));
}

static void drop_cache(struct file_kv *f)
{
    kvs_destroy(f->store);
    f->store = NULL;
    if (f->store_fd >= 0)
        close(f->store_fd);
    f->store_fd = -1;
}

/* Read the whole (immutable once renamed in) snapshot file. */
static int read_all(int fd, const char *path, char **ret_buf, size_t *ret_len, struct ea_error *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return sys_error(err, "cannot stat", path);
    if (!S_ISREG(st.st_mode))
        return ea_errorf(err, KV_ECORRUPT, "file store: snapshot '%s' is not a regular file", path);
    size_t cap = (size_t)st.st_size + 1, len = 0;
    char *buf = malloc(cap);
    if (!buf)
        return ea_errorf(err, -ENOMEM, "file store: out of memory reading '%s'", path);
    for (;;) {
        if (len == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                return ea_errorf(err, -ENOMEM, "file store: out of memory reading '%s'", path);
            }
            buf = nb;
        }
        ssize_t n = pread(fd, buf + len, cap - len, (off_t)len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            free(buf);
            return sys_error(err, "cannot read", path);
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    *ret_buf = buf;
    *ret_len = len;
    return 0;
}

/*
 * Bring f->store up to date with the snapshot on disk (lock held). *ret_dirty is set when the
 * loaded store was changed and must be written back (a snapshot of another boot: leases gone).
 */
static int load(struct file_kv *f, bool *ret_dirty, struct ea_error *err)
{
    *ret_dirty = false;
    struct stat st;
    if (stat(f->snap_path, &st) < 0) {
        if (errno != ENOENT)
            return sys_error(err, "cannot stat", f->snap_path);
        if (f->store && f->store_fd >= 0)
            return ea_errorf(err, KV_ECORRUPT,
                             "file store: snapshot '%s' vanished (the store was at revision "
                             "%lld); refusing to start over",
                             f->snap_path, (long long)kvs_revision(f->store));
        if (!f->store && kvs_create(KVS_FILE_LOG_EVENTS, KVS_FILE_LOG_BYTES, &f->store) < 0)
            return ea_errorf(err, -ENOMEM, "file store: out of memory");
        return 0;
    }
    if (f->store && f->store_fd >= 0 && st.st_dev == f->store_dev && st.st_ino == f->store_ino)
        return 0;

    /* Writers hold the lock we hold, so the file we stat()ed is the one we open. */
    int fd = open(f->snap_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return sys_error(err, "cannot open", f->snap_path);
    char *buf = NULL, boot_id[BOOT_ID_MAX] = ""; /* filled by kvs_load() */
    size_t len = 0;
    struct kvs *s = NULL;
    struct ea_error why = {0};
    int r = read_all(fd, f->snap_path, &buf, &len, err);
    if (r == 0) {
        r = kvs_load(buf, len, KVS_FILE_LOG_EVENTS, KVS_FILE_LOG_BYTES, &s, boot_id,
                     sizeof(boot_id), &why);
        if (r < 0)
            ea_errorf(err, r, "file store: snapshot '%s' %s: %s", f->snap_path,
                      r == KV_ECORRUPT ? "is corrupt or foreign (move it away to start over)"
                                       : "cannot be loaded",
                      why.msg);
    }
    free(buf);
    if (r == 0 && fstat(fd, &st) < 0)
        r = sys_error(err, "cannot stat", f->snap_path);
    if (r == 0 && strcmp(boot_id, f->boot_id) != 0) {
        /* Deadlines are CLOCK_BOOTTIME of another boot: meaningless now. Everything expires. */
        if (kvs_expire(s, INT64_MAX) < 0)
            r = ea_errorf(err, -ENOMEM, "file store: out of memory expiring leases");
        *ret_dirty = true;
    }
    if (r < 0) {
        kvs_destroy(s);
        close(fd);
        return r;
    }
    drop_cache(f);
    f->store = s;
    f->store_fd = fd;
    f->store_dev = st.st_dev;
    f->store_ino = st.st_ino;
    return 0;
}

static int write_all(int fd, const char *buf, size_t len)
{
    while (len) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Write f->store as the new snapshot (lock held). On failure the cache is dropped, since it no
 * longer matches what is on disk, and the next op reloads. */
static int persist(struct file_kv *f, struct ea_error *err)
{
    char *json = NULL;
    size_t len = 0;
    if (kvs_dump(f->store, f->boot_id, &json, &len) < 0) {
        drop_cache(f);
        return ea_errorf(err, -ENOMEM, "file store: out of memory writing the snapshot");
    }
    int r = 0;
    int fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    struct stat st;
    if (fd < 0)
        r = sys_error(err, "cannot create", f->tmp_path);
    else if (write_all(fd, json, len) < 0)
        r = sys_error(err, "cannot write", f->tmp_path);
    else if (fdatasync(fd) < 0) /* the rename must never publish unwritten blocks */
        r = sys_error(err, "cannot sync", f->tmp_path);
    else if (fstat(fd, &st) < 0)
        r = sys_error(err, "cannot stat", f->tmp_path);
    else if (rename(f->tmp_path, f->snap_path) < 0)
        r = sys_error(err, "cannot rename into place", f->tmp_path);
    free(json);
    if (r < 0) {
        if (fd >= 0) {
            unlink(f->tmp_path);
            close(fd);
        }
        drop_cache(f);
        return r;
    }
    if (f->store_fd >= 0)
        close(f->store_fd);
    f->store_fd = fd; /* now the snapshot: keeps its inode pinned for the cache check */
    f->store_dev = st.st_dev;
    f->store_ino = st.st_ino;
    return 0;
}

/* Start an op with f->mu held: take the lock, load, expire due leases and persist that. */
static int txn_load(struct file_kv *f, struct ea_error *err)
{
    while (flock(f->lock_fd, LOCK_EX) < 0) {
        if (errno != EINTR)
            return sys_error(err, "cannot lock", f->lock_path);
    }
    bool dirty = false;
    int r = load(f, &dirty, err);
    if (r == 0) {
        int n = kvs_expire(f->store, boottime_ms());
        if (n != 0)
            dirty = true; /* -ENOMEM may have expired some: write what we have */
        if (dirty)
            r = persist(f, err);
    }
    if (r < 0)
        flock(f->lock_fd, LOCK_UN);
    return r;
}

static int txn_begin(struct file_kv *f, struct ea_error *err)
{
    pthread_mutex_lock(&f->mu);
    int r = txn_load(f, err);
    if (r < 0)
        pthread_mutex_unlock(&f->mu);
    return r;
}

/* Persist the op's change (if any), wake this handle's watches, re-arm the lease timer, unlock. */
static int txn_end(struct file_kv *f, bool changed, struct ea_error *err)
{
    int r = changed ? persist(f, err) : 0;
    flock(f->lock_fd, LOCK_UN);
    if (f->store && kvs_watch_pending(&f->watches, f->store)) {
        uint64_t one = 1;
        ssize_t w = write(f->wake_fd, &one, sizeof(one)); /* EAGAIN: readable anyway */
        (void)w;
    }
    int64_t next = f->store ? kvs_next_expiry(f->store) : INT64_MAX;
    if (next != f->armed_ms) {
        struct itimerspec its = {0};
        if (next != INT64_MAX) {
            its.it_value.tv_sec = next / 1000;
            its.it_value.tv_nsec = (next % 1000) * 1000000 + 1; /* never 0: that disarms */
        }
        if (timerfd_settime(f->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
            f->armed_ms = next;
    }
    pthread_mutex_unlock(&f->mu);
    return r;
}

static int file_get(struct kv *kv, const char *key, struct kv_entry *ret, struct ea_error *err)
{
    struct file_kv *f = FKV(kv);
    int r = txn_begin(f, err);
    if (r < 0)
        return r;
    r = kvs_get(f->store, key, ret, err);
    txn_end(f, false, err);
    return r;
}

static int file_list(struct kv *kv, const char *prefix, struct kv_list *ret, struct ea_error *err)
{
    struct file_kv *f = FKV(kv);
    int r = txn_begin(f, err);
    if (r < 0)
        return r;
    r = kvs_list(f->store, prefix, ret, err);
    txn_end(f, false, err);
    return r;
}

static int file_list_page(struct kv *kv, const char *prefix, const char *after, size_t limit,
                          struct kv_list *ret, struct ea_error *err)
{
    struct file_kv *f = FKV(kv);
    int r = txn_begin(f, err);
    if (r < 0)
        return r;
    r = kvs_list_page(f->store, prefix, after, limit, ret, err);
    txn_end(f, false, err);
    return r;
}

static int file_cas(struct kv *kv, const char *key, const char *value, size_t len,
                    int64_t expected_mod_revision, int64_t lease, int64_t *ret_mod_revision,
                    struct kv_entry *ret_current, struct ea_error *err)
{
    struct file_kv *f = FKV(kv);
    int64_t rev = 0;
    int r = txn_begin(f, err);
    if (r < 0)
        return r;
    r = kvs_cas(f->store, key, value, len, expected_mod_revision, lease, &rev, ret_current, err);
    int c = txn_end(f, r == 0, err);
    if (r == 0 && c < 0)
        return c;
    if (r == 0 && ret_mod_revision)
        *ret_mod_revision = rev;
    return r;
}

static int file_txn(struct kv *kv, const struct kv_cmp *cmps, size_t n_cmps,
                    const struct kv_op *ops, size_t n_ops, int64_t *ret_revision,
                    struct ea_error *err)
{
    struct file_kv *f = FKV(kv);
    int r = txn_begin(f, err);
    if (r < 0)
        return r;
    int64_t before = kvs_revision(f->store), rev = 0;
    r = kvs_txn(f->store, cmps, n_cmps, ops, n_ops, &rev, err);
    int c = txn_end(f, r == 0 && rev != before, err);
    if (r == 0 && c < 0)
        return c;
    if (r == 0 && ret_revision)
        *ret_revision = rev;
    return r;
}

static int file_put(struct kv *kv, const char *key, const char *value, size_t len, int64_t lease,
                    int64_t *ret_mod_revision, struct ea_error *err)
{
    struct file_kv *f = FKV(kv);
    int64_t rev = 0;
    int r = txn_begin(f, err);
    if (r < 0)
        return r;
    r = kvs_put(f->store, key, value, len, lease, &rev, err);
    int c = txn_end(f, r == 0, err);
    if (r == 0 && c < 0)
        return c;
    if (r == 0 && ret_mod_revision)
        *ret_mod_revision = rev;
    return r;
}

static int file_del(struct kv *kv, const char *key, struct ea_error *err)
{
    struct file_kv *f = FKV(kv);
    bool deleted = false;
    int r = txn_begin(f, err);
    if (r < 0)
        return r;
    r = kvs_del(f->store, key, &deleted, err);
    int c = txn_end(f, r == 0 && deleted, err);
    return r < 0 ? r : c;
}

static int file_lease_grant(struct kv *kv, int64_t ttl_ms, int64_t *ret_lease, struct ea_error *err)
{
    struct file_kv *f = FKV(kv);
    int64_t id = 0;
    int r = txn_begin(f, err);
    if (r < 0)
        return r;
    r = kvs_lease_grant(f->store, ttl_ms, boottime_ms(), &id, err);
    int c = txn_end(f, r == 0, err);
    if (r == 0 && c < 0)
        return c;
    if (r == 0)
        *ret_lease = id;
    return r;
}

static int file_lease_keepalive(struct kv *kv, int64_t lease, int64_t *ret_ttl_ms,
                                struct ea_error *err)
{
    struct file_kv *f = FKV(kv);
    int64_t ttl = 0;
    int r = txn_begin(f, err);
    if (r < 0)
        return r;
    r = kvs_lease_keepalive(f->store, lease, boottime_ms(), &ttl, err);
    int c = txn_end(f, r == 0, err);
    if (r == 0 && c < 0)
        return c;
    if (r == 0 && ret_ttl_ms)
        *ret_ttl_ms = ttl;
    return r;
}

static int file_lease_revoke(struct kv *kv, int64_t lease, struct ea_error *err)
{
    struct file_kv *f = FKV(kv);
    int r = txn_begin(f, err);
    if (r < 0)
        return r;
    r = kvs_lease_revoke(f->store, lease, err);
    int c = txn_end(f, r == 0, err);
    return r < 0 ? r : c;
}

static int file_watch(struct kv *kv, const char *prefix, int64_t from_revision,
                      int64_t *ret_watch_id, struct ea_error *err)
{
    struct file_kv *f = FKV(kv);
    int r = txn_begin(f, err);
    if (r < 0)
        return r;
    r = kvs_watch_add(&f->watches, f->store, prefix, from_revision, ret_watch_id, err);
    txn_end(f, false, err);
    return r;
}

static void file_watch_cancel(struct kv *kv, int64_t watch_id)
{
    struct file_kv *f = FKV(kv);
    pthread_mutex_lock(&f->mu);
    kvs_watch_remove(&f->watches, watch_id);
    pthread_mutex_unlock(&f->mu);
}

static int file_event_fd(struct kv *kv)
{
    return FKV(kv)->epoll_fd;
}

/* Empty a non-blocking fd (inotify records, timer/eventfd counters). */
static void drain(int fd)
{
    char buf[4096] __attribute__((aligned(8)));
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
}

static int file_read_events(struct kv *kv, struct kv_event **ret_events, size_t *ret_n,
                            struct ea_error *err)
{
    struct file_kv *f = FKV(kv);
    pthread_mutex_lock(&f->mu);
    /* Drain before loading: a rename after this point leaves the fd readable again. The timer
     * is re-armed by txn_end (at once if its deadline has passed). */
    drain(f->inotify_fd);
    drain(f->timer_fd);
    drain(f->wake_fd);
    f->armed_ms = -1;
    int r = txn_load(f, err);
    if (r < 0) {
        pthread_mutex_unlock(&f->mu);
        return r;
    }
    struct kv_event *ev = NULL;
    size_t n = 0;
    r = kvs_watch_collect(&f->watches, f->store, &ev, &n);
    txn_end(f, false, err);
    if (r < 0)
        return ea_errorf(err, r, "file store: out of memory collecting watch events");
    *ret_events = ev;
    *ret_n = n;
    return 0;
}

static void file_close(struct kv *kv)
{
    struct file_kv *f = FKV(kv);
    if (!f)
        return;
    drop_cache(f);
    kvs_watchset_clear(&f->watches);
    int fds[] = {f->lock_fd, f->inotify_fd, f->timer_fd, f->wake_fd, f->epoll_fd};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(f->dir);
    free(f->snap_path);
    free(f->tmp_path);
    free(f->lock_path);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

/* mkdir -p with mode 0700 for every directory it creates. */
static int make_dirs(const char *path, struct ea_error *err)
{
    char *p = strdup(path);
    if (!p)
        return ea_errorf(err, -ENOMEM, "out of memory");
    int r = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0700) < 0 && errno != EEXIST) {
            r = sys_error(err, "cannot create directory", p);
            break;
        }
        *s = c;
        if (c == '\0')
            break;
    }
    struct stat st;
    if (r == 0 && (stat(path, &st) < 0 || !S_ISDIR(st.st_mode)))
        r = ea_errorf(err, KV_EINVAL, "file store: '%s' is not a directory", path);
    /* whoever can write the directory can rewrite the run's state (and so what runs) */
    else if (r == 0 && st.st_uid != geteuid())
        r = ea_errorf(err, KV_EINVAL,
                      "file store: '%s' is owned by uid %ld, not by this user (uid %ld): use a "
                      "state directory of your own (--state-dir)",
                      path, (long)st.st_uid, (long)geteuid());
    else if (r == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)))
        r = ea_errorf(err, KV_EINVAL,
                      "file store: '%s' is writable by group or others (mode %04o): "
                      "chmod 700 it or use another --state-dir",
                      path, (unsigned)(st.st_mode & 07777));
    free(p);
    return r;
}

static int read_boot_id(char *buf, size_t size, struct ea_error *err)
{
    FILE *fp = fopen(BOOT_ID_PATH, "re");
    if (!fp)
        return sys_error(err, "cannot read boot id from", BOOT_ID_PATH);
    bool ok = fgets(buf, (int)size, fp) != NULL;
    fclose(fp);
    buf[ok ? strcspn(buf, "\n") : 0] = '\0';
    if (!buf[0])
        return ea_errorf(err, -EIO, "file store: empty boot id in '%s'", BOOT_ID_PATH);
    return 0;
}

static char *path_join(const char *dir, const char *name)
{
    char *p = NULL;
    return asprintf(&p, "%s/%s", dir, name) < 0 ? NULL : p;
}

static int file_open(const struct kv_config *cfg, struct kv **ret_kv, struct ea_error *err);

const struct kv_ops kv_file_ops = {
    .name = "file",
    .open = file_open,
    .close = file_close,
    .get = file_get,
    .list = file_list,
    .list_page = file_list_page,
    .cas = file_cas,
    .txn = file_txn,
    .put = file_put,
    .del = file_del,
    .lease_grant = file_lease_grant,
    .lease_keepalive = file_lease_keepalive,
    .lease_revoke = file_lease_revoke,
    .watch = file_watch,
    .watch_cancel = file_watch_cancel,
    .event_fd = file_event_fd,
    .read_events = file_read_events,
};

static int file_open(const struct kv_config *cfg, struct kv **ret_kv, struct ea_error *err)
{
    if (!cfg->state_dir || !cfg->state_dir[0])
        return ea_errorf(err, KV_EINVAL, "file store: no state directory configured");
    struct file_kv *f = calloc(1, sizeof(*f));
    if (!f)
        return ea_errorf(err, -ENOMEM, "out of memory");
    f->base.ops = &kv_file_ops;
    f->lock_fd = f->inotify_fd = f->timer_fd = f->wake_fd = f->epoll_fd = f->store_fd = -1;
    f->armed_ms = INT64_MAX;
    pthread_mutex_init(&f->mu, NULL);
    int r = -ENOMEM;
    f->dir = strdup(cfg->state_dir);
    f->snap_path = path_join(cfg->state_dir, SNAPSHOT_NAME);
    f->tmp_path = path_join(cfg->state_dir, SNAPSHOT_NAME ".tmp");
    f->lock_path = path_join(cfg->state_dir, "lock");
    if (!f->dir || !f->snap_path || !f->tmp_path || !f->lock_path) {
        ea_errorf(err, r, "out of memory");
        goto error;
    }
    if ((r = read_boot_id(f->boot_id, sizeof(f->boot_id), err)) < 0 ||
        (r = make_dirs(f->dir, err)) < 0)
        goto error;
    f->lock_fd = open(f->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (f->lock_fd < 0) {
        r = sys_error(err, "cannot open", f->lock_path);
        goto error;
    }
    f->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    f->timer_fd = timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC);
    f->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    f->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (f->inotify_fd < 0 || f->timer_fd < 0 || f->wake_fd < 0 || f->epoll_fd < 0) {
        r = sys_error(err, "cannot create event fds for", f->dir);
        goto error;
    }
    /* Registered before the first load: no rename after it can go unnoticed. */
    if (inotify_add_watch(f->inotify_fd, f->dir, IN_MOVED_TO | IN_ONLYDIR) < 0) {
        r = sys_error(err, "cannot watch", f->dir);
        goto error;
    }
    int fds[] = {f->inotify_fd, f->timer_fd, f->wake_fd};
    for (size_t i = 0; i < 3; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        if (epoll_ctl(f->epoll_fd, EPOLL_CTL_ADD, fds[i], &ev) < 0) {
            r = sys_error(err, "cannot poll event fds for", f->dir);
            goto error;
        }
    }
    /* Validate the snapshot now (a corrupt store fails open) and arm the lease timer. */
    if ((r = txn_begin(f, err)) < 0)
        goto error;
    txn_end(f, false, err);
    *ret_kv = &f->base;
    return 0;
error:
    file_close(&f->base);
    return r;
}
