// SPDX-License-Identifier: Apache-2.0
/* rdzv topology: DMLC-style tree + ring link maps. */
#include "topology.h"

#include <errno.h>
#include <stdlib.h>

/* Append the ring segment of the heap subtree rooted at r (labels 0..n-1, children 2r+1, 2r+2):
 * r, then each child's segment, the last child's reversed — so the walk returns towards r's
 * parent and consecutive ring members are mostly tree neighbours. */
static void share_ring(int r, int n, int *order, int *len)
{
    order[(*len)++] = r;
    int c1 = 2 * r + 1, c2 = 2 * r + 2;
    int last = c2 < n ? c2 : c1 < n ? c1 : -1;
    for (int c = c1; c <= c2 && c < n; c++) {
        int start = *len;
        share_ring(c, n, order, len);
        if (c == last)
            for (int i = start, j = *len - 1; i < j; i++, j--) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    }
}

int rdzv_topo_build(int n, struct rdzv_link *links)
{
    if (n < 1)
        return -EINVAL;
    int *order = malloc((size_t)n * sizeof(*order)), *label = malloc((size_t)n * sizeof(*label));
    if (!order || !label) {
        free(order);
        free(label);
        return -ENOMEM;
    }
    int len = 0;
    share_ring(0, n, order, &len);
    for (int i = 0; i < n; i++)
        label[order[i]] = i; /* heap node order[i] becomes rank i: the ring is 0, 1, ..., n-1 */
    for (int h = 0; h < n; h++) {
        struct rdzv_link *l = &links[label[h]];
        l->parent = h == 0 ? -1 : label[(h - 1) / 2];
        l->n_children = 0;
        for (int c = 2 * h + 1; c <= 2 * h + 2 && c < n; c++)
            l->children[l->n_children++] = label[c];
        if (l->n_children == 2 && l->children[0] > l->children[1]) {
            int t = l->children[0];
            l->children[0] = l->children[1];
            l->children[1] = t;
        }
        l->ring_prev = (label[h] + n - 1) % n;
        l->ring_next = (label[h] + 1) % n;
    }
    free(order);
    free(label);
    return 0;
}
