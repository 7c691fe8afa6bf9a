// SPDX-License-Identifier: Apache-2.0
/*
 * etcd_harness: a real `etcd` (Debian etcd-server) for tests — one member or a small cluster on
 * free loopback ports with a temporary data directory, waited for by polling its /health with a
 * deadline, killed and removed afterwards. Plus helpers to kill/restart one member and to run
 * etcdctl against it; plus opening an etcd kv handle and collecting watch events with a deadline.
 * Starting etcd uses no gRPC, so a test may fork before it opens a kv handle (gRPC does not
 * survive fork).
 */
#ifndef EA_TESTS_ETCD_HARNESS_H
#define EA_TESTS_ETCD_HARNESS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kv.h"

#define ETCD_HARNESS_MAX 5

struct etcd_member {
    pid_t pid; /* 0 = not running */
    int client_port, peer_port;
    int health_port; /* plain-HTTP /health (etcd's metrics listener), also under TLS */
    char name[16];
    char endpoint[32]; /* "127.0.0.1:<client_port>" */
    char datadir[PATH_MAX];
    char log[PATH_MAX];
};

struct etcd_harness {
    int n;
    char dir[PATH_MAX];                    /* temporary root: data dirs and logs */
    char endpoints[ETCD_HARNESS_MAX * 32]; /* "host:port,host:port,..." in member order */
    char cluster[ETCD_HARNESS_MAX * 64];   /* --initial-cluster */
    char token[48];
    int tls;            /* clients must use TLS with a client certificate (mTLS) */
    int auth_token_ttl; /* --auth-token-ttl when > 0 */
    long max_request_bytes;                               /* --max-request-bytes when > 0 */
    char cacert[PATH_MAX], cert[PATH_MAX], key[PATH_MAX]; /* client side, when tls */
    struct etcd_member m[ETCD_HARNESS_MAX];
};

struct etcd_harness_opts {
    int members;        /* 1..ETCD_HARNESS_MAX */
    int tls;            /* generate a CA, server and client certs (openssl); require client certs */
    int auth_token_ttl; /* seconds an unused auth token lives (--auth-token-ttl); 0: etcd's 300 */
    long max_request_bytes; /* etcd's --max-request-bytes; 0: etcd's 1.5 MiB */
};

/* Start `nmembers` (1..ETCD_HARNESS_MAX) members and wait until every one reports healthy
 * (deadline 20 s). 0, or a negative errno after printing why to stderr (log tail included).
 * The data lives under $EA_ETCD_TMPDIR, else $TMPDIR, else /tmp. */
/* GET `path` over HTTP/1.0 from 127.0.0.1:`port` (e.g. a member's health_port: /health,
 * /metrics) into buf (NUL-terminated), waiting at most timeout_ms; the length read (0: none). */
size_t etcd_harness_http_get(int port, const char *path, char *buf, size_t size, int timeout_ms);

int etcd_harness_start(struct etcd_harness *h, int nmembers);
/* Same with options (TLS). */
int etcd_harness_start_opts(struct etcd_harness *h, const struct etcd_harness_opts *opts);

/* Kill every member and remove the directory. Safe on a zeroed or stopped harness. */
void etcd_harness_stop(struct etcd_harness *h);

/* A heap-allocated harness of `nmembers` started with etcd_harness_start(), for fixtures that
 * keep it in a pointer. 0 and *ret, or -ENOMEM / the start error (nothing left running). */
int etcd_harness_create(int nmembers, struct etcd_harness **ret);
/* Stop and free a harness from etcd_harness_create(). NULL is a no-op. */
void etcd_harness_destroy(struct etcd_harness *h);

/* SIGKILL member i and reap it. */
int etcd_harness_kill(struct etcd_harness *h, int i);

/* Start member i again on its data dir and ports; wait until healthy (deadline 20 s). */
int etcd_harness_restart(struct etcd_harness *h, int i);

/* Kill every member, then start them all again at once (one by one, the first could not find a
 * quorum to be healthy with); wait until all are healthy (deadline 20 s). */
int etcd_harness_restart_all(struct etcd_harness *h);

/* Poll member i's /health until it says true or `timeout_ms` passes: 0 or -ETIMEDOUT. */
int etcd_harness_wait_healthy(struct etcd_harness *h, int i, int timeout_ms);

/* Run `etcdctl --endpoints=<all> args...` (NULL-terminated); output goes to <dir>/etcdctl.log.
 * Returns its exit status, or a negative errno if it could not run. */
int etcd_harness_etcdctl(struct etcd_harness *h, const char *const args[]);

/* Wait until member i's log holds a line with every one of the NULL-terminated `needles`
 * (inotify on the log file; deadline timeout_ms): 0 or -ETIMEDOUT. */
int etcd_harness_wait_log(struct etcd_harness *h, int i, const char *const needles[],
                          int timeout_ms);

/* The sum of member i's /metrics samples called `name` whose labels contain `labels` (e.g.
 * "grpc_code=\"OK\",grpc_method=\"Authenticate\""); -1 if /metrics could not be read. */
long etcd_harness_metric(struct etcd_harness *h, int i, const char *name, const char *labels);

/* Wait until member i has dropped an auth token of `user` (tokens live auth_token_ttl unused;
 * its log says so): 0 or -ETIMEDOUT. */
int etcd_harness_wait_token_dropped(struct etcd_harness *h, int i, const char *user,
                                    int timeout_ms);

/* Member i's auth counters since it started: successful logins (Authenticate calls answered OK)
 * and calls refused as unauthenticated. 0, or -1 if /metrics could not be read. */
int etcd_harness_auth_counts(struct etcd_harness *h, int i, long *logins, long *refused);

/* Switch auth on: user root (and `user`, granted the root role) with `password`. 0 or -1. */
int etcd_harness_enable_auth(struct etcd_harness *h, const char *user, const char *password);

/* ---- kv handles on the harness ---- */

/* Open the etcd backend on `endpoints` (timeout_ms 0 = backend default, user may be NULL);
 * 0 or the KV_E* code, with the message in err. */
int etcd_harness_open(const char *endpoints, int timeout_ms, const char *user, const char *password,
                      struct kv **ret, struct ea_error *err);

/* Append events to (*evs, *n) until *n >= want or timeout_ms passes, waiting with poll() on the
 * event fd. Returns *n. The array is freed by the caller with kv_events_free(*evs, *n). */
size_t etcd_harness_wait_events(struct kv *kv, struct kv_event **evs, size_t *n, size_t want,
                                int timeout_ms);

/* Wait until an event of `type` for `watch_id` arrives (others are kept in the array); index of
 * that event, or -1 on timeout. */
long etcd_harness_wait_type(struct kv *kv, struct kv_event **evs, size_t *n, int64_t watch_id,
                            int type, int timeout_ms);

#endif
