// SPDX-License-Identifier: Apache-2.0
/* hb: per-rank heartbeat files, watched by inotify until the first beats, then by deadlines. */
#include "heartbeat.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ea_time.h"

struct hb_rank {
    int64_t last_ms;    /* monotonic time of the last beat known (start time before any) */
    int64_t checked_ms; /* when the file was last stat()ed (a beat seen then is newer) */
    struct timespec mtime;
    bool beaten, seen, gone;
};

struct hb {
    int64_t timeout_ms, startup_ms;
    int ifd, wd;
    bool armed;
    char dir[PATH_MAX];
    struct hb_rank *r;
    int n, rank_base, n_beaten;
    int64_t start_ms, ready_ms, next_ms;
};

#define HB_EVENTS (IN_CREATE | IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_TO)

int hb_create(int64_t timeout_ms, int64_t startup_ms, struct hb **ret, struct ea_error *err)
{
    *ret = NULL;
    if (timeout_ms <= 0 && startup_ms <= 0)
        return 0;
    struct hb *h = calloc(1, sizeof(*h));
    if (!h)
        return ea_errorf(err, -ENOMEM, "out of memory");
    h->timeout_ms = timeout_ms;
    h->startup_ms = startup_ms;
    h->wd = -1;
    h->ready_ms = h->next_ms = -1;
    h->ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (h->ifd < 0) {
        int e = errno;
        free(h);
        return ea_errorf(err, -e, "heartbeats: inotify: %s", strerror(e));
    }
    *ret = h;
    return 0;
}

static void unwatch(struct hb *h)
{
    if (h->wd >= 0)
        inotify_rm_watch(h->ifd, h->wd);
    h->wd = -1;
}

void hb_destroy(struct hb *h)
{
    if (!h)
        return;
    unwatch(h);
    close(h->ifd);
    free(h->r);
    free(h);
}

/* mkdir the directory, and remove the heartbeat files a previous round left in it. */
static int prepare_dir(const char *dir)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return -errno;
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, "rank_", 5) == 0)
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    return 0;
}

static int64_t deadline(const struct hb *h, const struct hb_rank *r)
{
    if (r->gone)
        return -1;
    if (!r->beaten)
        return r->last_ms + (h->startup_ms > 0 ? h->startup_ms : h->timeout_ms);
    return h->timeout_ms > 0 ? r->last_ms + h->timeout_ms : -1;
}

static void recompute(struct hb *h)
{
    h->next_ms = -1;
    for (int i = 0; h->armed && i < h->n; i++) {
        int64_t d = deadline(h, &h->r[i]);
        if (d >= 0 && (h->next_ms < 0 || d < h->next_ms))
            h->next_ms = d;
    }
}

static void first_beat(struct hb *h, struct hb_rank *r, int64_t now_ms)
{
    if (r->beaten)
        return;
    r->beaten = true;
    if (++h->n_beaten == h->n) {
        h->ready_ms = now_ms;
        unwatch(h); /* from now on only deadlines: no wake-up per beat */
    }
}

int hb_arm(struct hb *h, const char *dir, int n, int rank_base, int64_t now_ms,
           struct ea_error *err)
{
    if (!h)
        return 0;
    hb_disarm(h);
    if (snprintf(h->dir, sizeof(h->dir), "%s", dir) >= (int)sizeof(h->dir))
        return ea_errorf(err, -ENAMETOOLONG, "heartbeat directory '%s' is too long", dir);
    int r = prepare_dir(dir);
    if (r < 0)
        return ea_errorf(err, r, "cannot prepare heartbeat directory '%s': %s", dir, strerror(-r));
    struct hb_rank *ranks = calloc((size_t)(n > 0 ? n : 1), sizeof(*ranks));
    if (!ranks)
        return ea_errorf(err, -ENOMEM, "out of memory");
    free(h->r);
    h->r = ranks;
    h->n = n;
    h->rank_base = rank_base;
    h->n_beaten = 0;
    h->start_ms = now_ms;
    h->ready_ms = -1;
    for (int i = 0; i < n; i++)
        h->r[i].last_ms = h->r[i].checked_ms = now_ms;
    /* drop events of an earlier round still queued */
    char buf[4096];
    while (read(h->ifd, buf, sizeof(buf)) > 0)
        ;
    h->wd = inotify_add_watch(h->ifd, dir, HB_EVENTS);
    if (h->wd < 0)
        return ea_errorf(err, -errno, "cannot watch heartbeat directory '%s': %s", dir,
                         strerror(errno));
    h->armed = true;
    recompute(h);
    return 0;
}

void hb_forget(struct hb *h, int local_rank, int64_t now_ms)
{
    if (!h || !h->armed || local_rank < 0 || local_rank >= h->n)
        return;
    h->r[local_rank].gone = true;
    first_beat(h, &h->r[local_rank], now_ms);
    recompute(h);
}

void hb_disarm(struct hb *h)
{
    if (!h)
        return;
    unwatch(h);
    h->armed = false;
    h->next_ms = -1;
}

const char *hb_file(const struct hb *h, int local_rank, char *buf, size_t size)
{
    if (!h)
        return NULL;
    snprintf(buf, size, "%s/rank_%d", h->dir, h->rank_base + local_rank);
    return buf;
}

int hb_fd(const struct hb *h)
{
    return h && h->armed && h->wd >= 0 ? h->ifd : -1;
}

/* Local index of heartbeat file `name` ("rank_<global rank>"), -1 when not one of ours. */
static int index_of(const struct hb *h, const char *name)
{
    if (strncmp(name, "rank_", 5) != 0 || !isdigit((unsigned char)name[5]))
        return -1;
    char *end;
    long rank = strtol(name + 5, &end, 10);
    long i = rank - h->rank_base;
    return *end == '\0' && i >= 0 && i < h->n ? (int)i : -1;
}

void hb_on_events(struct hb *h, int64_t now_ms)
{
    if (!h)
        return;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t len;
    while ((len = read(h->ifd, buf, sizeof(buf))) > 0) {
        for (char *p = buf; p < buf + len;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof(*ev) + ev->len;
            if (!h->armed || h->wd < 0 || ev->wd != h->wd || ev->len == 0)
                continue;
            int i = index_of(h, ev->name);
            if (i >= 0) {
                h->r[i].last_ms = now_ms;
                first_beat(h, &h->r[i], now_ms);
            }
        }
    }
    recompute(h);
}

int64_t hb_wake_ms(const struct hb *h)
{
    return h ? h->next_ms : -1;
}

int64_t hb_ready_ms(const struct hb *h)
{
    return h ? h->ready_ms : -1;
}

/* stat() rank i's file: a changed mtime is a beat, at the mtime (no earlier than the last check,
 * so a wall clock that jumps can only make us late, never accuse a rank that beat). */
static void refresh(struct hb *h, int i, int64_t now_ms)
{
    struct hb_rank *r = &h->r[i];
    char path[PATH_MAX];
    struct stat st;
    if (stat(hb_file(h, i, path, sizeof(path)), &st) == 0 &&
        (!r->seen || st.st_mtim.tv_sec != r->mtime.tv_sec ||
         st.st_mtim.tv_nsec != r->mtime.tv_nsec)) {
        int64_t mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
        int64_t age = ea_wall_ms() - mtime_ms;
        int64_t t = now_ms - (age > 0 ? age : 0);
        if (t < r->checked_ms)
            t = r->checked_ms;
        if (t > r->last_ms)
            r->last_ms = t;
        r->mtime = st.st_mtim;
        r->seen = true;
        first_beat(h, r, now_ms);
    }
    r->checked_ms = now_ms;
}

static void fmt_secs(int64_t ms, char *buf, size_t size)
{
    if (ms >= 10000)
        snprintf(buf, size, "%.0f s", (double)ms / 1000.0);
    else
        snprintf(buf, size, "%.1f s", (double)ms / 1000.0);
}

/* What the rank last wrote: "step 1234" for a number, else its first line (printable). */
static void last_beat_text(const char *path, char *buf, size_t size)
{
    buf[0] = '\0';
    char raw[96];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return;
    ssize_t n = read(fd, raw, sizeof(raw) - 1);
    close(fd);
    if (n <= 0)
        return;
    raw[n] = '\0';
    raw[strcspn(raw, "\r\n")] = '\0';
    char *s = raw;
    while (*s == ' ' || *s == '\t')
        s++;
    bool digits = *s != '\0';
    for (char *p = s; *p; p++) {
        if (!isprint((unsigned char)*p))
            *p = '?';
        digits &= isdigit((unsigned char)*p) != 0;
    }
    if (*s)
        snprintf(buf, size, digits ? "step %s" : "%s", s);
}

int hb_check(struct hb *h, int64_t now_ms, struct hb_hang *ret)
{
    if (!h || !h->armed || h->next_ms < 0 || now_ms < h->next_ms)
        return 0;
    for (int i = 0; i < h->n; i++) {
        int64_t d = deadline(h, &h->r[i]);
        if (d < 0 || now_ms < d)
            continue;
        refresh(h, i, now_ms);
        d = deadline(h, &h->r[i]);
        if (d < 0 || now_ms < d)
            continue;
        struct hb_rank *r = &h->r[i];
        memset(ret, 0, sizeof(*ret));
        ret->local_rank = i;
        ret->rank = h->rank_base + i;
        ret->first = !r->beaten;
        ret->silent_ms = now_ms - r->last_ms;
        char secs[32], last[80], path[PATH_MAX];
        if (ret->first) {
            fmt_secs(h->startup_ms > 0 ? h->startup_ms : h->timeout_ms, secs, sizeof(secs));
            snprintf(ret->message, sizeof(ret->message),
                     "rank %d hung: no first heartbeat within %s of its start (%s)", ret->rank,
                     secs,
                     h->startup_ms > 0 ? "--worker-startup-timeout" : "--worker-heartbeat-timeout");
        } else {
            fmt_secs(ret->silent_ms, secs, sizeof(secs));
            last_beat_text(hb_file(h, i, path, sizeof(path)), last, sizeof(last));
            snprintf(ret->message, sizeof(ret->message),
                     "rank %d hung: no heartbeat for %s (last: %s)", ret->rank, secs,
                     last[0] ? last : "a beat without text");
        }
        hb_disarm(h);
        return 1;
    }
    recompute(h);
    return 0;
}
