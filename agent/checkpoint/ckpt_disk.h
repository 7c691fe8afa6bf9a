// SPDX-License-Identifier: Apache-2.0
/*
 * ckpt_disk: --checkpoint-dir. A shard's file is DIR/RUN/step-<STEP>/shard-<I>-of-<N>: a header
 * (magic, run, step, shard, shards, length, CRC-32 of the bytes, CRC-32 of the header) and the
 * bytes; written as a temp file, fsync, rename, fsync of the directory, so a file under its name
 * is whole. A writer thread of its own takes the jobs (the loop never waits on the disk) and says
 * what it wrote on an eventfd. A whole-run restart reads the newest step whose every shard's file
 * is whole and of this run (a corrupt or foreign file makes its step skipped: an older one is
 * used). No logging: results are the caller's to log.
 */
#ifndef EA_AGENT_CKPT_DISK_H
#define EA_AGENT_CKPT_DISK_H

#include <stdbool.h>
#include <stdint.h>

#include "ea_error.h"

struct ckpt_shard_hdr {
    char run[64];
    int64_t step;
    int32_t shard, shards;
    uint64_t len;
    uint32_t crc;
    bool crc_known; /* not on disk: ckpt_disk_write computes the CRC, and checks it when known */
};

/* Write one shard (the bytes of memfd `fd`, h->len of them) under dir, with their CRC computed
 * here (-EBADMSG when h->crc_known and it differs): 0 or -errno with err. */
int ckpt_disk_write(const char *dir, const struct ckpt_shard_hdr *h, int fd, struct ea_error *err);

/* Called for each shard of the step found, with a sealed memfd of its bytes (the callee owns
 * it); a negative return stops the read (the step is then not complete). */
typedef int (*ckpt_disk_shard_fn)(void *ctx, const struct ckpt_shard_hdr *h, int fd);

/*
 * Find the newest step under dir/run whose shards 0..N-1 are all whole (header and bytes' CRC)
 * and of `run`, not above `max_bytes` in all, and hand each to fn: 1 with *ret_step, 0 none found,
 * -errno on a failure of fn. *ret_skipped counts the steps skipped as corrupt or partial.
 */
int ckpt_disk_read_latest(const char *dir, const char *run, uint64_t max_bytes,
                          ckpt_disk_shard_fn fn, void *ctx, int64_t *ret_step, int *ret_skipped,
                          struct ea_error *err);

/* Remove step directories of run older than `keep_from`. */
void ckpt_disk_prune(const char *dir, const char *run, int64_t keep_from);

/* The background writer. */
struct ckpt_writer;
int ckpt_writer_create(const char *dir, struct ckpt_writer **ret, struct ea_error *err);
/* Queue a shard (fd is dup'ed): 0, or -ENOMEM / -EAGAIN (64 jobs queued already: skipped). */
int ckpt_writer_queue(struct ckpt_writer *w, const struct ckpt_shard_hdr *h, int fd);
/* Readable when a job is done. */
int ckpt_writer_fd(const struct ckpt_writer *w);
/* A finished job: 1 with *ret_h and *ret_rc (0 or -errno, text in err), 0 none. */
int ckpt_writer_done(struct ckpt_writer *w, struct ckpt_shard_hdr *ret_h, int *ret_rc,
                     struct ea_error *err);
/* Finish the queued jobs and stop the thread (their results stay for ckpt_writer_done). */
void ckpt_writer_finish(struct ckpt_writer *w);
/* ckpt_writer_finish, then free; NULL is a no-op. */
void ckpt_writer_destroy(struct ckpt_writer *w);

#endif
