// SPDX-License-Identifier: Apache-2.0
/*
 * tracker proto: the rabit tracker's wire format as XGBoost 1.7's rabit client speaks it — native
 * 32-bit ints, strings as an int length and bytes, the magic handshake, the hello (rank, world
 * size, task id, command) and the link map a worker gets. Pure parsing and encoding over byte
 * buffers, no sockets, so every malformed input is unit-tested; tracker.c drives the connections.
 */
#ifndef EA_AGENT_TRACKER_PROTO_H
#define EA_AGENT_TRACKER_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "topology.h"

#define TRACKER_MAGIC 0xff99
#define TRACKER_STR_MAX 256          /* a task id or a command */
#define TRACKER_PRINT_MAX (64 << 10) /* one print message */
#define TRACKER_NEIGHBORS_MAX 4      /* tree parent and children, ring prev and next, distinct */

enum tracker_cmd { TRACKER_START, TRACKER_RECOVER, TRACKER_SHUTDOWN, TRACKER_PRINT };

/* What a worker sends after the magic: its rank (-1 before it has one), the world size it
 * believes in (-1 when it was not told), its task id ("NULL" when it has none) and a command. */
struct tracker_hello {
    int32_t rank;
    int32_t world_size;
    char task_id[TRACKER_STR_MAX + 1];
    char cmd_name[TRACKER_STR_MAX + 1]; /* as sent, for messages */
    enum tracker_cmd cmd;
};

/*
 * Each parser reads one item at buf[*off] of the len bytes received so far: 1 when complete
 * (*off advanced past it, the out-parameter set), 0 when more bytes are needed (nothing
 * changed), or a negative errno: -EMSGSIZE for a string length above `max` (or negative),
 * -EPROTO for an unknown command (the name is still copied to cmd_name).
 */
int tracker_get_int(const uint8_t *buf, size_t len, size_t *off, int32_t *ret);
int tracker_get_str(const uint8_t *buf, size_t len, size_t *off, size_t max, char *ret);
int tracker_parse_hello(const uint8_t *buf, size_t len, size_t *off, struct tracker_hello *ret);

/* The rank a start/recover hello asks for in a world of `world` ranks: its own rank when it
 * has one, else its task id read as a decimal rank. -ERANGE when outside 0..world-1, -EINVAL
 * when there is neither. */
int tracker_hello_rank(const struct tracker_hello *h, int world);

/* Rank r's links as the tracker sends them: `nn` gets the distinct neighbours it must be linked
 * to (tree parent and children, then ring prev and next when not already there and not r);
 * returns their number. *ret_prev / *ret_next are the ring links as sent (-1 for none). */
int tracker_neighbors(const struct rdzv_link *links, int r, int nn[TRACKER_NEIGHBORS_MAX],
                      int *ret_prev, int *ret_next);

/* Append one native int / one string (length + bytes) to out[*len..cap); -ENOBUFS when full. */
int tracker_put_int(uint8_t *out, size_t cap, size_t *len, int32_t v);
int tracker_put_str(uint8_t *out, size_t cap, size_t *len, const char *s);

/* Encode the rank assignment: rank, parent, world size, tree neighbour count and ranks, ring
 * prev, ring next. 0 or -ENOBUFS. */
int tracker_put_assignment(uint8_t *out, size_t cap, size_t *len, const struct rdzv_link *links,
                           int world, int r);

#endif
