// SPDX-License-Identifier: Apache-2.0
/*
 * tracker admit: who may connect to the built-in rabit tracker (docs/security.md "The built-in
 * tracker"): a connection is admitted only from an address a member node's record lists (or
 * loopback, when every member is on this host), and at most TRACKER_CONNS_PER_WORKER × the
 * workers behind that address at once. Pure bookkeeping over socket addresses, no I/O.
 */
#ifndef EA_AGENT_TRACKER_ADMIT_H
#define EA_AGENT_TRACKER_ADMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "ea_error.h"
#include "tracker.h"

/* One source address (or all of loopback) and its connections. */
struct tracker_bucket {
    int family;            /* AF_INET or AF_INET6; 0: loopback (127/8, ::1) */
    unsigned char bin[16]; /* the address */
    int workers;           /* the workers behind it */
    int open;              /* connections open now */
};

struct tracker_admit {
    struct tracker_bucket *b;
    size_t n;
};

/* Build the buckets of p->hosts (addresses that do not parse are skipped: they admit nobody),
 * plus loopback for p->loopback or when p->n_hosts is 0. 0 or -ENOMEM. */
int tracker_admit_init(struct tracker_admit *a, const struct tracker_params *p,
                       struct ea_error *err);
void tracker_admit_free(struct tracker_admit *a);

/* The bucket a peer at `ss` belongs to, or -1: not a member host (refused). IPv4-mapped IPv6
 * peers count as their IPv4 address. */
int tracker_admit_bucket(const struct tracker_admit *a, const struct sockaddr_storage *ss);

/* Take a connection slot of bucket i: false when it is at its cap (refused). */
bool tracker_admit_take(struct tracker_admit *a, int i);
/* Give it back (the connection closed). i < 0 is a no-op. */
void tracker_admit_release(struct tracker_admit *a, int i);

#endif
