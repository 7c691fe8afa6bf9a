// SPDX-License-Identifier: Apache-2.0
/*
 * nic: NIC discovery through the store (docs/protocol.md "NIC discovery"), Horovod's ring probe
 * without a driver service. Each agent publishes its interfaces and a probe port in its node
 * record and keeps a TCP listener there; for a committed round it connects (non-blocking, all at
 * once, short timeout) to every address of the next member in ring (group-rank) order, publishes
 * the interface names it reached under probe/<node-id>, and, once every member's result for the
 * same membership is in, takes the intersection: the interfaces workers use. Results are keyed by
 * a signature of the membership (node ids, agent pids, probe ports, addresses), so a new round of
 * the same nodes (a worker restart) reuses them and only a membership change probes again.
 * Driven by the agent loop: its fds, its wake time, and nic_step() before workers start.
 */
#ifndef EA_AGENT_NIC_H
#define EA_AGENT_NIC_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"
#include "session.h"
#include "state.h"

struct nic;

/* Most fds nic_pollfds() asks for: the listener and one per probed address. */
#define NIC_POLL_MAX (1 + RDZV_IFACE_MAX)

/* How long one probe connect may take before the address counts as unreachable. */
#define NIC_PROBE_TIMEOUT_MS 2000

/* Create from --nic-discovery / --iface. With "off" nothing is opened and every round is ready at
 * once. Otherwise enumerates the interfaces (netif.h; -ENODEV when an --iface name has no
 * address) and opens the probe listener. */
int nic_create(const char *discovery, const char *iface, struct nic **ret, struct ea_error *err);

/* Something the agent should log once after nic_create() (addresses left out), else NULL. */
const char *nic_warning(const struct nic *n);
/* Close the listener and any probe in flight. NULL is a no-op. */
void nic_destroy(struct nic *n);

/* Put this node's interfaces and probe port into its node record (nothing when off). */
void nic_fill_self(const struct nic *n, struct rdzv_node *self);

enum nic_status {
    NIC_READY = 0,  /* workers may start (discovery done for this membership, or not needed) */
    NIC_WAIT = 1,   /* probing, or waiting for other members' results: call again on events */
    NIC_DONE = 2,   /* discovery just finished (first call that sees it): NIC_READY + log it */
    NIC_FAILED = 3, /* no common interface (or a member does not take part): the round fails;
                       err lists what each node reached */
};

/*
 * Advance discovery for round `s` of which this node is member `my_index`, at monotonic `now_ms`.
 * A status above, or a negative store error from publishing (retry later). May publish
 * probe/<node-id> through the session.
 */
int nic_step(struct nic *n, struct rdzv_session *rdzv, const struct rdzv_state *s, int my_index,
             int64_t now_ms, struct ea_error *err);

/* After NIC_READY/NIC_DONE for a round where discovery ran: the common interfaces ("eth0,ib0")
 * and this round's group-rank-0 address on the first of them; NULL when discovery did not run
 * (off, or auto on one host). Owned by n. */
const char *nic_ifaces(const struct nic *n);
const char *nic_master_addr(const struct nic *n);
/* Milliseconds the last finished discovery took (first step of its membership to the result). */
int64_t nic_last_ms(const struct nic *n);

/* Fill up to `max` pollfds (listener, probes in flight); returns how many. */
size_t nic_pollfds(const struct nic *n, struct pollfd *fds, size_t max);
/* Handle the revents of the fds nic_pollfds() filled. */
void nic_on_poll(struct nic *n, const struct pollfd *fds, size_t nfds);
/* Monotonic time of the probe deadline, or -1. */
int64_t nic_wake_ms(const struct nic *n);

#endif
