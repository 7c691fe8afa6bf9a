// SPDX-License-Identifier: Apache-2.0
/* pg: progress-aware restarts: the ranks' steps and the no-progress rule (progress.h). */
#include "progress.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "straggler.h"

int pg_create(int limit, bool always, int64_t read_ms, struct pg **ret, struct ea_error *err)
{
    *ret = NULL;
    if (limit <= 0 && !always)
        return 0;
    struct pg *p = calloc(1, sizeof(*p));
    if (!p)
        return ea_errorf(err, -ENOMEM, "out of memory");
    p->limit = limit > 0 ? limit : 0;
    p->read_ms = read_ms > 0 ? read_ms : PG_READ_MS;
    p->step = -1;
    p->run = (struct rdzv_progress){.step = -1, .best = -1};
    *ret = p;
    return 0;
}

void pg_destroy(struct pg *p)
{
    if (p)
        free(p->compute);
    free(p);
}

int pg_arm(struct pg *p, const char *dir, bool prepare, int n, int rank_base, int64_t now,
           struct ea_error *err)
{
    if (!p)
        return 0;
    p->armed = false;
    if (snprintf(p->dir, sizeof(p->dir), "%s", dir) >= (int)sizeof(p->dir))
        return ea_errorf(err, -ENAMETOOLONG, "heartbeat directory '%s' is too long", dir);
    if (prepare) {
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
            return ea_errorf(err, -errno, "cannot create heartbeat directory '%s': %s", dir,
                             strerror(errno));
        for (int i = 0; i < n; i++) { /* an earlier round's step is not this one's */
            char path[PATH_MAX + 32];
            snprintf(path, sizeof(path), "%s/rank_%d", dir, rank_base + i);
            if (unlink(path) < 0 && errno != ENOENT)
                return ea_errorf(err, -errno, "cannot remove '%s': %s", path, strerror(errno));
        }
    }
    double *compute = calloc((size_t)(n > 0 ? n : 1), sizeof(*compute));
    if (!compute)
        return ea_errorf(err, -ENOMEM, "out of memory");
    free(p->compute);
    p->compute = compute;
    p->n = n;
    p->rank_base = rank_base;
    p->step = -1;
    p->passed = false;
    p->read_at = now + p->read_ms;
    p->armed = true;
    return 0;
}

void pg_disarm(struct pg *p)
{
    if (p)
        p->armed = false;
}

int64_t pg_parse_step(const char *buf, size_t len)
{
    size_t i = 0;
    while (i < len && (buf[i] == ' ' || buf[i] == '\t'))
        i++;
    int64_t v = 0;
    size_t digits = 0;
    for (; i < len && isdigit((unsigned char)buf[i]); i++, digits++) {
        if (v > (INT64_MAX - 9) / 10)
            return -1; /* not a step anyone reaches */
        v = v * 10 + (buf[i] - '0');
    }
    /* a word that starts with digits ("3rd") is a phase name, not a step */
    if (digits == 0 || (i < len && !isspace((unsigned char)buf[i])))
        return -1;
    return v;
}

int64_t pg_read(struct pg *p, int64_t now)
{
    if (!p || !p->armed)
        return -1;
    int64_t best = -1;
    for (int i = 0; i < p->n; i++) {
        char path[PATH_MAX + 32], buf[96];
        snprintf(path, sizeof(path), "%s/rank_%d", p->dir, p->rank_base + i);
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) {
            p->compute[i] = 0;
            continue; /* not beaten yet */
        }
        ssize_t len = read(fd, buf, sizeof(buf));
        close(fd);
        int64_t step = len > 0 ? pg_parse_step(buf, (size_t)len) : -1;
        if (step > best)
            best = step;
        p->compute[i] = step >= 0 ? sg_parse_compute(buf, (size_t)len) : 0;
    }
    /* a rank that exited removes nothing: the highest step of the round stays */
    if (best > p->step)
        p->step = best;
    p->read_at = now + p->read_ms;
    return p->step;
}

bool pg_due(const struct pg *p, int64_t now)
{
    return p && p->armed && now >= p->read_at;
}

int64_t pg_wake_ms(const struct pg *p)
{
    return p && p->armed ? p->read_at : -1;
}

bool pg_passed(struct pg *p)
{
    if (!p || p->passed || p->run_round == 0 || p->step <= p->run.best)
        return false;
    p->passed = true;
    return true;
}

int pg_no_progress(const struct pg *p)
{
    return !p || p->passed ? 0 : p->run.no_progress;
}

bool pg_same(const struct rdzv_failure *a, const struct rdzv_failure *b)
{
    bool where = a->rank == b->rank || strcmp(a->node_id, b->node_id) == 0;
    return where && a->exit_code == b->exit_code && a->signal == b->signal;
}

void pg_next(const struct rdzv_failure *prev, const struct rdzv_failure *f, int64_t step, int limit,
             struct rdzv_progress *ret)
{
    /* a record without progress (an older writer's, or none) is no earlier failure to compare */
    bool have_prev = prev && prev->progress.repeat > 0;
    int64_t best = have_prev ? prev->progress.best : -1;
    struct rdzv_progress out = {.step = step < 0 ? -1 : step, .repeat = 1};
    bool unknown = step < 0 && best < 0; /* no rank ever beat a step: nothing can be said */
    if (!have_prev || unknown || step > best) {
        out.no_progress = 0; /* passed the best step: a progress restart; or nothing to compare */
    } else {
        out.no_progress = prev->progress.no_progress + 1;
        out.repeat = pg_same(prev, f) ? prev->progress.repeat + 1 : 1;
    }
    out.best = out.step > best ? out.step : best;
    out.stop =
        limit > 0 && out.no_progress > 0 && (out.repeat >= limit || out.no_progress >= limit);
    *ret = out;
}

/* Append `s` to buf (at *len) on one line: lines joined by " | ", other control characters shown
 * as '?' (the message comes from a worker's error file and the store). */
static void append_clean(char *buf, size_t size, size_t *len, const char *s)
{
    for (; *s && *len + 4 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\n') {
            if (s[1] && s[1] != '\n')
                *len += (size_t)snprintf(buf + *len, size - *len, " | ");
            continue;
        }
        buf[(*len)++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    buf[*len] = '\0';
}

void pg_stop_message(const struct rdzv_failure *f, char *buf, size_t size)
{
    if (size == 0)
        return;
    const struct rdzv_progress *p = &f->progress;
    char at[48] = "before any step";
    if (p->best >= 0)
        snprintf(at, sizeof(at), "at step %lld", (long long)p->best);
    int n;
    if (p->repeat > p->no_progress) /* every failure since the last progress was this one */
        n = snprintf(buf, size, "the same failure %d times in a row %s, no progress: ", p->repeat,
                     at);
    else
        n = snprintf(buf, size, "%d restarts in a row without progress past %s: ", p->no_progress,
                     p->best >= 0 ? at + 3 : "the first step");
    size_t len = n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1;
    char who[RDZV_ID_MAX + 64];
    snprintf(who, sizeof(who), "rank %d (node '%s'): ", f->rank, f->node_id);
    append_clean(buf, size, &len, who);
    append_clean(buf, size, &len, f->message);
}
