// SPDX-License-Identifier: Apache-2.0
/* warm_proto: the ready line (parsed) and the assignment line (formatted). */
#include "warm_proto.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int warm_parse_ready(const char *line, size_t len, long *ret_pid, bool *ret_inplace,
                     struct ea_error *err)
{
    if (memchr(line, '\0', len))
        return ea_errorf(err, -EBADMSG, "a NUL byte in the line");
    json_error_t je;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
    if (!o)
        return ea_errorf(err, -EBADMSG, "not JSON (%s)", je.text);
    int r = -EBADMSG;
    json_t *ready = json_object_get(o, "ready"), *pid = json_object_get(o, "pid");
    json_t *inplace = json_object_get(o, "inplace");
    if (!json_is_object(o))
        ea_errorf(err, r, "not a JSON object");
    else if (!json_is_integer(ready) || json_integer_value(ready) != 1)
        ea_errorf(err, r, "no \"ready\":1");
    else if (!json_is_integer(pid) || json_integer_value(pid) < 1 ||
             json_integer_value(pid) > INT32_MAX)
        ea_errorf(err, r, "no \"pid\" (a positive integer)");
    else if (inplace && (!json_is_integer(inplace) || json_integer_value(inplace) < 0 ||
                         json_integer_value(inplace) > 1))
        ea_errorf(err, r, "\"inplace\" is not 0 or 1");
    else {
        *ret_pid = (long)json_integer_value(pid);
        *ret_inplace = inplace && json_integer_value(inplace) == 1;
        r = 0;
    }
    json_decref(o);
    return r;
}

int warm_parse_ack(const char *line, size_t len, int64_t *ret_gen, struct ea_error *err)
{
    if (memchr(line, '\0', len))
        return ea_errorf(err, -EBADMSG, "a NUL byte in the line");
    json_error_t je;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
    if (!o)
        return ea_errorf(err, -EBADMSG, "not JSON (%s)", je.text);
    int r = -EBADMSG;
    json_t *ack = json_object_get(o, "ack");
    if (!json_is_object(o))
        ea_errorf(err, r, "not a JSON object");
    else if (!json_is_integer(ack) || json_integer_value(ack) < 1)
        ea_errorf(err, r, "no \"ack\" (a generation, a positive integer)");
    else {
        *ret_gen = (int64_t)json_integer_value(ack);
        r = 0;
    }
    json_decref(o);
    return r;
}

struct out {
    char *buf;
    size_t len, cap;
    bool oom;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->oom)
        return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->len + n + 1)
            cap *= 2;
        char *b = realloc(o->buf, cap);
        if (!b) {
            o->oom = true;
            return;
        }
        o->buf = b;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = '\0';
}

/* A JSON string of the bytes s[0..n): quotes, backslashes and control characters escaped. */
static void put_string(struct out *o, const char *s, size_t n)
{
    put(o, "\"", 1);
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f)
            continue;
        put(o, s + start, i - start);
        char esc[8];
        if (c == '"' || c == '\\')
            snprintf(esc, sizeof(esc), "\\%c", c);
        else
            snprintf(esc, sizeof(esc), "\\u%04x", c);
        put(o, esc, strlen(esc));
        start = i + 1;
    }
    put(o, s + start, n - start);
    put(o, "\"", 1);
}

int warm_format_assignment(int64_t generation, int64_t round, char *const *env, char **ret,
                           size_t *ret_len)
{
    if (generation < 1)
        return -EINVAL;
    struct out o = {0};
    char head[96];
    snprintf(head, sizeof(head), "{\"generation\":%lld,\"round\":%lld,\"env\":{",
             (long long)generation, (long long)round);
    put(&o, head, strlen(head));
    for (size_t i = 0; env && env[i]; i++) {
        const char *eq = strchr(env[i], '=');
        if (!eq || eq == env[i]) {
            free(o.buf);
            return -EINVAL;
        }
        if (i)
            put(&o, ",", 1);
        put_string(&o, env[i], (size_t)(eq - env[i]));
        put(&o, ":", 1);
        put_string(&o, eq + 1, strlen(eq + 1));
        if (o.len > WARM_ASSIGN_MAX)
            break;
    }
    put(&o, "}}\n", 3);
    if (o.oom) {
        free(o.buf);
        return -ENOMEM;
    }
    if (o.len > WARM_ASSIGN_MAX) {
        free(o.buf);
        return -E2BIG;
    }
    *ret = o.buf;
    *ret_len = o.len;
    return 0;
}
