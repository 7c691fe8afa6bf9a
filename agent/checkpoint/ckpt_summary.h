// SPDX-License-Identifier: Apache-2.0
/*
 * ckpt_summary: what a node's checkpoint store holds, as it publishes it once per round in its
 * `ckpt/<node-id>` key (docs/checkpoint.md "Fetch"): for its newest few steps, the shard ranges
 * it holds (own saves and replicas). Bounded to CKPT_SUM_BYTES; decoded strictly (the key is
 * hostile input). And the decisions over the summaries of the run's nodes: the newest step every
 * shard of which some node holds, and who holds a shard. Pure: no I/O.
 */
#ifndef EA_AGENT_CKPT_SUMMARY_H
#define EA_AGENT_CKPT_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt_store.h"
#include "ea_error.h"

#define CKPT_SUM_STEPS 4    /* the newest steps a summary names */
#define CKPT_SUM_RANGES 8   /* shard ranges per step (more: the rest is left out, never guessed) */
#define CKPT_SUM_BYTES 1024 /* the encoded value's bound, well above the largest one written */
#define CKPT_SUM_ID_MAX 128

struct ckpt_sum_step {
    int64_t step;
    int shards;
    int n;                       /* ranges */
    int lo[CKPT_SUM_RANGES], hi[CKPT_SUM_RANGES]; /* shards lo..hi (inclusive) held */
};

struct ckpt_summary {
    char node[CKPT_SUM_ID_MAX];
    int64_t round; /* the round the node published it in */
    int64_t lease; /* the key's lease (from the store, not the value): 0 unknown */
    size_t n;
    struct ckpt_sum_step s[CKPT_SUM_STEPS]; /* newest first */
};

/* The summary of store `st` (committed entries only) for node `node` in round `round`. */
void ckpt_summary_of(const struct ckpt_store *st, const char *node, int64_t round,
                     struct ckpt_summary *ret);
/* JSON {"schema","run","node","round","steps":[[step,shards,[[lo,hi],...]],...]}: a malloc'ed
 * string in *ret_json, or -EINVAL / -ENOMEM. */
int ckpt_summary_encode(const struct ckpt_summary *s, const char *run, char **ret_json,
                        struct ea_error *err);
/* Strict: at most CKPT_SUM_BYTES, our schema, run `run`, node `node` (the key's), a round >= 0,
 * at most CKPT_SUM_STEPS steps newest first (no repeat), each shards 1..65536 and at most
 * CKPT_SUM_RANGES ascending disjoint ranges within 0..shards-1. -EBADMSG naming what is wrong. */
int ckpt_summary_decode(const char *json, size_t len, const char *run, const char *node,
                        struct ckpt_summary *ret, struct ea_error *err);

/* The newest step whose every shard 0..shards-1 is held by one of v[0..n) (all of them naming it
 * with the same shard count): 0 with *ret_step, *ret_shards; -ENOENT none. */
int ckpt_sum_latest(const struct ckpt_summary *v, size_t n, int64_t *ret_step, int *ret_shards);
/* The index of a summary in v[0..n) that holds (step, shard), starting the search at `from`
 * (wrapping: callers spread their fetches); -ENOENT none. */
int ckpt_sum_holder(const struct ckpt_summary *v, size_t n, int64_t step, int shard, size_t from);

/*
 * The run's newest complete step as the coordinator publishes it once a round, in
 * `rounds/<r>/ckpt` (docs/checkpoint.md "latest()"): every other node's latest() answers from
 * it, received by its watch of rounds/, with no read of the summaries.
 */
#define CKPT_PUB_BYTES 256 /* the encoded value's bound */
struct ckpt_pub {
    char node[CKPT_SUM_ID_MAX]; /* the coordinator that computed it */
    int64_t round;
    int64_t step; /* -1: no step complete */
    int shards;   /* 0 when step is -1 */
};
/* The value of round `round` computed by `node` over v[0..n) (the members' summaries and the
 * coordinator's own): ckpt_sum_latest's step, or step -1. */
void ckpt_pub_of(const struct ckpt_summary *v, size_t n, const char *node, int64_t round,
                 struct ckpt_pub *ret);
/* JSON {"schema":1,"node","round","step","shards"}: a malloc'ed string, or -EINVAL / -ENOMEM. */
int ckpt_pub_encode(const struct ckpt_pub *p, char **ret_json, struct ea_error *err);
/* Strict (the key is hostile input): at most CKPT_PUB_BYTES, schema 1, a node id, `round` the
 * key's round, step -1 with shards 0 or step 0..2^53 with shards 1..65536; and written by the
 * coordinator this node knows (`holder`, "" none) or else by a member of the round
 * (is_member(ctx, id): 1 yes; 0 or <0 not trusted). 0 with *ret, or -EBADMSG / -EPERM why. */
int ckpt_pub_accept(const char *json, size_t len, int64_t round, const char *holder,
                    int (*is_member)(void *ctx, const char *id), void *ctx, struct ckpt_pub *ret,
                    struct ea_error *err);
/* The coordinator's decision: publish round's value now? When `fresh` (the other members'
 * summaries of the round in its mirror) reaches `others` (the other members), or `wait_ms`
 * after the round began here (`since_ms`), whichever first. */
bool ckpt_pub_due(size_t others, size_t fresh, int64_t since_ms, int64_t now_ms, int64_t wait_ms);
/* How many of v[0..n) were published for round `round` (or later): an older one is its node's
 * summary of the round before, not yet replaced. */
size_t ckpt_sum_fresh(const struct ckpt_summary *v, size_t n, int64_t round);

#endif
