// SPDX-License-Identifier: Apache-2.0
/*
 * The etcd backend's bound on one answer (issue 38): a list larger than KV_RESPONSE_BYTES_MAX is
 * a clear KV_ECORRUPT ("larger than max"), not an allocation without bound nor a retry as if
 * the store were down, and the same keys read with kv_list_page come a bounded page at a time.
 * A real etcd that takes 9 MiB requests holds 9 values of 8 MiB (72 MiB).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_harness.h"
#include "etcd_testutil.h"

static struct etcd_harness h;
static struct kv *kv;

static void setup(void)
{
    struct etcd_harness_opts o = {.members = 1, .max_request_bytes = 9L << 20};
    cr_assert_eq(etcd_harness_start_opts(&h, &o), 0, "etcd did not start");
    struct ea_error err = {0};
    cr_assert_eq(etcd_harness_open(h.endpoints, 0, NULL, NULL, &kv, &err), 0, "%s", err.msg);
}

static void teardown(void)
{
    kv_close(kv);
    etcd_harness_stop(&h);
}

TestSuite(etcd_big, .init = setup, .fini = teardown, .timeout = 120);

Test(etcd_big, a_list_over_the_receive_bound_is_a_clear_error_and_pages_read_it)
{
    enum { N = 9 };
    size_t size = (size_t)8 << 20;
    cr_assert_gt((size_t)N * size, KV_RESPONSE_BYTES_MAX, "the keys outgrow one answer");
    char *v = malloc(size);
    cr_assert_not_null(v);
    memset(v, 'q', size);
    struct ea_error err = {0};
    for (int i = 0; i < N; i++) {
        char key[32];
        snprintf(key, sizeof(key), "/big/%02d", i);
        cr_assert_eq(kv_put(kv, key, v, size, 0, NULL, &err), 0, "%s", err.msg);
    }
    free(v);

    struct kv_list l = {0};
    int r = kv_list(kv, "/big/", &l, &err);
    cr_assert_eq(r, KV_ECORRUPT, "list of %d x 8 MiB: %s (%s)", N, kv_strerror(r), err.msg);
    cr_assert(strstr(err.msg, "larger than max"), "%s", err.msg);
    cr_assert_eq(l.n, 0);

    size_t seen = 0;
    char after[32] = "";
    for (int page = 0; page < N; page++) {
        ea_error_clear(&err);
        r = kv_list_page(kv, "/big/", after[0] ? after : NULL, 4, &l, &err);
        cr_assert_eq(r, 0, "page %d: %s", page, err.msg);
        seen += l.n;
        bool more = l.more;
        if (l.n)
            snprintf(after, sizeof(after), "%s", l.entries[l.n - 1].key);
        kv_list_clear(&l);
        if (!more)
            break;
    }
    cr_assert_eq(seen, N, "pages read %zu keys", seen);
}
