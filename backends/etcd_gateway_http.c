// SPDX-License-Identifier: Apache-2.0
/*
 * etcd_gateway_http: one JSON request to the gateway over the handle's easy handle (so the
 * connection is reused), endpoint failover, the auth token (Authorization header, raw token as
 * etcd 3.4 wants it), and the mapping of curl failures and etcd's error answers to KV_E* codes.
 * Runs on the caller's thread; one request at a time per handle (req_lock).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ea_time.h"
#include "etcd_gateway_internal.h"

/* Every connection socket CLOEXEC from birth (libcurl 7.x does not ask for it). */
static curl_socket_t open_socket(void *ud, curlsocktype purpose, struct curl_sockaddr *a)
{
    (void)ud;
    (void)purpose;
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

/* The open descriptors of this process, ascending (the order /proc lists them in). */
static size_t list_fds(int *fds, size_t cap)
{
    DIR *d = opendir("/proc/self/fd");
    size_t n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) && n < cap)
        if (de->d_name[0] != '.' && atoi(de->d_name) != dirfd(d)) /* not the listing's own */
            fds[n++] = atoi(de->d_name);
    if (d)
        closedir(d);
    return n;
}

CURLM *etcd_gw_multi_new(void)
{
    /* curl offers no hook for the descriptors it makes for a multi handle: mark whatever
     * appeared across the call. In this project every descriptor is CLOEXEC anyway, so a
     * concurrent thread's descriptor caught by mistake loses nothing. */
    enum { MAX = 4096 };
    int *before = malloc(2 * MAX * sizeof(int));
    if (!before)
        return NULL;
    int *after = before + MAX;
    size_t nb = list_fds(before, MAX);
    CURLM *m = curl_multi_init();
    size_t na = m ? list_fds(after, MAX) : 0;
    for (size_t i = 0, j = 0; i < na; i++) {
        while (j < nb && before[j] < after[i])
            j++;
        if (j < nb && before[j] == after[i])
            continue;
        int fl = fcntl(after[i], F_GETFD);
        if (fl >= 0 && !(fl & FD_CLOEXEC))
            fcntl(after[i], F_SETFD, fl | FD_CLOEXEC);
    }
    free(before);
    return m;
}

int etcd_gw_easy_setup(const struct etcd_gw *g, CURL *c, char *errbuf)
{
    int bad = 0;
    bad |= curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) != CURLE_OK; /* threads: no SIGALRM */
    /* The store is addressed directly: an http_proxy meant for downloads must not apply. */
    bad |= curl_easy_setopt(c, CURLOPT_PROXY, "") != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK;
    /* One request per connection at a time is all we need; HTTP/1.1 keeps the gateway's
     * line-per-message watch framing simple and behaves the same on http and https. */
    bad |= curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1) != CURLE_OK;
    /* A dead peer under an idle watch stream is found by TCP keepalive (etcd sends nothing). */
    bad |= curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 10L) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 5L) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf) != CURLE_OK;
    if (g->cacert)
        bad |= curl_easy_setopt(c, CURLOPT_CAINFO, g->cacert) != CURLE_OK;
    if (g->cert)
        bad |= curl_easy_setopt(c, CURLOPT_SSLCERT, g->cert) != CURLE_OK;
    if (g->key)
        bad |= curl_easy_setopt(c, CURLOPT_SSLKEY, g->key) != CURLE_OK;
    return bad ? -ENOMEM : 0;
}

struct curl_slist *etcd_gw_headers(struct etcd_gw *g, int with_token)
{
    struct curl_slist *l = NULL, *t;
    static const char *const fixed[] = {
        "Content-Type: application/json",
        "Expect:", /* no 100-continue round trip for large bodies */
        /* Forwarded by the gateway as gRPC metadata: a member without a leader fails fast
         * ("no leader") instead of stalling until our timeout. */
        "Grpc-Metadata-Hasleader: true",
    };
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        if (!(t = curl_slist_append(l, fixed[i])))
            goto oom;
        l = t;
    }
    pthread_mutex_lock(&g->lock);
    char *auth = NULL;
    int want = with_token && g->token && g->token[0];
    if (want) {
        size_t n = strlen(g->token) + 32;
        if ((auth = malloc(n)))
            snprintf(auth, n, "Authorization: %s", g->token); /* raw token: 3.4 rejects Bearer */
    }
    pthread_mutex_unlock(&g->lock);
    if (want && !auth)
        goto oom;
    if (auth) {
        t = curl_slist_append(l, auth);
        free(auth);
        if (!t)
            goto oom;
        l = t;
    }
    return l;
oom:
    curl_slist_free_all(l);
    return NULL;
}

int etcd_gw_code_to_kv(int code, const char *msg)
{
    switch (code) {
    case 0:
        return 0;
    case 16: /* UNAUTHENTICATED */
    case 7:  /* PERMISSION_DENIED */
        return KV_EAUTH;
    case 3: /* INVALID_ARGUMENT: etcd reports a missing token / failed login this way */
        if (strstr(msg, "user name") || strstr(msg, "authentication failed") ||
            strstr(msg, "auth token") || strstr(msg, "password"))
            return KV_EAUTH;
        return KV_EINVAL;
    case 5: /* NOT_FOUND */
        return strstr(msg, "lease not found") ? KV_ENOLEASE : KV_EINVAL;
    case 11: /* OUT_OF_RANGE */
        return strstr(msg, "compacted") ? KV_ECOMPACTED : KV_EINVAL;
    case 15: /* DATA_LOSS */
        return KV_ECORRUPT;
    case 9:  /* FAILED_PRECONDITION */
    case 12: /* UNIMPLEMENTED */
        return KV_EINVAL;
    default: /* UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, RESOURCE_EXHAUSTED, INTERNAL, ... */
        return KV_ECONN;
    }
}

int etcd_gw_token_rejected(const char *msg)
{
    return strstr(msg, "auth token") || strstr(msg, "user name is empty");
}

/* ---- one attempt ---- */

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct etcd_gw *g = ud;
    size_t n = size * nmemb;
    if (g->resp_len + n + 1 > g->resp_cap) {
        if (g->resp_len + n + 1 > ETCD_GW_MAX_BODY) {
            g->resp_err = KV_ECORRUPT;
            return 0; /* ends the transfer with CURLE_WRITE_ERROR */
        }
        size_t cap = g->resp_cap ? g->resp_cap : 4096;
        while (cap < g->resp_len + n + 1)
            cap *= 2;
        char *bigger = realloc(g->resp, cap);
        if (!bigger) {
            g->resp_err = -ENOMEM;
            return 0;
        }
        g->resp = bigger;
        g->resp_cap = cap;
    }
    memcpy(g->resp + g->resp_len, ptr, n);
    g->resp_len += n;
    return n;
}

struct attempt {
    CURLcode cc;
    long status;  /* HTTP status when cc == CURLE_OK */
    int sent;     /* the request may have reached the server */
    json_t *json; /* the parsed body, when it parsed */
    char detail[EA_ERROR_MSG_MAX / 2];
};

/* Curl failures after which the request certainly never reached a server. */
static int never_sent(CURLcode cc)
{
    switch (cc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_OUT_OF_MEMORY:
        return 1;
    default:
        return 0;
    }
}

/* curl_easy_perform() through the handle's own multi handle: the same work, but on a multi
 * whose descriptors were made CLOEXEC (curl_easy_perform would make a hidden one). */
static CURLcode perform(struct etcd_gw *g)
{
    if (curl_multi_add_handle(g->umulti, g->easy) != CURLM_OK)
        return CURLE_OUT_OF_MEMORY;
    CURLcode res = CURLE_OK;
    int running = 1, left = 0, done = 0;
    while (!done) {
        if (curl_multi_perform(g->umulti, &running) != CURLM_OK) {
            res = CURLE_OUT_OF_MEMORY;
            break;
        }
        CURLMsg *m;
        while ((m = curl_multi_info_read(g->umulti, &left)))
            if (m->msg == CURLMSG_DONE && m->easy_handle == g->easy) {
                res = m->data.result;
                done = 1;
            }
        /* The transfer's own timeouts bound this wait (curl caps the poll by its timers). */
        if (!done && curl_multi_poll(g->umulti, NULL, 0, 1000, NULL) != CURLM_OK) {
            res = CURLE_OUT_OF_MEMORY;
            break;
        }
    }
    curl_multi_remove_handle(g->umulti, g->easy);
    return res;
}

static void post_once(struct etcd_gw *g, size_t ep, const char *path, const char *body, size_t blen,
                      int64_t deadline, int with_token, struct attempt *a)
{
    memset(a, 0, sizeof(*a));
    int64_t left = deadline - ea_now_ms();
    size_t ulen = strlen(g->eps[ep]) + strlen(path) + 1;
    char *url = malloc(ulen);
    struct curl_slist *hdrs = etcd_gw_headers(g, with_token);
    if (!url || !hdrs) {
        a->cc = CURLE_OUT_OF_MEMORY;
        snprintf(a->detail, sizeof(a->detail), "out of memory");
        free(url);
        curl_slist_free_all(hdrs);
        return;
    }
    if (left <= 0) {
        a->cc = CURLE_OPERATION_TIMEDOUT;
        snprintf(a->detail, sizeof(a->detail), "no time left");
        free(url);
        curl_slist_free_all(hdrs);
        return;
    }
    snprintf(url, ulen, "%s%s", g->eps[ep], path);
    CURL *c = g->easy;
    g->resp_len = 0;
    g->resp_err = 0;
    g->errbuf[0] = '\0';
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, g);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)left);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)left);
    a->cc = perform(g);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, NULL);
    curl_slist_free_all(hdrs);
    free(url);

    curl_off_t pre = 0;
    curl_easy_getinfo(c, CURLINFO_PRETRANSFER_TIME_T, &pre);
    a->sent = !never_sent(a->cc) && pre > 0;
    if (a->cc == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->status);
        json_error_t jerr;
        a->json = json_loadb(g->resp ? g->resp : "", g->resp_len, JSON_REJECT_DUPLICATES, &jerr);
        if (!a->json)
            snprintf(a->detail, sizeof(a->detail), "HTTP %ld, unreadable body (%s): '%.80s'",
                     a->status, jerr.text, g->resp_len ? g->resp : "");
    } else if (a->cc == CURLE_WRITE_ERROR && g->resp_err) {
        snprintf(a->detail, sizeof(a->detail), "%s",
                 g->resp_err == KV_ECORRUPT ? "response too large" : "out of memory");
    } else if (a->cc == CURLE_OPERATION_TIMEDOUT) {
        snprintf(a->detail, sizeof(a->detail), "no answer within %d ms", g->timeout_ms);
    } else {
        snprintf(a->detail, sizeof(a->detail), "%s%s%s", curl_easy_strerror(a->cc),
                 g->errbuf[0] ? ": " : "", g->errbuf);
    }
    /* Keep a large buffer from one big list from pinning memory for the handle's life. */
    if (g->resp_cap > (1u << 20)) {
        free(g->resp);
        g->resp = NULL;
        g->resp_cap = 0;
    }
}

/* ---- auth ---- */

void etcd_gw_auth_invalidate(struct etcd_gw *g)
{
    pthread_mutex_lock(&g->lock);
    free(g->token);
    g->token = NULL;
    pthread_mutex_unlock(&g->lock);
}

/* req_lock held. */
static int auth_ensure_locked(struct etcd_gw *g, size_t ep, int64_t deadline, struct ea_error *err)
{
    if (!g->user)
        return 0;
    pthread_mutex_lock(&g->lock);
    int have = g->token != NULL;
    pthread_mutex_unlock(&g->lock);
    if (have)
        return 0;
    json_t *body = json_pack("{s:s, s:s}", "name", g->user, "password", g->password);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text)
        return ea_errorf(err, -ENOMEM, "etcd-gateway: out of memory");
    struct attempt a;
    post_once(g, ep, "/v3/auth/authenticate", text, strlen(text), deadline, 0, &a);
    memset(text, 0, strlen(text)); /* the password */
    free(text);
    const char *addr = g->eps[ep];
    int rc = 0, code = 0;
    const char *msg = NULL;
    char *token = NULL;
    if (a.cc != CURLE_OK) {
        rc = ea_errorf(err, KV_ECONN, "etcd-gateway: authenticate as '%s' at %s: %s", g->user, addr,
                       a.detail);
    } else if (!a.json) {
        rc = ea_errorf(err, KV_ECORRUPT, "etcd-gateway: authenticate as '%s' at %s: %s", g->user,
                       addr, a.detail);
    } else if (a.status == 200) {
        const json_t *t = json_object_get(a.json, "token");
        if (!json_is_string(t))
            rc = ea_errorf(err, KV_ECORRUPT,
                           "etcd-gateway: authenticate as '%s' at %s: answer without a token",
                           g->user, addr);
        else if (!(token = strdup(json_string_value(t))))
            rc = ea_errorf(err, -ENOMEM, "etcd-gateway: out of memory");
    } else if (etcd_gw_error_of(a.json, &code, &msg)) {
        if (code == 9 && strstr(msg, "not enabled")) {
            /* credentials configured, auth off on the server: send no token */
            if (!(token = strdup("")))
                rc = ea_errorf(err, -ENOMEM, "etcd-gateway: out of memory");
        } else {
            rc = etcd_gw_code_to_kv(code, msg);
            if (rc == KV_EINVAL)
                rc = KV_EAUTH;
            rc = ea_errorf(err, rc, "etcd-gateway: authenticate as '%s' at %s failed: %s (code %d)",
                           g->user, addr, msg, code);
        }
    } else {
        rc = ea_errorf(err, KV_ECONN, "etcd-gateway: authenticate as '%s' at %s: HTTP %ld", g->user,
                       addr, a.status);
    }
    json_decref(a.json);
    if (rc)
        return rc;
    pthread_mutex_lock(&g->lock);
    free(g->token);
    g->token = token;
    pthread_mutex_unlock(&g->lock);
    return 0;
}

int etcd_gw_auth_ensure(struct etcd_gw *g, size_t ep, int64_t deadline_ms, struct ea_error *err)
{
    pthread_mutex_lock(&g->req_lock);
    int rc = auth_ensure_locked(g, ep, deadline_ms, err);
    pthread_mutex_unlock(&g->req_lock);
    return rc;
}

/* ---- the request with failover ---- */

/* Classify an answer that is not a 200 with JSON: *rc and *failover, text in `last`. */
static void classify_failure(const struct etcd_gw *g, size_t ep, const struct etcd_gw_req *rq,
                             const struct attempt *a, int *rc, int *failover, char *last,
                             size_t lastlen)
{
    int code = 0;
    const char *msg = NULL;
    if (a->cc != CURLE_OK) {
        /* Transport failure: a write goes elsewhere only if it never left. */
        *rc = a->cc == CURLE_WRITE_ERROR && g->resp_err ? g->resp_err : KV_ECONN;
        *failover = *rc == KV_ECONN && (rq->idempotent || !a->sent);
        snprintf(last, lastlen, "%s: %s", g->eps[ep], a->detail);
    } else if (a->status == 200) {
        *rc = KV_ECORRUPT;
        *failover = 0;
        snprintf(last, lastlen, "%s: %s", g->eps[ep],
                 a->detail[0] ? a->detail : "answer is not a JSON object");
    } else if (a->json && etcd_gw_error_of(a->json, &code, &msg)) {
        *rc = etcd_gw_code_to_kv(code, msg);
        /* UNAVAILABLE: a member without a leader refused before proposing anything. */
        *failover = code == 14 && (rq->idempotent || strstr(msg, "no leader") ||
                                   strstr(msg, "connection refused"));
        snprintf(last, lastlen, "%s: %s (code %d)", g->eps[ep], msg, code);
    } else {
        /* Something other than etcd's gateway answered (a proxy, another server). */
        *rc = a->status == 404 ? KV_EINVAL : KV_ECONN;
        *failover = *rc == KV_ECONN && rq->idempotent;
        snprintf(last, lastlen, "%s: not an etcd gateway answer (HTTP %ld)%s", g->eps[ep],
                 a->status, a->status == 404 ? ": wrong URL, or the gateway is disabled" : "");
    }
}

int etcd_gw_call(struct etcd_gw *g, const struct etcd_gw_req *rq, json_t *body, json_t **ret,
                 struct ea_error *err)
{
    if (etcd_gw_forked(g, err))
        return KV_EINVAL;
    char *text = json_dumps(body, JSON_COMPACT);
    if (!text)
        return ea_errorf(err, -ENOMEM, "etcd-gateway: out of memory");
    size_t tlen = strlen(text);
    pthread_mutex_lock(&g->req_lock);
    int64_t deadline = ea_now_ms() + g->timeout_ms;
    pthread_mutex_lock(&g->lock);
    size_t ep = g->current;
    pthread_mutex_unlock(&g->lock);
    size_t tried = 0;
    int reauthed = 0, rc;
    char tried_list[256] = "", last[EA_ERROR_MSG_MAX];
    for (;;) {
        int failover = 0;
        struct ea_error aerr = {0};
        rc = auth_ensure_locked(g, ep, deadline, &aerr);
        if (rc == KV_ECONN) {
            failover = 1; /* nothing of this request was sent yet */
            snprintf(last, sizeof(last), "%s", aerr.msg);
        } else if (rc) {
            ea_errorf(err, rc, "%s", aerr.msg);
            break;
        } else {
            struct attempt a;
            post_once(g, ep, rq->path, text, tlen, deadline, 1, &a);
            if (a.cc == CURLE_OK && a.status == 200 && json_is_object(a.json)) {
                pthread_mutex_lock(&g->lock);
                g->current = ep; /* keep using the member that answers */
                pthread_mutex_unlock(&g->lock);
                *ret = a.json;
                rc = 0;
                break;
            }
            classify_failure(g, ep, rq, &a, &rc, &failover, last, sizeof(last));
            int code = 0;
            const char *msg = "";
            int rejected = a.json && a.status != 200 && etcd_gw_error_of(a.json, &code, &msg) &&
                           etcd_gw_token_rejected(msg);
            json_decref(a.json);
            if (rc == KV_EAUTH && g->user && !reauthed && rejected) {
                reauthed = 1; /* the token expired or auth was switched on: log in again */
                etcd_gw_auth_invalidate(g);
                continue;
            }
            if (rc != KV_ECONN) {
                ea_errorf(err, rc, "etcd-gateway %s at %s", rq->what, last);
                break;
            }
        }
        size_t tl = strlen(tried_list);
        snprintf(tried_list + tl, sizeof(tried_list) - tl, "%s%s", tried ? ", " : "", g->eps[ep]);
        tried++;
        etcd_gw_advance(g, ep); /* KV_ECONN: the next call starts on the next member */
        if (!failover || tried >= g->neps || ea_now_ms() >= deadline) {
            if (tried == 1)
                ea_errorf(err, rc, "etcd-gateway %s: unreachable at %s", rq->what, last);
            else
                ea_errorf(err, rc, "etcd-gateway %s: no endpoint answered (tried %s); last: %s",
                          rq->what, tried_list, last);
            break;
        }
        ep = (ep + 1) % g->neps;
    }
    pthread_mutex_unlock(&g->req_lock);
    free(text);
    return rc;
}
