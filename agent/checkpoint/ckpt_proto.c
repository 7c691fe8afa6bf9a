// SPDX-License-Identifier: Apache-2.0
/* ckpt_proto: request parsing and CRC-32 (slicing by 8). */
#include "ckpt_proto.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

/* The next space-separated token of msg[*pos..n): [*ret_tok, +*ret_len); false at the end. */
static bool token(const char *msg, size_t n, size_t *pos, const char **ret_tok, size_t *ret_len)
{
    size_t i = *pos;
    if (i >= n)
        return false;
    size_t j = i;
    while (j < n && msg[j] != ' ')
        j++;
    if (j == i)
        return false; /* two spaces, or a leading one */
    *ret_tok = msg + i;
    *ret_len = j - i;
    *pos = j < n ? j + 1 : j;
    return true;
}

/* A decimal number 0..max (no sign, no leading '+', at most 19 digits). */
static bool number(const char *t, size_t len, uint64_t max, uint64_t *ret)
{
    if (len == 0 || len > 19)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (t[i] < '0' || t[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(t[i] - '0');
    }
    if (v > max)
        return false;
    *ret = v;
    return true;
}

static bool hex32(const char *t, size_t len, uint32_t *ret)
{
    if (len != 8)
        return false;
    uint32_t v = 0;
    for (size_t i = 0; i < len; i++) {
        char c = t[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return false;
        v = v << 4 | (uint32_t)d;
    }
    *ret = v;
    return true;
}

static const struct {
    const char *verb;
    enum ckpt_op op;
    const char *fields; /* r: run, s: step, h: shard, H: shards, l: length, i: id, c: crc */
} verbs[] = {
    {"save", CKPT_SAVE, "rshHl"},
    {"commit", CKPT_COMMIT, "ic"},
    {"latest", CKPT_LATEST, "r"},
    {"load", CKPT_LOAD, "rsh"},
};

int ckpt_req_parse(const char *msg, size_t n, struct ckpt_req *ret, struct ea_error *err)
{
    if (n == 0 || n > CKPT_MSG_MAX)
        return ea_errorf(err, -EBADMSG, "a request of %zu bytes (1..%d)", n, CKPT_MSG_MAX);
    if (memchr(msg, '\0', n))
        return ea_errorf(err, -EBADMSG, "a NUL byte in the request");
    if (msg[n - 1] == ' ')
        return ea_errorf(err, -EBADMSG, "a space at the end of the request");
    size_t pos = 0, len = 0;
    const char *t = NULL;
    if (!token(msg, n, &pos, &t, &len))
        return ea_errorf(err, -EBADMSG, "no verb");
    size_t v = 0;
    while (v < sizeof(verbs) / sizeof(*verbs) &&
           !(strlen(verbs[v].verb) == len && memcmp(verbs[v].verb, t, len) == 0))
        v++;
    if (v == sizeof(verbs) / sizeof(*verbs))
        return ea_errorf(err, -EBADMSG, "unknown verb '%.*s'", (int)(len > 16 ? 16 : len), t);
    struct ckpt_req r = {.op = verbs[v].op};
    for (const char *f = verbs[v].fields; *f; f++) {
        uint64_t x = 0;
        if (!token(msg, n, &pos, &t, &len))
            return ea_errorf(err, -EBADMSG, "%s: a field missing", verbs[v].verb);
        bool ok = true;
        switch (*f) {
        case 'r':
            ok = len < sizeof(r.run);
            for (size_t i = 0; ok && i < len; i++)
                ok = t[i] > ' ' && t[i] < 0x7f;
            if (ok)
                memcpy(r.run, t, len);
            break;
        case 's':
            ok = number(t, len, (uint64_t)CKPT_MAX_STEP, &x);
            r.step = (int64_t)x;
            break;
        case 'h':
        case 'H':
            ok = number(t, len, (uint64_t)CKPT_MAX_SHARDS, &x);
            *(*f == 'h' ? &r.shard : &r.shards) = (int64_t)x;
            break;
        case 'l':
            ok = number(t, len, UINT64_C(1) << 48, &r.len);
            break;
        case 'i':
            ok = number(t, len, UINT64_MAX / 10, &r.id);
            break;
        case 'c':
            r.has_crc = !(len == 1 && t[0] == '-');
            ok = !r.has_crc || hex32(t, len, &r.crc);
            break;
        }
        if (!ok)
            return ea_errorf(err, -EBADMSG, "%s: field %d ('%.*s') is out of range or malformed",
                             verbs[v].verb, (int)(f - verbs[v].fields) + 1,
                             (int)(len > 32 ? 32 : len), t);
    }
    if (pos < n)
        return ea_errorf(err, -EBADMSG, "%s: extra fields", verbs[v].verb);
    *ret = r;
    return 0;
}

static uint32_t crc_table[8][256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = crc_table[0][crc_table[t - 1][i] & 0xff] ^ (crc_table[t - 1][i] >> 8);
}

uint32_t ckpt_crc32(uint32_t crc, const void *data, size_t n)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, crc_init); /* the loop and --checkpoint-dir's writer both call it */
    const unsigned char *p = data;
    uint32_t c = ~crc;
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
                      (uint32_t)p[7] << 24;
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
            crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xff] ^
            crc_table[2][(hi >> 8) & 0xff] ^ crc_table[1][(hi >> 16) & 0xff] ^
            crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return ~c;
}
