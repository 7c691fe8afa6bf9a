// SPDX-License-Identifier: Apache-2.0
/* ckpt_fetch: a worker's latest() from the coordinator's value of the round, and a shard from
 * any member on demand (docs/checkpoint.md "Fetch"): the run's view (the members' summaries,
 * listed once a round, only when a worker must load a shard this node lacks), the fetches of
 * this node's workers' loads, and the fetches this node serves on its replication port;
 * non-blocking, its fds polled by the agent's loop. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_internal.h"
#include "ckpt_proto.h"
#include "ckpt_summary.h"
#include "ckpt_wire.h"

#define SERVE_MAX 4         /* fetches served at once */
#define OUT_MAX 4           /* fetches of this node's at once */
#define VIEW_RETRY_MS 100   /* a summary of an older round (its node has not published yet) */
#define VIEW_WAIT_MS 3000   /* ... then the view is taken as it is */
/* the coordinator publishes the round's value within VIEW_WAIT_MS of the round: latest() waits
 * that and a margin for it, then answers from this store alone */
#define PUB_WAIT_MS (VIEW_WAIT_MS + 2000)
#define MEMBERS_MAX 64      /* member answers cached per round */
#define CHUNK (256 * 1024)
#define FETCH_OWNER_BASE (UINT64_C(3) << 61) /* store owners of fetches */

enum serve_state { S_FREE, S_REQ, S_SEND };
enum pub_state { P_WAIT, P_HAVE, P_ALONE };

struct serve {
    enum serve_state st;
    int fd;
    uint8_t buf[CKPT_FETCH_MAX];
    size_t have;
    uint8_t out[CKPT_ANSWER_MAX + CKPT_SHARD_HDR_LEN];
    size_t olen, ooff;
    const uint8_t *map;
    uint64_t len, off;
    int64_t deadline; /* -1: set at the next step */
};

enum out_state { F_FREE, F_CONN, F_ANS, F_HDR, F_BODY, F_FAILED, F_RETRY };

struct fout {
    enum out_state st;
    int fd;
    int64_t step;
    int shard;
    char from[CKPT_WIRE_NAME_MAX + 1];
    int64_t deadline, retry_at;
    char addr[64];
    int port;
    uint8_t req[CKPT_FETCH_MAX];
    size_t rlen, roff;
    uint8_t buf[CKPT_ANSWER_MAX];
    size_t have;
    struct ckpt_shard_wire sh;
    uint64_t owner, id;
    int mfd;
    uint64_t got;
    char why[256]; /* F_FAILED: what the worker is told */
};

struct member_ans {
    char id[CKPT_WIRE_NAME_MAX + 1];
    int yes;
};

struct ckpt_fetch {
    struct ckpt_fetch_ops ops;
    int64_t timeout_ms, now, round;
    /* the view of `view_round`: the other nodes' summaries */
    struct ckpt_summary *view;
    size_t nview, spread;
    int64_t view_round, view_since, view_next;
    bool view_ready;
    /* the coordinator's value of `pub_round` (latest()); the wait began at pub_since (-1: at
     * the next step, whose clock is fresh) */
    int64_t pub_round, pub_since, pub_step;
    int pub_shards;
    enum pub_state pub_state;
    struct member_ans members[MEMBERS_MAX];
    size_t nmembers;
    struct serve sv[SERVE_MAX];
    struct fout fo[OUT_MAX];
    uint64_t next_owner;
    struct ckpt_fetch_stats stats;
};

int ckpt_fetch_start(struct ckpt *c, const struct ckpt_fetch_ops *ops, int64_t timeout_ms,
                     struct ea_error *err)
{
    if (!c->repl)
        return ea_errorf(err, -EINVAL, "fetching needs the replication port");
    struct ckpt_fetch *f = calloc(1, sizeof(*f));
    if (!f)
        return ea_errorf(err, -ENOMEM, "out of memory");
    f->ops = *ops;
    f->timeout_ms = timeout_ms > 0 ? timeout_ms : 10000;
    f->round = ckpt_repl_round_of(c);
    f->view_round = -1;
    f->pub_round = -1;
    f->next_owner = FETCH_OWNER_BASE;
    for (int i = 0; i < SERVE_MAX; i++)
        f->sv[i] = (struct serve){.st = S_FREE, .fd = -1};
    for (int i = 0; i < OUT_MAX; i++)
        f->fo[i] = (struct fout){.st = F_FREE, .fd = -1, .mfd = -1};
    c->fetch = f;
    return 0;
}

static void serve_close(struct serve *s)
{
    if (s->st == S_FREE)
        return;
    if (s->map)
        munmap((void *)s->map, s->len);
    close(s->fd);
    *s = (struct serve){.st = S_FREE, .fd = -1};
}

/* A fetch ends: its connection closed, a partial shard dropped from the store. */
static void out_end(struct ckpt *c, struct fout *o)
{
    if (o->st == F_FREE)
        return;
    ckpt_store_drop_owner(&c->store, o->owner);
    if (o->fd >= 0)
        close(o->fd);
    o->fd = -1;
    o->mfd = -1; /* the store's (closed with its entry) */
    o->id = 0;
}

/* A fetch failed: the workers waiting for it are told why (ckpt_parked_run). */
static void out_fail(struct ckpt *c, struct fout *o, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void out_fail(struct ckpt *c, struct fout *o, const char *fmt, ...)
{
    char m[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof(m), fmt, ap);
    va_end(ap);
    out_end(c, o);
    snprintf(o->why, sizeof(o->why), "fetching shard %d of step %" PRId64 " from node '%s' "
             "failed: %s", o->shard, o->step, o->from, m);
    o->st = F_FAILED;
    c->fetch->stats.failed++;
    ckpt_note_add(c, CKPT_NOTE_FETCH_FAILED, o->step, o->shard, 0, 0, "%s", o->why);
}

void ckpt_fetch_destroy(struct ckpt *c)
{
    struct ckpt_fetch *f = c->fetch;
    if (!f)
        return;
    for (int i = 0; i < SERVE_MAX; i++)
        serve_close(&f->sv[i]);
    for (int i = 0; i < OUT_MAX; i++)
        out_end(c, &f->fo[i]);
    free(f->view);
    free(f);
    c->fetch = NULL;
}

void ckpt_fetch_stats(const struct ckpt *c, struct ckpt_fetch_stats *ret)
{
    *ret = c && c->fetch ? c->fetch->stats : (struct ckpt_fetch_stats){0};
}

int ckpt_fetch_summary(const struct ckpt *c, int64_t round, char **ret_json, struct ea_error *err)
{
    struct ckpt_summary s;
    ckpt_summary_of(&c->store, ckpt_repl_node(c), round, &s);
    return ckpt_summary_encode(&s, c->run, ret_json, err);
}

void ckpt_fetch_round(struct ckpt *c, int64_t round)
{
    struct ckpt_fetch *f = c->fetch;
    if (!f || f->round == round)
        return;
    f->round = round;
    f->nmembers = 0; /* members of another round */
    for (int i = 0; i < SERVE_MAX; i++)
        serve_close(&f->sv[i]); /* admitted for a round that is over */
}

/* ---- the view ----------------------------------------------------------------------------- */

/* The view of this round: true when it can be used (every summary of this round, or waited
 * VIEW_WAIT_MS for the late ones); reads the store at most every VIEW_RETRY_MS. */
static bool view_ready(struct ckpt *c)
{
    struct ckpt_fetch *f = c->fetch;
    if (f->round < 0)
        return true; /* no round: nobody to ask, this store alone */
    if (f->view_round == f->round && f->view_ready)
        return true;
    if (f->view_round != f->round) {
        f->view_round = f->round;
        f->view_since = f->now;
        f->view_next = 0;
        f->view_ready = false;
        f->nview = 0;
    }
    if (f->now < f->view_next)
        return false;
    struct ckpt_summary *v = NULL;
    size_t n = 0;
    struct ea_error e = {0};
    f->stats.views++;
    if (f->ops.view(f->ops.ctx, &v, &n, &e) < 0) {
        ckpt_note_add(c, CKPT_NOTE_FETCH_FAILED, -1, -1, 0, 0, "reading the members' checkpoint "
                      "summaries: %s", e.msg);
        v = NULL;
        n = 0;
    }
    free(f->view);
    f->view = v;
    f->nview = n;
    bool fresh = true;
    for (size_t i = 0; i < n; i++)
        fresh = fresh && v[i].round >= f->round;
    f->view_ready = fresh || f->now - f->view_since >= VIEW_WAIT_MS;
    f->view_next = f->now + VIEW_RETRY_MS;
    return f->view_ready;
}

/* The coordinator's value of this round: 1 with it, 0 not there yet (the request waits), -1
 * this store alone (not published within PUB_WAIT_MS, or not to be trusted: said once). */
static int pub_ready(struct ckpt *c, int64_t *ret_step, int *ret_shards)
{
    struct ckpt_fetch *f = c->fetch;
    if (f->pub_round != f->round) {
        f->pub_round = f->round;
        f->pub_since = -1;
        f->pub_state = P_WAIT;
    }
    if (f->pub_state == P_WAIT) {
        struct ea_error e = {0};
        int64_t step = -1;
        int shards = 0;
        f->stats.published++;
        int r = f->ops.published ? f->ops.published(f->ops.ctx, f->round, &step, &shards, &e) : 0;
        if (r > 0) {
            f->pub_state = P_HAVE;
            f->pub_step = step;
            f->pub_shards = shards;
        } else if (r < 0) {
            f->pub_state = P_ALONE;
            ckpt_note_add(c, CKPT_NOTE_LATEST_ALONE, -1, -1, 0, 0, "round %" PRId64 ": the run's "
                          "newest step not used (%s): latest() answers from this store alone",
                          f->round, e.msg);
        } else if (f->pub_since >= 0 && f->now - f->pub_since >= PUB_WAIT_MS) {
            f->pub_state = P_ALONE;
            ckpt_note_add(c, CKPT_NOTE_LATEST_ALONE, -1, -1, 0, 0, "round %" PRId64 ": the "
                          "coordinator published no newest step within %d ms: latest() answers "
                          "from this store alone", f->round, PUB_WAIT_MS);
        }
    }
    if (f->pub_state == P_WAIT)
        return 0;
    *ret_step = f->pub_step;
    *ret_shards = f->pub_shards;
    return f->pub_state == P_HAVE ? 1 : -1;
}

int ckpt_fetch_latest(struct ckpt *c, int *ret_rc, int64_t *ret_step, int *ret_shards)
{
    struct ckpt_fetch *f = c->fetch;
    int64_t step = -1, s2;
    int shards = 0, h2;
    if (ckpt_store_latest(&c->store, &s2, &h2) == 0) {
        step = s2;
        shards = h2;
    }
    /* no round: nobody to ask, this store alone; else the coordinator's value (no listing) */
    if (f && f->round >= 0) {
        int r = pub_ready(c, &s2, &h2);
        if (r == 0)
            return 0;
        if (r > 0 && s2 > step) {
            step = s2;
            shards = h2;
        }
    }
    *ret_rc = step >= 0 ? 0 : -ENOENT;
    *ret_step = step;
    *ret_shards = shards;
    return 1;
}

/* ---- fetching ----------------------------------------------------------------------------- */

static int out_connect(struct fout *o, const char *addr, int port)
{
    int fd = ckpt_connect(addr, port);
    if (fd < 0)
        return fd;
    o->fd = fd;
    return 0;
}

/* Start fetching (step, shard) from the i-th node of the view. */
static void out_start(struct ckpt *c, struct fout *o, size_t i, int64_t step, int shard)
{
    struct ckpt_fetch *f = c->fetch;
    const struct ckpt_summary *h = &f->view[i];
    *o = (struct fout){.st = F_CONN, .fd = -1, .mfd = -1, .step = step, .shard = shard,
                       .owner = f->next_owner++, .deadline = f->now + f->timeout_ms};
    snprintf(o->from, sizeof(o->from), "%s", h->node);
    char addr[64] = "";
    int port = 0;
    struct ea_error e = {0};
    int r = f->ops.where(f->ops.ctx, h->node, h->lease, addr, &port, &e);
    if (r <= 0) {
        out_fail(c, o, "%s", r < 0 ? e.msg : "it is gone, takes no fetches, or its summary is "
                 "not on its node key's lease");
        return;
    }
    struct ckpt_fetch_req q = {.step = step, .shard = shard, .h.round = f->round};
    snprintf(q.h.run, sizeof(q.h.run), "%s", c->run);
    snprintf(q.h.from, sizeof(q.h.from), "%s", ckpt_repl_node(c));
    snprintf(q.h.to, sizeof(q.h.to), "%s", h->node);
    int n = ckpt_fetch_encode(&q, o->req, sizeof(o->req));
    snprintf(o->addr, sizeof(o->addr), "%s", addr);
    o->port = port;
    if (n < 0 || (r = out_connect(o, addr, port)) < 0) {
        out_fail(c, o, "cannot connect to %s:%d: %s", addr, port, strerror(n < 0 ? -n : -r));
        return;
    }
    o->rlen = (size_t)n;
}

int ckpt_fetch_want(struct ckpt *c, int64_t step, int shard, struct ea_error *err)
{
    struct ckpt_fetch *f = c->fetch;
    if (!f || f->round < 0)
        return ea_errorf(err, -ENOENT, "no shard %d of step %" PRId64 " in this store", shard,
                         step);
    struct fout *free_slot = NULL;
    for (int i = 0; i < OUT_MAX; i++) {
        struct fout *o = &f->fo[i];
        if (o->st != F_FREE && o->step == step && o->shard == shard)
            return o->st == F_FAILED ? ea_errorf(err, -ENOENT, "%s", o->why) : 0;
        if (o->st == F_FREE && !free_slot)
            free_slot = o;
    }
    if (!view_ready(c))
        return 0;
    int i = ckpt_sum_holder(f->view, f->nview, step, shard, f->spread++);
    if (i < 0)
        return ea_errorf(err, -ENOENT, "no shard %d of step %" PRId64 " in this store, and no "
                         "member says it holds it", shard, step);
    if (!free_slot)
        return 0; /* OUT_MAX fetches under way: it waits for a slot */
    out_start(c, free_slot, (size_t)i, step, shard);
    if (free_slot->st != F_FAILED)
        return 0;
    free_slot->st = F_FREE; /* told here */
    return ea_errorf(err, -ENOENT, "%s", free_slot->why);
}

/* Every byte of the shard is in its memfd: seal, measure, check the CRC, commit as a replica. */
static void out_finish(struct ckpt *c, struct fout *o)
{
    struct ckpt_fetch *f = c->fetch;
    const struct ckpt_shard_wire *s = &o->sh;
    uint64_t size = UINT64_MAX;
    uint32_t crc = 0;
    struct stat st;
    int fd = o->mfd;
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) == 0 &&
        fstat(fd, &st) == 0) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED) {
            size = (uint64_t)st.st_size;
            crc = ckpt_crc32(0, m, size);
            munmap(m, size);
        }
    }
    struct ea_error e = {0};
    int rc = ckpt_store_commit(&c->store, o->owner, o->id, size, true, crc, s->crc, &e);
    o->id = 0;
    o->mfd = -1;
    if (rc < 0) {
        out_fail(c, o, "%s", e.msg);
        return;
    }
    fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL);
    for (size_t i = 0; i < c->store.n; i++)
        if (c->store.e[i].fd == fd)
            c->store.e[i].replica = true; /* never sent on */
    f->stats.fetched++;
    f->stats.fetched_bytes += s->len;
    ckpt_note_add(c, CKPT_NOTE_FETCHED, s->step, s->shard, s->shards, s->len, "fetched shard %d "
                  "of step %" PRId64 " (%" PRIu64 " bytes) from node '%s'", s->shard, s->step,
                  s->len, o->from);
    out_end(c, o);
    o->st = F_FREE;
}

/* The header is in: it must be the shard asked for, within the memory bound; room reserved. */
static void out_begin(struct ckpt *c, struct fout *o)
{
    struct ea_error e = {0};
    int d = ckpt_shard_decode(o->buf, o->have, c->store.limit, &o->sh, &e);
    if (d < 0) {
        out_fail(c, o, "%s", e.msg);
        return;
    }
    if (o->sh.step != o->step || o->sh.shard != o->shard) {
        out_fail(c, o, "it sent shard %d of step %" PRId64 " instead", o->sh.shard, o->sh.step);
        return;
    }
    if (ckpt_store_reserve(&c->store, o->owner, o->step, o->shard, o->sh.shards, o->sh.len,
                           &o->id, &e) < 0) {
        out_fail(c, o, "%s", e.msg);
        return;
    }
    o->mfd = memfd_create("ckpt-fetched", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (o->mfd < 0 || ftruncate(o->mfd, (off_t)o->sh.len) < 0) {
        int er = errno;
        if (o->mfd >= 0)
            close(o->mfd);
        o->mfd = -1;
        out_fail(c, o, "cannot make a memfd of %" PRIu64 " bytes: %s", o->sh.len, strerror(er));
        return;
    }
    ckpt_store_set_fd(&c->store, o->id, o->mfd); /* the store closes it if dropped */
    o->st = F_BODY;
    o->got = 0;
}

static void out_progress(struct ckpt *c, struct fout *o)
{
    uint8_t buf[64 * 1024];
    char msg[256];
    for (int k = 0; k < 16 && o->st != F_FREE && o->st != F_FAILED; k++) {
        if (o->st == F_CONN) {
            ssize_t n = send(o->fd, o->req + o->roff, o->rlen - o->roff, MSG_NOSIGNAL);
            if (n < 0 && (errno == EAGAIN || errno == EINTR || errno == ENOTCONN))
                return;
            if (n <= 0) {
                out_fail(c, o, "cannot send the request: %s", strerror(errno));
                return;
            }
            o->roff += (size_t)n;
            if (o->roff == o->rlen)
                o->st = F_ANS;
            continue;
        }
        size_t want = o->st == F_ANS   ? (o->have < 6 ? 6 : 6 + o->buf[5]) - o->have
                      : o->st == F_HDR ? CKPT_SHARD_HDR_LEN - o->have
                                       : (o->sh.len - o->got < sizeof(buf) ? o->sh.len - o->got
                                                                            : sizeof(buf));
        uint8_t *to = o->st == F_BODY ? buf : o->buf + o->have;
        ssize_t n = recv(o->fd, to, want, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) {
            out_fail(c, o, "the connection closed after %" PRIu64 " of its bytes", o->got);
            return;
        }
        if (o->st == F_BODY) {
            if (pwrite(o->mfd, buf, (size_t)n, (off_t)o->got) != n) {
                out_fail(c, o, "cannot write the memfd: %s", strerror(errno));
                return;
            }
            o->got += (uint64_t)n;
            if (o->got == o->sh.len)
                out_finish(c, o);
            continue;
        }
        o->have += (size_t)n;
        if (o->st == F_HDR) {
            if (o->have == CKPT_SHARD_HDR_LEN)
                out_begin(c, o);
            continue;
        }
        enum ckpt_wire_status st;
        size_t used;
        int d = ckpt_answer_decode(o->buf, o->have, &st, msg, sizeof(msg), &used);
        if (d < 0) {
            out_fail(c, o, "a malformed answer");
            return;
        }
        if (d == 0)
            continue;
        if (st == CKPT_W_LATER) { /* the holder has not seen this round yet: again soon */
            close(o->fd);
            o->fd = -1;
            o->st = F_RETRY;
            o->retry_at = c->fetch->now + VIEW_RETRY_MS;
            return;
        }
        if (st != CKPT_W_OK) {
            out_fail(c, o, "refused: %s (%s)", ckpt_wire_status_name(st), msg);
            return;
        }
        o->st = F_HDR;
        o->have = 0;
    }
}

/* ---- serving ------------------------------------------------------------------------------ */

static void serve_progress(struct ckpt *c, struct serve *s);

int ckpt_fetch_adopt(struct ckpt *c, int fd, const uint8_t *buf, size_t have)
{
    struct ckpt_fetch *f = c->fetch;
    if (!f || have > CKPT_FETCH_MAX)
        return -EINVAL;
    for (int i = 0; i < SERVE_MAX; i++)
        if (f->sv[i].st == S_FREE) {
            struct serve *s = &f->sv[i];
            *s = (struct serve){.st = S_REQ, .fd = fd, .have = have, .deadline = -1};
            memcpy(s->buf, buf, have);
            serve_progress(c, s); /* all of the request may be in already */
            return 0;
        }
    ckpt_note_add(c, CKPT_NOTE_REFUSED, -1, -1, 0, 0, "replication port: a fetch refused: %d "
                  "served already", SERVE_MAX);
    return -EBUSY;
}

static int member(struct ckpt *c, const char *id)
{
    struct ckpt_fetch *f = c->fetch;
    for (size_t i = 0; i < f->nmembers; i++)
        if (strcmp(f->members[i].id, id) == 0)
            return f->members[i].yes;
    struct ea_error e = {0};
    int r = f->ops.is_member(f->ops.ctx, id, f->round, &e);
    if (r < 0)
        return r; /* not cached: asked again next time */
    if (f->nmembers < MEMBERS_MAX) {
        snprintf(f->members[f->nmembers].id, sizeof(f->members[0].id), "%s", id);
        f->members[f->nmembers++].yes = r;
    }
    return r;
}

/* The request is in: admit it (run, this node, this round, a member) and find the shard. */
static void serve_begin(struct ckpt *c, struct serve *s, const struct ckpt_fetch_req *q)
{
    struct ckpt_fetch *f = c->fetch;
    struct ea_error e = {0};
    struct ckpt_view v = {.run = c->run, .round = f->round, .me = ckpt_repl_node(c)};
    /* run, node and round first: a stranger's request costs no store read */
    enum ckpt_wire_status st = ckpt_fetch_admit(q, &v, 1, &e);
    if (st == CKPT_W_OK)
        st = ckpt_fetch_admit(q, &v, member(c, q->h.from), &e);
    const struct ckpt_entry *ent = NULL;
    if (st == CKPT_W_OK && !(ent = ckpt_store_find(&c->store, q->step, q->shard))) {
        st = CKPT_W_NOT_HELD;
        ea_errorf(&e, -ENOENT, "no shard %d of step %" PRId64 " here", q->shard, q->step);
    }
    void *m = MAP_FAILED;
    if (ent && (m = mmap(NULL, ent->len, PROT_READ, MAP_SHARED, ent->fd, 0)) == MAP_FAILED) {
        st = CKPT_W_NOT_HELD;
        ea_errorf(&e, -errno, "cannot map the shard: %s", strerror(errno));
    }
    if (st != CKPT_W_OK) {
        if (st != CKPT_W_NOT_HELD) {
            f->stats.refused++;
            ckpt_note_add(c, CKPT_NOTE_REFUSED, q->step, q->shard, 0, 0, "replication port: a "
                          "fetch refused: %s", e.msg);
        }
        s->olen = ckpt_answer_encode(st, e.msg, s->out);
        s->st = S_SEND; /* the answer, then closed */
        return;
    }
    struct ckpt_entry *w = (struct ckpt_entry *)ent;
    if (!w->crc_known) {
        w->crc = ckpt_crc32(0, m, w->len);
        w->crc_known = true;
    }
    s->map = m;
    s->len = w->len;
    s->off = 0;
    s->olen = ckpt_answer_encode(CKPT_W_OK, "ok", s->out);
    struct ckpt_shard_wire sw = {.step = w->step, .shard = w->shard, .shards = w->shards,
                                 .len = w->len, .crc = w->crc};
    ckpt_shard_encode(&sw, s->out + s->olen);
    s->olen += CKPT_SHARD_HDR_LEN;
    s->st = S_SEND;
    f->stats.served++;
}

static void serve_progress(struct ckpt *c, struct serve *s)
{
    for (int k = 0; k < 16 && s->st != S_FREE; k++) {
        if (s->st == S_REQ) {
            struct ckpt_fetch_req q;
            size_t used = 0;
            struct ea_error e = {0};
            int d = ckpt_fetch_decode(s->buf, s->have, &q, &used, &e);
            if (d == 0 && s->have < sizeof(s->buf)) { /* more of it (the port read its start) */
                ssize_t n = recv(s->fd, s->buf + s->have, sizeof(s->buf) - s->have, MSG_DONTWAIT);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                    return;
                if (n <= 0) {
                    serve_close(s);
                    return;
                }
                s->have += (size_t)n;
                continue;
            }
            if (d <= 0 || used != s->have) {
                ckpt_note_add(c, CKPT_NOTE_BAD, -1, -1, 0, 0, "replication port: a fetch "
                              "refused: %s", d < 0 ? e.msg : "bytes after the request");
                c->fetch->stats.refused++;
                s->olen = ckpt_answer_encode(CKPT_W_BAD, d < 0 ? e.msg : "malformed", s->out);
                s->st = S_SEND;
                continue;
            }
            serve_begin(c, s, &q);
            continue;
        }
        /* S_SEND: the answer (and header), then the bytes */
        const uint8_t *p = s->ooff < s->olen ? s->out + s->ooff : s->map + s->off;
        size_t left = s->ooff < s->olen ? s->olen - s->ooff
                      : s->map          ? (size_t)(s->len - s->off < CHUNK ? s->len - s->off : CHUNK)
                                        : 0;
        if (left == 0) {
            serve_close(s); /* all of it sent (or a refusal said) */
            return;
        }
        ssize_t n = send(s->fd, p, left, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) {
            serve_close(s);
            return;
        }
        if (s->ooff < s->olen)
            s->ooff += (size_t)n;
        else
            s->off += (uint64_t)n;
        s->deadline = c->fetch->now + c->fetch->timeout_ms;
    }
}

/* ---- the loop ----------------------------------------------------------------------------- */

size_t ckpt_fetch_pollfds(const struct ckpt *c, struct pollfd *fds, size_t max)
{
    const struct ckpt_fetch *f = c->fetch;
    size_t n = 0;
    for (int i = 0; f && i < SERVE_MAX && n < max; i++)
        if (f->sv[i].st != S_FREE)
            fds[n++] = (struct pollfd){.fd = f->sv[i].fd,
                                       .events = f->sv[i].st == S_SEND ? POLLOUT : POLLIN};
    for (int i = 0; f && i < OUT_MAX && n < max; i++)
        if (f->fo[i].st != F_FREE && f->fo[i].st != F_FAILED && f->fo[i].st != F_RETRY)
            fds[n++] = (struct pollfd){.fd = f->fo[i].fd,
                                       .events = f->fo[i].st == F_CONN ? POLLOUT : POLLIN};
    return n;
}

uint64_t ckpt_fetch_tag_of(const struct ckpt *c, int fd)
{
    const struct ckpt_fetch *f = c->fetch;
    for (int i = 0; f && fd >= 0 && i < SERVE_MAX; i++)
        if (f->sv[i].st != S_FREE && f->sv[i].fd == fd)
            return CKPT_TAG_FETCH + (uint64_t)i;
    for (int i = 0; f && fd >= 0 && i < OUT_MAX; i++)
        if (f->fo[i].fd >= 0 && f->fo[i].fd == fd)
            return CKPT_TAG_FETCH + SERVE_MAX + (uint64_t)i;
    return 0;
}

void ckpt_fetch_on_event(struct ckpt *c, uint64_t tag, uint32_t events)
{
    (void)events;
    struct ckpt_fetch *f = c->fetch;
    uint64_t i = tag - CKPT_TAG_FETCH;
    if (!f)
        return;
    if (i < SERVE_MAX) {
        serve_progress(c, &f->sv[i]);
        return;
    }
    if (i - SERVE_MAX < OUT_MAX) {
        struct fout *o = &f->fo[i - SERVE_MAX];
        out_progress(c, o);
        if (o->st == F_FREE || o->st == F_FAILED)
            ckpt_parked_run(c); /* its workers are answered */
        if (o->st == F_FAILED)
            o->st = F_FREE;
    }
}

void ckpt_fetch_step(struct ckpt *c, int64_t now)
{
    struct ckpt_fetch *f = c->fetch;
    if (!f)
        return;
    f->now = now;
    if (f->pub_round == f->round && f->pub_state == P_WAIT && f->pub_since < 0)
        f->pub_since = now; /* a worker asked: latest() waits from here */
    for (int i = 0; i < SERVE_MAX; i++) {
        struct serve *s = &f->sv[i];
        if (s->st != S_FREE && s->deadline < 0)
            s->deadline = now + f->timeout_ms;
        else if (s->st != S_FREE && now > s->deadline)
            serve_close(s);
    }
    for (int i = 0; i < OUT_MAX; i++) {
        struct fout *o = &f->fo[i];
        if (o->st != F_FREE && o->st != F_FAILED && now > o->deadline) {
            out_fail(c, o, "no shard within %" PRId64 " ms", f->timeout_ms);
        } else if (o->st == F_RETRY && now >= o->retry_at) {
            int r = out_connect(o, o->addr, o->port);
            o->roff = o->have = 0;
            o->st = F_CONN;
            if (r < 0)
                out_fail(c, o, "cannot connect to %s:%d: %s", o->addr, o->port, strerror(-r));
        }
    }
    if (c->nparked > 0)
        ckpt_parked_run(c);
    for (int i = 0; i < OUT_MAX; i++)
        if (f->fo[i].st == F_FAILED)
            f->fo[i].st = F_FREE; /* its workers were told */
}

int64_t ckpt_fetch_wake(const struct ckpt *c)
{
    const struct ckpt_fetch *f = c->fetch;
    if (!f)
        return -1;
    int64_t w = -1;
    for (int i = 0; i < SERVE_MAX; i++)
        if (f->sv[i].st != S_FREE && f->sv[i].deadline > 0 && (w < 0 || f->sv[i].deadline < w))
            w = f->sv[i].deadline + 1;
    for (int i = 0; i < OUT_MAX; i++)
        if (f->fo[i].st != F_FREE) {
            int64_t t = f->fo[i].st == F_FAILED  ? f->now
                        : f->fo[i].st == F_RETRY ? f->fo[i].retry_at
                                                 : f->fo[i].deadline + 1;
            if (w < 0 || t < w)
                w = t;
        }
    if (c->nparked > 0 && f->view_round == f->round && !f->view_ready &&
        (w < 0 || f->view_next < w))
        w = f->view_next;
    if (c->nparked > 0 && f->pub_round == f->round && f->pub_state == P_WAIT) {
        int64_t t = f->pub_since < 0 ? f->now : f->pub_since + PUB_WAIT_MS;
        if (w < 0 || t < w)
            w = t;
    }
    return w;
}
