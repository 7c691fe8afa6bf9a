// SPDX-License-Identifier: Apache-2.0
/*
 * elastic_agent_checkpoint.h: a worker written in C saves and loads checkpoints held in
 * elastic-agent's memory (--checkpoint-memory), as Python's elastic_agent.checkpoint does. Header
 * only, libc only; the protocol is docs/checkpoint.md's:
 *
 *     char err[256];
 *     int64_t step; int shards;
 *     if (ea_ckpt_latest(&step, &shards, err, sizeof(err)) == 1) {
 *         const void *p; size_t n;
 *         if (ea_ckpt_load(step, -1, &p, &n, err, sizeof(err)) == 0) { restore(p, n); ea_ckpt_unmap(p, n); }
 *     }
 *     ...
 *     if (ea_ckpt_save(step, buf, len, -1, 0, err, sizeof(err)) < 0) fprintf(stderr, "%s\n", err);
 *
 * shard -1 is $RANK, shards 0 is $WORLD_SIZE; the run is $TORCHELASTIC_RUN_ID. Errors are
 * -errno with the agent's reason in err (-ENOSPC: the save does not fit --checkpoint-memory).
 * One connection per process, opened at the first call; not thread-safe.
 */
#ifndef ELASTIC_AGENT_CHECKPOINT_H
#define ELASTIC_AGENT_CHECKPOINT_H

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define EA_CKPT_MSG_MAX 512

static int ea_ckpt__fd = -1;
static pid_t ea_ckpt__pid;

static inline int ea_ckpt__fail(char *err, size_t size, int e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline int ea_ckpt__fail(char *err, size_t size, int e, const char *fmt, ...)
{
    if (err && size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, size, fmt, ap);
        va_end(ap);
    }
    return -e;
}

/* zlib's CRC-32 (the agent checks it at the commit) */
static inline uint32_t ea_ckpt_crc32(uint32_t crc, const void *data, size_t n)
{
    static uint32_t t[256];
    if (!t[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
    const unsigned char *p = (const unsigned char *)data;
    crc = ~crc;
    while (n--)
        crc = t[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* Send `req`, wait for the reply (into buf) and the fd that came with it (*ret_fd, -1 none).
 * An "err CODE TEXT" reply is returned as -errno with TEXT in err. */
static inline int ea_ckpt__ask(const char *req, char *buf, size_t size, int *ret_fd, char *err,
                        size_t errsize)
{
    if (ea_ckpt__fd < 0 || ea_ckpt__pid != getpid()) {
        const char *path = getenv("ELASTIC_AGENT_CHECKPOINT_SOCKET");
        if (!path || !*path)
            return ea_ckpt__fail(err, errsize, ENOENT, "no ELASTIC_AGENT_CHECKPOINT_SOCKET: the "
                                 "agent runs without --checkpoint-memory");
        struct sockaddr_un sa;
        memset(&sa, 0, sizeof(sa));
        sa.sun_family = AF_UNIX;
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            return ea_ckpt__fail(err, errsize, e, "cannot connect to '%s': %s", path, strerror(e));
        }
        ea_ckpt__fd = fd;
        ea_ckpt__pid = getpid();
    }
    if (send(ea_ckpt__fd, req, strlen(req), MSG_NOSIGNAL) < 0)
        return ea_ckpt__fail(err, errsize, errno, "checkpoint socket: %s", strerror(errno));
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {buf, size - 1};
    struct msghdr m;
    memset(&m, 0, sizeof(m));
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = u.b;
    m.msg_controllen = sizeof(u.b);
    ssize_t n;
    while ((n = recvmsg(ea_ckpt__fd, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    if (n <= 0)
        return ea_ckpt__fail(err, errsize, n < 0 ? errno : EPIPE, "checkpoint socket closed");
    buf[n] = 0;
    *ret_fd = -1;
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    if (h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS)
        memcpy(ret_fd, CMSG_DATA(h), sizeof(int));
    if (strncmp(buf, "err ", 4) == 0) {
        if (*ret_fd >= 0)
            close(*ret_fd);
        static const struct { const char *n; int e; } codes[] = {
            {"ENOSPC", ENOSPC}, {"EINVAL", EINVAL}, {"ESTALE", ESTALE}, {"EBUSY", EBUSY},
            {"ENOENT", ENOENT}, {"EBADMSG", EBADMSG}, {"EACCES", EACCES}};
        int e = EIO;
        for (size_t i = 0; i < sizeof(codes) / sizeof(*codes); i++)
            if (strncmp(buf + 4, codes[i].n, strlen(codes[i].n)) == 0)
                e = codes[i].e;
        const char *text = strchr(buf + 4, ' ');
        return ea_ckpt__fail(err, errsize, e, "%s", text ? text + 1 : buf);
    }
    return 0;
}

static inline const char *ea_ckpt__run(void)
{
    const char *r = getenv("TORCHELASTIC_RUN_ID");
    return r ? r : "";
}

static inline int ea_ckpt__env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

/* Save len bytes as shard `shard` (-1: $RANK) of `shards` (0: $WORLD_SIZE) of step `step`. */
static inline int ea_ckpt_save(int64_t step, const void *data, size_t len, int shard, int shards,
                        char *err, size_t errsize)
{
    char req[EA_CKPT_MSG_MAX], buf[EA_CKPT_MSG_MAX];
    int fd = -1;
    if (shard < 0)
        shard = ea_ckpt__env_int("RANK", 0);
    if (shards <= 0)
        shards = ea_ckpt__env_int("WORLD_SIZE", 1);
    snprintf(req, sizeof(req), "save %s %" PRId64 " %d %d %zu", ea_ckpt__run(), step, shard,
             shards, len);
    int r = ea_ckpt__ask(req, buf, sizeof(buf), &fd, err, errsize);
    if (r < 0)
        return r;
    if (fd < 0 || strncmp(buf, "ok ", 3) != 0)
        return ea_ckpt__fail(err, errsize, EPROTO, "unexpected reply '%s'", buf);
    for (size_t off = 0; off < len;) { /* into the agent's memfd (no page faults of a map) */
        ssize_t w = pwrite(fd, (const char *)data + off, len - off, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            close(fd);
            return ea_ckpt__fail(err, errsize, e, "writing the shard: %s", strerror(e));
        }
        off += (size_t)w;
    }
    close(fd);
    snprintf(req, sizeof(req), "commit %s %08" PRIx32, buf + 3, ea_ckpt_crc32(0, data, len));
    r = ea_ckpt__ask(req, buf, sizeof(buf), &fd, err, errsize);
    if (r == 0 && fd >= 0)
        close(fd);
    return r;
}

/* The newest step complete across the run (every shard held by this node's agent or another live
 * node's, docs/checkpoint.md "Fetch"): 1 with *ret_step and *ret_shards, 0 none. */
static inline int ea_ckpt_latest(int64_t *ret_step, int *ret_shards, char *err, size_t errsize)
{
    char req[EA_CKPT_MSG_MAX], buf[EA_CKPT_MSG_MAX];
    int fd = -1;
    snprintf(req, sizeof(req), "latest %s", ea_ckpt__run());
    int r = ea_ckpt__ask(req, buf, sizeof(buf), &fd, err, errsize);
    if (r < 0)
        return r;
    if (fd >= 0)
        close(fd);
    long long s = 0;
    int n = 0;
    if (strcmp(buf, "none") == 0)
        return 0;
    if (sscanf(buf, "ok %lld %d", &s, &n) != 2)
        return ea_ckpt__fail(err, errsize, EPROTO, "unexpected reply '%s'", buf);
    *ret_step = s;
    *ret_shards = n;
    return 1;
}

/* Shard `shard` (-1: $RANK) of step `step`, mapped read-only: *ret_data, *ret_len (unmap with
 * ea_ckpt_unmap). A shard this node does not hold is fetched from a node that does first. */
static inline int ea_ckpt_load(int64_t step, int shard, const void **ret_data, size_t *ret_len,
                        char *err, size_t errsize)
{
    char req[EA_CKPT_MSG_MAX], buf[EA_CKPT_MSG_MAX];
    int fd = -1;
    if (shard < 0)
        shard = ea_ckpt__env_int("RANK", 0);
    snprintf(req, sizeof(req), "load %s %" PRId64 " %d", ea_ckpt__run(), step, shard);
    int r = ea_ckpt__ask(req, buf, sizeof(buf), &fd, err, errsize);
    if (r < 0)
        return r;
    unsigned long long len = 0;
    if (fd < 0 || sscanf(buf, "ok %llu", &len) != 1) {
        if (fd >= 0)
            close(fd);
        return ea_ckpt__fail(err, errsize, EPROTO, "unexpected reply '%s'", buf);
    }
    void *m = len ? mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, fd, 0) : NULL;
    int e = errno;
    close(fd);
    if (m == MAP_FAILED)
        return ea_ckpt__fail(err, errsize, e, "mmap: %s", strerror(e));
    *ret_data = m;
    *ret_len = (size_t)len;
    return 0;
}

static inline void ea_ckpt_unmap(const void *data, size_t len)
{
    if (data && len)
        munmap((void *)data, len);
}

#endif
