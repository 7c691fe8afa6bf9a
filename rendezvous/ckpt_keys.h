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
/* One ckpt/<id> key as the coordinator's mirror holds it (valid during the callback). */
struct rdzv_ckpt_entry {
    const char *id, *value;
    size_t len;
    int64_t lease, mod_revision;
};
/* The coordinator's summaries, from its mirror of the run (no I/O; docs/checkpoint.md
 * "latest()"): fn for the ckpt/<id> key of every other member of the committed round `round`
 * whose node key is live, of the incarnation the round lists, and on the same lease as the
 * summary (written by that node). Returns the number of those other members (fn ran at most that
 * often), or -EAGAIN when this node does not mirror the run or that round's members. */
int rdzv_ckpt_each(struct rdzv_session *s, int64_t round,
                   void (*fn)(void *ctx, const struct rdzv_ckpt_entry *e), void *ctx,
                   struct ea_error *err);
/* Is node `id` a member of the committed round `round` (its node key's incarnation listed in its
 * assignment chunk)? 1 yes, 0 no, -EAGAIN not that round here, or a store error. Light mode: two
 * small reads (its node record, its chunk); the coordinator: none. */
int rdzv_is_member(struct rdzv_session *s, const char *id, int64_t round, struct ea_error *err);

#endif
