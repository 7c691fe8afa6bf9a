// SPDX-License-Identifier: Apache-2.0
/* hostsource: parsers for --hosts, hostfiles and discovery-script output (see hostsource.h). */
#include "hostsource.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ITEM_MAX 512 /* longest entry/line we quote or parse (a name is at most 255) */

/* Where an item came from, for messages. */
struct where {
    const char *origin; /* NULL, a file name, or an option name */
    enum hosts_format fmt;
    int line;
};

/* Printable, bounded copy of an item for quoting in a message. */
static void quote(const char *s, size_t len, char *buf, size_t size)
{
    size_t o = 0, i = 0;
    for (; i < len && o + 8 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (isprint(c))
            buf[o++] = (char)c;
        else
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
    }
    if (i < len) /* cut: say so */
        o += (size_t)snprintf(buf + o, size - o, "...");
    buf[o] = '\0';
}

static int fail(struct ea_error *err, const struct where *w, const char *item, size_t len,
                const char *why)
{
    char q[96];
    quote(item, len, q, sizeof(q));
    if (w->fmt == HOSTS_LIST)
        return ea_errorf(err, -EINVAL, "%s%sentry %d '%s': %s", w->origin ? w->origin : "",
                         w->origin ? ": " : "", w->line, q, why);
    if (w->origin)
        return ea_errorf(err, -EINVAL, "%s:%d: '%s': %s", w->origin, w->line, q, why);
    return ea_errorf(err, -EINVAL, "line %d: '%s': %s", w->line, q, why);
}

static bool name_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '.' || c == '_';
}

/* Slots text (s, len) into 1..HOSTS_SLOTS_MAX; NULL reason on success. */
static const char *parse_slots(const char *s, size_t len, int *ret)
{
    if (len == 0)
        return "slots missing after ':' or '='";
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i]))
            return "slots must be a whole number";
        v = v * 10 + (s[i] - '0');
        if (v > HOSTS_SLOTS_MAX)
            return "slots must be from 1 to 4096";
    }
    if (v < 1)
        return "slots must be from 1 to 4096";
    *ret = (int)v;
    return NULL;
}

/*
 * "host" or "host:N" or "[v6]" or "[v6]:N" (no blanks) into e. NULL reason on success.
 */
static const char *parse_host_token(const char *s, size_t len, struct host_entry *e)
{
    const char *name = s, *rest = NULL;
    size_t nlen;
    if (len > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (!close)
            return "'[' without ']'";
        name = s + 1;
        nlen = (size_t)(close - name);
        if (nlen == 0)
            return "empty address in brackets";
        bool colon = false;
        for (size_t i = 0; i < nlen; i++) {
            char c = name[i];
            if (c == '%') { /* zone: an interface name follows */
                if (i == 0 || i + 1 == nlen)
                    return "bad zone in IPv6 address";
                for (size_t j = i + 1; j < nlen; j++)
                    if (!name_char(name[j]))
                        return "bad zone in IPv6 address";
                break;
            }
            if (!isxdigit((unsigned char)c) && c != ':' && c != '.')
                return "not an IPv6 address in brackets";
            colon |= c == ':';
        }
        if (!colon)
            return "not an IPv6 address in brackets";
        size_t after = len - (size_t)(close + 1 - s);
        if (after > 0) {
            if (close[1] != ':')
                return "expected ':SLOTS' after ']'";
            rest = close + 2;
        }
    } else {
        const char *colon = memchr(s, ':', len);
        nlen = colon ? (size_t)(colon - s) : len;
        if (colon) {
            rest = colon + 1;
            if (memchr(rest, ':', len - nlen - 1))
                return "more than one ':' (write IPv6 addresses in brackets: [::1]:4)";
        }
        if (nlen == 0)
            return "empty host name";
        if (s[0] == '-' || s[0] == '.')
            return "a host name cannot start with '-' or '.'";
        for (size_t i = 0; i < nlen; i++)
            if (!name_char(s[i]))
                return "a host name has only letters, digits, '-', '.' and '_'";
    }
    if (nlen > HOSTS_NAME_MAX)
        return "host name longer than 255 characters";
    e->slots = 0;
    if (rest) {
        const char *why = parse_slots(rest, len - (size_t)(rest - s), &e->slots);
        if (why)
            return why;
    }
    memcpy(e->name, name, nlen);
    e->name[nlen] = '\0';
    return NULL;
}

/* One file/script line (comment already removed, trimmed, non-empty). */
static const char *parse_line(const char *s, size_t len, struct host_entry *e)
{
    size_t tok = 0;
    while (tok < len && !isspace((unsigned char)s[tok]))
        tok++;
    const char *why = parse_host_token(s, tok, e);
    if (why || tok == len)
        return why;
    if (e->slots)
        return "give the slots once: 'host:N' or 'host slots=N'";
    const char *p = s + tok;
    while (isspace((unsigned char)*p))
        p++;
    size_t left = len - (size_t)(p - s);
    if (left < 6 || memcmp(p, "slots=", 6) != 0)
        return "expected 'slots=N' after the host name";
    return parse_slots(p + 6, left - 6, &e->slots);
}

static int add(struct host_list *l, size_t *cap, const struct host_entry *e, const struct where *w,
               const char *item, size_t len, struct ea_error *err)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].name, e->name) == 0) {
            char why[64];
            snprintf(why, sizeof(why), "host listed twice (first at %s %d)",
                     w->fmt == HOSTS_LIST ? "entry" : "line", l->v[i].line);
            return fail(err, w, item, len, why);
        }
    if (l->n >= HOSTS_MAX)
        return ea_errorf(err, -E2BIG, "%s%smore than %d hosts", w->origin ? w->origin : "",
                         w->origin ? ": " : "", HOSTS_MAX);
    if (l->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        struct host_entry *v = realloc(l->v, nc * sizeof(*v));
        if (!v)
            return ea_errorf(err, -ENOMEM, "out of memory");
        l->v = v;
        *cap = nc;
    }
    l->v[l->n++] = *e;
    return 0;
}

static void trim(const char **s, size_t *len)
{
    while (*len && isspace((unsigned char)**s))
        (*s)++, (*len)--;
    while (*len && isspace((unsigned char)(*s)[*len - 1]))
        (*len)--;
}

int hosts_parse_named(const char *origin, const char *text, size_t len, enum hosts_format fmt,
                      struct host_list *ret, struct ea_error *err)
{
    struct where w = {.origin = origin, .fmt = fmt};
    if (len > HOSTS_TEXT_MAX)
        return ea_errorf(err, -E2BIG, "%s%smore than %d bytes", origin ? origin : "",
                         origin ? ": " : "", HOSTS_TEXT_MAX);
    if (!text && len)
        return ea_errorf(err, -EINVAL, "no text");
    struct host_list l = {0};
    size_t cap = 0;
    char sep = fmt == HOSTS_LIST ? ',' : '\n';
    size_t pos = 0;
    int r = 0;
    while (pos <= len && r == 0) {
        const char *end = len > pos ? memchr(text + pos, sep, len - pos) : NULL;
        size_t ilen = end ? (size_t)(end - (text + pos)) : len - pos;
        const char *item = text + pos;
        pos += ilen + 1;
        w.line++;
        if (!end && ilen == 0 && w.line > 1 && fmt != HOSTS_LIST)
            break; /* text ending with a newline */
        if (memchr(item, '\0', ilen)) {
            r = fail(err, &w, item, ilen, "NUL byte in the text");
            break;
        }
        if (fmt != HOSTS_LIST) {
            const char *hash = memchr(item, '#', ilen);
            if (hash)
                ilen = (size_t)(hash - item);
        }
        trim(&item, &ilen);
        if (ilen == 0) {
            if (fmt == HOSTS_LIST)
                r = fail(err, &w, item, ilen, "empty entry");
            continue;
        }
        if (ilen > ITEM_MAX) {
            r = fail(err, &w, item, ilen, "too long");
            break;
        }
        struct host_entry e = {.line = w.line};
        const char *why =
            fmt == HOSTS_LIST ? parse_host_token(item, ilen, &e) : parse_line(item, ilen, &e);
        if (why)
            r = fail(err, &w, item, ilen, why);
        else
            r = add(&l, &cap, &e, &w, item, ilen, err);
    }
    if (r == 0 && l.n == 0)
        r = ea_errorf(err, -EINVAL, "%s%sno hosts", origin ? origin : "", origin ? ": " : "");
    if (r < 0) {
        hosts_list_free(&l);
        return r;
    }
    *ret = l;
    return 0;
}

int hosts_parse(const char *text, size_t len, enum hosts_format fmt, struct host_list *ret,
                struct ea_error *err)
{
    return hosts_parse_named(NULL, text, len, fmt, ret, err);
}

int hosts_parse_file(const char *path, struct host_list *ret, struct ea_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ea_errorf(err, -errno, "cannot read hostfile '%s': %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    int r = 0;
    for (;;) {
        if (!buf) {
            r = ea_errorf(err, -ENOMEM, "out of memory");
            break;
        }
        if (len == cap) {
            if (cap > HOSTS_TEXT_MAX) {
                r = ea_errorf(err, -E2BIG, "hostfile '%s' is larger than %d bytes", path,
                              HOSTS_TEXT_MAX);
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                r = ea_errorf(err, -ENOMEM, "out of memory");
                break;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r = ea_errorf(err, -errno, "cannot read hostfile '%s': %s", path, strerror(errno));
            break;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (r == 0)
        r = hosts_parse_named(path, buf, len, HOSTS_FILE, ret, err);
    free(buf);
    return r;
}

void hosts_list_free(struct host_list *l)
{
    if (!l)
        return;
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

int hosts_find(const struct host_list *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].name, name) == 0)
            return (int)i;
    return -1;
}

void hosts_node_id(const char *name, char *buf, size_t size)
{
    size_t n = strlen(name);
    bool clean = n > 0 && n <= 80;
    for (size_t i = 0; i < n && clean; i++)
        clean =
            isalnum((unsigned char)name[i]) || name[i] == '-' || name[i] == '_' || name[i] == '.';
    if (clean) {
        snprintf(buf, size, "%s", name);
        return;
    }
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)name[i]) * 16777619u;
    char cut[81];
    size_t m = n > 80 ? 80 : n;
    for (size_t i = 0; i < m; i++)
        cut[i] =
            isalnum((unsigned char)name[i]) || name[i] == '-' || name[i] == '.' ? name[i] : '_';
    cut[m] = '\0';
    snprintf(buf, size, "%s-%08x", cut, h);
}
