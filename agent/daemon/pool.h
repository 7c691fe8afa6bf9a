// SPDX-License-Identifier: Apache-2.0
/*
 * pool: a pool's keys in the store (docs/protocol.md, "Pools") and the decisions on them that
 * serve, submit, cancel and status share: the FIFO queue of run specs (ordered by create_revision),
 * the one small `next` key idle daemons watch, and how a queued run is doing (room, full, ended),
 * read from the run's own `state` and `coord` keys. Returns errors with text; never logs.
 */
#ifndef EA_AGENT_DAEMON_POOL_H
#define EA_AGENT_DAEMON_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "ea_error.h"
#include "kv.h"
#include "runspec.h"
#include "specsig.h"
#include "state.h"

/* Pools live under <prefix>~pools/<pool>/: '~' is not in a run id, so no run's keys
 * (<prefix><run-id>/...) can be confused with them. */
#define POOL_DIR "~pools/"
#define POOL_KEY_MAX 768
/* Queue entries one read brings (kv_list_page): a scan holds one page, at most this many specs
 * of up to RUNSPEC_BYTES_MAX each (4 MiB), whatever the queue holds. */
#define POOL_PAGE 16

struct pool {
    struct kv *kv;       /* borrowed */
    char prefix[512];    /* the runs' prefix, e.g. "/elastic/" */
    char name[128];      /* pool name */
    char base[POOL_KEY_MAX]; /* <prefix>~pools/<name>/ */
    char next_key[POOL_KEY_MAX];
};

/* What a queued run looks like to a node that could join it. */
enum pool_run {
    POOL_RUN_ROOM,  /* not started, gathering or running below its max: a node may join */
    POOL_RUN_FULL,  /* at its max (or stopping after a failure): wait */
    POOL_RUN_ENDED, /* succeeded, failed or closed: to be removed from the queue */
    POOL_RUN_BAD,   /* its state is not ours: reported, never joined */
};

/* Set up `p` for pool `name` under `prefix`; -EINVAL when the name is not 1-100 of
 * A-Z a-z 0-9 . _ - starting with a letter or digit. */
int pool_init(struct pool *p, struct kv *kv, const char *prefix, const char *name,
              struct ea_error *err);

/* Key of a queued spec / a daemon's record. */
void pool_queue_key(const struct pool *p, const char *run_id, char *buf, size_t size);
void pool_daemon_key(const struct pool *p, const char *node_id, char *buf, size_t size);
/* Key `name` ("state", "coord") of run `run_id` itself: <prefix><run-id>/<name>. */
void pool_run_key(const struct pool *p, const char *run_id, const char *name, char *buf,
                  size_t size);
/* Key of a refused spec: refused/<run-id>. */
void pool_refused_key(const struct pool *p, const char *run_id, char *buf, size_t size);
/* Prefixes of the queue, of the daemons' records and of the refused specs. */
void pool_queue_prefix(const struct pool *p, char *buf, size_t size);
void pool_daemon_prefix(const struct pool *p, char *buf, size_t size);
void pool_refused_prefix(const struct pool *p, char *buf, size_t size);

/* Queue `s` (create-only): 0, -EEXIST when a run of that id is queued or has run under the
 * prefix already, or a KV error. */
int pool_submit(struct pool *p, const struct runspec *s, struct ea_error *err);

/* Put a listing of the queue in create_revision (submission) order. */
void pool_queue_sort(struct kv_list *l);

/* How a run stands by its commit record alone, for a run of `max_nodes`: ENDED (succeeded,
 * failed, closed), FULL (failing, or running at its max), ROOM (running below its max, or
 * waiting: fewer than its min are live). */
enum pool_run pool_run_of_state(const struct rdzv_state *st, int max_nodes);

/* A node id's hash (FNV-1a): spreads daemons over a run's seats and over time. */
uint32_t pool_node_hash(const char *node);

/* How run `s` is doing (reads <prefix><run>/state, and /coord when no round runs). With
 * ret_status (may be NULL) the run's status name ("none" before any state). KV errors. */
int pool_run_check(struct pool *p, const struct runspec *s, enum pool_run *ret,
                   char *ret_status, size_t status_size, struct ea_error *err);

/* The run `next` names ("" when none) and the key's mod_revision (0: absent). */
int pool_next_get(struct pool *p, char *ret_run, size_t size, int64_t *ret_rev,
                  struct ea_error *err);

/* What pool_advance tells its caller and asks it; every member may be NULL. */
struct pool_hooks {
    void *ctx;
    const char *node; /* who walks the queue (named in a refusal record) */
    /* a spec the queue holds that is not ours: one that does not decode or names another run,
     * called by the daemon that moved it aside (pool_move_bad), so once in the whole pool (or
     * with the reason the move failed); a run whose state is not ours, once per key revision */
    void (*bad)(void *ctx, const char *key, int64_t mod_revision, const char *why);
    /* whether this node may run `s`, the first spec with room: 0, or -EPERM with *v filled:
     * the spec is then moved aside (pool_refuse) and the walk goes on */
    int (*gate)(void *ctx, const struct runspec *s, struct specsig_verdict *v);
    /* a spec this node moved aside: called only by the daemon whose move won, so it is said once
     * in the whole pool */
    void (*refused)(void *ctx, const struct runspec *s, const struct specsig_verdict *v);
};

/*
 * Recompute `next`: walk the queue in create_revision order (reading it POOL_PAGE entries at a
 * time in key order and keeping the oldest candidate), delete the entries of runs that ended,
 * move aside the entries that are not ours (pool_move_bad, then hooks->bad), skip full runs and the n_full runs in `full` (the
 * caller found every seat of them taken), move aside the specs hooks->gate refuses, and CAS `next`
 * to the first run with room ("" when none; unchanged values are not rewritten). *ret (may be
 * NULL) gets that run's spec (the caller clears it; zeroed when none). `hooks` may be NULL.
 */
int pool_advance(struct pool *p, const char *const *full, size_t n_full,
                 const struct pool_hooks *hooks, struct runspec *ret, struct ea_error *err);

/* An idle daemon's scans of the queue on a `next` it cannot join (a run missing, not ours, full
 * or over) are at least this far apart: whoever may write `next` cannot make every daemon read
 * the whole queue once per write. */
#define POOL_RESCAN_GAP_MS 1000

/* When such a scan may run, the last one having run at last_scan_ms (0: never): now_ms, or
 * POOL_RESCAN_GAP_MS after the last. Pure (monotonic ms in, out). */
int64_t pool_rescan_at(int64_t last_scan_ms, int64_t now_ms);

/*
 * Move spec `s` (read from the queue at s->queue_rev) aside, refused for v's reason, by daemon
 * `node`: in one transaction fenced on that revision, put refused/<run> (the reason, the signer
 * and the spec) and delete the queue entry. 0 when this call moved it; KV_ECONFLICT when the
 * entry changed or went meanwhile (another daemon refused it first); a KV error.
 */
int pool_refuse(struct pool *p, const struct runspec *s, const struct specsig_verdict *v,
                const char *node, struct ea_error *err);

/*
 * Move queue entry `e` (read from the queue), which is not a spec of ours for reason `why`,
 * aside by daemon `node`: in one transaction fenced on e->mod_revision, put refused/<name> (the
 * reason, the entry when it is text of at most RUNSPEC_BYTES_MAX, its size) and delete it.
 * <name> is the key's run id when it could be one, else "~key-" and a hash of the key.
 * 0 when this call moved it; KV_ECONFLICT when the entry changed or went meanwhile; a KV error.
 */
int pool_move_bad(struct pool *p, const struct kv_entry *e, const char *why, const char *node,
                  struct ea_error *err);

/*
 * Claim a seat of run `s` for daemon `node`: one of `seats/<run>/<k>`, k < s->max_nodes, created
 * with `lease` (create-only), probing from a slot picked by the node id (at most 64 probes); a
 * seat its own earlier incarnation still holds is taken over. So at most max daemons join a run.
 * 0 and *ret_seat; -EBUSY when every seat probed is taken; a KV error.
 */
int pool_seat_claim(struct pool *p, const struct runspec *s, const char *node, int64_t lease,
                    int *ret_seat, struct ea_error *err);
/* Give seat `seat` of `run_id` back (delete it). */
int pool_seat_release(struct pool *p, const char *run_id, int seat, struct ea_error *err);

/* Read the queued spec of `run_id`: 0, KV_ENOTFOUND, -EBADMSG (not ours) or a KV error. */
int pool_spec_get(struct pool *p, const char *run_id, struct runspec *ret, int64_t *ret_rev,
                  struct ea_error *err);

/* Close run `run_id` (its state goes `closed`, so every agent stops its workers and exits 4;
 * a run that never started gets a closed state), then drop it from the queue and advance. A
 * refused spec of that id (refused/<run-id>) is deleted (forgotten).
 * `min`/`max` are used only when no state exists. 0 or an error; -ENOENT when neither the queue
 * nor the store knows the run. */
int pool_close_run(struct pool *p, const char *run_id, struct ea_error *err);

/* Exit code a run's final status means (0 succeeded, 1 failed, 4 closed), -1 not final. */
int pool_status_exit(const char *status);

#endif
