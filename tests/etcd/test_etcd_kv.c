// SPDX-License-Identifier: Apache-2.0
/*
 * The kv.h contract of the etcd backend against a real single-member etcd: get/get_at/list/put/del,
 * CAS (conflict returns the current entry, create-only), leases (grant rounding, keepalive,
 * revoke, put on a dead lease). Watches are in test_etcd_watch.c, faults in test_etcd_fault.c.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "etcd.h"
#include "etcd_harness.h"
#include "etcd_testutil.h"

static struct etcd_harness h;
static struct kv *kv;

static void setup(void)
{
    cr_assert_eq(etcd_harness_start(&h, 1), 0, "etcd did not start");
    struct ea_error err = {0};
    cr_assert_eq(etcd_harness_open(h.endpoints, 0, NULL, NULL, &kv, &err), 0, "%s", err.msg);
}

static void teardown(void)
{
    kv_close(kv);
    etcd_harness_stop(&h);
}

TestSuite(etcd_kv, .init = setup, .fini = teardown, .timeout = 30);

Test(etcd_kv, put_get_and_revisions)
{
    struct ea_error err = {0};
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/t/a", &e, &err), KV_ENOTFOUND);
    cr_assert(strstr(err.msg, "/t/a"), "message names the key: %s", err.msg);

    int64_t r1 = etcdt_put(kv, "/t/a", "one", 0);
    cr_assert_eq(kv_get(kv, "/t/a", &e, &err), 0, "%s", err.msg);
    cr_assert_str_eq(e.key, "/t/a");
    cr_assert_str_eq(e.value, "one");
    cr_assert_eq(e.value_len, 3);
    cr_assert_eq(e.mod_revision, r1);
    cr_assert_eq(e.create_revision, r1);
    cr_assert_eq(e.lease, 0);
    kv_entry_clear(&e);

    int64_t r2 = etcdt_put(kv, "/t/a", "two", 0);
    cr_assert_gt(r2, r1);
    cr_assert_eq(kv_get(kv, "/t/a", &e, &err), 0, "%s", err.msg);
    cr_assert_str_eq(e.value, "two");
    cr_assert_eq(e.mod_revision, r2);
    cr_assert_eq(e.create_revision, r1, "create_revision stays with the incarnation");
    kv_entry_clear(&e);

    /* ret_mod_revision may be NULL */
    cr_assert_eq(kv_put(kv, "/t/b", "x", 1, 0, NULL, &err), 0, "%s", err.msg);
}

Test(etcd_kv, binary_and_empty_values)
{
    struct ea_error err = {0};
    const char bin[] = {'a', 0, 'b', (char)0xff, 0};
    cr_assert_eq(kv_put(kv, "/t/bin", bin, sizeof(bin), 0, NULL, &err), 0, "%s", err.msg);
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/t/bin", &e, &err), 0, "%s", err.msg);
    cr_assert_eq(e.value_len, sizeof(bin));
    cr_assert_eq(memcmp(e.value, bin, sizeof(bin)), 0);
    cr_assert_eq(e.value[e.value_len], '\0', "extra NUL after the value");
    kv_entry_clear(&e);

    cr_assert_eq(kv_put(kv, "/t/empty", "", 0, 0, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_get(kv, "/t/empty", &e, &err), 0, "%s", err.msg);
    cr_assert_eq(e.value_len, 0);
    cr_assert_str_eq(e.value, "");
    kv_entry_clear(&e);
}

Test(etcd_kv, list_prefix_sorted_with_revision)
{
    etcdt_put(kv, "/l/b", "2", 0);
    etcdt_put(kv, "/l/a", "1", 0);
    etcdt_put(kv, "/l/a/x", "3", 0);
    int64_t last = etcdt_put(kv, "/m/other", "4", 0);
    etcdt_put(kv, "/l", "not under /l/", 0);

    struct ea_error err = {0};
    struct kv_list l = {0};
    cr_assert_eq(kv_list(kv, "/l/", &l, &err), 0, "%s", err.msg);
    cr_assert_eq(l.n, 3);
    cr_assert_str_eq(l.entries[0].key, "/l/a");
    cr_assert_str_eq(l.entries[1].key, "/l/a/x");
    cr_assert_str_eq(l.entries[2].key, "/l/b");
    cr_assert_str_eq(l.entries[2].value, "2");
    cr_assert_geq(l.revision, last + 1, "store revision at list time");
    kv_list_clear(&l);

    cr_assert_eq(kv_list(kv, "", &l, &err), 0, "%s", err.msg);
    cr_assert_eq(l.n, 5, "\"\" lists everything");
    kv_list_clear(&l);

    cr_assert_eq(kv_list(kv, "/nothing/", &l, &err), 0, "%s", err.msg);
    cr_assert_eq(l.n, 0);
    cr_assert_gt(l.revision, 0, "an empty list still carries the revision");
    kv_list_clear(&l);
}

/* kv_get_at: a serializable read pinned at a revision, so a node that saw a commit on its watch
 * reads what that commit saw without a ReadIndex round; what etcd cannot serve falls back. */
Test(etcd_kv, get_at_reads_as_of_the_revision_and_falls_back)
{
    struct ea_error err = {0};
    struct kv_entry e = {0};
    int64_t r1 = etcdt_put(kv, "/at/k", "one", 0);
    int64_t r2 = etcdt_put(kv, "/at/k", "two", 0);
    cr_assert_eq(kv_get_at(kv, "/at/k", r1, &e, &err), 0, "%s", err.msg);
    cr_assert_str_eq(e.value, "one", "the value as of r1, not the latest");
    cr_assert_eq(e.mod_revision, r1);
    cr_assert_eq(e.create_revision, r1);
    kv_entry_clear(&e);
    cr_assert_eq(kv_get_at(kv, "/at/absent", r2, &e, &err), KV_ENOTFOUND);
    cr_assert_null(e.key, "ret untouched");

    /* a revision the member does not have yet: the latest, not an error */
    cr_assert_eq(kv_get_at(kv, "/at/k", r2 + 1000, &e, &err), 0, "%s", err.msg);
    cr_assert_str_eq(e.value, "two");
    cr_assert_eq(e.mod_revision, r2);
    kv_entry_clear(&e);

    /* a compacted one: the same */
    int64_t r3 = etcdt_put(kv, "/at/k", "three", 0);
    cr_assert_eq(etcd_compact(kv, r3, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_get_at(kv, "/at/k", r1, &e, &err), 0, "%s", err.msg);
    cr_assert_str_eq(e.value, "three");
    cr_assert_eq(e.mod_revision, r3);
    kv_entry_clear(&e);
}

Test(etcd_kv, delete_present_and_absent)
{
    struct ea_error err = {0};
    etcdt_put(kv, "/d/k", "v", 0);
    cr_assert_eq(kv_del(kv, "/d/k", &err), 0, "%s", err.msg);
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/d/k", &e, &err), KV_ENOTFOUND);
    cr_assert_eq(kv_del(kv, "/d/k", &err), 0, "deleting an absent key is not an error");
}

Test(etcd_kv, cas_create_only)
{
    struct ea_error err = {0};
    int64_t rev = 0;
    cr_assert_eq(kv_cas(kv, "/c/lock", "me", 2, 0, 0, &rev, NULL, &err), 0, "%s", err.msg);
    cr_assert_gt(rev, 0);

    struct kv_entry cur = {0};
    int64_t untouched = -7;
    cr_assert_eq(kv_cas(kv, "/c/lock", "you", 3, 0, 0, &untouched, &cur, &err), KV_ECONFLICT);
    cr_assert_eq(untouched, -7, "ret_mod_revision untouched on failure");
    cr_assert_str_eq(cur.key, "/c/lock");
    cr_assert_str_eq(cur.value, "me", "conflict returns the winner's value");
    cr_assert_eq(cur.mod_revision, rev);
    cr_assert_eq(cur.create_revision, rev);
    kv_entry_clear(&cur);
}

Test(etcd_kv, cas_fencing_on_mod_revision)
{
    struct ea_error err = {0};
    int64_t r1 = etcdt_put(kv, "/c/state", "v1", 0);
    int64_t r2 = etcdt_put(kv, "/c/state", "v2", 0);

    struct kv_entry cur = {0};
    cr_assert_eq(kv_cas(kv, "/c/state", "stale", 5, r1, 0, NULL, &cur, &err), KV_ECONFLICT);
    cr_assert_str_eq(cur.value, "v2");
    cr_assert_eq(cur.mod_revision, r2);
    cr_assert_eq(cur.create_revision, r1);
    kv_entry_clear(&cur);

    int64_t r3 = 0;
    cr_assert_eq(kv_cas(kv, "/c/state", "v3", 2, r2, 0, &r3, &cur, &err), 0, "%s", err.msg);
    cr_assert_gt(r3, r2);
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/c/state", &e, &err), 0, "%s", err.msg);
    cr_assert_str_eq(e.value, "v3");
    cr_assert_eq(e.mod_revision, r3);
    kv_entry_clear(&e);

    /* Same stale revision twice: the second loses. */
    cr_assert_eq(kv_cas(kv, "/c/state", "v4", 2, r2, 0, NULL, NULL, &err), KV_ECONFLICT);

    /* Expected a revision, key absent: conflict with an empty entry. */
    cr_assert_eq(kv_cas(kv, "/c/absent", "x", 1, 5, 0, NULL, &cur, &err), KV_ECONFLICT);
    cr_assert_str_eq(cur.key, "/c/absent");
    cr_assert_str_eq(cur.value, "");
    cr_assert_eq(cur.mod_revision, 0);
    cr_assert_eq(cur.create_revision, 0);
    kv_entry_clear(&cur);

    cr_assert_eq(kv_cas(kv, "/c/state", "x", 1, -1, 0, NULL, NULL, &err), KV_EINVAL);
}

Test(etcd_kv, lease_grant_keepalive_revoke)
{
    struct ea_error err = {0};
    int64_t lease = 0;
    cr_assert_eq(kv_lease_grant(kv, 5000, &lease, &err), 0, "%s", err.msg);
    cr_assert_neq(lease, 0);

    int64_t rev = 0;
    cr_assert_eq(kv_put(kv, "/lease/k", "v", 1, lease, &rev, &err), 0, "%s", err.msg);
    int64_t rev2 = 0;
    cr_assert_eq(kv_cas(kv, "/lease/c", "v", 1, 0, lease, &rev2, NULL, &err), 0, "%s", err.msg);
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/lease/k", &e, &err), 0, "%s", err.msg);
    cr_assert_eq(e.lease, lease);
    kv_entry_clear(&e);
    cr_assert_eq(kv_get(kv, "/lease/c", &e, &err), 0, "%s", err.msg);
    cr_assert_eq(e.lease, lease, "cas attaches the lease too");
    kv_entry_clear(&e);

    int64_t ttl = 0;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(kv_lease_keepalive(kv, lease, &ttl, &err), 0, "%s", err.msg);
        cr_assert_eq(ttl, 5000);
    }
    cr_assert_eq(kv_lease_keepalive(kv, lease, NULL, &err), 0, "%s", err.msg);

    cr_assert_eq(kv_lease_revoke(kv, lease, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_get(kv, "/lease/k", &e, &err), KV_ENOTFOUND, "revoke deletes attached keys");
    cr_assert_eq(kv_get(kv, "/lease/c", &e, &err), KV_ENOTFOUND);

    ttl = -3;
    cr_assert_eq(kv_lease_keepalive(kv, lease, &ttl, &err), KV_ENOLEASE);
    cr_assert_eq(ttl, -3);
    cr_assert_eq(kv_lease_revoke(kv, lease, &err), KV_ENOLEASE);
    cr_assert_eq(kv_put(kv, "/lease/k", "v", 1, lease, NULL, &err), KV_ENOLEASE);
    cr_assert_eq(kv_cas(kv, "/lease/k", "v", 1, 0, lease, NULL, NULL, &err), KV_ENOLEASE);
    cr_assert_eq(kv_lease_keepalive(kv, 0, NULL, &err), KV_ENOLEASE);
}

Test(etcd_kv, lease_ttl_rounds_up_to_seconds)
{
    struct ea_error err = {0};
    int64_t lease = 0, ttl = 0;
    cr_assert_eq(kv_lease_grant(kv, 1500, &lease, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_lease_keepalive(kv, lease, &ttl, &err), 0, "%s", err.msg);
    cr_assert_eq(ttl, 2000);
    cr_assert_eq(kv_lease_grant(kv, 1, &lease, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_lease_keepalive(kv, lease, &ttl, &err), 0, "%s", err.msg);
    cr_assert_eq(ttl, 1000);
    cr_assert_eq(kv_lease_grant(kv, 0, &lease, &err), KV_EINVAL);
}

Test(etcd_kv, many_keys_in_one_list)
{
    struct ea_error err = {0};
    char key[32], value[64];
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof(key), "/many/%03d", i);
        snprintf(value, sizeof(value), "{\"i\":%d}", i);
        cr_assert_eq(kv_put(kv, key, value, strlen(value), 0, NULL, &err), 0, "%s", err.msg);
    }
    struct kv_list l = {0};
    cr_assert_eq(kv_list(kv, "/many/", &l, &err), 0, "%s", err.msg);
    cr_assert_eq(l.n, 200);
    for (size_t i = 0; i < l.n; i++) {
        snprintf(key, sizeof(key), "/many/%03zu", i);
        cr_assert_str_eq(l.entries[i].key, key);
    }
    kv_list_clear(&l);
}
