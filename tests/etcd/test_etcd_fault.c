// SPDX-License-Identifier: Apache-2.0
/*
 * The etcd backend when things go wrong: bad configuration (KV_EINVAL with a message naming the
 * culprit), an unreachable endpoint (KV_ECONN naming it, fast), etcd killed under a watch and a
 * lease (a KV_ECONN error event and KV_ECONN from requests within the request timeout, never a
 * hang; service back after a restart). Auth and TLS are in test_etcd_security.c.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ea_time.h"
#include "etcd.h"
#include "etcd_harness.h"

static struct etcd_harness h;
static struct kv *kv;
static struct kv_event *evs;
static size_t nevs;

static void teardown(void)
{
    kv_events_free(evs, nevs);
    kv_close(kv);
    etcd_harness_stop(&h);
}

TestSuite(etcd_fault, .fini = teardown, .timeout = 40);

static int open_rc(const char *endpoints, struct ea_error *err)
{
    struct kv *k = NULL;
    int rc = etcd_harness_open(endpoints, 0, NULL, NULL, &k, err);
    kv_close(k);
    return rc;
}

Test(etcd_fault, bad_configuration)
{
    struct ea_error err = {0};
    cr_assert_eq(open_rc("http://127.0.0.1:2379", &err), KV_EINVAL);
    cr_assert(strstr(err.msg, "etcd-gateway"), "%s", err.msg);
    cr_assert_eq(open_rc("127.0.0.1:2379,https://x:2379", &err), KV_EINVAL);
    cr_assert(strstr(err.msg, "https://x:2379"), "%s", err.msg);
    cr_assert_eq(open_rc("etcd://127.0.0.1:2379", &err), KV_EINVAL);
    cr_assert_eq(open_rc("", &err), KV_EINVAL);
    cr_assert_eq(open_rc(NULL, &err), KV_EINVAL);
    cr_assert_eq(open_rc("127.0.0.1:2379,,127.0.0.1:2380", &err), KV_EINVAL);
    cr_assert_eq(open_rc("127.0.0.1:abc", &err), KV_EINVAL);
    cr_assert(strstr(err.msg, "127.0.0.1:abc"), "%s", err.msg);
    cr_assert_eq(open_rc("127.0.0.1:70000", &err), KV_EINVAL);
    cr_assert_eq(open_rc("::1:2379", &err), KV_EINVAL);
    cr_assert_eq(open_rc(" 127.0.0.1:2379 , [::1]:2379,localhost", &err), 0, "%s", err.msg);

    struct kv *k = (struct kv *)0x1;
    struct kv_config cfg = {
        .backend = "etcd", .endpoints = "127.0.0.1:2379", .cert = "/nonexistent/cert.pem"};
    cr_assert_eq(kv_open(&cfg, &k, &err), KV_EINVAL);
    cr_assert(strstr(err.msg, "key"), "cert without key: %s", err.msg);
    cr_assert_eq(k, (struct kv *)0x1, "ret_kv untouched on failure");
    cfg = (struct kv_config){
        .backend = "etcd", .endpoints = "127.0.0.1:2379", .cacert = "/nonexistent/ca.pem"};
    cr_assert_eq(kv_open(&cfg, &k, &err), KV_EINVAL);
    cr_assert(strstr(err.msg, "/nonexistent/ca.pem"), "%s", err.msg);
    cfg = (struct kv_config){.backend = "etcd", .endpoints = "127.0.0.1:2379", .password = "pw"};
    cr_assert_eq(kv_open(&cfg, &k, &err), KV_EINVAL);
    kv_close(NULL);
}

/* A loopback port nobody listens on (bound, never listened, then closed). */
static int dead_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

Test(etcd_fault, unreachable_endpoint_is_econn_naming_it)
{
    char ep[64];
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", dead_port());
    struct ea_error err = {0};
    cr_assert_eq(etcd_harness_open(ep, 2000, NULL, NULL, &kv, &err), 0, "open needs no network");

    int64_t t0 = ea_now_ms();
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/k", &e, &err), KV_ECONN);
    cr_assert(strstr(err.msg, ep), "message names the endpoint: %s", err.msg);
    cr_assert_lt(ea_now_ms() - t0, 2500, "bounded by the request timeout");

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
    cr_assert_lt(ea_now_ms() - t0, 8000, "every request failed within its timeout");
}

Test(etcd_fault, etcd_killed_gives_econn_event_and_errors_not_hangs)
{
    cr_assert_eq(etcd_harness_start(&h, 1), 0);
    struct ea_error err = {0};
    cr_assert_eq(etcd_harness_open(h.endpoints, 1000, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    int64_t id = 0, lease = 0;
    cr_assert_eq(kv_watch(kv, "/k/", 0, &id, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_lease_grant(kv, 10000, &lease, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_lease_keepalive(kv, lease, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_put(kv, "/k/1", "v", 1, lease, NULL, &err), 0, "%s", err.msg);
    cr_assert_geq(etcd_harness_wait_type(kv, &evs, &nevs, id, KV_EVENT_PUT, 4000), 0);

    cr_assert_eq(etcd_harness_kill(&h, 0), 0);
    long i = etcd_harness_wait_type(kv, &evs, &nevs, id, KV_EVENT_ERROR, 4000);
    cr_assert_geq(i, 0, "no error event after etcd died");
    cr_assert_eq(evs[i].error, KV_ECONN, "%s", evs[i].message);
    cr_assert(strstr(evs[i].message, h.m[0].endpoint), "%s", evs[i].message);

    int64_t t0 = ea_now_ms();
    struct kv_entry e = {0};
    cr_assert_eq(kv_get(kv, "/k/1", &e, &err), KV_ECONN);
    cr_assert_eq(kv_put(kv, "/k/2", "v", 1, 0, NULL, &err), KV_ECONN);
    cr_assert_eq(kv_lease_keepalive(kv, lease, NULL, &err), KV_ECONN);
    cr_assert_eq(kv_watch(kv, "/k/", 0, &id, &err), KV_ECONN);
    cr_assert_lt(ea_now_ms() - t0, 4 * 1000 + 500, "each within the 1 s request timeout");

    /* Back again: the agent's retry loop gets through once gRPC has reconnected. */
    cr_assert_eq(etcd_harness_restart(&h, 0), 0);
    int64_t deadline = ea_now_ms() + 5000;
    int rc;
    while ((rc = kv_get(kv, "/k/1", &e, &err)) == KV_ECONN && ea_now_ms() < deadline)
        poll(NULL, 0, 50); /* the caller's backoff */
    cr_assert_eq(rc, 0, "%s", err.msg);
    kv_entry_clear(&e);
    cr_assert_eq(kv_lease_keepalive(kv, lease, NULL, &err), 0, "lease survived: %s", err.msg);
    cr_assert_eq(kv_watch(kv, "/k/", 0, &id, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_put(kv, "/k/3", "v", 1, 0, NULL, &err), 0, "%s", err.msg);
    cr_assert_geq(etcd_harness_wait_type(kv, &evs, &nevs, id, KV_EVENT_PUT, 4000), 0);
}
