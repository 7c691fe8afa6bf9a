// SPDX-License-Identifier: Apache-2.0
/*
 * The node unit's test fixture (test_node.c, test_node_walk.c, test_node_succession.c): n nodes on
 * one memory store, each a real rendezvous session in a struct node, a fake clock that moves only
 * when a test says, and a fake ring transport that records the links and probes a node asks for
 * (the test hands back the ring's reports). Writes to the store fail while `fail_writes`.
 */
#ifndef EA_TESTS_NODE_FX_H
#define EA_TESTS_NODE_FX_H

#include <stdbool.h>
#include <stdint.h>

#include "ea_loop.h"
#include "kv.h"
#include "node.h"
#include "ring.h"

#define NFX_MAX 16
#define NFX_PROBES 48
#define NFX_TTL 9000

struct probe_req {
    uint64_t id;
    char peer[RING_NAME_MAX + 1];
    int64_t round;
};

struct fake_tr {
    int64_t round;
    char prev[RING_NAME_MAX + 1], next[RING_NAME_MAX + 1];
    struct probe_req probes[NFX_PROBES];
    int n_probes, probe_max;
};

struct counts {
    int lease_lost, rejoined, suspect, evicted, cleared, fatal;
};

extern struct kv *kv;
extern const struct kv_ops *real_ops;
extern bool fail_writes;
extern int writes_tried;
extern int revoke_batches, revokes; /* kv_lease_revoke_each calls, and the leases in them */
extern struct ea_fake_clock fc;
extern struct node nodes[NFX_MAX];
extern struct fake_tr tr[NFX_MAX];
extern struct counts cnt[NFX_MAX];
extern bool dead[NFX_MAX];

/* n nodes n0..n<n-1> (live ports port_base + i) joined under prefix; a fake transport taking at
 * most probe_max probes a node (then -EBUSY). The fake clock is an hour ahead of the real one:
 * the session's own calls that read the real clock (rdzv_evict's and rdzv_suspects' derive) then
 * see a time before every deadline a test set on the fake one, however slowly the machine runs
 * the test (never after: a hold would end early). */
void nfx_setup(int n, const char *prefix, int port_base, int probe_max);
/* The same, node i with --failure-domain domains[i]. */
void nfx_setup_domains(int n, const char *prefix, int port_base, int probe_max,
                       const char *const *domains);
void nfx_teardown(void);

/* One pass of every live node: the store's events, the node's step, the ring's step. */
void pass(void);
void advance(int64_t ms);
/* k passes, 10 simulated ms apart. */
void passes(int k);
/* The running round node i is a member of, 0 when none. */
int64_t round_of(int i);
/* Passes 50 simulated ms apart until every live node is in one running round of `members` with
 * its ring set (true), or 400 passes went by (false, what each node saw logged). */
bool settle(int members);
int coordinator(void);
int index_of(const char *id);
/* The ring's report to node w: its link to node x broke. */
void link_broke(int w, int x);
/* The ring's answer to node w's probe p, and w's step after it (as in the agent's pass). */
void probe_result(int w, const struct probe_req *p, bool alive, bool local);
/* The answer alone: several of them then one step is a pass that took several reports. */
void probe_answer(int w, const struct probe_req *p, bool alive, bool local);
/* Node i's probe of node x from index `from` on, or NULL. */
const struct probe_req *probe_of(int i, int x, int from);
/* A member that does not coordinate whose two neighbours do not either (so both report it). */
int plain_member(void);
/* Node i's lease is still valid (as the coordinator's mirror has it). */
bool lease_valid(int i);
/* Revoke node i's lease behind its back (the coordinator evicted it, or it expired). */
void revoke(int i);
/* Node i's group rank in its round. */
int rank_of(int i);
/* The node of group rank r. */
int node_of_rank(int r);

#endif
