// SPDX-License-Identifier: Apache-2.0
/* pool (agent/daemon/pool.c) against a hostile queue (issue 38): thousands of entries that are
 * not run specs are moved aside once each and said once, a scan reads the queue a page at a time
 * (counted by a kv that wraps the memory backend and measures every list it answers), the run
 * found is still the oldest with room, and the scans an idle daemon makes on writes of `next`
 * are spaced (a pure function of the clock). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"
#include "pool.h"
#include "runspec.h"

/* ---- a kv that counts what it lists ------------------------------------------------------ */

struct counting {
    struct kv base;
    struct kv *inner;
    size_t lists;      /* unpaged lists of the queue */
    size_t pages;      /* list_page calls */
    size_t max_bytes;  /* most bytes (keys and values) one call returned */
    size_t total;      /* bytes returned by every call */
    void (*on_page)(void); /* once, after the next list_page has read its page */
};

#define CK(kv) ((struct counting *)(kv))
#define INNER(kv) (CK(kv)->inner)

static void measure(struct kv *kv, int r, const struct kv_list *l)
{
    if (r < 0)
        return;
    size_t bytes = 0;
    for (size_t i = 0; i < l->n; i++)
        bytes += strlen(l->entries[i].key) + l->entries[i].value_len;
    CK(kv)->total += bytes;
    if (bytes > CK(kv)->max_bytes)
        CK(kv)->max_bytes = bytes;
}

static int c_get(struct kv *kv, const char *key, struct kv_entry *ret, struct ea_error *err)
{
    return kv_get(INNER(kv), key, ret, err);
}

static int c_list(struct kv *kv, const char *prefix, struct kv_list *ret, struct ea_error *err)
{
    int r = kv_list(INNER(kv), prefix, ret, err);
    CK(kv)->lists += strstr(prefix, "/queue/") != NULL;
    measure(kv, r, ret);
    return r;
}

static int c_list_page(struct kv *kv, const char *prefix, const char *after, size_t limit,
                       struct kv_list *ret, struct ea_error *err)
{
    int r = kv_list_page(INNER(kv), prefix, after, limit, ret, err);
    CK(kv)->pages++;
    measure(kv, r, ret);
    void (*hook)(void) = CK(kv)->on_page;
    CK(kv)->on_page = NULL;
    if (hook)
        hook();
    return r;
}

static int c_cas(struct kv *kv, const char *key, const char *value, size_t len, int64_t expected,
                 int64_t lease, int64_t *ret_rev, struct kv_entry *ret_current,
                 struct ea_error *err)
{
    return kv_cas(INNER(kv), key, value, len, expected, lease, ret_rev, ret_current, err);
}

static int c_txn(struct kv *kv, const struct kv_cmp *cmps, size_t n_cmps, const struct kv_op *ops,
                 size_t n_ops, int64_t *ret_revision, struct ea_error *err)
{
    return kv_txn(INNER(kv), cmps, n_cmps, ops, n_ops, ret_revision, err);
}

static int c_put(struct kv *kv, const char *key, const char *value, size_t len, int64_t lease,
                 int64_t *ret_rev, struct ea_error *err)
{
    return kv_put(INNER(kv), key, value, len, lease, ret_rev, err);
}

static int c_del(struct kv *kv, const char *key, struct ea_error *err)
{
    return kv_del(INNER(kv), key, err);
}

static const struct kv_ops counting_ops = {
    .name = "counting",
    .get = c_get,
    .list = c_list,
    .list_page = c_list_page,
    .cas = c_cas,
    .txn = c_txn,
    .put = c_put,
    .del = c_del,
};

/* ---- fixture ----------------------------------------------------------------------------- */

static struct counting ck;
static struct kv *KV;
static struct pool P;

static void setup(void)
{
    struct kv_config cfg = {.backend = "memory"};
    struct ea_error err = {0};
    cr_assert_eq(kv_open(&cfg, &ck.inner, &err), 0, "%s", err.msg);
    ck.base.ops = &counting_ops;
    KV = &ck.base;
    cr_assert_eq(pool_init(&P, KV, "/t/", "p", &err), 0, "%s", err.msg);
}

static void teardown(void)
{
    kv_close(ck.inner);
    memset(&ck, 0, sizeof(ck));
}

TestSuite(pool_queue, .init = setup, .fini = teardown, .timeout = 120);

static void submit(const char *id)
{
    static char *cmd[] = {(char *)"true", NULL}, *none[] = {NULL};
    struct runspec s = {.min_nodes = 1, .max_nodes = 2, .command = cmd, .n_command = 1,
                        .args = none, .env = none};
    snprintf(s.run_id, sizeof(s.run_id), "%s", id);
    struct ea_error err = {0};
    cr_assert_eq(pool_submit(&P, &s, &err), 0, "%s", err.msg);
}

/* n entries that are not ours, each of `size` bytes: garbage, a foreign schema, a spec naming
 * another run; one in 100 with a key no run id looks like. */
static void put_bad(size_t n, size_t size)
{
    char *junk = malloc(size + 1);
    memset(junk, 'x', size);
    junk[size] = '\0';
    for (size_t i = 0; i < n; i++) {
        char key[POOL_KEY_MAX], id[64], *v = NULL;
        snprintf(id, sizeof(id), i % 100 == 7 ? "bad %05zu/\xff" : "bad-%05zu", i);
        pool_queue_key(&P, id, key, sizeof(key));
        if (i % 3 == 0)
            v = strdup(junk);
        else if (i % 3 == 1 && asprintf(&v, "{\"schema\":\"other/1\",\"pad\":\"%s\"}", junk) < 0)
            v = NULL;
        else if (i % 3 == 2 &&
                 asprintf(&v, "{\"schema\":\"%s\",\"run\":\"someone-else\",\"command\":[\"id\"],"
                              "\"pad\":\"%s\"}", RUNSPEC_SCHEMA, junk) < 0)
            v = NULL;
        cr_assert_not_null(v);
        cr_assert_eq(kv_put(KV, key, v, strlen(v), 0, NULL, NULL), 0);
        free(v);
    }
    free(junk);
}

struct said {
    size_t n;
};

static void on_bad(void *ctx, const char *key, int64_t rev, const char *why)
{
    (void)key, (void)rev, (void)why;
    ((struct said *)ctx)->n++;
}

static size_t count(const char *what)
{
    char pre[POOL_KEY_MAX];
    snprintf(pre, sizeof(pre), "/t/~pools/p/%s/", what);
    struct kv_list l = {0};
    cr_assert_eq(kv_list(ck.inner, pre, &l, NULL), 0);
    size_t n = l.n;
    kv_list_clear(&l);
    return n;
}

/* ---- tests ------------------------------------------------------------------------------- */

Test(pool_queue, thousands_of_bad_entries_are_moved_aside_once_in_bounded_pages)
{
    enum { N_BAD = 3000, SIZE = 8192 }; /* a queue of ~24 MB */
    submit("zz-oldest"); /* oldest, though last in key order */
    put_bad(N_BAD, SIZE);
    submit("aa-newer");
    struct said said = {0};
    struct pool_hooks h = {.ctx = &said, .node = "n1", .bad = on_bad};
    struct runspec s = {0};
    struct ea_error err = {0};

    cr_assert_eq(pool_advance(&P, NULL, 0, &h, &s, &err), 0, "%s", err.msg);
    cr_assert_str_eq(s.run_id, "zz-oldest", "the oldest run with room, in submission order");
    runspec_clear(&s);
    cr_assert_eq(said.n, N_BAD, "each bad entry said once: %zu", said.n);
    cr_assert_eq(count("queue"), 2, "only the runs stay queued");
    cr_assert_eq(count("refused"), N_BAD, "every bad entry moved aside");
    cr_assert_eq(ck.lists, 0, "the queue is never listed whole");
    /* memory: one page of the queue at a time, whatever the queue holds: 16 entries (a page of
     * the largest specs is 4 MiB), not a number the constant could grow to unseen */
    cr_assert_leq((size_t)POOL_PAGE * RUNSPEC_BYTES_MAX, (size_t)4 << 20);
    size_t page = 16 * (SIZE + 256);
    cr_assert_leq(ck.max_bytes, page, "one read brought %zu bytes (a page is at most %zu)",
                  ck.max_bytes, page);

    /* every later scan (any daemon's) reads the runs only and says nothing again */
    for (int i = 0; i < 20; i++) {
        ck.total = 0;
        struct pool_hooks h2 = {.ctx = &said, .node = i % 2 ? "n2" : "n3", .bad = on_bad};
        cr_assert_eq(pool_advance(&P, NULL, 0, &h2, &s, &err), 0, "%s", err.msg);
        cr_assert_str_eq(s.run_id, "zz-oldest");
        runspec_clear(&s);
        cr_assert_lt(ck.total, 4096, "scan %d read %zu bytes", i, ck.total);
    }
    cr_assert_eq(said.n, N_BAD, "said again: %zu", said.n);
}

Test(pool_queue, a_bad_entry_is_recorded_under_refused_and_a_stale_move_loses)
{
    char key[POOL_KEY_MAX];
    pool_queue_key(&P, "job-7", key, sizeof(key));
    int64_t rev = 0;
    cr_assert_eq(kv_put(KV, key, "{not json", 9, 0, &rev, NULL), 0);
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(KV, key, &e, NULL), 0);
    cr_assert_eq(kv_put(KV, key, "{still not", 10, 0, NULL, NULL), 0); /* changed meanwhile */
    struct ea_error err = {0};
    cr_assert_eq(pool_move_bad(&P, &e, "why", "n1", &err), KV_ECONFLICT);
    kv_entry_clear(&e);
    cr_assert_eq(count("refused"), 0);

    cr_assert_eq(kv_get(KV, key, &e, NULL), 0);
    cr_assert_eq(pool_move_bad(&P, &e, "not JSON", "n1", &err), 0, "%s", err.msg);
    kv_entry_clear(&e);
    cr_assert_eq(kv_get(KV, key, &e, NULL), KV_ENOTFOUND, "gone from the queue");
    char rkey[POOL_KEY_MAX];
    pool_refused_key(&P, "job-7", rkey, sizeof(rkey));
    cr_assert_eq(kv_get(KV, rkey, &e, NULL), 0);
    json_t *j = json_loadb(e.value, e.value_len, 0, NULL);
    cr_assert_str_eq(json_string_value(json_object_get(j, "run")), "job-7");
    cr_assert(strstr(json_string_value(json_object_get(j, "reason")), "not JSON"));
    cr_assert_str_eq(json_string_value(json_object_get(j, "spec")), "{still not");
    cr_assert_str_eq(json_string_value(json_object_get(j, "by")), "n1");
    json_decref(j);
    kv_entry_clear(&e);
}

Test(pool_queue, a_large_bad_entry_is_moved_without_its_bytes)
{
    /* its record must fit one transaction of etcd's default 1.5 MiB, whatever the entry held */
    size_t size = RUNSPEC_BYTES_MAX + 1;
    char *v = malloc(size);
    memset(v, 'y', size);
    char key[POOL_KEY_MAX];
    pool_queue_key(&P, "huge", key, sizeof(key));
    cr_assert_eq(kv_put(KV, key, v, size, 0, NULL, NULL), 0);
    free(v);
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(KV, key, &e, NULL), 0);
    struct ea_error err = {0};
    cr_assert_eq(pool_move_bad(&P, &e, "not JSON", "n1", &err), 0, "%s", err.msg);
    kv_entry_clear(&e);
    char rkey[POOL_KEY_MAX];
    pool_refused_key(&P, "huge", rkey, sizeof(rkey));
    cr_assert_eq(kv_get(KV, rkey, &e, NULL), 0);
    cr_assert_lt(e.value_len, 4096, "a record of %zu bytes", e.value_len);
    json_t *j = json_loadb(e.value, e.value_len, 0, NULL);
    cr_assert_eq(json_integer_value(json_object_get(j, "bytes")), (json_int_t)size);
    json_decref(j);
    kv_entry_clear(&e);
}

Test(pool_queue, scans_on_next_are_spaced_by_the_gap)
{
    cr_assert_eq(pool_rescan_at(0, 5000), 5000, "never scanned: now");
    cr_assert_eq(pool_rescan_at(5000, 5000), 5000 + POOL_RESCAN_GAP_MS);
    cr_assert_eq(pool_rescan_at(5000, 5000 + POOL_RESCAN_GAP_MS - 1), 5000 + POOL_RESCAN_GAP_MS);
    cr_assert_eq(pool_rescan_at(5000, 5000 + POOL_RESCAN_GAP_MS), 5000 + POOL_RESCAN_GAP_MS);
    cr_assert_eq(pool_rescan_at(5000, 99999), 99999);
    /* 1000 writes of `next` within one gap: one scan */
    int64_t last = 10000, scans = 0;
    for (int64_t now = 10001; now < 10000 + POOL_RESCAN_GAP_MS; now++)
        if (pool_rescan_at(last, now) <= now)
            scans++;
    cr_assert_eq(scans, 0);
}

/* A submission while a daemon walks the queue: its entry comes after the page the daemon read,
 * and its `next` (written by the submitter's own advance) names it. */
static void submit_during_the_walk(void)
{
    submit("late");
    struct ea_error err = {0};
    cr_assert_eq(pool_advance(&P, NULL, 0, NULL, NULL, &err), 0, "%s", err.msg);
    char run[128];
    int64_t rev = 0;
    cr_assert_eq(pool_next_get(&P, run, sizeof(run), &rev, &err), 0, "%s", err.msg);
    cr_assert_str_eq(run, "late", "the submitter's advance points next at its run");
}

/* Mutation (scripts/mutants.d/sec_queue.sh): next written over whatever it holds now, not only
 * over what it held when the walk began -> the late submission's next is lost, and idle daemons
 * wait for a run that nobody points them to (test_e2e_signed's key_removed case, 1 in 6-9). */
Test(pool_queue, a_submission_during_a_walk_is_not_overwritten_by_its_choice)
{
    ck.on_page = submit_during_the_walk;
    struct ea_error err = {0};
    struct runspec best = {0};
    cr_assert_eq(pool_advance(&P, NULL, 0, NULL, &best, &err), 0, "%s", err.msg);
    char run[128];
    int64_t rev = 0;
    cr_assert_eq(pool_next_get(&P, run, sizeof(run), &rev, &err), 0, "%s", err.msg);
    cr_assert_str_eq(run, "late", "next lost the run submitted during the walk: '%s'", run);
    cr_assert_str_eq(best.run_id, "late", "the walk again found it: '%s'", best.run_id);
    runspec_clear(&best);
}
