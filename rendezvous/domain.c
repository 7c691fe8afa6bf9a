// SPDX-License-Identifier: Apache-2.0
/* rdzv domain: failure-domain labels, the ring order that keeps a domain's members apart, and
 * the cross-domain confirmers of a suspicion of the coordinator (issue 41). Pure functions. */
#include "domain.h"
#include "suspect.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

bool rdzv_domain_ok(const char *s)
{
    size_t n = 0;
    if (!s)
        return false;
    for (; s[n]; n++) {
        char c = s[n];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '/' || c == '-';
        if (!ok || n + 1 >= RDZV_DOMAIN_MAX)
            return false;
    }
    return n > 0;
}

static bool has_domain(const char *d)
{
    return d && d[0];
}

/* Same domain: both set and equal (an item without a domain shares it with nobody). */
static bool same_domain(const char *a, const char *b)
{
    return has_domain(a) && has_domain(b) && strcmp(a, b) == 0;
}

/* One domain's items still to place: `left` of them, the next at item index `next`. */
struct group {
    const char *dom;
    size_t left, next;
};

int rdzv_ring_order(const char *const *dom, size_t n, size_t *ret_order)
{
    struct group *g = malloc((n ? n : 1) * sizeof(*g));
    size_t *group_of = malloc((n ? n : 1) * sizeof(*group_of));
    if (!g || !group_of) {
        free(g);
        free(group_of);
        return -ENOMEM;
    }
    size_t ng = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < ng && !same_domain(g[k].dom, dom[i]))
            k++;
        if (k == ng)
            g[ng++] = (struct group){.dom = dom[i], .left = 0, .next = i};
        g[k].left++;
        group_of[i] = k;
    }
    const char *prev = NULL;
    for (size_t out = 0; out < n; out++) {
        /* the domain with the most items left that is not the previous item's, ties to the
         * lowest next index (so with no domains every group has one item: the rank order) */
        size_t best = ng, fallback = ng;
        for (size_t k = 0; k < ng; k++) {
            if (!g[k].left)
                continue;
            if (fallback == ng || g[k].next < g[fallback].next)
                fallback = k;
            if (same_domain(g[k].dom, prev))
                continue;
            if (best == ng || g[k].left > g[best].left ||
                (g[k].left == g[best].left && g[k].next < g[best].next))
                best = k;
        }
        if (best == ng)
            best = fallback; /* only the previous item's domain is left: no choice */
        size_t i = g[best].next;
        ret_order[out] = i;
        prev = dom[i];
        if (--g[best].left) /* its next item: the following index in the same group */
            for (size_t j = i + 1; j < n; j++)
                if (group_of[j] == best) {
                    g[best].next = j;
                    break;
                }
    }
    free(g);
    free(group_of);
    return 0;
}

bool rdzv_ring_front(const char *const *dom, size_t n, const char *after, size_t *order)
{
    if (n == 0 || !same_domain(dom[order[0]], after))
        return true;
    /* an interior item j (never the last: the next chunk's start depends on it) */
    for (size_t j = 1; j + 1 < n; j++) {
        const char *d = dom[order[j]];
        if (same_domain(d, after) || same_domain(d, dom[order[0]]) ||
            same_domain(dom[order[j - 1]], dom[order[j + 1]]))
            continue;
        size_t x = order[j];
        memmove(&order[1], &order[0], j * sizeof(*order));
        order[0] = x;
        return true;
    }
    return false;
}

void rdzv_pick_confirmers(const struct rdzv_member *m, size_t n, int coord_rank, int ret[2])
{
    const char *cd = NULL;
    ret[0] = ret[1] = -1;
    for (size_t i = 0; i < n && !cd; i++)
        if (m[i].group_rank == coord_rank)
            cd = m[i].domain;
    if (!has_domain(cd))
        return; /* the coordinator's domain is not known: nothing to be outside of */
    const char *d0 = NULL;
    for (size_t i = 0; i < n; i++) /* the lowest rank outside the coordinator's domain */
        if (has_domain(m[i].domain) && !same_domain(m[i].domain, cd) &&
            (ret[0] < 0 || m[i].group_rank < ret[0]))
            ret[0] = m[i].group_rank, d0 = m[i].domain;
    if (ret[0] < 0)
        return;
    /* the second: outside both domains where some member is, else outside the coordinator's */
    int other = -1;
    for (size_t i = 0; i < n; i++) {
        const struct rdzv_member *x = &m[i];
        if (x->group_rank == ret[0] || !has_domain(x->domain) || same_domain(x->domain, cd))
            continue;
        if (!same_domain(x->domain, d0) && (ret[1] < 0 || x->group_rank < ret[1]))
            ret[1] = x->group_rank;
        if (other < 0 || x->group_rank < other)
            other = x->group_rank;
    }
    if (ret[1] < 0)
        ret[1] = other;
}

int rdzv_coord_confirmer_of(const struct rdzv_state *s, int coord_rank, int by_rank)
{
    int n = s ? s->group_world_size : 0;
    if (s && s->n_confirm > 0 && s->confirm_coord == coord_rank)
        for (int i = 0; i < s->n_confirm && i < 2; i++) {
            int c = s->confirm[i];
            if (c != by_rank && c != coord_rank && c >= 0 && c < n)
                return c;
        }
    return rdzv_coord_confirmer(n, coord_rank, by_rank);
}

bool rdzv_correlated(const char *prober, const char *by, const char *also, const char *suspect)
{
    return same_domain(prober, by) && (!also || same_domain(prober, also)) &&
           !same_domain(prober, suspect);
}
