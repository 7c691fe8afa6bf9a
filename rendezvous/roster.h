// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv roster: the members of the committed round with the addresses their node records list,
 * for what admits connections by member (the built-in rabit tracker: docs/security.md "The
 * built-in tracker"). Not for the per-round protocol itself: a node that does not coordinate
 * never needs every member, and reading them costs O(N).
 */
#ifndef EA_RENDEZVOUS_ROSTER_H
#define EA_RENDEZVOUS_ROSTER_H

#include <stddef.h>

#include "session.h"

#define RDZV_ROSTER_ADDRS (RDZV_IFACE_MAX + 1)

/* One member node of the round. */
struct rdzv_roster_node {
    char node_id[RDZV_ID_MAX];
    char host[RDZV_HOST_MAX];
    int nproc;
    size_t n_addrs; /* 0: its node record is gone or of another incarnation (the node is lost) */
    char addrs[RDZV_ROSTER_ADDRS][RDZV_ADDR_MAX]; /* its record's addr and interface addresses */
};

/*
 * The members of the running round and their addresses, in group-rank order. Full mode: from
 * the mirror (no I/O); otherwise two listings (assign/ and nodes/): O(N), for group rank 0 once
 * a round. *ret is malloc'ed (free()), *ret_n entries. -EAGAIN when no round runs or the round
 * moved on meanwhile (the chunks listed are of a later round); a store error; -ENOMEM.
 */
int rdzv_round_roster(struct rdzv_session *s, struct rdzv_roster_node **ret, size_t *ret_n,
                      struct ea_error *err);

#endif
