// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv state: the records the rendezvous keeps in the store (DESIGN.md §3) and their JSON codec:
 * the run's `state` (round, status, members in rank order, restart budget), a node's `nodes/<id>`
 * record and a `failures/<r>` record. Decoding validates everything: a foreign or corrupt value is
 * an error naming what is wrong, never trusted. No I/O here.
 */
#ifndef EA_RENDEZVOUS_STATE_H
#define EA_RENDEZVOUS_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"

#define RDZV_SCHEMA "elastic-agent/v2"
/* The schema of the protocol before the fleet-scale layout (the state listed every member): a
 * run written by it is refused with a message saying so, never guessed at. */
#define RDZV_SCHEMA_V1 "elastic-agent/v1"
/* Largest values the decoders accept: the state is a small commit record (no member list); an
 * assignment chunk lists ~32 members (~60 bytes each) but is allowed far more, since the chunk
 * of a member follows its node key's create_revision; a node or failure record is a few KiB at
 * most (the failure message is bounded). etcd refuses requests over 1.5 MiB by default. */
#define RDZV_STATE_BYTES_MAX (64u << 10)
#define RDZV_CHUNK_BYTES_MAX (1536u << 10)
#define RDZV_RECORD_BYTES_MAX (64u << 10)
#define RDZV_ID_MAX 128
#define RDZV_HOST_MAX 256
#define RDZV_ADDR_MAX 64
/* A failure domain label (--failure-domain, issue 41): rdzv_domain_ok() (domain.h) says which. */
#define RDZV_DOMAIN_MAX 64

enum rdzv_status {
    RDZV_WAITING = 0, /* fewer than min live nodes: no round runs */
    RDZV_RUNNING,     /* round `round` runs with `members` */
    RDZV_SUCCEEDED,   /* every member of the last round finished with exit 0: everybody exits 0 */
    RDZV_FAILED,      /* restart budget exhausted: everybody stops and exits 1 */
    RDZV_CLOSED,      /* closed by an operator: everybody stops and exits 4 */
    /* issue 19: a worker failed with the restart budget spent; everybody stops its workers and
     * none start while the failure's charge is provisional (rdzv_plan: a member lost within the
     * window refunds it and the run goes on, else FAILED). Last: the values above keep theirs. */
    RDZV_FAILING,
};

/* One node of a round, in rank order. */
struct rdzv_member {
    char node_id[RDZV_ID_MAX];
    char host[RDZV_HOST_MAX];
    char addr[RDZV_ADDR_MAX]; /* address workers use to reach this node (MASTER_ADDR if rank 0) */
    int nproc;
    int group_rank;
    int rank_base; /* global rank of its local rank 0 = sum of nproc of earlier members */
    int64_t slot;  /* create_revision of its node key: picks its assignment chunk */
    /* the liveness ring (docs/protocol.md): the members after and before it in chunk order (the
       members of chunk k as listed, then those of the next non-empty chunk, wrapping); set by
       rdzv_chunk_decode() from the entries beside it and the chunk's "ring"; "" when the round
       has one member or its coordinator runs without the ring */
    char next[RDZV_ID_MAX], prev[RDZV_ID_MAX];
    int next_rank, prev_rank; /* their group ranks (meaningful when next / prev are set) */
    int64_t next_slot;        /* the successor's slot: its node record is the same while this is */
    /* its node record's failure domain ("" none): the coordinator's only (the plan fills it from
       the record; chunks do not carry it), to order the ring (rdzv_ring_order) and pick the
       coordinator's confirmers (rdzv_pick_confirmers) */
    char domain[RDZV_DOMAIN_MAX];
};

/* Members are published in chunks of about this many (assign/<k>): a node reads one chunk. */
#define RDZV_CHUNK_NODES 32

/* Group rank 0 of a round as the coordinator saw its node record (the commit record's optional
 * "leader"): who may publish the round's master and tracker, and on which addresses
 * (roundguard.c). Every node gets it with the commit: no read of its own to check them. */
#define RDZV_LEADER_ADDRS 18 /* addr, agent_addr and RDZV_IFACE_MAX interface addresses */
struct rdzv_leader {
    char node_id[RDZV_ID_MAX]; /* "" when the commit record names none (an older writer) */
    int64_t slot;              /* create_revision of its node key: that incarnation only */
    size_t n_addrs;
    char addrs[RDZV_LEADER_ADDRS][RDZV_ADDR_MAX];
};

/* The run's `state` key. */
struct rdzv_state {
    int64_t round;          /* 0 before the first commit */
    enum rdzv_status status;
    struct rdzv_member *members; /* rank order; malloc'ed, owned; NULL when only the commit
                                    record is known (a node reads just its own chunk) */
    size_t n_members;       /* entries in `members` (0 when not loaded) */
    int group_world_size;   /* members of the round (nodes): what the commit record says */
    int n_chunks;           /* assign/<k> keys holding the members, k < n_chunks */
    int world_size;         /* sum of members' nproc */
    int restart_count;      /* job-wide failures charged so far */
    int max_restarts;
    int min_nodes, max_nodes;
    int64_t failure_round;  /* round whose failures/<r> record explains FAILED, else 0 */
    int64_t generation;     /* generation of `round` when this value was written inside the round
                               (a same-round update); 0: the write committed the round, so the
                               generation is the key's mod_revision */
    int64_t charge_round;   /* round started by a worker failure whose restart charge is not final
                               yet (refunded if a member turns out lost within one lease TTL) */
    int64_t charge_failed_round; /* the round in which that worker failed */
    int64_t last_failure;   /* round of the last worker failure acted on (its failures/<r> record
                               carries the run's progress: agent/progress/), 0: none */
    int scale_events;       /* rounds started by membership changes (not charged) */
    int64_t chunks_rev;     /* store revision of the first write of this commit's assignment
                               chunks (0: unknown, a writer before it was recorded): a chunk is
                               this commit's iff written in [chunks_rev, generation) */
    struct rdzv_leader leader; /* group rank 0 of `round` (RUNNING commits; may be empty) */
    /* the members that confirm a suspicion of the coordinator (issue 41, rdzv_coord_confirmer_of):
       n_confirm of confirm[] (group ranks, outside the domain of the coordinator at group rank
       confirm_coord), chosen when the round was committed; 0: none (an older writer, no domains) */
    int n_confirm;
    int confirm_coord;
    int confirm[2];
    bool ring;              /* not stored: rdzv_chunk_encode() adds each chunk's ring links */
};

/* One network interface address a node publishes for NIC discovery. */
#define RDZV_IFNAME_MAX 16 /* IFNAMSIZ */
#define RDZV_IFACE_MAX 16
struct rdzv_iface {
    char name[RDZV_IFNAME_MAX];
    char addr[RDZV_ADDR_MAX]; /* numeric IPv4 or IPv6 */
    int prefix;
};

/* A `nodes/<id>` record (value of the leased key). */
struct rdzv_node {
    char node_id[RDZV_ID_MAX];
    char host[RDZV_HOST_MAX];
    char addr[RDZV_ADDR_MAX];
    /* optional ("agent_addr"): the agent's own address when its workers run on another host
     * (--host over ssh) and it differs from addr: where the built-in rabit tracker listens */
    char agent_addr[RDZV_ADDR_MAX];
    int nproc;
    int64_t pid;
    int64_t joined_ms;       /* wall clock when this incarnation joined (optional: 0 unknown) */
    int64_t create_revision; /* from the store, not the JSON */
    /* NIC discovery (optional in the JSON: "ifaces", "probe_port"): 0 = not taking part */
    int probe_port;
    size_t n_ifaces;
    struct rdzv_iface ifaces[RDZV_IFACE_MAX];
    /* the liveness ring (optional: "live_port", "live_addr"): 0 = not taking part; the agent's
       own address when it differs from addr (its workers run elsewhere, --host), else "" */
    int live_port;
    char live_addr[RDZV_ADDR_MAX];
    /* with a loopback address: which host and network namespace it is good in ("<boot id>:<netns
       inode>"); a node elsewhere cannot reach it there. "" otherwise */
    char live_ns[RDZV_ADDR_MAX];
    /* optional ("domain"): its failure domain (--failure-domain: a rack, a switch, a zone), as
       the node itself says; "" none */
    char domain[RDZV_DOMAIN_MAX];
    /* optional ("ckpt_port"): the checkpoint store's replication port (issue 39 stage 4,
       docs/checkpoint.md), on the ring's address (live_addr, else addr); 0 none */
    int ckpt_port;
};

/* Where the run was when a failure happened (issue 40, agent/progress/): optional in the record
 * (absent: step and best -1, counts 0). O(1) bytes, written once per failed round. */
struct rdzv_progress {
    int64_t step;    /* highest step the failing node's ranks beat in the failed round, -1 unknown */
    int64_t best;    /* highest step the run had reached before any failure, this one included */
    int no_progress; /* restarts in a row after which the run did not pass its best step */
    int repeat;      /* the same failure (rank or node, exit code, signal) this many times in a
                        row without progress; 0: the record says nothing about progress */
    bool stop;       /* --max-restarts-without-progress reached: the run ends with this failure */
};

/* A `failures/<r>` record: the first worker failure of round r. */
struct rdzv_failure {
    char node_id[RDZV_ID_MAX];
    char host[RDZV_HOST_MAX];
    int rank, local_rank;
    int exit_code;   /* -1 when killed by a signal */
    int signal;      /* 0 unless killed by a signal */
    int64_t pid;
    int64_t time_ms; /* wall clock, for humans */
    char message[4096]; /* root cause: the worker's error file message, or a generated one */
    struct rdzv_progress progress;
};

const char *rdzv_status_name(enum rdzv_status s);

/* Encode to a malloc'ed NUL-terminated JSON string in *ret_json. 0 or -ENOMEM. */
int rdzv_state_encode(const struct rdzv_state *s, char **ret_json, struct ea_error *err);
/* Decode and validate; -EBADMSG with a message naming the field when the value is not ours. */
int rdzv_state_decode(const char *json, size_t len, struct rdzv_state *ret, struct ea_error *err);
/* Free members; NULL-safe; leaves a zeroed state. */
void rdzv_state_clear(struct rdzv_state *s);
/* Deep copy. 0 or -ENOMEM. */
int rdzv_state_copy(struct rdzv_state *dst, const struct rdzv_state *src);
/* The generation of the state's round, given the state key's mod_revision. */
int64_t rdzv_state_generation(const struct rdzv_state *s, int64_t mod_revision);
/* Index of node_id among members, or -1. */
int rdzv_state_find(const struct rdzv_state *s, const char *node_id);

int rdzv_node_encode(const struct rdzv_node *n, char **ret_json, struct ea_error *err);
int rdzv_node_decode(const char *json, size_t len, struct rdzv_node *ret, struct ea_error *err);

/* Assignment chunks (docs/protocol.md): the members of a round are stored in n_chunks keys;
 * member m goes to chunk rdzv_chunk_of(m.slot, n_chunks). */
int rdzv_chunk_count(size_t n_members);
/* The chunk count of a round of n_members after one of `prev` chunks: `prev` while it keeps
 * 16-32 members a chunk (so a node's chunk, and the key it watches, stays put when a few nodes
 * come and go), else rdzv_chunk_count(n_members). */
int rdzv_chunk_count_next(int prev, size_t n_members);
/* True when `n_chunks` is a valid chunk count for n_members (what a decoder accepts). */
bool rdzv_chunk_count_ok(int n_chunks, size_t n_members);
int rdzv_chunk_of(int64_t slot, int n_chunks);
/* The liveness ring's links of members m[0..n) in rank order, in a round of n_chunks chunks (what
 * its chunks say): each member's next and prev in chunk order, wrapping. 0 or -ENOMEM. */
int rdzv_members_link_ring(struct rdzv_member *m, size_t n, int n_chunks);
/* Encode chunk `chunk` of `s` (its members whose slot maps there, in rank order; with s->ring,
 * the chunk's "ring": the ids of the members just outside it in chunk order) into *ret_json.
 * -EINVAL for a chunk index the round does not have. */
int rdzv_chunk_encode(const struct rdzv_state *s, int chunk, char **ret_json,
                      struct ea_error *err);
/* Every chunk of `s` in one pass over its members (rdzv_chunk_encode for each k would scan them
 * all for each chunk: O(N^2/32) at the coordinator per commit): ret_json[k] for k < n_chunks,
 * each malloc'ed; on failure none is left allocated. */
int rdzv_chunks_encode(const struct rdzv_state *s, char **ret_json, struct ea_error *err);
/* Decode a chunk: its round and chunk index and its members (malloc'ed, *ret_n of them), each
 * with its ring links when the chunk has a "ring". An entry with its own links (8 fields, the
 * group-rank ring of an older agent) is refused with a message saying so. */
int rdzv_chunk_decode(const char *json, size_t len, int64_t *ret_round, int *ret_chunk,
                      struct rdzv_member **ret, size_t *ret_n, struct ea_error *err);
/* Which commit an assignment chunk written at store revision `chunk_rev` belongs to, relative to
 * the commit of `s` (`generation`: the revision of the write that committed its round, see
 * rdzv_state_generation): 0 when it is one of that commit's chunks (written in
 * [s->chunks_rev, generation)), 1 when written after it (a later commit, its `state` still on its
 * way), -1 when written before (an earlier commit's, or a dead coordinator's). A round number
 * alone cannot tell: a `waiting` state reuses it, and so does a coordinator's successor. */
int rdzv_chunk_commit_cmp(const struct rdzv_state *s, int64_t generation, int64_t chunk_rev);
/* Gather the members of `s` (group_world_size of them) from decoded chunks (`chunks[k]` with
 * `counts[k]` members, k < s->n_chunks) into s->members in group-rank order, checking they
 * agree with the commit record (ranks contiguous, rank bases summing to world_size) and, with the
 * ring, that every member's links follow the chunk order in one cycle. */
int rdzv_state_gather(struct rdzv_state *s, struct rdzv_member *const *chunks,
                      const size_t *counts, struct ea_error *err);

/* The `coord` key: which node coordinates, and while the run gathers, how many nodes are live
 * and how long until the last call (-1: below min), so that every node can show progress
 * without watching every join. */
struct rdzv_coord {
    char node_id[RDZV_ID_MAX];
    int live;
    int64_t last_call_in_ms;
};
int rdzv_coord_encode(const struct rdzv_coord *c, char **ret_json, struct ea_error *err);
int rdzv_coord_decode(const char *json, size_t len, struct rdzv_coord *ret, struct ea_error *err);

int rdzv_failure_encode(const struct rdzv_failure *f, char **ret_json, struct ea_error *err);
int rdzv_failure_decode(const char *json, size_t len, struct rdzv_failure *ret,
                        struct ea_error *err);

/* Copy `src` into a fixed buffer; -ENAMETOOLONG when it does not fit (nothing written). */
int rdzv_strlcpy(char *dst, size_t size, const char *src);

#endif
