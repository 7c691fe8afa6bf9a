// SPDX-License-Identifier: Apache-2.0
/*
 * etcd_gateway_internal: what the files of the etcd-gateway backend share — the handle, the
 * unary HTTP request with failover and auth (etcd_gateway_http.c), JSON and base64 helpers
 * (etcd_gateway_json.c), the kv requests (etcd_gateway_kv.c) and the watch streams on the
 * helper thread (etcd_gateway_watch.c). Not a public interface: callers use kv.h and
 * etcd_gateway.h.
 */
#ifndef EA_BACKENDS_ETCD_GATEWAY_INTERNAL_H
#define EA_BACKENDS_ETCD_GATEWAY_INTERNAL_H

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "kv.h"
#include "kv_evq.h"

#define ETCD_GW_DEFAULT_TIMEOUT_MS 5000
/* Largest response body or watch message accepted; beyond it the answer is KV_ECORRUPT. */
#define ETCD_GW_MAX_BODY (2 * KV_RESPONSE_BYTES_MAX)

struct etcd_gw_watch;

struct etcd_gw {
    struct kv base;

    /* Immutable after open. */
    char **eps; /* "http://host:port" / "https://host:port", no trailing slash */
    size_t neps;
    int timeout_ms;
    char *user, *password;     /* auth; user NULL = none */
    char *cacert, *cert, *key; /* TLS files for https endpoints, NULL = curl's defaults */
    pid_t pid;                 /* the process that opened the handle */

    /* The unary easy handle (connection reuse), used by one request at a time, driven on the
     * caller's thread through its own multi handle (see etcd_gw_multi_new()). */
    pthread_mutex_t req_lock;
    CURL *easy;
    CURLM *umulti;
    char *resp; /* response body of the request in progress */
    size_t resp_len, resp_cap;
    int resp_err; /* why the body callback gave up: KV_ECORRUPT (too large) or -ENOMEM */
    char errbuf[CURL_ERROR_SIZE];

    pthread_mutex_t lock; /* everything below */
    pthread_cond_t cond;  /* CLOCK_MONOTONIC; broadcast when a watch changes state */
    size_t current;       /* endpoint in use; moves on to the next one on KV_ECONN */
    char *token;          /* auth token; NULL = not authenticated yet, "" = auth disabled */

    /* Watch side: the helper thread drives `multi`, started with the first watch. */
    CURLM *multi;
    pthread_t thread;
    int thread_started;
    int closing;
    struct etcd_gw_watch *watches; /* every watch transfer not yet freed */
    int64_t next_watch_id;
    struct kv_evq evq; /* events for read_events(); its eventfd is event_fd() */
};

/* ---- etcd_gateway.c ---- */

/* KV_EINVAL when `g` was opened by another process (we are a fork child), else 0. */
int etcd_gw_forked(const struct etcd_gw *g, struct ea_error *err);
/* Wait on g->cond until the deadline; g->lock held. 0, or ETIMEDOUT once past it. */
int etcd_gw_cond_wait(struct etcd_gw *g, int64_t deadline_ms);
/* The next call goes to the endpoint after `ep` (if `ep` is still the current one). */
void etcd_gw_advance(struct etcd_gw *g, size_t ep);

/* ---- etcd_gateway_http.c: requests, failover, auth, error mapping ---- */

/* Options every easy handle of `g` gets: TLS files, no proxy, no signals, HTTP/1.1, TCP
 * keepalive, protocols http(s) only, CLOEXEC sockets, `errbuf` for curl's detail. 0 or
 * -ENOMEM. */
int etcd_gw_easy_setup(const struct etcd_gw *g, CURL *c, char *errbuf);
/* curl_multi_init(), with the descriptors curl makes for it (a wakeup socketpair, which
 * libcurl 7.x creates without CLOEXEC) marked CLOEXEC. NULL when out of memory. */
CURLM *etcd_gw_multi_new(void);
/* Request headers: JSON content type, etcd's `hasleader`, and (with_token) the token when
 * there is one. NULL when out of memory. Free with curl_slist_free_all(). */
struct curl_slist *etcd_gw_headers(struct etcd_gw *g, int with_token);

struct etcd_gw_req {
    const char *path; /* "/v3/kv/range" */
    const char *what; /* "get '/k'", for messages */
    int idempotent;   /* may be re-sent to another endpoint after any connection failure */
};
/*
 * POST `body` to rq->path on the current endpoint; on a connection failure move on to the next
 * endpoint (writes only when the request certainly never reached a server). Authenticates
 * first when configured and once more when the token is rejected. All attempts share one
 * deadline of timeout_ms. 0 and *ret = the parsed 200 response (json_decref), or a KV_E* code.
 */
int etcd_gw_call(struct etcd_gw *g, const struct etcd_gw_req *rq, json_t *body, json_t **ret,
                 struct ea_error *err);
/* Make sure a token is held when auth is configured (Authenticate on endpoint `ep`). */
int etcd_gw_auth_ensure(struct etcd_gw *g, size_t ep, int64_t deadline_ms, struct ea_error *err);
/* Forget the token, so the next request authenticates again. */
void etcd_gw_auth_invalidate(struct etcd_gw *g);
/* Whether etcd's error text says the token was missing, expired or unknown. */
int etcd_gw_token_rejected(const char *msg);
/* KV_E* for a gRPC status code and etcd's error text. */
int etcd_gw_code_to_kv(int code, const char *msg);

/* ---- etcd_gateway_json.c: JSON bodies, base64, entries ---- */

/* Set o[name] to the base64 of data[0..len). 0 or -ENOMEM. */
int etcd_gw_set_b64(json_t *o, const char *name, const void *data, size_t len);
/* Set o[name] to an int64 as a JSON string (the gateway's int64 encoding). 0 or -ENOMEM. */
int etcd_gw_set_i64(json_t *o, const char *name, int64_t v);
/* Set "key" and "range_end" selecting every key that starts with `prefix` ("" = all). */
int etcd_gw_set_prefix(json_t *o, const char *prefix);
/* o[name] as int64: absent/null = 0; a decimal string or a JSON integer. 0 or KV_ECORRUPT. */
int etcd_gw_get_i64(const json_t *o, const char *name, int64_t *ret);
/* Decode standard base64 into a fresh NUL-terminated buffer. 0, KV_ECORRUPT or -ENOMEM. */
int etcd_gw_b64_decode(const char *s, size_t len, char **ret, size_t *ret_len);
/* kv_entry from a mvccpb.KeyValue in JSON. 0, KV_ECORRUPT or -ENOMEM. */
int etcd_gw_entry_from_json(const json_t *kv, struct kv_entry *ret);
/* The store revision from a response's "header". 0 or KV_ECORRUPT (also when missing). */
int etcd_gw_header_revision(const json_t *resp, int64_t *ret);
/* An error answer: {"error":"..","code":N,"message":".."} (unary) or
 * {"error":{"grpc_code":N,"message":".."}} (streams). 1 and code/message, or 0 if not one. */
int etcd_gw_error_of(const json_t *o, int *ret_code, const char **ret_msg);

/* ---- etcd_gateway_kv.c: the request/response operations ---- */

int etcd_gw_get(struct kv *kv, const char *key, struct kv_entry *ret, struct ea_error *err);
int etcd_gw_list(struct kv *kv, const char *prefix, struct kv_list *ret, struct ea_error *err);
int etcd_gw_list_page(struct kv *kv, const char *prefix, const char *after, size_t limit,
                      struct kv_list *ret, struct ea_error *err);
int etcd_gw_cas(struct kv *kv, const char *key, const char *value, size_t len,
                int64_t expected_mod_revision, int64_t lease, int64_t *ret_mod_revision,
                struct kv_entry *ret_current, struct ea_error *err);
int etcd_gw_txn(struct kv *kv, const struct kv_cmp *cmps, size_t n_cmps, const struct kv_op *ops,
                size_t n_ops, int64_t *ret_revision, struct ea_error *err);
int etcd_gw_put(struct kv *kv, const char *key, const char *value, size_t len, int64_t lease,
                int64_t *ret_mod_revision, struct ea_error *err);
int etcd_gw_del(struct kv *kv, const char *key, struct ea_error *err);
int etcd_gw_lease_grant(struct kv *kv, int64_t ttl_ms, int64_t *ret_lease, struct ea_error *err);
int etcd_gw_lease_keepalive(struct kv *kv, int64_t lease, int64_t *ret_ttl_ms,
                            struct ea_error *err);
int etcd_gw_lease_revoke(struct kv *kv, int64_t lease, struct ea_error *err);

/* ---- etcd_gateway_watch.c: watch streams, their messages, read_events (kv_evq.h) ---- */

/* One kv watch = one streaming POST /v3/watch. Linked into g->watches under g->lock by watch();
 * from then on only the helper thread touches its curl handle, and frees it once it is `dead`
 * and no watch() call waits on it. */
enum etcd_gw_wstate {
    ETCD_GW_W_PENDING, /* request sent, "created" not seen yet */
    ETCD_GW_W_ACTIVE,  /* delivering events */
    ETCD_GW_W_FAILED,  /* failed before "created": the waiting watch() reports it */
    ETCD_GW_W_ENDED,   /* ended after "created": its KV_EVENT_ERROR is queued */
};

struct etcd_gw_watch {
    struct etcd_gw_watch *next;
    struct etcd_gw *g;
    int64_t from_revision;
    size_t ep;
    CURL *easy;
    struct curl_slist *hdrs;
    char errbuf[CURL_ERROR_SIZE];

    /* Helper thread only. */
    struct etcd_gw_watch *todo;
    int in_multi;
    int64_t last_rx_ms; /* when the stream last said anything (liveness probes) */
    char *buf;          /* the incomplete line received so far */
    size_t len, cap;

    /* Under g->lock. */
    int64_t id;
    enum etcd_gw_wstate state;
    int added;  /* taken by the helper thread */
    int waiter; /* a watch() call is waiting on it: not to be freed yet */
    int dead;   /* nobody needs it any more: the helper thread removes and frees it */
    int lost;   /* an event could not be queued: read_events() ends it with an error */
    int error;  /* ETCD_GW_W_FAILED */
    char message[EA_ERROR_MSG_MAX];
};

/* The watch is over with `code`: a waiting watch() gets it, else a KV_EVENT_ERROR is queued
 * (once; nothing is delivered after it). g->lock held. */
void etcd_gw_end_locked(struct etcd_gw_watch *w, int code, const char *msg);
/* The same, taking g->lock, with a printf-style message. */
void etcd_gw_end_watch(struct etcd_gw_watch *w, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The transfer is over with `res` (helper thread, after removing it from the multi handle). */
void etcd_gw_stream_done(struct etcd_gw_watch *w, CURLcode res);
/* Free a watch and its curl handle (not in a multi handle any more). */
void etcd_gw_watch_free(struct etcd_gw_watch *w);

int etcd_gw_watch(struct kv *kv, const char *prefix, int64_t from_revision, int64_t *ret_watch_id,
                  struct ea_error *err);
void etcd_gw_watch_cancel(struct kv *kv, int64_t watch_id);
int etcd_gw_event_fd(struct kv *kv);
int etcd_gw_read_events(struct kv *kv, struct kv_event **ret_events, size_t *ret_n,
                        struct ea_error *err);

/* ---- etcd_gateway_helper.c: the helper thread driving the watch transfers ---- */

/* Start the helper thread (all signals blocked) and its multi handle, once per handle. */
int etcd_gw_helper_start(struct etcd_gw *g, struct ea_error *err);
/* Stop the helper thread and free every watch (close path, no lock held). */
void etcd_gw_watch_shutdown(struct etcd_gw *g);

#endif
