// SPDX-License-Identifier: Apache-2.0
/* kvtest: helpers shared by the KV conformance suite and the backend-specific tests. */
#include "kvtest.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ea_time.h"

const char *kvt_key(const struct kvt_ctx *ctx, const char *name)
{
    static char bufs[16][256];
    static unsigned next;
    char *b = bufs[next++ % 16];
    snprintf(b, sizeof(bufs[0]), "%s%s", ctx->prefix, name);
    return b;
}

void kvt_ctx_init(struct kvt_ctx *ctx, const char *tag)
{
    memset(ctx, 0, sizeof(*ctx));
    const char *tmp = getenv("TMPDIR");
    snprintf(ctx->dir, sizeof(ctx->dir), "%s/ea-kvtest-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    cr_assert_not_null(mkdtemp(ctx->dir), "mkdtemp %s", ctx->dir);
    snprintf(ctx->prefix, sizeof(ctx->prefix), "/kvtest/%s/%ld/", tag, (long)getpid());
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void kvt_rmrf(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void kvt_ctx_fini(struct kvt_ctx *ctx)
{
    if (ctx->dir[0])
        kvt_rmrf(ctx->dir);
    ctx->dir[0] = '\0';
}

int64_t kvt_put_lease(struct kv *kv, const char *key, const char *value, int64_t lease)
{
    struct ea_error err = {0};
    int64_t rev = 0;
    int r = kv_put(kv, key, value, strlen(value), lease, &rev, &err);
    cr_assert_eq(r, 0, "put %s: %s (%s)", key, kv_strerror(r), err.msg);
    cr_assert_gt(rev, 0, "put %s returned revision %lld", key, (long long)rev);
    return rev;
}

int64_t kvt_put(struct kv *kv, const char *key, const char *value)
{
    return kvt_put_lease(kv, key, value, 0);
}

static void take(struct kvt_events *acc, struct kv_event *ev)
{
    if (acc->n == acc->cap) {
        acc->cap = acc->cap ? acc->cap * 2 : 16;
        acc->ev = realloc(acc->ev, acc->cap * sizeof(*acc->ev));
        cr_assert_not_null(acc->ev);
    }
    acc->ev[acc->n++] = *ev;
    memset(ev, 0, sizeof(*ev)); /* ownership moved */
}

size_t kvt_wait_events(struct kv *kv, int64_t watch_id, struct kvt_events *acc, size_t want,
                       int timeout_ms)
{
    int64_t deadline = ea_now_ms() + timeout_ms;
    for (;;) {
        struct kv_event *ev = NULL;
        size_t n = 0;
        struct ea_error err = {0};
        int r = kv_read_events(kv, &ev, &n, &err);
        cr_assert_eq(r, 0, "read_events: %s (%s)", kv_strerror(r), err.msg);
        for (size_t i = 0; i < n; i++)
            if (watch_id == 0 || ev[i].watch_id == watch_id)
                take(acc, &ev[i]);
        kv_events_free(ev, n);
        if (want == 0 || acc->n >= want)
            return acc->n;
        struct pollfd p = {.fd = kv_event_fd(kv), .events = POLLIN};
        int left = ea_timeout_until(deadline);
        if (left == 0)
            return acc->n;
        int pr = poll(&p, 1, left);
        cr_assert_geq(pr, 0, "poll on the event fd");
        if (pr == 0)
            return acc->n;
    }
}

void kvt_events_clear(struct kvt_events *acc)
{
    kv_events_free(acc->ev, acc->n);
    memset(acc, 0, sizeof(*acc));
}

long kvt_find_event(const struct kvt_events *acc, enum kv_event_type type, const char *key)
{
    for (size_t i = 0; i < acc->n; i++)
        if (acc->ev[i].type == type && acc->ev[i].entry.key &&
            strcmp(acc->ev[i].entry.key, key) == 0)
            return (long)i;
    return -1;
}

bool kvt_fd_quiet(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 0;
}

int kvt_overflow_log(struct kvt_ctx *ctx, struct kv *kv, int64_t rev, int max_puts)
{
    for (int i = 1; i <= max_puts; i++) {
        int r = kv_put(kv, kvt_key(ctx, "filler"), "x", 1, 0, NULL, NULL);
        if (r < 0)
            return r;
        if (i % 16)
            continue;
        int64_t id = 0;
        r = kv_watch(kv, ctx->prefix, rev, &id, NULL);
        if (r == KV_ECOMPACTED)
            return 0;
        if (r < 0)
            return r;
        kv_watch_cancel(kv, id);
    }
    return -ETIMEDOUT;
}
