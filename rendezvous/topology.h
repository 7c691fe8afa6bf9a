// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv topology: the link maps of a round's global ranks, as the DMLC tracker builds them — a
 * binary tree and a ring that shares as many edges with the tree as it can, relabelled so that the
 * ring is simply rank r -> r+1 (mod n). With ranks grouped by host, most tree edges then stay on a
 * host. Pure; the agent writes the result into the topology file (workerenv.c).
 */
#ifndef EA_RENDEZVOUS_TOPOLOGY_H
#define EA_RENDEZVOUS_TOPOLOGY_H

struct rdzv_link {
    int parent;      /* -1 for rank 0, the root */
    int n_children;  /* 0..2 */
    int children[2]; /* ascending */
    int ring_prev, ring_next;
};

/* Fill links[0..n-1] for n >= 1 ranks. 0, or -EINVAL when n < 1, -ENOMEM. */
int rdzv_topo_build(int n, struct rdzv_link *links);

#endif
