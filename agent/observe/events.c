// SPDX-License-Identifier: Apache-2.0
/* events: JSON lines for every event, and the run-level events derived from state changes. */
#include "events.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct events {
    int fd;         /* --events FILE, or -1 */
    bool to_stderr; /* --log-format json */
    char run_id[RDZV_ID_MAX];
    char node_id[RDZV_ID_MAX];
    bool seen; /* `last` holds a state */
    struct rdzv_state last;
    int64_t last_gen;
    int group_rank; /* this node's, as the agent last told (the state may not list members) */
};

int events_open(const char *path, bool to_stderr, const char *run_id, const char *node_id,
                struct events **ret, struct ea_error *err)
{
    if (!path && !to_stderr) {
        *ret = NULL;
        return 0;
    }
    struct events *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return ea_errorf(err, -ENOMEM, "out of memory");
    ev->fd = -1;
    ev->to_stderr = to_stderr;
    snprintf(ev->run_id, sizeof(ev->run_id), "%s", run_id);
    snprintf(ev->node_id, sizeof(ev->node_id), "%s", node_id);
    if (path) {
        ev->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0644);
        if (ev->fd < 0) {
            int r = -errno;
            free(ev);
            return ea_errorf(err, r, "--events: cannot open '%s': %s", path, strerror(-r));
        }
    }
    *ret = ev;
    return 0;
}

void events_close(struct events *ev)
{
    if (!ev)
        return;
    if (ev->fd >= 0)
        close(ev->fd);
    rdzv_state_clear(&ev->last);
    free(ev);
}

void events_time_now(char *buf, size_t size)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
}

static void write_line(int fd, const char *line, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, line, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; /* events are best effort: a full disk must not stop the run */
        line += n;
        len -= (size_t)n;
    }
}

void events_emitv(struct events *ev, const char *name, int64_t round, int64_t generation,
                  const char *fmt, va_list ap)
{
    if (!ev)
        return;
    char when[40];
    events_time_now(when, sizeof(when));
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I}", "time", when, "event", name, "run_id",
                          ev->run_id, "node", ev->node_id, "round", (json_int_t)round, "generation",
                          (json_int_t)generation);
    if (!o)
        return;
    if (fmt) {
        json_error_t jerr;
        json_t *extra = json_vpack_ex(&jerr, 0, fmt, ap);
        if (extra)
            json_object_update(o, extra); /* the common fields above win nothing: names differ */
        json_decref(extra);
    }
    char *line = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6));
    json_decref(o);
    if (!line)
        return;
    size_t len = strlen(line);
    line[len] = '\n'; /* json_dumps leaves room for the NUL: reuse it for the newline */
    if (ev->fd >= 0)
        write_line(ev->fd, line, len + 1);
    if (ev->to_stderr)
        write_line(STDERR_FILENO, line, len + 1);
    free(line);
}

void events_emit(struct events *ev, const char *name, int64_t round, int64_t generation,
                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    events_emitv(ev, name, round, generation, fmt, ap);
    va_end(ap);
}

/* ---- run-level events from successive states --------------------------------------------- */

/* Node ids of `a`'s members missing from `b` (b may be empty), as a JSON array. */
static json_t *dropped(const struct rdzv_state *a, const struct rdzv_state *b)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < a->n_members; i++)
        if (rdzv_state_find(b, a->members[i].node_id) < 0)
            json_array_append_new(arr, json_string(a->members[i].node_id));
    return arr;
}

static void round_committed(struct events *ev, const struct rdzv_state *s, int64_t gen)
{
    const struct rdzv_state *p = ev->seen ? &ev->last : NULL;
    json_t *added = p ? dropped(s, p) : json_array();
    json_t *removed = p ? dropped(p, s) : json_array();
    /* without the member lists (a node's O(1) view) the counts tell losses from arrivals */
    bool lists = p && p->members && s->members;
    bool lost = lists ? json_array_size(removed) > 0 : p && p->group_world_size > s->group_world_size;
    bool grew = lists ? json_array_size(added) > 0 : p && p->group_world_size < s->group_world_size;
    const char *cause = (!p || p->round == 0) && s->round == 1 ? "first"
                        : !p                                   ? "already_running"
                        : p->restart_count < s->restart_count  ? "failure"
                        : lost                                 ? "node_lost"
                        : grew                                 ? "scale_up"
                                                               : "reform";
    events_emit(ev, "round_committed", s->round, gen, "{s:i, s:i, s:i, s:i, s:i, s:s, s:o, s:o}",
                "members", s->group_world_size, "world_size", s->world_size, "group_rank",
                s->members ? rdzv_state_find(s, ev->node_id) : ev->group_rank, "restart_count", s->restart_count, "scale_events",
                s->scale_events, "cause", cause, "added", added, "removed", removed);
}

void events_set_group_rank(struct events *ev, int group_rank)
{
    if (ev)
        ev->group_rank = group_rank;
}

void events_observe(struct events *ev, const struct rdzv_state *s, int64_t gen)
{
    if (!ev || !s)
        return;
    const struct rdzv_state *p = &ev->last;
    if (ev->seen && p->round == s->round && ev->last_gen == gen && p->status == s->status &&
        p->restart_count == s->restart_count && p->group_world_size == s->group_world_size &&
        p->n_members == s->n_members)
        return;
    if (ev->seen && p->status != s->status && s->status != RDZV_RUNNING)
        events_emit(ev, "status", s->round, gen, "{s:s, s:s}", "status",
                    rdzv_status_name(s->status), "previous", rdzv_status_name(p->status));
    if (ev->seen && p->round != s->round && (!p->members || !s->members) &&
        p->group_world_size > s->group_world_size && p->status == RDZV_RUNNING)
        events_emit(ev, "node_lost", s->round, gen, "{s:i}", "lost_nodes",
                    p->group_world_size - s->group_world_size);
    if (ev->seen && p->members && s->members)
        for (size_t i = 0; i < p->n_members; i++)
            if (rdzv_state_find(s, p->members[i].node_id) < 0)
                events_emit(ev, "node_lost", s->round, gen, "{s:s, s:s, s:i}", "lost_node",
                            p->members[i].node_id, "host", p->members[i].host, "group_rank",
                            p->members[i].group_rank);
    if (s->status == RDZV_RUNNING && (!ev->seen || ev->last_gen != gen))
        round_committed(ev, s, gen);
    /* a failed run charges the failure that spent the budget: no restart comes of it */
    if (ev->seen && s->restart_count > p->restart_count && s->status != RDZV_FAILED)
        events_emit(ev, "restart", s->round, gen, "{s:i, s:i, s:b}", "restart_count",
                    s->restart_count, "max_restarts", s->max_restarts, "provisional",
                    s->charge_round > 0 && s->charge_round == s->round);
    else if (ev->seen && s->restart_count < p->restart_count)
        events_emit(ev, "restart_refunded", s->round, gen, "{s:i, s:i}", "restart_count",
                    s->restart_count, "max_restarts", s->max_restarts);
    struct rdzv_state copy;
    if (rdzv_state_copy(&copy, s) == 0) {
        rdzv_state_clear(&ev->last);
        ev->last = copy;
        ev->last_gen = gen;
        ev->seen = true;
    }
}
