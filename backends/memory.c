// SPDX-License-Identifier: Apache-2.0
/*
 * memory backend (`--standalone`, tests): the kvstore model in-process, one store per handle.
 * Lease deadlines are on CLOCK_MONOTONIC. The pollable fd is an epoll set of an eventfd (written
 * when a watch has revisions it has not been handed yet) and a timerfd armed for the earliest
 * lease deadline, so an idle agent wakes exactly when a lease must expire. A handle may be used
 * from several threads (one mutex), which is how the conformance suite races CAS writers on it.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "ea_time.h"
#include "kv.h"
#include "kvstore.h"

struct mem_kv {
    struct kv base;
    pthread_mutex_t mu;
    struct kvs *store;
    struct kvs_watchset watches;
    int epoll_fd, wake_fd, timer_fd;
    int64_t armed_ms; /* deadline the timer is armed for, INT64_MAX = disarmed */
};

#define MEM(kv) ((struct mem_kv *)(kv))

static void mem_close(struct kv *kv)
{
    struct mem_kv *m = MEM(kv);
    if (!m)
        return;
    kvs_watchset_clear(&m->watches);
    kvs_destroy(m->store);
    if (m->epoll_fd >= 0)
        close(m->epoll_fd);
    if (m->wake_fd >= 0)
        close(m->wake_fd);
    if (m->timer_fd >= 0)
        close(m->timer_fd);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static int mem_open(const struct kv_config *cfg, struct kv **ret_kv, struct ea_error *err);

/* Lock, then expire every lease due now (any op sees a store without expired leases). */
static void begin(struct mem_kv *m)
{
    pthread_mutex_lock(&m->mu);
    /* -ENOMEM here leaves the lease for the next attempt; the store stays valid */
    (void)kvs_expire(m->store, ea_now_ms());
}

/* Wake the loop when a watch has something to read, re-arm the lease timer, unlock. */
static void end(struct mem_kv *m)
{
    if (kvs_watch_pending(&m->watches, m->store)) {
        uint64_t one = 1;
        /* EAGAIN only when the counter is saturated: then the fd is readable anyway */
        ssize_t w = write(m->wake_fd, &one, sizeof(one));
        (void)w;
    }
    int64_t next = kvs_next_expiry(m->store);
    if (next != m->armed_ms) {
        struct itimerspec its = {0};
        if (next != INT64_MAX) {
            its.it_value.tv_sec = next / 1000;
            its.it_value.tv_nsec = (next % 1000) * 1000000 + 1; /* never 0: that disarms */
        }
        if (timerfd_settime(m->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
            m->armed_ms = next;
    }
    pthread_mutex_unlock(&m->mu);
}

static int mem_get(struct kv *kv, const char *key, struct kv_entry *ret, struct ea_error *err)
{
    struct mem_kv *m = MEM(kv);
    begin(m);
    int r = kvs_get(m->store, key, ret, err);
    end(m);
    return r;
}

static int mem_list(struct kv *kv, const char *prefix, struct kv_list *ret, struct ea_error *err)
{
    struct mem_kv *m = MEM(kv);
    begin(m);
    int r = kvs_list(m->store, prefix, ret, err);
    end(m);
    return r;
}

static int mem_list_page(struct kv *kv, const char *prefix, const char *after, size_t limit,
                         struct kv_list *ret, struct ea_error *err)
{
    struct mem_kv *m = MEM(kv);
    begin(m);
    int r = kvs_list_page(m->store, prefix, after, limit, ret, err);
    end(m);
    return r;
}

static int mem_cas(struct kv *kv, const char *key, const char *value, size_t len,
                   int64_t expected_mod_revision, int64_t lease, int64_t *ret_mod_revision,
                   struct kv_entry *ret_current, struct ea_error *err)
{
    struct mem_kv *m = MEM(kv);
    begin(m);
    int r = kvs_cas(m->store, key, value, len, expected_mod_revision, lease, ret_mod_revision,
                    ret_current, err);
    end(m);
    return r;
}

static int mem_txn(struct kv *kv, const struct kv_cmp *cmps, size_t n_cmps, const struct kv_op *ops,
                   size_t n_ops, int64_t *ret_revision, struct ea_error *err)
{
    struct mem_kv *m = MEM(kv);
    begin(m);
    int r = kvs_txn(m->store, cmps, n_cmps, ops, n_ops, ret_revision, err);
    end(m);
    return r;
}

static int mem_put(struct kv *kv, const char *key, const char *value, size_t len, int64_t lease,
                   int64_t *ret_mod_revision, struct ea_error *err)
{
    struct mem_kv *m = MEM(kv);
    begin(m);
    int r = kvs_put(m->store, key, value, len, lease, ret_mod_revision, err);
    end(m);
    return r;
}

static int mem_del(struct kv *kv, const char *key, struct ea_error *err)
{
    struct mem_kv *m = MEM(kv);
    begin(m);
    int r = kvs_del(m->store, key, NULL, err);
    end(m);
    return r;
}

static int mem_lease_grant(struct kv *kv, int64_t ttl_ms, int64_t *ret_lease, struct ea_error *err)
{
    struct mem_kv *m = MEM(kv);
    begin(m);
    int r = kvs_lease_grant(m->store, ttl_ms, ea_now_ms(), ret_lease, err);
    end(m);
    return r;
}

static int mem_lease_keepalive(struct kv *kv, int64_t lease, int64_t *ret_ttl_ms,
                               struct ea_error *err)
{
    struct mem_kv *m = MEM(kv);
    begin(m);
    int r = kvs_lease_keepalive(m->store, lease, ea_now_ms(), ret_ttl_ms, err);
    end(m);
    return r;
}

static int mem_lease_revoke(struct kv *kv, int64_t lease, struct ea_error *err)
{
    struct mem_kv *m = MEM(kv);
    begin(m);
    int r = kvs_lease_revoke(m->store, lease, err);
    end(m);
    return r;
}

static int mem_watch(struct kv *kv, const char *prefix, int64_t from_revision,
                     int64_t *ret_watch_id, struct ea_error *err)
{
    struct mem_kv *m = MEM(kv);
    begin(m);
    int r = kvs_watch_add(&m->watches, m->store, prefix, from_revision, ret_watch_id, err);
    end(m);
    return r;
}

static void mem_watch_cancel(struct kv *kv, int64_t watch_id)
{
    struct mem_kv *m = MEM(kv);
    pthread_mutex_lock(&m->mu);
    kvs_watch_remove(&m->watches, watch_id);
    pthread_mutex_unlock(&m->mu);
}

static int mem_event_fd(struct kv *kv)
{
    return MEM(kv)->epoll_fd;
}

/* Empty a non-blocking eventfd/timerfd so the epoll set stops being readable. */
static void drain(int fd)
{
    uint64_t v;
    while (read(fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
        ;
}

static int mem_read_events(struct kv *kv, struct kv_event **ret_events, size_t *ret_n,
                           struct ea_error *err)
{
    struct mem_kv *m = MEM(kv);
    begin(m);
    /* Drained under the lock after expiry: nothing can become due or pending unseen, and end()
     * re-arms the timer (a deadline already past fires at once). */
    drain(m->wake_fd);
    drain(m->timer_fd);
    m->armed_ms = -1; /* the expiration consumed the arming: force end() to re-arm */
    int r = kvs_watch_collect(&m->watches, m->store, ret_events, ret_n);
    end(m);
    if (r < 0)
        return ea_errorf(err, r, "out of memory collecting watch events");
    return 0;
}

const struct kv_ops kv_memory_ops = {
    .name = "memory",
    .open = mem_open,
    .close = mem_close,
    .get = mem_get,
    .list = mem_list,
    .list_page = mem_list_page,
    .cas = mem_cas,
    .txn = mem_txn,
    .put = mem_put,
    .del = mem_del,
    .lease_grant = mem_lease_grant,
    .lease_keepalive = mem_lease_keepalive,
    .lease_revoke = mem_lease_revoke,
    .watch = mem_watch,
    .watch_cancel = mem_watch_cancel,
    .event_fd = mem_event_fd,
    .read_events = mem_read_events,
};

static int mem_open(const struct kv_config *cfg, struct kv **ret_kv, struct ea_error *err)
{
    struct mem_kv *m = calloc(1, sizeof(*m));
    if (!m)
        return ea_errorf(err, -ENOMEM, "out of memory opening the memory store");
    m->base.ops = &kv_memory_ops;
    m->epoll_fd = m->wake_fd = m->timer_fd = -1;
    m->armed_ms = INT64_MAX;
    pthread_mutex_init(&m->mu, NULL);
    int r = kvs_create(KVS_MEMORY_LOG_EVENTS, KVS_MEMORY_LOG_BYTES, &m->store);
    if (r < 0) {
        ea_errorf(err, r, "out of memory opening the memory store");
        goto error;
    }
    m->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    m->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    m->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (m->epoll_fd < 0 || m->wake_fd < 0 || m->timer_fd < 0) {
        r = ea_errorf(err, -errno, "memory store: cannot create its event fds: %s",
                      strerror(errno));
        goto error;
    }
    int fds[] = {m->wake_fd, m->timer_fd};
    for (size_t i = 0; i < 2; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        if (epoll_ctl(m->epoll_fd, EPOLL_CTL_ADD, fds[i], &ev) < 0) {
            r = ea_errorf(err, -errno, "memory store: epoll_ctl: %s", strerror(errno));
            goto error;
        }
    }
    *ret_kv = &m->base;
    return 0;
error:
    mem_close(&m->base);
    return r;
}
