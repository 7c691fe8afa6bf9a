// SPDX-License-Identifier: Apache-2.0
/*
 * etcd_grpc: the gRPC side of the etcd backend that is not a stream — process-wide init, channel
 * credentials and arguments, the unary call (one batch, one pluck, a deadline), endpoint failover,
 * the auth token, and the mapping of gRPC statuses and etcd's error text to KV_E* codes.
 */
#include "etcd_internal.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ea_time.h"

static pthread_mutex_t grpc_refs_lock = PTHREAD_MUTEX_INITIALIZER;
static int grpc_refs;
static pid_t grpc_owner; /* the process that initialised gRPC */

#if defined(__SANITIZE_ADDRESS__)
/*
 * LeakSanitizer's built-in suppressions for sanitizer builds (the ASan runtime calls this).
 * gRPC 1.51 ends some of its threads detached: grpc_shutdown_blocking() returns once they have
 * said they are done, not once they have exited. When the process exits in that window, the
 * OpenSSL state those threads kept (the error queue, the per-thread random generator, with TLS
 * endpoints) has not been freed by their thread-exit handlers yet and is reported as leaked
 * (1-7 KB, about 1 run in 10 on a loaded machine). This program calls OpenSSL only through
 * gRPC and libcurl, and a leaked handle of either is reported from their own frames, so a leak
 * allocated inside libcrypto is this exit race, not a leak of ours.
 */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libcrypto.so\n";
}
#endif

static void grpc_log_quiet(gpr_log_func_args *args)
{
    (void)args;
}

int etcd_grpc_acquire(struct ea_error *err)
{
    pthread_mutex_lock(&grpc_refs_lock);
    if (grpc_refs > 0 && grpc_owner != getpid()) {
        /* A child forked while the parent had gRPC running: gRPC's threads are gone, its
         * sockets and epoll set are shared with the parent. Using it would hang or corrupt the
         * parent's connections. */
        pthread_mutex_unlock(&grpc_refs_lock);
        return ea_errorf(err, KV_EINVAL,
                         "etcd: this process was forked from one with an open "
                         "etcd handle, and gRPC cannot run in such a child: "
                         "open etcd handles before fork() or after exec()");
    }
    if (grpc_refs++ == 0) {
        grpc_owner = getpid();
        /* Backends do not log (the agent reports each failure once, from our error text);
         * gRPC's own stderr lines stay available for debugging through GRPC_VERBOSITY. */
        if (!getenv("GRPC_VERBOSITY"))
            gpr_set_log_function(grpc_log_quiet);
        grpc_init();
    }
    pthread_mutex_unlock(&grpc_refs_lock);
    return 0;
}

int etcd_forked(const struct etcd *e, struct ea_error *err)
{
    if (e->pid == getpid())
        return 0;
    return ea_errorf(err, KV_EINVAL,
                     "etcd: handle opened by process %d used in forked child "
                     "%d; open a new one after exec()",
                     (int)e->pid, (int)getpid());
}

void etcd_grpc_release(void)
{
    pthread_mutex_lock(&grpc_refs_lock);
    /* Blocking, so that gRPC's own threads are gone when the last handle is: a process that
     * closes its store and forks, or a leak checker at exit, sees no gRPC state left behind. */
    if (--grpc_refs == 0)
        grpc_shutdown_blocking();
    pthread_mutex_unlock(&grpc_refs_lock);
}

/* Whole file as a NUL-terminated string (PEM for gRPC). */
static int read_pem(const char *what, const char *path, char **ret, struct ea_error *err)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return ea_errorf(err, KV_EINVAL, "etcd: cannot open %s '%s': %s", what, path,
                         strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len - 1, f);
        if (len < cap - 1)
            break;
        char *bigger = cap < (1u << 24) ? realloc(buf, cap * 2) : NULL;
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf)
        return ea_errorf(err, -ENOMEM, "etcd: %s '%s' is too large", what, path);
    if (bad || len == 0) {
        free(buf);
        return ea_errorf(err, KV_EINVAL, "etcd: cannot read %s '%s'%s", what, path,
                         bad ? "" : ": empty file");
    }
    buf[len] = '\0';
    *ret = buf;
    return 0;
}

int etcd_creds_create(const struct kv_config *cfg, grpc_channel_credentials **ret_creds,
                      int *ret_tls, struct ea_error *err)
{
    if (!cfg->cacert && !cfg->cert && !cfg->key) {
        *ret_creds = grpc_insecure_credentials_create();
        *ret_tls = 0;
        return 0;
    }
    if (!cfg->cert != !cfg->key)
        return ea_errorf(err, KV_EINVAL,
                         "etcd: a client certificate needs both cert and key "
                         "(got only the %s)",
                         cfg->cert ? "cert" : "key");
    char *ca = NULL, *cert = NULL, *key = NULL;
    int rc = 0;
    if (cfg->cacert)
        rc = read_pem("CA certificate", cfg->cacert, &ca, err);
    if (rc == 0 && cfg->cert)
        rc = read_pem("client certificate", cfg->cert, &cert, err);
    if (rc == 0 && cfg->key)
        rc = read_pem("client key", cfg->key, &key, err);
    if (rc == 0) {
        grpc_ssl_pem_key_cert_pair pair = {.private_key = key, .cert_chain = cert};
        /* No CA file: gRPC's default roots (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH or bundled). */
        *ret_creds = grpc_ssl_credentials_create(ca, cert ? &pair : NULL, NULL, NULL);
        *ret_tls = 1;
        if (!*ret_creds)
            rc = ea_errorf(err, KV_EINVAL, "etcd: TLS credentials rejected by gRPC");
    }
    free(ca);
    free(cert);
    if (key) {
        memset(key, 0, strlen(key));
        free(key);
    }
    return rc;
}

grpc_channel *etcd_channel(struct etcd *e, size_t ep)
{
    if (e->eps[ep].channel)
        return e->eps[ep].channel;
    grpc_arg args[] = {
        /* etcd may answer with more than gRPC's default 4 MiB (a large list), but not without
         * bound: a prefix anyone may grow (a pool's queue) is read in pages (kv_list_page). */
        {GRPC_ARG_INTEGER, (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
         {.integer = (int)KV_RESPONSE_BYTES_MAX}},
        /* Pings find a dead peer under a long-idle watch; etcd's floor is 5 s. */
        {GRPC_ARG_INTEGER, (char *)GRPC_ARG_KEEPALIVE_TIME_MS, {.integer = 10000}},
        {GRPC_ARG_INTEGER, (char *)GRPC_ARG_KEEPALIVE_TIMEOUT_MS, {.integer = 5000}},
        {GRPC_ARG_INTEGER, (char *)GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, {.integer = 0}},
        /* A restarted member is usable again within ~2 s instead of gRPC's 120 s backoff cap. */
        {GRPC_ARG_INTEGER, (char *)GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, {.integer = 250}},
        {GRPC_ARG_INTEGER, (char *)GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, {.integer = 2000}},
        /* The store is addressed directly; an http_proxy meant for downloads must not apply. */
        {GRPC_ARG_INTEGER, (char *)GRPC_ARG_ENABLE_HTTP_PROXY, {.integer = 0}},
    };
    grpc_channel_args ca = {sizeof(args) / sizeof(args[0]), args};
    e->eps[ep].channel = grpc_channel_create(e->eps[ep].addr, e->creds, &ca);
    return e->eps[ep].channel;
}

size_t etcd_metadata_fill(struct etcd *e, grpc_metadata md[2])
{
    size_t n = 0;
    memset(md, 0, 2 * sizeof(md[0]));
    /* Fail fast with "no leader" on a partitioned member instead of hanging to the deadline. */
    md[n].key = grpc_slice_from_static_string("hasleader");
    md[n].value = grpc_slice_from_static_string("true");
    n++;
    if (e->token && e->token[0]) {
        md[n].key = grpc_slice_from_static_string("token");
        md[n].value = grpc_slice_from_copied_string(e->token);
        n++;
    }
    return n;
}

void etcd_metadata_release(grpc_metadata *md, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        grpc_slice_unref(md[i].key);
        grpc_slice_unref(md[i].value);
    }
}

gpr_timespec etcd_deadline(int64_t deadline_ms)
{
    int64_t left = deadline_ms - ea_now_ms();
    if (left < 0)
        left = 0;
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(left, GPR_TIMESPAN));
}

static const char *status_name(grpc_status_code code)
{
    /* grpc_status_code order */
    static const char *const names[] = {
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    };
    if ((unsigned)code < sizeof(names) / sizeof(names[0]))
        return names[code];
    return "status?";
}

int etcd_status_to_kv(grpc_status_code code, const char *details)
{
    switch (code) {
    case GRPC_STATUS_OK:
        return 0;
    case GRPC_STATUS_UNAUTHENTICATED:
    case GRPC_STATUS_PERMISSION_DENIED:
        return KV_EAUTH;
    case GRPC_STATUS_INVALID_ARGUMENT:
        /* etcd reports a missing token / failed login as INVALID_ARGUMENT. */
        if (strstr(details, "user name") || strstr(details, "authentication failed") ||
            strstr(details, "auth token") || strstr(details, "password"))
            return KV_EAUTH;
        return KV_EINVAL;
    case GRPC_STATUS_NOT_FOUND:
        return strstr(details, "lease not found") ? KV_ENOLEASE : KV_EINVAL;
    case GRPC_STATUS_OUT_OF_RANGE:
        return strstr(details, "compacted") ? KV_ECOMPACTED : KV_EINVAL;
    case GRPC_STATUS_DATA_LOSS:
        return KV_ECORRUPT;
    case GRPC_STATUS_RESOURCE_EXHAUSTED:
        /* an answer over KV_RESPONSE_BYTES_MAX: the same again on a retry */
        return strstr(details, "larger than max") ? KV_ECORRUPT : KV_ECONN;
    case GRPC_STATUS_FAILED_PRECONDITION:
    case GRPC_STATUS_UNIMPLEMENTED:
        return KV_EINVAL;
    default: /* UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, RESOURCE_EXHAUSTED, INTERNAL, ... */
        return KV_ECONN;
    }
}

int etcd_status_failover(grpc_status_code code, const char *details, int idempotent)
{
    if (code != GRPC_STATUS_UNAVAILABLE)
        return 0;
    if (idempotent)
        return 1;
    /* Never left this process, or refused by the member before it was proposed: a write can
     * go to another member without being applied twice. */
    return strstr(details, "failed to connect") || strstr(details, "no leader") ||
           strstr(details, "Connection refused");
}

struct call_result {
    grpc_status_code code;
    char details[256];
};

/* One unary call in flight: everything start_call() set up and finish_call() releases. */
struct ucall {
    grpc_call *call;
    grpc_metadata md[2];
    size_t nmd;
    grpc_byte_buffer *send_bb, *recv_bb;
    grpc_metadata_array init_md, trail_md;
    grpc_slice details;
    grpc_op ops[6];
    bool started;
    struct call_result cr;
};

/* Start a unary call on endpoint `ep` whose completion arrives on `cq` with tag u->ops. u->started
 * false when gRPC refused it (u->cr says why); finish_call() either way. */
static void start_call(struct etcd *e, size_t ep, const char *method, const ProtobufCMessage *req,
                       int64_t deadline_ms, int with_token, grpc_completion_queue *cq,
                       struct ucall *u)
{
    memset(u, 0, sizeof(*u));
    pthread_mutex_lock(&e->lock);
    grpc_channel *ch = etcd_channel(e, ep);
    u->nmd = etcd_metadata_fill(e, u->md);
    pthread_mutex_unlock(&e->lock);
    if (!with_token && u->nmd > 1) {
        etcd_metadata_release(u->md + 1, 1);
        u->nmd = 1;
    }
    u->call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                       grpc_slice_from_static_string(method), NULL,
                                       etcd_deadline(deadline_ms), NULL);
    size_t n = protobuf_c_message_get_packed_size(req);
    grpc_slice s = grpc_slice_malloc(n);
    protobuf_c_message_pack(req, GRPC_SLICE_START_PTR(s));
    u->send_bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);

    grpc_metadata_array_init(&u->init_md);
    grpc_metadata_array_init(&u->trail_md);
    u->details = grpc_empty_slice();
    u->cr.code = GRPC_STATUS_UNKNOWN;

    grpc_op *ops = u->ops;
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = u->nmd;
    ops[0].data.send_initial_metadata.metadata = u->md;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = u->send_bb;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &u->init_md;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &u->recv_bb;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &u->trail_md;
    ops[5].data.recv_status_on_client.status = &u->cr.code;
    ops[5].data.recv_status_on_client.status_details = &u->details;

    grpc_call_error ce = grpc_call_start_batch(u->call, ops, 6, ops, NULL);
    u->started = ce == GRPC_CALL_OK;
    if (!u->started)
        snprintf(u->cr.details, sizeof(u->cr.details), "gRPC refused the call: %s",
                 grpc_call_error_to_string(ce));
}

/* After the call's completion (or a refused start): 0 with u->cr.code set (and *ret when OK), or
 * a KV_E* code when the call could not even be made or its answer is unreadable. Frees the call. */
static int finish_call(struct ucall *u, const ProtobufCMessageDescriptor *resp_desc,
                       ProtobufCMessage **ret)
{
    int rc = 0;
    if (u->started) {
        size_t dl = GRPC_SLICE_LENGTH(u->details);
        if (dl >= sizeof(u->cr.details))
            dl = sizeof(u->cr.details) - 1;
        memcpy(u->cr.details, GRPC_SLICE_START_PTR(u->details), dl);
        u->cr.details[dl] = '\0';
        if (u->cr.code == GRPC_STATUS_OK) {
            ProtobufCMessage *msg = NULL;
            grpc_byte_buffer_reader r;
            if (u->recv_bb && grpc_byte_buffer_reader_init(&r, u->recv_bb)) {
                grpc_slice all = grpc_byte_buffer_reader_readall(&r);
                grpc_byte_buffer_reader_destroy(&r);
                msg = protobuf_c_message_unpack(resp_desc, NULL, GRPC_SLICE_LENGTH(all),
                                                GRPC_SLICE_START_PTR(all));
                grpc_slice_unref(all);
            }
            if (msg && ret)
                *ret = msg;
            else if (msg)
                protobuf_c_message_free_unpacked(msg, NULL);
            else
                rc = KV_ECORRUPT;
        }
    } else {
        rc = KV_ECONN;
    }
    if (u->recv_bb)
        grpc_byte_buffer_destroy(u->recv_bb);
    grpc_byte_buffer_destroy(u->send_bb);
    grpc_slice_unref(u->details);
    grpc_metadata_array_destroy(&u->init_md);
    grpc_metadata_array_destroy(&u->trail_md);
    etcd_metadata_release(u->md, u->nmd);
    grpc_call_unref(u->call);
    return rc;
}

static void cq_drain_destroy(grpc_completion_queue *cq, bool pluck)
{
    grpc_completion_queue_shutdown(cq);
    for (;;) {
        grpc_event ev = pluck ? grpc_completion_queue_pluck(cq, NULL,
                                                            gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
                              : grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME),
                                                           NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
    }
    grpc_completion_queue_destroy(cq);
}

/* One attempt of a unary call on endpoint `ep`. 0 with cr->code set (and *ret when OK), or a
 * KV_E* code when the call could not even be made or its answer is unreadable. */
static int unary_once(struct etcd *e, size_t ep, const char *method, const ProtobufCMessage *req,
                      const ProtobufCMessageDescriptor *resp_desc, int64_t deadline_ms,
                      int with_token, ProtobufCMessage **ret, struct call_result *cr)
{
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    struct ucall u;
    start_call(e, ep, method, req, deadline_ms, with_token, cq, &u);
    if (u.started) /* the call carries the deadline: the batch completes by then at the latest */
        grpc_completion_queue_pluck(cq, u.ops, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    int rc = finish_call(&u, resp_desc, ret);
    *cr = u.cr;
    cq_drain_destroy(cq, true);
    return rc;
}

int etcd_unary_each(struct etcd *e, const struct etcd_rpc *rpc, const ProtobufCMessage *const *reqs,
                    size_t n, int *ret_codes, ProtobufCMessage **ret_resps, struct ea_error *err)
{
    for (size_t i = 0; ret_resps && i < n; i++)
        ret_resps[i] = NULL;
    if (etcd_forked(e, err))
        return KV_EINVAL;
    struct ucall *u = calloc(n < ETCD_EACH_MAX ? n : ETCD_EACH_MAX, sizeof(*u));
    if (n && !u)
        return ea_errorf(err, -ENOMEM, "etcd %s: out of memory", rpc->what);
    int first = 0;
    for (size_t at = 0; at < n; at += ETCD_EACH_MAX) {
        size_t m = n - at < ETCD_EACH_MAX ? n - at : ETCD_EACH_MAX;
        int64_t deadline = ea_now_ms() + e->timeout_ms;
        pthread_mutex_lock(&e->lock);
        size_t ep = e->current;
        pthread_mutex_unlock(&e->lock);
        bool direct = etcd_auth_ensure(e, ep, deadline, NULL) == 0;
        grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
        size_t in_flight = 0;
        for (size_t i = 0; direct && i < m; i++) {
            start_call(e, ep, rpc->method, reqs[at + i], deadline, 1, cq, &u[i]);
            in_flight += u[i].started;
        }
        while (in_flight) { /* each call carries the deadline: all complete by then */
            grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME),
                                                       NULL);
            in_flight -= ev.type == GRPC_OP_COMPLETE;
        }
        for (size_t i = 0; i < m; i++) {
            int rc = KV_ECONN;
            ProtobufCMessage **out = ret_resps ? &ret_resps[at + i] : NULL;
            if (direct) {
                rc = finish_call(&u[i], rpc->resp_desc, out);
                if (rc == 0 && u[i].cr.code != GRPC_STATUS_OK)
                    rc = etcd_status_to_kv(u[i].cr.code, u[i].cr.details);
            }
            struct ea_error one = {0};
            if (rc == KV_ECONN || rc == KV_EAUTH) { /* failover and login again: one at a time */
                ProtobufCMessage *again = NULL;
                rc = etcd_unary(e, rpc, reqs[at + i], &again, &one);
                if (rc == 0 && out)
                    *out = again;
                else if (rc == 0)
                    protobuf_c_message_free_unpacked(again, NULL);
            } else if (rc) {
                ea_errorf(&one, rc, "etcd %s at %s: %s", rpc->what, e->eps[ep].addr,
                          rc == KV_ECORRUPT ? "unreadable response" : u[i].cr.details);
            }
            ret_codes[at + i] = rc;
            if (rc && !first && (first = rc) && err)
                *err = one;
        }
        cq_drain_destroy(cq, false);
    }
    free(u);
    return 0;
}

void etcd_auth_invalidate(struct etcd *e)
{
    pthread_mutex_lock(&e->lock);
    free(e->token);
    e->token = NULL;
    pthread_mutex_unlock(&e->lock);
}

int etcd_auth_ensure(struct etcd *e, size_t ep, int64_t deadline_ms, struct ea_error *err)
{
    if (!e->user)
        return 0;
    pthread_mutex_lock(&e->lock);
    int have = e->token != NULL;
    pthread_mutex_unlock(&e->lock);
    if (have)
        return 0;

    Etcdserverpb__AuthenticateRequest rq = ETCDSERVERPB__AUTHENTICATE_REQUEST__INIT;
    rq.name = e->user;
    rq.password = e->password ? e->password : (char *)"";
    ProtobufCMessage *out = NULL;
    struct call_result cr;
    int rc =
        unary_once(e, ep, ETCD_M_AUTHENTICATE, &rq.base,
                   &etcdserverpb__authenticate_response__descriptor, deadline_ms, 0, &out, &cr);
    const char *addr = e->eps[ep].addr;
    if (rc)
        return ea_errorf(err, rc, "etcd at %s: authenticate as '%s': %s", addr, e->user,
                         rc == KV_ECORRUPT ? "unreadable response" : cr.details);
    char *token = NULL;
    if (cr.code == GRPC_STATUS_OK) {
        const char *t = ((Etcdserverpb__AuthenticateResponse *)out)->token;
        token = strdup(t ? t : "");
        protobuf_c_message_free_unpacked(out, NULL);
    } else if (cr.code == GRPC_STATUS_FAILED_PRECONDITION && strstr(cr.details, "not enabled")) {
        token = strdup(""); /* credentials configured, auth off on the server: send no token */
    } else {
        rc = etcd_status_to_kv(cr.code, cr.details);
        if (rc == KV_EINVAL)
            rc = KV_EAUTH;
        return ea_errorf(err, rc, "etcd at %s: authenticate as '%s' failed: %s (%s)", addr, e->user,
                         cr.details, status_name(cr.code));
    }
    if (!token)
        return ea_errorf(err, -ENOMEM, "etcd: out of memory");
    pthread_mutex_lock(&e->lock);
    free(e->token);
    e->token = token;
    pthread_mutex_unlock(&e->lock);
    return 0;
}

static int token_rejected(const struct call_result *cr)
{
    return cr->code == GRPC_STATUS_UNAUTHENTICATED || strstr(cr->details, "auth token") ||
           strstr(cr->details, "user name is empty");
}

/* Human text for a failed attempt: "<addr>: <what went wrong> (<STATUS>)". */
static void describe(char *buf, size_t len, const char *addr, const struct call_result *cr,
                     int timeout_ms)
{
    if (cr->code == GRPC_STATUS_DEADLINE_EXCEEDED)
        snprintf(buf, len, "%s: no answer within %d ms (DEADLINE_EXCEEDED)", addr, timeout_ms);
    else
        snprintf(buf, len, "%s: %s (%s)", addr, cr->details, status_name(cr->code));
}

int etcd_unary(struct etcd *e, const struct etcd_rpc *rpc, const ProtobufCMessage *req,
               ProtobufCMessage **ret, struct ea_error *err)
{
    if (etcd_forked(e, err))
        return KV_EINVAL;
    int64_t deadline = ea_now_ms() + e->timeout_ms;
    pthread_mutex_lock(&e->lock);
    size_t ep = e->current;
    pthread_mutex_unlock(&e->lock);
    size_t tried = 0;
    char tried_list[256] = "";
    int reauthed = 0;
    for (;;) {
        struct call_result cr = {GRPC_STATUS_OK, ""};
        char last[EA_ERROR_MSG_MAX];
        int failover = 0;
        int rc = etcd_auth_ensure(e, ep, deadline, err);
        if (rc == KV_ECONN) {
            failover = 1; /* nothing of this request was sent yet */
            snprintf(last, sizeof(last), "%s", err ? err->msg : "");
        } else if (rc) {
            return rc; /* auth refused etc., message already in err */
        } else {
            rc = unary_once(e, ep, rpc->method, req, rpc->resp_desc, deadline, 1, ret, &cr);
            if (rc == 0 && cr.code == GRPC_STATUS_OK) {
                pthread_mutex_lock(&e->lock);
                e->current = ep; /* keep using the member that answers */
                pthread_mutex_unlock(&e->lock);
                return 0;
            }
            if (rc == KV_ECORRUPT)
                return ea_errorf(err, rc, "etcd %s at %s: unreadable response", rpc->what,
                                 e->eps[ep].addr);
            if (rc == 0)
                rc = etcd_status_to_kv(cr.code, cr.details);
            if (rc == KV_EAUTH && e->user && !reauthed && token_rejected(&cr)) {
                reauthed = 1; /* the token expired or auth was switched on: log in again */
                etcd_auth_invalidate(e);
                continue;
            }
            describe(last, sizeof(last), e->eps[ep].addr, &cr, e->timeout_ms);
            if (rc != KV_ECONN)
                return ea_errorf(err, rc, "etcd %s at %s", rpc->what, last);
            failover = etcd_status_failover(cr.code, cr.details, rpc->idempotent);
        }
        size_t tl = strlen(tried_list);
        snprintf(tried_list + tl, sizeof(tried_list) - tl, "%s%s", tried ? ", " : "",
                 e->eps[ep].addr);
        tried++;
        /* KV_ECONN: the next call starts on the next member whatever happens now. */
        size_t next = (ep + 1) % e->neps;
        pthread_mutex_lock(&e->lock);
        if (e->current == ep)
            e->current = next;
        pthread_mutex_unlock(&e->lock);
        if (!failover || tried >= e->neps || ea_now_ms() >= deadline) {
            if (tried == 1)
                return ea_errorf(err, rc, "etcd %s: unreachable at %s", rpc->what, last);
            return ea_errorf(err, rc, "etcd %s: no endpoint answered (tried %s); last: %s",
                             rpc->what, tried_list, last);
        }
        ep = next;
    }
}
