// SPDX-License-Identifier: Apache-2.0
/*
 * KV conformance suite, part 1: reads, writes, CAS, revisions (part 2, conformance_watch.c:
 * leases, watches, concurrency). Written once, run against every backend: the backend is the
 * fixture linked into the binary (see kvtest.h, struct kv_fixture).
 *
 * Adding a backend (e.g. "etcd-gateway"):
 *   1. write a fixture file (here as fixture_<name>.c, or next to the backend's own tests with
 *      tests/kv_conformance on its include path) defining
 *        const struct kv_fixture kv_fixture = {.name = "etcd-gateway", .shared = ..., ...};
 *      its setup() fills ctx->cfg (backend name, endpoints...) and may start the server (or
 *      reuse one: every test keeps to its own key prefix ctx->prefix, so a shared store is fine);
 *      its compact() makes a revision unavailable (etcd: the Compact RPC); `shared` = true only
 *      if a handle opened in a forked child works (else CAS writers race as threads);
 *   2. register the binary next to the others (tests/backends.cmake or the backend's fragment,
 *      which is included after backends.cmake):
 *        ea_add_criterion_test(test_kv_conformance_<name> SOURCES ${EA_KV_CONFORMANCE_SOURCES}
 *                              <fixture file> LIBS ${EA_KV_CONFORMANCE_LIBS} <its libs>)
 * Every test is fixture-agnostic; capabilities differ only through the fixture's fields
 * (shared, bounded_log, min_ttl_ms, late_ms). Run one binary per backend.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "kvtest.h"

struct kvt_ctx kvt_suite_ctx;
struct kv *kvt_suite_kv;

#define C kvt_suite_ctx
#define KV kvt_suite_kv
#define K(name) kvt_key(&C, name)

void kvt_suite_init(void)
{
    kvt_ctx_init(&C, kv_fixture.name);
    if (kv_fixture.setup)
        cr_assert_eq(kv_fixture.setup(&C), 0, "fixture %s: setup failed", kv_fixture.name);
    struct ea_error err = {0};
    int r = kv_open(&C.cfg, &KV, &err);
    cr_assert_eq(r, 0, "open %s: %s (%s)", kv_fixture.name, kv_strerror(r), err.msg);
}

void kvt_suite_fini(void)
{
    if (!C.dir[0])
        return; /* already done (kvt_skip) */
    kv_close(KV);
    KV = NULL;
    if (kv_fixture.teardown)
        kv_fixture.teardown(&C);
    kvt_ctx_fini(&C);
}

TestSuite(kv, .init = kvt_suite_init, .fini = kvt_suite_fini, .timeout = 30);

static struct kv_entry get_ok(const char *key)
{
    struct kv_entry e = {0};
    struct ea_error err = {0};
    int r = kv_get(KV, key, &e, &err);
    cr_assert_eq(r, 0, "get %s: %s (%s)", key, kv_strerror(r), err.msg);
    return e;
}

static void assert_absent(const char *key)
{
    struct kv_entry e = {.mod_revision = 77};
    struct ea_error err = {0};
    int r = kv_get(KV, key, &e, &err);
    cr_assert_eq(r, KV_ENOTFOUND, "get %s: expected not found, got %s", key, kv_strerror(r));
    cr_assert(e.key == NULL && e.mod_revision == 77, "ret touched on failure");
    cr_assert_neq(err.msg[0], '\0', "no error message for a missing key");
}

Test(kv, put_then_get_returns_value_and_revisions)
{
    const char *v1 = "{\"v\":1}";
    int64_t r1 = kvt_put(KV, K("a"), v1);
    struct kv_entry e = get_ok(K("a"));
    cr_assert_str_eq(e.key, K("a"));
    cr_assert_eq(e.value_len, strlen(v1));
    cr_assert_str_eq(e.value, v1);
    cr_assert_eq(e.mod_revision, r1);
    cr_assert_eq(e.create_revision, r1);
    cr_assert_eq(e.lease, 0);
    kv_entry_clear(&e);

    int64_t r2 = kvt_put(KV, K("a"), "two");
    cr_assert_gt(r2, r1);
    e = get_ok(K("a"));
    cr_assert_str_eq(e.value, "two");
    cr_assert_eq(e.value_len, 3);
    cr_assert_eq(e.mod_revision, r2);
    cr_assert_eq(e.create_revision, r1, "an update must keep create_revision");
    kv_entry_clear(&e);
}

/* kv_get_at: the value at the revision or a later one (a backend may serve the latest), never
 * an older one; absent there: KV_ENOTFOUND. */
Test(kv, get_at_is_never_older_than_the_revision)
{
    int64_t r1 = kvt_put(KV, K("at"), "one");
    int64_t r2 = kvt_put(KV, K("at"), "two");
    struct kv_entry e = {0};
    struct ea_error err = {0};
    cr_assert_eq(kv_get_at(KV, K("at"), r2, &e, &err), 0, "%s", err.msg);
    cr_assert_str_eq(e.value, "two");
    cr_assert_eq(e.mod_revision, r2);
    kv_entry_clear(&e);
    cr_assert_eq(kv_get_at(KV, K("at"), r1, &e, &err), 0, "%s", err.msg);
    cr_assert(e.mod_revision == r1 ? strcmp(e.value, "one") == 0
                                   : e.mod_revision == r2 && strcmp(e.value, "two") == 0,
              "as of r1 or later, got '%s' at %lld", e.value, (long long)e.mod_revision);
    cr_assert_eq(e.create_revision, r1);
    kv_entry_clear(&e);
    e.mod_revision = 77;
    cr_assert_eq(kv_get_at(KV, K("at-absent"), r2, &e, &err), KV_ENOTFOUND);
    cr_assert(e.key == NULL && e.mod_revision == 77, "ret touched on failure");
}

Test(kv, get_missing_is_notfound_and_leaves_ret_untouched)
{
    assert_absent(K("never-written"));
}

Test(kv, values_are_binary_safe)
{
    const char bin[] = {'a', '\0', 'b', (char)0xff, (char)0xfe, '"', '\\', '\n'};
    int64_t rev = 0;
    cr_assert_eq(kv_put(KV, K("bin"), bin, sizeof(bin), 0, &rev, NULL), 0);
    cr_assert_eq(kv_put(KV, K("empty"), "", 0, 0, NULL, NULL), 0);
    struct kv_entry e = get_ok(K("bin"));
    cr_assert_eq(e.value_len, sizeof(bin));
    cr_assert_eq(memcmp(e.value, bin, sizeof(bin)), 0, "value bytes changed");
    cr_assert_eq(e.value[sizeof(bin)], '\0', "value not NUL-terminated");
    kv_entry_clear(&e);
    e = get_ok(K("empty"));
    cr_assert_eq(e.value_len, 0);
    cr_assert_str_eq(e.value, "");
    kv_entry_clear(&e);

    /* and through a watch replay */
    int64_t w = 0;
    cr_assert_eq(kv_watch(KV, K("bin"), rev, &w, NULL), 0);
    struct kvt_events acc = {0};
    cr_assert_geq(kvt_wait_events(KV, w, &acc, 1, 3000), 1);
    cr_assert_eq(acc.ev[0].entry.value_len, sizeof(bin));
    cr_assert_eq(memcmp(acc.ev[0].entry.value, bin, sizeof(bin)), 0);
    kvt_events_clear(&acc);
}

Test(kv, list_is_sorted_by_bytes_and_bounded_by_prefix)
{
    const char *keys[] = {"b", "a/2", "\xc3\xa9", "a/10", "c", "ab", "a/1"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        kvt_put(KV, K(keys[i]), keys[i]);

    struct kv_list l = {0};
    struct ea_error err = {0};
    cr_assert_eq(kv_list(KV, K("a/"), &l, &err), 0, "%s", err.msg);
    const char *want_a[] = {"a/1", "a/10", "a/2"};
    cr_assert_eq(l.n, 3, "list a/ returned %zu keys", l.n);
    for (size_t i = 0; i < 3; i++) {
        cr_assert_str_eq(l.entries[i].key, K(want_a[i]));
        cr_assert_str_eq(l.entries[i].value, want_a[i]);
    }
    kv_list_clear(&l);

    cr_assert_eq(kv_list(KV, C.prefix, &l, NULL), 0);
    const char *want_all[] = {"a/1", "a/10", "a/2", "ab", "b", "c", "\xc3\xa9"};
    cr_assert_eq(l.n, 7);
    for (size_t i = 0; i < 7; i++)
        cr_assert_str_eq(l.entries[i].key, K(want_all[i]), "entry %zu", i);
    kv_list_clear(&l);

    l.revision = 77;
    cr_assert_eq(kv_list(KV, K("zzz/"), &l, NULL), 0);
    cr_assert_eq(l.n, 0);
    cr_assert_gt(l.revision, 0, "an empty list still carries the store revision");
    kv_list_clear(&l);
}

/* One page of keys under `pre` after `after`, checked against want[0..n) and `more`. */
static void page_is(const char *pre, const char *after, size_t limit, const char *const *want,
                    size_t n, bool more)
{
    struct kv_list l = {0};
    struct ea_error err = {0};
    int r = kv_list_page(KV, K(pre), after ? K(after) : NULL, limit, &l, &err);
    cr_assert_eq(r, 0, "page of %zu after '%s': %s", limit, after ? after : "", err.msg);
    cr_assert_eq(l.n, n, "page of %zu after '%s': %zu keys, want %zu", limit,
                 after ? after : "", l.n, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_str_eq(l.entries[i].key, K(want[i]), "entry %zu", i);
    cr_assert_eq(l.more, more, "page of %zu after '%s': more %d", limit, after ? after : "",
                 l.more);
    cr_assert_gt(l.revision, 0);
    kv_list_clear(&l);
}

Test(kv, list_page_walks_a_prefix_in_bounded_pages)
{
    cr_assert_not_null(KV->ops->list_page, "the backend reads pages itself (bounded memory)");
    const char *keys[] = {"a/2", "ab", "a/1", "b", "a/10", "a/3"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        kvt_put(KV, K(keys[i]), keys[i]);
    page_is("a/", NULL, 2, (const char *[]){"a/1", "a/10"}, 2, true);
    page_is("a/", "a/10", 2, (const char *[]){"a/2", "a/3"}, 2, false);
    page_is("a/", "a/3", 2, NULL, 0, false);
    page_is("a/", "a/0", 1, (const char *[]){"a/1"}, 1, true); /* after a key that is absent */
    page_is("a/", "a/1", 3, (const char *[]){"a/10", "a/2", "a/3"}, 3, false);
    page_is("", "a/3", 5, (const char *[]){"ab", "b"}, 2, false);

    struct kv_list l = {0};
    struct ea_error err = {0};
    cr_assert_eq(kv_list_page(KV, K("a/"), NULL, 0, &l, &err), KV_EINVAL);
    cr_assert_eq(kv_list_page(KV, K("a/"), NULL, KV_PAGE_MAX + 1, &l, &err), KV_EINVAL);
    cr_assert_eq(kv_list_page(KV, K("a/"), K("b"), 2, &l, &err), KV_EINVAL);
    cr_assert_eq(l.n, 0, "ret untouched on failure");
}

Test(kv, list_revision_is_the_store_revision_to_watch_after)
{
    int64_t ra = kvt_put(KV, K("a"), "1");
    struct kv_list l = {0};
    cr_assert_eq(kv_list(KV, C.prefix, &l, NULL), 0);
    int64_t listed = l.revision;
    kv_list_clear(&l);
    cr_assert_geq(listed, ra, "list revision %lld, before the last write %lld", (long long)listed,
                  (long long)ra);
    int64_t rb = kvt_put(KV, K("b"), "1");
    cr_assert_gt(rb, listed);

    int64_t w = 0;
    cr_assert_eq(kv_watch(KV, C.prefix, listed + 1, &w, NULL), 0);
    struct kvt_events acc = {0};
    kvt_wait_events(KV, w, &acc, 1, 3000);
    kvt_wait_events(KV, w, &acc, 2, 200); /* anything more would be a bug */
    cr_assert_eq(acc.n, 1, "watch from list revision + 1 delivered %zu events", acc.n);
    cr_assert_eq(acc.ev[0].type, KV_EVENT_PUT);
    cr_assert_str_eq(acc.ev[0].entry.key, K("b"));
    cr_assert_eq(acc.ev[0].entry.mod_revision, rb);
    kvt_events_clear(&acc);
}

Test(kv, delete_removes_and_absent_delete_is_ok)
{
    kvt_put(KV, K("a"), "1");
    kvt_put(KV, K("b"), "1");
    struct ea_error err = {0};
    cr_assert_eq(kv_del(KV, K("a"), &err), 0, "%s", err.msg);
    assert_absent(K("a"));
    struct kv_entry e = get_ok(K("b"));
    kv_entry_clear(&e);
    cr_assert_eq(kv_del(KV, K("a"), NULL), 0, "deleting a deleted key");
    cr_assert_eq(kv_del(KV, K("never"), NULL), 0, "deleting a never-written key");
}

Test(kv, revisions_strictly_increase_and_delete_is_a_revision)
{
    int64_t last = 0;
    for (int i = 0; i < 20; i++) {
        char name[16];
        snprintf(name, sizeof(name), "k%d", i % 3);
        int64_t r = kvt_put(KV, K(name), "v");
        cr_assert_gt(r, last, "write %d got revision %lld after %lld", i, (long long)r,
                     (long long)last);
        last = r;
    }
    cr_assert_eq(kv_del(KV, K("k0"), NULL), 0);
    int64_t after = kvt_put(KV, K("k9"), "v");
    cr_assert_gt(after, last + 1, "the delete between must have taken a revision");
}

Test(kv, create_revision_kept_across_updates_and_reset_by_delete)
{
    int64_t r1 = kvt_put(KV, K("k"), "1");
    int64_t r2 = kvt_put(KV, K("k"), "2");
    int64_t r3 = 0;
    cr_assert_eq(kv_cas(KV, K("k"), "3", 1, r2, 0, &r3, NULL, NULL), 0);
    struct kv_entry e = get_ok(K("k"));
    cr_assert_eq(e.create_revision, r1);
    cr_assert_eq(e.mod_revision, r3);
    kv_entry_clear(&e);

    cr_assert_eq(kv_del(KV, K("k"), NULL), 0);
    int64_t r5 = kvt_put(KV, K("k"), "again");
    cr_assert_gt(r5, r3);
    e = get_ok(K("k"));
    cr_assert_eq(e.create_revision, r5, "a recreated key is a new incarnation");
    cr_assert_eq(e.mod_revision, r5);
    kv_entry_clear(&e);
}

Test(kv, cas_with_current_revision_writes)
{
    int64_t r1 = kvt_put(KV, K("k"), "1");
    int64_t r2 = 0;
    struct ea_error err = {0};
    cr_assert_eq(kv_cas(KV, K("k"), "2", 1, r1, 0, &r2, NULL, &err), 0, "%s", err.msg);
    cr_assert_gt(r2, r1);
    cr_assert_eq(kv_cas(KV, K("k"), "3", 1, r2, 0, NULL, NULL, NULL), 0, "NULL ret_mod_revision");
    struct kv_entry e = get_ok(K("k"));
    cr_assert_str_eq(e.value, "3");
    cr_assert_gt(e.mod_revision, r2);
    kv_entry_clear(&e);
}

Test(kv, cas_conflict_returns_current_value_and_revision)
{
    int64_t r1 = kvt_put(KV, K("k"), "one");
    int64_t r2 = kvt_put(KV, K("k"), "two");
    int64_t rev = 77;
    struct kv_entry cur = {0};
    struct ea_error err = {0};
    int r = kv_cas(KV, K("k"), "three", 5, r1, 0, &rev, &cur, &err);
    cr_assert_eq(r, KV_ECONFLICT, "stale CAS: %s", kv_strerror(r));
    cr_assert_eq(rev, 77, "ret_mod_revision touched on conflict");
    cr_assert_str_eq(cur.key, K("k"));
    cr_assert_str_eq(cur.value, "two");
    cr_assert_eq(cur.value_len, 3);
    cr_assert_eq(cur.mod_revision, r2);
    cr_assert_eq(cur.create_revision, r1);
    kv_entry_clear(&cur);
    struct kv_entry e = get_ok(K("k"));
    cr_assert_str_eq(e.value, "two", "a lost CAS must not write");
    kv_entry_clear(&e);
    /* NULL ret_current is allowed */
    cr_assert_eq(kv_cas(KV, K("k"), "x", 1, r1, 0, NULL, NULL, NULL), KV_ECONFLICT);
}

Test(kv, cas_expected_zero_is_create_only)
{
    int64_t r1 = 0;
    cr_assert_eq(kv_cas(KV, K("k"), "first", 5, 0, 0, &r1, NULL, NULL), 0);
    struct kv_entry e = get_ok(K("k"));
    cr_assert_eq(e.create_revision, r1);
    cr_assert_eq(e.mod_revision, r1);
    kv_entry_clear(&e);

    struct kv_entry cur = {0};
    cr_assert_eq(kv_cas(KV, K("k"), "second", 6, 0, 0, NULL, &cur, NULL), KV_ECONFLICT);
    cr_assert_str_eq(cur.value, "first");
    cr_assert_eq(cur.mod_revision, r1);
    kv_entry_clear(&cur);
    e = get_ok(K("k"));
    cr_assert_str_eq(e.value, "first");
    kv_entry_clear(&e);

    /* after a delete the key can be created again */
    cr_assert_eq(kv_del(KV, K("k"), NULL), 0);
    cr_assert_eq(kv_cas(KV, K("k"), "third", 5, 0, 0, NULL, NULL, NULL), 0);
}

Test(kv, cas_on_absent_key_with_nonzero_expected_conflicts_with_empty_current)
{
    struct kv_entry cur = {.mod_revision = 77};
    int r = kv_cas(KV, K("absent"), "x", 1, 5, 0, NULL, &cur, NULL);
    cr_assert_eq(r, KV_ECONFLICT, "got %s", kv_strerror(r));
    cr_assert_str_eq(cur.key, K("absent"));
    cr_assert_not_null(cur.value);
    cr_assert_str_eq(cur.value, "");
    cr_assert_eq(cur.value_len, 0);
    cr_assert_eq(cur.mod_revision, 0);
    cr_assert_eq(cur.create_revision, 0);
    kv_entry_clear(&cur);
    assert_absent(K("absent"));

    /* a deleted key: its old revision no longer matches */
    int64_t r1 = kvt_put(KV, K("gone"), "v");
    cr_assert_eq(kv_del(KV, K("gone"), NULL), 0);
    cr_assert_eq(kv_cas(KV, K("gone"), "y", 1, r1, 0, NULL, &cur, NULL), KV_ECONFLICT);
    cr_assert_eq(cur.mod_revision, 0);
    kv_entry_clear(&cur);
    assert_absent(K("gone"));
}

Test(kv, put_with_unknown_lease_fails)
{
    struct ea_error err = {0};
    int r = kv_put(KV, K("k"), "v", 1, 987654321, NULL, &err);
    cr_assert_eq(r, KV_ENOLEASE, "got %s", kv_strerror(r));
    assert_absent(K("k"));
}

/* ---- transactions (kv_txn) ----
 * Mutations that made these tests fail: kvs_txn ignoring its compares, or writing each op at its
 * own revision (memory, file); etcd_txn / txn_body sending no compares (etcd, etcd-gateway). */

static struct kv_op txn_put(const char *key, const char *value, int64_t lease)
{
    return (struct kv_op){.key = key, .value = value, .len = strlen(value), .lease = lease};
}

static struct kv_op txn_del(const char *key)
{
    return (struct kv_op){.key = key, .del = true};
}

static int64_t txn_ok(const struct kv_cmp *cmps, size_t n_cmps, const struct kv_op *ops,
                      size_t n_ops)
{
    int64_t rev = 0;
    struct ea_error err = {0};
    int r = kv_txn(KV, cmps, n_cmps, ops, n_ops, &rev, &err);
    cr_assert_eq(r, 0, "txn of %zu op(s): %s (%s)", n_ops, kv_strerror(r), err.msg);
    cr_assert_gt(rev, 0, "txn returned revision %lld", (long long)rev);
    return rev;
}

/* kv_txn must fail with `want`, leave *ret_revision untouched and say why. */
static void txn_fails(int want, const struct kv_cmp *cmps, size_t n_cmps, const struct kv_op *ops,
                      size_t n_ops)
{
    int64_t rev = 77;
    struct ea_error err = {0};
    int r = kv_txn(KV, cmps, n_cmps, ops, n_ops, &rev, &err);
    cr_assert_eq(r, want, "txn of %zu op(s): expected %s, got %s (%s)", n_ops, kv_strerror(want),
                 kv_strerror(r), err.msg);
    cr_assert_eq(rev, 77, "ret_revision touched on failure");
    cr_assert_neq(err.msg[0], '\0', "no error message for a failed txn");
}

static void assert_at(const char *key, const char *value, int64_t mod_revision)
{
    struct kv_entry e = get_ok(key);
    cr_assert_str_eq(e.value, value, "%s", key);
    cr_assert_eq(e.mod_revision, mod_revision, "%s: mod_revision %lld, expected %lld", key,
                 (long long)e.mod_revision, (long long)mod_revision);
    kv_entry_clear(&e);
}

Test(kv, txn_applies_every_op_at_one_revision_when_all_compares_hold)
{
    int64_t ra = kvt_put(KV, K("a"), "a0");
    int64_t rb = kvt_put(KV, K("b"), "b0");
    struct kv_cmp cmps[] = {{K("a"), ra}, {K("b"), rb}, {K("c"), 0}};
    struct kv_op ops[] = {txn_put(K("c"), "c1", 0), txn_put(K("a"), "a1", 0), txn_del(K("b")),
                          txn_put(K("d"), "d1", 0), txn_del(K("never"))};
    int64_t rev = txn_ok(cmps, 3, ops, 5);
    cr_assert_gt(rev, rb);
    assert_at(K("a"), "a1", rev);
    assert_at(K("c"), "c1", rev);
    assert_at(K("d"), "d1", rev);
    assert_absent(K("b"));
    assert_absent(K("never"));
    struct kv_entry a = get_ok(K("a")), c = get_ok(K("c"));
    cr_assert_eq(a.create_revision, ra, "an update keeps create_revision");
    cr_assert_eq(c.create_revision, rev, "a new key is created at the txn's revision");
    kv_entry_clear(&a);
    kv_entry_clear(&c);
    /* the next write comes after it; no compares at all is fine */
    struct kv_op again = txn_put(K("a"), "a2", 0);
    cr_assert_gt(txn_ok(NULL, 0, &again, 1), rev);
}

Test(kv, txn_with_one_failing_compare_writes_nothing)
{
    int64_t ra = kvt_put(KV, K("a"), "a0");
    int64_t rb = kvt_put(KV, K("b"), "b0");
    kvt_put(KV, K("b"), "b1"); /* b moved on: rb is stale */
    struct kv_cmp cmps[] = {{K("a"), ra}, {K("b"), rb}};
    struct kv_op ops[] = {txn_put(K("a"), "a1", 0), txn_put(K("new"), "n", 0), txn_del(K("b"))};
    txn_fails(KV_ECONFLICT, cmps, 2, ops, 3);
    assert_at(K("a"), "a0", ra);
    assert_absent(K("new"));
    struct kv_entry b = get_ok(K("b"));
    cr_assert_str_eq(b.value, "b1");
    kv_entry_clear(&b);
}

Test(kv, txn_compare_on_absent_key_both_ways)
{
    struct kv_cmp absent = {K("x"), 0};
    struct kv_op put_x = txn_put(K("x"), "first", 0);
    int64_t r1 = txn_ok(&absent, 1, &put_x, 1);
    assert_at(K("x"), "first", r1);
    /* now present: "must be absent" fails */
    struct kv_op put_x2 = txn_put(K("x"), "second", 0);
    txn_fails(KV_ECONFLICT, &absent, 1, &put_x2, 1);
    assert_at(K("x"), "first", r1);
    /* absent key compared with a non-zero revision fails too */
    struct kv_cmp stale = {K("y"), r1};
    struct kv_op put_y = txn_put(K("y"), "y", 0);
    txn_fails(KV_ECONFLICT, &stale, 1, &put_y, 1);
    assert_absent(K("y"));
    /* and once deleted, x is absent again */
    struct kv_cmp at_r1 = {K("x"), r1};
    struct kv_op del_x = txn_del(K("x"));
    txn_ok(&at_r1, 1, &del_x, 1);
    assert_absent(K("x"));
    txn_ok(&absent, 1, &put_x2, 1);
}

Test(kv, txn_put_with_lease_goes_with_the_lease)
{
    int64_t lease = 0;
    struct ea_error err = {0};
    int64_t ttl = kv_fixture.min_ttl_ms > 10000 ? kv_fixture.min_ttl_ms : 10000;
    cr_assert_eq(kv_lease_grant(KV, ttl, &lease, &err), 0, "%s", err.msg);
    struct kv_op ops[] = {txn_put(K("leased"), "l", lease), txn_put(K("kept"), "k", 0)};
    int64_t rev = txn_ok(NULL, 0, ops, 2);
    struct kv_entry e = get_ok(K("leased"));
    cr_assert_eq(e.lease, lease);
    cr_assert_eq(e.mod_revision, rev);
    kv_entry_clear(&e);
    cr_assert_eq(kv_lease_revoke(KV, lease, &err), 0, "%s", err.msg);
    assert_absent(K("leased"));
    assert_at(K("kept"), "k", rev);
}

Test(kv, txn_with_unknown_lease_is_enolease_and_writes_nothing)
{
    struct kv_cmp cmp = {K("a"), 0};
    struct kv_op ops[] = {txn_put(K("a"), "a", 0), txn_put(K("b"), "b", 987654321)};
    txn_fails(KV_ENOLEASE, &cmp, 1, ops, 2);
    assert_absent(K("a"));
    assert_absent(K("b"));
}

Test(kv, txn_holds_up_to_128_ops)
{
    static char keys[KV_TXN_OPS_MAX + 1][192];
    struct kv_op ops[KV_TXN_OPS_MAX + 1];
    struct kv_cmp cmps[KV_TXN_OPS_MAX + 1];
    for (size_t i = 0; i <= KV_TXN_OPS_MAX; i++) {
        snprintf(keys[i], sizeof(keys[i]), "%sn%03zu", C.prefix, i);
        ops[i] = txn_put(keys[i], keys[i], 0);
        cmps[i] = (struct kv_cmp){keys[i], 0};
    }
    txn_fails(KV_EINVAL, cmps, 1, ops, KV_TXN_OPS_MAX + 1);
    txn_fails(KV_EINVAL, cmps, KV_TXN_OPS_MAX + 1, ops, 1);
    txn_fails(KV_EINVAL, cmps, 1, ops, 0);
    int r = KV->ops->txn(KV, cmps, 1, ops, KV_TXN_OPS_MAX + 1, NULL, NULL);
    cr_assert_eq(r, KV_EINVAL, "backend txn of 129 ops: %s", kv_strerror(r));
    assert_absent(keys[0]);
    int64_t rev = txn_ok(cmps, KV_TXN_OPS_MAX, ops, KV_TXN_OPS_MAX);
    struct kv_list l = {0};
    cr_assert_eq(kv_list(KV, C.prefix, &l, NULL), 0);
    cr_assert_eq(l.n, KV_TXN_OPS_MAX);
    for (size_t i = 0; i < l.n; i++) {
        cr_assert_str_eq(l.entries[i].key, keys[i]);
        cr_assert_str_eq(l.entries[i].value, keys[i]);
        cr_assert_eq(l.entries[i].mod_revision, rev, "%s", keys[i]);
    }
    kv_list_clear(&l);
}

Test(kv, txn_with_a_repeated_key_is_einval_and_writes_nothing)
{
    struct kv_op puts[] = {txn_put(K("a"), "1", 0), txn_put(K("b"), "2", 0),
                           txn_put(K("a"), "3", 0)};
    txn_fails(KV_EINVAL, NULL, 0, puts, 3);
    struct kv_op put_del[] = {txn_put(K("b"), "2", 0), txn_del(K("b"))};
    txn_fails(KV_EINVAL, NULL, 0, put_del, 2);
    /* the backend itself refuses it too (etcd: "duplicate key given in txn request") */
    struct ea_error err = {0};
    int r = KV->ops->txn(KV, NULL, 0, puts, 3, NULL, &err);
    cr_assert_eq(r, KV_EINVAL, "backend txn with a repeated key: %s (%s)", kv_strerror(r), err.msg);
    assert_absent(K("a"));
    assert_absent(K("b"));
    /* a key both compared and written is fine */
    struct kv_cmp cmp = {K("a"), 0};
    txn_ok(&cmp, 1, puts, 2);
}

Test(kv, txn_is_watched_as_its_puts_and_deletes_in_op_order)
{
    int64_t rc = kvt_put(KV, K("c"), "c0");
    int64_t w = 0;
    struct ea_error err = {0};
    cr_assert_eq(kv_watch(KV, C.prefix, rc + 1, &w, &err), 0, "%s", err.msg);
    /* op order is not key order */
    struct kv_op ops[] = {txn_put(K("z"), "z1", 0), txn_put(K("m"), "m1", 0), txn_del(K("c")),
                          txn_del(K("absent")), txn_put(K("a"), "a1", 0)};
    struct kv_cmp cmp = {K("c"), rc};
    int64_t rev = txn_ok(&cmp, 1, ops, 5);
    struct kvt_events acc = {0};
    kvt_wait_events(KV, w, &acc, 4, 3000);
    kvt_wait_events(KV, w, &acc, 5, 200);
    cr_assert_eq(acc.n, 4, "txn of 3 puts and 1 delete seen as %zu events", acc.n);
    const char *want_key[] = {K("z"), K("m"), K("c"), K("a")};
    enum kv_event_type want_type[] = {KV_EVENT_PUT, KV_EVENT_PUT, KV_EVENT_DELETE, KV_EVENT_PUT};
    for (size_t i = 0; i < 4; i++) {
        cr_assert_str_eq(acc.ev[i].entry.key, want_key[i], "event #%zu", i);
        cr_assert_eq(acc.ev[i].type, want_type[i], "event #%zu", i);
        cr_assert_eq(acc.ev[i].entry.mod_revision, rev, "event #%zu at %lld, txn at %lld", i,
                     (long long)acc.ev[i].entry.mod_revision, (long long)rev);
    }
    cr_assert_str_eq(acc.ev[1].entry.value, "m1");
    kvt_events_clear(&acc);
}
