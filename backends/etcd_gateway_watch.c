// SPDX-License-Identifier: Apache-2.0
/*
 * etcd_gateway_watch: watches over the gateway. Every kv watch is one long-lived POST /v3/watch
 * whose chunked response carries one JSON object per line ({"result":{...}}). The helper thread
 * (etcd_gateway_helper.c) drives the transfers; this file creates them, parses the lines as
 * they arrive and hands kv_events to the caller through the handle's kv_evq (under g->lock).
 * A stream that ends (etcd killed or restarted) becomes KV_EVENT_ERROR KV_ECONN, a compacted
 * start revision KV_ECOMPACTED: the agent re-lists and watches again.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ea_time.h"
#include "etcd_gateway_internal.h"

/* ---- the end of a watch ---- */

/* The watch is over with `code`: tell whoever needs to know, once. */
void etcd_gw_end_locked(struct etcd_gw_watch *w, int code, const char *msg)
{
    struct etcd_gw *g = w->g;
    if (w->state == ETCD_GW_W_PENDING) {
        w->state = ETCD_GW_W_FAILED;
        w->error = code;
        snprintf(w->message, sizeof(w->message), "%s", msg);
        pthread_cond_broadcast(&g->cond);
    } else if (w->state == ETCD_GW_W_ACTIVE) {
        w->state = ETCD_GW_W_ENDED;
        if (w->dead)
            return;
        if (kv_evq_push_error(&g->evq, w->id, code, msg))
            w->lost = 1; /* read_events reports it when it can */
        else
            w->dead = 1;
    }
}

void etcd_gw_end_watch(struct etcd_gw_watch *w, int code, const char *fmt, ...)
{
    char msg[EA_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&w->g->lock);
    etcd_gw_end_locked(w, code, msg);
    pthread_mutex_unlock(&w->g->lock);
}

/* ---- one message of the stream ---- */

static int parse_events(const json_t *r, int64_t id, struct kv_event **ret, size_t *ret_n)
{
    const json_t *arr = json_object_get(r, "events");
    size_t n = json_array_size(arr);
    *ret = NULL;
    *ret_n = 0;
    if (arr && !json_is_null(arr) && !json_is_array(arr))
        return KV_ECORRUPT;
    if (n == 0)
        return 0; /* "created", or a progress notification */
    struct kv_event *evs = calloc(n, sizeof(*evs));
    if (!evs)
        return -ENOMEM;
    int rc = 0;
    size_t i;
    for (i = 0; i < n && rc == 0; i++) {
        const json_t *e = json_array_get(arr, i);
        const json_t *t = json_object_get(e, "type");
        evs[i].watch_id = id;
        if (!t || json_is_null(t) || (json_is_string(t) && !strcmp(json_string_value(t), "PUT")))
            evs[i].type = KV_EVENT_PUT; /* PUT is 0, omitted as a default */
        else if (json_is_string(t) && !strcmp(json_string_value(t), "DELETE"))
            evs[i].type = KV_EVENT_DELETE;
        else
            rc = KV_ECORRUPT;
        if (rc == 0)
            rc = etcd_gw_entry_from_json(json_object_get(e, "kv"), &evs[i].entry);
        if (rc == 0 && evs[i].type == KV_EVENT_DELETE) {
            evs[i].entry.value[0] = '\0'; /* kv.h: a DELETE's value is "" */
            evs[i].entry.value_len = 0;
        }
    }
    if (rc) {
        kv_events_free(evs, i);
        return rc;
    }
    *ret = evs;
    *ret_n = n;
    return 0;
}

/* KV_E* and text for a watch etcd cancelled. */
static int cancel_code(const struct etcd_gw_watch *w, const json_t *r, char *msg, size_t len)
{
    int64_t crev = 0;
    (void)etcd_gw_get_i64(r, "compact_revision", &crev);
    const json_t *why = json_object_get(r, "cancel_reason");
    const char *reason = json_is_string(why) ? json_string_value(why) : "";
    if (crev || strstr(reason, "compacted")) {
        snprintf(msg, len,
                 "etcd-gateway watch from revision %lld: history compacted up to revision %lld",
                 (long long)w->from_revision, (long long)crev);
        return KV_ECOMPACTED;
    }
    snprintf(msg, len, "etcd-gateway watch at %s cancelled by the server: %s", w->g->eps[w->ep],
             reason[0] ? reason : "no reason");
    if (strstr(reason, "permission") || strstr(reason, "auth") || strstr(reason, "user name"))
        return KV_EAUTH;
    return KV_ECONN;
}

/* Handle one line; nonzero ends the transfer (the watch is over or no longer wanted). */
static int handle_line(struct etcd_gw_watch *w, const char *s, size_t len)
{
    while (len && (s[len - 1] == '\r' || s[len - 1] == ' '))
        len--;
    if (len == 0)
        return 0;
    json_error_t jerr;
    json_t *j = json_loadb(s, len, 0, &jerr);
    if (!j) {
        etcd_gw_end_watch(w, KV_ECORRUPT, "etcd-gateway watch at %s: unreadable message (%s)",
                          w->g->eps[w->ep], jerr.text);
        return -1;
    }
    const json_t *r = json_object_get(j, "result");
    int code = 0;
    const char *emsg = NULL;
    if (!json_is_object(r)) {
        if (etcd_gw_error_of(j, &code, &emsg)) {
            int kc = etcd_gw_code_to_kv(code, emsg);
            etcd_gw_end_watch(w, kc ? kc : KV_ECONN, "etcd-gateway watch at %s failed: %s",
                              w->g->eps[w->ep], emsg);
        } else {
            etcd_gw_end_watch(w, KV_ECORRUPT, "etcd-gateway watch at %s: %s", w->g->eps[w->ep],
                              "message without a result");
        }
        json_decref(j);
        return -1;
    }
    int created = json_is_true(json_object_get(r, "created"));
    int canceled = json_is_true(json_object_get(r, "canceled"));
    struct kv_event *evs = NULL;
    size_t nev = 0, used = 0;
    char msg[EA_ERROR_MSG_MAX];
    struct etcd_gw *g = w->g;
    int prc = parse_events(r, w->id, &evs, &nev); /* w->id is fixed before the transfer */
    pthread_mutex_lock(&g->lock);
    int stop = w->dead || w->state == ETCD_GW_W_FAILED || w->state == ETCD_GW_W_ENDED;
    if (!stop && created && w->state == ETCD_GW_W_PENDING) {
        if (canceled) {
            etcd_gw_end_locked(w, cancel_code(w, r, msg, sizeof(msg)), msg);
            stop = 1;
        } else {
            w->state = ETCD_GW_W_ACTIVE;
            pthread_cond_broadcast(&g->cond);
        }
    }
    if (!stop && prc) {
        snprintf(msg, sizeof(msg), "etcd-gateway watch at %s: %s", g->eps[w->ep],
                 prc == -ENOMEM ? "out of memory reading events" : "unreadable event");
        etcd_gw_end_locked(w, prc, msg);
        stop = 1;
    }
    for (; !stop && w->state == ETCD_GW_W_ACTIVE && used < nev; used++) {
        if (kv_evq_push(&g->evq, &evs[used])) {
            etcd_gw_end_locked(w, -ENOMEM, "etcd-gateway watch: out of memory, events were lost");
            stop = 1;
        }
    }
    if (!stop && canceled && !created) {
        etcd_gw_end_locked(w, cancel_code(w, r, msg, sizeof(msg)), msg);
        stop = 1;
    }
    pthread_mutex_unlock(&g->lock);
    for (size_t i = used; i < nev; i++)
        kv_entry_clear(&evs[i].entry);
    free(evs); /* the pushed entries moved into the queue */
    json_decref(j);
    return stop;
}

static size_t on_stream(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct etcd_gw_watch *w = ud;
    size_t n = size * nmemb;
    w->last_rx_ms = ea_now_ms(); /* the stream is alive */
    if (w->len + n > ETCD_GW_MAX_BODY) {
        etcd_gw_end_watch(w, KV_ECORRUPT, "etcd-gateway watch at %s: %s", w->g->eps[w->ep],
                          "message too large");
        return 0;
    }
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n)
            cap *= 2;
        char *bigger = realloc(w->buf, cap);
        if (!bigger) {
            etcd_gw_end_watch(w, -ENOMEM, "etcd-gateway watch at %s: %s", w->g->eps[w->ep],
                              "out of memory");
            return 0;
        }
        w->buf = bigger;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, ptr, n);
    w->len += n;
    size_t start = 0;
    for (;;) {
        char *nl = memchr(w->buf + start, '\n', w->len - start);
        if (!nl)
            break;
        size_t llen = (size_t)(nl - (w->buf + start));
        if (handle_line(w, w->buf + start, llen))
            return 0; /* ends the transfer */
        start += llen + 1;
    }
    memmove(w->buf, w->buf + start, w->len - start);
    w->len -= start;
    return n;
}

/* The transfer is over (helper thread, removed from the multi handle). */
void etcd_gw_stream_done(struct etcd_gw_watch *w, CURLcode res)
{
    long status = 0;
    curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &status);
    /* A complete answer may end without a newline (an error object). A cut one is not
     * parsed: its tail is a fragment. */
    if (res == CURLE_OK && w->len && handle_line(w, w->buf, w->len))
        return;
    w->len = 0;
    char detail[EA_ERROR_MSG_MAX / 2];
    int code = KV_ECONN;
    if (res == CURLE_OK && status != 200) {
        snprintf(detail, sizeof(detail), "not an etcd gateway answer (HTTP %ld)", status);
        code = status == 404 ? KV_EINVAL : KV_ECONN;
    } else if (res == CURLE_OK) {
        snprintf(detail, sizeof(detail), "ended by the server");
    } else {
        snprintf(detail, sizeof(detail), "%s%s%s", curl_easy_strerror(res),
                 w->errbuf[0] ? ": " : "", w->errbuf);
    }
    /* Only this thread changes w->state: reading it unlocked is safe here. */
    etcd_gw_end_watch(w, code, "etcd-gateway watch stream to %s %s: %s", w->g->eps[w->ep],
                      w->state == ETCD_GW_W_PENDING ? "failed" : "ended", detail);
}

/* ---- watch / cancel / events ---- */

void etcd_gw_watch_free(struct etcd_gw_watch *w)
{
    if (w->easy)
        curl_easy_cleanup(w->easy);
    curl_slist_free_all(w->hdrs);
    free(w->buf);
    free(w);
}

/* One watch transfer to endpoint `ep`, waited for until "created" or the deadline. */
static int create_once(struct etcd_gw *g, size_t ep, const char *body, int64_t from,
                       int64_t deadline, int64_t *ret_watch_id, struct ea_error *err)
{
    struct etcd_gw_watch *w = calloc(1, sizeof(*w));
    size_t ulen = strlen(g->eps[ep]) + sizeof("/v3/watch");
    char *url = malloc(ulen);
    if (w) {
        w->g = g;
        w->ep = ep;
        w->from_revision = from;
        w->easy = curl_easy_init();
        w->hdrs = etcd_gw_headers(g, 1);
    }
    int64_t left = deadline - ea_now_ms();
    if (!w || !url || !w->easy || !w->hdrs || etcd_gw_easy_setup(g, w->easy, w->errbuf)) {
        free(url);
        if (w)
            etcd_gw_watch_free(w);
        return ea_errorf(err, -ENOMEM, "etcd-gateway: out of memory");
    }
    snprintf(url, ulen, "%s/v3/watch", g->eps[ep]);
    int bad = curl_easy_setopt(w->easy, CURLOPT_URL, url) != CURLE_OK;
    free(url);
    bad |= curl_easy_setopt(w->easy, CURLOPT_HTTPHEADER, w->hdrs) != CURLE_OK;
    bad |= curl_easy_setopt(w->easy, CURLOPT_COPYPOSTFIELDS, body) != CURLE_OK;
    bad |= curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, on_stream) != CURLE_OK;
    bad |= curl_easy_setopt(w->easy, CURLOPT_WRITEDATA, w) != CURLE_OK;
    bad |= curl_easy_setopt(w->easy, CURLOPT_PRIVATE, (char *)(void *)w) != CURLE_OK;
    /* Connecting is bounded; the stream itself has no timeout. */
    bad |= curl_easy_setopt(w->easy, CURLOPT_CONNECTTIMEOUT_MS, left > 1 ? (long)left : 1L) !=
           CURLE_OK;
    if (bad) {
        etcd_gw_watch_free(w);
        return ea_errorf(err, -ENOMEM, "etcd-gateway: cannot set up the watch transfer");
    }

    pthread_mutex_lock(&g->lock);
    w->id = g->next_watch_id++;
    w->state = ETCD_GW_W_PENDING;
    w->waiter = 1;
    w->next = g->watches;
    g->watches = w;
    pthread_mutex_unlock(&g->lock);
    curl_multi_wakeup(g->multi);

    int rc = 0;
    pthread_mutex_lock(&g->lock);
    while (w->state == ETCD_GW_W_PENDING)
        if (etcd_gw_cond_wait(g, deadline))
            break;
    if (w->state == ETCD_GW_W_ACTIVE || w->state == ETCD_GW_W_ENDED) {
        *ret_watch_id = w->id; /* an ENDED one has its error event queued already */
    } else if (w->state == ETCD_GW_W_FAILED) {
        rc = ea_errorf(err, w->error, "%s", w->message);
        w->dead = 1;
    } else {
        rc = ea_errorf(err, KV_ECONN, "etcd-gateway watch at %s: no answer within %d ms",
                       g->eps[ep], g->timeout_ms);
        w->dead = 1;
    }
    w->waiter = 0;
    pthread_mutex_unlock(&g->lock);
    if (rc)
        curl_multi_wakeup(g->multi); /* reap it */
    return rc;
}

static char *create_body(const char *prefix, int64_t from_revision)
{
    json_t *c = json_object();
    char *text = NULL;
    if (c && etcd_gw_set_prefix(c, prefix) == 0 &&
        etcd_gw_set_i64(c, "start_revision", from_revision) == 0) {
        json_t *req = json_pack("{s:O}", "create_request", c);
        text = req ? json_dumps(req, JSON_COMPACT) : NULL;
        json_decref(req);
    }
    json_decref(c);
    return text;
}

int etcd_gw_watch(struct kv *kv, const char *prefix, int64_t from_revision, int64_t *ret_watch_id,
                  struct ea_error *err)
{
    struct etcd_gw *g = (struct etcd_gw *)kv;
    if (etcd_gw_forked(g, err))
        return KV_EINVAL;
    if (!prefix || from_revision < 0)
        return ea_errorf(err, KV_EINVAL, "etcd-gateway watch: bad prefix or revision %lld",
                         (long long)from_revision);
    char *body = create_body(prefix, from_revision);
    if (!body)
        return ea_errorf(err, -ENOMEM, "etcd-gateway: out of memory");
    int rc = etcd_gw_helper_start(g, err);
    int64_t deadline = ea_now_ms() + g->timeout_ms;
    pthread_mutex_lock(&g->lock);
    size_t ep = g->current;
    pthread_mutex_unlock(&g->lock);
    size_t tried = 1;
    int reauthed = 0;
    struct ea_error e2 = {0};
    while (rc == 0) {
        rc = etcd_gw_auth_ensure(g, ep, deadline, &e2);
        if (rc == 0)
            rc = create_once(g, ep, body, from_revision, deadline, ret_watch_id, &e2);
        if (rc == KV_EAUTH && g->user && !reauthed && etcd_gw_token_rejected(e2.msg)) {
            reauthed = 1; /* the token expired or auth was switched on: log in again */
            etcd_gw_auth_invalidate(g);
            rc = 0;
            continue;
        }
        if (rc != KV_ECONN)
            break;
        /* Creating a watch changes nothing: any failure to reach a member may go to the
         * next one. */
        etcd_gw_advance(g, ep);
        if (tried >= g->neps || ea_now_ms() >= deadline)
            break;
        ep = (ep + 1) % g->neps;
        tried++;
        rc = 0;
    }
    if (rc && e2.msg[0])
        ea_errorf(err, rc, "%s", e2.msg);
    free(body);
    return rc;
}

void etcd_gw_watch_cancel(struct kv *kv, int64_t watch_id)
{
    struct etcd_gw *g = (struct etcd_gw *)kv;
    if (etcd_gw_forked(g, NULL))
        return;
    pthread_mutex_lock(&g->lock);
    if (!g->thread_started) { /* no watch was ever made */
        pthread_mutex_unlock(&g->lock);
        return;
    }
    for (struct etcd_gw_watch *w = g->watches; w; w = w->next)
        if (w->id == watch_id && !w->dead)
            w->dead = 1; /* the helper thread aborts the transfer */
    /* Undelivered events of this watch are dropped. */
    kv_evq_drop_watch(&g->evq, watch_id);
    pthread_mutex_unlock(&g->lock);
    curl_multi_wakeup(g->multi);
}

int etcd_gw_event_fd(struct kv *kv)
{
    return ((struct etcd_gw *)kv)->evq.fd;
}

int etcd_gw_read_events(struct kv *kv, struct kv_event **ret_events, size_t *ret_n,
                        struct ea_error *err)
{
    struct etcd_gw *g = (struct etcd_gw *)kv;
    if (etcd_gw_forked(g, err))
        return KV_EINVAL;
    kv_evq_drain(&g->evq);
    int rc = 0, reap = 0;
    pthread_mutex_lock(&g->lock);
    for (struct etcd_gw_watch *w = g->watches; w && rc == 0; w = w->next) {
        if (!w->lost || w->dead)
            continue;
        if (kv_evq_push_error(&g->evq, w->id, -ENOMEM,
                              "etcd-gateway watch: out of memory, events were lost")) {
            rc = ea_errorf(err, -ENOMEM, "etcd-gateway: out of memory queueing watch events");
        } else {
            w->lost = 0;
            w->dead = reap = 1;
        }
    }
    if (rc == 0)
        kv_evq_take(&g->evq, ret_events, ret_n);
    pthread_mutex_unlock(&g->lock);
    if (reap)
        curl_multi_wakeup(g->multi);
    return rc;
}
