// SPDX-License-Identifier: Apache-2.0
/* ea_escape: control characters in foreign strings made visible, and a printf that applies it to
 * every string argument. */
#include "ea_escape.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

size_t ea_utf8_len(const unsigned char *p, size_t left)
{
    size_t n = p[0] < 0x80             ? 1
               : (p[0] & 0xE0) == 0xC0 ? 2
               : (p[0] & 0xF0) == 0xE0 ? 3
               : (p[0] & 0xF8) == 0xF0 ? 4
                                       : 0;
    if (n == 0 || n > left || (n == 2 && p[0] < 0xC2) || p[0] > 0xF4)
        return 0;
    /* no overlong forms, UTF-16 surrogates or code points past U+10FFFF (jansson refuses them) */
    if ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] > 0x9F) ||
        (p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] > 0x8F))
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    return n;
}

/* Append "\xNN" for byte c to esc at *k. */
static void hex_escape(char *esc, size_t *k, unsigned char c)
{
    static const char hex[] = "0123456789abcdef";
    esc[(*k)++] = '\\';
    esc[(*k)++] = 'x';
    esc[(*k)++] = hex[c >> 4];
    esc[(*k)++] = hex[c & 15];
}

/* ea_escape of the `left` bytes at src (a NUL among them ends the string). */
static size_t escape_n(char *dst, size_t size, const char *src, size_t left, unsigned flags)
{
    size_t n = 0;
    if (!size)
        return 0;
    const unsigned char *p = (const unsigned char *)src;
    while (left && *p) {
        char esc[8];
        size_t k = 0, used = 1, u = 0;
        unsigned char c = *p;
        if (c == '\t' && (flags & EA_ESCAPE_KEEP_TAB)) {
            esc[k++] = '\t';
        } else if (c == '\n' || c == '\r' || c == '\t') {
            esc[k++] = '\\';
            esc[k++] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        } else if (c < 0x20 || c == 0x7f) {
            hex_escape(esc, &k, c); /* C0 controls (ESC, BEL...), DEL */
        } else if (c < 0x80) {
            esc[k++] = (char)c;
        } else if ((flags & EA_ESCAPE_ASCII) || (u = ea_utf8_len(p, left)) == 0) {
            hex_escape(esc, &k, c); /* not UTF-8: a raw C1 byte is a control on 8-bit terminals */
        } else if (u == 2 && c == 0xc2 && p[1] <= 0x9f) {
            /* a C1 control in UTF-8 (U+0080-U+009F; U+009B is a CSI on some terminals) */
            hex_escape(esc, &k, p[0]);
            hex_escape(esc, &k, p[1]);
            used = 2;
        } else {
            memcpy(esc, p, u);
            k = used = u;
        }
        if (n + k >= size)
            break; /* cut before an escape or a character that does not fit */
        memcpy(dst + n, esc, k);
        n += k;
        p += used;
        left -= used;
    }
    dst[n] = '\0';
    return n;
}

size_t ea_escape(char *dst, size_t size, const char *src, unsigned flags)
{
    return escape_n(dst, size, src, strlen(src), flags);
}

/* One conversion of a format: its pieces, with `*` width and precision taken from the list. */
struct conv {
    char flags[8];
    int width;     /* -1: none */
    int precision; /* -1: none */
    char length[3];
    char type;
};

/* Parse the conversion after '%' at *pp (advanced past it). False when it is not one we print. */
static bool parse_conv(const char **pp, struct conv *c, va_list *ap)
{
    const char *p = *pp;
    size_t nf = 0;
    memset(c, 0, sizeof(*c));
    c->width = c->precision = -1;
    for (; *p && strchr("-+ #0", *p); p++)
        if (nf < sizeof(c->flags) - 2)
            c->flags[nf++] = *p;
    if (*p == '*') {
        c->width = va_arg(*ap, int);
        if (c->width < 0) { /* a negative `*` width is a '-' flag and its magnitude */
            c->flags[nf++] = '-';
            c->width = c->width == INT_MIN ? INT_MAX : -c->width;
        }
        p++;
    } else if (*p >= '1' && *p <= '9') {
        char *end;
        c->width = (int)strtol(p, &end, 10);
        p = end;
    }
    if (*p == '.') {
        p++;
        if (*p == '*') {
            c->precision = va_arg(*ap, int); /* negative: as if none */
            p++;
        } else {
            char *end;
            c->precision = (int)strtol(p, &end, 10);
            p = end;
        }
        if (c->precision < 0)
            c->precision = -1;
    }
    size_t nl = 0;
    while (*p && strchr("hljztL", *p) && nl < 2)
        c->length[nl++] = *p++;
    c->type = *p;
    if (!*p || !strchr("diuoxXcspeEfFgGaA", *p) || (strchr("cs", *p) && nl))
        return false; /* nor wide characters or strings (%lc, %ls) */
    *pp = p + 1;
    return true;
}

/* A foreign string, escaped, then padded as the conversion asks. */
static int put_string(FILE *out, const struct conv *c, const char *s, size_t len)
{
    char small[256];
    size_t need = EA_ESCAPED_SIZE(len);
    char *esc = need <= sizeof(small) ? small : malloc(need);
    if (!esc)
        return fputs("?", out) == EOF ? -EIO : 0;
    size_t n = escape_n(esc, need, s, len, 0);
    int pad = c->width > (int)n ? c->width - (int)n : 0;
    bool left = strchr(c->flags, '-') != NULL;
    int r = 0;
    if (!left && pad && fprintf(out, "%*s", pad, "") < 0)
        r = -EIO;
    if (fwrite(esc, 1, n, out) != n)
        r = -EIO;
    if (left && pad && fprintf(out, "%*s", pad, "") < 0)
        r = -EIO;
    if (esc != small)
        free(esc);
    return r;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral" /* the spec is rebuilt from checked parts */

/* A number, printed as the conversion asks (its length read from the list as C passes it). */
static int put_number(FILE *out, const struct conv *c, va_list *ap)
{
    char spec[40], wid[16] = "", pre[16] = "";
    const char *len = c->length;
    if (c->width >= 0)
        snprintf(wid, sizeof(wid), "%d", c->width);
    if (c->precision >= 0)
        snprintf(pre, sizeof(pre), ".%d", c->precision);
    int n;
    if (strchr("di", c->type)) { /* every signed length as intmax_t, with its own truncation */
        intmax_t v = strcmp(len, "hh") == 0   ? (signed char)va_arg(*ap, int)
                     : strcmp(len, "h") == 0  ? (short)va_arg(*ap, int)
                     : strcmp(len, "l") == 0  ? va_arg(*ap, long)
                     : strcmp(len, "ll") == 0 ? va_arg(*ap, long long)
                     : strcmp(len, "j") == 0  ? va_arg(*ap, intmax_t)
                     : strcmp(len, "z") == 0  ? va_arg(*ap, ssize_t)
                     : strcmp(len, "t") == 0  ? va_arg(*ap, ptrdiff_t)
                                              : va_arg(*ap, int);
        snprintf(spec, sizeof(spec), "%%%s%s%sj%c", c->flags, wid, pre, c->type);
        n = fprintf(out, spec, v);
    } else if (strchr("uoxX", c->type)) {
        uintmax_t v = strcmp(len, "hh") == 0   ? (unsigned char)va_arg(*ap, unsigned)
                      : strcmp(len, "h") == 0  ? (unsigned short)va_arg(*ap, unsigned)
                      : strcmp(len, "l") == 0  ? va_arg(*ap, unsigned long)
                      : strcmp(len, "ll") == 0 ? va_arg(*ap, unsigned long long)
                      : strcmp(len, "j") == 0  ? va_arg(*ap, uintmax_t)
                      : strcmp(len, "z") == 0  ? va_arg(*ap, size_t)
                      : strcmp(len, "t") == 0  ? (uintmax_t)va_arg(*ap, ptrdiff_t)
                                               : va_arg(*ap, unsigned);
        snprintf(spec, sizeof(spec), "%%%s%s%sj%c", c->flags, wid, pre, c->type);
        n = fprintf(out, spec, v);
    } else if (c->type == 'p') {
        snprintf(spec, sizeof(spec), "%%%s%s%sp", c->flags, wid, pre);
        n = fprintf(out, spec, va_arg(*ap, void *));
    } else if (strcmp(len, "L") == 0) {
        snprintf(spec, sizeof(spec), "%%%s%s%sL%c", c->flags, wid, pre, c->type);
        n = fprintf(out, spec, va_arg(*ap, long double));
    } else {
        snprintf(spec, sizeof(spec), "%%%s%s%s%c", c->flags, wid, pre, c->type);
        n = fprintf(out, spec, va_arg(*ap, double));
    }
    return n < 0 ? -EIO : 0;
}

#pragma GCC diagnostic pop

int ea_vfprintf(FILE *out, const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap); /* passed on by address: a va_list parameter may be an array */
    int r = 0;
    for (const char *p = fmt; *p;) {
        size_t lit = strcspn(p, "%");
        if (lit && fwrite(p, 1, lit, out) != lit)
            r = -EIO;
        p += lit;
        if (!*p)
            break;
        if (p[1] == '%') {
            if (fputc('%', out) == EOF)
                r = -EIO;
            p += 2;
            continue;
        }
        p++;
        struct conv c;
        if (!parse_conv(&p, &c, &aq)) {
            r = -EINVAL;
            break;
        }
        int k;
        if (c.type == 's') {
            const char *s = va_arg(aq, const char *);
            if (!s)
                s = "(null)";
            size_t len = c.precision >= 0 ? strnlen(s, (size_t)c.precision) : strlen(s);
            k = put_string(out, &c, s, len);
        } else if (c.type == 'c') {
            char ch = (char)va_arg(aq, int);
            k = put_string(out, &c, &ch, ch ? 1 : 0);
        } else {
            k = put_number(out, &c, &aq);
        }
        if (k < 0)
            r = k;
    }
    va_end(aq);
    return r;
}

int ea_fprintf(FILE *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = ea_vfprintf(out, fmt, ap);
    va_end(ap);
    return r;
}
