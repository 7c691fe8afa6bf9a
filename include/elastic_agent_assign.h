// SPDX-License-Identifier: Apache-2.0
/*
 * elastic_agent_assign.h: a worker written in C (or anything that can call C) takes its rank from
 * elastic-agent's --warm-workers, as Python's elastic_agent.wait_for_assignment() does. Header
 * only, libc only; the protocol is docs/warm.md's:
 *
 *     // expensive set-up first: load libraries, build the model, read the checkpoint
 *     char err[256];
 *     if (ea_assign_wait(err, sizeof(err)) < 0) { fprintf(stderr, "%s\n", err); exit(1); }
 *     // now RANK, WORLD_SIZE, MASTER_ADDR, ... are in the environment, as in a cold start
 *
 * Without ELASTIC_ASSIGN_FD (a cold start, another launcher) it returns 0 at once and changes
 * nothing, so one program runs either way. Not thread-safe (setenv); call it before threads.
 *
 * In place (elastic-agent --in-place): ea_assign_wait_inplace() instead keeps the socket, and the
 * training loop calls ea_reassignment(0, ...) at each safe point: 1 when the next round's
 * assignment was taken (re-form the process group from the environment), 0 when none came. The
 * state of that (the socket, the last assignment's names) is this translation unit's: call
 * both from one .c file.
 */
#ifndef ELASTIC_AGENT_ASSIGN_H
#define ELASTIC_AGENT_ASSIGN_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EA_ASSIGN_LINE_MAX (1 << 20) /* the agent's assignment line, at most */

struct ea_assign__p {
    const char *s, *end;
};

static int ea_assign__fail(char *errbuf, size_t size, int e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int ea_assign__fail(char *errbuf, size_t size, int e, const char *fmt, ...)
{
    if (errbuf && size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errbuf, size, fmt, ap);
        va_end(ap);
    }
    errno = e;
    return -1;
}

static void ea_assign__ws(struct ea_assign__p *p)
{
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\r' || *p->s == '\n'))
        p->s++;
}

static int ea_assign__hex4(const char *s, unsigned *ret)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *ret = v;
    return 0;
}

/* A JSON string into a malloc'ed, NUL-terminated buffer (NULL when `out` is NULL: skipped). Bytes
 * that are not escapes pass as they are. -1 when malformed or it holds a NUL. */
static int ea_assign__string(struct ea_assign__p *p, char **out)
{
    if (p->s >= p->end || *p->s != '"')
        return -1;
    p->s++;
    size_t cap = (size_t)(p->end - p->s) + 1;
    char *buf = out ? (char *)malloc(cap) : NULL;
    size_t n = 0;
    if (out && !buf)
        return -1;
    while (p->s < p->end && *p->s != '"') {
        unsigned char c = (unsigned char)*p->s++;
        if (c < 0x20)
            goto bad;
        if (c != '\\') {
            if (buf)
                buf[n++] = (char)c;
            continue;
        }
        if (p->s >= p->end)
            goto bad;
        char e = *p->s++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char map[] = "\"\\/\b\f\n\r\t";
            if (buf)
                buf[n++] = map[simple - "\"\\/bfnrt"];
            continue;
        }
        unsigned u, lo;
        if (e != 'u' || p->end - p->s < 4 || ea_assign__hex4(p->s, &u) < 0)
            goto bad;
        p->s += 4;
        if (u >= 0xd800 && u < 0xdc00) { /* a surrogate pair */
            if (p->end - p->s < 6 || p->s[0] != '\\' || p->s[1] != 'u' ||
                ea_assign__hex4(p->s + 2, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
                goto bad;
            p->s += 6;
            u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
        } else if (u >= 0xdc00 && u < 0xe000) {
            goto bad;
        }
        if (u == 0)
            goto bad; /* no NUL in an environment */
        if (!buf)
            continue;
        if (u < 0x80) {
            buf[n++] = (char)u;
        } else if (u < 0x800) {
            buf[n++] = (char)(0xc0 | (u >> 6));
            buf[n++] = (char)(0x80 | (u & 0x3f));
        } else if (u < 0x10000) {
            buf[n++] = (char)(0xe0 | (u >> 12));
            buf[n++] = (char)(0x80 | ((u >> 6) & 0x3f));
            buf[n++] = (char)(0x80 | (u & 0x3f));
        } else {
            buf[n++] = (char)(0xf0 | (u >> 18));
            buf[n++] = (char)(0x80 | ((u >> 12) & 0x3f));
            buf[n++] = (char)(0x80 | ((u >> 6) & 0x3f));
            buf[n++] = (char)(0x80 | (u & 0x3f));
        }
    }
    if (p->s >= p->end)
        goto bad;
    p->s++; /* the closing quote */
    if (buf) {
        buf[n] = '\0';
        *out = buf;
    }
    return 0;
bad:
    free(buf);
    return -1;
}

static int ea_assign__int(struct ea_assign__p *p, long long *ret)
{
    char *e;
    errno = 0;
    long long v = strtoll(p->s, &e, 10);
    if (e == p->s || errno || e > p->end)
        return -1;
    p->s = e;
    *ret = v;
    return 0;
}

/* Skip any JSON value (members the agent adds in later versions). */
static int ea_assign__skip(struct ea_assign__p *p, int depth)
{
    ea_assign__ws(p);
    if (p->s >= p->end || depth > 32)
        return -1;
    char c = *p->s;
    if (c == '"')
        return ea_assign__string(p, NULL);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        p->s++;
        ea_assign__ws(p);
        if (p->s < p->end && *p->s == close) {
            p->s++;
            return 0;
        }
        for (;;) {
            if (c == '{') {
                ea_assign__ws(p);
                if (ea_assign__string(p, NULL) < 0)
                    return -1;
                ea_assign__ws(p);
                if (p->s >= p->end || *p->s++ != ':')
                    return -1;
            }
            if (ea_assign__skip(p, depth + 1) < 0)
                return -1;
            ea_assign__ws(p);
            if (p->s >= p->end)
                return -1;
            if (*p->s == ',') {
                p->s++;
                continue;
            }
            if (*p->s++ != close)
                return -1;
            return 0;
        }
    }
    const char *start = p->s; /* number, true, false, null */
    while (p->s < p->end && strchr("+-.0123456789eEtrufalsn", *p->s) && *p->s)
        p->s++;
    return p->s > start ? 0 : -1;
}

struct ea_assign__env {
    char **names, **values;
    size_t n;
};

static void ea_assign__env_free(struct ea_assign__env *e)
{
    for (size_t i = 0; i < e->n; i++) {
        free(e->names[i]);
        free(e->values[i]);
    }
    free(e->names);
    free(e->values);
}

/* The "env" object: {"NAME":"VALUE",...}. */
static int ea_assign__env_parse(struct ea_assign__p *p, struct ea_assign__env *e)
{
    ea_assign__ws(p);
    if (p->s >= p->end || *p->s++ != '{')
        return -1;
    ea_assign__ws(p);
    if (p->s < p->end && *p->s == '}') {
        p->s++;
        return 0;
    }
    for (;;) {
        char *name = NULL, *value = NULL;
        ea_assign__ws(p);
        if (ea_assign__string(p, &name) < 0)
            return -1;
        ea_assign__ws(p);
        if (p->s >= p->end || *p->s++ != ':' || (ea_assign__ws(p), 0) ||
            ea_assign__string(p, &value) < 0 || !name[0] || strchr(name, '=')) {
            free(name);
            free(value);
            return -1;
        }
        char **nn = (char **)realloc(e->names, (e->n + 1) * sizeof(*nn));
        if (nn)
            e->names = nn;
        char **vv = nn ? (char **)realloc(e->values, (e->n + 1) * sizeof(*vv)) : NULL;
        if (vv)
            e->values = vv;
        if (!nn || !vv) {
            free(name);
            free(value);
            return -1;
        }
        e->names[e->n] = name;
        e->values[e->n++] = value;
        ea_assign__ws(p);
        if (p->s >= p->end)
            return -1;
        if (*p->s == ',') {
            p->s++;
            continue;
        }
        return *p->s++ == '}' ? 0 : -1;
    }
}

/* --in-place: the socket kept after the first assignment, bytes read past the last line, and
 * the names of the last assignment's variables. One per process (this translation unit's). */
static int ea_assign__ipfd = -1;
static char *ea_assign__rest;
static size_t ea_assign__rest_len;
static struct ea_assign__env ea_assign__last;

/* Read one line from fd into a malloc'ed buffer (starting with `pre`, pre_len bytes): *ret_buf,
 * the line's end *ret_nl ('\n'), *ret_len bytes read in all. 0, or -1 with errno (EPIPE closed,
 * EBADMSG past EA_ASSIGN_LINE_MAX, ENOMEM). */
static inline int ea_assign__line(int fd, const char *pre, size_t pre_len, char **ret_buf, char **ret_nl,
                           size_t *ret_len, char *errbuf, size_t errsize)
{
    size_t cap = 4096, have = 0;
    while (cap < pre_len + 1)
        cap *= 2;
    char *buf = (char *)malloc(cap);
    char *nl = NULL;
    if (!buf)
        return ea_assign__fail(errbuf, errsize, ENOMEM, "out of memory");
    if (pre_len) {
        memcpy(buf, pre, pre_len);
        have = pre_len;
        nl = (char *)memchr(buf, '\n', have);
    }
    while (!nl) {
        if (have + 1 >= cap) {
            char *b = cap < EA_ASSIGN_LINE_MAX ? (char *)realloc(buf, cap * 2) : NULL;
            if (!b) {
                free(buf);
                return ea_assign__fail(errbuf, errsize, EBADMSG,
                                       "the assignment is longer than %d bytes",
                                       EA_ASSIGN_LINE_MAX);
            }
            buf = b;
            cap *= 2;
        }
        ssize_t n = read(fd, buf + have, cap - have - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : 0;
            free(buf);
            return ea_assign__fail(errbuf, errsize, EPIPE,
                                   "the agent closed ELASTIC_ASSIGN_FD before the assignment%s%s",
                                   e ? ": " : "", e ? strerror(e) : "");
        }
        nl = (char *)memchr(buf + have, '\n', (size_t)n);
        have += (size_t)n;
    }
    *ret_buf = buf;
    *ret_nl = nl;
    *ret_len = have;
    return 0;
}

/* Parse the assignment line [s, nl), check its generation and setenv it; the names set go to
 * *ret_names (when not NULL; else freed). 0, or -1 with errno (EBADMSG, ESTALE). */
static inline int ea_assign__apply(const char *s, const char *nl, long fd,
                                   struct ea_assign__env *ret_names, long long *ret_gen,
                                   char *errbuf, size_t errsize)
{
    struct ea_assign__p p = {s, nl};
    struct ea_assign__env env = {0};
    long long gen = -1, round = -1;
    int bad = 0;
    ea_assign__ws(&p);
    if (p.s >= p.end || *p.s++ != '{')
        bad = 1;
    while (!bad) {
        char *key = NULL;
        ea_assign__ws(&p);
        if (ea_assign__string(&p, &key) < 0) {
            bad = 1;
            break;
        }
        ea_assign__ws(&p);
        if (p.s >= p.end || *p.s++ != ':')
            bad = 1;
        else if (strcmp(key, "generation") == 0)
            bad = (ea_assign__ws(&p), ea_assign__int(&p, &gen)) < 0;
        else if (strcmp(key, "round") == 0)
            bad = (ea_assign__ws(&p), ea_assign__int(&p, &round)) < 0;
        else if (strcmp(key, "env") == 0)
            bad = ea_assign__env_parse(&p, &env) < 0;
        else
            bad = ea_assign__skip(&p, 0) < 0;
        free(key);
        ea_assign__ws(&p);
        if (!bad && p.s >= p.end)
            bad = 1; /* no closing brace */
        if (bad)
            break;
        if (*p.s == ',') {
            p.s++;
            continue;
        }
        bad = *p.s++ != '}';
        break;
    }
    if (!bad) {
        ea_assign__ws(&p);
        bad = p.s != p.end || gen < 1 || !env.names;
    }
    if (bad) {
        ea_assign__env_free(&env);
        return ea_assign__fail(errbuf, errsize, EBADMSG,
                               "malformed assignment on ELASTIC_ASSIGN_FD %ld", fd);
    }
    /* the generation check: an assignment only ever moves a worker forward */
    const char *cur = getenv("ELASTIC_GENERATION");
    long long last = cur ? strtoll(cur, NULL, 10) : 0;
    if (gen <= last) {
        ea_assign__env_free(&env);
        return ea_assign__fail(errbuf, errsize, ESTALE,
                               "refusing an assignment of generation %lld: not newer than "
                               "generation %lld",
                               gen, last);
    }
    if (ret_names) /* a re-assignment: the last one's variables it lacks go */
        for (size_t i = 0; i < ea_assign__last.n; i++) {
            int keep = 0;
            for (size_t k = 0; k < env.n && !keep; k++)
                keep = strcmp(env.names[k], ea_assign__last.names[i]) == 0;
            if (!keep)
                unsetenv(ea_assign__last.names[i]);
        }
    for (size_t i = 0; i < env.n; i++)
        if (setenv(env.names[i], env.values[i], 1) < 0) {
            int e = errno;
            ea_assign__env_free(&env);
            return ea_assign__fail(errbuf, errsize, e, "setenv: %s", strerror(e));
        }
    (void)round;
    if (ret_gen)
        *ret_gen = gen;
    if (ret_names) {
        ea_assign__env_free(ret_names);
        *ret_names = env;
    } else {
        ea_assign__env_free(&env);
    }
    return 0;
}

static inline int ea_assign__write(int fd, const char *s, int len, char *errbuf, size_t errsize)
{
    for (int off = 0; off < len;) {
        ssize_t n = write(fd, s + off, (size_t)(len - off));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return ea_assign__fail(errbuf, errsize, EPIPE,
                                   "cannot write to ELASTIC_ASSIGN_FD %d: %s", fd,
                                   strerror(errno));
        off += (int)n;
    }
    return 0;
}

static inline int ea_assign__wait(int inplace, char *errbuf, size_t errsize)
{
    const char *v = getenv("ELASTIC_ASSIGN_FD");
    if (!v || !*v)
        return 0;
    char *end;
    long fd = strtol(v, &end, 10);
    if (*end || fd < 0 || fd > INT_MAX)
        return ea_assign__fail(errbuf, errsize, EINVAL, "ELASTIC_ASSIGN_FD='%s' is not an fd", v);
    char ready[80];
    int len = snprintf(ready, sizeof(ready), "{\"ready\":1,\"pid\":%d%s}\n", (int)getpid(),
                       inplace ? ",\"inplace\":1" : "");
    if (ea_assign__write((int)fd, ready, len, errbuf, errsize) < 0)
        return -1;
    char *buf = NULL, *nl = NULL;
    size_t have = 0;
    if (ea_assign__line((int)fd, NULL, 0, &buf, &nl, &have, errbuf, errsize) < 0)
        return -1;
    int r = ea_assign__apply(buf, nl, fd, inplace ? &ea_assign__last : NULL, NULL, errbuf,
                             errsize);
    if (r == 0 && inplace) { /* in place, the next assignment may follow at once: keep it */
        size_t rest = have - (size_t)(nl + 1 - buf);
        free(ea_assign__rest);
        ea_assign__rest = rest ? (char *)malloc(rest) : NULL;
        ea_assign__rest_len = ea_assign__rest ? rest : 0;
        if (ea_assign__rest)
            memcpy(ea_assign__rest, nl + 1, rest);
    }
    free(buf);
    if (r < 0)
        return -1;
    unsetenv("ELASTIC_ASSIGN_FD");
    unsetenv("ELASTIC_ASSIGN_LOCAL_RANK");
    if (inplace) {
        fcntl((int)fd, F_SETFD, FD_CLOEXEC); /* kept, out of reach of the programs it runs */
        ea_assign__ipfd = (int)fd;
    } else {
        close((int)fd);
    }
    return 1;
}

/*
 * Send the ready line on ELASTIC_ASSIGN_FD, block until the agent's assignment, check it and put
 * every variable of it into the environment (setenv), then unset ELASTIC_ASSIGN_FD (and
 * ELASTIC_ASSIGN_LOCAL_RANK, the parked spare's hint of the local rank it takes) and close the
 * fd. Returns 1 (assigned), 0 (no ELASTIC_ASSIGN_FD: nothing to do), or -1 with errno and a
 * message in errbuf: EBADMSG a malformed assignment, ESTALE its generation is not newer than the
 * ELASTIC_GENERATION this process already has, EPIPE the agent went away.
 */
static int ea_assign_wait(char *errbuf, size_t errsize)
{
    return ea_assign__wait(0, errbuf, errsize);
}

/*
 * ea_assign_wait, saying "inplace":1 (elastic-agent --in-place, docs/warm.md): the fd is kept
 * (close-on-exec) after the assignment, and ea_reassignment() takes the next ones.
 */
static inline int ea_assign_wait_inplace(char *errbuf, size_t errsize)
{
    return ea_assign__wait(1, errbuf, errsize);
}

/*
 * At a safe point (between two steps): wait up to timeout_ms (0: only look; -1: block) for the
 * next round's assignment. 1: taken (the environment now holds it, the last one's variables it
 * lacks unset, {"ack":G} sent: tear down the process group and form the new one), 0: none, or -1
 * with errno: EPIPE the agent closed the socket (it is stopping this worker), EBADMSG a malformed
 * line, ESTALE a generation not newer than ELASTIC_GENERATION (the socket is closed then: the
 * agent restarts the worker the normal way). Always 0 without ea_assign_wait_inplace's socket.
 */
static inline int ea_reassignment(int timeout_ms, char *errbuf, size_t errsize)
{
    int fd = ea_assign__ipfd;
    if (fd < 0)
        return 0;
    if (!ea_assign__rest || !memchr(ea_assign__rest, '\n', ea_assign__rest_len)) {
        struct pollfd pfd = {fd, POLLIN, 0};
        int n;
        while ((n = poll(&pfd, 1, timeout_ms)) < 0 && errno == EINTR)
            ;
        if (n == 0)
            return 0;
    }
    char *buf = NULL, *nl = NULL;
    size_t have = 0;
    long long gen = 0;
    int r = ea_assign__line(fd, ea_assign__rest, ea_assign__rest_len, &buf, &nl, &have, errbuf,
                            errsize);
    free(ea_assign__rest);
    ea_assign__rest = NULL;
    ea_assign__rest_len = 0;
    if (r == 0) {
        size_t rest = have - (size_t)(nl + 1 - buf);
        if (rest && (ea_assign__rest = (char *)malloc(rest)) != NULL) {
            memcpy(ea_assign__rest, nl + 1, rest);
            ea_assign__rest_len = rest;
        }
        r = ea_assign__apply(buf, nl, fd, &ea_assign__last, &gen, errbuf, errsize);
    }
    free(buf);
    if (r == 0) {
        char ack[64];
        int len = snprintf(ack, sizeof(ack), "{\"ack\":%lld}\n", gen);
        if (ea_assign__write(fd, ack, len, errbuf, errsize) == 0)
            return 1;
    }
    int e = errno;
    close(fd);
    ea_assign__ipfd = -1;
    errno = e;
    return -1;
}

#endif
