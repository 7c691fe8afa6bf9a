// SPDX-License-Identifier: Apache-2.0
/* rdzv session: join, watch what this node needs, coordinate with fenced transactions. */
#include "session_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "ea_time.h"

/* A claim (or a chunk watch) the store failed is tried again after this long. */
#define TAKEOVER_RETRY_MS 500
/* A re-sync after a watch ended is reported (a warning the agent logs) at most this often. */
#define RESYNC_TELL_MS 60000

void rdzv_key_of(const struct rdzv_session *s, char *buf, const char *fmt, ...)
{
    char rel[KEY_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof(rel), fmt, ap);
    va_end(ap);
    snprintf(buf, KEY_MAX, "%s%s", s->prefix, rel);
}

static void mirror_warn(void *ctx, const char *msg)
{
    rdzv_warn(ctx, msg);
}

int rdzv_session_create(struct kv *kv, const struct rdzv_config *cfg, struct rdzv_session **ret,
                        struct ea_error *err)
{
    size_t plen = strlen(cfg->prefix);
    if (plen == 0 || cfg->prefix[plen - 1] != '/' || plen > KEY_MAX / 2)
        return ea_errorf(err, -EINVAL, "key prefix '%s' must end with '/' and be short",
                         cfg->prefix);
    struct rdzv_session *s = calloc(1, sizeof(*s));
    if (!s)
        return ea_errorf(err, -ENOMEM, "out of memory");
    s->kv = kv;
    s->cfg = *cfg;
    memcpy(s->prefix, cfg->prefix, plen + 1);
    s->cfg.prefix = s->prefix;
    rdzv_key_of(s, s->node_key, "nodes/%s", cfg->self.node_id);
    rdzv_key_of(s, s->coord_key, "coord");
    rdzv_key_of(s, s->state_key, "state");
    s->m.prefix = s->prefix;
    s->m.warn = mirror_warn;
    s->m.warn_ctx = s;
    s->m.on_node = rdzv_count_on_node;
    s->m.node_ctx = s;
    s->m.on_put = rdzv_suspect_on_put;
    s->m.put_ctx = s;
    s->done_round = -1;
    s->counted_version = (uint64_t)-1; /* count at the first derive */
    s->full = cfg->full_view;
    s->min_reached_ms = -1;
    s->plan_wake_ms = -1;
    s->due_since_ms = -1;
    s->takeover_ms = -1;
    s->charge_seen_ms = -1;
    s->self_round = -1;
    s->gather_pub_live = -1;
    s->cfg.params.lease_ttl_ms = cfg->lease_ttl_ms;
    s->keepalive_due_ms = -1;
    s->resync_told_ms = -1;
    *ret = s;
    return 0;
}

static void cancel_watches(struct rdzv_session *s)
{
    for (size_t i = 0; i < s->n_watches; i++)
        kv_watch_cancel(s->kv, s->watch_ids[i]);
    s->n_watches = 0;
    if (s->chunk_watch_id)
        kv_watch_cancel(s->kv, s->chunk_watch_id);
    s->chunk_watch_id = 0;
    s->chunk_aim_rev = 0;
}

void rdzv_session_destroy(struct rdzv_session *s)
{
    if (!s)
        return;
    cancel_watches(s);
    rdzv_mirror_free(&s->m);
    rdzv_count_free(s);
    rdzv_suspect_queue_free(s);
    rdzv_state_clear(&s->state);
    free(s);
}

void rdzv_warn(struct rdzv_session *s, const char *msg)
{
    if (strncmp(s->last_warning, msg, sizeof(s->last_warning) - 1) == 0)
        return;
    snprintf(s->last_warning, sizeof(s->last_warning), "%s", msg);
    snprintf(s->warning, sizeof(s->warning), "%s", msg);
}

/* Full mode: the members of the committed round, gathered from its chunks. A set of chunks that
 * does not add up (a coordinator died between two batches of a big commit) is reported and
 * makes the coordinator commit a fresh round. */
static void gather_members(struct rdzv_session *s)
{
    s->members_broken = false;
    if (s->state.n_chunks <= 0)
        return;
    int n = s->state.n_chunks;
    int64_t gen = rdzv_state_generation(&s->state, s->state_rev);
    struct rdzv_member **chunks = calloc((size_t)n, sizeof(*chunks));
    size_t *counts = calloc((size_t)n, sizeof(*counts));
    struct ea_error e = {0};
    int r = chunks && counts ? 0 : ea_errorf(&e, -ENOMEM, "out of memory");
    for (int k = 0; k < n && r == 0; k++) {
        char key[KEY_MAX];
        rdzv_key_of(s, key, "assign/%06d", k);
        ssize_t i = rdzv_mirror_find(&s->m, key);
        int64_t round = 0;
        int chunk = -1,
            when = i >= 0 ? rdzv_chunk_commit_cmp(&s->state, gen, s->m.keys[i].mod_revision) : 0;
        if (i < 0)
            r = ea_errorf(&e, -EBADMSG, "key '%s' is missing", key);
        else if ((r = rdzv_chunk_decode(s->m.keys[i].value, s->m.keys[i].value_len, &round, &chunk,
                                        &chunks[k], &counts[k], &e)) == 0 &&
                 (when > 0 || round > s->state.round) && chunk == k)
            r = -EAGAIN; /* a later commit's chunks: a commit in flight (or one whose
                            coordinator died before its `state`): no warning */
        else if (r == 0 && (round != s->state.round || chunk != k || when < 0))
            r = ea_errorf(
                &e, -EBADMSG,
                "key '%s' holds chunk %d of round %" PRId64 " written at revision %" PRId64
                ", not of the commit of round %" PRId64 " (chunks from revision %" PRId64 ")",
                key, chunk, round, s->m.keys[i].mod_revision, s->state.round, s->state.chunks_rev);
    }
    if (r == 0)
        r = rdzv_state_gather(&s->state, chunks, counts, &e);
    for (int k = 0; chunks && k < n; k++)
        free(chunks[k]);
    free(chunks);
    free(counts);
    if (r < 0 && r != -EAGAIN) {
        char msg[EA_ERROR_MSG_MAX + 64];
        snprintf(msg, sizeof(msg), "round %" PRId64 ": the member assignment is unusable (%s)",
                 s->state.round, e.msg);
        rdzv_warn(s, msg);
    }
    /* the coordinator then commits a fresh round over the live nodes */
    s->members_broken = r < 0 && s->state.status == RDZV_RUNNING;
}

static void self_from_members(struct rdzv_session *s)
{
    s->self_ok = false;
    s->self_round = s->state.round;
    for (size_t i = 0; i < s->state.n_members; i++)
        /* the slot too: a node that lost its lease and rejoined is not its dead incarnation */
        if (strcmp(s->state.members[i].node_id, s->cfg.self.node_id) == 0 &&
            s->state.members[i].slot == s->slot) {
            s->self = s->state.members[i];
            s->self_ok = true;
        }
}

static int decode_state(struct rdzv_session *s, const struct kv_entry *e, struct ea_error *err)
{
    int64_t rev = e ? e->mod_revision : 0;
    if (rev == s->state_rev && s->have_state == (e != NULL))
        return 0;
    struct rdzv_state st = {0};
    if (e) {
        int r = rdzv_state_decode(e->value, e->value_len, &st, err);
        if (r < 0)
            return ea_error_wrap(err, r, "key '%s'", e->key);
    }
    s->members_version++; /* the coordinator's member set is rebuilt (session_count.c) */
    bool same_round = s->have_state && e && st.round == s->state.round &&
                      st.status != RDZV_WAITING && s->state.status != RDZV_WAITING;
    struct rdzv_member *keep = same_round ? s->state.members : NULL;
    size_t keep_n = same_round ? s->state.n_members : 0;
    if (same_round)
        s->state.members = NULL; /* a same-round write: the members did not change */
    rdzv_state_clear(&s->state);
    s->state = st;
    s->have_state = e != NULL;
    s->state_rev = rev;
    if (!s->full) {
        free(keep); /* an ex-coordinator's members: a light node holds none */
        return 0;
    }
    if (keep) {
        s->state.members = keep;
        s->state.n_members = keep_n;
    } else if (s->adopt && rev == s->adopt_rev && s->adopt->n_members &&
               (s->state.members = malloc(s->adopt->n_members * sizeof(*s->state.members)))) {
        /* the round this coordinator just wrote: its members, not its chunks decoded again */
        memcpy(s->state.members, s->adopt->members,
               s->adopt->n_members * sizeof(*s->state.members));
        s->state.n_members = s->adopt->n_members;
        s->members_broken = false;
        if (s->cfg.params.ring && /* as its chunks say them */
            rdzv_members_link_ring(s->state.members, s->state.n_members, s->state.n_chunks) < 0) {
            free(s->state.members); /* out of memory: read them back from the chunks */
            s->state.members = NULL;
            s->state.n_members = 0;
            gather_members(s);
        }
    } else if (s->have_state) {
        gather_members(s);
    }
    self_from_members(s);
    return 0;
}

static int decode_coord(struct rdzv_session *s, const struct kv_entry *e, int64_t now_ms,
                        struct ea_error *err)
{
    if (!e) {
        s->have_coord = false;
        s->coord_rev = 0;
        return 0;
    }
    if (e->mod_revision == s->coord_rev && s->have_coord)
        return 0;
    struct rdzv_coord c;
    int r = rdzv_coord_decode(e->value, e->value_len, &c, err);
    if (r < 0)
        return ea_error_wrap(err, r, "key '%s'", e->key);
    s->coord = c;
    s->have_coord = true;
    s->coord_rev = e->mod_revision;
    s->coord_seen_ms = now_ms;
    return 0;
}

/* How long after it saw the coordinator's key vanish this node claims it (rdzv_takeover_delay_ms:
 * a few successors spread over the rank order, in turn; everybody else later). */
static int64_t takeover_delay_ms(const struct rdzv_session *s)
{
    bool member = s->self_ok && s->have_state && s->self_round == s->state.round;
    bool round =
        s->have_state && (s->state.status == RDZV_RUNNING || s->state.status == RDZV_FAILING);
    if (!round) /* gathering: by the live count the coordinator last published (kept after
                   its key went) */
        return rdzv_gather_takeover_delay_ms(s->coord.live > 0 ? (size_t)s->coord.live : 0,
                                             s->slot);
    return rdzv_takeover_delay_ms(member ? s->self.group_rank : -1,
                                  (size_t)s->state.group_world_size, s->slot);
}

int rdzv_derive(struct rdzv_session *s, int64_t now_ms, struct ea_error *err)
{
    if (s->m.node_arrived) {
        s->last_arrival_ms = now_ms;
        s->m.node_arrived = false;
    }
    if (!s->m.dirty)
        return 0;
    /* O(1) per event however big the run (session_count.c keeps the rest) */
    size_t n_live = s->m.n_nodes_valid;
    ssize_t si = rdzv_mirror_find(&s->m, s->state_key), ci = rdzv_mirror_find(&s->m, s->coord_key);
    const struct kv_entry *state_e = si >= 0 && !s->m.dec[si] ? &s->m.keys[si] : NULL;
    const struct kv_entry *coord_e = ci >= 0 && !s->m.dec[ci] ? &s->m.keys[ci] : NULL;
    int r = decode_state(s, state_e, err);
    /* first seen: kept across a re-sync (a new coordinator's listing decodes the same value again;
     * the loss batching window runs from when this node first saw it, not from its takeover) */
    if (r == 0 && s->state_rev != s->state_seen_rev) {
        s->state_seen_ms = now_ms;
        s->state_seen_rev = s->state_rev;
    }
    if (r == 0)
        r = decode_coord(s, coord_e, now_ms, err);
    if (r < 0)
        return r;
    s->is_coord = s->have_coord && strcmp(s->coord.node_id, s->cfg.self.node_id) == 0;
    if (s->have_coord && coord_e && coord_e->lease != s->revoked_coord_lease)
        s->revoked_coord_lease = 0; /* another coordinator by now: its claim was not ours */
    if (s->have_coord || !s->lease)
        s->takeover_ms = -1;
    else if (s->takeover_ms < 0)
        s->takeover_ms = now_ms + (s->revoked_coord_lease ? 0 : takeover_delay_ms(s));
    s->n_live = s->full ? n_live : (s->have_coord ? (size_t)s->coord.live : 0);
    s->failure_reported = s->reform_requested = s->failure_stop = false;
    if ((r = rdzv_count_members(s, err)) < 0 || (r = rdzv_count_done(s, err)) < 0)
        return r;
    if (s->full && s->have_state) {
        char fkey[KEY_MAX], rkey[KEY_MAX];
        rdzv_key_of(s, fkey, "failures/%" PRId64, s->state.round);
        rdzv_key_of(s, rkey, "reform/%" PRId64, s->state.round);
        /* only a member of the round may report (roundguard.c) */
        s->failure_reported = rdzv_guard_report_counts(s, fkey, true, &s->failure_stop);
        s->reform_requested = rdzv_guard_report_counts(s, rkey, false, NULL) || s->members_broken;
    }
    const struct rdzv_state *st = &s->state;
    if (s->have_state && st->charge_round > 0 && st->charge_round == st->round) {
        if (s->charge_seen_round != st->charge_round) {
            s->charge_seen_round = st->charge_round;
            s->charge_seen_ms = now_ms;
        }
    } else {
        s->charge_seen_round = 0;
        s->charge_seen_ms = -1;
    }
    if (s->full && n_live >= (size_t)s->cfg.params.min_nodes) {
        if (s->min_reached_ms < 0)
            s->min_reached_ms = now_ms;
    } else {
        s->min_reached_ms = -1;
    }
    s->m.dirty = false;
    return 0;
}

/* Light mode: a watch on our own assignment chunk, assign/<slot mod chunks>, so that each round's
 * chunk is pushed by the store (written before `state`, it arrives first on the same watch
 * stream) instead of read. It is started off the critical path (rdzv_tick), from just after the
 * chunk version this node last read, so nothing between is missed. */
static int start_chunk_watch(struct rdzv_session *s, struct ea_error *err)
{
    if (!s->chunk_aim_rev)
        return 0;
    if (s->chunk_watch_id) {
        kv_watch_cancel(s->kv, s->chunk_watch_id);
        s->chunk_watch_id = 0;
    }
    char key[KEY_MAX];
    rdzv_key_of(s, key, "assign/%06d", s->chunk_aim_k);
    s->stats.requests++;
    int r = kv_watch(s->kv, key, s->chunk_aim_rev, &s->chunk_watch_id, err);
    if (r < 0)
        return r;
    s->chunk_k = s->chunk_aim_k;
    s->chunk_aim_rev = 0;
    return 0;
}

/* Our entry in a chunk of the committed round: 1 found (self set), 0 not in it, -EAGAIN when
 * the chunk is not of the commit `state` names (rdzv_chunk_commit_cmp: a later commit's, whose
 * state is on its way, or an earlier one's that the watch has not replaced yet — the round
 * number alone cannot tell, a `waiting` state and a dead coordinator's successor reuse it), or a
 * decode error. */
static int self_from_chunk(struct rdzv_session *s, const struct kv_entry *e, struct ea_error *err)
{
    int64_t round = 0;
    int chunk = -1;
    struct rdzv_member *m = NULL;
    size_t n = 0;
    int r = rdzv_chunk_decode(e->value, e->value_len, &round, &chunk, &m, &n, err);
    if (r < 0)
        return ea_error_wrap(err, r, "key '%s'", e->key);
    int64_t gen = rdzv_state_generation(&s->state, s->state_rev);
    if (round != s->state.round || rdzv_chunk_commit_cmp(&s->state, gen, e->mod_revision) != 0) {
        free(m);
        return -EAGAIN;
    }
    s->self_ok = false;
    s->self_round = s->state.round;
    for (size_t i = 0; i < n; i++)
        if (strcmp(m[i].node_id, s->cfg.self.node_id) == 0 && m[i].slot == s->slot) {
            s->self = m[i];
            s->self_ok = true;
        }
    free(m);
    return s->self_ok;
}

/* Light mode: our assignment for the committed round, from the watched chunk when it is aimed
 * at the right key and has arrived; else one read at the commit's revision, and the watch is
 * (re)aimed later. */
static int fetch_self(struct rdzv_session *s, struct ea_error *err)
{
    if (s->full || !s->have_state || s->state.status != RDZV_RUNNING ||
        s->self_round == s->state.round)
        return 0;
    int k = rdzv_chunk_of(s->slot, s->state.n_chunks), r;
    char key[KEY_MAX];
    rdzv_key_of(s, key, "assign/%06d", k);
    if (s->chunk_watch_id && s->chunk_k == k) {
        ssize_t i = rdzv_mirror_find(&s->m, key);
        if (i >= 0 && (r = self_from_chunk(s, &s->m.keys[i], err)) != -EAGAIN)
            return r < 0 ? r : 0;
    }
    struct kv_entry e = {0};
    s->stats.requests++;
    /* as of the commit we saw: the store has applied it, so a local read is consistent (etcd:
     * exactly the chunk that commit saw; a backend that serves the latest may show a later
     * commit's, which -EAGAIN below waits out) */
    r = kv_get_at(s->kv, key, s->state_rev, &e, err);
    if (r == KV_ENOTFOUND) { /* no chunk: not a member of this round */
        ea_error_clear(err);
        s->self_ok = false;
        s->self_round = s->state.round;
        return 0;
    }
    if (r < 0)
        return r;
    s->stats.bytes_received += strlen(e.key) + e.value_len;
    r = self_from_chunk(s, &e, err);
    if (r == -EAGAIN) /* a later commit's chunk: its state is on its way */
        r = 0;
    if (r >= 0 && (!s->chunk_watch_id || s->chunk_k != k)) {
        if (s->chunk_watch_id && s->chunk_k != k) {
            char old[KEY_MAX];
            rdzv_key_of(s, old, "assign/%06d", s->chunk_k);
            rdzv_mirror_del(&s->m, old);
        }
        /* watch it from just after what we know (rdzv_tick): past the version read, and never
         * before the store revision of our last listing. After a re-sync that version may be
         * older than the store's compaction (etcd then cancels the watch, and a re-sync aimed
         * there again would loop); the listing's revision is never compacted, and a chunk
         * written between the commit and the listing is not this commit's (self_from_chunk) */
        s->chunk_aim_k = k;
        s->chunk_aim_rev = (e.mod_revision > s->listed_rev ? e.mod_revision : s->listed_rev) + 1;
        s->chunk_aim_at_ms = 0;
        if (rdzv_mirror_put(&s->m, &e) < 0)
            r = ea_errorf(err, -ENOMEM, "out of memory");
    }
    kv_entry_clear(&e);
    return r < 0 ? r : 0;
}

/* List what this node needs and (re)start its watches just after the listed revisions: the
 * whole run in full mode; else `state`, `coord` and the per-round values. The mirror is
 * replaced only once every listing succeeded: a store outage keeps the last known view. */
static int resync(struct rdzv_session *s, int64_t now_ms, struct ea_error *err)
{
    static const char *const light[] = {"state", "coord", "rounds/"};
    static const char *const full[] = {""};
    const char *const *rels = s->full ? full : light;
    size_t n = s->full ? 1 : sizeof(light) / sizeof(light[0]);
    cancel_watches(s);
    s->need_resync = true; /* until the lists and the new watches all succeed */
    struct kv_list lists[3] = {{0}};
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        char prefix[KEY_MAX];
        rdzv_key_of(s, prefix, "%s", rels[i]);
        s->stats.requests++;
        r = kv_list(s->kv, prefix, &lists[i], err);
    }
    if (r == 0) {
        rdzv_mirror_clear(&s->m);
        s->listed_rev = lists[0].revision;
        s->state_rev = -1; /* decode again */
        s->coord_rev = -1;
        s->self_round = -1;
    }
    for (size_t i = 0; i < n && r == 0; i++)
        for (size_t k = 0; k < lists[i].n && r == 0; k++) {
            struct kv_entry *e = &lists[i].entries[k];
            s->stats.bytes_received += strlen(e->key) + e->value_len;
            if ((r = rdzv_mirror_put(&s->m, e)) < 0)
                r = ea_errorf(err, r, "out of memory");
        }
    for (size_t i = 0; i < n && r == 0; i++) {
        char prefix[KEY_MAX];
        rdzv_key_of(s, prefix, "%s", rels[i]);
        s->stats.requests++;
        r = kv_watch(s->kv, prefix, lists[i].revision + 1, &s->watch_ids[s->n_watches], err);
        if (r == 0)
            s->n_watches++;
    }
    for (size_t i = 0; i < n; i++)
        kv_list_clear(&lists[i]);
    if (r < 0)
        return r;
    s->need_resync = false;
    s->m.node_arrived = false;
    (void)now_ms;
    r = rdzv_derive(s, now_ms, err);
    return r < 0 ? r : fetch_self(s, err);
}

/* A watch ended (`why`): list again. Counted, and reported (a warning the agent logs) the first
 * time and then at most once every RESYNC_TELL_MS with the count, so that a re-sync loop is
 * never silent. */
static int resync_broken(struct rdzv_session *s, int64_t now_ms, const char *why,
                         struct ea_error *err)
{
    s->resyncs++;
    if (s->resync_told_ms < 0 || now_ms - s->resync_told_ms >= RESYNC_TELL_MS) {
        char msg[EA_ERROR_MSG_MAX];
        snprintf(msg, sizeof(msg),
                 "store watch ended (%.300s): reading the run again (re-sync %llu)", why,
                 (unsigned long long)s->resyncs);
        rdzv_warn(s, msg);
        s->resync_told_ms = now_ms;
    }
    return resync(s, now_ms, err);
}

/* Write our node record only if the key is absent, or holds a stale record of ours: the same
 * host and our pid (a rejoin) or a pid that no longer exists there (this agent restarted). Another
 * live agent's record means a duplicate --node-id: KV_EINVAL naming it (the agent exits 2).
 * *ret_create_revision: the key's create_revision after the write. */
static int claim_node_key(struct rdzv_session *s, const char *json, int64_t lease,
                          int64_t *ret_create_revision, struct ea_error *err)
{
    int64_t expected = 0, created = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        struct kv_entry cur = {0};
        int64_t rev = 0;
        s->stats.requests++;
        s->stats.writes++;
        s->stats.keys_written++;
        int r = kv_cas(s->kv, s->node_key, json, strlen(json), expected, lease, &rev, &cur, err);
        if (r != KV_ECONFLICT) {
            kv_entry_clear(&cur);
            if (r == 0)
                *ret_create_revision = expected ? created : rev;
            return r;
        }
        struct rdzv_node old = {0};
        bool known = cur.mod_revision > 0 && cur.value &&
                     rdzv_node_decode(cur.value, cur.value_len, &old, NULL) == 0;
        bool ours = known && strcmp(old.host, s->cfg.self.host) == 0 &&
                    (old.pid == s->cfg.self.pid ||
                     (old.pid > 0 && kill((pid_t)old.pid, 0) < 0 && errno == ESRCH));
        if (cur.mod_revision > 0 && !ours) {
            r = ea_errorf(err, KV_EINVAL,
                          "node id '%s' is already used by a live agent (pid %lld on host '%s') "
                          "under '%s': give every agent its own --node-id",
                          s->cfg.self.node_id, (long long)old.pid, known ? old.host : "?",
                          s->prefix);
            kv_entry_clear(&cur);
            return r;
        }
        expected = cur.mod_revision; /* 0: it vanished meanwhile */
        created = cur.create_revision;
        kv_entry_clear(&cur);
        ea_error_clear(err);
    }
    return ea_errorf(err, KV_ECONFLICT, "node key '%s' keeps changing under us", s->node_key);
}

/* The coordinator mirrors the whole run. */
static int become_full(struct rdzv_session *s, int64_t now_ms, struct ea_error *err)
{
    if (s->full)
        return 0;
    s->full = true;
    return resync(s, now_ms, err);
}

/* A node that coordinated and no longer does (its lease ran out and it rejoined, or another node
 * holds `coord` now) goes back to watching only what it needs: O(1) per round again. */
static int become_light(struct rdzv_session *s, int64_t now_ms, struct ea_error *err)
{
    if (!s->full || s->cfg.full_view || s->is_coord || !s->have_coord)
        return 0;
    s->full = false;
    int r = resync(s, now_ms, err);
    if (r < 0)
        return r;
    free(s->nodes);
    s->nodes = NULL;
    s->n_nodes = 0;
    return 0;
}

/* Claim the `coord` key (create-only, on our lease). 1 when we now coordinate. */
static int claim_coord(struct rdzv_session *s, int64_t now_ms, struct ea_error *err)
{
    s->stats.claims++;
    int r = rdzv_write_coord(s, (int)s->n_live, -1, 0, err);
    if (r < 0 && r != KV_ECONFLICT)
        return r;
    s->takeover_ms = -1;
    if ((r = rdzv_derive(s, now_ms, err)) < 0)
        return r;
    if (!s->is_coord)
        return 0;
    s->gather_pub_live = -1;
    r = become_full(s, now_ms, err);
    return r < 0 ? r : 1;
}

int rdzv_join(struct rdzv_session *s, struct ea_error *err)
{
    int64_t now = ea_now_ms();
    char *json = NULL;
    s->cfg.self.joined_ms = ea_wall_ms(); /* this incarnation's; `status` shows it as SINCE */
    int r = rdzv_node_encode(&s->cfg.self, &json, err);
    if (r < 0)
        return r;
    int64_t lease = 0, slot = 0;
    s->stats.requests++;
    r = kv_lease_grant(s->kv, s->cfg.lease_ttl_ms, &lease, err);
    if (r == 0)
        r = claim_node_key(s, json, lease, &slot, err);
    if (r < 0 && lease)
        kv_lease_revoke(s->kv, lease, NULL);
    free(json);
    if (r < 0)
        return r;
    s->lease = lease;
    s->slot = slot;
    s->full = s->cfg.full_view; /* a new node: it mirrors the run again only if it coordinates */
    s->keepalive_due_ms = now + s->cfg.lease_ttl_ms / 3;
    s->renewed_ms = now;
    s->last_arrival_ms = now;
    if ((r = resync(s, now, err)) < 0)
        return r;
    if (!s->have_coord) /* nobody coordinates yet (the first node of the run): take it now */
        r = claim_coord(s, now, err);
    return r < 0 ? r : 0;
}

static bool our_watch(const struct rdzv_session *s, int64_t id)
{
    if (s->chunk_watch_id && s->chunk_watch_id == id)
        return true;
    for (size_t i = 0; i < s->n_watches; i++)
        if (s->watch_ids[i] == id)
            return true;
    return false;
}

int rdzv_apply_events(struct rdzv_session *s, const struct kv_event *ev, size_t n,
                      struct ea_error *err)
{
    return rdzv_apply_events_at(s, ev, n, ea_now_ms(), err);
}

int rdzv_apply_events_at(struct rdzv_session *s, const struct kv_event *ev, size_t n, int64_t now,
                         struct ea_error *err)
{
    const struct kv_event *broken = NULL;
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        if (!our_watch(s, ev[i].watch_id))
            continue;
        s->stats.bytes_received +=
            (ev[i].entry.key ? strlen(ev[i].entry.key) : 0) + ev[i].entry.value_len;
        if (ev[i].type == KV_EVENT_PUT) {
            struct kv_entry copy;
            r = kv_entry_copy(&copy, &ev[i].entry);
            if (r == 0)
                r = rdzv_mirror_put(&s->m, &copy);
            kv_entry_clear(&copy);
        } else if (ev[i].type == KV_EVENT_DELETE) {
            rdzv_mirror_del(&s->m, ev[i].entry.key);
        } else if (!broken) {
            broken = &ev[i];
        }
    }
    if (r < 0)
        return ea_errorf(err, r, "out of memory");
    if (broken)
        return resync_broken(
            s, now, broken->message[0] ? broken->message : kv_strerror(broken->error), err);
    if ((r = rdzv_derive(s, now, err)) < 0)
        return r;
    if (s->is_coord && !s->full)
        return become_full(s, now, err);
    if ((r = become_light(s, now, err)) < 0)
        return r;
    return fetch_self(s, err);
}

int rdzv_on_events(struct rdzv_session *s, struct ea_error *err)
{
    struct kv_event *ev = NULL;
    size_t n = 0;
    int r = kv_read_events(s->kv, &ev, &n, err);
    if (r < 0)
        return r;
    r = rdzv_apply_events(s, ev, n, err);
    kv_events_free(ev, n);
    return r;
}

bool rdzv_is_coordinator(const struct rdzv_session *s)
{
    return s->is_coord;
}

int rdzv_tick(struct rdzv_session *s, int64_t now_ms, struct ea_error *err)
{
    int r = s->need_resync ? resync(s, now_ms, err) : rdzv_derive(s, now_ms, err);
    if (r == 0)
        r = become_light(s, now_ms, err);
    if (r == 0)
        r = fetch_self(s, err);
    if (r == 0 && !s->full && s->chunk_aim_rev && now_ms >= s->chunk_aim_at_ms) {
        struct ea_error werr = {0};
        if ((r = start_chunk_watch(s, &werr)) == KV_ECOMPACTED) /* compacted since it was read */
            r = resync_broken(s, now_ms, werr.msg, err);
        else if (r < 0) { /* the store failed: not in a loop */
            s->chunk_aim_at_ms = now_ms + TAKEOVER_RETRY_MS;
            ea_errorf(err, r, "%s", werr.msg);
        }
    }
    if (r == 0) /* the round's master and tracker: used only once group rank 0's (roundguard.c) */
        r = rdzv_guard_round_keys(s, err);
    if (r < 0)
        return r;
    s->plan_wake_ms = -1;
    if (s->takeover_ms >= 0 && now_ms >= s->takeover_ms && (r = claim_coord(s, now_ms, err)) < 0) {
        s->takeover_ms = now_ms + TAKEOVER_RETRY_MS; /* the store failed: not in a tight loop */
        return r;
    }
    if (!s->is_coord)
        return 0;
    if ((r = become_full(s, now_ms, err)) < 0)
        return r;
    /* from the counts kept per event; the node list only when a round of them is written */
    struct rdzv_view v = {
        .state = s->have_state ? &s->state : NULL,
        .n_nodes = s->n_live,
        .survivors_known = true,
        .n_survivors = s->n_survivors,
        .done = s->done,
        .n_done = s->n_done,
        .now_ms = now_ms,
        .last_arrival_ms = s->last_arrival_ms,
        .min_reached_ms = s->min_reached_ms,
        .generation = s->have_state ? rdzv_state_generation(&s->state, s->state_rev) : 0,
        .charge_seen_ms = s->charge_seen_ms,
        .state_seen_ms = s->state_seen_ms,
        .loss_hold_ms = rdzv_loss_hold(s, now_ms),
        .failure_reported = s->failure_reported,
        .failure_stop = s->failure_stop,
        .reform_requested = s->reform_requested,
    };
    struct rdzv_state next = {0};
    int64_t wake = -1;
    r = rdzv_plan(&s->cfg.params, &v, &next, &wake, err);
    if (r == RDZV_PLAN_NEED_NODES && (r = rdzv_count_sorted_nodes(s, err)) == 0) {
        v.nodes = s->nodes;
        v.n_nodes = s->n_nodes;
        r = rdzv_plan(&s->cfg.params, &v, &next, &wake, err);
    }
    if (r > 0) {
        r = rdzv_commit(s, &next, now_ms, err);
        rdzv_state_clear(&next);
    }
    s->plan_wake_ms = wake;
    if (r >= 0) {
        int g = rdzv_publish_gather(s, now_ms, err);
        if (g < 0)
            return g;
    }
    /* old rounds' keys: at the tick after a commit, off its path (and again after a failed try) */
    if (r == 0 && (r = rdzv_gc_old_rounds(s, now_ms, err)) > 0)
        r = 0;
    else if (r > 0 && s->have_state && s->state.round - 1 > s->gc_below)
        s->plan_wake_ms = now_ms;
    return r;
}

int64_t rdzv_wake_ms(const struct rdzv_session *s)
{
    int64_t t = -1, c[] = {s->plan_wake_ms, s->keepalive_due_ms, s->takeover_ms,
                           s->chunk_aim_rev && !s->full ? s->chunk_aim_at_ms : -1};
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
        if (c[i] >= 0 && (t < 0 || c[i] < t))
            t = c[i];
    return t;
}
