// SPDX-License-Identifier: Apache-2.0
/*
 * ckpt_store: what the checkpoint store holds and the decisions about it, as pure functions: a
 * save's bounds (step, shard, shards, length) and the memory bound (--checkpoint-memory, pending
 * saves counted), a commit's verification (length and checksum), which step is complete (every
 * shard 0..shards-1 committed) and what is evicted once a newer one is, and the one spare memfd
 * (prepared ahead of the next save, counted in the bound, dropped first, handed out once). No
 * I/O: an entry's fd (and the spare's) is the caller's memfd, closed here when it is dropped
 * (tests pass -1).
 */
#ifndef EA_AGENT_CKPT_STORE_H
#define EA_AGENT_CKPT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"

#define CKPT_MAX_SHARDS 65536
#define CKPT_MAX_ENTRIES 4096
#define CKPT_MAX_STEP (INT64_C(1) << 53) /* a Python int and a JSON number both hold it */
#define CKPT_RUN_MAX 64                  /* run ids are shorter (the config's run_id_buf) */

struct ckpt_entry {
    uint64_t id;  /* unique in the store: a pending save is committed by it */
    uint64_t owner; /* the connection that reserved it (pending only) */
    int64_t step;
    int shard, shards;
    uint64_t len;
    uint32_t crc; /* CRC-32 (zlib's) of the bytes, when crc_known */
    bool crc_known; /* declared by the worker and verified, or read from disk; else the writer
                       of --checkpoint-dir computes it */
    int fd;       /* the memfd (sealed once committed), -1 in tests */
    bool committed;
    bool persisted; /* written to --checkpoint-dir (or read from it) */
    bool replica;   /* received from the ring predecessor (ckpt_repl.c): served and counted like
                       an own shard, never sent on */
};

#define CKPT_REAP_MAX 16 /* dropped memfds waiting to be closed (past it: closed at once) */

struct ckpt_store {
    char run[CKPT_RUN_MAX];
    uint64_t limit; /* bytes, own shards and pending saves */
    uint64_t used;
    struct ckpt_entry *e;
    size_t n, cap;
    uint64_t next_id;
    int64_t complete;   /* the newest complete step, -1 none */
    int complete_shards;
    /* The spare (docs/checkpoint.md "The spare"): a memfd of spare_len bytes, backed ahead of the
     * next save (spare_done of them so far), that a save of at most spare_len bytes takes instead
     * of a fresh one. Counted in the bound from ckpt_store_spare_begin on; never reused. */
    int spare_fd;       /* -1: none (yet) */
    uint64_t spare_len; /* 0: no spare */
    uint64_t spare_done;
    /* memfds dropped but not closed yet: closing one frees its pages (tens of ms for 256 MB),
     * so a request that drops entries replies first and closes them after (ckpt_store_reap) */
    int reap[CKPT_REAP_MAX];
    size_t n_reap;
};

void ckpt_store_init(struct ckpt_store *s, const char *run, uint64_t limit);
/* Close every entry's fd and free; the store is empty after it. */
void ckpt_store_clear(struct ckpt_store *s);
/* Close the memfds dropped since the last call (their pages are freed now, after the reply). */
void ckpt_store_reap(struct ckpt_store *s);

/*
 * Reserve room for shard `shard` of `shards` of step `step`, `len` bytes, for connection `owner`:
 * 0 and *ret_id (the caller then attaches the memfd with ckpt_store_set_fd). Bounds checked here:
 * -EINVAL (step outside 0..2^53, shards outside 1..65536, shard outside 0..shards-1, or shards
 * differing from what this step was saved with), -ESTALE (older than the newest complete step),
 * -EBUSY (that shard of that step is being saved already), -ENOSPC (does not fit the memory bound
 * even after dropping what may be dropped: the spare first, then steps older than `step` but
 * never the newest complete one; or the table is full). Every error with a message for the
 * worker.
 */
int ckpt_store_reserve(struct ckpt_store *s, uint64_t owner, int64_t step, int shard, int shards,
                       uint64_t len, uint64_t *ret_id, struct ea_error *err);
/*
 * A worker's save: ckpt_store_reserve, and when the spare holds `len` bytes or more it is handed
 * over in *ret_spare (the caller's from then on: it truncates it to `len` and attaches it with
 * ckpt_store_set_fd), else *ret_spare is -1 and the caller makes a fresh memfd. The spare is
 * handed out once: the store forgets it. Replicas and fetches never take it (ckpt_store_reserve:
 * they only drop it when they need its room).
 */
int ckpt_store_reserve_save(struct ckpt_store *s, uint64_t owner, int64_t step, int shard,
                            int shards, uint64_t len, uint64_t *ret_id, int *ret_spare,
                            struct ea_error *err);
/*
 * Start a spare of `len` bytes: 0 (it counts in the bound from now on; the caller makes its
 * memfd and attaches it with ckpt_store_spare_set), -EEXIST (there is one), -EINVAL (len 0), or
 * -ENOSPC (it does not fit beside everything held: a spare never drops anything).
 */
int ckpt_store_spare_begin(struct ckpt_store *s, uint64_t len);
void ckpt_store_spare_set(struct ckpt_store *s, int fd);
/* Drop the spare (its memfd closed, its room freed); none is a no-op. */
void ckpt_store_spare_drop(struct ckpt_store *s);
/*
 * A worker is about to save step `step` with `shards` shards: the committed shards of that step
 * saved with another shard count (a partial step of an older world: a run resumed from an older
 * step at a new world size saves that step again) are dropped, unless it is the newest complete
 * step or one of its shards is being saved (then the save is refused by ckpt_store_reserve). How
 * many were dropped. Replicas and fetches never supersede: only a worker of this round saves.
 */
size_t ckpt_store_supersede(struct ckpt_store *s, int64_t step, int shards);
void ckpt_store_set_fd(struct ckpt_store *s, uint64_t id, int fd);
/* The pending entry `id` of `owner`, or NULL. */
struct ckpt_entry *ckpt_store_pending(struct ckpt_store *s, uint64_t owner, uint64_t id);

/*
 * Commit pending save `id` of `owner`: its bytes measured by the caller after sealing them
 * (`size`, and with `declared` their `crc`) must match what the worker declared (the reserved
 * length, and with `declared` `crc_declared`; without, the seal alone vouches for the bytes).
 * 1 when the commit made its step the newest complete one (older steps are dropped), 0 when
 * committed, -ENOENT (no such pending save: dropped meanwhile), -EBADMSG (length or checksum
 * differs: the save is dropped). A committed entry of the same step and shard is replaced.
 */
int ckpt_store_commit(struct ckpt_store *s, uint64_t owner, uint64_t id, uint64_t size,
                      bool declared, uint32_t crc, uint32_t crc_declared, struct ea_error *err);
/* Drop entry `id` (a save whose memfd could not be made). */
void ckpt_store_drop(struct ckpt_store *s, uint64_t id);
/* Drop the pending saves of `owner` (its connection closed). */
void ckpt_store_drop_owner(struct ckpt_store *s, uint64_t owner);

/* The newest complete step: 0 with *ret_step, *ret_shards; -ENOENT none. */
int ckpt_store_latest(const struct ckpt_store *s, int64_t *ret_step, int *ret_shards);
/* The committed entry of (step, shard), or NULL. */
const struct ckpt_entry *ckpt_store_find(const struct ckpt_store *s, int64_t step, int shard);

#endif
