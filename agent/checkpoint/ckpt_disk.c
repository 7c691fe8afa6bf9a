// SPDX-License-Identifier: Apache-2.0
/* ckpt_disk: --checkpoint-dir's shard files, the newest whole step at start, the writer thread. */
#include "ckpt_disk.h"
#include "ckpt_proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "EACKPT01"
#define HDR_SIZE 104 /* magic 8, run 64, step 8, shard 4, shards 4, len 8, crc 4, header crc 4 */
#define MAX_SHARD_LEN (UINT64_C(1) << 48)

static void hdr_pack(const struct ckpt_shard_hdr *h, unsigned char *b)
{
    memset(b, 0, HDR_SIZE);
    memcpy(b, MAGIC, 8);
    memcpy(b + 8, h->run, strnlen(h->run, sizeof(h->run) - 1));
    memcpy(b + 72, &h->step, 8);
    memcpy(b + 80, &h->shard, 4);
    memcpy(b + 84, &h->shards, 4);
    memcpy(b + 88, &h->len, 8);
    memcpy(b + 96, &h->crc, 4);
    uint32_t hc = ckpt_crc32(0, b, 100);
    memcpy(b + 100, &hc, 4);
}

static bool hdr_unpack(const unsigned char *b, struct ckpt_shard_hdr *h)
{
    uint32_t hc;
    memcpy(&hc, b + 100, 4);
    if (memcmp(b, MAGIC, 8) != 0 || hc != ckpt_crc32(0, b, 100) || b[8 + 63] != 0)
        return false;
    memset(h, 0, sizeof(*h));
    memcpy(h->run, b + 8, 64);
    memcpy(&h->step, b + 72, 8);
    memcpy(&h->shard, b + 80, 4);
    memcpy(&h->shards, b + 84, 4);
    memcpy(&h->len, b + 88, 8);
    memcpy(&h->crc, b + 96, 4);
    h->crc_known = true;
    return h->len <= MAX_SHARD_LEN;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int fsync_dir(const char *path)
{
    int d = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0)
        return -errno;
    int r = fsync(d) < 0 ? -errno : 0;
    close(d);
    return r;
}

static int mkdir_p(const char *path)
{
    char b[PATH_MAX];
    snprintf(b, sizeof(b), "%s", path);
    for (char *p = b + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(b, 0700) < 0 && errno != EEXIST)
                return -errno;
            *p = '/';
        }
    return mkdir(b, 0700) < 0 && errno != EEXIST ? -errno : 0;
}

int ckpt_disk_write(const char *dir, const struct ckpt_shard_hdr *hin, int fd, struct ea_error *err)
{
    struct ckpt_shard_hdr hc = *hin, *h = &hc;
    char sdir[PATH_MAX], tmp[PATH_MAX + 64], final[PATH_MAX + 64];
    snprintf(sdir, sizeof(sdir), "%s/%s/step-%020" PRId64, dir, h->run, h->step);
    snprintf(final, sizeof(final), "%s/shard-%d-of-%d", sdir, h->shard, h->shards);
    snprintf(tmp, sizeof(tmp), "%s/.shard-%d-of-%d.tmp", sdir, h->shard, h->shards);
    int r = mkdir_p(sdir);
    if (r < 0)
        return ea_errorf(err, r, "cannot create '%s': %s", sdir, strerror(-r));
    unsigned char hb[HDR_SIZE];
    void *m = NULL;
    if (h->len > 0 && (m = mmap(NULL, h->len, PROT_READ, MAP_SHARED, fd, 0)) == MAP_FAILED)
        return ea_errorf(err, -errno, "cannot map shard %d: %s", h->shard, strerror(errno));
    uint32_t crc = ckpt_crc32(0, m, h->len);
    if (h->crc_known && crc != h->crc) {
        if (m)
            munmap(m, h->len);
        return ea_errorf(err, -EBADMSG, "shard %d of step %" PRId64 " changed in memory (checksum "
                         "%08" PRIx32 ", committed as %08" PRIx32 "): not written", h->shard,
                         h->step, crc, h->crc);
    }
    h->crc = crc;
    hdr_pack(h, hb);
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    r = out < 0 ? -errno : 0;
    if (r == 0 && (r = write_all(out, hb, sizeof(hb))) == 0 && h->len > 0)
        r = write_all(out, m, h->len);
    if (r == 0 && fsync(out) < 0)
        r = -errno;
    if (out >= 0 && close(out) < 0 && r == 0)
        r = -errno;
    if (m)
        munmap(m, h->len);
    if (r == 0 && rename(tmp, final) < 0)
        r = -errno;
    if (r == 0)
        r = fsync_dir(sdir);
    if (r < 0) {
        unlink(tmp);
        return ea_errorf(err, r, "cannot write '%s': %s", final, strerror(-r));
    }
    return 0;
}

/* Read one shard file into a sealed memfd: 0 with *ret_fd and *h, or -errno. */
static int read_shard(const char *path, const char *run, int64_t step, int shard, int shards,
                      struct ckpt_shard_hdr *h, int *ret_fd)
{
    int in = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (in < 0)
        return -errno;
    unsigned char hb[HDR_SIZE];
    struct stat st;
    int r = read(in, hb, sizeof(hb)) == (ssize_t)sizeof(hb) && fstat(in, &st) == 0 ? 0 : -EIO;
    if (r == 0 && (!hdr_unpack(hb, h) || strcmp(h->run, run) != 0 || h->step != step ||
                   h->shard != shard || h->shards != shards ||
                   (uint64_t)st.st_size != HDR_SIZE + h->len))
        r = -EBADMSG; /* a torn, foreign or renamed file */
    int fd = r == 0 ? memfd_create("ckpt", MFD_CLOEXEC | MFD_ALLOW_SEALING) : -1;
    if (r == 0 && (fd < 0 || ftruncate(fd, (off_t)h->len) < 0))
        r = -errno;
    void *m = NULL;
    if (r == 0 && h->len > 0 &&
        (m = mmap(NULL, h->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        r = -errno;
        m = NULL;
    }
    for (uint64_t off = 0; r == 0 && off < h->len;) {
        ssize_t n = read(in, (char *)m + off, h->len - off > (1u << 30) ? (1u << 30) : h->len - off);
        if (n <= 0)
            r = n < 0 && errno == EINTR ? 0 : -EIO;
        else
            off += (uint64_t)n;
    }
    if (r == 0 && ckpt_crc32(0, m, h->len) != h->crc)
        r = -EBADMSG;
    if (m)
        munmap(m, h->len);
    if (r == 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE |
                                             F_SEAL_SEAL) < 0)
        r = -errno;
    close(in);
    if (r < 0) {
        if (fd >= 0)
            close(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

static int cmp_desc(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? 1 : a > b ? -1 : 0;
}

/* Steps of dir/run, newest first (malloc'ed), their count in *ret_n. */
static int64_t *list_steps(const char *rdir, size_t *ret_n)
{
    *ret_n = 0;
    DIR *d = opendir(rdir);
    if (!d)
        return NULL;
    int64_t *v = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        long long s = 0;
        int end = 0;
        if (sscanf(e->d_name, "step-%20lld%n", &s, &end) != 1 || e->d_name[end] || s < 0)
            continue;
        if (n == cap) {
            int64_t *nv = realloc(v, (cap = cap ? cap * 2 : 16) * sizeof(*v));
            if (!nv)
                break;
            v = nv;
        }
        v[n++] = s;
    }
    closedir(d);
    if (n > 1)
        qsort(v, n, sizeof(*v), cmp_desc);
    *ret_n = n;
    return v;
}

/* The shard count of step directory sdir (from its first shard file), 0 when none. */
static int shards_of(const char *sdir)
{
    DIR *d = opendir(sdir);
    int shards = 0;
    for (struct dirent *e; d && (e = readdir(d)) && shards == 0;) {
        int i = 0, n = 0, end = 0;
        if (sscanf(e->d_name, "shard-%d-of-%d%n", &i, &n, &end) == 2 && !e->d_name[end] &&
            n >= 1 && n <= CKPT_MAX_SHARDS)
            shards = n;
    }
    if (d)
        closedir(d);
    return shards;
}

int ckpt_disk_read_latest(const char *dir, const char *run, uint64_t max_bytes,
                          ckpt_disk_shard_fn fn, void *ctx, int64_t *ret_step, int *ret_skipped,
                          struct ea_error *err)
{
    char rdir[PATH_MAX], sdir[PATH_MAX + 32], path[PATH_MAX + 64];
    snprintf(rdir, sizeof(rdir), "%s/%s", dir, run);
    size_t n = 0;
    int64_t *steps = list_steps(rdir, &n);
    int skipped = 0, found = 0;
    for (size_t k = 0; k < n && !found; k++) {
        snprintf(sdir, sizeof(sdir), "%s/step-%020" PRId64, rdir, steps[k]);
        int shards = shards_of(sdir);
        int *fds = shards > 0 ? malloc((size_t)shards * sizeof(*fds)) : NULL;
        struct ckpt_shard_hdr *hs = shards > 0 ? calloc((size_t)shards, sizeof(*hs)) : NULL;
        int got = 0, r = fds && hs ? 0 : -EBADMSG;
        uint64_t total = 0;
        for (; r == 0 && got < shards; got++) {
            snprintf(path, sizeof(path), "%s/shard-%d-of-%d", sdir, got, shards);
            r = read_shard(path, run, steps[k], got, shards, &hs[got], &fds[got]);
            if (r == 0 && (total += hs[got].len) > max_bytes) {
                close(fds[got]);
                r = -ENOSPC;
            }
            if (r < 0)
                break;
        }
        if (r == 0) {
            for (int i = 0; i < shards; i++) {
                int fr = r < 0 ? -1 : fn(ctx, &hs[i], fds[i]);
                if (r < 0)
                    close(fds[i]);
                if (fr < 0 && r == 0)
                    r = fr;
            }
            if (r < 0) {
                int64_t step = steps[k];
                free(fds);
                free(hs);
                free(steps);
                return ea_errorf(err, r, "step %" PRId64 " from '%s': %s", step, rdir,
                                 strerror(-r));
            }
            *ret_step = steps[k];
            found = 1;
        } else {
            for (int i = 0; i < got; i++)
                close(fds[i]);
            skipped++;
        }
        free(fds);
        free(hs);
    }
    free(steps);
    *ret_skipped = skipped;
    return found;
}

void ckpt_disk_prune(const char *dir, const char *run, int64_t keep_from)
{
    char rdir[PATH_MAX], sdir[PATH_MAX + 32], path[PATH_MAX + 320];
    snprintf(rdir, sizeof(rdir), "%s/%s", dir, run);
    size_t n = 0;
    int64_t *steps = list_steps(rdir, &n);
    for (size_t k = 0; k < n; k++) {
        if (steps[k] >= keep_from)
            continue;
        snprintf(sdir, sizeof(sdir), "%s/step-%020" PRId64, rdir, steps[k]);
        DIR *d = opendir(sdir);
        for (struct dirent *e; d && (e = readdir(d));)
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
                snprintf(path, sizeof(path), "%s/%s", sdir, e->d_name);
                unlink(path);
            }
        if (d)
            closedir(d);
        rmdir(sdir);
    }
    free(steps);
}

/* ---- the writer thread ------------------------------------------------------------------- */

#define QMAX 64

struct job {
    struct ckpt_shard_hdr h;
    int fd;
    int rc;
    char msg[256];
};

struct ckpt_writer {
    char dir[PATH_MAX];
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job q[QMAX], done[QMAX];
    size_t nq, ndone;
    bool stop, joined;
    int efd;
};

/* Is every shard of `step` on disk under its name (written whole, by any node)? */
static bool step_on_disk(const char *dir, const char *run, int64_t step)
{
    char sdir[PATH_MAX + 64], path[PATH_MAX + 128];
    snprintf(sdir, sizeof(sdir), "%s/%s/step-%020" PRId64, dir, run, step);
    int shards = shards_of(sdir);
    struct stat st;
    for (int i = 0; i < shards; i++) {
        snprintf(path, sizeof(path), "%s/shard-%d-of-%d", sdir, i, shards);
        if (stat(path, &st) < 0)
            return false;
    }
    return shards > 0;
}

/* Step `step` is whole on disk: keep it and the newest whole step before it (a fallback should
 * the newer one be found corrupt), remove what is older. */
static void prune_after(const char *dir, const char *run, int64_t step)
{
    char rdir[PATH_MAX];
    snprintf(rdir, sizeof(rdir), "%s/%s", dir, run);
    size_t n = 0;
    int64_t *steps = list_steps(rdir, &n);
    for (size_t k = 0; k < n; k++)
        if (steps[k] < step && step_on_disk(dir, run, steps[k])) {
            ckpt_disk_prune(dir, run, steps[k]);
            break;
        }
    free(steps);
}

static void *writer_main(void *arg)
{
    struct ckpt_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->nq == 0 && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->nq == 0)
            break; /* stopping, every job done */
        struct job j = w->q[0];
        memmove(w->q, w->q + 1, --w->nq * sizeof(*w->q));
        pthread_mutex_unlock(&w->mu);
        struct ea_error e = {0};
        j.rc = ckpt_disk_write(w->dir, &j.h, j.fd, &e);
        snprintf(j.msg, sizeof(j.msg), "%s", e.msg);
        close(j.fd);
        j.fd = -1;
        if (j.rc == 0 && step_on_disk(w->dir, j.h.run, j.h.step))
            prune_after(w->dir, j.h.run, j.h.step);
        pthread_mutex_lock(&w->mu);
        if (w->ndone < QMAX)
            w->done[w->ndone++] = j;
        uint64_t one = 1;
        if (write(w->efd, &one, sizeof(one)) < 0) { /* full: the reader is behind anyway */
        }
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int ckpt_writer_create(const char *dir, struct ckpt_writer **ret, struct ea_error *err)
{
    int r = mkdir_p(dir);
    if (r < 0)
        return ea_errorf(err, r, "--checkpoint-dir: cannot create '%s': %s", dir, strerror(-r));
    struct ckpt_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return ea_errorf(err, -ENOMEM, "out of memory");
    snprintf(w->dir, sizeof(w->dir), "%s", dir);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->efd < 0 || (r = pthread_create(&w->thread, NULL, writer_main, w)) != 0) {
        r = w->efd < 0 ? -errno : -r;
        if (w->efd >= 0)
            close(w->efd);
        free(w);
        return ea_errorf(err, r, "--checkpoint-dir: cannot start its writer: %s", strerror(-r));
    }
    *ret = w;
    return 0;
}

int ckpt_writer_queue(struct ckpt_writer *w, const struct ckpt_shard_hdr *h, int fd)
{
    int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (d < 0)
        return -errno;
    pthread_mutex_lock(&w->mu);
    int r = w->nq < QMAX ? 0 : -EAGAIN;
    if (r == 0) {
        w->q[w->nq++] = (struct job){.h = *h, .fd = d};
        pthread_cond_signal(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    if (r < 0)
        close(d);
    return r;
}

int ckpt_writer_fd(const struct ckpt_writer *w)
{
    return w ? w->efd : -1;
}

int ckpt_writer_done(struct ckpt_writer *w, struct ckpt_shard_hdr *ret_h, int *ret_rc,
                     struct ea_error *err)
{
    uint64_t v;
    if (read(w->efd, &v, sizeof(v)) < 0) { /* drained below either way */
    }
    pthread_mutex_lock(&w->mu);
    int have = w->ndone > 0;
    if (have) {
        *ret_h = w->done[0].h;
        *ret_rc = w->done[0].rc;
        if (w->done[0].rc < 0)
            ea_errorf(err, w->done[0].rc, "%s", w->done[0].msg);
        memmove(w->done, w->done + 1, --w->ndone * sizeof(*w->done));
    }
    pthread_mutex_unlock(&w->mu);
    return have;
}

void ckpt_writer_finish(struct ckpt_writer *w)
{
    if (w->joined)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    w->joined = true;
}

void ckpt_writer_destroy(struct ckpt_writer *w)
{
    if (!w)
        return;
    ckpt_writer_finish(w);
    for (size_t i = 0; i < w->nq; i++) /* none left after the join; for clarity */
        close(w->q[i].fd);
    close(w->efd);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}
