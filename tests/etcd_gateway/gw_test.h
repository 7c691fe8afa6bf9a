// SPDX-License-Identifier: Apache-2.0
/*
 * gw_test: helpers shared by the etcd-gateway tests — gateway URLs for the etcd harness's
 * members, opening an etcd-gateway handle on them (TLS files when the harness runs TLS), ports
 * that refuse or never answer, and an in-process fake HTTP server that plays canned answers so
 * the backend can be fed what a real etcd never sends. Test code only.
 */
#ifndef EA_TESTS_GW_TEST_H
#define EA_TESTS_GW_TEST_H

#include <pthread.h>
#include <stddef.h>

#include "etcd_harness.h"
#include "kv.h"

/* "http(s)://127.0.0.1:<port>,..." for the harness's members, in member order (https when the
 * harness runs TLS). */
void gwt_urls(const struct etcd_harness *h, char *out, size_t len);
/* The gateway URL of member i alone. */
void gwt_url(const struct etcd_harness *h, int i, char *out, size_t len);

/* Open "etcd-gateway" on `urls` with the harness's client TLS files when h->tls (h may be
 * NULL: plain). timeout_ms 0 = backend default. 0 or the KV_E* code, message in err. */
int gwt_open(const struct etcd_harness *h, const char *urls, int timeout_ms, const char *user,
             const char *password, struct kv **ret, struct ea_error *err);

/* A loopback port nobody listens on (connect: refused). */
int gwt_dead_port(void);

/* A loopback listener that never accepts: connects succeed (backlog), nothing ever answers.
 * Returns the fd (close it when done) and the port in *ret_port. */
int gwt_blackhole(int *ret_port);

/* The fake server: answers the i-th connection with answers[i] (raw HTTP bytes, written after
 * the request was read) and closes it; connections past the last answer are closed at once. */
struct gwt_fake {
    int fd, port;
    const char *const *answers;
    size_t n;
    pthread_t thread;
};
int gwt_fake_start(struct gwt_fake *f, const char *const *answers, size_t n);
void gwt_fake_stop(struct gwt_fake *f);

#endif
