// SPDX-License-Identifier: Apache-2.0
/*
 * ring_proto: the liveness ring's wire format (docs/protocol.md "The liveness ring"). A
 * connection starts with a hello from the side that connected (which run, which round, from
 * which node to which node, a link or a one-shot probe) and one fixed-size answer; a link then
 * carries one byte per heartbeat each way ('H', and 'B' for a deliberate close). Everything here
 * is pure: encode and decode with every field checked and every size bounded, since anyone who
 * can reach the port can send anything.
 */
#ifndef EA_AGENT_LIVENESS_RING_PROTO_H
#define EA_AGENT_LIVENESS_RING_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"

#define RING_MAGIC "EAL1"
/* Run and node ids on the wire: 1..RING_NAME_MAX bytes of printable ASCII (no space). */
#define RING_NAME_MAX 127
/* magic 4, kind 1, three lengths 3, round 8, then the run id and two node ids */
#define RING_HELLO_HEADER 16
#define RING_HELLO_MAX (RING_HELLO_HEADER + 3 * RING_NAME_MAX)
/* magic 4, status 1, round 8 */
#define RING_ANSWER_LEN 13

#define RING_BEAT 'H' /* a heartbeat */
#define RING_BYE 'B'  /* the sender closes the link on purpose (its round ended): no suspicion */

enum ring_kind {
    RING_KIND_LINK = 1,  /* a ring link: heartbeats both ways until one side closes it */
    RING_KIND_PROBE = 2, /* a confirmation probe: answered, then closed */
};

enum ring_status {
    RING_OK = 0,       /* accepted */
    RING_BAD_RUN = 1,  /* not this run: the port is someone else's */
    RING_NOT_ME = 2,   /* not this node: the port is someone else's */
    RING_STALE = 3,    /* the hello's round is older than the answering node's */
    RING_LATER = 4,    /* the hello's round is newer: the answering node has not seen it yet */
    RING_NOT_PEER = 5, /* in this round the sender is not the answering node's predecessor */
};

struct ring_hello {
    enum ring_kind kind;
    int64_t round; /* >= 0 */
    char run[RING_NAME_MAX + 1];
    char from[RING_NAME_MAX + 1];
    char to[RING_NAME_MAX + 1];
};

/* Encode into buf (at least RING_HELLO_MAX bytes): its length, or -EINVAL when a name is empty,
 * too long or not printable, or the round is negative. */
int ring_hello_encode(const struct ring_hello *h, uint8_t *buf, size_t size);
/* Decode the hello at the start of buf[0..len): 1 with *ret and *ret_used (bytes it took), 0
 * when more bytes are needed (len < what the header announces), -EBADMSG naming the bad field. */
int ring_hello_decode(const uint8_t *buf, size_t len, struct ring_hello *ret, size_t *ret_used,
                      struct ea_error *err);

void ring_answer_encode(enum ring_status status, int64_t round, uint8_t out[RING_ANSWER_LEN]);
/* 1 with *ret_status and *ret_round, 0 when len < RING_ANSWER_LEN, -EBADMSG when malformed. */
int ring_answer_decode(const uint8_t *buf, size_t len, enum ring_status *ret_status,
                       int64_t *ret_round);

/* "ok", "not this run", ... for messages. */
const char *ring_status_name(enum ring_status s);

/* For the ring's connects (ring.c): whether a connect that failed with `e` (a positive errno)
 * at once, before any packet left this node, says nothing about the peer: no route or address
 * here, no local port, fd or buffer, a local firewall rule. Retried and counted, never
 * suspected. */
bool ring_local_error(int e);

/* A listening TCP socket (non-blocking, close-on-exec) on addr (numeric; NULL or "" = every
 * address, IPv6 and IPv4 where the host has IPv6), port chosen by the kernel: its fd and the port
 * in *ret_port, or -errno. */
int ring_listen(const char *addr, int *ret_port);

#endif
