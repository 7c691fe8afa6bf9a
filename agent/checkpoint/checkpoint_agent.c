// SPDX-License-Identifier: Apache-2.0
/* agent checkpoint hooks: --checkpoint-memory's store (checkpoint/checkpoint.h) tied to the
 * agent: opened in its workdir, its notes logged and emitted, a breakpoint's writes to
 * --checkpoint-dir; kept out of agent.c. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "agent_internal.h"
#include "checkpoint.h"
#include "ckpt_keys.h"
#include "ckpt_summary.h"
#include "ea_time.h"
#include "kv.h"
#include "log.h"
#include "session.h"
#include "suspect.h"
#include "ring_proto.h"
#include "workerenv.h"

#define PEER_RETRY_MS 1000
#define VIEW_MAX 4096 /* summaries a view holds (the store's listing is one page: 1000) */
#define PUB_WAIT_MS 3000 /* the coordinator publishes the round's newest step by then at the latest */
#define PUB_RETRY_MS 100 /* ... looking at its mirror's summaries at most this often */

struct agent_ckpt {
    struct ckpt *c;
    bool at_break; /* the breakpoint's writes are queued: again once workers run again */
    bool repl;     /* the replication port is open */
    /* the round the port follows (the ring's: s->round, this node's prev and next) */
    int64_t round;
    char prev[RDZV_ID_MAX], next[RDZV_ID_MAX];
    int64_t next_slot;
    int64_t retry_ms; /* reading the successor's record failed: not again before */
    /* the coordinator's rounds/<r>/ckpt (docs/checkpoint.md "latest()") */
    int64_t round_ms;     /* when this node saw `round` begin */
    int64_t pub_round;    /* the round whose value is in the store (-1: none yet) */
    int64_t pub_next;     /* not looked at again before */
    uint64_t pub_changes; /* the mirror's changes when last looked at */
};

/* ---- fetch: the store's answers (docs/checkpoint.md "Fetch") ------------------------------ */

/* The other live nodes' summaries: one listing of ckpt/, each value decoded strictly; a bad one
 * is left out and said once a listing. */
static int fetch_view(void *ctx, struct ckpt_summary **ret, size_t *ret_n, struct ea_error *err)
{
    struct agent *a = ctx;
    struct rdzv_session *s = a->node.rdzv;
    struct kv_list l = {0};
    bool more = false;
    int r = rdzv_ckpt_list(s, &l, &more, err);
    if (r < 0)
        return r;
    struct ckpt_summary *v = calloc(l.n ? l.n : 1, sizeof(*v));
    size_t n = 0, bad = 0;
    struct ea_error first = {0};
    for (size_t i = 0; v && i < l.n && n < VIEW_MAX; i++) {
        const char *id = rdzv_ckpt_id_of(s, l.entries[i].key);
        if (!id || strcmp(id, a->cfg->node_id) == 0)
            continue;
        struct ea_error e = {0};
        if (ckpt_summary_decode(l.entries[i].value, l.entries[i].value_len, a->cfg->run_id, id,
                                &v[n], &e) < 0) {
            if (bad++ == 0)
                ea_errorf(&first, -EBADMSG, "key '%s': %s", l.entries[i].key, e.msg);
            continue;
        }
        v[n++].lease = l.entries[i].lease;
    }
    kv_list_clear(&l);
    if (!v)
        return ea_errorf(err, -ENOMEM, "out of memory");
    if (bad)
        log_warn("checkpoint store: %zu checkpoint summar%s not used (%s)", bad,
                 bad == 1 ? "y" : "ies", first.msg);
    if (more)
        log_warn("checkpoint store: more than %d checkpoint summaries: the rest not read",
                 RDZV_CKPT_LIST_MAX);
    *ret = v;
    *ret_n = n;
    return 0;
}

static int fetch_where(void *ctx, const char *id, int64_t lease, char addr[64], int *ret_port,
                       struct ea_error *err)
{
    struct agent *a = ctx;
    struct rdzv_ring_peer p = {0};
    int r = rdzv_ring_peer(a->node.rdzv, id, &p, err);
    if (r == KV_ENOTFOUND || r == -ENOPROTOOPT)
        return 0;
    if (r < 0)
        return r;
    /* the summary was written by that node: it is on the lease of its node key */
    if (p.ckpt_port <= 0 || (lease != 0 && p.lease != lease))
        return 0;
    snprintf(addr, 64, "%s", p.addr);
    *ret_port = p.ckpt_port;
    return 1;
}

static int fetch_is_member(void *ctx, const char *id, int64_t round, struct ea_error *err)
{
    struct agent *a = ctx;
    return rdzv_is_member(a->node.rdzv, id, round, err);
}

struct member_ctx {
    struct agent *a;
    int64_t round;
};

static int pub_member(void *ctx, const char *id)
{
    struct member_ctx *m = ctx;
    struct ea_error e = {0};
    return rdzv_is_member(m->a->node.rdzv, id, m->round, &e);
}

/* rounds/<r>/ckpt from this node's mirror (its watch of rounds/ brought it: no read), checked. */
static int fetch_published(void *ctx, int64_t round, int64_t *ret_step, int *ret_shards,
                           struct ea_error *err)
{
    struct agent *a = ctx;
    const char *v = rdzv_round_key(a->node.rdzv, round, "ckpt");
    if (!v)
        return 0;
    char holder[RDZV_ID_MAX] = "";
    int64_t lease = 0;
    if (!rdzv_coord_holder(a->node.rdzv, holder, sizeof(holder), &lease))
        holder[0] = '\0';
    struct member_ctx m = {a, round};
    struct ckpt_pub p;
    int r = ckpt_pub_accept(v, strlen(v), round, holder, pub_member, &m, &p, err);
    if (r < 0)
        return r;
    *ret_step = p.step;
    *ret_shards = p.shards;
    return 1;
}

/* ---- the coordinator: the run's newest complete step, once a round ------------------------ */

struct pub_scan {
    const char *run;
    int64_t round, gen;
    bool decode;
    size_t n, bad;
    /* the members' summaries of the round: first without decoding, those put after the round's
     * commit (an upper bound, cheap); then decoded (ckpt_sum_fresh) */
    size_t fresh;
    struct ckpt_summary *v; /* [0] this store's, then the members' decoded */
};

static void pub_entry(void *ctx, const struct rdzv_ckpt_entry *e)
{
    struct pub_scan *p = ctx;
    if (!p->decode) { /* a summary of this round was put after its commit (gen): a cheap filter */
        p->fresh += e->mod_revision > p->gen;
        return;
    }
    struct ckpt_summary *d = &p->v[p->n];
    struct ea_error err = {0};
    if (ckpt_summary_decode(e->value, e->len, p->run, e->id, d, &err) < 0) {
        p->bad++;
        return;
    }
    d->lease = e->lease;
    p->n++;
}

/* The coordinator publishes rounds/<r>/ckpt (create-only: one value a round; a successor
 * publishes it if it is not there) when every other member's summary of the round is in its
 * mirror, or PUB_WAIT_MS after the round began here. O(N) from the mirror it holds anyway. */
static void coord_publish(struct agent *a, struct agent_ckpt *ac, int64_t now)
{
    struct rdzv_session *s = a->node.rdzv;
    int64_t round = ac->round, gen = -1;
    if (round < 0 || ac->pub_round == round || !rdzv_is_coordinator(s) || now < ac->pub_next)
        return;
    if (rdzv_round_key(s, round, "ckpt")) {
        ac->pub_round = round; /* there already (published before a takeover) */
        return;
    }
    bool late = ckpt_pub_due(1, 0, ac->round_ms, now, PUB_WAIT_MS);
    if (rdzv_changes(s) == ac->pub_changes && !late)
        return; /* nothing new since the last look */
    ac->pub_changes = rdzv_changes(s);
    ac->pub_next = now + PUB_RETRY_MS;
    const struct rdzv_state *st = rdzv_current(s, &gen);
    struct pub_scan p = {.run = a->cfg->run_id, .round = round, .gen = st ? gen : INT64_MAX};
    struct ea_error err = {0};
    int others = rdzv_ckpt_each(s, round, pub_entry, &p, &err);
    if (others < 0 || !ckpt_pub_due((size_t)others, p.fresh, ac->round_ms, now, PUB_WAIT_MS))
        return; /* not mirrored yet (a takeover), or the members' summaries still coming */
    p = (struct pub_scan){.run = a->cfg->run_id, .round = round, .decode = true, .n = 1,
                          .v = calloc((size_t)others + 1, sizeof(struct ckpt_summary))};
    if (!p.v)
        return;
    ckpt_summary_of(ckpt_store_of(ac->c), a->cfg->node_id, round, &p.v[0]);
    rdzv_ckpt_each(s, round, pub_entry, &p, &err);
    struct ckpt_pub pub;
    ckpt_pub_of(p.v, p.n, a->cfg->node_id, round, &pub);
    p.fresh = ckpt_sum_fresh(p.v + 1, p.n - 1, round);
    free(p.v);
    if (!ckpt_pub_due((size_t)others, p.fresh, ac->round_ms, now, PUB_WAIT_MS))
        return; /* a summary of an older round put late: wait for it */
    char *json = NULL;
    int r = ckpt_pub_encode(&pub, &json, &err);
    if (r == 0)
        r = rdzv_publish_round_key(s, round, "ckpt", json, &err);
    if (r < 0) {
        ac->pub_next = now + PEER_RETRY_MS; /* the store failed: again in a second */
        log_warn("checkpoint store: cannot publish the run's newest step of round %" PRId64 ": %s",
                 round, err.msg);
    } else {
        ac->pub_round = round;
        log_info("checkpoint store, round %" PRId64 ": the run's newest complete step is %" PRId64
                 " (%d shard(s)), from %zu of %d other member(s)' summaries%s", round, pub.step,
                 pub.shards, p.fresh, others, p.bad ? " (some not decodable: left out)" : "");
    }
    free(json);
}

/* The replication port (docs/checkpoint.md "Replication"): on the address the ring's port is on,
 * published in this node's record before it joins. Not fatal: without it, no replicas. */
static void open_repl(struct agent *a, struct agent_ckpt *ac)
{
    const struct cfg *cfg = a->cfg;
    const struct rdzv_node *self = a->node.rdzv ? rdzv_session_self(a->node.rdzv) : NULL;
    if (!self || strcmp(cfg->backend, "memory") == 0)
        return;
    const char *addr = self->live_addr[0] ? self->live_addr : self->addr;
    int port = 0;
    int fd = ring_listen(addr, &port);
    if (fd < 0) {
        log_warn("checkpoint store: no replication port on '%s' (%s): this node neither sends "
                 "nor takes replicas", addr, strerror(-fd));
        return;
    }
    struct ckpt_repl_config rc = {.listen_fd = fd, .node_id = cfg->node_id,
                                  .replicas = cfg->checkpoint_replicas,
                                  .bytes_per_sec = (uint64_t)cfg->checkpoint_bandwidth_mb << 20};
    struct ea_error err = {0};
    if (ckpt_repl_start(ac->c, &rc, &err) < 0) {
        log_warn("checkpoint store: no replication port: %s", err.msg);
        return;
    }
    rdzv_session_set_ckpt_port(a->node.rdzv, port);
    ac->repl = true;
    struct ckpt_fetch_ops ops = {.ctx = a, .view = fetch_view, .where = fetch_where,
                                 .is_member = fetch_is_member, .published = fetch_published};
    if (ckpt_fetch_start(ac->c, &ops, 0, &err) < 0)
        log_warn("checkpoint store: no fetching from members: %s", err.msg);
    log_info("checkpoint store: replication port %s:%d (%d replica(s), %s)", addr, port,
             cfg->checkpoint_replicas,
             cfg->checkpoint_bandwidth_mb ? "bandwidth-bounded" : "unbounded");
}

static int agent_checkpoint_open(struct agent *a, const char *launcher)
{
    (void)launcher;
    const struct cfg *cfg = a->cfg;
    if (cfg->checkpoint_memory_mb <= 0)
        return 0;
    char sdir[PATH_MAX];
    snprintf(sdir, sizeof(sdir), WENV_CHECKPOINT_SOCKET_FMT, a->me.workdir);
    *strrchr(sdir, '/') = '\0'; /* the socket's directory, created 0700 by ckpt_create */
    struct ckpt_config cc = {.socket_dir = sdir, .run_id = cfg->run_id,
                             .memory = (uint64_t)cfg->checkpoint_memory_mb << 20,
                             .persist_dir = cfg->checkpoint_dir,
                             .persist_every = cfg->checkpoint_every, .uid = geteuid()};
    struct agent_ckpt *ac = calloc(1, sizeof(*ac));
    struct ea_error err = {0};
    int64_t restored = -1;
    int r = ac ? ckpt_create(&cc, &ac->c, &restored, &err) : ea_errorf(&err, -ENOMEM, "out of memory");
    if (r < 0) {
        log_error("--checkpoint-memory: %s", err.msg);
        free(ac);
        return AGENT_EXIT_USAGE;
    }
    ac->round = ac->pub_round = -1; /* no round followed yet */
    a->ckpt = ac;
    open_repl(a, ac);
    int64_t step;
    int shards;
    if (restored >= 0 && ckpt_store_latest(ckpt_store_of(ac->c), &step, &shards) == 0)
        log_info("checkpoint store: step %" PRId64 " (%d shard(s)) read back from "
                 "--checkpoint-dir '%s'", step, shards, cfg->checkpoint_dir);
    log_info("checkpoint store: up to %d MB in memory, workers' socket %s%s%s", cfg->checkpoint_memory_mb,
             ckpt_socket_path(ac->c), cfg->checkpoint_dir ? ", written to " : "",
             cfg->checkpoint_dir ? cfg->checkpoint_dir : "");
    return 0;
}

static void on_note(struct agent *a, const struct ckpt_note *n)
{
    static const char *const names[] = {
        [CKPT_NOTE_COMPLETE] = "checkpoint_complete", [CKPT_NOTE_NOFIT] = "checkpoint_nofit",
        [CKPT_NOTE_BAD] = "checkpoint_bad_request", [CKPT_NOTE_REFUSED] = "checkpoint_refused",
        [CKPT_NOTE_PERSISTED] = "checkpoint_persisted",
        [CKPT_NOTE_PERSIST_FAILED] = "checkpoint_persist_failed",
        [CKPT_NOTE_REPLICA] = "checkpoint_replica", [CKPT_NOTE_REPLICATED] = "checkpoint_replicated",
        [CKPT_NOTE_REPLICA_REFUSED] = "checkpoint_replica_refused",
        [CKPT_NOTE_FETCHED] = "checkpoint_fetched",
        [CKPT_NOTE_FETCH_FAILED] = "checkpoint_fetch_failed",
        [CKPT_NOTE_SUPERSEDED] = "checkpoint_superseded",
        [CKPT_NOTE_LATEST_ALONE] = "checkpoint_latest_alone",
        [CKPT_NOTE_SPARE_FAILED] = "checkpoint_spare_failed",
    };
    switch (n->kind) {
    case CKPT_NOTE_COMPLETE:
    case CKPT_NOTE_PERSISTED:
    case CKPT_NOTE_REPLICA:
    case CKPT_NOTE_REPLICATED:
        log_debug("checkpoint store: %s", n->message);
        break;
    case CKPT_NOTE_FETCHED:
    case CKPT_NOTE_SUPERSEDED:
        log_info("checkpoint store: %s", n->message);
        break;
    case CKPT_NOTE_NOFIT:
    case CKPT_NOTE_PERSIST_FAILED:
        log_error("checkpoint store: %s", n->message);
        break;
    case CKPT_NOTE_BAD:
    case CKPT_NOTE_REFUSED:
    case CKPT_NOTE_REPLICA_REFUSED:
    case CKPT_NOTE_FETCH_FAILED:
    case CKPT_NOTE_LATEST_ALONE:
    case CKPT_NOTE_SPARE_FAILED:
        log_warn("checkpoint store: %s", n->message);
        break;
    }
    agent_emit(a, names[n->kind], "{s:I, s:i, s:i, s:I, s:s}", "step", (json_int_t)n->step,
               "shard", n->shard, "shards", n->shards, "bytes", (json_int_t)n->bytes, "message",
               n->message);
}

static void agent_checkpoint_close(struct agent *a)
{
    if (!a->ckpt)
        return;
    int q = ckpt_breakpoint(a->ckpt->c); /* leaving: what is not on disk yet goes there now */
    if (q > 0)
        log_info("checkpoint store: writing %d shard(s) to --checkpoint-dir before exiting", q);
    ckpt_flush(a->ckpt->c);
    struct ckpt_note n;
    while (ckpt_next_note(a->ckpt->c, &n) > 0)
        on_note(a, &n); /* a write that failed is said, not lost */
    ckpt_destroy(a->ckpt->c);
    free(a->ckpt);
    a->ckpt = NULL;
}

static void agent_checkpoint_step(struct agent *a, int64_t now)
{
    if (!a->ckpt)
        return;
    ckpt_repl_step(a->ckpt->c, now);
    coord_publish(a, a->ckpt, now);
    ckpt_spare_step(a->ckpt->c); /* a piece of the next save's memfd, off the worker's stall */
    struct ckpt_note n;
    while (ckpt_next_note(a->ckpt->c, &n) > 0)
        on_note(a, &n);
    bool brk = a->state == LC_FAILED || a->state == LC_STOPPING || a->quit.term_signal || a->node.lease_lost;
    if (brk && !a->ckpt->at_break) {
        int q = ckpt_breakpoint(a->ckpt->c);
        if (q > 0)
            log_info("checkpoint store: workers stopping: %d shard(s) not on disk yet are being "
                     "written to --checkpoint-dir", q);
    }
    a->ckpt->at_break = brk;
}


/* A new round: this node's holdings in its ckpt/<id> key, once (O(1) bytes a round). */
static void publish_summary(struct agent *a, int64_t round)
{
    char *json = NULL;
    struct ea_error err = {0};
    int r = ckpt_fetch_summary(a->ckpt->c, round, &json, &err);
    if (r == 0)
        r = rdzv_ckpt_publish(a->node.rdzv, json, &err);
    if (r < 0)
        log_warn("checkpoint store: cannot publish what this node holds: %s", err.msg);
    else
        log_debug("checkpoint store, round %" PRId64 ": holds %s", round, json);
    free(json);
}

/* The round the replication port follows: this node's ring neighbours in a running round (the
 * successor's record read once per change of it: O(1) per round). */
static void agent_checkpoint_observe(struct agent *a, const struct rdzv_state *s, int64_t gen)
{
    (void)gen;
    struct agent_ckpt *ac = a->ckpt;
    if (!ac || !ac->repl)
        return;
    const struct rdzv_member *m = rdzv_self_member(a->node.rdzv);
    const char *self = a->cfg->node_id;
    int64_t round = s && s->status == RDZV_RUNNING && m && !a->node.lease_lost && !a->quit.exiting
                        ? s->round
                        : -1;
    const char *next = round >= 0 && m->next[0] && strcmp(m->next, self) != 0 ? m->next : "";
    const char *prev = round >= 0 && m->prev[0] && strcmp(m->prev, self) != 0 ? m->prev : "";
    int64_t slot = next[0] ? m->next_slot : 0;
    if (round == ac->round && strcmp(next, ac->next) == 0 && strcmp(prev, ac->prev) == 0 &&
        slot == ac->next_slot)
        return;
    int64_t now = ea_now_ms();
    if (next[0] && now < ac->retry_ms)
        return;
    struct rdzv_ring_peer p = {0};
    if (next[0]) {
        struct ea_error err = {0};
        int r = rdzv_ring_peer(a->node.rdzv, next, &p, &err);
        if (r < 0 && r != KV_ENOTFOUND && r != -ENOPROTOOPT) {
            log_debug("checkpoint store: reading node '%s': %s; trying again", next, err.msg);
            ac->retry_ms = now + PEER_RETRY_MS;
            return;
        }
        if (r < 0 || p.ckpt_port <= 0)
            log_debug("checkpoint store: node '%s' takes no replicas (%s)", next,
                      r < 0 ? err.msg : "no ckpt_port in its record");
    }
    ckpt_repl_round(ac->c, round, prev, next, p.addr, p.ckpt_port);
    if (round >= 0 && round != ac->round) {
        publish_summary(a, round);
        ac->round_ms = now;
    }
    ac->round = round;
    ac->next_slot = slot;
    snprintf(ac->next, sizeof(ac->next), "%s", next);
    snprintf(ac->prev, sizeof(ac->prev), "%s", prev);
    if (round >= 0)
        log_debug("checkpoint store, round %" PRId64 ": replicas from '%s', to '%s'", round,
                  prev[0] ? prev : "(none)", next[0] ? next : "(none)");
}

static int64_t checkpoint_wake(void *ctx)
{
    struct agent *a = ctx;
    if (!a->ckpt)
        return -1;
    int64_t w = ckpt_repl_wake(a->ckpt->c);
    int64_t sp = agent_in_run(a) ? ckpt_spare_wake(a->ckpt->c, ea_now_ms()) : -1; /* the tick's */
    if (sp >= 0 && (w < 0 || sp < w))
        w = sp;
    const struct agent_ckpt *ac = a->ckpt;
    if (ac->round >= 0 && ac->pub_round != ac->round && rdzv_is_coordinator(a->node.rdzv)) {
        int64_t t = ac->pub_next > ac->round_ms + PUB_WAIT_MS ? ac->pub_next
                                                              : ac->round_ms + PUB_WAIT_MS;
        if (w < 0 || t < w)
            w = t; /* the deadline, or the next look at what arrived meanwhile */
    }
    return w;
}

/* ---- the component ----------------------------------------------------------------------- */

static void checkpoint_tick(void *c, int64_t now)
{
    if (agent_in_run(c))
        agent_checkpoint_step(c, now);
}

/* the workers' saves and loads, the disk writer's results, the replication port */
static size_t fds_checkpoint(void *c, struct pollfd *fds, size_t max)
{
    const struct agent *a = c;
    return agent_in_run(c) && a->ckpt ? ckpt_pollfds(a->ckpt->c, fds, max) : 0;
}

static void on_checkpoint(void *c, const struct pollfd *fds, size_t n, int64_t now)
{
    (void)now;
    struct agent *a = c;
    if (a->ckpt)
        ckpt_on_poll(a->ckpt->c, fds, n);
}

static const struct agent_step checkpoint_steps[] = {
    /* notes; a breakpoint's writes; replication (its clock: the cap, retries) */
    {AGENT_AT_CHECK, {"checkpoint", checkpoint_tick, checkpoint_wake, false}},
};

static const struct ea_loop_source checkpoint_sources[] = {
    {"checkpoint", CKPT_POLL_MAX, fds_checkpoint, on_checkpoint, false},
};

const struct agent_component agent_checkpoint_component = {
    .name = "checkpoint",
    AGENT_STEPS(checkpoint_steps),
    AGENT_SOURCES(checkpoint_sources),
    .open = agent_checkpoint_open,
    .close = agent_checkpoint_close, /* after leaving (nobody waits on our disk), before "exited" */
    .observe = agent_checkpoint_observe,
};
