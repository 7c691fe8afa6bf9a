// SPDX-License-Identifier: Apache-2.0
/*
 * etcd_gateway_kv: the request/response operations of kv.h as gateway calls — kv/range,
 * kv/put, kv/deleterange, kv/txn (CAS with the current value read in the else branch; txn),
 * lease/grant, lease/keepalive (one POST per renewal), lease/revoke. Each builds its JSON
 * body, sends it through etcd_gw_call() and checks the answer's shape (KV_ECORRUPT if wrong).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_gateway_internal.h"

#define WHAT(buf, fmt, ...) snprintf(buf, sizeof(buf), fmt, __VA_ARGS__)

static int oom(struct ea_error *err)
{
    return ea_errorf(err, -ENOMEM, "etcd-gateway: out of memory");
}

static int corrupt(struct ea_error *err, const char *what, const char *why)
{
    return ea_errorf(err, KV_ECORRUPT, "etcd-gateway %s: malformed answer: %s", what, why);
}

/* {"key": b64(key)}; NULL when out of memory. */
static json_t *key_body(const char *key)
{
    json_t *o = json_object();
    if (o && etcd_gw_set_b64(o, "key", key, strlen(key))) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

/* Send `body` (consumed) and return the answer. */
static int call(struct kv *kv, const char *path, const char *what, int idempotent, json_t *body,
                json_t **ret, struct ea_error *err)
{
    if (!body)
        return oom(err);
    const struct etcd_gw_req rq = {path, what, idempotent};
    int rc = etcd_gw_call((struct etcd_gw *)kv, &rq, body, ret, err);
    json_decref(body);
    return rc;
}

/* The "kvs" array of a RangeResponse in *ret (NULL when omitted, i.e. empty: jansson's array
 * functions treat NULL as an empty array). KV_ECORRUPT when it is something else. */
static int kvs_of(const json_t *range, const json_t **ret)
{
    const json_t *kvs = json_object_get(range, "kvs");
    if (kvs && !json_is_null(kvs) && !json_is_array(kvs))
        return KV_ECORRUPT;
    *ret = json_is_array(kvs) ? kvs : NULL;
    return 0;
}

int etcd_gw_get(struct kv *kv, const char *key, struct kv_entry *ret, struct ea_error *err)
{
    char what[160];
    WHAT(what, "get '%.100s'", key);
    json_t *resp = NULL;
    int rc = call(kv, "/v3/kv/range", what, 1, key_body(key), &resp, err);
    if (rc)
        return rc;
    const json_t *kvs = NULL;
    struct kv_entry e;
    if (kvs_of(resp, &kvs)) {
        rc = corrupt(err, what, "'kvs' is not an array");
    } else if (json_array_size(kvs) == 0) {
        rc = ea_errorf(err, KV_ENOTFOUND, "etcd-gateway: key '%s' not found", key);
    } else if ((rc = etcd_gw_entry_from_json(json_array_get(kvs, 0), &e))) {
        rc = rc == -ENOMEM ? oom(err) : corrupt(err, what, "unreadable key-value");
    } else if (strcmp(e.key, key) != 0) {
        kv_entry_clear(&e);
        rc = corrupt(err, what, "answer is about another key");
    } else {
        *ret = e;
    }
    json_decref(resp);
    return rc;
}

/* A range over `prefix`, from just after `after` (NULL = from the first), at most `limit` keys
 * (0 = all), by key ascending: etcd's default order, what kv_list promises. */
static int range_list(struct kv *kv, const char *prefix, const char *after, size_t limit,
                      struct kv_list *ret, struct ea_error *err)
{
    char what[160];
    WHAT(what, "list '%.100s'", prefix);
    json_t *body = json_object();
    if (body && (etcd_gw_set_prefix(body, prefix) ||
                 (after && etcd_gw_set_b64(body, "key", after, strlen(after) + 1)) ||
                 (limit && etcd_gw_set_i64(body, "limit", (int64_t)limit)))) {
        json_decref(body); /* after + its NUL: the least key after it */
        body = NULL;
    }
    json_t *resp = NULL;
    int rc = call(kv, "/v3/kv/range", what, 1, body, &resp, err);
    if (rc)
        return rc;
    struct kv_list l = {0};
    const json_t *kvs = NULL;
    int bad = kvs_of(resp, &kvs);
    size_t n = json_array_size(kvs);
    if (bad) {
        rc = corrupt(err, what, "'kvs' is not an array");
    } else if (etcd_gw_header_revision(resp, &l.revision)) {
        rc = corrupt(err, what, "no store revision");
    } else if (limit && n > limit) {
        rc = corrupt(err, what, "more keys than the page asked for");
    } else if (n && !(l.entries = calloc(n, sizeof(*l.entries)))) {
        rc = oom(err);
    } else {
        l.more = limit && json_is_true(json_object_get(resp, "more"));
        for (; l.n < n && rc == 0; l.n++) {
            rc = etcd_gw_entry_from_json(json_array_get(kvs, l.n), &l.entries[l.n]);
            if (rc)
                rc = rc == -ENOMEM ? oom(err) : corrupt(err, what, "unreadable key-value");
        }
    }
    json_decref(resp);
    if (rc)
        kv_list_clear(&l);
    else
        *ret = l;
    return rc;
}

int etcd_gw_list(struct kv *kv, const char *prefix, struct kv_list *ret, struct ea_error *err)
{
    return range_list(kv, prefix, NULL, 0, ret, err);
}

int etcd_gw_list_page(struct kv *kv, const char *prefix, const char *after, size_t limit,
                      struct kv_list *ret, struct ea_error *err)
{
    return range_list(kv, prefix, after, limit, ret, err);
}

/* The TxnRequest of a CAS: compare, put on success, range of the key on failure. */
static json_t *cas_body(const char *key, const char *value, size_t len, int64_t expected,
                        int64_t lease)
{
    json_t *cmp = key_body(key), *put = key_body(key), *get = key_body(key), *txn = NULL;
    int bad = !cmp || !put || !get;
    if (!bad && expected == 0) { /* create only: an absent key has create_revision 0 */
        bad |= json_object_set_new(cmp, "target", json_string("CREATE")) ||
               etcd_gw_set_i64(cmp, "create_revision", 0);
    } else if (!bad) {
        bad |= json_object_set_new(cmp, "target", json_string("MOD")) ||
               etcd_gw_set_i64(cmp, "mod_revision", expected);
    }
    if (!bad)
        bad |= json_object_set_new(cmp, "result", json_string("EQUAL")) ||
               etcd_gw_set_b64(put, "value", value, len) ||
               (lease && etcd_gw_set_i64(put, "lease", lease));
    if (!bad) {
        /* The else branch reads the key, so a loser learns the winner in the same round
         * trip. */
        txn = json_pack("{s:[O], s:[{s:O}], s:[{s:O}]}", "compare", cmp, "success", "request_put",
                        put, "failure", "request_range", get);
    }
    json_decref(cmp);
    json_decref(put);
    json_decref(get);
    return txn;
}

/* The current entry from a failed CAS's range answer; absent key: key, "" and revisions 0. */
static int conflict_current(const json_t *range, const char *key, struct kv_entry *ret)
{
    const json_t *kvs = NULL;
    if (kvs_of(range, &kvs))
        return KV_ECORRUPT;
    if (json_array_size(kvs)) {
        int rc = etcd_gw_entry_from_json(json_array_get(kvs, 0), ret);
        if (rc == 0 && strcmp(ret->key, key) != 0) {
            kv_entry_clear(ret);
            rc = KV_ECORRUPT;
        }
        return rc;
    }
    struct kv_entry e = {.key = strdup(key), .value = strdup("")};
    if (!e.key || !e.value) {
        kv_entry_clear(&e);
        return -ENOMEM;
    }
    *ret = e;
    return 0;
}

int etcd_gw_cas(struct kv *kv, const char *key, const char *value, size_t len,
                int64_t expected_mod_revision, int64_t lease, int64_t *ret_mod_revision,
                struct kv_entry *ret_current, struct ea_error *err)
{
    if (expected_mod_revision < 0)
        return ea_errorf(err, KV_EINVAL, "etcd-gateway cas '%s': negative expected revision", key);
    char what[160];
    WHAT(what, "cas '%.100s'", key);
    json_t *resp = NULL;
    int rc = call(kv, "/v3/kv/txn", what, 0,
                  cas_body(key, value, len, expected_mod_revision, lease), &resp, err);
    if (rc)
        return rc;
    const json_t *ok = json_object_get(resp, "succeeded"); /* omitted when false */
    const json_t *rs = json_object_get(resp, "responses");
    const json_t *range = json_object_get(json_array_get(rs, 0), "response_range");
    int64_t rev = 0;
    if (ok && !json_is_boolean(ok)) {
        rc = corrupt(err, what, "'succeeded' is not a boolean");
    } else if (json_is_true(ok)) {
        if (etcd_gw_header_revision(resp, &rev))
            rc = corrupt(err, what, "no store revision");
        else if (ret_mod_revision)
            *ret_mod_revision = rev;
    } else if (json_array_size(rs) != 1 || !json_is_object(range)) {
        rc = corrupt(err, what, "conflict without the current value");
    } else {
        struct kv_entry cur = {0};
        int crc = conflict_current(range, key, &cur);
        if (crc == -ENOMEM) {
            rc = oom(err);
        } else if (crc) {
            rc = corrupt(err, what, "unreadable current value");
        } else {
            rc = ea_errorf(err, KV_ECONFLICT, "etcd-gateway %s: expected revision %lld, found %lld",
                           what, (long long)expected_mod_revision, (long long)cur.mod_revision);
            if (ret_current)
                *ret_current = cur;
            else
                kv_entry_clear(&cur);
        }
    }
    json_decref(resp);
    return rc;
}

/* One compare of a txn: the key's mod_revision == rev, or absent (create_revision 0, as CAS). */
static json_t *txn_cmp(const struct kv_cmp *c)
{
    json_t *o = key_body(c->key);
    int bad = !o || json_object_set_new(o, "result", json_string("EQUAL"));
    if (!bad && c->mod_revision == 0)
        bad = json_object_set_new(o, "target", json_string("CREATE")) ||
              etcd_gw_set_i64(o, "create_revision", 0);
    else if (!bad)
        bad = json_object_set_new(o, "target", json_string("MOD")) ||
              etcd_gw_set_i64(o, "mod_revision", c->mod_revision);
    if (bad) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

/* One success op of a txn: {"request_put": {...}} or {"request_delete_range": {"key": ...}}. */
static json_t *txn_op(const struct kv_op *op)
{
    json_t *rq = key_body(op->key);
    if (rq && !op->del &&
        (etcd_gw_set_b64(rq, "value", op->value, op->len) ||
         (op->lease && etcd_gw_set_i64(rq, "lease", op->lease)))) {
        json_decref(rq);
        rq = NULL;
    }
    return rq ? json_pack("{s:o}", op->del ? "request_delete_range" : "request_put", rq) : NULL;
}

/* The TxnRequest: every compare, every op on success, no failure branch. NULL: out of memory. */
static json_t *txn_body(const struct kv_cmp *cmps, size_t n_cmps, const struct kv_op *ops,
                        size_t n_ops)
{
    json_t *compare = json_array(), *success = json_array();
    int bad = !compare || !success;
    for (size_t i = 0; i < n_cmps && !bad; i++)
        bad = json_array_append_new(compare, txn_cmp(&cmps[i])) != 0;
    for (size_t i = 0; i < n_ops && !bad; i++)
        bad = json_array_append_new(success, txn_op(&ops[i])) != 0;
    if (bad) {
        json_decref(compare);
        json_decref(success);
        return NULL;
    }
    return json_pack("{s:o, s:o}", "compare", compare, "success", success);
}

int etcd_gw_txn(struct kv *kv, const struct kv_cmp *cmps, size_t n_cmps, const struct kv_op *ops,
                size_t n_ops, int64_t *ret_revision, struct ea_error *err)
{
    int rc0 = kv_txn_check("etcd-gateway txn", cmps, n_cmps, ops, n_ops, err);
    if (rc0 < 0)
        return rc0;
    char what[160];
    WHAT(what, "txn of %zu op(s) (first '%.100s')", n_ops, ops[0].key);
    json_t *resp = NULL;
    /* A write: another endpoint only when it surely never left (etcd_gw_call). The gateway
     * relays etcd's refusals: unknown lease -> KV_ENOLEASE, duplicate key / too many ops ->
     * KV_EINVAL. */
    int rc = call(kv, "/v3/kv/txn", what, 0, txn_body(cmps, n_cmps, ops, n_ops), &resp, err);
    if (rc)
        return rc;
    const json_t *ok = json_object_get(resp, "succeeded"); /* omitted when false */
    int64_t rev = 0;
    if (ok && !json_is_boolean(ok)) {
        rc = corrupt(err, what, "'succeeded' is not a boolean");
    } else if (!json_is_true(ok)) {
        /* etcd does not say which compare failed; name what the txn was fenced on */
        char held[256] = "";
        size_t used = 0;
        for (size_t i = 0; i < n_cmps && used < sizeof(held); i++) {
            const char *sep = i ? ", " : "";
            int w = cmps[i].mod_revision
                        ? snprintf(held + used, sizeof(held) - used, "%s'%.80s' at %lld", sep,
                                   cmps[i].key, (long long)cmps[i].mod_revision)
                        : snprintf(held + used, sizeof(held) - used, "%s'%.80s' absent", sep,
                                   cmps[i].key);
            used += w > 0 ? (size_t)w : 0;
        }
        rc = ea_errorf(err, KV_ECONFLICT,
                       "etcd-gateway %s: compares did not all hold (expected %s)", what, held);
    } else if (etcd_gw_header_revision(resp, &rev)) {
        rc = corrupt(err, what, "no store revision");
    } else if (ret_revision) {
        *ret_revision = rev;
    }
    json_decref(resp);
    return rc;
}

int etcd_gw_put(struct kv *kv, const char *key, const char *value, size_t len, int64_t lease,
                int64_t *ret_mod_revision, struct ea_error *err)
{
    char what[160];
    WHAT(what, "put '%.100s'", key);
    json_t *body = key_body(key);
    if (body && (etcd_gw_set_b64(body, "value", value, len) ||
                 (lease && etcd_gw_set_i64(body, "lease", lease)))) {
        json_decref(body);
        body = NULL;
    }
    json_t *resp = NULL;
    int rc = call(kv, "/v3/kv/put", what, 0, body, &resp, err);
    if (rc)
        return rc;
    int64_t rev = 0;
    if (etcd_gw_header_revision(resp, &rev))
        rc = corrupt(err, what, "no store revision");
    else if (ret_mod_revision)
        *ret_mod_revision = rev;
    json_decref(resp);
    return rc;
}

int etcd_gw_del(struct kv *kv, const char *key, struct ea_error *err)
{
    char what[160];
    WHAT(what, "delete '%.100s'", key);
    json_t *resp = NULL;
    /* Deleting twice deletes nothing the second time: safe to send to another member. */
    int rc = call(kv, "/v3/kv/deleterange", what, 1, key_body(key), &resp, err);
    json_decref(resp);
    return rc;
}

int etcd_gw_lease_grant(struct kv *kv, int64_t ttl_ms, int64_t *ret_lease, struct ea_error *err)
{
    if (ttl_ms <= 0)
        return ea_errorf(err, KV_EINVAL, "etcd-gateway lease grant: TTL must be positive (%lld ms)",
                         (long long)ttl_ms);
    json_t *body = json_object();
    /* etcd counts whole seconds: round up, never below 1 */
    if (body && etcd_gw_set_i64(body, "TTL", (ttl_ms + 999) / 1000)) {
        json_decref(body);
        body = NULL;
    }
    json_t *resp = NULL;
    int rc = call(kv, "/v3/lease/grant", "lease grant", 0, body, &resp, err);
    if (rc)
        return rc;
    int64_t id = 0;
    const json_t *e = json_object_get(resp, "error"); /* LeaseGrantResponse.error */
    if (json_is_string(e) && json_string_value(e)[0])
        rc = ea_errorf(err, KV_EINVAL, "etcd-gateway lease grant: %s", json_string_value(e));
    else if (etcd_gw_get_i64(resp, "ID", &id) || id == 0)
        rc = corrupt(err, "lease grant", "no lease id");
    else
        *ret_lease = id;
    json_decref(resp);
    return rc;
}

int etcd_gw_lease_keepalive(struct kv *kv, int64_t lease, int64_t *ret_ttl_ms, struct ea_error *err)
{
    if (lease <= 0)
        return ea_errorf(err, KV_ENOLEASE, "etcd-gateway lease keepalive: no such lease %lld",
                         (long long)lease);
    char what[64];
    WHAT(what, "lease keepalive %lld", (long long)lease);
    json_t *body = json_object();
    if (body && etcd_gw_set_i64(body, "ID", lease)) {
        json_decref(body);
        body = NULL;
    }
    /* The stream endpoint: one request in the body, one {"result":...} back, then the stream
     * ends with the body. A renewal is idempotent: any endpoint will do. */
    json_t *resp = NULL;
    int rc = call(kv, "/v3/lease/keepalive", what, 1, body, &resp, err);
    if (rc)
        return rc;
    const json_t *r = json_object_get(resp, "result");
    int64_t id = 0, ttl = 0;
    int code = 0;
    const char *msg = NULL;
    if (!json_is_object(r) && etcd_gw_error_of(resp, &code, &msg))
        rc = ea_errorf(err, code ? etcd_gw_code_to_kv(code, msg) : KV_ECONN, "etcd-gateway %s: %s",
                       what, msg);
    else if (!json_is_object(r) || etcd_gw_get_i64(r, "ID", &id) ||
             etcd_gw_get_i64(r, "TTL", &ttl) || (id != lease && ttl > 0))
        rc = corrupt(err, what, "no keepalive result for this lease");
    else if (ttl <= 0) /* etcd answers TTL 0 (omitted) for a lease it does not know */
        rc = ea_errorf(err, KV_ENOLEASE, "etcd-gateway lease %lld expired or unknown",
                       (long long)lease);
    else if (ret_ttl_ms)
        *ret_ttl_ms = ttl * 1000;
    json_decref(resp);
    return rc;
}

int etcd_gw_lease_revoke(struct kv *kv, int64_t lease, struct ea_error *err)
{
    char what[64];
    WHAT(what, "lease revoke %lld", (long long)lease);
    json_t *body = json_object();
    if (body && etcd_gw_set_i64(body, "ID", lease)) {
        json_decref(body);
        body = NULL;
    }
    json_t *resp = NULL;
    int rc = call(kv, "/v3/lease/revoke", what, 0, body, &resp, err);
    json_decref(resp);
    return rc;
}
