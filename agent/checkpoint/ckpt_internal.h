// SPDX-License-Identifier: Apache-2.0
/* ckpt_internal: the checkpoint store's state, shared by checkpoint.c (the workers' socket) and
 * ckpt_repl.c (the replication port). Not for the glue. */
#ifndef EA_AGENT_CKPT_INTERNAL_H
#define EA_AGENT_CKPT_INTERNAL_H

#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "checkpoint.h"
#include "ckpt_disk.h"

#define NOTES_MAX 64
#define TAG_LISTEN UINT64_C(0)
#define TAG_WRITER UINT64_MAX
/* the replication port's fds: CKPT_TAG_REPL + 0 its listener, + 1 + i connection i */
#define CKPT_TAG_REPL (UINT64_C(1) << 32)

struct client {
    int fd;        /* -1: free slot */
    uint64_t owner; /* its saves' owner in the store (unique over the agent's life) */
};

struct ckpt {
    struct ckpt_config cfg;
    char dir[PATH_MAX];
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char run[CKPT_RUN_MAX];
    char persist_dir[PATH_MAX];
    struct ckpt_store store;
    int lfd;
    struct client cl[CKPT_MAX_CLIENTS];
    uint64_t next_owner;
    struct ckpt_writer *writer;
    struct ckpt_repl *repl; /* the replication port (ckpt_repl.c), NULL when off */
    struct ckpt_note notes[NOTES_MAX];
    size_t nnotes;
};

void ckpt_note_add(struct ckpt *c, enum ckpt_note_kind kind, int64_t step, int shard, int shards,
                   uint64_t bytes, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* ckpt_repl.c */
void ckpt_repl_on_event(struct ckpt *c, uint64_t tag, uint32_t events);
/* The replication port's fds to poll (its listener, connections, the sender), and whose fd is
 * whose (0: none of them). */
size_t ckpt_repl_pollfds(const struct ckpt *c, struct pollfd *fds, size_t max);
uint64_t ckpt_repl_tag_of(const struct ckpt *c, int fd);
void ckpt_repl_destroy(struct ckpt *c);

#endif
