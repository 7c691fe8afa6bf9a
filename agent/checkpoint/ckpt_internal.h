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
/* the fetch's: CKPT_TAG_FETCH + i (ckpt_fetch.c) */
#define CKPT_TAG_FETCH (UINT64_C(2) << 32)

enum client_wait { WAIT_NONE, WAIT_LATEST, WAIT_LOAD };

struct client {
    int fd;        /* -1: free slot */
    uint64_t owner; /* its saves' owner in the store (unique over the agent's life) */
    /* a request that waits for the members' summaries or a fetch (ckpt_fetch.c) */
    enum client_wait wait;
    int64_t wstep;
    int wshard;
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
    struct ckpt_fetch *fetch; /* fetching from members (ckpt_fetch.c), NULL when off */
    size_t nparked;         /* clients whose request waits (client.wait) */
    /* the spare's length: the largest save committed of the newest step saved (0: none yet, or
     * the last spare failed) */
    uint64_t spare_want;
    int64_t spare_step;
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
/* The round the replication port follows (-1 none). */
int64_t ckpt_repl_round_of(const struct ckpt *c);
/* This node's id (the replication port's). */
const char *ckpt_repl_node(const struct ckpt *c);

/* ckpt_fetch.c */
void ckpt_fetch_destroy(struct ckpt *c);
/* The replication port read a fetch request's first bytes on `fd`: take the connection over.
 * 0 taken, <0 not (the caller closes it). */
int ckpt_fetch_adopt(struct ckpt *c, int fd, const uint8_t *buf, size_t have);
void ckpt_fetch_round(struct ckpt *c, int64_t round);
void ckpt_fetch_step(struct ckpt *c, int64_t now);
int64_t ckpt_fetch_wake(const struct ckpt *c);
size_t ckpt_fetch_pollfds(const struct ckpt *c, struct pollfd *fds, size_t max);
uint64_t ckpt_fetch_tag_of(const struct ckpt *c, int fd);
void ckpt_fetch_on_event(struct ckpt *c, uint64_t tag, uint32_t events);
/* A worker's latest(): 1 with *ret_rc (0 and *ret_step, *ret_shards; -ENOENT none), 0 not known
 * yet (the members' summaries are being read: the request waits). */
int ckpt_fetch_latest(struct ckpt *c, int *ret_rc, int64_t *ret_step, int *ret_shards);
/* A worker's load of (step, shard) that this store does not hold: 0 it waits (a fetch is under
 * way, or the summaries are being read), <0 it cannot be had (the reason in err). */
int ckpt_fetch_want(struct ckpt *c, int64_t step, int shard, struct ea_error *err);
/* checkpoint.c: answer the waiting requests that can be answered now. */
void ckpt_parked_run(struct ckpt *c);

#endif
