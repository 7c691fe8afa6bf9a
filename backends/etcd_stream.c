// SPDX-License-Identifier: Apache-2.0
/*
 * etcd_stream: bidirectional gRPC streams (Watch, LeaseKeepAlive) on the handle's one I/O thread.
 * The thread owns a GRPC_CQ_NEXT completion queue shared by every stream of the handle; each
 * stream runs independent batches (start, status, recv, send) tagged with pointers into the
 * stream, and at most one SEND_MESSAGE in flight (gRPC's rule), later ones wait in a queue.
 * Protocol handlers run on the I/O thread with the handle lock held. Not a general gRPC library.
 */
#include "etcd_internal.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/support/time.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ea_time.h"

enum tag_kind { TAG_START, TAG_STATUS, TAG_RECV, TAG_SEND, TAG_MAX };

struct stream_tag {
    struct etcd_stream *s;
    enum tag_kind kind;
};

struct pending_send {
    grpc_byte_buffer *bb;
    struct pending_send *next;
};

struct etcd_stream {
    struct etcd *e;
    struct etcd_stream *next; /* in e->streams */
    const struct etcd_stream_handler *h;
    size_t ep;
    grpc_call *call;
    struct stream_tag tags[TAG_MAX];
    int outstanding; /* batches started and not completed */
    int done;        /* status received, on_close called */
    int cancelled;   /* no more sends */
    int got_initial; /* first recv batch (with initial metadata) done */
    grpc_metadata md[2];
    size_t nmd;
    grpc_metadata_array init_md, trail_md;
    grpc_byte_buffer *recv_bb;
    grpc_status_code status;
    grpc_slice details;
    grpc_byte_buffer *send_bb; /* in flight */
    struct pending_send *sendq, *sendq_tail;
    int64_t idle_from_ms; /* last message received, or last on_idle call (liveness check) */
    int idle_calls;       /* on_idle calls since the last message */
};

struct etcd *etcd_stream_owner(const struct etcd_stream *s)
{
    return s->e;
}

size_t etcd_stream_endpoint(const struct etcd_stream *s)
{
    return s->ep;
}

int etcd_stream_alive(const struct etcd_stream *s)
{
    return s && !s->done && !s->cancelled;
}

static grpc_call_error start(struct etcd_stream *s, const grpc_op *ops, size_t n,
                             enum tag_kind kind)
{
    grpc_call_error ce = grpc_call_start_batch(s->call, ops, n, &s->tags[kind], NULL);
    if (ce == GRPC_CALL_OK)
        s->outstanding++;
    return ce;
}

static grpc_call_error start_recv(struct etcd_stream *s)
{
    grpc_op ops[2];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    if (!s->got_initial) {
        ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
        ops[n].data.recv_initial_metadata.recv_initial_metadata = &s->init_md;
        n++;
    }
    ops[n].op = GRPC_OP_RECV_MESSAGE;
    ops[n].data.recv_message.recv_message = &s->recv_bb;
    n++;
    return start(s, ops, n, TAG_RECV);
}

static void start_send(struct etcd_stream *s)
{
    while (!s->send_bb && s->sendq && !s->cancelled && !s->done) {
        struct pending_send *p = s->sendq;
        s->sendq = p->next;
        if (!s->sendq)
            s->sendq_tail = NULL;
        grpc_op op;
        memset(&op, 0, sizeof(op));
        op.op = GRPC_OP_SEND_MESSAGE;
        op.data.send_message.send_message = p->bb;
        if (start(s, &op, 1, TAG_SEND) == GRPC_CALL_OK) {
            s->send_bb = p->bb;
        } else {
            grpc_byte_buffer_destroy(p->bb);
            grpc_call_cancel(s->call, NULL);
            s->cancelled = 1;
        }
        free(p);
    }
}

static void free_sendq(struct etcd_stream *s)
{
    while (s->sendq) {
        struct pending_send *p = s->sendq;
        s->sendq = p->next;
        grpc_byte_buffer_destroy(p->bb);
        free(p);
    }
    s->sendq_tail = NULL;
}

/* Status has arrived: tell the protocol, once. */
static void stream_closed(struct etcd_stream *s)
{
    if (s->done)
        return;
    s->done = 1;
    free_sendq(s);
    char msg[256];
    size_t dl = GRPC_SLICE_LENGTH(s->details);
    if (dl >= sizeof(msg))
        dl = sizeof(msg) - 1;
    memcpy(msg, GRPC_SLICE_START_PTR(s->details), dl);
    msg[dl] = '\0';
    if (!msg[0])
        snprintf(msg, sizeof(msg), "stream ended with gRPC status %d", (int)s->status);
    s->h->on_close(s, (int)s->status, msg);
}

/* Free the stream once nothing of it is pending in the queue any more. */
static void maybe_finish(struct etcd_stream *s)
{
    struct etcd *e = s->e;
    if (!s->done || s->outstanding > 0)
        return;
    for (struct etcd_stream **p = &e->streams; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    if (e->watch_stream == s)
        e->watch_stream = NULL;
    if (e->ka_stream == s)
        e->ka_stream = NULL;
    if (s->call)
        grpc_call_unref(s->call);
    if (s->recv_bb)
        grpc_byte_buffer_destroy(s->recv_bb);
    grpc_slice_unref(s->details);
    grpc_metadata_array_destroy(&s->init_md);
    grpc_metadata_array_destroy(&s->trail_md);
    etcd_metadata_release(s->md, s->nmd);
    free(s);
    if (e->closing && !e->streams && !e->cq_shut) {
        e->cq_shut = 1;
        grpc_completion_queue_shutdown(e->cq);
    }
}

static void on_recv(struct etcd_stream *s, int success)
{
    grpc_byte_buffer *bb = s->recv_bb;
    s->recv_bb = NULL;
    s->got_initial = 1;
    if (!success || !bb) {
        /* The server ended the stream or the call failed: the status batch tells why. */
        if (bb)
            grpc_byte_buffer_destroy(bb);
        return;
    }
    grpc_byte_buffer_reader r;
    grpc_slice all = grpc_empty_slice();
    if (grpc_byte_buffer_reader_init(&r, bb)) {
        all = grpc_byte_buffer_reader_readall(&r);
        grpc_byte_buffer_reader_destroy(&r);
    }
    grpc_byte_buffer_destroy(bb);
    s->idle_from_ms = ea_now_ms();
    s->idle_calls = 0;
    if (!s->done && !s->cancelled && start_recv(s) != GRPC_CALL_OK) {
        grpc_call_cancel(s->call, NULL);
        s->cancelled = 1;
    }
    if (!s->done)
        s->h->on_message(s, GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all));
    grpc_slice_unref(all);
}

static int idle_check_on(const struct etcd_stream *s)
{
    return s->h->on_idle && !s->done && !s->cancelled;
}

/* When the next liveness check is due (CLOCK_MONOTONIC ms), -1 for never. e->lock held. */
static int64_t idle_due(const struct etcd *e)
{
    int64_t due = -1;
    for (const struct etcd_stream *s = e->streams; s; s = s->next)
        if (idle_check_on(s) && (due < 0 || s->idle_from_ms + e->timeout_ms < due))
            due = s->idle_from_ms + e->timeout_ms;
    return due;
}

/* Run the liveness checks that are due. e->lock held. */
static void check_idle(struct etcd *e)
{
    int64_t now = ea_now_ms();
    for (struct etcd_stream *s = e->streams; s; s = s->next)
        if (idle_check_on(s) && now >= s->idle_from_ms + e->timeout_ms) {
            s->idle_from_ms = now;
            s->h->on_idle(s, ++s->idle_calls);
        }
}

static void *io_thread(void *arg)
{
    struct etcd *e = arg;
    for (;;) {
        /* Wake for the next liveness check too; a stream opened meanwhile wakes the thread
         * with its first completion, so the deadline is recomputed in time. */
        pthread_mutex_lock(&e->lock);
        int64_t due = idle_due(e);
        pthread_mutex_unlock(&e->lock);
        gpr_timespec deadline = due < 0 ? gpr_inf_future(GPR_CLOCK_REALTIME) : etcd_deadline(due);
        grpc_event ev = grpc_completion_queue_next(e->cq, deadline, NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type != GRPC_OP_COMPLETE) {
            pthread_mutex_lock(&e->lock);
            check_idle(e);
            pthread_mutex_unlock(&e->lock);
            continue;
        }
        struct stream_tag *t = ev.tag;
        pthread_mutex_lock(&e->lock);
        struct etcd_stream *s = t->s;
        s->outstanding--;
        switch (t->kind) {
        case TAG_START:
            break;
        case TAG_RECV:
            on_recv(s, ev.success);
            break;
        case TAG_SEND:
            grpc_byte_buffer_destroy(s->send_bb);
            s->send_bb = NULL;
            if (ev.success)
                start_send(s);
            break;
        case TAG_STATUS:
            stream_closed(s);
            break;
        case TAG_MAX:
            break;
        }
        maybe_finish(s);
        check_idle(e);
        pthread_mutex_unlock(&e->lock);
    }
    return NULL;
}

static int start_thread(struct etcd *e, struct ea_error *err)
{
    if (e->thread_started)
        return 0;
    e->cq = grpc_completion_queue_create_for_next(NULL);
    /* The thread takes no signals: the agent receives them through signalfd in its loop. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&e->thread, NULL, io_thread, e);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        grpc_completion_queue_shutdown(e->cq);
        grpc_completion_queue_destroy(e->cq);
        e->cq = NULL;
        return ea_errorf(err, -rc, "etcd: cannot start the I/O thread: %s", strerror(rc));
    }
    e->thread_started = 1;
    return 0;
}

int etcd_stream_open(struct etcd *e, size_t ep, const struct etcd_stream_handler *h,
                     struct etcd_stream **ret, struct ea_error *err)
{
    if (e->closing)
        return ea_errorf(err, KV_EINVAL, "etcd: handle is closing");
    int rc = start_thread(e, err);
    if (rc)
        return rc;
    struct etcd_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return ea_errorf(err, -ENOMEM, "etcd: out of memory");
    s->e = e;
    s->h = h;
    s->ep = ep;
    for (int i = 0; i < TAG_MAX; i++)
        s->tags[i] = (struct stream_tag){s, (enum tag_kind)i};
    s->details = grpc_empty_slice();
    s->status = GRPC_STATUS_UNKNOWN;
    s->idle_from_ms = ea_now_ms();
    grpc_metadata_array_init(&s->init_md);
    grpc_metadata_array_init(&s->trail_md);
    s->nmd = etcd_metadata_fill(e, s->md);
    /* Streams live until cancelled: no deadline (a unary one would end every watch). */
    s->call = grpc_channel_create_call(etcd_channel(e, ep), NULL, GRPC_PROPAGATE_DEFAULTS, e->cq,
                                       grpc_slice_from_static_string(h->method), NULL,
                                       gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    s->next = e->streams;
    e->streams = s;

    grpc_op ops[1];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = s->nmd;
    ops[0].data.send_initial_metadata.metadata = s->md;
    grpc_call_error ce = start(s, ops, 1, TAG_START);
    if (ce == GRPC_CALL_OK) {
        memset(ops, 0, sizeof(ops));
        ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
        ops[0].data.recv_status_on_client.trailing_metadata = &s->trail_md;
        ops[0].data.recv_status_on_client.status = &s->status;
        ops[0].data.recv_status_on_client.status_details = &s->details;
        ce = start(s, ops, 1, TAG_STATUS);
    }
    if (ce == GRPC_CALL_OK)
        ce = start_recv(s);
    if (ce != GRPC_CALL_OK) {
        /* Whatever was started completes after the cancel and frees the stream; without a
         * status batch nobody would, so close it here. */
        grpc_call_cancel(s->call, NULL);
        s->cancelled = 1;
        s->done = 1;
        maybe_finish(s);
        return ea_errorf(err, KV_ECONN, "etcd %s at %s: cannot start the stream: %s", h->method,
                         e->eps[ep].addr, grpc_call_error_to_string(ce));
    }
    *ret = s;
    return 0;
}

int etcd_stream_send(struct etcd_stream *s, const ProtobufCMessage *msg, struct ea_error *err)
{
    if (!etcd_stream_alive(s))
        return ea_errorf(err, KV_ECONN, "etcd %s at %s: stream closed", s->h->method,
                         s->e->eps[s->ep].addr);
    struct pending_send *p = malloc(sizeof(*p));
    if (!p)
        return ea_errorf(err, -ENOMEM, "etcd: out of memory");
    size_t n = protobuf_c_message_get_packed_size(msg);
    grpc_slice sl = grpc_slice_malloc(n);
    protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(sl));
    p->bb = grpc_raw_byte_buffer_create(&sl, 1);
    grpc_slice_unref(sl);
    p->next = NULL;
    if (s->sendq_tail)
        s->sendq_tail->next = p;
    else
        s->sendq = p;
    s->sendq_tail = p;
    start_send(s);
    return 0;
}

void etcd_stream_cancel(struct etcd_stream *s)
{
    if (!s || s->cancelled || s->done)
        return;
    s->cancelled = 1;
    free_sendq(s);
    grpc_call_cancel(s->call, NULL);
}

void etcd_stream_abort(struct etcd_stream *s, const char *reason)
{
    if (!s || s->cancelled || s->done)
        return;
    s->cancelled = 1;
    free_sendq(s);
    grpc_call_cancel_with_status(s->call, GRPC_STATUS_UNAVAILABLE, reason, NULL);
}

void etcd_streams_shutdown(struct etcd *e)
{
    pthread_mutex_lock(&e->lock);
    e->closing = 1;
    for (struct etcd_stream *s = e->streams; s; s = s->next)
        etcd_stream_cancel(s);
    int started = e->thread_started;
    if (started && !e->streams && !e->cq_shut) {
        e->cq_shut = 1;
        grpc_completion_queue_shutdown(e->cq);
    }
    pthread_mutex_unlock(&e->lock);
    if (!started)
        return;
    /* Every cancelled stream completes its batches, the last one shuts the queue down. */
    pthread_join(e->thread, NULL);
    grpc_completion_queue_destroy(e->cq);
    e->cq = NULL;
    e->thread_started = 0;
}
