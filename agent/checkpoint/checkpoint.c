// SPDX-License-Identifier: Apache-2.0
/* checkpoint: the workers' socket, memfds and their seals, requests and replies, notes. */
#include "checkpoint.h"
#include "ckpt_disk.h"
#include "ckpt_proto.h"
#include "ckpt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

void ckpt_note_add(struct ckpt *c, enum ckpt_note_kind kind, int64_t step, int shard, int shards,
                   uint64_t bytes, const char *fmt, ...)
{
    if (c->nnotes == NOTES_MAX) /* the glue is behind: the oldest goes */
        memmove(c->notes, c->notes + 1, --c->nnotes * sizeof(*c->notes));
    struct ckpt_note *n = &c->notes[c->nnotes++];
    *n = (struct ckpt_note){.kind = kind, .step = step, .shard = shard, .shards = shards,
                            .bytes = bytes};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->message, sizeof(n->message), fmt, ap);
    va_end(ap);
}

int ckpt_next_note(struct ckpt *c, struct ckpt_note *ret)
{
    if (!c || c->nnotes == 0)
        return 0;
    *ret = c->notes[0];
    memmove(c->notes, c->notes + 1, --c->nnotes * sizeof(*c->notes));
    return 1;
}

/* A shard read back from --checkpoint-dir enters the store as a committed save. */
static int adopt(void *ctx, const struct ckpt_shard_hdr *h, int fd)
{
    struct ckpt *c = ctx;
    struct ea_error e = {0};
    uint64_t id = 0;
    int r = ckpt_store_reserve(&c->store, 0, h->step, h->shard, h->shards, h->len, &id, &e);
    if (r < 0) {
        close(fd);
        return r;
    }
    ckpt_store_set_fd(&c->store, id, fd);
    r = ckpt_store_commit(&c->store, 0, id, h->len, true, h->crc, h->crc, &e);
    for (size_t i = 0; r >= 0 && i < c->store.n; i++)
        if (c->store.e[i].id == id)
            c->store.e[i].persisted = true;
    return r < 0 ? r : 0;
}

int ckpt_create(const struct ckpt_config *cfg, struct ckpt **ret, int64_t *ret_restored,
                struct ea_error *err)
{
    struct ckpt *c = calloc(1, sizeof(*c));
    if (!c)
        return ea_errorf(err, -ENOMEM, "out of memory");
    c->cfg = *cfg;
    c->lfd = -1;
    for (int i = 0; i < CKPT_MAX_CLIENTS; i++)
        c->cl[i].fd = -1;
    c->next_owner = 1;
    c->spare_step = -1;
    snprintf(c->run, sizeof(c->run), "%s", cfg->run_id);
    ckpt_store_init(&c->store, cfg->run_id, cfg->memory);
    snprintf(c->dir, sizeof(c->dir), "%s", cfg->socket_dir);
    int r = 0;
    if ((size_t)snprintf(c->path, sizeof(c->path), "%s/sock", c->dir) >= sizeof(c->path))
        r = ea_errorf(err, -ENAMETOOLONG, "checkpoint socket path '%s/sock' is too long", c->dir);
    else if (mkdir(c->dir, 0700) < 0)
        r = ea_errorf(err, -errno, "cannot create '%s': %s", c->dir, strerror(errno));
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, c->path, strlen(c->path));
    if (r == 0 && ((c->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0 ||
                   bind(c->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(c->path, 0600) < 0 ||
                   listen(c->lfd, 64) < 0))
        r = ea_errorf(err, -errno, "checkpoint socket '%s': %s", c->path, strerror(errno));
    int64_t restored = -1;
    if (r == 0 && cfg->persist_dir) {
        snprintf(c->persist_dir, sizeof(c->persist_dir), "%s", cfg->persist_dir);
        c->cfg.persist_dir = c->persist_dir;
        r = ckpt_writer_create(c->persist_dir, &c->writer, err);
        int skipped = 0;
        int found = r == 0 ? ckpt_disk_read_latest(c->persist_dir, c->run, cfg->memory, adopt, c,
                                                   &restored, &skipped, err)
                           : 0;
        if (found < 0)
            r = found;
        if (skipped > 0)
            ckpt_note_add(c, CKPT_NOTE_BAD, -1, -1, 0, 0, "--checkpoint-dir: %d newer step(s) of run '%s' "
                 "skipped (a shard missing, corrupt, of another run, or larger than "
                 "--checkpoint-memory)", skipped, c->run);
    }
    if (r < 0) {
        ckpt_destroy(c);
        return r;
    }
    *ret = c;
    *ret_restored = restored;
    return 0;
}

static void unpark(struct ckpt *c, struct client *cl)
{
    if (cl->wait != WAIT_NONE)
        c->nparked--;
    cl->wait = WAIT_NONE;
}

static void client_close(struct ckpt *c, struct client *cl)
{
    unpark(c, cl);
    ckpt_store_drop_owner(&c->store, cl->owner);
    close(cl->fd);
    cl->fd = -1;
}

void ckpt_destroy(struct ckpt *c)
{
    if (!c)
        return;
    ckpt_writer_destroy(c->writer); /* finishes the queued shards first */
    ckpt_repl_destroy(c);
    for (int i = 0; i < CKPT_MAX_CLIENTS; i++)
        if (c->cl[i].fd >= 0)
            client_close(c, &c->cl[i]);
    if (c->lfd >= 0) {
        close(c->lfd);
        unlink(c->path);
    }
    rmdir(c->dir);
    ckpt_store_clear(&c->store);
    free(c);
}

const char *ckpt_socket_path(const struct ckpt *c)
{
    return c->path;
}

size_t ckpt_pollfds(const struct ckpt *c, struct pollfd *fds, size_t max)
{
    size_t n = 0;
    if (!c)
        return 0;
    if (c->lfd >= 0 && n < max)
        fds[n++] = (struct pollfd){.fd = c->lfd, .events = POLLIN};
    if (c->writer && n < max)
        fds[n++] = (struct pollfd){.fd = ckpt_writer_fd(c->writer), .events = POLLIN};
    for (int i = 0; i < CKPT_MAX_CLIENTS && n < max; i++)
        if (c->cl[i].fd >= 0) /* a waiting request: its hangup only, until it is answered */
            fds[n++] = (struct pollfd){.fd = c->cl[i].fd,
                                       .events = c->cl[i].wait == WAIT_NONE ? POLLIN : 0};
    n += ckpt_repl_pollfds(c, fds + n, max - n);
    return n + ckpt_fetch_pollfds(c, fds + n, max - n);
}

const struct ckpt_store *ckpt_store_of(const struct ckpt *c)
{
    return &c->store;
}

/* One reply message, with `fd` passed along (-1: none); a peer not reading is dropped. */
static int reply(struct client *cl, int fd, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int reply(struct client *cl, int fd, const char *fmt, ...)
{
    char buf[CKPT_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    struct iovec iov = {.iov_base = buf, .iov_len = (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1};
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        memset(&u, 0, sizeof(u));
        m.msg_control = u.b;
        m.msg_controllen = sizeof(u.b);
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(h), &fd, sizeof(int));
    }
    return sendmsg(cl->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 ? -errno : 0;
}

static const char *code_name(int r)
{
    switch (r) {
    case -EINVAL: return "EINVAL";
    case -ENOSPC: return "ENOSPC";
    case -ESTALE: return "ESTALE";
    case -EBUSY: return "EBUSY";
    case -ENOENT: return "ENOENT";
    case -EBADMSG: return "EBADMSG";
    case -EACCES: return "EACCES";
    default: return "EIO";
    }
}

static int reply_err(struct ckpt *c, struct client *cl, int code, const char *msg)
{
    ckpt_note_add(c, code == -ENOSPC ? CKPT_NOTE_NOFIT : CKPT_NOTE_BAD, -1, -1, 0, 0, "%s", msg);
    return reply(cl, -1, "err %s %s", code_name(code), msg);
}

static void maybe_persist(struct ckpt *c, const struct ckpt_entry *e)
{
    if (!c->writer || e->persisted)
        return;
    struct ckpt_shard_hdr h = {.step = e->step, .shard = e->shard, .shards = e->shards,
                               .len = e->len, .crc = e->crc, .crc_known = e->crc_known};
    snprintf(h.run, sizeof(h.run), "%s", c->run);
    if (ckpt_writer_queue(c->writer, &h, e->fd) == 0)
        ((struct ckpt_entry *)e)->persisted = true;
    else
        ckpt_note_add(c, CKPT_NOTE_PERSIST_FAILED, e->step, e->shard, e->shards, e->len,
             "--checkpoint-dir: the writer is behind: shard %d of step %" PRId64 " not written",
             e->shard, e->step);
}

static int on_save(struct ckpt *c, struct client *cl, const struct ckpt_req *q)
{
    struct ea_error e = {0};
    uint64_t id = 0;
    size_t gone = ckpt_store_supersede(&c->store, q->step, (int)q->shards);
    if (gone > 0)
        ckpt_note_add(c, CKPT_NOTE_SUPERSEDED, q->step, (int)q->shard, (int)q->shards, 0,
                      "step %" PRId64 " is saved again with %d shards: its %zu shard(s) of another shard count "
                      "(a partial step of an older world) dropped", q->step, (int)q->shards, gone);
    int spare = -1;
    int r = ckpt_store_reserve_save(&c->store, cl->owner, q->step, (int)q->shard, (int)q->shards,
                                    q->len, &id, &spare, &e);
    if (r < 0) {
        if (r == -ENOSPC)
            ckpt_note_add(c, CKPT_NOTE_NOFIT, q->step, (int)q->shard, (int)q->shards, q->len,
                 "save of shard %d of step %" PRId64 " refused: %s", (int)q->shard, q->step,
                 e.msg);
        return reply(cl, -1, "err %s %s", code_name(r), e.msg);
    }
    /* the spare, already backed, cut down to the length (the pages past it freed); else fresh */
    int fd = spare >= 0 ? spare : memfd_create("ckpt", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, (off_t)q->len) < 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0) {
        r = -errno;
        if (fd >= 0)
            close(fd);
        ckpt_store_drop(&c->store, id);
        ea_errorf(&e, r, "cannot make a memfd of %" PRIu64 " bytes: %s", q->len, strerror(-r));
        return reply_err(c, cl, -EIO, e.msg);
    }
    ckpt_store_set_fd(&c->store, id, fd);
    return reply(cl, fd, "ok %" PRIu64, id);
}

static int on_commit(struct ckpt *c, struct client *cl, const struct ckpt_req *q)
{
    struct ea_error e = {0};
    struct ckpt_entry *p = ckpt_store_pending(&c->store, cl->owner, q->id);
    if (!p)
        return reply(cl, -1, "err ENOENT no save %" PRIu64 " pending on this connection "
                     "(never made, or dropped: a newer step is complete)", q->id);
    /* from here the bytes cannot change: what is measured is what is served */
    if (fcntl(p->fd, F_ADD_SEALS, F_SEAL_WRITE) < 0)
        return reply(cl, -1, "err EBUSY cannot seal the shard (%s): unmap it before the commit",
                     strerror(errno));
    struct stat st;
    uint64_t size = fstat(p->fd, &st) == 0 ? (uint64_t)st.st_size : UINT64_MAX;
    uint32_t crc = 0;
    if (q->has_crc && size == p->len && size > 0) { /* else the seal alone vouches */
        void *m = mmap(NULL, size, PROT_READ, MAP_SHARED, p->fd, 0);
        if (m == MAP_FAILED) {
            size = UINT64_MAX;
        } else {
            crc = ckpt_crc32(0, m, size);
            munmap(m, size);
        }
    }
    int64_t step = p->step;
    int shard = p->shard, shards = p->shards;
    int fd = p->fd;
    int r = ckpt_store_commit(&c->store, cl->owner, q->id, size, q->has_crc, crc, q->crc, &e);
    if (r < 0) {
        ckpt_note_add(c, CKPT_NOTE_BAD, step, shard, shards, 0, "commit refused: %s", e.msg);
        return reply(cl, -1, "err %s %s", code_name(r), e.msg);
    }
    fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL);
    if (step > c->spare_step || (step == c->spare_step && size > c->spare_want)) {
        c->spare_step = step; /* the next spare: the newest step's largest save */
        c->spare_want = size;
    }
    const struct ckpt_entry *ce = ckpt_store_find(&c->store, step, shard);
    if (ce && c->cfg.persist_every > 0 && step % c->cfg.persist_every == 0)
        maybe_persist(c, ce);
    if (r == 1)
        ckpt_note_add(c, CKPT_NOTE_COMPLETE, step, -1, shards, 0, "step %" PRId64 " complete (%d shard(s))",
             step, shards);
    return reply(cl, -1, "ok %" PRId64 " %d", step, shard);
}

/* latest: 1 answered, 0 it waits (the members' summaries are being read). */
static int answer_latest(struct ckpt *c, struct client *cl)
{
    int rc = -ENOENT, shards = 0;
    int64_t step = -1;
    if (!ckpt_fetch_latest(c, &rc, &step, &shards))
        return 0;
    if (rc == 0)
        reply(cl, -1, "ok %" PRId64 " %d", step, shards);
    else
        reply(cl, -1, "none");
    return 1;
}

/* load: 1 answered (the shard, or why not), 0 it waits for a fetch. */
static int answer_load(struct ckpt *c, struct client *cl, int64_t step, int shard)
{
    const struct ckpt_entry *ent = ckpt_store_find(&c->store, step, shard);
    if (ent && ent->crc_known)
        reply(cl, ent->fd, "ok %" PRIu64 " %08" PRIx32, ent->len, ent->crc);
    else if (ent)
        reply(cl, ent->fd, "ok %" PRIu64 " -", ent->len);
    if (ent)
        return 1;
    struct ea_error e = {0};
    if (ckpt_fetch_want(c, step, shard, &e) == 0)
        return 0;
    reply(cl, -1, "err ENOENT %s", e.msg);
    return 1;
}

static void park(struct ckpt *c, struct client *cl, enum client_wait w, int64_t step, int shard)
{
    cl->wait = w;
    cl->wstep = step;
    cl->wshard = shard;
    c->nparked++;
}

void ckpt_parked_run(struct ckpt *c)
{
    for (int i = 0; i < CKPT_MAX_CLIENTS && c->nparked > 0; i++) {
        struct client *cl = &c->cl[i];
        if (cl->fd < 0 || cl->wait == WAIT_NONE)
            continue;
        if (cl->wait == WAIT_LATEST ? answer_latest(c, cl)
                                    : answer_load(c, cl, cl->wstep, cl->wshard))
            unpark(c, cl);
    }
}

static void on_request(struct ckpt *c, struct client *cl, const char *buf, size_t n)
{
    if (cl->wait != WAIT_NONE) {
        reply(cl, -1, "err EBUSY a request of this connection is being answered");
        return;
    }
    struct ckpt_req q;
    struct ea_error e = {0};
    int r = ckpt_req_parse(buf, n, &q, &e);
    if (r < 0) {
        reply_err(c, cl, r, e.msg);
        return;
    }
    if (q.op != CKPT_COMMIT && strcmp(q.run, c->run) != 0) {
        ea_errorf(&e, -EACCES, "run '%s' is not this agent's run '%s'", q.run, c->run);
        reply_err(c, cl, -EACCES, e.msg);
        return;
    }
    switch (q.op) {
    case CKPT_SAVE:
        on_save(c, cl, &q);
        ckpt_store_reap(&c->store); /* what it dropped, freed after the reply */
        return;
    case CKPT_COMMIT:
        on_commit(c, cl, &q);
        ckpt_store_reap(&c->store);
        return;
    case CKPT_LATEST: /* this store's newest complete step, or a newer one across members */
        if (!answer_latest(c, cl))
            park(c, cl, WAIT_LATEST, -1, -1);
        return;
    case CKPT_LOAD: /* a shard held here, else fetched from a member that holds it */
        if (!answer_load(c, cl, q.step, (int)q.shard))
            park(c, cl, WAIT_LOAD, q.step, (int)q.shard);
        return;
    }
}

static void on_accept(struct ckpt *c)
{
    for (;;) {
        int fd = accept4(c->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        struct ucred cr;
        socklen_t len = sizeof(cr);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 || cr.uid != c->cfg.uid) {
            ckpt_note_add(c, CKPT_NOTE_REFUSED, -1, -1, 0, 0, "checkpoint socket: a connection of uid %d "
                 "(pid %d) refused: only uid %d may save or load", (int)cr.uid, (int)cr.pid,
                 (int)c->cfg.uid);
            close(fd);
            continue;
        }
        int i = 0;
        while (i < CKPT_MAX_CLIENTS && c->cl[i].fd >= 0)
            i++;
        if (i == CKPT_MAX_CLIENTS) {
            ckpt_note_add(c, CKPT_NOTE_REFUSED, -1, -1, 0, 0, "checkpoint socket: a connection refused: "
                 "%d connections open already", CKPT_MAX_CLIENTS);
            close(fd);
            continue;
        }
        c->cl[i] = (struct client){.fd = fd, .owner = c->next_owner++};
    }
}

static void on_client(struct ckpt *c, struct client *cl)
{
    char buf[CKPT_MSG_MAX + 1];
    for (int k = 0; k < 16 && cl->fd >= 0; k++) { /* bounded work per connection per pass */
        ssize_t n = recv(cl->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) {
            client_close(c, cl); /* gone: its pending saves are dropped */
            return;
        }
        on_request(c, cl, buf, (size_t)n > sizeof(buf) ? sizeof(buf) : (size_t)n);
    }
}

static void on_writer(struct ckpt *c)
{
    struct ckpt_shard_hdr h;
    int rc = 0;
    struct ea_error e = {0};
    while (ckpt_writer_done(c->writer, &h, &rc, &e) > 0) {
        if (rc < 0)
            ckpt_note_add(c, CKPT_NOTE_PERSIST_FAILED, h.step, h.shard, h.shards, h.len,
                 "--checkpoint-dir: %s", e.msg);
        else
            ckpt_note_add(c, CKPT_NOTE_PERSISTED, h.step, h.shard, h.shards, h.len,
                 "shard %d of step %" PRId64 " written to --checkpoint-dir", h.shard, h.step);
    }
}

/* Whose fd: the listener, the writer, client i (i + 1), the replication port's; 0 none. */
static uint64_t tag_of(const struct ckpt *c, int fd, bool *is_listen)
{
    *is_listen = fd == c->lfd;
    if (*is_listen)
        return TAG_LISTEN;
    if (c->writer && fd == ckpt_writer_fd(c->writer))
        return TAG_WRITER;
    for (int i = 0; i < CKPT_MAX_CLIENTS; i++)
        if (c->cl[i].fd == fd)
            return (uint64_t)i + 1;
    uint64_t t = ckpt_repl_tag_of(c, fd);
    return t ? t : ckpt_fetch_tag_of(c, fd);
}

void ckpt_on_poll(struct ckpt *c, const struct pollfd *fds, size_t n)
{
    for (size_t i = 0; c && i < n; i++) {
        if (!fds[i].revents || fds[i].fd < 0)
            continue;
        /* an earlier event of this batch may have closed it (a client gone) */
        bool is_listen = false;
        uint64_t tag = tag_of(c, fds[i].fd, &is_listen);
        if (is_listen)
            on_accept(c);
        else if (tag == TAG_WRITER)
            on_writer(c);
        else if (tag >= 1 && tag <= CKPT_MAX_CLIENTS)
            on_client(c, &c->cl[tag - 1]);
        else if (tag >= CKPT_TAG_FETCH)
            ckpt_fetch_on_event(c, tag, (uint32_t)fds[i].revents);
        else if (tag >= CKPT_TAG_REPL)
            ckpt_repl_on_event(c, tag, (uint32_t)fds[i].revents);
    }
}

void ckpt_flush(struct ckpt *c)
{
    if (!c || !c->writer)
        return;
    ckpt_writer_finish(c->writer);
    on_writer(c);
}

int ckpt_breakpoint(struct ckpt *c)
{
    int queued = 0;
    for (size_t i = 0; c && c->writer && i < c->store.n; i++) {
        const struct ckpt_entry *e = &c->store.e[i];
        if (e->committed && !e->persisted) {
            maybe_persist(c, e);
            queued += e->persisted;
        }
    }
    return queued;
}

/* ---- the spare memfd (docs/checkpoint.md "The spare") -------------------------------------- */

/* The spare could not be made or backed: dropped, and not tried again before the next commit
 * (the next save gets a fresh memfd, as without a spare). */
static void spare_failed(struct ckpt *c, int errnum)
{
    ckpt_note_add(c, CKPT_NOTE_SPARE_FAILED, -1, -1, 0, c->store.spare_len,
                  "no spare memfd of %" PRIu64 " bytes: %s (the next save allocates its own)",
                  c->store.spare_len, strerror(errnum));
    ckpt_store_spare_drop(&c->store);
    c->spare_want = 0;
}

void ckpt_spare_step(struct ckpt *c)
{
    if (!c)
        return;
    struct ckpt_store *s = &c->store;
    ckpt_store_reap(s); /* memfds the replication or a fetch dropped since the last pass */
    if (c->spare_want == 0)
        return;
    if (s->spare_len > 0 && s->spare_len < c->spare_want)
        ckpt_store_spare_drop(s); /* the saves grew past it: one of their length instead */
    if (s->spare_len == 0) {
        if (ckpt_store_spare_begin(s, c->spare_want) < 0)
            return; /* it does not fit beside what is held: again at a later pass */
        int fd = memfd_create("ckpt", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0 || ftruncate(fd, (off_t)s->spare_len) < 0) {
            int r = errno;
            if (fd >= 0)
                close(fd);
            spare_failed(c, r);
            return;
        }
        ckpt_store_spare_set(s, fd);
    }
    if (s->spare_done >= s->spare_len)
        return;
    /* one piece a pass: the loop is held for one piece's allocation, not the whole spare's */
    uint64_t n = s->spare_len - s->spare_done;
    n = n < CKPT_SPARE_PIECE ? n : CKPT_SPARE_PIECE;
    if (fallocate(s->spare_fd, 0, (off_t)s->spare_done, (off_t)n) < 0) {
        spare_failed(c, errno);
        return;
    }
    s->spare_done += n;
}

int64_t ckpt_spare_wake(const struct ckpt *c, int64_t now)
{
    return c && c->store.spare_fd >= 0 && c->store.spare_done < c->store.spare_len ? now : -1;
}
