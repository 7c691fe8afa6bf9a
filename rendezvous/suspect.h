// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv suspect: the liveness ring's side in the store (docs/protocol.md "The liveness ring"). A
 * node whose ring link to a neighbour broke writes suspect/<round>/<node-id> (create-only, with
 * its own lease); the coordinator, which mirrors the run, picks it up, confirms it with a probe
 * of its own (the node unit's part: agent/node/) and revokes the suspect's lease, so the store
 * deletes its node key and the usual loss-driven round follows; a probe that is answered makes
 * it a false alarm and the key is deleted. Not for sockets, and no logging.
 */
#ifndef EA_RENDEZVOUS_SUSPECT_H
#define EA_RENDEZVOUS_SUSPECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "session.h"

/* Where a node's ring listener is (its node record) and the lease its node key is on. */
struct rdzv_ring_peer {
    char node_id[RDZV_ID_MAX];
    char addr[RDZV_ADDR_MAX]; /* the record's live_addr, else its addr */
    int port;                 /* live_port */
    int64_t lease;            /* of its nodes/<id> key (from the store, not the record) */
    char ns[RDZV_ADDR_MAX];   /* live_ns: a loopback address's namespace, or "" */
    int ckpt_port;            /* its checkpoint replication port on addr, 0 none */
    char domain[RDZV_DOMAIN_MAX]; /* its failure domain (the record's "domain"), "" none */
};

/* nodes/<node_id> as the ring needs it: from the mirror when this session mirrors the run, else
 * one read (O(1): a node reads its successor's record once per round). KV_ENOTFOUND when the
 * key is absent; -ENOPROTOOPT when the record does not decode or has no live_port (that node
 * does not take part in the ring). */
int rdzv_ring_peer(struct rdzv_session *s, const char *node_id, struct rdzv_ring_peer *ret,
                   struct ea_error *err);

#define RDZV_CAUSE_MAX 32
/* Largest suspicion value a decoder accepts. */
#define RDZV_SUSPECT_BYTES_MAX 1024

/* suspect/<round>/<node_id>: {"schema","by","cause","fault_ms","detected_ms"[,"also"]}. */
struct rdzv_suspicion {
    int64_t round;             /* from the key */
    char node_id[RDZV_ID_MAX]; /* the suspect (from the key) */
    char by[RDZV_ID_MAX];      /* the watcher that wrote it */
    char also[RDZV_ID_MAX];    /* the suspect's other neighbour, who saw it too ("": none yet) */
    char cause[RDZV_CAUSE_MAX];
    int64_t fault_ms;    /* wall ms of the suspect's last sign of life on the link (-1 unknown) */
    int64_t detected_ms; /* wall ms when the watcher gave up on it */
};

/* The value's codec (round and node_id are the key's, not the value's). Decoding checks the
 * schema, the size and every field: -EBADMSG naming what is wrong. */
int rdzv_suspicion_encode(const struct rdzv_suspicion *x, char **ret_json, struct ea_error *err);
int rdzv_suspicion_decode(const char *json, size_t len, struct rdzv_suspicion *ret,
                          struct ea_error *err);

/* A watcher: write suspect/<x->round>/<x->node_id> (create-only, with this node's lease, so it
 * vanishes with its writer). When another watcher wrote it first (the suspect's other neighbour)
 * and nobody is in its `also` yet, this node puts itself there (iff the key is unchanged): a
 * second word for a coordinator that was the first watcher itself. 1 written; 0 when it exists
 * already or the run no longer runs that round; or a store error. */
int rdzv_suspect(struct rdzv_session *s, const struct rdzv_suspicion *x, struct ea_error *err);

/* One suspicion for the coordinator to confirm. */
struct rdzv_suspect_case {
    struct rdzv_suspicion sus;
    struct rdzv_ring_peer peer; /* the suspect's listener and lease, from the coordinator's own
                                   mirror (never from the suspicion) */
    int64_t key_rev;            /* the suspect key's mod_revision */
};

/*
 * The coordinator: the suspicions of the running round (at most `max` into ret, *ret_n of them)
 * that name a live member taking part in the ring, other than this node, among the suspect keys
 * put since the last call (the watch's events; after a re-sync every key once; the keys handed
 * out before, again once the round changes): O(those keys), never a scan of the run's keys. A
 * key handed out is not handed out again in its round. It cleans up as it goes, with deletes fenced on each key's mod_revision: a key of an earlier round, of a node that
 * is not a live member, of this node (it is alive: a false alarm), or whose value does not decode
 * (warned about once). 0 with nothing when this node does not coordinate; or a store error.
 */
int rdzv_suspects(struct rdzv_session *s, struct rdzv_suspect_case *ret, size_t max, size_t *ret_n,
                  struct ea_error *err);

/* A member that is about to coordinate (the one confirming a suspicion of the coordinator): the
 * suspicions of `round` as the store has them now, at most `max` (one listing of suspect/<round>/,
 * which holds one key per suspect: O(the burst), read only while the coordinator is suspected),
 * each with the suspect's node record read (one read each). Keys that do not parse or decode, of
 * this node, or of a node with no record or no ring port are left out (the coordinator reports
 * and deletes those). Its own probes of them may then be used once it coordinates. */
int rdzv_suspects_peek(struct rdzv_session *s, int64_t round, struct rdzv_suspect_case *ret,
                       size_t max, size_t *ret_n, struct ea_error *err);

/* Keys left for the next rdzv_suspects() (no room in `max`, or the store failed). */
bool rdzv_suspects_due(const struct rdzv_session *s);

/* The coordinator's probe was answered: a false alarm. Delete the key (unless it changed). */
int rdzv_suspect_clear(struct rdzv_session *s, const struct rdzv_suspect_case *c,
                       struct ea_error *err);

/* The coordinator confirms suspicions until `until_ms` (the clock of rdzv_tick's now; 0 lifts it):
 * a member lost before then waits for it, so the members one burst takes (a rack, a failure
 * domain) leave in one round, not one round per eviction. The caller bounds how long it holds. */
void rdzv_hold_losses(struct rdzv_session *s, int64_t until_ms);

/* The coordinator's probe failed: revoke the suspect's lease iff its node key is still on
 * c->peer.lease (a node that rejoined meanwhile has another). 1 revoked, 0 nothing to do (gone
 * already, or rejoined), or a store error. The suspect key stays until its round is over
 * (rdzv_suspects deletes it then, with the round's others in one write). */
int rdzv_evict(struct rdzv_session *s, const struct rdzv_suspect_case *c, struct ea_error *err);
/* rdzv_evict for n cases at once, the revokes in flight together (kv_lease_revoke_each): ret[i]
 * is rdzv_evict's answer for cs[i]. 0, or an error with nothing revoked (out of memory). */
int rdzv_evict_each(struct rdzv_session *s, const struct rdzv_suspect_case *const *cs, size_t n,
                    int *ret, struct ea_error *err);

/*
 * A suspicion of the coordinator: rounds/<r>/coord_suspect (create-only, every node receives
 * it: one small key in a round where it happens). The coordinator cannot confirm its own death,
 * and the watcher must not be the only judge (a node cut off from everybody would find everybody
 * dead, the coordinator too): a third member confirms it, the one rdzv_coord_confirmer() names.
 */
struct rdzv_coord_suspicion {
    struct rdzv_suspicion sus; /* node_id: the coordinator */
    int coord_rank, by_rank;   /* group ranks of the coordinator and of the watcher */
    int64_t key_rev;           /* the key's mod_revision (when read) */
};
/* Write it (create-only). 1 written; 0 when there is one already or the round is over. */
int rdzv_coord_suspect(struct rdzv_session *s, const struct rdzv_coord_suspicion *x,
                       struct ea_error *err);
/* The running round's, from the mirror (no I/O): 1 with *ret, 0 when there is none, -EBADMSG
 * when its value does not decode (reported once through rdzv_take_warning). */
int rdzv_coord_suspicion(struct rdzv_session *s, struct rdzv_coord_suspicion *ret);
/* Delete it iff unchanged (a false alarm: a later suspicion of the coordinator can be written). */
int rdzv_coord_suspect_clear(struct rdzv_session *s, const struct rdzv_coord_suspicion *x,
                             struct ea_error *err);
/* The group rank that confirms a suspicion of the coordinator (coord_rank) written by the member
 * of by_rank in a round of n members: the rank half the rank order away from the coordinator's
 * (a rack of consecutive ranks that takes the coordinator leaves it alive), or when that is the
 * watcher the lowest rank that is neither. -1 when n < 3: nobody else is there, and the watcher
 * confirms it itself. With failure domains the commit names confirmers outside the
 * coordinator's domain instead (rdzv_coord_confirmer_of, domain.h). */
int rdzv_coord_confirmer(int n, int coord_rank, int by_rank);

/* The coordinator as this node's mirror shows it (the `coord` key): its node id and the lease
 * the key is on. false when there is none. */
bool rdzv_coord_holder(const struct rdzv_session *s, char *node_id, size_t size,
                       int64_t *ret_lease);
/* A watcher's own probe of the coordinator it suspects failed: revoke `lease` iff `coord` is still
 * held by node_id on it. 1 revoked, 0 nothing to do, or a store error. */
int rdzv_evict_coord(struct rdzv_session *s, const char *node_id, int64_t lease,
                     struct ea_error *err);

/* Changes seen in the store so far (the mirror's): rdzv_suspects() has news only after one. */
uint64_t rdzv_changes(const struct rdzv_session *s);

#endif
