// SPDX-License-Identifier: Apache-2.0
/*
 * etcd_gateway_json: the gateway's JSON mapping of etcd's protobuf messages (proto field names,
 * int64 as decimal strings, bytes as standard base64, defaults omitted) in both directions, and
 * the shape of its error answers. Everything read from the network is checked: a wrong type or
 * bad base64 is KV_ECORRUPT, never a crash. Base64 is OpenSSL's EVP_EncodeBlock/DecodeBlock
 * (libcurl and jansson export none), with the strictness DecodeBlock lacks added here.
 */
#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_gateway_internal.h"

/* ---- base64 ---- */

static int b64_encode(const void *data, size_t len, char **ret, size_t *ret_len)
{
    if (len > (size_t)INT_MAX / 4 * 3 - 3)
        return -ENOMEM;
    size_t cap = (len + 2) / 3 * 4 + 1;
    char *out = malloc(cap);
    if (!out)
        return -ENOMEM;
    int n = len ? EVP_EncodeBlock((unsigned char *)out, data, (int)len) : 0;
    out[n] = '\0';
    *ret = out;
    *ret_len = (size_t)n;
    return 0;
}

static int b64_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
}

int etcd_gw_b64_decode(const char *s, size_t len, char **ret, size_t *ret_len)
{
    /* EVP_DecodeBlock skips surrounding white space and counts the padding as zero bytes:
     * accept canonical padded base64 only, and take the padding off its length. */
    if (len % 4 || len > (size_t)INT_MAX)
        return KV_ECORRUPT;
    size_t pad = 0;
    while (pad < 2 && pad < len && s[len - 1 - pad] == '=')
        pad++;
    for (size_t i = 0; i < len - pad; i++)
        if (!b64_char((unsigned char)s[i]))
            return KV_ECORRUPT;
    char *out = malloc(len / 4 * 3 + 1);
    if (!out)
        return -ENOMEM;
    int n = len ? EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)s, (int)len) : 0;
    if (n < 0 || (size_t)n < pad) {
        free(out);
        return KV_ECORRUPT;
    }
    n -= (int)pad;
    out[n] = '\0';
    *ret = out;
    *ret_len = (size_t)n;
    return 0;
}

/* ---- building requests ---- */

int etcd_gw_set_b64(json_t *o, const char *name, const void *data, size_t len)
{
    char *enc;
    size_t n;
    if (b64_encode(data, len, &enc, &n))
        return -ENOMEM;
    int rc = json_object_set_new(o, name, json_stringn_nocheck(enc, n)) ? -ENOMEM : 0;
    free(enc);
    return rc;
}

int etcd_gw_set_i64(json_t *o, const char *name, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", (long long)v);
    return json_object_set_new(o, name, json_string(buf)) ? -ENOMEM : 0;
}

/* etcd's getPrefix rule: increment the last byte below 0xff and cut after it; all 0xff (or
 * empty) means "no upper bound", written as "\0". */
static size_t prefix_range_end(const unsigned char *key, size_t len, unsigned char *out)
{
    for (size_t i = len; i-- > 0;)
        if (key[i] < 0xff) {
            memcpy(out, key, i);
            out[i] = (unsigned char)(key[i] + 1);
            return i + 1;
        }
    out[0] = 0;
    return 1;
}

int etcd_gw_set_prefix(json_t *o, const char *prefix)
{
    static const char zero[1] = {0};
    size_t len = strlen(prefix);
    if (len == 0) /* every key: key "\0", range_end "\0" */
        return etcd_gw_set_b64(o, "key", zero, 1) || etcd_gw_set_b64(o, "range_end", zero, 1)
                   ? -ENOMEM
                   : 0;
    unsigned char *end = malloc(len + 1);
    if (!end)
        return -ENOMEM;
    size_t elen = prefix_range_end((const unsigned char *)prefix, len, end);
    int rc = etcd_gw_set_b64(o, "key", prefix, len) || etcd_gw_set_b64(o, "range_end", end, elen)
                 ? -ENOMEM
                 : 0;
    free(end);
    return rc;
}

/* ---- reading responses ---- */

int etcd_gw_get_i64(const json_t *o, const char *name, int64_t *ret)
{
    const json_t *v = json_object_get(o, name);
    if (!v || json_is_null(v)) {
        *ret = 0; /* proto3 default: omitted */
        return 0;
    }
    if (json_is_integer(v)) {
        *ret = (int64_t)json_integer_value(v);
        return 0;
    }
    if (!json_is_string(v))
        return KV_ECORRUPT;
    const char *s = json_string_value(v);
    if (!s[0] || json_string_length(v) != strlen(s) ||
        !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')))
        return KV_ECORRUPT;
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || *end)
        return KV_ECORRUPT;
    *ret = (int64_t)x;
    return 0;
}

/* A base64 bytes field; absent = empty. */
static int get_bytes(const json_t *o, const char *name, char **ret, size_t *ret_len)
{
    const json_t *v = json_object_get(o, name);
    if (!v || json_is_null(v))
        return etcd_gw_b64_decode("", 0, ret, ret_len);
    if (!json_is_string(v))
        return KV_ECORRUPT;
    return etcd_gw_b64_decode(json_string_value(v), json_string_length(v), ret, ret_len);
}

int etcd_gw_entry_from_json(const json_t *kv, struct kv_entry *ret)
{
    if (!json_is_object(kv))
        return KV_ECORRUPT;
    struct kv_entry x = {0};
    size_t klen = 0;
    int rc = get_bytes(kv, "key", &x.key, &klen);
    if (rc == 0 && (klen == 0 || memchr(x.key, '\0', klen)))
        rc = KV_ECORRUPT; /* no key, or one kv.h cannot represent */
    if (rc == 0)
        rc = get_bytes(kv, "value", &x.value, &x.value_len);
    if (rc == 0 && (etcd_gw_get_i64(kv, "mod_revision", &x.mod_revision) ||
                    etcd_gw_get_i64(kv, "create_revision", &x.create_revision) ||
                    etcd_gw_get_i64(kv, "lease", &x.lease)))
        rc = KV_ECORRUPT;
    if (rc) {
        kv_entry_clear(&x);
        return rc;
    }
    *ret = x;
    return 0;
}

int etcd_gw_header_revision(const json_t *resp, int64_t *ret)
{
    const json_t *h = json_object_get(resp, "header");
    int64_t rev = 0;
    if (!json_is_object(h) || etcd_gw_get_i64(h, "revision", &rev) || rev <= 0)
        return KV_ECORRUPT;
    *ret = rev;
    return 0;
}

int etcd_gw_error_of(const json_t *o, int *ret_code, const char **ret_msg)
{
    const json_t *e = json_object_get(o, "error");
    if (json_is_string(e)) { /* unary: {"error":"..","message":"..","code":N} */
        const json_t *m = json_object_get(o, "message"), *c = json_object_get(o, "code");
        *ret_msg = json_is_string(m) ? json_string_value(m) : json_string_value(e);
        *ret_code = json_is_integer(c) ? (int)json_integer_value(c) : 2 /* UNKNOWN */;
        return 1;
    }
    if (json_is_object(e)) { /* streams: {"error":{"grpc_code":N,"message":".."}} */
        const json_t *m = json_object_get(e, "message"), *c = json_object_get(e, "grpc_code");
        *ret_msg = json_is_string(m) ? json_string_value(m) : "no message";
        *ret_code = json_is_integer(c) ? (int)json_integer_value(c) : 2;
        return 1;
    }
    return 0;
}
