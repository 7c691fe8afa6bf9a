// SPDX-License-Identifier: Apache-2.0
/* http: /healthz, /readyz and /metrics from the published snapshot (libmicrohttpd thread). */
#include "http.h"
#include "status_node.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* At most this many connections at once, and this many from one address: a client that opens
 * connections and leaves them idle (each lives up to the 10 s timeout) fills its own share, not
 * the whole server, so the kubelet's probes and Prometheus still get through. A probe or a scrape
 * needs one connection. */
#define HTTP_CONNECTION_LIMIT 32
#define HTTP_PER_IP_LIMIT 8

struct http {
    struct MHD_Daemon *d;
    pthread_mutex_t mu;
    struct metrics_snapshot snap; /* guarded by mu */
    http_links_fn links;          /* guarded by mu */
    void *links_ctx;
};

void http_set_links(struct http *h, http_links_fn fn, void *ctx)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    h->links = fn;
    h->links_ctx = ctx;
    pthread_mutex_unlock(&h->mu);
}

/* Queue `body` (taken over and freed when `owned`, else copied) with `status`. */
static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             const char *body, bool owned)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(body), (void *)body, owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_MUST_COPY);
    if (!r) {
        if (owned)
            free((void *)body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result res = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return res;
}

/* Runs on libmicrohttpd's thread: reads only its copy of the snapshot. */
static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls)
{
    struct http *h = cls;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "GET only\n", false);
    struct metrics_snapshot m;
    pthread_mutex_lock(&h->mu);
    m = h->snap;
    if (h->links)
        h->links(h->links_ctx, &m.liveness_out, &m.liveness_in);
    pthread_mutex_unlock(&h->mu);
    char text[256];
    if (strcmp(url, "/healthz") == 0) {
        const char *why = metrics_unhealthy(&m);
        snprintf(text, sizeof(text), "%s\n", why[0] ? why : "ok");
        return reply(c, why[0] ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK, "text/plain", text,
                     false);
    }
    if (strcmp(url, "/readyz") == 0) {
        if (m.workers_ready)
            snprintf(text, sizeof(text), "ok: round %lld, %d worker(s) running\n",
                     (long long)m.round, m.workers_running);
        else
            snprintf(text, sizeof(text), "not ready: run %s, workers %s\n", m.run_status,
                     m.group_state);
        return reply(c, m.workers_ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain",
                     text, false);
    }
    if (strcmp(url, "/metrics") == 0) {
        char *body = metrics_render(&m);
        if (!body)
            return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", "out of memory\n", false);
        return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body, true);
    }
    if (strcmp(url, "/status") == 0) {
        char *body = status_node_json(&m);
        if (!body)
            return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", "out of memory\n", false);
        return reply(c, MHD_HTTP_OK, "application/json", body, true);
    }
    return reply(c, MHD_HTTP_NOT_FOUND, "text/plain",
                 "not found: try /healthz, /readyz, /metrics or /status\n", false);
}

int http_start(const char *addr, int port, struct http **ret, int *ret_port, struct ea_error *err)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct sockaddr_in6 sa6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
    bool v6 = strchr(addr, ':') != NULL;
    if (v6 ? inet_pton(AF_INET6, addr, &sa6.sin6_addr) != 1
           : inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
        return ea_errorf(err, -EINVAL, "--http: '%s' is not an IPv4 or IPv6 address", addr);
    struct http *h = calloc(1, sizeof(*h));
    if (!h)
        return ea_errorf(err, -ENOMEM, "out of memory");
    pthread_mutex_init(&h->mu, NULL);
    snprintf(h->snap.run_status, sizeof(h->snap.run_status), "none");
    snprintf(h->snap.group_state, sizeof(h->snap.group_state), "idle");
    /* The server thread inherits this thread's mask: block everything while it is created, so
     * no signal (SIGCHLD included) is ever delivered there instead of to the agent's signalfd. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    h->d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | (v6 ? MHD_USE_IPv6 : 0), (uint16_t)port,
                            NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR,
                            v6 ? (struct sockaddr *)&sa6 : (struct sockaddr *)&sa,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONNECTION_LIMIT,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)HTTP_PER_IP_LIMIT,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_END);
    int saved = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!h->d) {
        pthread_mutex_destroy(&h->mu);
        free(h);
        return ea_errorf(err, saved ? -saved : -EADDRINUSE,
                         "--http: cannot listen on %s%s%s:%d%s%s", v6 ? "[" : "", addr,
                         v6 ? "]" : "", port, saved ? ": " : "", saved ? strerror(saved) : "");
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *ret_port = info ? info->port : port;
    *ret = h;
    return 0;
}

void http_publish(struct http *h, const struct metrics_snapshot *m)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    h->snap = *m;
    pthread_mutex_unlock(&h->mu);
}

void http_stop(struct http *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
