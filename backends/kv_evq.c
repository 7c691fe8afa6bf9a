// SPDX-License-Identifier: Apache-2.0
/*
 * kv_evq: the watch event queue shared by the etcd and etcd-gateway backends (see kv_evq.h).
 */
#include "kv_evq.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

int kv_evq_init(struct kv_evq *q)
{
    *q = (struct kv_evq){.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
    return q->fd < 0 ? -errno : 0;
}

void kv_evq_destroy(struct kv_evq *q)
{
    kv_events_free(q->events, q->n);
    if (q->fd >= 0)
        close(q->fd);
    *q = (struct kv_evq){.fd = -1};
}

int kv_evq_push(struct kv_evq *q, const struct kv_event *ev)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 16;
        struct kv_event *bigger = realloc(q->events, cap * sizeof(*bigger));
        if (!bigger)
            return -ENOMEM;
        q->events = bigger;
        q->cap = cap;
    }
    q->events[q->n++] = *ev;
    uint64_t one = 1;
    /* Cannot fail short of a counter overflow; the reader drains it before taking the queue. */
    if (write(q->fd, &one, sizeof(one)) < 0) {
    }
    return 0;
}

int kv_evq_push_error(struct kv_evq *q, int64_t watch_id, int code, const char *msg)
{
    struct kv_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = KV_EVENT_ERROR;
    ev.watch_id = watch_id;
    ev.error = code;
    snprintf(ev.message, sizeof(ev.message), "%s", msg);
    return kv_evq_push(q, &ev);
}

void kv_evq_drop_watch(struct kv_evq *q, int64_t watch_id)
{
    size_t keep = 0;
    for (size_t i = 0; i < q->n; i++) {
        if (q->events[i].watch_id == watch_id)
            kv_entry_clear(&q->events[i].entry);
        else
            q->events[keep++] = q->events[i];
    }
    q->n = keep;
}

void kv_evq_drain(struct kv_evq *q)
{
    uint64_t count;
    if (read(q->fd, &count, sizeof(count)) < 0) {
        /* EAGAIN: nothing was signalled since the last drain. */
    }
}

void kv_evq_take(struct kv_evq *q, struct kv_event **ret_events, size_t *ret_n)
{
    *ret_events = q->n ? q->events : NULL;
    *ret_n = q->n;
    if (!q->n)
        free(q->events);
    q->events = NULL;
    q->n = q->cap = 0;
}
