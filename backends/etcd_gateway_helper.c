// SPDX-License-Identifier: Apache-2.0
/*
 * etcd_gateway_helper: the one extra thread of an etcd-gateway handle. It drives every watch
 * transfer through a curl multi handle (adding the ones watch() queued, reaping the dead ones,
 * handing finished ones to etcd_gw_stream_done()), and checks that idle streams are still
 * served: a watch stream with no change to report says nothing, and a stopped or wedged etcd
 * still has its kernel answer TCP keepalives. So an endpoint whose streams were silent for a
 * while gets a cheap POST /v3/maintenance/status; any HTTP answer proves the member alive, no
 * answer within the request timeout ends its streams with KV_ECONN — what the etcd backend's
 * HTTP/2 pings do (a streaming request body cannot carry a progress request over HTTP/1.1:
 * etcd's HTTP server stops reading it once the response has begun).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ea_time.h"
#include "etcd_gateway_internal.h"

/* One liveness probe in flight per endpoint. Helper thread only. */
struct probe {
    CURL *easy;
    struct curl_slist *hdrs;
    char errbuf[CURL_ERROR_SIZE];
};

/* Silence after which a stream's endpoint is probed: 2 request timeouts within [1 s, 10 s]
 * (the default 5 s timeout gives 10 s, then 5 s for the answer, like the etcd backend's
 * keepalive pings). */
static int64_t probe_idle_ms(const struct etcd_gw *g)
{
    int64_t v = 2 * (int64_t)g->timeout_ms;
    return v < 1000 ? 1000 : v > 10000 ? 10000 : v;
}

static size_t discard(char *ptr, size_t size, size_t nmemb, void *ud)
{
    (void)ptr;
    (void)ud;
    return size * nmemb;
}

static void probe_free(struct etcd_gw *g, struct probe *p, int in_multi)
{
    if (p->easy && in_multi)
        curl_multi_remove_handle(g->multi, p->easy);
    if (p->easy)
        curl_easy_cleanup(p->easy);
    curl_slist_free_all(p->hdrs);
    memset(p, 0, sizeof(*p));
}

/* 1 when the probe is on its way. */
static int probe_start(struct etcd_gw *g, struct probe *p, size_t ep)
{
    size_t ulen = strlen(g->eps[ep]) + sizeof("/v3/maintenance/status");
    char *url = malloc(ulen);
    p->easy = curl_easy_init();
    p->hdrs = etcd_gw_headers(g, 1);
    int bad = !url || !p->easy || !p->hdrs || etcd_gw_easy_setup(g, p->easy, p->errbuf);
    if (!bad) {
        snprintf(url, ulen, "%s/v3/maintenance/status", g->eps[ep]);
        bad |= curl_easy_setopt(p->easy, CURLOPT_URL, url) != CURLE_OK;
        bad |= curl_easy_setopt(p->easy, CURLOPT_HTTPHEADER, p->hdrs) != CURLE_OK;
        bad |= curl_easy_setopt(p->easy, CURLOPT_COPYPOSTFIELDS, "{}") != CURLE_OK;
        bad |= curl_easy_setopt(p->easy, CURLOPT_WRITEFUNCTION, discard) != CURLE_OK;
        bad |= curl_easy_setopt(p->easy, CURLOPT_TIMEOUT_MS, (long)g->timeout_ms) != CURLE_OK;
        bad |= curl_multi_add_handle(g->multi, p->easy) != CURLM_OK;
    }
    free(url);
    if (bad)
        probe_free(g, p, 0);
    return !bad;
}

/* The probe of endpoint `ep` finished (already removed from the multi handle). */
static void probe_done(struct etcd_gw *g, struct probe *p, size_t ep, CURLcode res)
{
    int64_t now = ea_now_ms();
    char msg[EA_ERROR_MSG_MAX];
    if (res == CURLE_OPERATION_TIMEDOUT)
        snprintf(msg, sizeof(msg),
                 "etcd-gateway watch stream to %s ended: the member did not answer a liveness "
                 "probe within %d ms",
                 g->eps[ep], g->timeout_ms);
    else
        snprintf(msg, sizeof(msg),
                 "etcd-gateway watch stream to %s ended: liveness probe failed: %s%s%s", g->eps[ep],
                 curl_easy_strerror(res), p->errbuf[0] ? ": " : "", p->errbuf);
    pthread_mutex_lock(&g->lock);
    for (struct etcd_gw_watch *w = g->watches; w; w = w->next) {
        if (w->ep != ep || !w->in_multi)
            continue;
        if (res == CURLE_OK)
            w->last_rx_ms = now; /* any HTTP answer: the member is there */
        else
            etcd_gw_end_locked(w, KV_ECONN, msg); /* dead now: reaped next round */
    }
    pthread_mutex_unlock(&g->lock);
    probe_free(g, p, 0);
}

/* Start the probes that are due; milliseconds until the next one may be (for the poll). */
static int64_t probes_schedule(struct etcd_gw *g, struct probe *probes)
{
    int64_t now = ea_now_ms(), idle = probe_idle_ms(g), wait = 10000;
    struct etcd_gw_watch *w;
    pthread_mutex_lock(&g->lock);
restart:
    for (w = g->watches; w; w = w->next) {
        if (!w->in_multi || w->dead || w->state != ETCD_GW_W_ACTIVE || probes[w->ep].easy)
            continue;
        int64_t due = w->last_rx_ms + idle - now;
        if (due > 0) {
            wait = due < wait ? due : wait;
            continue;
        }
        size_t ep = w->ep;
        pthread_mutex_unlock(&g->lock); /* the headers take the lock for the token */
        int started = probe_start(g, &probes[ep], ep);
        pthread_mutex_lock(&g->lock);
        if (!started) {
            wait = 1000; /* out of memory: try again later */
            break;
        }
        goto restart; /* the list may have changed meanwhile; ends: one probe per endpoint */
    }
    pthread_mutex_unlock(&g->lock);
    return wait;
}

/* Take the list changes made by other threads: new watches in, dead ones out. */
static void sync_list(struct etcd_gw *g)
{
    struct etcd_gw_watch *reap = NULL, *todo = NULL, *w, *next;
    pthread_mutex_lock(&g->lock);
    for (struct etcd_gw_watch **pp = &g->watches; (w = *pp);) {
        if (w->dead && !w->waiter) {
            *pp = w->next;
            w->next = reap;
            reap = w;
            continue;
        }
        if (!w->added && !w->dead) {
            w->added = 1;
            w->todo = todo;
            todo = w;
        }
        pp = &w->next;
    }
    pthread_mutex_unlock(&g->lock);
    for (w = reap; w; w = next) {
        next = w->next;
        if (w->in_multi)
            curl_multi_remove_handle(g->multi, w->easy);
        etcd_gw_watch_free(w);
    }
    for (w = todo; w; w = w->todo) {
        w->last_rx_ms = ea_now_ms();
        if (curl_multi_add_handle(g->multi, w->easy) == CURLM_OK)
            w->in_multi = 1;
        else
            etcd_gw_end_watch(w, -ENOMEM, "etcd-gateway watch at %s: %s", g->eps[w->ep],
                              "cannot start the transfer");
    }
}

static void *helper_main(void *arg)
{
    struct etcd_gw *g = arg;
    struct probe *probes = calloc(g->neps, sizeof(*probes)); /* NULL: no probes, still works */
    for (;;) {
        pthread_mutex_lock(&g->lock);
        int closing = g->closing;
        pthread_mutex_unlock(&g->lock);
        if (closing)
            break;
        sync_list(g);
        int running = 0, left = 0, again = 0;
        curl_multi_perform(g->multi, &running);
        CURLMsg *m;
        while ((m = curl_multi_info_read(g->multi, &left))) {
            if (m->msg != CURLMSG_DONE)
                continue;
            CURL *easy = m->easy_handle;
            CURLcode res = m->data.result;
            curl_multi_remove_handle(g->multi, easy); /* `m` is invalid from here */
            size_t ep = 0;
            while (probes && ep < g->neps && probes[ep].easy != easy)
                ep++;
            if (probes && ep < g->neps) {
                probe_done(g, &probes[ep], ep, res);
            } else {
                char *priv = NULL;
                curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv);
                struct etcd_gw_watch *w = (struct etcd_gw_watch *)(void *)priv;
                w->in_multi = 0;
                etcd_gw_stream_done(w, res);
            }
            again = 1; /* reap without waiting */
        }
        int64_t wait = probes ? probes_schedule(g, probes) : 10000;
        /* Woken early by curl_multi_wakeup() when watch()/cancel()/close() changed the list;
         * curl shortens the wait to its own timers (connect and probe timeouts). */
        curl_multi_poll(g->multi, NULL, 0, again ? 0 : (int)wait, NULL);
    }
    for (size_t i = 0; probes && i < g->neps; i++)
        probe_free(g, &probes[i], 1);
    free(probes);
    return NULL;
}

int etcd_gw_helper_start(struct etcd_gw *g, struct ea_error *err)
{
    int rc = 0;
    pthread_mutex_lock(&g->lock);
    if (!g->thread_started) {
        g->multi = etcd_gw_multi_new();
        if (!g->multi) {
            rc = ea_errorf(err, -ENOMEM, "etcd-gateway: cannot create a curl multi handle");
        } else {
            /* Signals belong to the agent's main loop (signalfd): block them all in the
             * helper from its first instruction on. */
            sigset_t all, old;
            sigfillset(&all);
            pthread_sigmask(SIG_SETMASK, &all, &old);
            int prc = pthread_create(&g->thread, NULL, helper_main, g);
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            if (prc) {
                curl_multi_cleanup(g->multi);
                g->multi = NULL;
                rc = ea_errorf(err, -prc, "etcd-gateway: cannot start the watch thread: %s",
                               strerror(prc));
            } else {
                g->thread_started = 1;
            }
        }
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

void etcd_gw_watch_shutdown(struct etcd_gw *g)
{
    if (g->thread_started) {
        pthread_mutex_lock(&g->lock);
        g->closing = 1;
        pthread_mutex_unlock(&g->lock);
        curl_multi_wakeup(g->multi);
        pthread_join(g->thread, NULL);
        g->thread_started = 0;
    }
    while (g->watches) {
        struct etcd_gw_watch *w = g->watches;
        g->watches = w->next;
        if (w->in_multi)
            curl_multi_remove_handle(g->multi, w->easy);
        etcd_gw_watch_free(w);
    }
    if (g->multi)
        curl_multi_cleanup(g->multi);
    g->multi = NULL;
}
