// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv session: one node's side of the rendezvous protocol over a kv store (docs/protocol.md).
 * Joins with a leased `nodes/<id>` key. A node receives O(1) per round: it watches the small
 * commit record (`state`), the `coord` key and the per-round values (`rounds/`), and reads its own
 * assignment chunk (`assign/<k>`) at each commit. The coordinator (holder of the leased `coord`
 * key) mirrors the whole run and commits rounds with transactions fenced on the mod_revision of
 * `state` and `coord`. With cfg.full_view (NIC discovery, the topology file) a node mirrors the
 * whole run too: O(N) per round. It never starts processes and never logs.
 */
#ifndef EA_RENDEZVOUS_SESSION_H
#define EA_RENDEZVOUS_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "kv.h"
#include "plan.h"
#include "state.h"

struct rdzv_config {
    const char *prefix;     /* "/elastic/<run-id>/" — must end with '/' */
    struct rdzv_node self;  /* node_id, host, addr, nproc, pid of this agent */
    struct rdzv_params params;
    int64_t lease_ttl_ms;
    bool full_view; /* mirror every key of the run (O(N) per node per round): for options that
                       need every member or node record (NIC discovery, the topology file) */
};

/* What this session has exchanged with the store (for benchmarks and tests of the O(1) claim). */
struct rdzv_stats {
    uint64_t bytes_received; /* keys + values received: listings, gets, watch events */
    uint64_t requests;       /* store requests made */
    uint64_t writes;         /* requests that write (put, cas, txn, delete) */
    uint64_t keys_written;   /* keys those writes put or deleted */
    uint64_t claims;         /* tries to take the coordinator's key after it vanished */
};

struct rdzv_session;

/* Create (no I/O). `kv` is borrowed and must outlive the session. */
int rdzv_session_create(struct kv *kv, const struct rdzv_config *cfg, struct rdzv_session **ret,
                        struct ea_error *err);
/* Free; does not leave (call rdzv_leave first for a graceful exit). NULL is a no-op. */
void rdzv_session_destroy(struct rdzv_session *s);

/* Grant a lease, publish nodes/<id>, list the run and watch it from the listed revision.
 * Also used to rejoin after the lease was lost. */
int rdzv_join(struct rdzv_session *s, struct ea_error *err);

/* Apply everything the store's watch has delivered (call when kv_event_fd is readable). A broken
 * or compacted watch is repaired by re-listing. A corrupt `state` value: -EBADMSG with a message. */
int rdzv_on_events(struct rdzv_session *s, struct ea_error *err);
/* The same for events already read from the store handle (several sessions sharing one handle,
 * as in bench/rdzv_sim.c): only the events of this session's watches are applied (copied). */
int rdzv_apply_events(struct rdzv_session *s, const struct kv_event *ev, size_t n,
                      struct ea_error *err);
/* The same at monotonic time `now_ms` (a simulation's clock: tests, bench/). */
int rdzv_apply_events_at(struct rdzv_session *s, const struct kv_event *ev, size_t n,
                         int64_t now_ms, struct ea_error *err);

/* Coordinator duties at monotonic time `now_ms`: when this node coordinates, evaluate the plan and
 * CAS the result. Returns 1 when it wrote, 0 otherwise. Cheap when there is nothing to do. A
 * watch that broke and could not be re-established yet is re-established here first (an error
 * then means: retry later). */
int rdzv_tick(struct rdzv_session *s, int64_t now_ms, struct ea_error *err);

/* Renew the lease if due at `now_ms`: 1 when renewed, 0 when not due. KV_ENOLEASE: the lease is gone, or could not be renewed for
 * 2/3 of its TTL (the store may expire it soon) — this node may be fenced out; the caller must
 * stop its workers and rdzv_join() again. Other errors are transient. */
int rdzv_keepalive(struct rdzv_session *s, int64_t now_ms, struct ea_error *err);
/* rdzv_keepalive in two halves, for a caller that renews many sessions' leases in one request
 * (kv_lease_keepalive_each; bench/rdzv_sim.c): the lease to renew if due at `now_ms` (0: not
 * due), then the renewal's answer r (0 or a KV_E* code), sent at now_ms: rdzv_keepalive's
 * return for it. */
int64_t rdzv_keepalive_due(struct rdzv_session *s, int64_t now_ms);
int rdzv_keepalive_done(struct rdzv_session *s, int64_t now_ms, int r, struct ea_error *err);

/* Monotonic time until which the lease is surely valid: its last grant or renewal was sent at
 * some t and the store cannot expire it before t + TTL. 0 before the first grant. The agent hands
 * it to its workers' middlemen (launcher_fence()), which stop the workers on their own past it. */
int64_t rdzv_lease_valid_until(const struct rdzv_session *s);

/* While gathering with at least min nodes live: the monotonic time of the last call (a round is
 * committed then at the latest, --last-call after min was reached); -1 below min. */
int64_t rdzv_last_call_ms(const struct rdzv_session *s);

/* Monotonic time at which rdzv_tick()/rdzv_keepalive() next need to run (-1: never). */
int64_t rdzv_wake_ms(const struct rdzv_session *s);

/* The mirrored state (NULL before the first commit) and the generation of its round: the
 * mod_revision at which `state` was last written (while RUNNING, the commit of the round).
 * Its `members` are loaded only in full mode (coordinator, cfg.full_view); otherwise NULL, with
 * group_world_size the count: use rdzv_self_member() for this node's entry. */
const struct rdzv_state *rdzv_current(const struct rdzv_session *s, int64_t *ret_generation);
/* This node's group rank in the current round, or -1 (spare / not admitted / not known yet). */
int rdzv_my_index(const struct rdzv_session *s);
/* This node's assignment in the current round (group rank, rank base, nproc), or NULL. */
const struct rdzv_member *rdzv_self_member(const struct rdzv_session *s);
/* This node's own record as it is published (at join), and its checkpoint replication port
 * (a component's listener, set before the join: docs/checkpoint.md). */
const struct rdzv_node *rdzv_session_self(const struct rdzv_session *s);
void rdzv_session_set_ckpt_port(struct rdzv_session *s, int port);
/* Counters since the session was created. */
void rdzv_stats_get(const struct rdzv_session *s, struct rdzv_stats *ret);
/* How many times a watch ended (the store restarted, compacted its history, a stream broke) and
 * the session listed what it needs again, since it was created: for the agent's metric
 * (elastic_agent_store_resyncs_total). The first re-sync, and then at most one a minute, is also
 * reported through rdzv_take_warning() with the count, so that a re-sync loop is never silent. */
uint64_t rdzv_resync_count(const struct rdzv_session *s);
bool rdzv_is_coordinator(const struct rdzv_session *s);
/* Number of live nodes: counted by the coordinator; elsewhere as the coordinator last published
 * it while the run gathered. */
size_t rdzv_live_count(const struct rdzv_session *s);

/* rounds/<round>/master: group rank 0 of `round` publishes "addr:port" (docs/protocol.md: the
 * value names the node; create-only, a value that does not pass
 * the check below is overwritten; -EPERM when this node is not group rank 0 of the round).
 * Read: the value once it passed the check (written by group rank 0 of the round, on an
 * address its node record lists; rdzv_tick() judges it), else NULL; owned by the session. */
int rdzv_publish_master(struct rdzv_session *s, int64_t round, const char *addr_port,
                        struct ea_error *err);
const char *rdzv_master(const struct rdzv_session *s, int64_t round);
/* rounds/<round>/<name>: a small per-round value (master, tracker, ...) that every node of the
 * run receives: create-only, first writer wins (returns 0 then too); read: NULL until known.
 * `master` and `tracker` are group rank 0's and checked, as rdzv_publish_master() says.
 * `name` is a plain word ([a-z_]+). Keep values O(1): every node gets each one. */
int rdzv_publish_round_key(struct rdzv_session *s, int64_t round, const char *name,
                           const char *value, struct ea_error *err);
const char *rdzv_round_key(const struct rdzv_session *s, int64_t round, const char *name);

/* The live node record of node_id (ifaces, probe_port for NIC discovery), or NULL; owned by the
 * session, valid until the next rdzv_on_events(). Full mode only (NULL otherwise). */
const struct rdzv_node *rdzv_node_find(const struct rdzv_session *s, const char *node_id);
/* probe/<node-id> (NIC discovery, docs/protocol.md): put this node's value with its lease (it
 * vanishes with the node; each node overwrites its own), and read any node's (NULL if absent). */
int rdzv_publish_probe(struct rdzv_session *s, const char *value, struct ea_error *err);
const char *rdzv_probe(const struct rdzv_session *s, const char *node_id);
/* compute/<node-id> (straggler detection, docs/restarts.md): this node's summary of its ranks'
 * compute times, put with its lease at a bounded rate (never per step); read by the coordinator
 * (full mode: NULL otherwise, or when absent). */
int rdzv_publish_compute(struct rdzv_session *s, const char *value, struct ea_error *err);
const char *rdzv_compute(const struct rdzv_session *s, const char *node_id);

/*
 * A local worker failed in the round of `generation`: record failures/<round> (create-only, first
 * wins). The coordinator sees it and commits the next round (charging the budget once however
 * many nodes report), WAITING or FAILED. 0 also when the run has moved on already.
 */
int rdzv_report_failure(struct rdzv_session *s, int64_t generation, const struct rdzv_failure *f,
                        struct ea_error *err);
/* This node stopped the workers of `generation` without the run moving on (it lost its lease and
 * rejoined): ask the coordinator (reform/<round>, create-only) for the next round with the live
 * nodes, without charging the restart budget. 0 also when the run has moved on already. */
int rdzv_reform(struct rdzv_session *s, int64_t generation, struct ea_error *err);

/* Close the run while it runs the round of `generation` (CAS `state` to closed, fenced on the
 * generation): every agent then exits 4. Used when a round cannot work at all (NIC discovery
 * found no common interface). 0 also when the run has moved on already. */
int rdzv_close(struct rdzv_session *s, int64_t generation, struct ea_error *err);

/* Read failures/<round>. KV_ENOTFOUND when absent. */
int rdzv_get_failure(struct rdzv_session *s, int64_t round, struct rdzv_failure *ret,
                     struct ea_error *err);
/* All local workers of `round` exited 0: put done/<round>/<id> (only the coordinator watches). */
int rdzv_report_done(struct rdzv_session *s, int64_t round, struct ea_error *err);

/* Graceful leave: delete nodes/<id> and revoke the lease. No-op before a successful join. */
int rdzv_leave(struct rdzv_session *s, struct ea_error *err);

/* Copy out a message about something ignored in the store (e.g. a corrupt node record) and clear
 * it: true when there was one. Each distinct problem is reported once, for the agent to log. */
bool rdzv_take_warning(struct rdzv_session *s, char *buf, size_t size);

#endif
