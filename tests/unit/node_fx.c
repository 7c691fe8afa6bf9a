// SPDX-License-Identifier: Apache-2.0
/* The node unit's test fixture (node_fx.h). */
#include "node_fx.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ea_time.h"
#include "session.h"
#include "suspect.h"

struct kv *kv;
const struct kv_ops *real_ops;
bool fail_writes;
int writes_tried;
int revoke_batches, revokes;
struct ea_fake_clock fc;
struct node nodes[NFX_MAX];
struct fake_tr tr[NFX_MAX];
struct counts cnt[NFX_MAX];
bool dead[NFX_MAX];

static struct kv_ops faulty; /* the memory backend's ops, writes failing while `fail_writes` */
static int nn;

static int f_txn(struct kv *k, const struct kv_cmp *c, size_t nc, const struct kv_op *o, size_t no,
                 int64_t *rev, struct ea_error *err)
{
    writes_tried++;
    if (fail_writes)
        return ea_errorf(err, KV_ECONN, "injected: store down");
    return real_ops->txn(k, c, nc, o, no, rev, err);
}

static int f_put(struct kv *k, const char *key, const char *v, size_t len, int64_t lease,
                 int64_t *rev, struct ea_error *err)
{
    writes_tried++;
    if (fail_writes)
        return ea_errorf(err, KV_ECONN, "injected: store down");
    return real_ops->put(k, key, v, len, lease, rev, err);
}

static int f_cas(struct kv *k, const char *key, const char *v, size_t len, int64_t expected,
                 int64_t lease, int64_t *rev, struct kv_entry *cur, struct ea_error *err)
{
    writes_tried++;
    if (fail_writes)
        return ea_errorf(err, KV_ECONN, "injected: store down");
    return real_ops->cas(k, key, v, len, expected, lease, rev, cur, err);
}

static int f_grant(struct kv *k, int64_t ttl, int64_t *ret, struct ea_error *err)
{
    writes_tried++;
    if (fail_writes)
        return ea_errorf(err, KV_ECONN, "injected: store down");
    return real_ops->lease_grant(k, ttl, ret, err);
}

static int f_revoke_each(struct kv *k, const int64_t *leases, size_t n, int *ret_codes,
                         struct ea_error *err)
{
    revoke_batches++;
    revokes += (int)n;
    for (size_t i = 0; i < n; i++)
        ret_codes[i] = real_ops->lease_revoke(k, leases[i], err);
    return 0;
}

static void tr_set(void *ctx, int64_t round, int members, const char *prev, bool await_prev,
                   const struct ring_peer *next, int64_t now)
{
    (void)members, (void)await_prev, (void)now;
    struct fake_tr *t = ctx;
    t->round = round;
    snprintf(t->prev, sizeof(t->prev), "%s", prev ? prev : "");
    snprintf(t->next, sizeof(t->next), "%s", next ? next->node_id : "");
}

static int tr_probe(void *ctx, uint64_t id, const struct ring_peer *peer, int64_t round,
                    int64_t timeout_ms, int64_t now)
{
    (void)timeout_ms, (void)now;
    struct fake_tr *t = ctx;
    if (t->n_probes >= t->probe_max)
        return -EBUSY;
    struct probe_req *p = &t->probes[t->n_probes++];
    p->id = id;
    p->round = round;
    snprintf(p->peer, sizeof(p->peer), "%s", peer->node_id);
    return 0;
}

static void on_event(void *ctx, const struct node_event *e)
{
    struct counts *c = ctx;
    c->lease_lost += e->kind == NODE_EV_LEASE_LOST;
    c->rejoined += e->kind == NODE_EV_REJOINED;
    c->suspect += e->kind == NODE_EV_SUSPECT;
    c->evicted += e->kind == NODE_EV_EVICTED;
    c->cleared += e->kind == NODE_EV_CLEARED;
}

static void on_fatal(void *ctx, enum node_fatal why, const char *msg)
{
    (void)why, (void)msg;
    ((struct counts *)ctx)->fatal++;
}

void nfx_setup(int n, const char *prefix, int port_base, int probe_max)
{
    nfx_setup_domains(n, prefix, port_base, probe_max, NULL);
}

void nfx_setup_domains(int n, const char *prefix, int port_base, int probe_max,
                       const char *const *domains)
{
    cr_assert(n >= 2 && n <= NFX_MAX && probe_max <= NFX_PROBES);
    nn = n;
    struct kv_config kc = {.backend = "memory"};
    struct ea_error err = {0};
    cr_assert_eq(kv_open(&kc, &kv, &err), 0, "%s", err.msg);
    real_ops = kv->ops;
    faulty = *real_ops;
    faulty.txn = f_txn;
    faulty.put = f_put;
    faulty.lease_grant = f_grant;
    faulty.cas = f_cas;
    faulty.lease_revoke_each = f_revoke_each;
    kv->ops = &faulty;
    fail_writes = false;
    writes_tried = revoke_batches = revokes = 0;
    ea_fake_clock_init(&fc, ea_now_ms() + 3600 * 1000);
    memset(tr, 0, sizeof(tr));
    memset(cnt, 0, sizeof(cnt));
    memset(dead, 0, sizeof(dead));
    for (int i = 0; i < n; i++) {
        struct rdzv_config rc = {.prefix = prefix,
                                 .params = {.min_nodes = 2,
                                            .max_nodes = n,
                                            .settle_ms = 0,
                                            .last_call_ms = 1000,
                                            .max_restarts = 100,
                                            .lease_ttl_ms = NFX_TTL,
                                            .ring = true},
                                 .lease_ttl_ms = NFX_TTL};
        snprintf(rc.self.node_id, sizeof(rc.self.node_id), "n%d", i);
        snprintf(rc.self.host, sizeof(rc.self.host), "h%d", i);
        snprintf(rc.self.addr, sizeof(rc.self.addr), "127.0.0.1");
        rc.self.nproc = 1;
        rc.self.pid = 100 + i;
        rc.self.live_port = port_base + i;
        snprintf(rc.self.domain, sizeof(rc.self.domain), "%s", domains ? domains[i] : "");
        tr[i].probe_max = probe_max;
        memset(&nodes[i], 0, sizeof(nodes[i]));
        cr_assert_eq(rdzv_session_create(kv, &rc, &nodes[i].rdzv, &err), 0, "%s", err.msg);
        struct node_params p = {.node_id = rc.self.node_id,
                                .clock = &fc.clock,
                                .join_timeout_ms = 60000,
                                .ops = {.ctx = &cnt[i], .event = on_event, .fatal = on_fatal}};
        node_init(&nodes[i], &p);
        struct node_ring_params rp = {.tr = {.ctx = &tr[i], .set = tr_set, .probe = tr_probe},
                                      .probe_ms = 600,
                                      .cooldown_ms = NFX_TTL,
                                      .await_prev = true};
        cr_assert_eq(node_ring_open(&nodes[i], &rp), 0);
        cr_assert_eq(rdzv_join(nodes[i].rdzv, &err), 0, "%s", err.msg);
    }
}

void nfx_teardown(void)
{
    for (int i = 0; i < nn; i++)
        node_free(&nodes[i]);
    kv->ops = real_ops;
    kv_close(kv);
}

void pass(void)
{
    struct kv_event *ev = NULL;
    size_t n = 0;
    struct ea_error err = {0};
    cr_assert_eq(kv_read_events(kv, &ev, &n, &err), 0, "%s", err.msg);
    for (int i = 0; i < nn; i++) {
        if (dead[i])
            continue;
        if (n)
            cr_assert_geq(rdzv_apply_events_at(nodes[i].rdzv, ev, n, fc.now, &err), 0, "%s",
                          err.msg);
        struct node_step_in in = {.may_rejoin = true, .generation = 1, .done_still_valid = true};
        node_step(&nodes[i], &in, fc.now);
        node_ring_step(&nodes[i], true, fc.now);
    }
    kv_events_free(ev, n);
}

void advance(int64_t ms)
{
    fc.now += ms;
}

void passes(int k)
{
    while (k-- > 0) {
        pass();
        fc.now += 10;
    }
}

int64_t round_of(int i)
{
    const struct rdzv_state *s = rdzv_current(nodes[i].rdzv, NULL);
    return s && s->status == RDZV_RUNNING && rdzv_self_member(nodes[i].rdzv) ? s->round : 0;
}

bool settle(int members)
{
    for (int k = 0; k < 400; k++) {
        pass();
        bool ok = true;
        int64_t r0 = -1;
        for (int i = 0; i < nn && ok; i++) {
            if (dead[i])
                continue;
            const struct rdzv_state *s = rdzv_current(nodes[i].rdzv, NULL);
            int64_t r = round_of(i);
            ok = r > 0 && s->group_world_size == members && tr[i].round == r && (r0 < 0 || r == r0);
            r0 = r;
        }
        if (ok)
            return true;
        advance(50);
    }
    for (int i = 0; i < nn; i++) { /* what each node saw: for the failure's message */
        const struct rdzv_state *s = rdzv_current(nodes[i].rdzv, NULL);
        cr_log_warn("n%d%s: round %lld of %d, ring round %lld, lease_lost %d", i,
                    dead[i] ? " (dead)" : "", (long long)round_of(i), s ? s->group_world_size : -1,
                    (long long)tr[i].round, nodes[i].lease_lost);
    }
    return false;
}

int coordinator(void)
{
    for (int i = 0; i < nn; i++)
        if (!dead[i] && rdzv_is_coordinator(nodes[i].rdzv))
            return i;
    cr_assert_fail("no coordinator");
    return -1;
}

int index_of(const char *id)
{
    return id[0] == 'n' ? atoi(id + 1) : -1;
}

void link_broke(int w, int x)
{
    struct ring_report r = {.kind = RING_REPORT_SUSPECT, .round = tr[w].round, .heard_ms = -1};
    snprintf(r.node_id, sizeof(r.node_id), "n%d", x);
    snprintf(r.cause, sizeof(r.cause), "closed");
    r.outbound = strcmp(tr[w].next, r.node_id) == 0;
    node_on_report(&nodes[w], &r);
}

void probe_answer(int w, const struct probe_req *p, bool alive, bool local)
{
    struct ring_report r = {.kind = RING_REPORT_PROBE,
                            .round = p->round,
                            .probe_id = p->id,
                            .alive = alive,
                            .local = local};
    snprintf(r.node_id, sizeof(r.node_id), "%s", p->peer);
    snprintf(r.cause, sizeof(r.cause), "%s", local ? "no route" : alive ? "answered" : "refused");
    node_on_report(&nodes[w], &r);
}

void probe_result(int w, const struct probe_req *p, bool alive, bool local)
{
    probe_answer(w, p, alive, local);
    node_ring_step(&nodes[w], true, fc.now); /* as the agent's pass: its reports, then its step */
}

const struct probe_req *probe_of(int i, int x, int from)
{
    for (int k = from; k < tr[i].n_probes; k++)
        if (index_of(tr[i].probes[k].peer) == x)
            return &tr[i].probes[k];
    return NULL;
}

int rank_of(int i)
{
    const struct rdzv_member *m = rdzv_self_member(nodes[i].rdzv);
    return m ? m->group_rank : -1;
}

int node_of_rank(int r)
{
    for (int i = 0; i < nn; i++)
        if (!dead[i] && rank_of(i) == r)
            return i;
    return -1;
}

int plain_member(void)
{
    int c = coordinator();
    for (int i = 0; i < nn; i++)
        if (i != c && index_of(tr[i].next) != c && index_of(tr[i].prev) != c)
            return i;
    for (int i = 0; i < nn; i++)
        if (i != c)
            return i;
    return -1;
}

bool lease_valid(int i)
{
    struct rdzv_ring_peer p;
    char id[8];
    snprintf(id, sizeof(id), "n%d", i);
    int c = coordinator();
    if (rdzv_ring_peer(nodes[c].rdzv, id, &p, NULL) < 0)
        return false;
    return real_ops->lease_keepalive(kv, p.lease, NULL, NULL) == 0;
}

void revoke(int i)
{
    struct rdzv_ring_peer p;
    char id[8];
    snprintf(id, sizeof(id), "n%d", i);
    int c = coordinator();
    cr_assert_eq(rdzv_ring_peer(nodes[c == i ? (i + 1) % nn : c].rdzv, id, &p, NULL), 0);
    cr_assert_eq(real_ops->lease_revoke(kv, p.lease, NULL), 0);
}
