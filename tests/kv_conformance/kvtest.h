// SPDX-License-Identifier: Apache-2.0
/*
 * kvtest: what the KV conformance suite needs from a backend fixture, and small helpers shared by
 * the suite and the backend-specific tests (keys under a per-test prefix, waiting for watch events
 * on the event fd with a deadline, scratch directories). Test code only.
 *
 * A fixture file (fixture_<backend>.c) defines exactly one `const struct kv_fixture kv_fixture`;
 * the suite binary for that backend is ${EA_KV_CONFORMANCE_SOURCES} (conformance.c,
 * conformance_watch.c, kvtest.c) + that file; see tests/backends.cmake and conformance.c.
 */
#ifndef EA_TESTS_KVTEST_H
#define EA_TESTS_KVTEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv.h"

struct kvt_ctx {
    struct kv_config cfg; /* kv_open(&cfg) reaches the fixture's store */
    char prefix[128];     /* every key a test touches starts with this (unique per test) */
    char dir[256];        /* scratch directory made before setup, removed after teardown */
    char path[512];       /* free for the fixture (e.g. its state directory) */
    void *priv;           /* free for the fixture */
};

struct kv_fixture {
    const char *name;
    /* A second kv_open(&ctx->cfg) — also in a forked child — sees the same store. When false,
     * the concurrency test races threads on one handle instead of processes. */
    bool shared;
    /* The store keeps a bounded event log: a watcher that falls behind gets KV_ECOMPACTED. */
    bool bounded_log;
    int64_t min_ttl_ms; /* shortest TTL the backend honours (etcd: whole seconds), 0 = any */
    int64_t late_ms;    /* how late after its TTL an expiry may be seen (etcd checks ~500 ms) */
    /* Per test, in the test's process, after ctx->dir and ctx->prefix are set: fill ctx->cfg,
     * start whatever the store needs. 0 or a negative errno. May be NULL. */
    int (*setup)(struct kvt_ctx *ctx);
    void (*teardown)(struct kvt_ctx *ctx); /* may be NULL */
    /* Make revision `rev` unavailable to new watches (etcd: the compact RPC; memory/file:
     * kvt_overflow_log). 0 or a negative errno. */
    int (*compact)(struct kvt_ctx *ctx, struct kv *kv, int64_t rev);
};

extern const struct kv_fixture kv_fixture;

/* Events of one watch, accumulated across read_events() calls. */
struct kvt_events {
    struct kv_event *ev;
    size_t n, cap;
};

/* `name` under the current test's prefix, in one of 16 rotating static buffers. */
const char *kvt_key(const struct kvt_ctx *ctx, const char *name);

/* Make a fresh scratch directory into ctx->dir and a unique prefix; remove it all again. */
void kvt_ctx_init(struct kvt_ctx *ctx, const char *tag);
void kvt_ctx_fini(struct kvt_ctx *ctx);
/* rm -rf */
void kvt_rmrf(const char *path);

/* Put (asserting success) and return the revision of the write. */
int64_t kvt_put(struct kv *kv, const char *key, const char *value);
int64_t kvt_put_lease(struct kv *kv, const char *key, const char *value, int64_t lease);

/*
 * Read events of `watch_id` (0: of any watch; others are dropped) into acc until it holds at
 * least `want` events or `timeout_ms` passed, waiting in poll() on the backend's event fd.
 * Returns acc->n. want = 0 just drains what is ready now.
 */
size_t kvt_wait_events(struct kv *kv, int64_t watch_id, struct kvt_events *acc, size_t want,
                       int timeout_ms);
void kvt_events_clear(struct kvt_events *acc);
/* Index of the first event of `type` on `key` in acc, or -1. */
long kvt_find_event(const struct kvt_events *acc, enum kv_event_type type, const char *key);

/* True when `fd` stays unreadable for `ms` milliseconds. */
bool kvt_fd_quiet(int fd, int ms);

/* Put filler keys under ctx's prefix until a watch from `rev` is refused as compacted (checked
 * every 16 puts, at most max_puts). The memory/file fixtures' compact(). */
int kvt_overflow_log(struct kvt_ctx *ctx, struct kv *kv, int64_t rev, int max_puts);

/* The conformance suite's per-test state (conformance.c): made by kvt_suite_init(), which every
 * suite of the conformance binary uses as its .init, and freed by kvt_suite_fini(). */
extern struct kvt_ctx kvt_suite_ctx;
extern struct kv *kvt_suite_kv;
void kvt_suite_init(void);
void kvt_suite_fini(void);
/* Skip the current conformance test; criterion runs no .fini after a skip, so clean up first. */
#define kvt_skip(...)                                                                              \
    do {                                                                                           \
        kvt_suite_fini();                                                                          \
        cr_skip_test(__VA_ARGS__);                                                                 \
    } while (0)

#endif
