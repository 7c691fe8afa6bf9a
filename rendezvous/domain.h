// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv domain: failure domains (issue 41) as pure functions. A node may name its failure domain
 * (--failure-domain: a rack, a switch, a zone) in its node record; the coordinator uses it to
 * order the liveness ring so that ring neighbours are in different domains where it can, and to
 * commit, in the state, the members that confirm a suspicion of the coordinator from outside its
 * domain. No I/O, no clock: everything is an argument.
 */
#ifndef EA_RENDEZVOUS_DOMAIN_H
#define EA_RENDEZVOUS_DOMAIN_H

#include <stdbool.h>
#include <stddef.h>

#include "state.h"

/* True when `s` is a valid domain label: 1 to RDZV_DOMAIN_MAX - 1 characters of
 * A-Z a-z 0-9 . _ : / - (a Kubernetes zone or node label's value fits). */
bool rdzv_domain_ok(const char *s);

/*
 * The ring order of n items given in rank order with domains dom[i] ("" or NULL: no domain):
 * ret_order[0..n) is a permutation of 0..n-1 in which consecutive items are in different domains
 * where the counts allow it (greedy: the domain with the most items left that differs from the
 * previous one, ties to the lowest index; within a domain, rank order). An item without a domain
 * is a domain of its own, so with no domains at all the order is 0..n-1 (the rank order,
 * unchanged). It depends on these n items only: a chunk's order does not change when another
 * chunk's members do (no cascade of new ring links over the fleet). -ENOMEM, else 0.
 */
int rdzv_ring_order(const char *const *dom, size_t n, size_t *ret_order);

/*
 * Keep the start of `order` (n items, as rdzv_ring_order left it) away from `after`, the domain
 * of the item just before it in the ring (the previous chunk's last): when the first item is in
 * that domain, move the first interior item that fits (in another domain than `after` and the
 * first item, and whose neighbours are in different domains) to the front. The last item never
 * moves, so the next chunk's start is decided by its own members and this one's last alone.
 * True when order[0] is now apart from `after` (or `after` is NULL or "").
 */
bool rdzv_ring_front(const char *const *dom, size_t n, const char *after, size_t *order);

/*
 * The members that confirm a suspicion of the coordinator, chosen when a round is committed:
 * members m[0..n) in any order, the coordinator at group rank coord_rank. ret[0] is the lowest
 * group rank whose domain is set and differs from the coordinator's; ret[1] the lowest whose
 * domain differs from both (else from the coordinator's only, else -1). Both -1 when the
 * coordinator has no domain or no member is outside it: then nobody is committed and
 * rdzv_coord_confirmer() decides as before.
 */
void rdzv_pick_confirmers(const struct rdzv_member *m, size_t n, int coord_rank, int ret[2]);

/*
 * Who confirms a suspicion of the coordinator at coord_rank written by the member at by_rank, in
 * the round of state `s` (its commit record: O(1), no member list needed): the first of the
 * committed confirmers (s->confirm) that is neither, when they were committed for that
 * coordinator; else rdzv_coord_confirmer(s->group_world_size, coord_rank, by_rank) (an older
 * writer's state, no domains, or another coordinator since the commit). -1: the watcher confirms
 * it itself (a round of two).
 */
int rdzv_coord_confirmer_of(const struct rdzv_state *s, int coord_rank, int by_rank);

/*
 * Whether a prober's failed probe of a suspect is correlated with the watcher's word
 * (docs/security.md, "A rack cut at its switch"): the prober and the watcher (`by`, and `also`
 * when the key has one: NULL when not) are in one failure domain and the suspect is outside it.
 * When that domain is what failed (its switch down) both find every node outside it dead, and two
 * vantage points there are one: such a probe counts only if the prober also reaches the watcher
 * (the node unit probes it too). Domains "" or NULL share nothing (no domain, no correlation).
 */
bool rdzv_correlated(const char *prober, const char *by, const char *also, const char *suspect);

#endif
