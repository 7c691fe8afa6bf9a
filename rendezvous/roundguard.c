// SPDX-License-Identifier: Apache-2.0
/* rdzv roundguard: the per-round values checked against who may write them (roundguard.h). */
#include "roundguard.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session_internal.h"

const char *const rdzv_guard_names[RDZV_GUARD_N] = {"master", "tracker"};

int rdzv_guard_index(const char *name)
{
    for (int i = 0; i < RDZV_GUARD_N; i++)
        if (strcmp(name, rdzv_guard_names[i]) == 0)
            return i;
    return -1;
}

/* ---- the value: {"schema","node","addr"} ------------------------------------------------ */

static int value_encode(const char *node, const char *addr, char **ret, struct ea_error *err)
{
    json_t *j = json_pack("{s:s, s:s, s:s}", "schema", RDZV_SCHEMA, "node", node, "addr", addr);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    if (!s)
        return ea_errorf(err, -ENOMEM, "out of memory");
    *ret = s;
    return 0;
}

static int value_decode(const char *json, size_t len, char *node, char *addr)
{
    if (len > 4096)
        return -EBADMSG;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
    const char *schema = NULL, *n = NULL, *a = NULL;
    bool ok = root &&
              json_unpack(root, "{s:s, s:s, s:s}", "schema", &schema, "node", &n, "addr", &a) == 0;
    ok = ok && strcmp(schema, RDZV_SCHEMA) == 0 && rdzv_strlcpy(node, RDZV_ID_MAX, n) == 0 &&
         rdzv_strlcpy(addr, RDZV_GUARD_ADDR_MAX, a) == 0;
    json_decref(root);
    return ok ? 0 : -EBADMSG;
}

/* The host of "ADDR:PORT" / "[ADDR]:PORT" into host (RDZV_GUARD_ADDR_MAX); false when the port
 * is not 1-65535 or there is no host. */
static bool split_host(const char *ap, char *host)
{
    const char *colon = strrchr(ap, ':');
    if (!colon || colon == ap)
        return false;
    char *end = NULL;
    long port = strtol(colon + 1, &end, 10);
    if (!isdigit((unsigned char)colon[1]) || *end || port < 1 || port > 65535)
        return false;
    const char *h = ap;
    size_t n = (size_t)(colon - ap);
    if (h[0] == '[') {
        if (n < 3 || h[n - 1] != ']')
            return false;
        h++;
        n -= 2;
    }
    if (n >= RDZV_GUARD_ADDR_MAX)
        return false;
    memcpy(host, h, n);
    host[n] = '\0';
    return true;
}

/* The same address: numerically for IPv4/IPv6 (so "::1" and "0::1" agree), else as text. */
static bool same_addr(const char *a, const char *b)
{
    unsigned char x[16], y[16];
    if (inet_pton(AF_INET, a, x) == 1)
        return inet_pton(AF_INET, b, y) == 1 && memcmp(x, y, 4) == 0;
    if (inet_pton(AF_INET6, a, x) == 1)
        return inet_pton(AF_INET6, b, y) == 1 && memcmp(x, y, 16) == 0;
    return strcmp(a, b) == 0;
}

/* Does node record `n` list `host` (its address, an interface's, or its agent's)? */
static bool record_lists(const struct rdzv_node *n, const char *host)
{
    if (same_addr(host, n->addr) || (n->agent_addr[0] && same_addr(host, n->agent_addr)))
        return true;
    for (size_t i = 0; i < n->n_ifaces && i < RDZV_IFACE_MAX; i++)
        if (same_addr(host, n->ifaces[i].addr))
            return true;
    return false;
}

/* What a message shows of a string from the store: printable characters only, so that a value
 * cannot forge log lines. */
static void printable(char *s)
{
    for (; *s; s++)
        *s = isprint((unsigned char)*s) ? *s : '?';
}

/* ---- who group rank 0 of the round is ------------------------------------------------------ */

/* Full mode: from the members and the mirrored node records. */
static int leader_full(struct rdzv_session *s, const char *id, struct rdzv_node *rec)
{
    if (!s->state.members)
        return -EAGAIN; /* the assignment does not add up yet: a fresh round is coming */
    const struct rdzv_member *m0 = NULL;
    for (size_t i = 0; i < s->state.n_members; i++)
        if (s->state.members[i].group_rank == 0)
            m0 = &s->state.members[i];
    if (!m0 || strcmp(m0->node_id, id) != 0)
        return 0;
    char key[KEY_MAX];
    rdzv_key_of(s, key, "nodes/%s", id);
    ssize_t i = rdzv_mirror_find(&s->m, key);
    if (i < 0 || !s->m.dec[i] || s->m.keys[i].create_revision != m0->slot)
        return 0; /* gone, or another incarnation of that node id */
    *rec = *s->m.dec[i];
    return 1;
}

/* Light mode: read the node record of `id`, then the chunk its slot maps to (as of the commit
 * we saw), and look for it there with group rank 0: two small reads a round. */
static int leader_light(struct rdzv_session *s, const char *id, struct rdzv_node *rec,
                        struct ea_error *err)
{
    const struct rdzv_leader *l = &s->state.leader;
    if (l->node_id[0]) { /* the commit record names group rank 0 and its addresses: no read */
        if (strcmp(l->node_id, id) != 0)
            return 0;
        struct rdzv_node n = {.create_revision = l->slot};
        snprintf(n.node_id, sizeof(n.node_id), "%s", l->node_id);
        snprintf(n.addr, sizeof(n.addr), "%s", l->addrs[0]);
        for (size_t i = 1; i < l->n_addrs; i++) /* record_lists looks at all three */
            if (n.n_ifaces < RDZV_IFACE_MAX)
                snprintf(n.ifaces[n.n_ifaces++].addr, RDZV_ADDR_MAX, "%s", l->addrs[i]);
            else
                snprintf(n.agent_addr, sizeof(n.agent_addr), "%s", l->addrs[i]);
        *rec = n;
        return 1;
    }
    char key[KEY_MAX];
    rdzv_key_of(s, key, "nodes/%s", id);
    struct kv_entry e = {0};
    s->stats.requests++;
    int r = kv_get(s->kv, key, &e, err);
    if (r == KV_ENOTFOUND) {
        ea_error_clear(err);
        return 0;
    }
    if (r < 0)
        return r;
    s->stats.bytes_received += strlen(e.key) + e.value_len;
    struct rdzv_node n;
    bool ok = rdzv_node_decode(e.value, e.value_len, &n, NULL) == 0 && strcmp(n.node_id, id) == 0;
    n.create_revision = e.create_revision;
    kv_entry_clear(&e);
    if (!ok)
        return 0;
    int64_t round = 0;
    struct rdzv_member *m = NULL;
    size_t nm = 0;
    if ((r = rdzv_read_chunk_of(s, n.create_revision, &round, &m, &nm, err)) <= 0)
        return r;
    if (round != s->state.round) {
        free(m);
        return -EAGAIN; /* a later round's chunk: its commit is on its way */
    }
    int found = 0;
    for (size_t i = 0; i < nm; i++)
        found |=
            strcmp(m[i].node_id, id) == 0 && m[i].slot == n.create_revision && m[i].group_rank == 0;
    free(m);
    if (found)
        *rec = n;
    return found;
}

int rdzv_read_chunk_of(struct rdzv_session *s, int64_t slot, int64_t *ret_round,
                       struct rdzv_member **ret_m, size_t *ret_n, struct ea_error *err)
{
    char key[KEY_MAX];
    rdzv_key_of(s, key, "assign/%06d", rdzv_chunk_of(slot, s->state.n_chunks));
    struct kv_entry e = {0};
    s->stats.requests++;
    int r = kv_get_at(s->kv, key, s->state_rev, &e, err);
    if (r == KV_ENOTFOUND) {
        ea_error_clear(err);
        return 0;
    }
    if (r < 0)
        return r;
    s->stats.bytes_received += strlen(e.key) + e.value_len;
    int chunk = -1;
    *ret_m = NULL;
    *ret_n = 0;
    r = rdzv_chunk_decode(e.value, e.value_len, ret_round, &chunk, ret_m, ret_n, NULL);
    kv_entry_clear(&e);
    return r < 0 ? 0 : 1;
}

/* Is node `id` group rank 0 of the committed round? 1 (its record kept in the guard), 0 not,
 * -EAGAIN cannot tell yet, or a store error. Decided once per node id a round. */
static int leader_check(struct rdzv_session *s, const char *id, struct ea_error *err)
{
    struct rdzv_guard *g = &s->guard;
    if (g->leader >= 0 && strcmp(g->claimed, id) == 0)
        return g->leader;
    struct rdzv_node rec = {0};
    int r;
    if (strcmp(id, s->cfg.self.node_id) == 0) {
        if (s->self_round != s->state.round)
            return -EAGAIN; /* our own assignment is not read yet */
        const struct rdzv_member *me = rdzv_self_member(s);
        r = me && me->group_rank == 0;
        rec = s->cfg.self;
    } else if (s->full) {
        r = leader_full(s, id, &rec);
    } else {
        r = leader_light(s, id, &rec, err);
    }
    if (r < 0)
        return r;
    snprintf(g->claimed, sizeof(g->claimed), "%s", id);
    g->leader = r;
    g->record = rec;
    return r;
}

/* ---- judging the round's values ------------------------------------------------------------ */

static void guard_reset(struct rdzv_guard *g, int64_t round)
{
    memset(g, 0, sizeof(*g));
    g->round = round;
    g->leader = -1;
}

static void round_key(struct rdzv_session *s, char *key, int64_t round, int which)
{
    rdzv_key_of(s, key, "rounds/%" PRId64 "/%s", round, rdzv_guard_names[which]);
}

/* Judge the mirrored value of rounds/<round>/<which> when it changed since last time. */
static int judge(struct rdzv_session *s, int which, struct ea_error *err)
{
    struct rdzv_guard *g = &s->guard;
    struct rdzv_guard_value *gv = &g->v[which];
    char key[KEY_MAX];
    round_key(s, key, g->round, which);
    ssize_t i = rdzv_mirror_find(&s->m, key);
    if (i < 0) {
        *gv = (struct rdzv_guard_value){0};
        return 0;
    }
    if (s->m.keys[i].mod_revision == gv->rev)
        return 0;
    char node[RDZV_ID_MAX] = "", addr[RDZV_GUARD_ADDR_MAX] = "", host[RDZV_GUARD_ADDR_MAX];
    char why[EA_ERROR_MSG_MAX] = "";
    if (value_decode(s->m.keys[i].value, s->m.keys[i].value_len, node, addr) < 0 ||
        !split_host(addr, host)) {
        snprintf(why, sizeof(why),
                 "not a {\"schema\":\"%s\",\"node\":ID,\"addr\":\"ADDR:PORT\"} record",
                 RDZV_SCHEMA);
    } else {
        int r = leader_check(s, node, err);
        if (r == -EAGAIN)
            return 0; /* judged on a later call */
        if (r < 0)
            return r;
        if ((i = rdzv_mirror_find(&s->m, key)) < 0) /* (no I/O touches the mirror: defensive) */
            return 0;
        if (!r)
            snprintf(why, sizeof(why), "node '%s' is not group rank 0 of round %" PRId64, node,
                     g->round);
        else if (!record_lists(&g->record, host))
            snprintf(why, sizeof(why), "'%s' is not an address in node '%s''s record", host, node);
    }
    gv->rev = s->m.keys[i].mod_revision;
    gv->ok = !why[0];
    if (gv->ok) {
        snprintf(gv->addr, sizeof(gv->addr), "%s", addr);
        return 0;
    }
    char shown[121]; /* the value as written, cut */
    snprintf(shown, sizeof(shown), "%s", s->m.keys[i].value);
    printable(shown);
    printable(why);
    char msg[2 * EA_ERROR_MSG_MAX];
    snprintf(msg, sizeof(msg), "refusing key '%s' ('%s'): %s; it is not used", key, shown, why);
    rdzv_warn(s, msg);
    return 0;
}

int rdzv_guard_round_keys(struct rdzv_session *s, struct ea_error *err)
{
    if (!s->have_state || s->state.status != RDZV_RUNNING ||
        (s->self_round == s->state.round && !s->self_ok))
        return 0; /* no round runs, or not in it: nothing to start */
    if (s->guard.round != s->state.round)
        guard_reset(&s->guard, s->state.round);
    for (int w = 0; w < RDZV_GUARD_N; w++) {
        int r = judge(s, w, err);
        if (r < 0)
            return r;
    }
    return 0;
}

const char *rdzv_guard_value(const struct rdzv_session *s, int64_t round, int which)
{
    const struct rdzv_guard *g = &s->guard;
    if (which < 0 || which >= RDZV_GUARD_N || !s->have_state || round != s->state.round ||
        g->round != round || !g->v[which].ok)
        return NULL;
    char key[KEY_MAX];
    rdzv_key_of(s, key, "rounds/%" PRId64 "/%s", round, rdzv_guard_names[which]);
    ssize_t i = rdzv_mirror_find(&s->m, key);
    /* replaced (or deleted) since it was judged: not before it is judged again */
    if (i < 0 || s->m.keys[i].mod_revision != g->v[which].rev)
        return NULL;
    return g->v[which].addr;
}

int rdzv_guard_publish(struct rdzv_session *s, int64_t round, int which, const char *addr_port,
                       struct ea_error *err)
{
    const struct rdzv_member *me = rdzv_self_member(s);
    if (which < 0 || which >= RDZV_GUARD_N || !s->have_state || s->state.round != round ||
        s->state.status != RDZV_RUNNING || !me || me->group_rank != 0)
        return ea_errorf(err, -EPERM, "only group rank 0 of round %" PRId64 " publishes its %s",
                         round, which >= 0 && which < RDZV_GUARD_N ? rdzv_guard_names[which] : "?");
    if (s->guard.round != round)
        guard_reset(&s->guard, round);
    char key[KEY_MAX], *json = NULL;
    round_key(s, key, round, which);
    int r = value_encode(s->cfg.self.node_id, addr_port, &json, err);
    int64_t expect = 0; /* create-only, unless a value that does not pass is there */
    bool done = false;
    for (int attempt = 0; r == 0 && !done && attempt < 2; attempt++) {
        /* fenced on the commit record: we are group rank 0 of the round it names */
        struct kv_cmp cmps[2] = {{key, expect}, {s->state_key, s->state_rev}};
        /* no lease: the value outlives the node, for `status` once the run ended */
        struct kv_op op = {.key = key, .value = json, .len = strlen(json)};
        int64_t rev = 0;
        s->stats.requests++;
        s->stats.writes++;
        s->stats.keys_written++;
        r = kv_txn(s->kv, cmps, 2, &op, 1, &rev, err);
        if (r == 0) {
            if (rdzv_mirror_put_own(&s->m, key, json, rev, rev, 0) < 0) {
                r = ea_errorf(err, -ENOMEM, "out of memory");
                break;
            }
            struct rdzv_guard_value *gv = &s->guard.v[which];
            gv->rev = rev;
            gv->ok = true;
            snprintf(gv->addr, sizeof(gv->addr), "%s", addr_port);
            done = true;
            break;
        }
        if (r != KV_ECONFLICT)
            break;
        ea_error_clear(err);
        struct kv_entry cur = {0};
        s->stats.requests++;
        r = kv_get(s->kv, key, &cur, err);
        if (r == KV_ENOTFOUND) { /* so the fence on `state` failed: the view catches up */
            r = ea_errorf(err, KV_ECONFLICT,
                          "the commit record changed while publishing round %" PRId64 "'s %s",
                          round, rdzv_guard_names[which]);
            break;
        }
        if (r < 0)
            break;
        int64_t cur_rev = cur.mod_revision;
        s->stats.bytes_received += strlen(cur.key) + cur.value_len;
        r = rdzv_mirror_put(&s->m, &cur);
        kv_entry_clear(&cur);
        if (r < 0) {
            r = ea_errorf(err, r, "out of memory");
            break;
        }
        if ((r = judge(s, which, err)) < 0)
            break;
        /* a value that passes (our own earlier write, its reply lost) wins; one we may not
         * use is overwritten: a CAS on its revision, still fenced on the commit record */
        done = s->guard.v[which].ok && s->guard.v[which].rev == cur_rev;
        expect = cur_rev;
    }
    if (r == 0 && !done)
        r = ea_errorf(err, KV_ECONFLICT, "key '%s' keeps changing under us", key);
    free(json);
    return r;
}

/* ---- reports of a round --------------------------------------------------------------------- */

bool rdzv_guard_report_counts(struct rdzv_session *s, const char *key, bool is_failure,
                              bool *ret_stop)
{
    ssize_t i = rdzv_mirror_find(&s->m, key);
    if (i < 0 || !s->have_state || !s->state.members)
        return false; /* members unknown: the coordinator commits a fresh round anyway */
    const struct kv_entry *e = &s->m.keys[i];
    char node[RDZV_ID_MAX] = "";
    bool stop = false;
    if (is_failure) {
        struct rdzv_failure *f = malloc(sizeof(*f));
        if (f && rdzv_failure_decode(e->value, e->value_len, f, NULL) == 0) {
            snprintf(node, sizeof(node), "%s", f->node_id);
            stop = f->progress.stop;
        }
        free(f);
    } else if (e->value_len < sizeof(node) && strlen(e->value) == e->value_len) {
        memcpy(node, e->value, e->value_len + 1);
    }
    if (node[0] && rdzv_state_find(&s->state, node) >= 0) {
        if (ret_stop && stop)
            *ret_stop = true;
        return true;
    }
    printable(node);
    char msg[2 * EA_ERROR_MSG_MAX];
    if (node[0])
        snprintf(msg, sizeof(msg), "ignoring key '%s': node '%s' is not a member of round %" PRId64,
                 key, node, s->state.round);
    else
        snprintf(msg, sizeof(msg), "ignoring key '%s': it names no node of this run", key);
    rdzv_warn(s, msg);
    return false;
}

/* ---- keys of later rounds ----------------------------------------------------------------- */

/* Is `rel` (a key below the run's prefix) a key of a round after `round`? */
static bool later_round_key(const char *rel, int64_t round)
{
    static const struct {
        const char *prefix;
        char end; /* what follows the round number */
    } pats[] = {{"rounds/", '/'}, {"failures/", '\0'}, {"reform/", '\0'}, {"done/", '/'}};
    for (size_t k = 0; k < sizeof(pats) / sizeof(pats[0]); k++) {
        size_t n = strlen(pats[k].prefix);
        if (strncmp(rel, pats[k].prefix, n) != 0)
            continue;
        const char *d = rel + n;
        if (!isdigit((unsigned char)d[0]))
            return false;
        char *end = NULL;
        errno = 0;
        long long r = strtoll(d, &end, 10);
        return *end == pats[k].end && (errno == ERANGE || r > round);
    }
    return false;
}

void rdzv_guard_cleanup(struct rdzv_session *s)
{
    if (!s->is_coord || !s->full || !s->have_state)
        return;
    size_t plen = strlen(s->prefix), n = 0;
    for (size_t i = 0; i < s->m.n_keys; i++)
        n += later_round_key(s->m.keys[i].key + plen, s->state.round);
    if (n == 0)
        return;
    char **keys = calloc(n, sizeof(*keys));
    struct kv_op *ops = calloc(n, sizeof(*ops));
    size_t k = 0;
    for (size_t i = 0; keys && ops && i < s->m.n_keys; i++)
        if (later_round_key(s->m.keys[i].key + plen, s->state.round) &&
            (keys[k] = strdup(s->m.keys[i].key)))
            ops[k] = (struct kv_op){.key = keys[k], .del = true}, k++;
    struct ea_error err = {0};
    int r = keys && ops && k == n ? 0 : ea_errorf(&err, -ENOMEM, "out of memory");
    /* fenced like a commit: only the coordinator of the round just committed deletes */
    struct kv_cmp cmps[2] = {{s->state_key, s->state_rev}, {s->coord_key, s->coord_rev}};
    for (size_t at = 0; r == 0 && at < n; at += KV_TXN_OPS_MAX) {
        size_t m = n - at < KV_TXN_OPS_MAX ? n - at : KV_TXN_OPS_MAX;
        s->stats.requests++;
        s->stats.writes++;
        s->stats.keys_written += m;
        if ((r = kv_txn(s->kv, cmps, 2, ops + at, m, NULL, &err)) == 0)
            for (size_t j = at; j < at + m; j++)
                rdzv_mirror_del(&s->m, keys[j]);
    }
    char msg[2 * EA_ERROR_MSG_MAX];
    if (r == 0)
        snprintf(msg, sizeof(msg),
                 "deleted %zu key(s) of rounds after round %" PRId64
                 " (written before their round existed: not by this run's agents), e.g. '%s'",
                 n, s->state.round, keys[0]);
    else
        snprintf(msg, sizeof(msg),
                 "could not delete %zu key(s) of rounds after round %" PRId64 " (%s); the next "
                 "commit tries again",
                 n, s->state.round, r == KV_ECONFLICT ? "the run moved on" : err.msg);
    rdzv_warn(s, msg);
    for (size_t j = 0; keys && j < n; j++)
        free(keys[j]);
    free(keys);
    free(ops);
}
