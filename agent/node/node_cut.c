// SPDX-License-Identifier: Apache-2.0
/*
 * node_cut: a node cut from its ring neighbours while it still reaches the store (issue 41,
 * docs/security.md "A rack cut at its switch"), and the ring's addresses. Two decisions: a
 * prober's failed probe that is correlated with the watcher's word (both in one failure domain,
 * the suspect outside it) counts only if the prober reaches the watcher too; and a node whose
 * lease is lost in the ring round in which it was cut from its neighbours waits before rejoining
 * (node_rejoin_wait), as a node that keeps losing its lease does.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "domain.h"
#include "ea_time.h"
#include "node.h"
#include "node_internal.h"

/* ---- addresses ------------------------------------------------------------------------------ */

bool node_numeric_addr(const char *addr, char *buf, size_t size)
{
    unsigned char tmp[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, addr, tmp) == 1 || inet_pton(AF_INET6, addr, tmp) == 1) {
        snprintf(buf, size, "%s", addr);
        return true;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    bool ok = getaddrinfo(addr, NULL, &hints, &res) == 0 && res &&
              getnameinfo(res->ai_addr, res->ai_addrlen, buf, (socklen_t)size, NULL, 0,
                          NI_NUMERICHOST) == 0;
    if (res)
        freeaddrinfo(res);
    return ok;
}

void node_netns_id(char *buf, size_t size)
{
    char boot[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f && fgets(boot, sizeof(boot), f))
        boot[strcspn(boot, "\n")] = '\0';
    if (f)
        fclose(f);
    struct stat st;
    if (!boot[0] || stat("/proc/self/ns/net", &st) < 0)
        snprintf(buf, size, "pid-%ld", (long)getpid()); /* unknown: reachable by nobody else */
    else
        snprintf(buf, size, "%s:%lu", boot, (unsigned long)st.st_ino);
}

bool node_is_loopback(const char *addr)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, addr, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, addr, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* ---- correlated evidence -------------------------------------------------------------------- */

int node_correlated_watcher(struct node *n, const char *by, const char *also,
                            const char *suspect_domain, struct rdzv_ring_peer *ret)
{
    struct rdzv_ring_peer me, w, a;
    if (rdzv_ring_peer(n->rdzv, n->node_id, &me, NULL) < 0 || !me.domain[0])
        return 0; /* no domain of its own here: nothing to share with a watcher */
    const char *watcher = by, *other = also && also[0] ? also : NULL;
    if (strcmp(by, n->node_id) == 0) { /* its own key: the other watcher is the one to reach */
        watcher = other;
        other = NULL;
    }
    if (!watcher || rdzv_ring_peer(n->rdzv, watcher, &w, NULL) < 0)
        return 0; /* (a watcher gone takes its keys with its lease) */
    bool have_a = other && rdzv_ring_peer(n->rdzv, other, &a, NULL) == 0;
    if (!rdzv_correlated(me.domain, w.domain, have_a ? a.domain : NULL, suspect_domain))
        return 0;
    *ret = w;
    return 1;
}

/* ---- what a confirmation found --------------------------------------------------------------- */

/* rounds/<r>/detect: when the fault began (the suspect's last beat) and was seen, so every
 * node's recovery clock times the same fault (create-only: the first wins). The JSON of
 * ph_detect_json (agent/observe/phases.c reads it). */
void node_publish_detect(struct node *n, const struct rdzv_suspicion *x)
{
    char v[384];
    snprintf(v, sizeof(v),
             "{\"fault_ms\":%lld,\"detected_ms\":%lld,\"cause\":\"node_lost\",\"node\":\"%s\","
             "\"rank\":-1}",
             (long long)(x->fault_ms > 0 ? x->fault_ms : x->detected_ms), (long long)x->detected_ms,
             x->node_id);
    struct ea_error err = {0};
    if (rdzv_publish_round_key(n->rdzv, x->round, "detect", v, &err) < 0)
        node_log(n, NODE_DEBUG, "could not publish the detect time of round %" PRId64 ": %s",
                 x->round, err.msg);
}

/* A probe this node could not even start (no route from here): it says nothing of the suspect,
 * so this node neither evicts nor clears on it (docs/protocol.md "The liveness ring"). */
void node_no_evidence(struct node *n, const struct rdzv_suspicion *x, const char *cause)
{
    node_log(n, NODE_INFO,
             "liveness ring: could not probe node '%s' from here (%s): not confirming '%s''s "
             "suspicion (%s)",
             x->node_id, cause, x->by, x->cause);
}

/* A failed probe correlated with the watcher's word (both in one failure domain, the suspect
 * outside it) whose probe of the watcher failed too: the two may be one cut domain's view, so
 * nothing is confirmed (the key stays for a prober that can tell; docs/security.md). */
void node_unverified(struct node *n, const struct rdzv_suspicion *x)
{
    node_log(n, NODE_INFO,
             "liveness ring: node '%s' did not answer, but neither did '%s', who suspects it from "
             "this node's failure domain: not confirming (this domain may be the one cut off)",
             x->node_id, x->by);
}

void node_to_ring_peer(const struct rdzv_ring_peer *p, struct ring_peer *ret)
{
    memset(ret, 0, sizeof(*ret));
    snprintf(ret->node_id, sizeof(ret->node_id), "%s", p->node_id);
    snprintf(ret->addr, sizeof(ret->addr), "%s", p->addr);
    ret->port = p->port;
}

/* ---- the rejoin wait ------------------------------------------------------------------------ */

int64_t node_rejoin_wait(int64_t cooldown_ms, int strikes, int64_t since_rejoin_ms, bool cut,
                         int *ret_strikes)
{
    /* "soon" after rejoining is within the last wait's length */
    int64_t window = ea_backoff_ms(cooldown_ms, strikes, NODE_REJOIN_COOLDOWN_CAP_MS);
    bool quick = since_rejoin_ms >= 0 && since_rejoin_ms < window;
    int s = quick ? strikes + 1 : cut ? 1 : 0;
    *ret_strikes = s;
    return s ? ea_backoff_ms(cooldown_ms, s, NODE_REJOIN_COOLDOWN_CAP_MS) : 0;
}
