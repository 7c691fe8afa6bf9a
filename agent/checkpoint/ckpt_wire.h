// SPDX-License-Identifier: Apache-2.0
/*
 * ckpt_wire: the checkpoint replication port's wire format and its admission decision
 * (docs/checkpoint.md "Replication"). The side that connects sends a hello (which run, which
 * round, from which node to which node); the answer is one fixed-size status. Then each shard is
 * a fixed header (step, shard, shards, length, CRC-32) and its bytes, answered by one status.
 * Everything here is pure: every field checked and every size bounded, since anyone who can
 * reach the port can send anything.
 */
#ifndef EA_AGENT_CKPT_WIRE_H
#define EA_AGENT_CKPT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"

#define CKPT_WIRE_MAGIC "EAC1"
#define CKPT_WIRE_NAME_MAX 127 /* run and node ids: 1..127 printable ASCII bytes, no space */
/* magic 4, three lengths 3, pad 1, round 8, then the run id and two node ids */
#define CKPT_HELLO_HEADER 16
#define CKPT_HELLO_MAX (CKPT_HELLO_HEADER + 3 * CKPT_WIRE_NAME_MAX)
/* magic 4, step 8, shard 4, shards 4, length 8, crc 4 */
#define CKPT_SHARD_HDR_LEN 32
/* magic 4, status 1, message length 1, message (not NUL-terminated) */
#define CKPT_ANSWER_MAX (6 + 255)

enum ckpt_wire_status {
    CKPT_W_OK = 0,
    CKPT_W_BAD_RUN = 1,  /* not this run */
    CKPT_W_NOT_ME = 2,   /* addressed to another node */
    CKPT_W_STALE = 3,    /* the hello's round is older than the receiver's */
    CKPT_W_LATER = 4,    /* newer: the receiver has not seen that round yet (retry) */
    CKPT_W_NOT_PEER = 5, /* the sender is not the receiver's ring predecessor in this round */
    CKPT_W_NOFIT = 6,    /* the shard does not fit --checkpoint-memory */
    CKPT_W_BAD = 7,      /* a malformed header, a checksum or length that differs */
    CKPT_W_NOT_HELD = 8, /* a fetch: that shard of that step is not held here */
    CKPT_W_NOT_MEMBER = 9, /* a fetch: the sender is not a member of this round */
};
#define CKPT_W_LAST CKPT_W_NOT_MEMBER

struct ckpt_hello {
    int64_t round;
    char run[CKPT_WIRE_NAME_MAX + 1];
    char from[CKPT_WIRE_NAME_MAX + 1];
    char to[CKPT_WIRE_NAME_MAX + 1];
};

struct ckpt_shard_wire {
    int64_t step;
    int shard, shards;
    uint64_t len;
    uint32_t crc;
};

/* What the receiver knows of its round: its run, the round (-1: none running), its own id and
 * its ring predecessor's ("" none). */
struct ckpt_view {
    const char *run;
    int64_t round;
    const char *me;
    const char *prev;
};

/* buf: at least CKPT_HELLO_MAX bytes. Its length, or -EINVAL (a name empty, too long or not
 * printable; a negative round). */
int ckpt_hello_encode(const struct ckpt_hello *h, uint8_t *buf, size_t size);
/* 1 with *ret and *ret_used, 0 when more bytes are needed, -EBADMSG naming the bad field. */
int ckpt_hello_decode(const uint8_t *buf, size_t len, struct ckpt_hello *ret, size_t *ret_used,
                      struct ea_error *err);
/* Who may send replicas here: the run's, addressed to this node, of its current round, from its
 * ring predecessor in that round. CKPT_W_OK, else the status with a message in err. */
enum ckpt_wire_status ckpt_admit(const struct ckpt_hello *h, const struct ckpt_view *v,
                                 struct ea_error *err);

void ckpt_shard_encode(const struct ckpt_shard_wire *s, uint8_t out[CKPT_SHARD_HDR_LEN]);
/* 1 with *ret, 0 when len < CKPT_SHARD_HDR_LEN, -EBADMSG: a bad magic, step outside 0..2^53,
 * shards outside 1..65536, shard outside 0..shards-1, or a length of 0 or above max_len. */
int ckpt_shard_decode(const uint8_t *buf, size_t len, uint64_t max_len,
                      struct ckpt_shard_wire *ret, struct ea_error *err);

/* The answer: its length (message cut at 255 bytes). */
size_t ckpt_answer_encode(enum ckpt_wire_status st, const char *msg, uint8_t out[CKPT_ANSWER_MAX]);
/* 1 with *ret_status and msg (NUL-terminated, msg_size >= 256), 0 when more bytes are needed,
 * -EBADMSG. *ret_used: the bytes it took. */
int ckpt_answer_decode(const uint8_t *buf, size_t len, enum ckpt_wire_status *ret_status,
                       char *msg, size_t msg_size, size_t *ret_used);

const char *ckpt_wire_status_name(enum ckpt_wire_status s);

/*
 * A fetch (docs/checkpoint.md "Fetch"): a member asks any member for one shard it holds. The
 * request is a hello of its own magic ("EAF1") followed by the step and the shard; the answer is
 * an answer (above), then, when it is ok, a shard header and the bytes.
 */
#define CKPT_FETCH_MAGIC "EAF1"
/* magic 4, three lengths 3, pad 1, round 8, step 8, shard 4, then the three names */
#define CKPT_FETCH_HEADER 28
#define CKPT_FETCH_MAX (CKPT_FETCH_HEADER + 3 * CKPT_WIRE_NAME_MAX)
struct ckpt_fetch_req {
    struct ckpt_hello h; /* run, round, from (the asker), to (the holder) */
    int64_t step;
    int shard;
};
/* buf: at least CKPT_FETCH_MAX bytes. Its length, or -EINVAL (a bad name, round, step or shard). */
int ckpt_fetch_encode(const struct ckpt_fetch_req *q, uint8_t *buf, size_t size);
/* 1 with *ret and *ret_used, 0 when more bytes are needed, -EBADMSG naming the bad field (a bad
 * magic, a name empty, too long or not printable, a negative round, step outside 0..2^53, shard
 * outside 0..65535). */
int ckpt_fetch_decode(const uint8_t *buf, size_t len, struct ckpt_fetch_req *ret, size_t *ret_used,
                      struct ea_error *err);
/* Who may fetch from here: the run's, addressed to this node, of its current round, from a
 * member of that round (`member`: the caller's answer for q->h.from, 1 a member, else not).
 * CKPT_W_OK, else the status with a message in err. */
enum ckpt_wire_status ckpt_fetch_admit(const struct ckpt_fetch_req *q, const struct ckpt_view *v,
                                       int member, struct ea_error *err);

/* A non-blocking TCP connect to the numeric address `addr` (IPv4 or IPv6) and `port`, the
 * replication port's and the fetch's: the fd (its connect may still be in progress: a write
 * readiness ends it), or -EINVAL for an address that is not numeric, or another -errno. */
int ckpt_connect(const char *addr, int port);

#endif
