// SPDX-License-Identifier: Apache-2.0
/*
 * The etcd-gateway backend when things go wrong: bad configuration (KV_EINVAL naming the
 * culprit); an endpoint that refuses (KV_ECONN naming it, at once) or never answers (KV_ECONN
 * within the request timeout, never a hang); writes fail over to the next endpoint only when
 * they certainly never reached a server; answers no etcd sends — garbage, wrong types, bad
 * base64, broken watch streams — are KV_ECORRUPT (or KV_ECONN/KV_EINVAL for non-etcd HTTP),
 * never a crash.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ea_time.h"
#include "etcd_gateway.h"
#include "etcd_harness.h"
#include "gw_test.h"

static struct etcd_harness h;
static struct kv *kv;
static struct kv_event *evs;
static size_t nevs;
static struct gwt_fake fake = {.fd = -1};
static int hole = -1;

static void teardown(void)
{
    kv_events_free(evs, nevs);
    kv_close(kv);
    gwt_fake_stop(&fake);
    if (hole >= 0)
        close(hole);
    etcd_harness_stop(&h);
}

TestSuite(gateway_fault, .fini = teardown, .timeout = 40);

static int open_rc(const char *endpoints, struct ea_error *err)
{
    struct kv *k = NULL;
    int rc = gwt_open(NULL, endpoints, 0, NULL, NULL, &k, err);
    kv_close(k);
    return rc;
}

Test(gateway_fault, bad_configuration)
{
    struct ea_error err = {0};
    cr_assert_eq(open_rc("127.0.0.1:2379", &err), KV_EINVAL);
    cr_assert(strstr(err.msg, "gRPC"), "points at the etcd backend: %s", err.msg);
    cr_assert_eq(open_rc("http://127.0.0.1:2379,ftp://x:2379", &err), KV_EINVAL);
    cr_assert(strstr(err.msg, "ftp://x:2379"), "%s", err.msg);
    cr_assert_eq(open_rc("", &err), KV_EINVAL);
    cr_assert_eq(open_rc(NULL, &err), KV_EINVAL);
    cr_assert_eq(open_rc("http://127.0.0.1:2379,,http://127.0.0.1:2380", &err), KV_EINVAL);
    cr_assert_eq(open_rc("http://127.0.0.1:abc", &err), KV_EINVAL);
    cr_assert(strstr(err.msg, "127.0.0.1:abc"), "%s", err.msg);
    cr_assert_eq(open_rc("http://127.0.0.1:70000", &err), KV_EINVAL);
    cr_assert_eq(open_rc("http://::1:2379", &err), KV_EINVAL);
    cr_assert_eq(open_rc("http://", &err), KV_EINVAL);
    cr_assert_eq(open_rc("http://:2379", &err), KV_EINVAL);
    cr_assert_eq(open_rc("http://user@host:2379", &err), KV_EINVAL);
    cr_assert_eq(open_rc(" http://127.0.0.1:2379/ , https://[::1]:2379,http://localhost,"
                         "https://proxy.example:8443/etcd",
                         &err),
                 0, "%s", err.msg);

    struct kv *k = (struct kv *)0x1;
    struct kv_config cfg = {.backend = "etcd-gateway",
                            .endpoints = "https://127.0.0.1:2379",
                            .cert = "/nonexistent/cert.pem"};
    cr_assert_eq(kv_open(&cfg, &k, &err), KV_EINVAL);
    cr_assert(strstr(err.msg, "key"), "cert without key: %s", err.msg);
    cr_assert_eq(k, (struct kv *)0x1, "ret_kv untouched on failure");
    cfg = (struct kv_config){.backend = "etcd-gateway",
                             .endpoints = "https://127.0.0.1:2379",
                             .cacert = "/nonexistent/ca.pem"};
    cr_assert_eq(kv_open(&cfg, &k, &err), KV_EINVAL);
    cr_assert(strstr(err.msg, "/nonexistent/ca.pem"), "%s", err.msg);
    cfg.endpoints = "http://127.0.0.1:2379";
    cfg.cacert = "/dev/null";
    cr_assert_eq(kv_open(&cfg, &k, &err), KV_EINVAL, "TLS files with a plain http endpoint");
    cr_assert(strstr(err.msg, "https"), "%s", err.msg);
    cfg = (struct kv_config){
        .backend = "etcd-gateway", .endpoints = "http://127.0.0.1:2379", .password = "pw"};
    cr_assert_eq(kv_open(&cfg, &k, &err), KV_EINVAL);
    cr_assert_eq(k, (struct kv *)0x1);
    kv_close(NULL);
}

Test(gateway_fault, refused_endpoint_is_econn_naming_it_at_once)
{
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", gwt_dead_port());
    struct ea_error err = {0};
    cr_assert_eq(gwt_open(NULL, ep, 2000, NULL, NULL, &kv, &err), 0, "open needs no network");

    int64_t t0 = ea_now_ms();
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/k", &e, &err), KV_ECONN);
    cr_assert(strstr(err.msg, ep), "message names the endpoint: %s", err.msg);
    cr_assert_lt(ea_now_ms() - t0, 1000, "refused is immediate");

    struct kv_list l = {0};
    int64_t id = 0, lease = 0;
    cr_assert_eq(kv_list(kv, "/", &l, &err), KV_ECONN);
    cr_assert_eq(kv_put(kv, "/k", "v", 1, 0, NULL, &err), KV_ECONN);
    cr_assert_eq(kv_cas(kv, "/k", "v", 1, 0, 0, NULL, NULL, &err), KV_ECONN);
    cr_assert_eq(kv_del(kv, "/k", &err), KV_ECONN);
    cr_assert_eq(kv_lease_grant(kv, 1000, &lease, &err), KV_ECONN);
    cr_assert_eq(kv_lease_keepalive(kv, 42, NULL, &err), KV_ECONN);
    cr_assert(strstr(err.msg, ep), "%s", err.msg);
    cr_assert_eq(kv_lease_revoke(kv, 42, &err), KV_ECONN);
    cr_assert_eq(kv_watch(kv, "/", 0, &id, &err), KV_ECONN);
    cr_assert(strstr(err.msg, ep), "%s", err.msg);
    cr_assert_eq(etcd_gateway_compact(kv, 5, &err), KV_ECONN);
    cr_assert_lt(ea_now_ms() - t0, 2000, "every request failed at once");
}

Test(gateway_fault, silent_endpoint_is_econn_within_the_timeout)
{
    int port = 0;
    hole = gwt_blackhole(&port);
    cr_assert_geq(hole, 0);
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", port);
    struct ea_error err = {0};
    cr_assert_eq(gwt_open(NULL, ep, 400, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    int64_t t0 = ea_now_ms();
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/k", &e, &err), KV_ECONN);
    int64_t took = ea_now_ms() - t0;
    cr_assert(strstr(err.msg, ep) && strstr(err.msg, "400 ms"), "%s", err.msg);
    cr_assert(took >= 350 && took < 1500, "took %lld ms for a 400 ms timeout", (long long)took);
    int64_t id = 0;
    t0 = ea_now_ms();
    cr_assert_eq(kv_watch(kv, "/", 0, &id, &err), KV_ECONN, "watch not created in time");
    cr_assert(strstr(err.msg, ep), "%s", err.msg);
    cr_assert_lt(ea_now_ms() - t0, 1500);
    cr_assert_eq(kv_put(kv, "/k", "v", 1, 0, NULL, &err), KV_ECONN);
}

Test(gateway_fault, writes_fail_over_only_when_never_sent)
{
    cr_assert_eq(etcd_harness_start(&h, 1), 0);
    char real[64], eps[256];
    gwt_url(&h, 0, real, sizeof(real));
    int port = 0;
    hole = gwt_blackhole(&port);
    cr_assert_geq(hole, 0);
    struct ea_error err = {0};

    /* Refused first: the write certainly never left, the next member takes it. */
    snprintf(eps, sizeof(eps), "http://127.0.0.1:%d,%s", gwt_dead_port(), real);
    cr_assert_eq(gwt_open(NULL, eps, 1000, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    int64_t rev = 0;
    cr_assert_eq(kv_put(kv, "/fo/a", "1", 1, 0, &rev, &err), 0, "refused → next: %s", err.msg);
    cr_assert_eq(kv_cas(kv, "/fo/a", "2", 1, rev, 0, NULL, NULL, &err), 0, "%s", err.msg);
    kv_close(kv);
    kv = NULL;

    /* Silent first: the write may have been applied, so it is not sent again elsewhere; the
     * caller gets KV_ECONN and its retry goes to the next member. */
    snprintf(eps, sizeof(eps), "http://127.0.0.1:%d,%s", port, real);
    cr_assert_eq(gwt_open(NULL, eps, 500, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_put(kv, "/fo/b", "1", 1, 0, NULL, &err), KV_ECONN);
    cr_assert(strstr(err.msg, "no answer within"), "%s", err.msg);
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/fo/b", &e, &err), KV_ENOTFOUND, "not written: %s", err.msg);
    cr_assert_eq(kv_put(kv, "/fo/b", "1", 1, 0, NULL, &err), 0, "%s", err.msg);
    kv_close(kv);
    kv = NULL;

    /* A read that timed out is not retried elsewhere within the same (spent) deadline, but
     * the next call starts on the next member. */
    cr_assert_eq(gwt_open(NULL, eps, 500, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    int rc = kv_get(kv, "/fo/b", &e, &err);
    cr_assert(rc == 0 || rc == KV_ECONN, "%s", err.msg);
    if (rc == 0)
        kv_entry_clear(&e);
    cr_assert_eq(kv_get(kv, "/fo/b", &e, &err), 0, "%s", err.msg);
    kv_entry_clear(&e);
}

#define OK_HDR "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"

static const char *answer(const char *body)
{
    static char bufs[16][512];
    static int next;
    char *b = bufs[next++ % 16];
    snprintf(b, sizeof(bufs[0]), OK_HDR "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
    return b;
}

Test(gateway_fault, malformed_answers_are_ecorrupt_not_crashes)
{
    const char *const answers[] = {
        answer("not json"),
        answer("[1,2]"),
        answer("{\"kvs\":\"x\"}"),
        answer("{\"kvs\":[{\"key\":\"!!!notbase64\",\"mod_revision\":\"1\"}]}"),
        answer("{\"kvs\":[{\"key\":\"L2s=\",\"mod_revision\":\"12abc\"}]}"),
        answer("{\"kvs\":[{\"key\":\"L290aGVy\",\"value\":\"dg==\"}]}"),
        answer("{\"kvs\":[{\"key\":\"L2s=\",\"value\":\"dg=\"}]}"),
        answer("{\"kvs\":[{\"key\":\"L2s=\",\"value\":7}]}"),
        answer("{\"kvs\":[{\"key\":\"AGs=\"}]}"),
        answer("{}"),
        answer("{\"header\":{\"revision\":\"5\"}}"),
        answer("{\"header\":{\"revision\":\"5\"},\"ID\":{\"x\":1}}"),
        answer("{\"result\":[]}"),
        answer("{\"header\":{\"revision\":\"5\"},\"kvs\":[{\"key\":\"L2s=\"},{\"key\":5}]}"),
        "HTTP/1.1 404 Not Found\r\nContent-Length: 18\r\nConnection: close\r\n\r\n404 page not "
        "found",
        "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 5\r\nConnection: close\r\n\r\nnope!",
        answer("{\"header\":{\"revision\":\"7\"},\"kvs\":[{\"key\":\"L2s=\",\"value\":\"AP8=\","
               "\"mod_revision\":\"7\",\"create_revision\":7}]}"),
    };
    size_t n = sizeof(answers) / sizeof(answers[0]);
    cr_assert_eq(gwt_fake_start(&fake, answers, n), 0);
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", fake.port);
    struct ea_error err = {0};
    cr_assert_eq(gwt_open(NULL, ep, 2000, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    struct kv_entry e = {.mod_revision = 77};
    struct kv_list l = {0};
    int64_t rev = 77;
    const char *what[] = {"not json",    "not an object",      "kvs not an array",
                          "bad base64",  "bad int64",          "another key",
                          "bad padding", "value not a string", "NUL in key"};
    for (size_t i = 0; i < 9; i++) {
        cr_assert_eq(kv_get(kv, "/k", &e, &err), KV_ECORRUPT, "%s: %s", what[i], err.msg);
        cr_assert_eq(e.mod_revision, 77, "ret touched on failure");
    }
    cr_assert_eq(kv_put(kv, "/k", "v", 1, 0, &rev, &err), KV_ECORRUPT, "no revision");
    cr_assert_eq(kv_cas(kv, "/k", "v", 1, 3, 0, &rev, NULL, &err), KV_ECORRUPT,
                 "txn neither succeeded nor carried the current value: %s", err.msg);
    cr_assert_eq(rev, 77);
    cr_assert_eq(kv_lease_grant(kv, 1000, &rev, &err), KV_ECORRUPT, "%s", err.msg);
    cr_assert_eq(kv_lease_keepalive(kv, 1, NULL, &err), KV_ECORRUPT, "%s", err.msg);
    l.revision = 77;
    cr_assert_eq(kv_list(kv, "/", &l, &err), KV_ECORRUPT, "%s", err.msg);
    cr_assert_eq(l.revision, 77);
    cr_assert_eq(kv_get(kv, "/k", &e, &err), KV_EINVAL, "404: %s", err.msg);
    cr_assert(strstr(err.msg, "gateway"), "%s", err.msg);
    cr_assert_eq(kv_get(kv, "/k", &e, &err), KV_ECONN, "502 from a proxy: %s", err.msg);
    /* and a good answer parses, binary value and integer revisions included */
    cr_assert_eq(kv_get(kv, "/k", &e, &err), 0, "%s", err.msg);
    cr_assert_eq(e.value_len, 2);
    cr_assert(e.value[0] == 0 && (unsigned char)e.value[1] == 0xff);
    cr_assert_eq(e.create_revision, 7);
    kv_entry_clear(&e);
}

#define STREAM_HDR "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
/* Promises more than it sends: the close is a cut (curl: partial file), as when etcd dies. */
#define CUT_HDR                                                                                    \
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
#define CREATED "{\"result\":{\"header\":{\"revision\":\"3\"},\"created\":true}}\n"

Test(gateway_fault, broken_watch_streams_end_with_an_error_event)
{
    const char *const answers[] = {
        STREAM_HDR CREATED "garbage\n",
        STREAM_HDR CREATED "{\"result\":{\"events\":[{\"kv\":{\"key\":\"???\"}}]}}\n",
        STREAM_HDR CREATED
        "{\"result\":{\"events\":[{\"type\":\"BOGUS\",\"kv\":{\"key\":\"L2s=\"}}]}}\n",
        STREAM_HDR CREATED "{\"error\":{\"grpc_code\":14,\"message\":\"transport is closing\"}}\n",
        CUT_HDR CREATED
        "{\"result\":{\"events\":[{\"kv\":{\"key\":\"L3cvYQ==\",\"mod_revision\""
        ":\"4\",\"value\":\"eA==\"}},{\"type\":\"DELETE\",\"kv\":{\"key\":\"L3cvYQ==\","
        "\"mod_revision\":\"5\"}}]}}\n{\"result\":{\"header\":{\"revision\":\"5\"}}}\n{\"res",
        STREAM_HDR
        "{\"result\":{\"created\":true,\"canceled\":true,\"cancel_reason\":\"etcdserver: "
        "permission denied\"}}\n",
        ("HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\n\r\n{\"error\":\"bad\","
         "\"message\":\"invalid character\",\"code\":2}"), /* one answer (clang asks) */
    };
    cr_assert_eq(gwt_fake_start(&fake, answers, sizeof(answers) / sizeof(answers[0])), 0);
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", fake.port);
    struct ea_error err = {0};
    cr_assert_eq(gwt_open(NULL, ep, 2000, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    const int want[] = {KV_ECORRUPT, KV_ECORRUPT, KV_ECORRUPT, KV_ECONN};
    for (size_t i = 0; i < 4; i++) {
        int64_t id = 0;
        cr_assert_eq(kv_watch(kv, "/w/", 0, &id, &err), 0, "stream %zu: %s", i, err.msg);
        long at = etcd_harness_wait_type(kv, &evs, &nevs, id, KV_EVENT_ERROR, 3000);
        cr_assert_geq(at, 0, "stream %zu: no error event", i);
        cr_assert_eq(evs[at].error, want[i], "stream %zu: %s", i, evs[at].message);
    }
    /* Two good events, a progress notification, then the stream is cut mid-message: the
     * events arrive, the fragment is not parsed, the cut is KV_ECONN. */
    int64_t id = 0;
    cr_assert_eq(kv_watch(kv, "/w/", 0, &id, &err), 0, "%s", err.msg);
    long at = etcd_harness_wait_type(kv, &evs, &nevs, id, KV_EVENT_ERROR, 3000);
    cr_assert_geq(at, 2);
    cr_assert_eq(evs[at].error, KV_ECONN, "%s", evs[at].message);
    cr_assert_eq(evs[at - 2].type, KV_EVENT_PUT);
    cr_assert_str_eq(evs[at - 2].entry.key, "/w/a");
    cr_assert_str_eq(evs[at - 2].entry.value, "x");
    cr_assert_eq(evs[at - 1].type, KV_EVENT_DELETE);
    cr_assert_eq(evs[at - 1].entry.mod_revision, 5);
    cr_assert_str_eq(evs[at - 1].entry.value, "");
    /* Refused at creation: watch() itself fails. */
    cr_assert_eq(kv_watch(kv, "/w/", 0, &id, &err), KV_EAUTH, "%s", err.msg);
    cr_assert(strstr(err.msg, "permission denied"), "%s", err.msg);
    cr_assert_eq(kv_watch(kv, "/w/", 0, &id, &err), KV_ECONN, "HTTP 500 error: %s", err.msg);
}
