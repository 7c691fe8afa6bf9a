// SPDX-License-Identifier: Apache-2.0
/* rdzv session internals shared by session.c (join, watch, coordination) and session_ops.c
 * (reports and per-round values). Not for use outside rendezvous/. */
#ifndef EA_RENDEZVOUS_SESSION_INTERNAL_H
#define EA_RENDEZVOUS_SESSION_INTERNAL_H

#include "roundguard.h"
#include "mirror.h"
#include "session.h"

#define KEY_MAX 512

struct rdzv_session {
    struct kv *kv;
    struct rdzv_config cfg;
    char prefix[KEY_MAX];
    char node_key[KEY_MAX], coord_key[KEY_MAX], state_key[KEY_MAX];
    int64_t lease;
    int64_t slot; /* create_revision of our node key: picks our assignment chunk */
    bool full;    /* mirror the whole run: the coordinator, or cfg.full_view */
    int64_t watch_ids[3];
    size_t n_watches;
    int64_t chunk_watch_id;  /* light mode: the watch on our own assignment chunk */
    int chunk_k;             /* ... assign/<chunk_k> */
    int chunk_aim_k;         /* the watch to start next (rdzv_tick): assign/<chunk_aim_k> ... */
    int64_t chunk_aim_rev;   /* ... from this revision; 0: none pending */
    int64_t chunk_aim_at_ms; /* ... not before this (a failed try waits) */
    bool need_resync;        /* the watch broke and re-listing failed: retry before anything else */
    int64_t listed_rev;      /* store revision of the last listing (the watches start after it) */
    uint64_t resyncs;        /* re-syncs because a watch ended (rdzv_resync_count) */
    int64_t resync_told_ms;  /* when the last one was reported as a warning (-1: never) */
    int64_t keepalive_due_ms;
    int64_t renewed_ms; /* last successful grant or renewal of the lease */
    struct rdzv_mirror m;

    /* derived from the mirror (rebuilt when dirty) */
    size_t n_live;           /* full: valid node records; light: as the coordinator published */
    struct rdzv_node *nodes; /* full: sorted by create_revision; built on demand */
    size_t n_nodes;
    struct rdzv_state state; /* members loaded in full mode only */
    bool have_state;
    int64_t state_rev;
    int64_t state_seen_ms; /* when this state value was first seen (monotonic) */
    int64_t loss_hold_ms;  /* rdzv_hold_losses() (0: none) */
    int64_t due_since_ms;  /* since when suspect keys wait to be looked at (-1: none do) */
    int64_t state_seen_rev; /* ... the value: its mod_revision */
    bool members_broken;   /* full: the chunks do not add up to the committed round */
    const char **done;     /* full: node ids done in state.round; point into the mirror */
    size_t n_done;
    int64_t done_round;    /* the round `done` lists (-1: none) */
    /* session_count.c: the coordinator's counts, kept per event */
    const char **member_set;   /* open addressing over state.members' ids (NULL: empty slot) */
    size_t member_slots;
    uint64_t members_version;  /* bumped whenever state.members may change */
    uint64_t counted_version;  /* the version member_set and n_survivors are of */
    size_t n_survivors;        /* members of the committed round with a live node record */
    const struct rdzv_state *adopt; /* rdzv_commit: the round it wrote, at revision adopt_rev: the
                                       coordinator takes its members, not decoding its chunks */
    int64_t adopt_rev;
    bool failure_reported, reform_requested; /* full: failures/<round>, reform/<round> */
    bool failure_stop; /* full: failures/<round> says the run ends (no progress, issue 40) */
    struct rdzv_coord coord;
    bool have_coord, is_coord;
    int64_t coord_rev, coord_seen_ms;

    struct rdzv_member self; /* our assignment in state.round (self_ok) */
    bool self_ok;
    int64_t self_round; /* the round `self` was looked up for (-1: never) */

    int64_t last_arrival_ms, min_reached_ms, plan_wake_ms, takeover_ms;
    /* the lease of the coordinator this node's own probe found dead and whose lease it revoked
     * (rdzv_evict_coord), 0 none: when its `coord` key's delete arrives this node claims at once,
     * not at its turn (issue 41: the confirmer is outside the coordinator's failure domain, so
     * alive when a rack took the coordinator and its rank successors) */
    int64_t revoked_coord_lease;
    int64_t charge_seen_round, charge_seen_ms;
    int64_t gc_below;      /* the coordinator deleted the per-round keys of rounds below this */
    int64_t gather_pub_ms; /* the coordinator's last progress write */
    int gather_pub_live;
    bool gather_pub_quorum;
    struct rdzv_stats stats;
    /* suspect.c: the suspicion keys to look at (the coordinator acts on what events bring) */
    struct rdzv_suspect_queue {
        char **due;      /* put since the last look */
        size_t n_due, cap_due;
        char **kept;     /* looked at and left in the store: looked at again when the round
                            changes (a later round's, or one being confirmed) */
        size_t n_kept, cap_kept;
        int64_t round;   /* the running round `kept` was sorted for (0: none) */
        bool overflow;   /* more than the queue holds: one scan of the mirror instead */
    } sq;
    struct rdzv_guard guard; /* who wrote the round's master and tracker (roundguard.c) */
    char warning[EA_ERROR_MSG_MAX];      /* pending, not yet taken */
    char last_warning[EA_ERROR_MSG_MAX]; /* so one bad key is reported once, not per event */
};

void rdzv_key_of(const struct rdzv_session *s, char *buf, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Re-derive from the mirror (no I/O). -EBADMSG when `state` or `coord` is not ours. */
int rdzv_derive(struct rdzv_session *s, int64_t now_ms, struct ea_error *err);
void rdzv_warn(struct rdzv_session *s, const char *msg);

/* suspect.c: the mirror's on_put hook (queues suspect/ keys; NULL: the mirror was cleared), and
 * the queue's memory. */
void rdzv_suspect_on_put(void *ctx, const char *key);
void rdzv_suspect_queue_free(struct rdzv_session *s);
/* The coordinator's plan: until when a loss waits (plan.h's loss_hold_ms): rdzv_hold_losses()'s
 * hold, or, while suspect keys wait to be looked at, a step at a time (suspect.c). */
int64_t rdzv_loss_hold(struct rdzv_session *s, int64_t now_ms);

/* The assignment chunk of the committed round a node of `slot` is in, read at the commit's
 * revision (roundguard.c): 1 with its round and members (*ret_m to free), 0 when there is none
 * there or it does not decode, or a store error. */
int rdzv_read_chunk_of(struct rdzv_session *s, int64_t slot, int64_t *ret_round,
                       struct rdzv_member **ret_m, size_t *ret_n, struct ea_error *err);
/* session_coord.c: the coordinator's writes. */
/* Write `coord` (our id, live count, last call) with our lease iff its mod_revision is
 * `expected` (0: a claim); the winner's value is mirrored. 0, KV_ECONFLICT, or an error. */
int rdzv_write_coord(struct rdzv_session *s, int live, int64_t last_call_in_ms, int64_t expected,
                     struct ea_error *err);
/* Commit `next`: its chunks (when the members change), then `state`, fenced on `state` and
 * `coord`. 1 written, 0 a fence failed (the view is refreshed), or an error. */
int rdzv_commit(struct rdzv_session *s, const struct rdzv_state *next, int64_t now_ms,
                struct ea_error *err);
/* While the run gathers, publish the live count in `coord` (at most once a second). */
int rdzv_publish_gather(struct rdzv_session *s, int64_t now_ms, struct ea_error *err);
/* After a transaction whose fence failed: read `state` and `coord` again and re-derive. */
int rdzv_refresh_fences(struct rdzv_session *s, int64_t now_ms, struct ea_error *err);

/* session_count.c (see there). The mirror's node hook: */
void rdzv_count_on_node(void *ctx, const struct rdzv_node *n, int delta);
/* Rebuild the member set and recount the survivors when the members changed (O(N), per commit). */
int rdzv_count_members(struct rdzv_session *s, struct ea_error *err);
/* The done markers of the committed round, rebuilt only when a done key changed or the round. */
int rdzv_count_done(struct rdzv_session *s, struct ea_error *err);
/* s->nodes: the live nodes sorted by create_revision (only when a node key changed). */
int rdzv_count_sorted_nodes(struct rdzv_session *s, struct ea_error *err);
void rdzv_count_free(struct rdzv_session *s);

/* session_gc.c: the coordinator deletes the per-round keys of rounds before the previous one. */
/* Once per committed round, off the commit's path: 1 when it deleted something, 0 when there was
 * nothing to do or a fence failed (the view is refreshed), or an error. */
int rdzv_gc_old_rounds(struct rdzv_session *s, int64_t now_ms, struct ea_error *err);

#endif
