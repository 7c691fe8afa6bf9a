// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv ringwalk: the liveness ring's successor walk (docs/protocol.md "The liveness ring", issue
 * 41): which members follow a node's successor (or precede its predecessor) in ring order, as
 * far as the node knows it from its own assignment chunk alone — the chunk's members in the order
 * it lists them, then the chunk's `ring` next (prev). A node that suspects a neighbour probes
 * these onward, so a run of consecutive dead members is reported in one pass. No other chunk and no
 * node record is read here: per node O(1) per round. Not for sockets, and no logging.
 */
#ifndef EA_RENDEZVOUS_RINGWALK_H
#define EA_RENDEZVOUS_RINGWALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"
#include "state.h"

struct rdzv_session;

/* The most members a walk goes past the successor: a rack (8-32 nodes). A chunk holds at most
 * 32 members, but a decoded one is as long as its writer made it. */
#define RDZV_WALK_MAX 32

/* One member after the successor, in ring order. */
struct rdzv_walk_step {
    char node_id[RDZV_ID_MAX];
    int group_rank;
    int64_t slot; /* the incarnation the chunk names (its node key's create_revision) */
};

/*
 * Pure: the members after `from` in ring order (`backward`: before it) that follow from one
 * chunk's members m[0..n) (as rdzv_chunk_decode gives them, each with its ring links
 * `next`/`next_rank`/`next_slot` and `prev`/`prev_rank`), at most `max` into ret. It follows the
 * links from `from` while the member it stands on is in the chunk: so through the rest of the
 * chunk and one past its end (the chunk's `ring` next or prev), or around a chunk that holds the
 * whole ring. It stops before `self` (the ring has come round), before an empty link, and at
 * `max`. `from` not in the chunk (self is the chunk's last member, or backward its first): 0,
 * the order beyond is not this node's to know. A step backward has no slot (-1).
 */
size_t rdzv_ring_walk_order(const struct rdzv_member *m, size_t n, const char *self,
                            const char *from, bool backward, struct rdzv_walk_step *ret,
                            size_t max);

/*
 * This node's walk past `from` (its successor, or `backward` its predecessor) in the running
 * round: rdzv_ring_walk_order over its own assignment chunk as the session holds it (the chunk it
 * watches, or in a full mirror the one its slot picks; no store request). *ret_n 0 when the
 * session has no chunk of the round's commit (then there is nothing to walk); a decode error of
 * that chunk (-EBADMSG).
 */
int rdzv_ring_walk(struct rdzv_session *s, const char *from, bool backward,
                   struct rdzv_walk_step *ret, size_t max, size_t *ret_n, struct ea_error *err);

#endif
