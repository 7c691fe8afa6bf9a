// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv ckpt_keys: the checkpoint store's key, `ckpt/<node-id>` (docs/checkpoint.md "Fetch"):
 * each node's summary of what it holds, put with its lease once a round; listed when a worker
 * asks for the newest step complete across the run; and who is a member of a round (a fetch is
 * served to members only). Not for the summary's format (agent/checkpoint/ckpt_summary.c).
 */
#ifndef EA_RENDEZVOUS_CKPT_KEYS_H
#define EA_RENDEZVOUS_CKPT_KEYS_H

#include <stdint.h>

#include "kv.h"
#include "session.h"

/* Keys one listing returns at most (one page): more nodes' summaries are left out, said in err
 * with a 0 return (the listing is still used). */
#define RDZV_CKPT_LIST_MAX 1000

/* Put this node's summary (`json`) at ckpt/<node-id> with its lease. 0 or a store error. */
int rdzv_ckpt_publish(struct rdzv_session *s, const char *json, struct ea_error *err);
/* The ckpt/ keys of the run (one read, at most RDZV_CKPT_LIST_MAX): 0 and *ret (kv_list_clear),
 * *ret_truncated when more exist; or a store error. ret_id_of: the node id of entry i. */
int rdzv_ckpt_list(struct rdzv_session *s, struct kv_list *ret, bool *ret_truncated,
                   struct ea_error *err);
const char *rdzv_ckpt_id_of(const struct rdzv_session *s, const char *key);
/* Is node `id` a member of the committed round `round` (its node key's incarnation listed in its
 * assignment chunk)? 1 yes, 0 no, -EAGAIN not that round here, or a store error. Light mode: two
 * small reads (its node record, its chunk); the coordinator: none. */
int rdzv_is_member(struct rdzv_session *s, const char *id, int64_t round, struct ea_error *err);

#endif
