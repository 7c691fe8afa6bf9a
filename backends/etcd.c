// SPDX-License-Identifier: Apache-2.0
/*
 * etcd: kv_etcd_ops, the kv.h contract over etcd v3 gRPC. The request/response operations live
 * here (Range, Put, DeleteRange, Txn for CAS and txn, LeaseGrant/Revoke, Compact); gRPC plumbing
 * is in etcd_grpc.c, streams in etcd_stream.c, watch and keepalive in etcd_watch.c.
 * open() does no network I/O: channels connect on first use, so an unreachable store shows up as
 * KV_ECONN from the first request, which the agent retries with backoff.
 */
#include "etcd.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "etcd_internal.h"

size_t etcd_prefix_range_end(const uint8_t *key, size_t len, uint8_t *out)
{
    for (size_t i = len; i-- > 0;)
        if (key[i] < 0xff) {
            memcpy(out, key, i);
            out[i] = (uint8_t)(key[i] + 1);
            return i + 1;
        }
    out[0] = 0; /* "\0": no upper bound */
    return 1;
}

int etcd_entry_from_kv(struct kv_entry *ret, const Mvccpb__KeyValue *kv)
{
    struct kv_entry x = {0};
    x.key = strndup((const char *)kv->key.data, kv->key.len);
    x.value = malloc(kv->value.len + 1);
    if (!x.key || !x.value) {
        kv_entry_clear(&x);
        return -ENOMEM;
    }
    if (kv->value.len)
        memcpy(x.value, kv->value.data, kv->value.len);
    x.value[kv->value.len] = '\0';
    x.value_len = kv->value.len;
    x.mod_revision = kv->mod_revision;
    x.create_revision = kv->create_revision;
    x.lease = kv->lease;
    *ret = x;
    return 0;
}

int etcd_cond_wait(struct etcd *e, int64_t deadline_ms)
{
    struct timespec ts = {.tv_sec = deadline_ms / 1000, .tv_nsec = (deadline_ms % 1000) * 1000000};
    return pthread_cond_timedwait(&e->cond, &e->lock, &ts) == ETIMEDOUT ? ETIMEDOUT : 0;
}

/* ---- open / close ---- */

/* One "host:port" of the endpoint list, validated; a missing port means etcd's 2379. */
static int parse_endpoint(const char *s, size_t len, char **ret, struct ea_error *err)
{
    while (len && isspace((unsigned char)*s))
        s++, len--;
    while (len && isspace((unsigned char)s[len - 1]))
        len--;
    if (len == 0)
        return ea_errorf(err, KV_EINVAL, "etcd: empty endpoint in the endpoint list");
    const char *scheme = memmem(s, len, "://", 3);
    if (scheme) {
        if ((len >= 7 && strncmp(s, "http://", 7) == 0) ||
            (len >= 8 && strncmp(s, "https://", 8) == 0))
            return ea_errorf(err, KV_EINVAL,
                             "etcd: endpoint '%.*s' is an HTTP URL, which is the etcd-gateway "
                             "backend; the etcd (gRPC) backend takes host:port",
                             (int)len, s);
        return ea_errorf(err, KV_EINVAL, "etcd: endpoint '%.*s': expected host:port", (int)len, s);
    }
    const char *close_br = s[0] == '[' ? memchr(s, ']', len) : NULL;
    if (s[0] == '[' && !close_br)
        return ea_errorf(err, KV_EINVAL, "etcd: endpoint '%.*s': unterminated '['", (int)len, s);
    const char *after = close_br ? close_br + 1 : s;
    const char *colon = memrchr(after, ':', len - (size_t)(after - s));
    if (!close_br && colon && memchr(s, ':', (size_t)(colon - s)))
        return ea_errorf(err, KV_EINVAL, "etcd: endpoint '%.*s': write IPv6 as [addr]:port",
                         (int)len, s);
    if (colon) {
        const char *p = colon + 1;
        size_t plen = len - (size_t)(p - s);
        long port = 0;
        for (size_t i = 0; i < plen && port <= 65535; i++)
            port = isdigit((unsigned char)p[i]) ? port * 10 + (p[i] - '0') : -1000000;
        if (colon == s || plen == 0 || port < 1 || port > 65535)
            return ea_errorf(err, KV_EINVAL, "etcd: endpoint '%.*s': expected host:port", (int)len,
                             s);
    }
    char *out = malloc(len + 6);
    if (!out)
        return ea_errorf(err, -ENOMEM, "etcd: out of memory");
    snprintf(out, len + 6, "%.*s%s", (int)len, s, colon ? "" : ":2379");
    *ret = out;
    return 0;
}

static int parse_endpoints(struct etcd *e, const char *list, struct ea_error *err)
{
    if (!list || !list[0])
        return ea_errorf(err, KV_EINVAL, "etcd: no endpoint given (host:port[,host:port...])");
    size_t n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    e->eps = calloc(n, sizeof(*e->eps));
    if (!e->eps)
        return ea_errorf(err, -ENOMEM, "etcd: out of memory");
    for (const char *p = list;; p++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int rc = parse_endpoint(p, len, &e->eps[e->neps].addr, err);
        if (rc)
            return rc;
        e->neps++;
        if (!comma)
            return 0;
        p = comma;
    }
}

static void etcd_free(struct etcd *e, int grpc_held, int sync_init)
{
    if (sync_init) {
        etcd_streams_shutdown(e);
        pthread_mutex_destroy(&e->lock);
        pthread_cond_destroy(&e->cond);
        pthread_mutex_destroy(&e->watch_op_lock);
        pthread_mutex_destroy(&e->ka_op_lock);
    }
    etcd_watch_release(e);
    for (size_t i = 0; i < e->neps; i++) {
        if (e->eps[i].channel)
            grpc_channel_destroy(e->eps[i].channel);
        free(e->eps[i].addr);
    }
    free(e->eps);
    if (e->creds)
        grpc_channel_credentials_release(e->creds);
    kv_evq_destroy(&e->evq);
    free(e->user);
    if (e->password) {
        memset(e->password, 0, strlen(e->password));
        free(e->password);
    }
    free(e->token);
    free(e);
    if (grpc_held)
        etcd_grpc_release();
}

static int etcd_open(const struct kv_config *cfg, struct kv **ret_kv, struct ea_error *err)
{
    struct etcd *e = calloc(1, sizeof(*e));
    if (!e)
        return ea_errorf(err, -ENOMEM, "etcd: out of memory");
    e->base.ops = &kv_etcd_ops;
    e->next_watch_id = 1;
    e->timeout_ms = cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : ETCD_DEFAULT_TIMEOUT_MS;
    int grpc_held = 0, sync_init = 0;
    /* First, so that every error path below may destroy the queue. */
    int rc = kv_evq_init(&e->evq);
    if (rc) {
        rc = ea_errorf(err, rc, "etcd: eventfd: %s", strerror(-rc));
        goto error;
    }
    rc = parse_endpoints(e, cfg->endpoints, err);
    if (rc)
        goto error;
    if (cfg->password && !cfg->user) {
        rc = ea_errorf(err, KV_EINVAL, "etcd: a password was given without a user name");
        goto error;
    }
    if (cfg->user && (!(e->user = strdup(cfg->user)) ||
                      !(e->password = strdup(cfg->password ? cfg->password : "")))) {
        rc = ea_errorf(err, -ENOMEM, "etcd: out of memory");
        goto error;
    }
    rc = etcd_grpc_acquire(err);
    if (rc)
        goto error;
    grpc_held = 1;
    e->pid = getpid();
    rc = etcd_creds_create(cfg, &e->creds, &e->tls, err);
    if (rc)
        goto error;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&e->lock, NULL);
    pthread_mutex_init(&e->watch_op_lock, NULL);
    pthread_mutex_init(&e->ka_op_lock, NULL);
    sync_init = 1;
    *ret_kv = &e->base;
    return 0;
error:
    etcd_free(e, grpc_held, sync_init);
    return rc;
}

static void etcd_close(struct kv *kv)
{
    /* In a fork child the handle's gRPC objects belong to the parent's threads and sockets:
     * touching them could hang or break the parent. Leave them; the child execs or exits. */
    if (kv && !etcd_forked((struct etcd *)kv, NULL))
        etcd_free((struct etcd *)kv, 1, 1);
}

/* ---- requests ---- */

#define WHAT(buf, fmt, ...) snprintf(buf, sizeof(buf), fmt, __VA_ARGS__)

static ProtobufCBinaryData bin(const char *s, size_t len)
{
    return (ProtobufCBinaryData){len, (uint8_t *)s};
}

/* A request whose response says nothing beyond success. */
static int call_discard(struct kv *kv, const struct etcd_rpc *rpc, const ProtobufCMessage *req,
                        struct ea_error *err)
{
    ProtobufCMessage *out;
    int rc = etcd_unary((struct etcd *)kv, rpc, req, &out, err);
    if (rc == 0)
        protobuf_c_message_free_unpacked(out, NULL);
    return rc;
}

/* A read of one key; at > 0: as of revision `at`, served by the member from what it has applied
 * (serializable: no ReadIndex round through the leader). */
static int range_one(struct kv *kv, const char *key, int64_t at, struct kv_entry *ret,
                     struct ea_error *err)
{
    char what[160];
    WHAT(what, "get '%.100s'", key);
    Etcdserverpb__RangeRequest rq = ETCDSERVERPB__RANGE_REQUEST__INIT;
    rq.key = bin(key, strlen(key));
    rq.revision = at > 0 ? at : 0;
    rq.serializable = at > 0;
    const struct etcd_rpc rpc = {ETCD_M_RANGE, &etcdserverpb__range_response__descriptor, 1, what};
    ProtobufCMessage *out;
    int rc = etcd_unary((struct etcd *)kv, &rpc, &rq.base, &out, err);
    if (rc)
        return rc;
    Etcdserverpb__RangeResponse *rr = (Etcdserverpb__RangeResponse *)out;
    if (rr->n_kvs == 0)
        rc = ea_errorf(err, KV_ENOTFOUND, "etcd: key '%s' not found", key);
    else if (etcd_entry_from_kv(ret, rr->kvs[0]))
        rc = ea_errorf(err, -ENOMEM, "etcd: out of memory");
    protobuf_c_message_free_unpacked(out, NULL);
    return rc;
}

static int etcd_get(struct kv *kv, const char *key, struct kv_entry *ret, struct ea_error *err)
{
    return range_one(kv, key, 0, ret, err);
}

/* The member answers OUT_OF_RANGE for a compacted revision and for one it has not applied yet
 * (another member's watch delivered it): a linearizable read then, which is never older. */
static int etcd_get_at(struct kv *kv, const char *key, int64_t at, struct kv_entry *ret,
                       struct ea_error *err)
{
    struct ea_error e = {0};
    int rc = range_one(kv, key, at, ret, &e);
    if (rc == KV_ECOMPACTED || rc == KV_EINVAL)
        return range_one(kv, key, 0, ret, err);
    if (rc && err)
        *err = e;
    return rc;
}

/* A range over `prefix` ("" = every key), from just after `after` (NULL = from the first), at
 * most `limit` keys (0 = all), in etcd's default order: by key, ascending (what kv_list
 * promises). */
static int range_list(struct kv *kv, const char *prefix, const char *after, size_t limit,
                      struct kv_list *ret, struct ea_error *err)
{
    char what[160];
    WHAT(what, "list '%.100s'", prefix);
    size_t plen = strlen(prefix), alen = after ? strlen(after) : 0;
    uint8_t *end = malloc(plen + 1), *from = malloc(alen + 1);
    if (!end || !from) {
        free(end);
        free(from);
        return ea_errorf(err, -ENOMEM, "etcd: out of memory");
    }
    static char zero[1] = {0};
    Etcdserverpb__RangeRequest rq = ETCDSERVERPB__RANGE_REQUEST__INIT;
    if (plen) {
        rq.key = bin(prefix, plen);
        rq.range_end.len = etcd_prefix_range_end(rq.key.data, plen, end);
        rq.range_end.data = end;
    } else { /* every key */
        rq.key = bin(zero, 1);
        rq.range_end = bin(zero, 1);
    }
    if (after) { /* the least key after `after`: itself and a NUL byte */
        memcpy(from, after, alen);
        from[alen] = 0;
        rq.key.data = from;
        rq.key.len = alen + 1;
    }
    rq.limit = (int64_t)limit;
    const struct etcd_rpc rpc = {ETCD_M_RANGE, &etcdserverpb__range_response__descriptor, 1, what};
    ProtobufCMessage *out;
    int rc = etcd_unary((struct etcd *)kv, &rpc, &rq.base, &out, err);
    free(end);
    free(from);
    if (rc)
        return rc;
    Etcdserverpb__RangeResponse *rr = (Etcdserverpb__RangeResponse *)out;
    struct kv_list l = {0};
    if (!rr->header) {
        rc = ea_errorf(err, KV_ECORRUPT, "etcd %s: response without a revision", what);
    } else if (limit && rr->n_kvs > limit) {
        rc = ea_errorf(err, KV_ECORRUPT, "etcd %s: %zu keys for a page of %zu", what,
                       rr->n_kvs, limit);
    } else if (rr->n_kvs && !(l.entries = calloc(rr->n_kvs, sizeof(*l.entries)))) {
        rc = ea_errorf(err, -ENOMEM, "etcd: out of memory");
    } else {
        l.revision = rr->header->revision;
        l.more = limit && rr->more;
        for (; l.n < rr->n_kvs && rc == 0; l.n++)
            if (etcd_entry_from_kv(&l.entries[l.n], rr->kvs[l.n]))
                rc = ea_errorf(err, -ENOMEM, "etcd: out of memory");
    }
    protobuf_c_message_free_unpacked(out, NULL);
    if (rc)
        kv_list_clear(&l);
    else
        *ret = l;
    return rc;
}

static int etcd_list(struct kv *kv, const char *prefix, struct kv_list *ret, struct ea_error *err)
{
    return range_list(kv, prefix, NULL, 0, ret, err);
}

static int etcd_list_page(struct kv *kv, const char *prefix, const char *after, size_t limit,
                          struct kv_list *ret, struct ea_error *err)
{
    return range_list(kv, prefix, after, limit, ret, err);
}

static int etcd_cas(struct kv *kv, const char *key, const char *value, size_t len,
                    int64_t expected_mod_revision, int64_t lease, int64_t *ret_mod_revision,
                    struct kv_entry *ret_current, struct ea_error *err)
{
    if (expected_mod_revision < 0)
        return ea_errorf(err, KV_EINVAL, "etcd cas '%s': negative expected revision", key);
    char what[160];
    WHAT(what, "cas '%.100s'", key);
    Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT;
    cmp.key = bin(key, strlen(key));
    cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
    if (expected_mod_revision == 0) { /* create only: an absent key has create_revision 0 */
        cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
        cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
        cmp.create_revision = 0;
    } else {
        cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD;
        cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
        cmp.mod_revision = expected_mod_revision;
    }
    Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
    put.key = cmp.key;
    put.value = bin(value, len);
    put.lease = lease;
    Etcdserverpb__RangeRequest get = ETCDSERVERPB__RANGE_REQUEST__INIT;
    get.key = cmp.key;
    Etcdserverpb__RequestOp on_ok = ETCDSERVERPB__REQUEST_OP__INIT;
    on_ok.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    on_ok.request_put = &put;
    /* The else branch reads the key, so a loser learns the winner in the same round trip. */
    Etcdserverpb__RequestOp on_fail = ETCDSERVERPB__REQUEST_OP__INIT;
    on_fail.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    on_fail.request_range = &get;
    Etcdserverpb__Compare *cmps[] = {&cmp};
    Etcdserverpb__RequestOp *oks[] = {&on_ok}, *fails[] = {&on_fail};
    Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
    txn.n_compare = 1;
    txn.compare = cmps;
    txn.n_success = 1;
    txn.success = oks;
    txn.n_failure = 1;
    txn.failure = fails;

    const struct etcd_rpc rpc = {ETCD_M_TXN, &etcdserverpb__txn_response__descriptor, 0, what};
    ProtobufCMessage *out;
    int rc = etcd_unary((struct etcd *)kv, &rpc, &txn.base, &out, err);
    if (rc)
        return rc;
    Etcdserverpb__TxnResponse *tr = (Etcdserverpb__TxnResponse *)out;
    if (tr->succeeded) {
        if (!tr->header)
            rc = ea_errorf(err, KV_ECORRUPT, "etcd %s: response without a revision", what);
        else if (ret_mod_revision)
            *ret_mod_revision = tr->header->revision;
    } else if (tr->n_responses != 1 ||
               tr->responses[0]->response_case !=
                   ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE ||
               !tr->responses[0]->response_range) {
        rc = ea_errorf(err, KV_ECORRUPT, "etcd %s: conflict without the current value", what);
    } else {
        const Etcdserverpb__RangeResponse *rr = tr->responses[0]->response_range;
        rc = ea_errorf(err, KV_ECONFLICT, "etcd %s: expected revision %lld, found %lld", what,
                       (long long)expected_mod_revision,
                       rr->n_kvs ? (long long)rr->kvs[0]->mod_revision : 0LL);
        if (ret_current) {
            struct kv_entry cur = {0};
            int mrc = 0;
            if (rr->n_kvs) {
                mrc = etcd_entry_from_kv(&cur, rr->kvs[0]);
            } else if (!(cur.key = strdup(key)) || !(cur.value = strdup(""))) {
                kv_entry_clear(&cur);
                mrc = -ENOMEM;
            }
            if (mrc)
                rc = ea_errorf(err, -ENOMEM, "etcd: out of memory");
            else
                *ret_current = cur;
        }
    }
    protobuf_c_message_free_unpacked(out, NULL);
    return rc;
}

/* "'a' at 5, 'b' absent, ..." for a conflict message: the compares a failed txn was fenced on
 * (etcd does not say which one failed; asking would cost a failure branch per compare). */
static void describe_cmps(char *buf, size_t size, const struct kv_cmp *cmps, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < size; i++) {
        int w =
            cmps[i].mod_revision
                ? snprintf(buf + used, size - used, "%s'%.80s' at %lld", i ? ", " : "", cmps[i].key,
                           (long long)cmps[i].mod_revision)
                : snprintf(buf + used, size - used, "%s'%.80s' absent", i ? ", " : "", cmps[i].key);
        used += w > 0 ? (size_t)w : 0;
    }
}

static int etcd_txn(struct kv *kv, const struct kv_cmp *cmps, size_t n_cmps,
                    const struct kv_op *ops, size_t n_ops, int64_t *ret_revision,
                    struct ea_error *err)
{
    int rc0 = kv_txn_check("etcd txn", cmps, n_cmps, ops, n_ops, err);
    if (rc0 < 0)
        return rc0;
    char what[160];
    WHAT(what, "txn of %zu op(s) (first '%.100s')", n_ops, ops[0].key);
    /* Only pointers into the caller's keys and values: nothing to free but the arrays. */
    Etcdserverpb__Compare *cmp = calloc(n_cmps ? n_cmps : 1, sizeof(*cmp));
    Etcdserverpb__Compare **cmpp = calloc(n_cmps ? n_cmps : 1, sizeof(*cmpp));
    Etcdserverpb__PutRequest *put = calloc(n_ops, sizeof(*put));
    Etcdserverpb__DeleteRangeRequest *del = calloc(n_ops, sizeof(*del));
    Etcdserverpb__RequestOp *op = calloc(n_ops, sizeof(*op));
    Etcdserverpb__RequestOp **opp = calloc(n_ops, sizeof(*opp));
    int rc = 0;
    if (!cmp || !cmpp || !put || !del || !op || !opp) {
        rc = ea_errorf(err, -ENOMEM, "etcd %s: out of memory", what);
        goto out;
    }
    for (size_t i = 0; i < n_cmps; i++) {
        Etcdserverpb__Compare *c = &cmp[i];
        *c = (Etcdserverpb__Compare)ETCDSERVERPB__COMPARE__INIT;
        c->key = bin(cmps[i].key, strlen(cmps[i].key));
        c->result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
        if (cmps[i].mod_revision == 0) { /* absent: as etcd_cas, create_revision 0 */
            c->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
            c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
            c->create_revision = 0;
        } else {
            c->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD;
            c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
            c->mod_revision = cmps[i].mod_revision;
        }
        cmpp[i] = c;
    }
    for (size_t i = 0; i < n_ops; i++) {
        op[i] = (Etcdserverpb__RequestOp)ETCDSERVERPB__REQUEST_OP__INIT;
        if (ops[i].del) {
            del[i] = (Etcdserverpb__DeleteRangeRequest)ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
            del[i].key = bin(ops[i].key, strlen(ops[i].key));
            op[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
            op[i].request_delete_range = &del[i];
        } else {
            put[i] = (Etcdserverpb__PutRequest)ETCDSERVERPB__PUT_REQUEST__INIT;
            put[i].key = bin(ops[i].key, strlen(ops[i].key));
            put[i].value = bin(ops[i].value, ops[i].len);
            put[i].lease = ops[i].lease;
            op[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
            op[i].request_put = &put[i];
        }
        opp[i] = &op[i];
    }
    Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
    txn.n_compare = n_cmps;
    txn.compare = cmpp;
    txn.n_success = n_ops;
    txn.success = opp;

    /* A write: sent to another member only when it surely never left (etcd_unary). A repeated
     * key (kv_txn refuses it first), too many ops and a bad argument come back as
     * INVALID_ARGUMENT (KV_EINVAL), an unknown lease as NOT_FOUND (KV_ENOLEASE). */
    const struct etcd_rpc rpc = {ETCD_M_TXN, &etcdserverpb__txn_response__descriptor, 0, what};
    ProtobufCMessage *out;
    rc = etcd_unary((struct etcd *)kv, &rpc, &txn.base, &out, err);
    if (rc)
        goto out;
    Etcdserverpb__TxnResponse *tr = (Etcdserverpb__TxnResponse *)out;
    if (!tr->succeeded) {
        char held[256];
        describe_cmps(held, sizeof(held), cmps, n_cmps);
        rc = ea_errorf(err, KV_ECONFLICT, "etcd %s: compares did not all hold (expected %s)", what,
                       held);
    } else if (!tr->header) {
        rc = ea_errorf(err, KV_ECORRUPT, "etcd %s: response without a revision", what);
    } else if (ret_revision) {
        *ret_revision = tr->header->revision;
    }
    protobuf_c_message_free_unpacked(out, NULL);
out:
    free(cmp);
    free(cmpp);
    free(put);
    free(del);
    free(op);
    free(opp);
    return rc;
}

static int etcd_put(struct kv *kv, const char *key, const char *value, size_t len, int64_t lease,
                    int64_t *ret_mod_revision, struct ea_error *err)
{
    char what[160];
    WHAT(what, "put '%.100s'", key);
    Etcdserverpb__PutRequest rq = ETCDSERVERPB__PUT_REQUEST__INIT;
    rq.key = bin(key, strlen(key));
    rq.value = bin(value, len);
    rq.lease = lease;
    const struct etcd_rpc rpc = {ETCD_M_PUT, &etcdserverpb__put_response__descriptor, 0, what};
    ProtobufCMessage *out;
    int rc = etcd_unary((struct etcd *)kv, &rpc, &rq.base, &out, err);
    if (rc)
        return rc;
    Etcdserverpb__PutResponse *pr = (Etcdserverpb__PutResponse *)out;
    if (!pr->header)
        rc = ea_errorf(err, KV_ECORRUPT, "etcd %s: response without a revision", what);
    else if (ret_mod_revision)
        *ret_mod_revision = pr->header->revision;
    protobuf_c_message_free_unpacked(out, NULL);
    return rc;
}

static int etcd_del(struct kv *kv, const char *key, struct ea_error *err)
{
    char what[160];
    WHAT(what, "delete '%.100s'", key);
    Etcdserverpb__DeleteRangeRequest rq = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
    rq.key = bin(key, strlen(key));
    /* Deleting twice deletes nothing the second time: safe to send to another member. */
    const struct etcd_rpc rpc = {ETCD_M_DELETE, &etcdserverpb__delete_range_response__descriptor, 1,
                                 what};
    return call_discard(kv, &rpc, &rq.base, err);
}

static int etcd_lease_grant(struct kv *kv, int64_t ttl_ms, int64_t *ret_lease, struct ea_error *err)
{
    if (ttl_ms <= 0)
        return ea_errorf(err, KV_EINVAL, "etcd lease grant: TTL must be positive (%lld ms)",
                         (long long)ttl_ms);
    Etcdserverpb__LeaseGrantRequest rq = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    rq.ttl = (ttl_ms + 999) / 1000; /* etcd counts whole seconds: round up, never below 1 */
    const struct etcd_rpc rpc = {ETCD_M_LEASE_GRANT,
                                 &etcdserverpb__lease_grant_response__descriptor, 0, "lease grant"};
    ProtobufCMessage *out;
    int rc = etcd_unary((struct etcd *)kv, &rpc, &rq.base, &out, err);
    if (rc)
        return rc;
    Etcdserverpb__LeaseGrantResponse *gr = (Etcdserverpb__LeaseGrantResponse *)out;
    if (gr->error && gr->error[0])
        rc = ea_errorf(err, KV_EINVAL, "etcd lease grant: %s", gr->error);
    else if (gr->id == 0)
        rc = ea_errorf(err, KV_ECORRUPT, "etcd lease grant: response without a lease id");
    else
        *ret_lease = gr->id;
    protobuf_c_message_free_unpacked(out, NULL);
    return rc;
}

static int etcd_lease_revoke(struct kv *kv, int64_t lease, struct ea_error *err)
{
    char what[64];
    WHAT(what, "lease revoke %lld", (long long)lease);
    Etcdserverpb__LeaseRevokeRequest rq = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
    rq.id = lease;
    const struct etcd_rpc rpc = {ETCD_M_LEASE_REVOKE,
                                 &etcdserverpb__lease_revoke_response__descriptor, 0, what};
    return call_discard(kv, &rpc, &rq.base, err);
}

/* n lease requests of one kind (a revoke, or a keepalive: both carry the lease id alone) in
 * flight together (etcd_unary_each); resps as etcd_unary_each's ret_resps (may be NULL). */
static int lease_each(struct kv *kv, const int64_t *leases, size_t n, bool keepalive,
                      int *ret_codes, ProtobufCMessage **resps, struct ea_error *err)
{
    union lease_req {
        Etcdserverpb__LeaseRevokeRequest revoke;
        Etcdserverpb__LeaseKeepAliveRequest keepalive;
    } *rq = calloc(n ? n : 1, sizeof(*rq));
    const ProtobufCMessage **reqs = calloc(n ? n : 1, sizeof(*reqs));
    const struct etcd_rpc rpc =
        keepalive ? (struct etcd_rpc){ETCD_M_LEASE_KEEPALIVE,
                                      &etcdserverpb__lease_keep_alive_response__descriptor, 1,
                                      "lease keepalive"}
                  : (struct etcd_rpc){ETCD_M_LEASE_REVOKE,
                                      &etcdserverpb__lease_revoke_response__descriptor, 0,
                                      "lease revoke"};
    int rc = rq && reqs ? 0 : ea_errorf(err, -ENOMEM, "etcd %s: out of memory", rpc.what);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (keepalive) {
            rq[i].keepalive =
                (Etcdserverpb__LeaseKeepAliveRequest)ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
            rq[i].keepalive.id = leases[i];
            reqs[i] = &rq[i].keepalive.base;
        } else {
            rq[i].revoke =
                (Etcdserverpb__LeaseRevokeRequest)ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
            rq[i].revoke.id = leases[i];
            reqs[i] = &rq[i].revoke.base;
        }
    }
    if (rc == 0)
        rc = etcd_unary_each((struct etcd *)kv, &rpc, reqs, n, ret_codes, resps, err);
    free(reqs);
    free(rq);
    return rc;
}

static int etcd_lease_revoke_each(struct kv *kv, const int64_t *leases, size_t n, int *ret_codes,
                                  struct ea_error *err)
{
    return lease_each(kv, leases, n, false, ret_codes, NULL, err);
}

/* Each renewal a call of its own on the LeaseKeepAlive method (one request, one answer), all in
 * flight together: the keepalive stream takes one lease at a time, and n renewals one after the
 * other cost n round trips (rdzv-sim's 625 sessions a process, bench/sim_child.c). */
static int etcd_lease_keepalive_each(struct kv *kv, const int64_t *leases, size_t n,
                                     int *ret_codes, struct ea_error *err)
{
    ProtobufCMessage **resps = calloc(n ? n : 1, sizeof(*resps));
    int rc = resps ? lease_each(kv, leases, n, true, ret_codes, resps, err)
                   : ea_errorf(err, -ENOMEM, "etcd lease keepalive: out of memory");
    bool named = false;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        named = named || ret_codes[i] != 0;
        const Etcdserverpb__LeaseKeepAliveResponse *r =
            (const Etcdserverpb__LeaseKeepAliveResponse *)resps[i];
        if (ret_codes[i] == 0 && (!r || r->ttl <= 0)) { /* etcd answers TTL 0: expired, unknown */
            ret_codes[i] = KV_ENOLEASE;
            if (!named)
                ea_errorf(err, KV_ENOLEASE, "etcd lease %lld expired or unknown",
                          (long long)leases[i]);
            named = true;
        }
    }
    for (size_t i = 0; resps && i < n; i++)
        if (resps[i])
            protobuf_c_message_free_unpacked(resps[i], NULL);
    free(resps);
    return rc;
}

int etcd_compact(struct kv *kv, int64_t revision, struct ea_error *err)
{
    if (!kv || kv->ops != &kv_etcd_ops)
        return ea_errorf(err, KV_EINVAL, "etcd_compact: not an etcd handle");
    char what[64];
    WHAT(what, "compact to %lld", (long long)revision);
    Etcdserverpb__CompactionRequest rq = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
    rq.revision = revision;
    rq.physical = 1;
    const struct etcd_rpc rpc = {ETCD_M_COMPACT, &etcdserverpb__compaction_response__descriptor, 1,
                                 what};
    return call_discard(kv, &rpc, &rq.base, err);
}

const struct kv_ops kv_etcd_ops = {
    .name = "etcd",
    .open = etcd_open,
    .close = etcd_close,
    .get = etcd_get,
    .get_at = etcd_get_at,
    .list = etcd_list,
    .list_page = etcd_list_page,
    .cas = etcd_cas,
    .txn = etcd_txn,
    .put = etcd_put,
    .del = etcd_del,
    .lease_grant = etcd_lease_grant,
    .lease_keepalive = etcd_lease_keepalive,
    .lease_revoke = etcd_lease_revoke,
    .lease_revoke_each = etcd_lease_revoke_each,
    .lease_keepalive_each = etcd_lease_keepalive_each,
    .watch = etcd_watch,
    .watch_cancel = etcd_watch_cancel,
    .event_fd = etcd_event_fd,
    .read_events = etcd_read_events,
};
