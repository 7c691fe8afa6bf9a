// SPDX-License-Identifier: Apache-2.0
/*
 * checkpoint: this agent's checkpoint store (--checkpoint-memory, docs/checkpoint.md). It listens
 * on a unix socket (SOCK_SEQPACKET) in a 0700 directory of the agent's, named to the workers in
 * ELASTIC_AGENT_CHECKPOINT_SOCKET; a peer of another uid is refused (SO_PEERCRED). A save gets a
 * memfd of its length (shrink and grow sealed), the worker writes its bytes into it, and its
 * commit has the agent seal it against writes, measure it and verify length and checksum
 * (ckpt_store.h decides). A load hands back the sealed memfd. --checkpoint-dir is written by a
 * thread (ckpt_disk.h) every k-th step and at a breakpoint, and read back at start. Whatever a
 * worker sends is hostile input: a clear error reply, never a crash. No logging: the glue
 * (agent/checkpoint/checkpoint_agent.c) logs the notes.
 */
#ifndef EA_AGENT_CHECKPOINT_H
#define EA_AGENT_CHECKPOINT_H

#include <poll.h>
#include <stdint.h>
#include <sys/types.h>

#include "ckpt_store.h"
#include "ea_error.h"

#define CKPT_ENV "ELASTIC_AGENT_CHECKPOINT_SOCKET"
#define CKPT_MAX_CLIENTS 256

struct ckpt_config {
    const char *socket_dir; /* created 0700 (must not exist); the socket is socket_dir/sock */
    const char *run_id;     /* the only run whose shards are saved and served */
    uint64_t memory;        /* bytes: the memory bound */
    const char *persist_dir; /* --checkpoint-dir, or NULL */
    int persist_every;      /* write every k-th step (step % k == 0) to persist_dir */
    uid_t uid;              /* the only peer uid admitted */
};

enum ckpt_note_kind {
    CKPT_NOTE_COMPLETE,  /* a step became the newest complete one */
    CKPT_NOTE_NOFIT,     /* a save refused: it does not fit the memory bound */
    CKPT_NOTE_BAD,       /* a malformed or refused request (the worker got the reason) */
    CKPT_NOTE_REFUSED,   /* a connection of another uid, or past CKPT_MAX_CLIENTS */
    CKPT_NOTE_PERSISTED, /* a shard written to --checkpoint-dir */
    CKPT_NOTE_PERSIST_FAILED,
    CKPT_NOTE_REPLICA,         /* a replica received from the ring predecessor and stored */
    CKPT_NOTE_REPLICATED,      /* a shard of ours sent to the ring successor and stored there */
    CKPT_NOTE_REPLICA_REFUSED, /* the successor refused a shard of ours (the reason) */
    CKPT_NOTE_FETCHED,         /* a shard fetched from another member for a worker's load */
    CKPT_NOTE_FETCH_FAILED,    /* a fetch failed (the worker got the reason) */
    CKPT_NOTE_SUPERSEDED,      /* a partial step of an older world dropped: saved again */
    CKPT_NOTE_LATEST_ALONE,    /* latest() answered from this store alone (nothing published) */
    CKPT_NOTE_SPARE_FAILED,    /* the spare memfd could not be made or backed */
};

struct ckpt_note {
    enum ckpt_note_kind kind;
    int64_t step;
    int shard, shards;
    uint64_t bytes;
    char message[320];
};

struct ckpt;

/* Create the socket, and with persist_dir its writer, then read the newest whole step of the
 * run from it (*ret_restored: that step, -1 none; skipped steps are notes). 0 or -errno. */
int ckpt_create(const struct ckpt_config *cfg, struct ckpt **ret, int64_t *ret_restored,
                struct ea_error *err);
/* Wait for the writer's queued jobs, close everything, remove the socket; NULL is a no-op. */
void ckpt_destroy(struct ckpt *c);
/* The socket's path (for the workers' environment). */
const char *ckpt_socket_path(const struct ckpt *c);
/* Its fds to poll (the workers' socket and connections, the disk writer's, the replication
 * port's): at most max into fds, how many (0 for NULL). CKPT_POLL_MAX holds every one. */
#define CKPT_POLL_MAX (CKPT_MAX_CLIENTS + 32)
size_t ckpt_pollfds(const struct ckpt *c, struct pollfd *fds, size_t max);
/* The poll's answer for those fds: accept, read and answer requests, collect the writer's
 * results, move replication on; never blocks. */
void ckpt_on_poll(struct ckpt *c, const struct pollfd *fds, size_t n);
/* The oldest note not yet taken: 1 and *ret, else 0. */
int ckpt_next_note(struct ckpt *c, struct ckpt_note *ret);
/* A breakpoint (workers failed, leaving): queue every committed shard not yet written to
 * --checkpoint-dir. How many were queued (0 without a dir). */
int ckpt_breakpoint(struct ckpt *c);
/* Leaving: wait for --checkpoint-dir's queued writes (their results become notes, to be taken
 * before ckpt_destroy). */
void ckpt_flush(struct ckpt *c);
/*
 * Replication (docs/checkpoint.md "Replication"): the shards of this node's newest saved step go
 * to its ring successor's port, and its predecessor's come in here and count in the memory bound
 * (a replica that does not fit is refused, said to both sides). All of it non-blocking, driven by
 * ckpt_on_poll (the port's fds are among ckpt_pollfds) and ckpt_repl_step.
 */
struct ckpt_repl_config {
    int listen_fd;          /* a listening TCP socket (non-blocking), owned from here on */
    const char *node_id;    /* this node's id (hellos) */
    int replicas;           /* 0: receive only; 1: send to the ring successor */
    uint64_t bytes_per_sec; /* the send cap; 0 unbounded */
    int64_t hello_ms;       /* an inbound connection's hello and each of its shards' bytes must
                               come within this (a peer that stalls is closed) */
};
int ckpt_repl_start(struct ckpt *c, const struct ckpt_repl_config *rc, struct ea_error *err);
/* The round now (-1: none running), this node's ring predecessor and successor ("" none) and the
 * successor's address and port (0: unknown). Connections of another round are closed. */
void ckpt_repl_round(struct ckpt *c, int64_t round, const char *prev, const char *next,
                     const char *next_addr, int next_port);
/* Connect, send within the cap, close stalled connections, at monotonic ms `now`. */
void ckpt_repl_step(struct ckpt *c, int64_t now);
/* Monotonic ms at which ckpt_repl_step has work for the clock (the cap, a retry), -1 none. */
int64_t ckpt_repl_wake(const struct ckpt *c);
struct ckpt_repl_stats {
    uint64_t sent_shards, sent_bytes, recv_shards, recv_bytes, refused;
};
void ckpt_repl_stats(const struct ckpt *c, struct ckpt_repl_stats *ret);

/*
 * Fetch (docs/checkpoint.md "Fetch"): a worker's latest() is the newest step complete across the
 * run as the coordinator published it for the round (`rounds/<r>/ckpt`, in this node's mirror:
 * no read), and its load() of a shard this node does not hold fetches it from a node that does
 * (the members' summaries, listed once a round then only), over the replication port. The glue
 * answers four questions from the store; each may read it (small, bounded reads).
 */
struct ckpt_summary;
struct ckpt_fetch_ops {
    void *ctx;
    /* The summaries of the run's other live nodes (`ckpt/<id>` keys, decoded strictly, their
     * lease set): 0 with a malloc'ed array in *ret (the caller frees it), or <0 with err. */
    int (*view)(void *ctx, struct ckpt_summary **ret, size_t *ret_n, struct ea_error *err);
    /* Where node `id` takes fetches (its node record's address and ckpt_port), checked to be the
     * node that wrote the summary (its node key's lease is `lease`): 1 with addr and *ret_port,
     * 0 it is not (gone, no port, another lease), <0 a store error. */
    int (*where)(void *ctx, const char *id, int64_t lease, char addr[64], int *ret_port,
                 struct ea_error *err);
    /* Is node `id` a member of round `round`: 1 yes, 0 no, <0 cannot tell (a store error). */
    int (*is_member)(void *ctx, const char *id, int64_t round, struct ea_error *err);
    /* The run's newest complete step the coordinator published for round `round`, checked
     * (ckpt_pub_accept): 1 with *ret_step (-1: none complete) and *ret_shards, 0 not there yet,
     * <0 there but not to be trusted (err says why). No listing: one value a round. */
    int (*published)(void *ctx, int64_t round, int64_t *ret_step, int *ret_shards,
                     struct ea_error *err);
};
/* Start fetching (after ckpt_repl_start: it shares the port). timeout_ms bounds a fetch and a
 * served connection (0: 10 s). */
int ckpt_fetch_start(struct ckpt *c, const struct ckpt_fetch_ops *ops, int64_t timeout_ms,
                     struct ea_error *err);
/* This node's summary for round `round`, encoded for its `ckpt/<id>` key: 0 and a malloc'ed
 * string, or <0. */
int ckpt_fetch_summary(const struct ckpt *c, int64_t round, char **ret_json, struct ea_error *err);
struct ckpt_fetch_stats {
    uint64_t fetched, fetched_bytes, served, refused, failed, views, published;
};
void ckpt_fetch_stats(const struct ckpt *c, struct ckpt_fetch_stats *ret);

/*
 * The spare memfd (docs/checkpoint.md "The spare"): once a save is committed, a memfd of the
 * newest step's largest save is made, if it fits --checkpoint-memory beside what is held, and
 * backed (fallocate) CKPT_SPARE_PIECE bytes a call, so that the next save of at most that length
 * gets a memfd whose pages exist already (the worker's pwrite then allocates nothing). Called
 * once a pass of the agent's loop, off any request; ckpt_spare_wake says when it has more to do
 * (`now`: a piece is left) or -1.
 */
#define CKPT_SPARE_PIECE (UINT64_C(16) << 20)
void ckpt_spare_step(struct ckpt *c);
int64_t ckpt_spare_wake(const struct ckpt *c, int64_t now);

/* The store (tests, the glue's status). */
const struct ckpt_store *ckpt_store_of(const struct ckpt *c);

#endif
