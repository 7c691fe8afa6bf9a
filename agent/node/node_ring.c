// SPDX-License-Identifier: Apache-2.0
/*
 * agent liveness: the loop's glue to the liveness ring (liveness/live.h: links, probes, the tight
 * fence, on a thread of their own) and to its keys in the store (rendezvous/suspect.h). Follows
 * each running round with the ring, writes a suspicion when a link breaks, and, as coordinator,
 * confirms each suspicion with a probe of its own before it revokes the suspect's lease. A node
 * that loses its lease again soon after rejoining waits before it rejoins (no round storm).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "agent_internal.h"
#include "ea_time.h"
#include "live.h"
#include "log.h"
#include "suspect.h"

/* Suspicions one round can have confirmed (more wait for the next scan). */
#define CASES_MAX 64
/* Suspicion writes waiting for the store. */
#define UNSENT_MAX 8
/* Reading the successor's node record failed: try again after this long. */
#define PEER_RETRY_MS 500
/* Connects that could not start here (no route): logged at most once this often. */
#define NO_ROUTE_LOG_MS 30000
/* The longest a node that keeps losing its lease soon after rejoining waits before rejoining. */
#define REJOIN_COOLDOWN_CAP_MS (300 * 1000)

enum case_state { CASE_FREE, CASE_QUEUED, CASE_PROBING, CASE_DONE };

struct ring_case {
    enum case_state state;
    struct rdzv_suspect_case c;
    uint64_t probe;
};

struct agent_ring {
    struct live *live;
    int64_t probe_ms, cooldown_ms;
    char ns[RDZV_ADDR_MAX]; /* this host and network namespace ("<boot id>:<netns inode>") */
    bool loopback;          /* this node's ring address is a loopback one */

    /* the ring as handed to the thread */
    int64_t round;
    char next[RDZV_ID_MAX], prev[RDZV_ID_MAX];
    int64_t peer_retry_ms;
    /* the successor's node record as last read: the same while its slot is (no read a round) */
    char peer_id[RDZV_ID_MAX];
    int64_t peer_slot;
    struct ring_peer peer_rp;
    bool peer_have, peer_reach;

    struct rdzv_suspicion unsent[UNSENT_MAX];
    size_t n_unsent;

    /* the coordinator's confirmations in cases_round */
    struct ring_case cases[CASES_MAX];
    int64_t cases_round;
    uint64_t seen_changes;
    bool rescan;

    /* a confirmation of a suspicion of the coordinator (this node is its third member, or the
     * watcher in a round of two) */
    bool coord_probing, coord_from_key;
    uint64_t coord_probe;
    int64_t coord_lease;
    struct rdzv_coord_suspicion coord_x;
    int64_t coord_seen_round, coord_seen_rev; /* the last rounds/<r>/coord_suspect looked at */
    bool coord_todo;                          /* coord_x still to be written */

    uint64_t probe_ids;

    /* connects and probes that could not start here, as last logged */
    uint64_t no_route_seen;
    int64_t no_route_logged_ms;

    /* the rejoin cooldown: `strikes` losses in a row, each soon after rejoining */
    bool was_lost;
    int strikes;
    int64_t rejoined_ms, cooldown_until_ms;
};

/* The ring's thread writes the guards' deadline too: the launcher exists by then (the first
 * write follows the loop's first agent_liveness_fence()), and its fence op is one atomic store. */
static void fence_write(void *ctx, int64_t until)
{
    struct agent *a = ctx;
    if (a->launcher)
        launcher_fence(a->launcher, until);
}

/* This machine's address as a number (peers dial it; a name is resolved once, here). */
static bool numeric_self(const char *addr, char *buf, size_t size)
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

/* Which host and network namespace this agent is in: a loopback address is good only there. */
static void netns_id(char *buf, size_t size)
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

static bool loopback(const char *addr)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, addr, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, addr, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* Whether this node can reach a peer at the address in its record: a loopback address only
 * from the same host and network namespace (agents of a file store in network namespaces all
 * publish 127.0.0.1: without this each would find every other dead). */
static bool reachable(const struct agent_ring *g, const struct rdzv_ring_peer *p)
{
    return !p->ns[0] || strcmp(p->ns, g->ns) == 0;
}

int agent_liveness_open(struct agent *a, struct rdzv_node *self)
{
    const struct cfg *c = a->cfg;
    /* the memory backend is one agent's process: there is nobody to link to */
    if (strcmp(c->liveness, "on") != 0 || strcmp(c->backend, "memory") == 0)
        return 0;
    char here[RDZV_ADDR_MAX];
    if (!numeric_self(a->self_addr, here, sizeof(here))) {
        log_warn("liveness ring: '%s' does not resolve to an address: this node stays out of "
                 "the ring (its lease still counts)",
                 a->self_addr);
        return 0;
    }
    struct agent_ring *g = calloc(1, sizeof(*g));
    if (!g) {
        log_error("out of memory");
        return AGENT_EXIT_RDZV;
    }
    netns_id(g->ns, sizeof(g->ns));
    int64_t iv = c->liveness_interval_ms, misses = c->liveness_misses;
    /* a frozen node can be evicted (misses - 1) x interval after its last beat plus a probe of
     * misses x interval: its guards stop its workers before, with half an interval to spare */
    int64_t fence_ms = (2 * misses - 1) * iv - iv / 2;
    struct live_params p = {
        .ring = {.run_id = c->run_id,
                 .node_id = c->node_id,
                 .bind_addr = here,
                 .interval_ms = iv,
                 .misses = (int)misses,
                 .await_cap_ms = c->lease_ttl_ms / 2},
        .fence_ms = fence_ms > iv ? fence_ms : iv,
        .fence = fence_write,
        .fence_ctx = a,
    };
    struct ea_error err = {0};
    if (live_create(&p, &g->live, &err) < 0) {
        log_error("%s", err.msg);
        free(g);
        return AGENT_EXIT_RDZV;
    }
    g->probe_ms = misses * iv;
    g->cooldown_ms = c->lease_ttl_ms;
    self->live_port = live_port(g->live);
    /* its workers run on another host (--host), or its address is a name */
    if (strcmp(here, self->addr) != 0)
        snprintf(self->live_addr, sizeof(self->live_addr), "%s", here);
    g->loopback = loopback(here);
    if (g->loopback)
        snprintf(self->live_ns, sizeof(self->live_ns), "%s", g->ns);
    a->ring = g;
    log_debug("liveness ring: listening on %s port %d (heartbeat %" PRId64 " ms, %d misses)", here,
              self->live_port, iv, (int)misses);
    return 0;
}

void agent_liveness_close(struct agent *a)
{
    if (!a->ring)
        return;
    http_set_links(a->http, NULL, NULL); /* the HTTP thread asks the ring no more */
    live_destroy(a->ring->live);         /* a bye on both links: the neighbours suspect nobody */
    free(a->ring);
    a->ring = NULL;
}

int agent_liveness_fd(const struct agent *a)
{
    return a->ring ? live_fd(a->ring->live) : -1;
}

/* ---- following the rounds ----------------------------------------------------------------- */

static void follow_round(struct agent *a, struct agent_ring *g, int64_t now)
{
    int64_t gen = 0;
    const struct rdzv_state *s = rdzv_current(a->rdzv, &gen);
    const struct rdzv_member *m = rdzv_self_member(a->rdzv);
    const char *self = a->cfg->node_id;
    int64_t round =
        s && s->status == RDZV_RUNNING && m && !a->lease_lost && !a->term_signal && !a->exiting
            ? s->round
            : 0;
    const char *next = round && m->next[0] && strcmp(m->next, self) != 0 ? m->next : "";
    const char *prev = round && m->prev[0] && strcmp(m->prev, self) != 0 ? m->prev : "";
    if (round == g->round && strcmp(next, g->next) == 0 && strcmp(prev, g->prev) == 0)
        return;
    if (next[0] && now < g->peer_retry_ms)
        return;
    struct ring_peer rp = {0};
    bool have = false, reach = true;
    if (next[0] && m->next_slot > 0 && m->next_slot == g->peer_slot &&
        strcmp(next, g->peer_id) == 0) { /* the incarnation of the last read: its record */
        rp = g->peer_rp;
        have = g->peer_have;
        reach = g->peer_reach;
    } else if (next[0]) { /* the one node record a node reads per round: its successor's */
        struct rdzv_ring_peer p;
        struct ea_error err = {0};
        int r = rdzv_ring_peer(a->rdzv, next, &p, &err);
        if (r == 0 && !(reach = reachable(g, &p))) {
            log_debug("liveness ring: node '%s' has a loopback address in another network "
                      "namespace: no link to it",
                      next);
        } else if (r == 0) {
            snprintf(rp.node_id, sizeof(rp.node_id), "%s", p.node_id);
            snprintf(rp.addr, sizeof(rp.addr), "%s", p.addr);
            rp.port = p.port;
            have = true;
        }
        if (r == 0) {
            snprintf(g->peer_id, sizeof(g->peer_id), "%s", next);
            g->peer_slot = m->next_slot;
            g->peer_rp = rp;
            g->peer_have = have;
            g->peer_reach = reach;
        } else if (r != KV_ENOTFOUND && r != -ENOPROTOOPT) {
            log_debug("liveness ring: reading node '%s': %s; trying again", next, err.msg);
            g->peer_retry_ms = now + PEER_RETRY_MS;
            return;
        } else { /* gone already, or not in the ring: nothing to watch on that side */
            log_debug("liveness ring: no link to node '%s': %s", next, err.msg);
        }
    }
    /* a predecessor that never links is suspected unless this node is on a loopback address
     * it cannot reach through (its successor in another namespace: so, likely, is it) */
    live_set(g->live, round, round && s ? s->group_world_size : 0, prev, !g->loopback || reach,
             have ? &rp : NULL);
    g->round = round;
    snprintf(g->next, sizeof(g->next), "%s", next);
    snprintf(g->prev, sizeof(g->prev), "%s", prev);
    if (round)
        log_debug("liveness ring, round %" PRId64 ": from '%s', to '%s'", round,
                  prev[0] ? prev : "(none)", next[0] ? next : "(none)");
}

/* ---- suspicions --------------------------------------------------------------------------- */

static void flush_todo(struct agent *a, struct agent_ring *g)
{
    size_t kept = 0;
    for (size_t i = 0; i < g->n_unsent; i++) {
        struct ea_error err = {0};
        int r = rdzv_suspect(a->rdzv, &g->unsent[i], &err);
        if (r < 0 && g->unsent[i].round == g->round) {
            log_debug("liveness ring: reporting node '%s': %s; trying again", g->unsent[i].node_id,
                      err.msg);
            g->unsent[kept++] = g->unsent[i];
        }
    }
    g->n_unsent = kept;
}

static void to_ring_peer(const struct rdzv_ring_peer *p, struct ring_peer *ret)
{
    memset(ret, 0, sizeof(*ret));
    snprintf(ret->node_id, sizeof(ret->node_id), "%s", p->node_id);
    snprintf(ret->addr, sizeof(ret->addr), "%s", p->addr);
    ret->port = p->port;
}

/* Confirm a suspicion of the coordinator with a probe of this node's own, on a new connection:
 * this node is the third member rdzv_coord_confirmer() names, or the watcher in a round of two
 * (docs/protocol.md: why a third member, and why a revoke is safe). */
static void confirm_coord(struct agent *a, struct agent_ring *g,
                          const struct rdzv_coord_suspicion *x, bool from_key)
{
    char holder[RDZV_ID_MAX];
    int64_t lease = 0;
    struct rdzv_ring_peer p;
    struct ring_peer rp;
    if (g->coord_probing || !rdzv_coord_holder(a->rdzv, holder, sizeof(holder), &lease) ||
        strcmp(holder, x->sus.node_id) != 0 || rdzv_ring_peer(a->rdzv, holder, &p, NULL) < 0 ||
        p.lease != lease || !reachable(g, &p))
        return;
    to_ring_peer(&p, &rp);
    uint64_t id = ++g->probe_ids;
    if (live_probe(g->live, id, &rp, x->sus.round, g->probe_ms) < 0)
        return;
    g->coord_probing = true;
    g->coord_from_key = from_key;
    g->coord_probe = id;
    g->coord_lease = lease;
    g->coord_x = *x;
    log_info("liveness ring: '%s' suspects the coordinator '%s' (%s): probing it", x->sus.by,
             x->sus.node_id, x->sus.cause);
}

/* A suspicion of the coordinator: a third member confirms it (rounds/<r>/coord_suspect), or in a
 * round of two this watcher, as nobody else is there. */
static void suspect_coord(struct agent *a, struct agent_ring *g, const struct rdzv_suspicion *x,
                          bool outbound)
{
    const struct rdzv_state *s = rdzv_current(a->rdzv, NULL);
    const struct rdzv_member *m = rdzv_self_member(a->rdzv);
    int n = s ? s->group_world_size : 0;
    if (!m || n < 2)
        return;
    /* its group rank: the ring runs in chunk order, so a neighbour's rank is the chunk's word */
    struct rdzv_coord_suspicion cx = {
        .sus = *x, .by_rank = m->group_rank, .coord_rank = outbound ? m->next_rank : m->prev_rank};
    if (rdzv_coord_confirmer(n, cx.coord_rank, cx.by_rank) < 0) {
        confirm_coord(a, g, &cx, false);
        return;
    }
    g->coord_x = cx;
    g->coord_todo = true;
    struct ea_error err = {0};
    if (rdzv_coord_suspect(a->rdzv, &cx, &err) >= 0)
        g->coord_todo = false;
    else
        log_debug("liveness ring: reporting the coordinator '%s': %s; trying again", x->node_id,
                  err.msg);
}

/* Another member suspects the coordinator: confirm it when this node is the one to. */
static void check_coord_suspicion(struct agent *a, struct agent_ring *g)
{
    if (g->coord_todo) {
        struct ea_error err = {0};
        if (rdzv_coord_suspect(a->rdzv, &g->coord_x, &err) >= 0)
            g->coord_todo = false;
    }
    struct rdzv_coord_suspicion cx;
    int r = rdzv_coord_suspicion(a->rdzv, &cx);
    char warning[EA_ERROR_MSG_MAX];
    if (r < 0 && rdzv_take_warning(a->rdzv, warning, sizeof(warning)))
        log_warn("%s", warning);
    if (r <= 0 || (cx.sus.round == g->coord_seen_round && cx.key_rev == g->coord_seen_rev))
        return;
    g->coord_seen_round = cx.sus.round;
    g->coord_seen_rev = cx.key_rev;
    const struct rdzv_state *s = rdzv_current(a->rdzv, NULL);
    const struct rdzv_member *m = rdzv_self_member(a->rdzv);
    if (s && m && !rdzv_is_coordinator(a->rdzv) &&
        rdzv_coord_confirmer(s->group_world_size, cx.coord_rank, cx.by_rank) == m->group_rank)
        confirm_coord(a, g, &cx, true);
}

static void on_suspect(struct agent *a, struct agent_ring *g, const struct ring_report *x)
{
    if (x->round != g->round || !x->round)
        return; /* a link of a round that has ended */
    int64_t now = ea_now_ms(), wall = ea_wall_ms();
    struct rdzv_suspicion sus = {.round = x->round,
                                 .fault_ms = x->heard_ms >= 0 ? wall - (now - x->heard_ms) : -1,
                                 .detected_ms = wall};
    snprintf(sus.node_id, sizeof(sus.node_id), "%s", x->node_id);
    snprintf(sus.by, sizeof(sus.by), "%s", a->cfg->node_id);
    snprintf(sus.cause, sizeof(sus.cause), "%s", x->cause);
    log_warn("liveness ring: lost node '%s' (the link %s it: %s): suspecting it", x->node_id,
             x->outbound ? "to" : "from", x->cause);
    a->m.liveness_suspicions++;
    agent_emit(a, "suspect", "{s:s, s:s, s:s}", "node", x->node_id, "cause", x->cause, "link",
               x->outbound ? "to_successor" : "from_predecessor");
    char holder[RDZV_ID_MAX];
    int64_t lease = 0;
    if (!rdzv_is_coordinator(a->rdzv) &&
        rdzv_coord_holder(a->rdzv, holder, sizeof(holder), &lease) &&
        strcmp(holder, x->node_id) == 0) {
        suspect_coord(a, g, &sus, x->outbound);
        return;
    }
    const struct rdzv_state *s = rdzv_current(a->rdzv, NULL);
    if (rdzv_is_coordinator(a->rdzv) && s && s->group_world_size >= 3) {
        /* a second vantage point: the suspect's other neighbour reports it too if it is gone,
         * and the coordinator's probe confirms that; on its own word alone a coordinator cut
         * off from the network would evict every node it probes */
        log_info("liveness ring: waiting for the other neighbour of '%s' to report it too",
                 x->node_id);
        return;
    }
    if (g->n_unsent < UNSENT_MAX)
        g->unsent[g->n_unsent++] = sus;
    flush_todo(a, g);
}

/* rounds/<r>/detect: when the fault began (the suspect's last beat) and was seen, so every
 * node's recovery clock times the same fault (create-only: the first wins). */
static void publish_detect(struct agent *a, const struct rdzv_suspicion *x)
{
    char v[384];
    ph_detect_json(x->fault_ms > 0 ? x->fault_ms : x->detected_ms, x->detected_ms, "node_lost",
                   x->node_id, -1, v, sizeof(v));
    struct ea_error err = {0};
    if (rdzv_publish_round_key(a->rdzv, x->round, "detect", v, &err) < 0)
        log_debug("could not publish the detect time of round %" PRId64 ": %s", x->round, err.msg);
}

static void evicted(struct agent *a, const struct rdzv_suspicion *x, const char *why, int r,
                    const struct ea_error *err)
{
    if (r < 0) {
        log_warn("liveness ring: could not revoke the lease of node '%s': %s", x->node_id,
                 err->msg);
        return;
    }
    if (r == 0)
        return; /* gone already, or rejoined under a new lease */
    a->m.liveness_confirmed++;
    log_warn("liveness ring: node '%s' did not answer a probe either (%s; '%s' saw: %s): its "
             "lease is revoked, the run goes on without it",
             x->node_id, why, x->by, x->cause);
    agent_emit(a, "evicted", "{s:s, s:s, s:s, s:s}", "node", x->node_id, "by", x->by, "cause",
               x->cause, "probe", why);
}

static void false_alarm(struct agent *a, const struct rdzv_suspicion *x)
{
    a->m.liveness_false_alarms++;
    log_info("liveness ring: node '%s' answered a probe: a false alarm ('%s' saw: %s)", x->node_id,
             x->by, x->cause);
    agent_emit(a, "suspect_cleared", "{s:s, s:s, s:s}", "node", x->node_id, "by", x->by, "cause",
               x->cause);
}

/* A probe this node could not even start (no route from here): it says nothing of the suspect,
 * so this node neither evicts nor clears on it (docs/protocol.md "The liveness ring"). */
static void no_evidence(struct agent *a, const struct rdzv_suspicion *x, const char *cause)
{
    log_info("liveness ring: could not probe node '%s' from here (%s): not confirming '%s''s "
             "suspicion (%s)",
             x->node_id, cause, x->by, x->cause);
}

static void on_probe(struct agent *a, struct agent_ring *g, const struct ring_report *x)
{
    struct ea_error err = {0};
    if (g->coord_probing && x->probe_id == g->coord_probe) {
        g->coord_probing = false;
        if (x->local) { /* nothing left this node: no word on the coordinator either way */
            no_evidence(a, &g->coord_x.sus, x->cause);
            return;
        }
        if (x->alive) { /* the coordinator answered this third member */
            false_alarm(a, &g->coord_x.sus);
            if (g->coord_from_key && rdzv_coord_suspect_clear(a->rdzv, &g->coord_x, &err) < 0)
                log_debug("liveness ring: clearing the suspicion of the coordinator: %s", err.msg);
            return;
        }
        publish_detect(a, &g->coord_x.sus);
        int r = rdzv_evict_coord(a->rdzv, g->coord_x.sus.node_id, g->coord_lease, &err);
        evicted(a, &g->coord_x.sus, x->cause, r, &err);
        return;
    }
    for (size_t i = 0; i < CASES_MAX; i++) {
        struct ring_case *k = &g->cases[i];
        if (k->state != CASE_PROBING || k->probe != x->probe_id)
            continue;
        k->state = CASE_DONE;
        if (g->cases_round != x->round || !rdzv_is_coordinator(a->rdzv))
            return;
        if (x->local) { /* the key stays: a coordinator that can reach it may confirm it */
            no_evidence(a, &k->c.sus, x->cause);
            return;
        }
        if (x->alive) { /* the suspect answered the coordinator's own probe */
            false_alarm(a, &k->c.sus);
            if (rdzv_suspect_clear(a->rdzv, &k->c, &err) < 0)
                log_debug("liveness ring: clearing the suspicion of '%s': %s", x->node_id, err.msg);
            return;
        }
        publish_detect(a, &k->c.sus);
        int r = rdzv_evict(a->rdzv, &k->c, &err);
        evicted(a, &k->c.sus, x->cause, r, &err);
        return;
    }
}

void agent_liveness_on_reports(struct agent *a)
{
    struct agent_ring *g = a->ring;
    struct ring_report x;
    while (g && live_take(g->live, &x)) {
        if (x.kind == RING_REPORT_SUSPECT)
            on_suspect(a, g, &x);
        else
            on_probe(a, g, &x);
    }
}

/* ---- the coordinator's confirmations ------------------------------------------------------ */

static struct ring_case *case_for(struct agent_ring *g, const struct rdzv_suspect_case *c)
{
    struct ring_case *free_slot = NULL;
    for (size_t i = 0; i < CASES_MAX; i++) {
        struct ring_case *k = &g->cases[i];
        if (k->state == CASE_FREE) {
            if (!free_slot)
                free_slot = k;
        } else if (strcmp(k->c.sus.node_id, c->sus.node_id) == 0 && k->c.key_rev == c->key_rev) {
            return NULL; /* this very key is handled already */
        }
    }
    return free_slot;
}

static void confirm_suspects(struct agent *a, struct agent_ring *g)
{
    int64_t gen = 0;
    const struct rdzv_state *s = rdzv_current(a->rdzv, &gen);
    int64_t round = s && s->status == RDZV_RUNNING ? s->round : 0;
    if (round != g->cases_round) {
        memset(g->cases, 0, sizeof(g->cases));
        g->cases_round = round;
        g->rescan = true;
    }
    uint64_t changes = rdzv_changes(a->rdzv);
    if (!round || (changes == g->seen_changes && !g->rescan))
        return;
    g->seen_changes = changes;
    g->rescan = false;
    struct rdzv_suspect_case list[CASES_MAX];
    size_t n = 0;
    struct ea_error err = {0};
    if (rdzv_suspects(a->rdzv, list, CASES_MAX, &n, &err) < 0) {
        log_debug("liveness ring: listing suspicions: %s", err.msg);
        g->rescan = true;
    }
    if (rdzv_suspects_due(a->rdzv)) /* more than one pass takes: the next one */
        g->rescan = true;
    char warning[EA_ERROR_MSG_MAX];
    if (rdzv_take_warning(a->rdzv, warning, sizeof(warning)))
        log_warn("%s", warning);
    for (size_t i = 0; i < n; i++) {
        /* written by this node (before it coordinated): not a second vantage point */
        if (strcmp(list[i].sus.by, a->cfg->node_id) == 0 && s->group_world_size >= 3)
            continue;
        struct ring_case *k = case_for(g, &list[i]);
        if (k) { /* one this node cannot reach at all is not probed: no evidence, no eviction */
            k->state = reachable(g, &list[i].peer) ? CASE_QUEUED : CASE_DONE;
            k->c = list[i];
        }
    }
    for (size_t i = 0; i < CASES_MAX; i++) {
        struct ring_case *k = &g->cases[i];
        if (k->state != CASE_QUEUED)
            continue;
        struct ring_peer rp;
        to_ring_peer(&k->c.peer, &rp);
        uint64_t id = ++g->probe_ids;
        if (live_probe(g->live, id, &rp, round, g->probe_ms) < 0) {
            g->rescan = true; /* every probe slot busy: the next pass */
            break;
        }
        k->probe = id;
        k->state = CASE_PROBING;
        log_info("liveness ring: '%s' suspects node '%s' (%s): probing it", k->c.sus.by,
                 k->c.sus.node_id, k->c.sus.cause);
    }
}

/* ---- the loop's hooks --------------------------------------------------------------------- */

void agent_liveness_step(struct agent *a, int64_t now)
{
    struct agent_ring *g = a->ring;
    if (!g)
        return;
    if (a->lease_lost && !g->was_lost) {
        g->was_lost = true;
        /* lost again soon after rejoining (a flaky node): wait, so it cannot cause a round every
         * few seconds; one TTL at first (the pace the lease alone would give), doubled for each
         * further loss that soon (up to REJOIN_COOLDOWN_CAP_MS), so a node whose link keeps
         * failing costs the run ever fewer rounds. "Soon" is within the last wait's length. */
        int64_t window = ea_backoff_ms(g->cooldown_ms, g->strikes, REJOIN_COOLDOWN_CAP_MS);
        if (g->rejoined_ms > 0 && now - g->rejoined_ms < window) {
            g->strikes++;
            int64_t wait = ea_backoff_ms(g->cooldown_ms, g->strikes, REJOIN_COOLDOWN_CAP_MS);
            g->cooldown_until_ms = now + wait;
            log_warn("lost the lease again %.1f s after rejoining (loss %d in a row): waiting "
                     "%.1f s before rejoining",
                     (double)(now - g->rejoined_ms) / 1000.0, g->strikes + 1,
                     (double)wait / 1000.0);
        } else {
            g->strikes = 0;
        }
    } else if (!a->lease_lost && g->was_lost) {
        g->was_lost = false;
        g->rejoined_ms = now;
    }
    follow_round(a, g, now);
    if (g->n_unsent)
        flush_todo(a, g);
    if (rdzv_is_coordinator(a->rdzv))
        confirm_suspects(a, g);
    else
        check_coord_suspicion(a, g);
    struct ring_links l;
    live_links(g->live, &l);
    a->m.liveness_links_up = (strcmp(l.out, "up") == 0) + (strcmp(l.in, "up") == 0);
    a->m.liveness_no_route = l.local_failures;
    if (l.local_failures > g->no_route_seen &&
        (!g->no_route_logged_ms || now - g->no_route_logged_ms >= NO_ROUTE_LOG_MS)) {
        log_warn("liveness ring: %" PRIu64 " ring connect(s) could not start from this node (%s): "
                 "no route here is no evidence against a peer, so nobody is suspected for it; "
                 "retrying",
                 l.local_failures - g->no_route_seen, l.local_cause);
        g->no_route_seen = l.local_failures;
        g->no_route_logged_ms = now;
    }
    agent_liveness_links(a, &a->m.liveness_out, &a->m.liveness_in);
}

/* This node's two links now, for the HTTP thread (http_set_links: /status and /metrics). */
static void link_of(struct metrics_link *m, const char *peer, const char *state, int64_t heard,
                    int64_t now)
{
    snprintf(m->peer, sizeof(m->peer), "%s", peer);
    snprintf(m->state, sizeof(m->state), "%s", state);
    m->heartbeat_age_s = heard >= 0 && now >= heard ? (double)(now - heard) / 1000.0 : -1;
}

void agent_liveness_links(void *ctx, struct metrics_link *out, struct metrics_link *in)
{
    struct agent_ring *g = ((struct agent *)ctx)->ring;
    if (!g)
        return;
    struct ring_links l;
    live_links(g->live, &l);
    int64_t now = ea_now_ms();
    link_of(out, l.next, l.out, strcmp(l.out, "up") == 0 ? l.out_heard_ms : -1, now);
    link_of(in, l.prev, l.in, strcmp(l.in, "up") == 0 ? l.in_heard_ms : -1, now);
}

bool agent_liveness_may_rejoin(const struct agent *a, int64_t now)
{
    return !a->ring || now >= a->ring->cooldown_until_ms;
}

int64_t agent_liveness_wake_ms(const struct agent *a)
{
    const struct agent_ring *g = a->ring;
    if (!g)
        return -1;
    if (g->n_unsent || g->rescan || g->coord_todo)
        return ea_now_ms() + PEER_RETRY_MS / 5;
    if (a->lease_lost && g->cooldown_until_ms > ea_now_ms())
        return g->cooldown_until_ms;
    if (g->peer_retry_ms > ea_now_ms())
        return g->peer_retry_ms;
    return -1;
}

int64_t agent_liveness_fence(struct agent *a, int64_t lease_until)
{
    struct agent_ring *g = a->ring;
    if (!g) {
        launcher_fence(a->launcher, lease_until);
        return lease_until;
    }
    bool tight = g->round > 0 && (g->next[0] || g->prev[0]) && !a->lease_lost;
    return live_fence(g->live, lease_until, tight, a->group.live == 0 || a->lease_lost);
}

int64_t agent_liveness_fence_held(const struct agent *a, int64_t handed)
{
    return a->ring ? live_fence_held(a->ring->live) : handed;
}
