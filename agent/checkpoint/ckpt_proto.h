// SPDX-License-Identifier: Apache-2.0
/*
 * ckpt_proto: the messages on ELASTIC_AGENT_CHECKPOINT_SOCKET (docs/checkpoint.md), one request
 * per SOCK_SEQPACKET message, parsed as hostile input (bounded, every field checked), and CRC-32
 * (zlib's polynomial: Python's zlib.crc32 computes the same). No I/O, no state.
 *
 *   save RUN STEP SHARD SHARDS LENGTH  -> ok ID (+ a memfd of LENGTH bytes) | err CODE TEXT
 *   commit ID CRC                      -> ok STEP SHARD | err CODE TEXT   (CRC: 8 hex digits, or
 *                                         '-': none declared, the seal alone vouches for them)
 *   latest RUN                         -> ok STEP SHARDS | none
 *   load RUN STEP SHARD                -> ok LENGTH CRC|- (+ a sealed memfd) | err CODE TEXT
 */
#ifndef EA_AGENT_CKPT_PROTO_H
#define EA_AGENT_CKPT_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt_store.h"
#include "ea_error.h"

/* Longest request (and reply): a longer one is malformed. */
#define CKPT_MSG_MAX 512

enum ckpt_op { CKPT_SAVE, CKPT_COMMIT, CKPT_LATEST, CKPT_LOAD };

struct ckpt_req {
    enum ckpt_op op;
    char run[CKPT_RUN_MAX];
    int64_t step;
    int64_t shard, shards; /* range-checked by ckpt_store_reserve */
    uint64_t len;
    uint64_t id;
    uint32_t crc;
    bool has_crc; /* commit: a CRC declared (not '-') */
};

/* Parse one message of n bytes: 0 with *ret, or -EBADMSG with what is wrong (unknown verb, a
 * field missing, extra, not a decimal number, out of range, a run id too long, a NUL byte). */
int ckpt_req_parse(const char *msg, size_t n, struct ckpt_req *ret, struct ea_error *err);

/* CRC-32 of n bytes continuing `crc` (0 to start): zlib.crc32(data, crc). */
uint32_t ckpt_crc32(uint32_t crc, const void *data, size_t n);

#endif
