// SPDX-License-Identifier: Apache-2.0
/*
 * etcd_gateway: kv_etcd_gateway_ops, the kv.h contract over etcd's JSON gateway with libcurl.
 * This file opens and closes handles (endpoint list, TLS and auth configuration, process-wide
 * curl state); requests are in etcd_gateway_kv.c over etcd_gateway_http.c, watches in
 * etcd_gateway_watch.c. open() does no network I/O: an unreachable store shows up as KV_ECONN
 * from the first request, which the agent retries with backoff.
 */
#include "etcd_gateway.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "etcd_gateway_internal.h"

/* ---- process-wide curl state ---- */

static pthread_mutex_t curl_refs_lock = PTHREAD_MUTEX_INITIALIZER;
static int curl_refs;

static int curl_acquire(struct ea_error *err)
{
    int rc = 0;
    pthread_mutex_lock(&curl_refs_lock);
    if (curl_refs == 0) {
        CURLcode c = curl_global_init(CURL_GLOBAL_DEFAULT);
        if (c != CURLE_OK)
            rc = ea_errorf(err, -ENOMEM, "etcd-gateway: curl_global_init: %s",
                           curl_easy_strerror(c));
    }
    if (rc == 0)
        curl_refs++;
    pthread_mutex_unlock(&curl_refs_lock);
    return rc;
}

static void curl_release(void)
{
    pthread_mutex_lock(&curl_refs_lock);
    if (--curl_refs == 0)
        curl_global_cleanup();
    pthread_mutex_unlock(&curl_refs_lock);
}

/* ---- small shared helpers ---- */

int etcd_gw_forked(const struct etcd_gw *g, struct ea_error *err)
{
    if (g->pid == getpid())
        return 0;
    /* The child shares the parent's sockets (and TLS sessions): using them would garble the
     * parent's requests, and the helper thread does not exist here. */
    return ea_errorf(err, KV_EINVAL,
                     "etcd-gateway: handle opened by process %d used in forked child %d; "
                     "open a new handle in the child",
                     (int)g->pid, (int)getpid());
}

int etcd_gw_cond_wait(struct etcd_gw *g, int64_t deadline_ms)
{
    struct timespec ts = {.tv_sec = deadline_ms / 1000, .tv_nsec = (deadline_ms % 1000) * 1000000};
    return pthread_cond_timedwait(&g->cond, &g->lock, &ts) == ETIMEDOUT ? ETIMEDOUT : 0;
}

void etcd_gw_advance(struct etcd_gw *g, size_t ep)
{
    pthread_mutex_lock(&g->lock);
    if (g->current == ep)
        g->current = (ep + 1) % g->neps;
    pthread_mutex_unlock(&g->lock);
}

/* ---- configuration ---- */

/* One "http(s)://host[:port][/path]" of the list, validated; no port means etcd's 2379. */
static int parse_endpoint(const char *s, size_t len, int *ret_https, char **ret,
                          struct ea_error *err)
{
    while (len && isspace((unsigned char)*s))
        s++, len--;
    while (len && isspace((unsigned char)s[len - 1]))
        len--;
    while (len && s[len - 1] == '/')
        len--;
    if (len == 0)
        return ea_errorf(err, KV_EINVAL, "etcd-gateway: empty endpoint in the endpoint list");
    size_t skip;
    if (len > 7 && strncmp(s, "http://", 7) == 0)
        skip = 7, *ret_https = 0;
    else if (len > 8 && strncmp(s, "https://", 8) == 0)
        skip = 8, *ret_https = 1;
    else if (memmem(s, len, "://", 3))
        return ea_errorf(err, KV_EINVAL,
                         "etcd-gateway: endpoint '%.*s': only http:// and https:// URLs", (int)len,
                         s);
    else
        return ea_errorf(err, KV_EINVAL,
                         "etcd-gateway: endpoint '%.*s' is not an http:// or https:// URL "
                         "(host:port is the etcd gRPC backend)",
                         (int)len, s);
    const char *host = s + skip, *end = s + len;
    const char *slash = memchr(host, '/', (size_t)(end - host));
    const char *hend = slash ? slash : end;
    for (const char *p = host; p < end; p++)
        if (isspace((unsigned char)*p) || *p == '@' || *p == '?' || *p == '#' || *p == ',')
            return ea_errorf(err, KV_EINVAL,
                             "etcd-gateway: endpoint '%.*s': unexpected '%c' (expected "
                             "scheme://host:port)",
                             (int)len, s, *p);
    const char *colon = NULL;
    if (host < hend && *host == '[') {
        const char *br = memchr(host, ']', (size_t)(hend - host));
        if (!br)
            return ea_errorf(err, KV_EINVAL, "etcd-gateway: endpoint '%.*s': unterminated '['",
                             (int)len, s);
        colon = br + 1 < hend ? br + 1 : NULL;
        if (colon && *colon != ':')
            return ea_errorf(err, KV_EINVAL, "etcd-gateway: endpoint '%.*s': bad host", (int)len,
                             s);
    } else {
        colon = memchr(host, ':', (size_t)(hend - host));
        if (colon && memchr(colon + 1, ':', (size_t)(hend - colon - 1)))
            return ea_errorf(err, KV_EINVAL,
                             "etcd-gateway: endpoint '%.*s': write IPv6 as [addr]:port", (int)len,
                             s);
    }
    if ((colon ? colon : hend) == host)
        return ea_errorf(err, KV_EINVAL, "etcd-gateway: endpoint '%.*s': no host", (int)len, s);
    if (colon) {
        long port = 0;
        size_t plen = (size_t)(hend - colon - 1);
        for (size_t i = 0; i < plen && port <= 65535; i++)
            port =
                isdigit((unsigned char)colon[1 + i]) ? port * 10 + (colon[1 + i] - '0') : -1000000;
        if (plen == 0 || port < 1 || port > 65535)
            return ea_errorf(err, KV_EINVAL, "etcd-gateway: endpoint '%.*s': bad port", (int)len,
                             s);
    }
    size_t cap = len + 8;
    char *out = malloc(cap);
    if (!out)
        return ea_errorf(err, -ENOMEM, "etcd-gateway: out of memory");
    snprintf(out, cap, "%.*s%s%.*s", (int)(hend - s), s, colon ? "" : ":2379", (int)(end - hend),
             hend);
    *ret = out;
    return 0;
}

static int parse_endpoints(struct etcd_gw *g, const char *list, int *ret_https,
                           struct ea_error *err)
{
    if (!list || !list[0])
        return ea_errorf(err, KV_EINVAL,
                         "etcd-gateway: no endpoint given (http(s)://host:port[,...])");
    size_t n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    g->eps = calloc(n, sizeof(*g->eps));
    if (!g->eps)
        return ea_errorf(err, -ENOMEM, "etcd-gateway: out of memory");
    *ret_https = 0;
    for (const char *p = list;; p++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int https = 0;
        int rc = parse_endpoint(p, len, &https, &g->eps[g->neps], err);
        if (rc)
            return rc;
        g->neps++;
        *ret_https |= https ? 1 : 2; /* bit 0: some https, bit 1: some http */
        if (!comma)
            return 0;
        p = comma;
    }
}

static int dup_file(const char *what, const char *path, char **ret, struct ea_error *err)
{
    if (!path)
        return 0;
    if (access(path, R_OK) != 0)
        return ea_errorf(err, KV_EINVAL, "etcd-gateway: cannot read %s '%s': %s", what, path,
                         strerror(errno));
    if (!(*ret = strdup(path)))
        return ea_errorf(err, -ENOMEM, "etcd-gateway: out of memory");
    return 0;
}

static int parse_tls(struct etcd_gw *g, const struct kv_config *cfg, int schemes,
                     struct ea_error *err)
{
    int files = cfg->cacert || cfg->cert || cfg->key;
    if (!cfg->cert != !cfg->key)
        return ea_errorf(err, KV_EINVAL,
                         "etcd-gateway: a client certificate needs both cert and key (got only "
                         "the %s)",
                         cfg->cert ? "cert" : "key");
    if (files && (schemes & 2))
        return ea_errorf(err, KV_EINVAL,
                         "etcd-gateway: TLS files given but an endpoint is plain http:// "
                         "(use https:// endpoints)");
    int rc = dup_file("CA certificate", cfg->cacert, &g->cacert, err);
    if (rc == 0)
        rc = dup_file("client certificate", cfg->cert, &g->cert, err);
    if (rc == 0)
        rc = dup_file("client key", cfg->key, &g->key, err);
    return rc;
}

/* ---- open / close ---- */

static void gw_free(struct etcd_gw *g, int curl_held, int sync_init)
{
    if (sync_init) {
        etcd_gw_watch_shutdown(g);
        pthread_mutex_destroy(&g->req_lock);
        pthread_mutex_destroy(&g->lock);
        pthread_cond_destroy(&g->cond);
    }
    if (g->easy)
        curl_easy_cleanup(g->easy);
    if (g->umulti)
        curl_multi_cleanup(g->umulti);
    free(g->resp);
    for (size_t i = 0; i < g->neps; i++)
        free(g->eps[i]);
    free(g->eps);
    free(g->cacert);
    free(g->cert);
    free(g->key);
    free(g->user);
    if (g->password) {
        memset(g->password, 0, strlen(g->password));
        free(g->password);
    }
    free(g->token);
    kv_evq_destroy(&g->evq);
    free(g);
    if (curl_held)
        curl_release();
}

static int gw_open(const struct kv_config *cfg, struct kv **ret_kv, struct ea_error *err)
{
    struct etcd_gw *g = calloc(1, sizeof(*g));
    if (!g)
        return ea_errorf(err, -ENOMEM, "etcd-gateway: out of memory");
    g->base.ops = &kv_etcd_gateway_ops;
    g->next_watch_id = 1;
    g->timeout_ms =
        cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : ETCD_GW_DEFAULT_TIMEOUT_MS;
    g->pid = getpid();
    int curl_held = 0, sync_init = 0, schemes = 0;
    /* First, so that every error path below may destroy the queue. */
    int rc = kv_evq_init(&g->evq);
    if (rc)
        rc = ea_errorf(err, rc, "etcd-gateway: eventfd: %s", strerror(-rc));
    if (rc == 0)
        rc = parse_endpoints(g, cfg->endpoints, &schemes, err);
    if (rc == 0)
        rc = parse_tls(g, cfg, schemes, err);
    if (rc)
        goto error;
    if (cfg->password && !cfg->user) {
        rc = ea_errorf(err, KV_EINVAL, "etcd-gateway: a password was given without a user name");
        goto error;
    }
    if (cfg->user && (!(g->user = strdup(cfg->user)) ||
                      !(g->password = strdup(cfg->password ? cfg->password : "")))) {
        rc = ea_errorf(err, -ENOMEM, "etcd-gateway: out of memory");
        goto error;
    }
    rc = curl_acquire(err);
    if (rc)
        goto error;
    curl_held = 1;
    g->easy = curl_easy_init();
    g->umulti = etcd_gw_multi_new();
    if (!g->easy || !g->umulti || etcd_gw_easy_setup(g, g->easy, g->errbuf)) {
        rc = ea_errorf(err, -ENOMEM, "etcd-gateway: cannot set up a curl handle");
        goto error;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&g->lock, NULL);
    pthread_mutex_init(&g->req_lock, NULL);
    sync_init = 1;
    *ret_kv = &g->base;
    return 0;
error:
    gw_free(g, curl_held, sync_init);
    return rc;
}

static void gw_close(struct kv *kv)
{
    /* In a fork child the curl handles' sockets belong to the parent too: cleaning them up
     * could send a TLS close_notify on the parent's connection. Leave them; the child execs
     * or exits. */
    if (kv && !etcd_gw_forked((struct etcd_gw *)kv, NULL))
        gw_free((struct etcd_gw *)kv, 1, 1);
}

int etcd_gateway_compact(struct kv *kv, int64_t revision, struct ea_error *err)
{
    if (!kv || kv->ops != &kv_etcd_gateway_ops)
        return ea_errorf(err, KV_EINVAL, "etcd_gateway_compact: not an etcd-gateway handle");
    char what[64];
    snprintf(what, sizeof(what), "compact to %lld", (long long)revision);
    json_t *body = json_object();
    if (!body || etcd_gw_set_i64(body, "revision", revision) ||
        json_object_set_new(body, "physical", json_true())) {
        json_decref(body);
        return ea_errorf(err, -ENOMEM, "etcd-gateway: out of memory");
    }
    const struct etcd_gw_req rq = {"/v3/kv/compaction", what, 1};
    json_t *resp = NULL;
    int rc = etcd_gw_call((struct etcd_gw *)kv, &rq, body, &resp, err);
    json_decref(body);
    json_decref(resp);
    return rc;
}

const struct kv_ops kv_etcd_gateway_ops = {
    .name = "etcd-gateway",
    .open = gw_open,
    .close = gw_close,
    .get = etcd_gw_get,
    .list = etcd_gw_list,
    .list_page = etcd_gw_list_page,
    .cas = etcd_gw_cas,
    .txn = etcd_gw_txn,
    .put = etcd_gw_put,
    .del = etcd_gw_del,
    .lease_grant = etcd_gw_lease_grant,
    .lease_keepalive = etcd_gw_lease_keepalive,
    .lease_revoke = etcd_gw_lease_revoke,
    .watch = etcd_gw_watch,
    .watch_cancel = etcd_gw_watch_cancel,
    .event_fd = etcd_gw_event_fd,
    .read_events = etcd_gw_read_events,
};
