// SPDX-License-Identifier: Apache-2.0
/*
 * kv_evq: the watch event queue of a kv backend whose events arrive on another thread (etcd,
 * etcd-gateway): a growing array of kv_events plus the eventfd that kv_ops.event_fd() hands out.
 * Not thread-safe by itself: the backend guards it with its own lock, as noted on each function.
 * Not for the watches themselves (who is live, lost or cancelled stays with the backend).
 */
#ifndef EA_BACKENDS_KV_EVQ_H
#define EA_BACKENDS_KV_EVQ_H

#include <stddef.h>
#include <stdint.h>

#include "kv.h"

struct kv_evq {
    int fd; /* eventfd (CLOEXEC, NONBLOCK), readable when `events` may be non-empty */
    struct kv_event *events;
    size_t n, cap;
};

/* Make an empty queue and its eventfd, which lives until kv_evq_destroy() (so event_fd() is
 * stable for the handle's lifetime). 0, or -errno from eventfd() with q->fd == -1 (destroy is
 * then still safe). */
int kv_evq_init(struct kv_evq *q);
/* Free the queued events and close the eventfd. No lock: nobody else may use q any more.
 * Safe after a failed init and twice. */
void kv_evq_destroy(struct kv_evq *q);

/* Append `ev`, taking over its entry, and signal the eventfd. 0, or -ENOMEM with nothing
 * queued and the entry still the caller's. Caller holds the backend's lock. */
int kv_evq_push(struct kv_evq *q, const struct kv_event *ev);
/* Append KV_EVENT_ERROR `code` with `msg` for `watch_id` (the end of that watch). 0 or
 * -ENOMEM (nothing queued). Caller holds the backend's lock. */
int kv_evq_push_error(struct kv_evq *q, int64_t watch_id, int code, const char *msg);
/* Drop (and free) every queued event of `watch_id`: a cancelled watch delivers nothing more.
 * Caller holds the backend's lock. */
void kv_evq_drop_watch(struct kv_evq *q, int64_t watch_id);

/* Reset the eventfd's counter. Called by read_events before taking the backend's lock and the
 * queue: anything queued after it signals the fd again. No lock needed. */
void kv_evq_drain(struct kv_evq *q);
/* Hand over every queued event (*ret_events NULL when there is none; the caller owns the array,
 * free with kv_events_free()) and leave the queue empty. Caller holds the backend's lock. */
void kv_evq_take(struct kv_evq *q, struct kv_event **ret_events, size_t *ret_n);

#endif
