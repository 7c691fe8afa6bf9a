// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv evict: `rounds/<r>/evict`, the coordinator's word that one member of round r leaves the
 * run (--straggler-action evict, docs/restarts.md). One small key a round, which every node
 * already watches with the round's other keys (O(1) per node). Only the coordinator may write
 * it: the value names its writer (`by`) and the key is attached to the lease of `coord`; a
 * reader acts on it only when `by` is the node `coord` names and the leases match
 * (docs/security.md "Straggler eviction"). Session internals stay in rendezvous/.
 */
#ifndef EA_RENDEZVOUS_EVICT_H
#define EA_RENDEZVOUS_EVICT_H

#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"
#include "state.h"

struct rdzv_session;

/* Check one evict value (pure): `value` (len bytes) of a key attached to `key_lease`, against
 * the coordinator as `coord` names it (`coord_id`, written with `coord_lease`). 0 and the named
 * node in ret_node (RDZV_ID_MAX) when the coordinator wrote it; -EPERM when another writer did
 * (`by` is not the coordinator, or the key is not on its lease); -EBADMSG when it does not
 * decode. */
int rdzv_straggler_check(const char *value, size_t len, int64_t key_lease, const char *coord_id,
                         int64_t coord_lease, char *ret_node);

/* The coordinator: write rounds/<round>/evict naming `node_id` (a member of the round other
 * than itself), with its lease, in a transaction fenced on `coord`: create-only, and a value
 * there that does not pass the check (a planted one) is overwritten; a value that passes is
 * kept (0: the first word stands). -EPERM when this node does not coordinate round `round`;
 * KV_ECONFLICT when `coord` or the key changed meanwhile (try again at the next scoring). */
int rdzv_straggler_evict(struct rdzv_session *s, int64_t round, const char *node_id,
                         struct ea_error *err);

/* The node rounds/<round>/evict names when the coordinator wrote it (copied into ret_node,
 * RDZV_ID_MAX): 0; -ENOENT when there is none; -EPERM when one is there that another writer
 * wrote (reported once through the session's warning, never acted on). */
int rdzv_straggler_evicted(struct rdzv_session *s, int64_t round, char *ret_node);

#endif
