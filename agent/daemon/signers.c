// SPDX-License-Identifier: Apache-2.0
/* signers: the allowed_signers file (which SSH keys may sign a run spec, for what, until when). */
#include "signers.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FIELD_MAX 4096

void signers_free(struct signers *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i].namespaces);
    free(s->v);
    free(s);
}

/* ---- OpenSSH patterns ------------------------------------------------------------------------ */

/* `*` and `?` wildcards, iteratively: on a mismatch only the last `*` is retried one character
 * further, so the time is O(plen * strlen(s)) whatever the pattern (a recursive matcher was
 * exponential in the number of `*`: fuzz_sshsig found a pattern that took seconds). */
static bool glob(const char *p, size_t plen, const char *s)
{
    size_t pi = 0, star = (size_t)-1;
    const char *retry = NULL;
    while (*s) {
        if (pi < plen && (p[pi] == '?' || (p[pi] != '*' && p[pi] == *s))) {
            pi++, s++;
        } else if (pi < plen && p[pi] == '*') {
            star = pi++;
            retry = s;
        } else if (star != (size_t)-1) {
            pi = star + 1;
            s = ++retry;
        } else {
            return false;
        }
    }
    while (pi < plen && p[pi] == '*')
        pi++;
    return pi == plen;
}

bool signers_pattern_match(const char *list, const char *s)
{
    bool yes = false;
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        bool neg = *p == '!';
        if (glob(p + neg, n - neg, s)) {
            if (neg)
                return false; /* a negated match wins over any other */
            yes = true;
        }
        p += n + (p[n] == ',');
    }
    return yes;
}

/* ---- fields and options ---------------------------------------------------------------------- */

/* The next blank-separated field of [*p, end) into buf (quotes kept: "..." may hold blanks).
 * 0 when there is none, 1 when found, -1 when too long or a quote is not closed. */
static int next_field(const char **p, const char *end, char *buf, size_t size)
{
    const char *c = *p;
    while (c < end && (*c == ' ' || *c == '\t'))
        c++;
    if (c == end)
        return 0;
    size_t n = 0;
    bool quoted = false;
    for (; c < end && (quoted || (*c != ' ' && *c != '\t')); c++) {
        if (*c == '"')
            quoted = !quoted;
        if (n + 1 >= size)
            return -1;
        buf[n++] = *c;
    }
    buf[n] = '\0';
    *p = c;
    return quoted ? -1 : 1;
}

/* Whether field `f` is the options field rather than a key type (ssh-ed25519, ssh-rsa,
 * ecdsa-sha2-nistp256, sk-ssh-ed25519@openssh.com, ...). */
static bool is_options(const char *f)
{
    static const char *const types[] = {"ssh-", "ecdsa-", "sk-", "rsa-"};
    for (size_t i = 0; i < sizeof(types) / sizeof(*types); i++)
        if (strncmp(f, types[i], strlen(types[i])) == 0 && !strchr(f, '='))
            return false;
    return true;
}

/* A time of valid-after/valid-before: YYYYMMDD[Z] or YYYYMMDDHHMM[SS][Z], local time unless Z. */
static int parse_time(const char *v, int64_t *ret)
{
    size_t n = strlen(v);
    bool utc = n && (v[n - 1] == 'Z' || v[n - 1] == 'z');
    n -= utc;
    if (n != 8 && n != 12 && n != 14)
        return -1;
    int d[14] = {0};
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)v[i]))
            return -1;
        d[i] = v[i] - '0';
    }
    struct tm tm = {.tm_year = d[0] * 1000 + d[1] * 100 + d[2] * 10 + d[3] - 1900,
                    .tm_mon = d[4] * 10 + d[5] - 1, .tm_mday = d[6] * 10 + d[7],
                    .tm_hour = d[8] * 10 + d[9], .tm_min = d[10] * 10 + d[11],
                    .tm_sec = d[12] * 10 + d[13], .tm_isdst = -1};
    if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
        tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 59)
        return -1;
    time_t t = utc ? timegm(&tm) : mktime(&tm);
    if (t == (time_t)-1)
        return -1;
    *ret = (int64_t)t;
    return 0;
}

/* Take the value of an option: "..." (quotes removed) or a bare word. */
static void unquote(char *v)
{
    size_t n = strlen(v);
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        memmove(v, v + 1, n - 2);
        v[n - 2] = '\0';
    }
}

static int parse_options(char *opts, struct signer *s, const char *where, struct ea_error *err)
{
    char *p = opts;
    while (*p) {
        char *o = p;
        bool quoted = false;
        for (; *p && (quoted || *p != ','); p++)
            quoted ^= *p == '"';
        if (*p)
            *p++ = '\0';
        char *eq = strchr(o, '=');
        if (eq)
            *eq++ = '\0';
        if (strcasecmp(o, "cert-authority") == 0)
            return ea_errorf(err, -EINVAL,
                             "%s: cert-authority (SSH certificates) is not supported: list each "
                             "signer's own key",
                             where);
        bool ns = strcasecmp(o, "namespaces") == 0, after = strcasecmp(o, "valid-after") == 0,
             before = strcasecmp(o, "valid-before") == 0;
        if (!ns && !after && !before)
            return ea_errorf(err, -EINVAL,
                             "%s: unknown option '%s' (namespaces=, valid-after=, valid-before= "
                             "are known)",
                             where, o);
        if (!eq || !*eq)
            return ea_errorf(err, -EINVAL, "%s: option '%s' needs a value", where, o);
        unquote(eq);
        if (ns) {
            free(s->namespaces);
            if (!(s->namespaces = strdup(eq)))
                return ea_errorf(err, -ENOMEM, "out of memory");
        } else if (parse_time(eq, after ? &s->valid_after : &s->valid_before) < 0) {
            return ea_errorf(err, -EINVAL,
                             "%s: %s='%s' is not a time (YYYYMMDD[Z] or YYYYMMDDHHMM[SS][Z])",
                             where, o, eq);
        }
    }
    return 0;
}

/* One line (without its newline) into *s: 1 a signer, 0 nothing (blank, comment, skipped). */
static int parse_line(struct signers *all, const char *line, size_t len, int lineno,
                      struct signer *s, struct ea_error *err)
{
    const char *p = line, *end = line + len;
    char where[300];
    snprintf(where, sizeof(where), "%s:%d", all->name, lineno);
    char *f = malloc(FIELD_MAX), *type = malloc(FIELD_MAX), *key = malloc(FIELD_MAX);
    int r = -ENOMEM;
    *s = (struct signer){.valid_after = INT64_MIN, .valid_before = INT64_MAX, .line = lineno};
    if (!f || !type || !key) {
        ea_errorf(err, r, "out of memory");
        goto out;
    }
    r = next_field(&p, end, f, FIELD_MAX);
    if (r == 0 || (r > 0 && f[0] == '#')) {
        r = 0; /* blank or a comment */
        goto out;
    }
    if (r > 0) {
        unquote(f);
        snprintf(s->principals, sizeof(s->principals), "%s", f);
        r = next_field(&p, end, type, FIELD_MAX);
    }
    if (r > 0 && is_options(type)) {
        if ((r = parse_options(type, s, where, err)) < 0)
            goto out;
        r = next_field(&p, end, type, FIELD_MAX);
    }
    if (r > 0)
        r = next_field(&p, end, key, FIELD_MAX);
    if (r < 0) {
        r = ea_errorf(err, -EINVAL, "%s: a field is too long or a quote is not closed", where);
        goto out;
    }
    if (r == 0) {
        r = ea_errorf(err, -EINVAL,
                      "%s: expected 'principals [options] keytype base64-key [comment]'", where);
        goto out;
    }
    if (strcmp(type, "ssh-ed25519") != 0) { /* a key we do not verify: it can never match */
        if (!all->n_skipped++)
            snprintf(all->skipped, sizeof(all->skipped), "%s: key type '%.40s'", where, type);
        r = 0;
        goto out;
    }
    struct ea_error kerr = {0};
    if ((r = sshsig_key_from_base64(key, strlen(key), s->key, &kerr)) < 0) {
        r = ea_errorf(err, r == -ENOMEM ? r : -EINVAL, "%s: %s", where, kerr.msg);
        goto out;
    }
    r = 1;
out:
    if (r <= 0) {
        free(s->namespaces);
        s->namespaces = NULL;
    }
    free(f);
    free(type);
    free(key);
    return r;
}

int signers_parse(const char *text, size_t len, const char *name, struct signers **ret,
                  struct ea_error *err)
{
    if (len > SIGNERS_BYTES_MAX)
        return ea_errorf(err, -EINVAL, "%s: %zu bytes (at most %u)", name, len,
                         SIGNERS_BYTES_MAX);
    struct signers *all = calloc(1, sizeof(*all));
    if (!all)
        return ea_errorf(err, -ENOMEM, "out of memory");
    snprintf(all->name, sizeof(all->name), "%s", name);
    int r = 0, lineno = 0;
    size_t cap = 0;
    for (const char *p = text, *end = text + len; p < end && r >= 0;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        lineno++;
        if (memchr(p, '\0', n)) {
            r = ea_errorf(err, -EINVAL, "%s:%d: a NUL byte", name, lineno);
            break;
        }
        struct signer s;
        r = parse_line(all, p, n && p[n - 1] == '\r' ? n - 1 : n, lineno, &s, err);
        p += n + (nl != NULL);
        if (r <= 0)
            continue;
        if (all->n == SIGNERS_MAX) {
            free(s.namespaces);
            r = ea_errorf(err, -EINVAL, "%s: more than %d keys", name, SIGNERS_MAX);
            break;
        }
        if (all->n == cap) {
            cap = cap ? cap * 2 : 8;
            struct signer *v = realloc(all->v, cap * sizeof(*v));
            if (!v) {
                free(s.namespaces);
                r = ea_errorf(err, -ENOMEM, "out of memory");
                break;
            }
            all->v = v;
        }
        all->v[all->n++] = s;
    }
    if (r < 0) {
        signers_free(all);
        return r;
    }
    *ret = all;
    return 0;
}

int signers_load(const char *path, struct signers **ret, struct ea_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ea_errorf(err, -errno, "%s: %s", path, strerror(errno));
    struct stat st;
    char *buf = NULL;
    int r = 0;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        r = ea_errorf(err, -EINVAL, "%s: not a regular file", path);
    } else if ((size_t)st.st_size > SIGNERS_BYTES_MAX) {
        r = ea_errorf(err, -EINVAL, "%s: %lld bytes (at most %u)", path,
                      (long long)st.st_size, SIGNERS_BYTES_MAX);
    } else if (!(buf = malloc((size_t)st.st_size + 1))) {
        r = ea_errorf(err, -ENOMEM, "out of memory");
    }
    size_t n = 0;
    while (r == 0 && n < (size_t)st.st_size) {
        ssize_t k = read(fd, buf + n, (size_t)st.st_size - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            r = ea_errorf(err, k < 0 ? -errno : -EIO, "%s: %s", path,
                          k < 0 ? strerror(errno) : "shorter than its size");
            break;
        }
        n += (size_t)k;
    }
    close(fd);
    if (r == 0)
        r = signers_parse(buf, n, path, ret, err);
    free(buf);
    return r;
}

static void iso(int64_t t, char *buf, size_t size)
{
    time_t tt = (time_t)t;
    struct tm tm;
    if (!gmtime_r(&tt, &tm) || !strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, size, "%lld", (long long)t);
}

int signers_match(const struct signers *s, const uint8_t key[SSHSIG_ED25519_KEY], const char *ns,
                  int64_t now_s, const struct signer **ret, struct ea_error *err)
{
    char fp[SSHSIG_FP_MAX], why[300] = "", at[32];
    const struct signer *refused = NULL; /* the first line of this key that refuses it */
    sshsig_fingerprint(key, fp, sizeof(fp));
    for (size_t i = 0; i < s->n; i++) {
        const struct signer *g = &s->v[i];
        if (memcmp(g->key, key, SSHSIG_ED25519_KEY) != 0)
            continue;
        bool first = !refused;
        refused = refused ? refused : g;
        if (g->namespaces && !signers_pattern_match(g->namespaces, ns)) {
            if (first)
                snprintf(why, sizeof(why), "may sign namespaces \"%s\" only, not '%s'",
                         g->namespaces, ns);
        } else if (now_s < g->valid_after) {
            iso(g->valid_after, at, sizeof(at));
            if (first)
                snprintf(why, sizeof(why), "is valid only from %s", at);
        } else if (now_s > g->valid_before) {
            iso(g->valid_before, at, sizeof(at));
            if (first)
                snprintf(why, sizeof(why), "was valid until %s", at);
        } else {
            *ret = g;
            return 0;
        }
    }
    if (refused)
        return ea_errorf(err, -EPERM, "key %s of '%s' %s (%s:%d)", fp, refused->principals, why,
                         s->name, refused->line);
    return ea_errorf(err, -EPERM, "key %s is not in the allowed signers (%s)", fp, s->name);
}
