// SPDX-License-Identifier: Apache-2.0
/*
 * etcd_watch: the two streaming protocols of the etcd backend and the hand-over to the caller.
 * Watch: every kv watch is one etcd watcher on a shared Watch stream; the I/O thread turns
 * WatchResponses into kv_events in the handle's kv_evq (under e->lock), which signals its
 * eventfd. Keepalive: one LeaseKeepAlive stream, one request answered by one response, waited
 * for with a deadline.
 * A broken stream becomes KV_EVENT_ERROR/KV_ECONN for its watches; compaction KV_ECOMPACTED.
 * A silent one too: a watch stream quiet for the handle's timeout is asked for a progress report
 * (etcd >= 3.4 answers at once), and one that stays quiet for another timeout is given up.
 */
#include "etcd_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ea_time.h"
#include "etcd.h"

/* The next request goes to the member after `ep`, unless another thread moved on already.
 * e->lock held. */
static void advance_locked(struct etcd *e, size_t ep)
{
    if (e->current == ep)
        e->current = (ep + 1) % e->neps;
}

/* After an attempt on member `ep` ended with `rc`: whether to try the next member (only on
 * KV_ECONN, while members and time are left), moving e->current on if so. No lock held. */
static int fail_over(struct etcd *e, size_t ep, int rc, size_t *tried, int64_t deadline)
{
    if (rc != KV_ECONN || *tried >= e->neps || ea_now_ms() >= deadline)
        return 0;
    pthread_mutex_lock(&e->lock);
    advance_locked(e, ep);
    pthread_mutex_unlock(&e->lock);
    (*tried)++;
    return 1;
}

static struct etcd_watcher *find_watcher(struct etcd *e, int64_t id)
{
    for (size_t i = 0; i < e->nwatchers; i++)
        if (e->watchers[i].id == id)
            return &e->watchers[i];
    return NULL;
}

static void remove_watcher(struct etcd *e, struct etcd_watcher *w)
{
    *w = e->watchers[--e->nwatchers];
}

static int stream_has_watchers(struct etcd *e, const struct etcd_stream *s)
{
    for (size_t i = 0; i < e->nwatchers; i++)
        if (e->watchers[i].stream == s)
            return 1;
    return 0;
}

/* Queue the end of watch `w` (the caller removes it). */
static void push_error(struct etcd *e, struct etcd_watcher *w, int code, const char *msg)
{
    if (kv_evq_push_error(&e->evq, w->id, code, msg))
        w->lost = 1; /* read_events reports it when it can */
}

static void push_change(struct etcd *e, struct etcd_watcher *w, const Mvccpb__Event *mev)
{
    if (w->lost)
        return;
    struct kv_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.watch_id = w->id;
    int rc = 0;
    if (!mev->kv) {
        rc = KV_ECORRUPT;
    } else if (mev->type == MVCCPB__EVENT__EVENT_TYPE__DELETE) {
        ev.type = KV_EVENT_DELETE;
        ev.entry.key = strndup((const char *)mev->kv->key.data, mev->kv->key.len);
        ev.entry.value = strdup("");
        ev.entry.mod_revision = mev->kv->mod_revision;
        if (!ev.entry.key || !ev.entry.value)
            rc = -ENOMEM;
    } else {
        ev.type = KV_EVENT_PUT;
        rc = etcd_entry_from_kv(&ev.entry, mev->kv);
    }
    if (rc == 0 && kv_evq_push(&e->evq, &ev) == 0)
        return;
    kv_entry_clear(&ev.entry);
    if (rc == KV_ECORRUPT)
        push_error(e, w, rc, "etcd watch: event without a key");
    else
        w->lost = 1;
}

/* KV_E* and text for a watcher etcd cancelled. */
static int cancel_code(const Etcdserverpb__WatchResponse *r, const struct etcd_watcher *w,
                       char *msg, size_t len)
{
    const char *reason = r->cancel_reason && r->cancel_reason[0] ? r->cancel_reason : "";
    if (r->compact_revision || strstr(reason, "compacted")) {
        snprintf(msg, len, "etcd watch from revision %lld: history compacted up to revision %lld",
                 (long long)w->from_revision, (long long)r->compact_revision);
        return KV_ECOMPACTED;
    }
    snprintf(msg, len, "etcd watch cancelled by the server: %s", reason[0] ? reason : "no reason");
    if (strstr(reason, "permission") || strstr(reason, "auth"))
        return KV_EAUTH;
    return KV_ECONN;
}

static void watch_on_message(struct etcd_stream *s, const uint8_t *data, size_t len)
{
    struct etcd *e = etcd_stream_owner(s);
    Etcdserverpb__WatchResponse *r = (Etcdserverpb__WatchResponse *)protobuf_c_message_unpack(
        &etcdserverpb__watch_response__descriptor, NULL, len, data);
    if (!r) {
        /* Nothing on this stream can be trusted now: end it; on_close reports KV_ECONN. */
        etcd_stream_cancel(s);
        return;
    }
    char msg[EA_ERROR_MSG_MAX];
    if (r->created) {
        /* Creates are answered in order and watch() sends one at a time. */
        for (size_t i = 0; i < e->nwatchers; i++) {
            struct etcd_watcher *w = &e->watchers[i];
            if (w->stream != s || w->state != ETCD_W_PENDING)
                continue;
            if (r->canceled) {
                w->state = ETCD_W_FAILED;
                w->error = cancel_code(r, w, w->message, sizeof(w->message));
            } else {
                w->state = ETCD_W_ACTIVE;
                w->server_id = r->watch_id;
            }
            pthread_cond_broadcast(&e->cond);
            break;
        }
    } else {
        struct etcd_watcher *w = NULL;
        for (size_t i = 0; i < e->nwatchers && !w; i++)
            if (e->watchers[i].stream == s && e->watchers[i].state == ETCD_W_ACTIVE &&
                e->watchers[i].server_id == r->watch_id)
                w = &e->watchers[i];
        if (w && r->canceled) {
            push_error(e, w, cancel_code(r, w, msg, sizeof(msg)), msg);
            if (!w->lost)
                remove_watcher(e, w);
        } else if (w) {
            /* No events: a progress notification, nothing to hand over. */
            for (size_t i = 0; i < r->n_events; i++)
                push_change(e, w, r->events[i]);
        }
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
}

static void watch_on_close(struct etcd_stream *s, int code, const char *message)
{
    struct etcd *e = etcd_stream_owner(s);
    size_t ep = etcd_stream_endpoint(s);
    int rc = etcd_status_to_kv((grpc_status_code)code, message);
    if (rc == 0 || rc == KV_EINVAL)
        rc = KV_ECONN;
    char msg[EA_ERROR_MSG_MAX];
    snprintf(msg, sizeof(msg), "etcd watch stream to %s ended: %s", e->eps[ep].addr, message);
    for (size_t i = 0; i < e->nwatchers;) {
        struct etcd_watcher *w = &e->watchers[i];
        if (w->stream != s) {
            i++;
            continue;
        }
        w->stream = NULL;
        if (w->state == ETCD_W_PENDING) {
            w->state = ETCD_W_FAILED;
            w->error = rc;
            snprintf(w->message, sizeof(w->message), "%s", msg);
            i++;
        } else if (w->state == ETCD_W_ACTIVE) {
            push_error(e, w, rc, msg);
            if (w->lost)
                i++;
            else
                remove_watcher(e, w);
        } else {
            i++;
        }
    }
    if (e->watch_stream == s)
        e->watch_stream = NULL;
    if (code != GRPC_STATUS_CANCELLED)
        advance_locked(e, ep); /* re-watch on another member */
    pthread_cond_broadcast(&e->cond);
}

/* Nothing received on a watch stream for the handle's timeout. An idle watch is normal, so ask
 * etcd for a progress report, which it answers at once (a WatchResponse with watch_id -1 and
 * the store revision, on 3.4; any message will do). Nothing again for another timeout means the
 * stream is silent — a stopped or partitioned member, a half-open connection — and would stay so
 * without an error until TCP or gRPC keepalive gave up: end it, so its watches get KV_ECONN and
 * the caller re-lists and re-watches (on_close moves on to the next endpoint). */
static void watch_on_idle(struct etcd_stream *s, int n)
{
    struct etcd *e = etcd_stream_owner(s);
    int active = 0;
    for (size_t i = 0; i < e->nwatchers && !active; i++)
        active = e->watchers[i].stream == s && e->watchers[i].state == ETCD_W_ACTIVE;
    if (!active)
        return; /* a pending create has its own deadline; an empty stream needs no check */
    if (n == 1) {
        Etcdserverpb__WatchProgressRequest p = ETCDSERVERPB__WATCH_PROGRESS_REQUEST__INIT;
        Etcdserverpb__WatchRequest req = ETCDSERVERPB__WATCH_REQUEST__INIT;
        req.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_PROGRESS_REQUEST;
        req.progress_request = &p;
        if (etcd_stream_send(s, &req.base, NULL) == 0)
            return;
    }
    char why[160];
    snprintf(why, sizeof(why),
             "silent for %d ms, no answer to a progress request (member stopped or cut off?)",
             n * e->timeout_ms);
    if (e->watch_stream == s)
        e->watch_stream = NULL;
    etcd_stream_abort(s, why);
}

static const struct etcd_stream_handler watch_handler = {
    .method = ETCD_M_WATCH,
    .on_message = watch_on_message,
    .on_close = watch_on_close,
    .on_idle = watch_on_idle,
};

/* One create on the current watch stream, waited for until the deadline. e->lock held. */
static int create_once(struct etcd *e, Etcdserverpb__WatchCreateRequest *creq, int64_t from,
                       int64_t deadline, int64_t *ret_watch_id, struct ea_error *err)
{
    if (!etcd_stream_alive(e->watch_stream)) {
        int rc = etcd_stream_open(e, e->current, &watch_handler, &e->watch_stream, err);
        if (rc)
            return rc;
    }
    struct etcd_stream *s = e->watch_stream;
    size_t ep = etcd_stream_endpoint(s); /* s may be gone after the wait */
    if (e->nwatchers == e->capwatchers) {
        size_t cap = e->capwatchers ? e->capwatchers * 2 : 8;
        struct etcd_watcher *bigger = realloc(e->watchers, cap * sizeof(*bigger));
        if (!bigger)
            return ea_errorf(err, -ENOMEM, "etcd: out of memory");
        e->watchers = bigger;
        e->capwatchers = cap;
    }
    int64_t id = e->next_watch_id++;
    struct etcd_watcher *w = &e->watchers[e->nwatchers++];
    memset(w, 0, sizeof(*w));
    w->id = id;
    w->server_id = -1;
    w->from_revision = from;
    w->state = ETCD_W_PENDING;
    w->stream = s;

    Etcdserverpb__WatchRequest req = ETCDSERVERPB__WATCH_REQUEST__INIT;
    req.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
    req.create_request = creq;
    creq->watch_id = id;
    int rc = etcd_stream_send(s, &req.base, err);
    while (rc == 0 && (w = find_watcher(e, id)) && w->state == ETCD_W_PENDING)
        if (etcd_cond_wait(e, deadline))
            break;
    w = find_watcher(e, id);
    if (rc == 0 && w && w->state == ETCD_W_ACTIVE) {
        *ret_watch_id = id;
        return 0;
    }
    if (rc == 0 && !w) {
        rc = ea_errorf(err, KV_ECONN, "etcd watch: cancelled while being created");
    } else if (rc == 0 && w->state == ETCD_W_FAILED) {
        rc = ea_errorf(err, w->error, "%s", w->message);
    } else if (rc == 0) {
        /* No answer in time: the stream is unhealthy, its other watches get KV_ECONN. */
        rc = ea_errorf(err, KV_ECONN, "etcd watch at %s: no answer within %d ms", e->eps[ep].addr,
                       e->timeout_ms);
        if (e->watch_stream == s)
            e->watch_stream = NULL;
        etcd_stream_cancel(s);
        advance_locked(e, ep);
    }
    if (w)
        remove_watcher(e, w);
    return rc;
}

int etcd_watch(struct kv *kv, const char *prefix, int64_t from_revision, int64_t *ret_watch_id,
               struct ea_error *err)
{
    struct etcd *e = (struct etcd *)kv;
    if (etcd_forked(e, err))
        return KV_EINVAL;
    if (!prefix || from_revision < 0)
        return ea_errorf(err, KV_EINVAL, "etcd watch: bad prefix or revision %lld",
                         (long long)from_revision);
    size_t plen = strlen(prefix);
    uint8_t *end = malloc(plen + 1);
    if (!end)
        return ea_errorf(err, -ENOMEM, "etcd: out of memory");
    Etcdserverpb__WatchCreateRequest creq = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    static uint8_t zero[1] = {0};
    if (plen) {
        creq.key = (ProtobufCBinaryData){plen, (uint8_t *)prefix};
        creq.range_end.len = etcd_prefix_range_end(creq.key.data, plen, end);
        creq.range_end.data = end;
    } else { /* every key: key "\0", range_end "\0" */
        creq.key = (ProtobufCBinaryData){1, zero};
        creq.range_end = (ProtobufCBinaryData){1, zero};
    }
    creq.start_revision = from_revision;
    /* etcd's own periodic progress notifications (every 10 min by default) as well as the
     * on-demand ones watch_on_idle asks for: both tell a quiet stream from a dead one. */
    creq.progress_notify = 1;

    pthread_mutex_lock(&e->watch_op_lock);
    int64_t deadline = ea_now_ms() + e->timeout_ms;
    size_t tried = 1;
    int reauthed = 0, rc;
    for (;;) {
        pthread_mutex_lock(&e->lock);
        size_t ep = e->watch_stream ? etcd_stream_endpoint(e->watch_stream) : e->current;
        pthread_mutex_unlock(&e->lock);
        rc = etcd_auth_ensure(e, ep, deadline, err);
        if (rc == 0) {
            pthread_mutex_lock(&e->lock);
            rc = create_once(e, &creq, from_revision, deadline, ret_watch_id, err);
            if (rc == KV_EAUTH && e->user && !reauthed) {
                /* Maybe the stream's token expired: log in again, use a fresh stream. */
                struct etcd_stream *old = e->watch_stream;
                e->watch_stream = NULL;
                if (old && !stream_has_watchers(e, old))
                    etcd_stream_cancel(old);
            }
            pthread_mutex_unlock(&e->lock);
        }
        if (rc == KV_EAUTH && e->user && !reauthed) {
            reauthed = 1;
            etcd_auth_invalidate(e);
            continue;
        }
        if (!fail_over(e, ep, rc, &tried, deadline))
            break;
    }
    pthread_mutex_unlock(&e->watch_op_lock);
    free(end);
    return rc;
}

void etcd_watch_cancel(struct kv *kv, int64_t watch_id)
{
    struct etcd *e = (struct etcd *)kv;
    if (etcd_forked(e, NULL))
        return;
    pthread_mutex_lock(&e->lock);
    struct etcd_watcher *w = find_watcher(e, watch_id);
    if (w) {
        struct etcd_stream *s = w->stream;
        int64_t server_id = w->server_id;
        int active = w->state == ETCD_W_ACTIVE;
        remove_watcher(e, w);
        if (active && etcd_stream_alive(s)) {
            if (s != e->watch_stream && !stream_has_watchers(e, s)) {
                etcd_stream_cancel(s);
            } else {
                Etcdserverpb__WatchCancelRequest c = ETCDSERVERPB__WATCH_CANCEL_REQUEST__INIT;
                Etcdserverpb__WatchRequest req = ETCDSERVERPB__WATCH_REQUEST__INIT;
                c.watch_id = server_id;
                req.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CANCEL_REQUEST;
                req.cancel_request = &c;
                (void)etcd_stream_send(s, &req.base, NULL); /* best effort: no caller to tell */
            }
        }
    }
    /* Undelivered events of this watch are dropped. */
    kv_evq_drop_watch(&e->evq, watch_id);
    pthread_mutex_unlock(&e->lock);
}

int etcd_event_fd(struct kv *kv)
{
    return ((struct etcd *)kv)->evq.fd;
}

int etcd_read_events(struct kv *kv, struct kv_event **ret_events, size_t *ret_n,
                     struct ea_error *err)
{
    struct etcd *e = (struct etcd *)kv;
    if (etcd_forked(e, err))
        return KV_EINVAL;
    kv_evq_drain(&e->evq);
    int rc = 0;
    pthread_mutex_lock(&e->lock);
    for (size_t i = 0; i < e->nwatchers && rc == 0;) {
        struct etcd_watcher *w = &e->watchers[i];
        if (!w->lost) {
            i++;
            continue;
        }
        w->lost = 0;
        push_error(e, w, -ENOMEM, "etcd watch: out of memory, events were lost");
        if (w->lost)
            rc = ea_errorf(err, -ENOMEM, "etcd: out of memory queueing watch events");
        else
            remove_watcher(e, w);
    }
    if (rc == 0)
        kv_evq_take(&e->evq, ret_events, ret_n);
    pthread_mutex_unlock(&e->lock);
    return rc;
}

void etcd_watch_release(struct etcd *e)
{
    free(e->watchers);
    e->watchers = NULL;
    e->nwatchers = e->capwatchers = 0;
}

/* ---- lease keepalive ---- */

static void ka_on_message(struct etcd_stream *s, const uint8_t *data, size_t len)
{
    struct etcd *e = etcd_stream_owner(s);
    Etcdserverpb__LeaseKeepAliveResponse *r =
        (Etcdserverpb__LeaseKeepAliveResponse *)protobuf_c_message_unpack(
            &etcdserverpb__lease_keep_alive_response__descriptor, NULL, len, data);
    if (e->ka.state == ETCD_KA_PENDING && e->ka.stream == s) {
        if (!r) {
            e->ka.state = ETCD_KA_FAILED;
            e->ka.error = KV_ECORRUPT;
            snprintf(e->ka.message, sizeof(e->ka.message),
                     "etcd lease keepalive at %s: unreadable response",
                     e->eps[etcd_stream_endpoint(s)].addr);
            etcd_stream_cancel(s);
        } else if (r->id == e->ka.lease) {
            e->ka.state = ETCD_KA_DONE;
            e->ka.ttl_s = r->ttl;
        }
        pthread_cond_broadcast(&e->cond);
    }
    if (r)
        protobuf_c_message_free_unpacked(&r->base, NULL);
}

static void ka_on_close(struct etcd_stream *s, int code, const char *message)
{
    struct etcd *e = etcd_stream_owner(s);
    size_t ep = etcd_stream_endpoint(s);
    if (e->ka.state == ETCD_KA_PENDING && e->ka.stream == s) {
        int rc = etcd_status_to_kv((grpc_status_code)code, message);
        e->ka.state = ETCD_KA_FAILED;
        e->ka.error = rc == 0 || rc == KV_EINVAL ? KV_ECONN : rc;
        snprintf(e->ka.message, sizeof(e->ka.message), "etcd lease keepalive: %s %s: %s",
                 e->eps[ep].addr, e->ka.error == KV_ECONN ? "unreachable" : "failed", message);
        pthread_cond_broadcast(&e->cond);
    }
    if (e->ka_stream == s)
        e->ka_stream = NULL;
    if (code != GRPC_STATUS_CANCELLED)
        advance_locked(e, ep);
}

static const struct etcd_stream_handler ka_handler = {
    .method = ETCD_M_LEASE_KEEPALIVE,
    .on_message = ka_on_message,
    .on_close = ka_on_close,
};

/* One keepalive request/response on the keepalive stream. e->lock held. */
static int ka_once(struct etcd *e, int64_t lease, int64_t deadline, int64_t *ret_ttl_s,
                   struct ea_error *err)
{
    if (!etcd_stream_alive(e->ka_stream)) {
        int rc = etcd_stream_open(e, e->current, &ka_handler, &e->ka_stream, err);
        if (rc)
            return rc;
    }
    struct etcd_stream *s = e->ka_stream;
    size_t ep = etcd_stream_endpoint(s);
    e->ka = (struct etcd_ka){.state = ETCD_KA_PENDING, .lease = lease, .stream = s};
    Etcdserverpb__LeaseKeepAliveRequest req = ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
    req.id = lease;
    int64_t sent = ea_now_ms();
    int rc = etcd_stream_send(s, &req.base, err);
    while (rc == 0 && e->ka.state == ETCD_KA_PENDING)
        if (etcd_cond_wait(e, deadline))
            break;
    if (rc == 0) {
        switch (e->ka.state) {
        case ETCD_KA_DONE:
            *ret_ttl_s = e->ka.ttl_s;
            break;
        case ETCD_KA_FAILED:
            rc = ea_errorf(err, e->ka.error, "%s", e->ka.message);
            break;
        default:
            /* A late answer must not be taken for the next request: drop the stream. */
            rc = ea_errorf(err, KV_ECONN, "etcd lease keepalive at %s: no answer within %d ms",
                           e->eps[ep].addr, (int)(ea_now_ms() - sent));
            if (e->ka_stream == s)
                e->ka_stream = NULL;
            etcd_stream_cancel(s);
            advance_locked(e, ep);
            break;
        }
    }
    e->ka = (struct etcd_ka){.state = ETCD_KA_IDLE};
    return rc;
}

int64_t etcd_attempt_until(int64_t now, int64_t deadline, size_t tried, size_t neps)
{
    if (now >= deadline)
        return deadline;
    /* One member gets half the time left, unless it is the last to try: a silent member
     * must leave time for the next one. With the agent's timeout (a third of the TTL), a
     * renewal due at a third of the TTL that waited all of it on a silent member ended at
     * two thirds, where the session gives the lease up (issue 30, bench/fleet_faults.c). */
    return tried < neps ? now + (deadline - now) / 2 : deadline;
}

int etcd_lease_keepalive(struct kv *kv, int64_t lease, int64_t *ret_ttl_ms, struct ea_error *err)
{
    struct etcd *e = (struct etcd *)kv;
    if (etcd_forked(e, err))
        return KV_EINVAL;
    if (lease <= 0)
        return ea_errorf(err, KV_ENOLEASE, "etcd lease keepalive: no such lease %lld",
                         (long long)lease);
    pthread_mutex_lock(&e->ka_op_lock);
    int64_t deadline = ea_now_ms() + e->timeout_ms;
    int64_t ttl_s = 0;
    size_t tried = 1;
    int rc;
    for (;;) {
        pthread_mutex_lock(&e->lock);
        /* The stream stays on a member while requests there are answered; once one went
         * unanswered (e->current moved on), the keepalive follows: a member that accepts
         * connections but answers nothing (partitioned, frozen) must not hold the lease. */
        struct etcd_stream *old = e->ka_stream;
        if (old && etcd_stream_endpoint(old) != e->current) {
            e->ka_stream = NULL;
            etcd_stream_cancel(old);
        }
        size_t ep = e->ka_stream ? etcd_stream_endpoint(e->ka_stream) : e->current;
        pthread_mutex_unlock(&e->lock);
        int64_t until = etcd_attempt_until(ea_now_ms(), deadline, tried, e->neps);
        rc = etcd_auth_ensure(e, ep, until, err);
        if (rc == 0) {
            pthread_mutex_lock(&e->lock);
            rc = ka_once(e, lease, until, &ttl_s, err);
            pthread_mutex_unlock(&e->lock);
        }
        /* A keepalive is idempotent: any failure to reach a member may go to the next. */
        if (!fail_over(e, ep, rc, &tried, deadline))
            break;
    }
    pthread_mutex_unlock(&e->ka_op_lock);
    if (rc)
        return rc;
    /* etcd answers TTL 0 for a lease it does not know (expired or revoked). */
    if (ttl_s <= 0)
        return ea_errorf(err, KV_ENOLEASE, "etcd lease %lld expired or unknown", (long long)lease);
    if (ret_ttl_ms)
        *ret_ttl_ms = ttl_s * 1000;
    return 0;
}

int etcd_keepalive_endpoint(struct kv *kv)
{
    if (!kv || kv->ops != &kv_etcd_ops)
        return -1;
    struct etcd *e = (struct etcd *)kv;
    pthread_mutex_lock(&e->lock);
    int ep = e->ka_stream ? (int)etcd_stream_endpoint(e->ka_stream) : -1;
    pthread_mutex_unlock(&e->lock);
    return ep;
}
