// SPDX-License-Identifier: Apache-2.0
/*
 * warm_proto: the line protocol on a warm spare's ELASTIC_ASSIGN_FD (docs/warm.md), both ends'
 * messages as pure functions: the worker's `ready` line, parsed as hostile input (bounded, every
 * field checked), and the agent's assignment line. No I/O, no state; the socket is warm.c's.
 */
#ifndef EA_AGENT_WARM_PROTO_H
#define EA_AGENT_WARM_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"

/* Longest line a worker may send, its '\n' included: a longer one is malformed. */
#define WARM_LINE_MAX 1024
/* Longest assignment line the agent sends (the worker's whole environment). */
#define WARM_ASSIGN_MAX (1 << 20)

/*
 * A worker's line, without its '\n': `{"ready":1,"pid":N}` or `{"ready":1,"pid":N,"inplace":1}`
 * (other members are ignored, for later versions). 0 with *ret_pid (1..INT32_MAX) and
 * *ret_inplace ("inplace" is 1: the worker can take a new assignment while it runs); -EBADMSG
 * with a message saying what is wrong (not JSON, not an object, "ready" not 1, "pid" missing or
 * out of range, "inplace" not 0 or 1, a NUL byte).
 */
int warm_parse_ready(const char *line, size_t len, long *ret_pid, bool *ret_inplace,
                     struct ea_error *err);

/*
 * An in-place worker's acknowledgement, without its '\n': `{"ack":G}` (G >= 1: the generation
 * it took; other members ignored). 0 with *ret_gen; -EBADMSG with a message as above.
 */
int warm_parse_ack(const char *line, size_t len, int64_t *ret_gen, struct ea_error *err);

/*
 * The assignment line: `{"generation":G,"round":R,"env":{"NAME":"VALUE",...}}\n` with every
 * NAME=VALUE of `env` (NULL-terminated). Strings are escaped as JSON requires ('"', '\\' and
 * control characters); other bytes pass as they are (an environment is bytes: the helpers decode
 * UTF-8 with surrogateescape). malloc'ed into *ret (NUL-terminated, *ret_len bytes without the
 * NUL). -EINVAL for an entry without '=' or generation < 1, -E2BIG past WARM_ASSIGN_MAX, -ENOMEM.
 */
int warm_format_assignment(int64_t generation, int64_t round, char *const *env, char **ret,
                           size_t *ret_len);

#endif
