// SPDX-License-Identifier: Apache-2.0
/*
 * etcd_internal: what the files of the etcd v3 backend share — the handle, the gRPC plumbing
 * (etcd_grpc.c), the bidi streams on the I/O thread (etcd_stream.c) and the watch/keepalive
 * protocols (etcd_watch.c). Not a public interface: callers use kv.h (and etcd.h for the extras).
 */
#ifndef EA_BACKENDS_ETCD_INTERNAL_H
#define EA_BACKENDS_ETCD_INTERNAL_H

#include <grpc/grpc.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "kv.h"
#include "kv_evq.h"
#include "rpc.pb-c.h"

#define ETCD_DEFAULT_TIMEOUT_MS 5000

/* gRPC method paths (package etcdserverpb). */
#define ETCD_M_RANGE "/etcdserverpb.KV/Range"
#define ETCD_M_PUT "/etcdserverpb.KV/Put"
#define ETCD_M_DELETE "/etcdserverpb.KV/DeleteRange"
#define ETCD_M_TXN "/etcdserverpb.KV/Txn"
#define ETCD_M_COMPACT "/etcdserverpb.KV/Compact"
#define ETCD_M_LEASE_GRANT "/etcdserverpb.Lease/LeaseGrant"
#define ETCD_M_LEASE_REVOKE "/etcdserverpb.Lease/LeaseRevoke"
#define ETCD_M_LEASE_KEEPALIVE "/etcdserverpb.Lease/LeaseKeepAlive"
#define ETCD_M_WATCH "/etcdserverpb.Watch/Watch"
#define ETCD_M_AUTHENTICATE "/etcdserverpb.Auth/Authenticate"
#define ETCD_M_STATUS "/etcdserverpb.Maintenance/Status"

struct etcd_endpoint {
    char *addr;            /* "host:port" as configured; also the gRPC target */
    grpc_channel *channel; /* created on first use, under etcd.lock */
};

struct etcd_stream;

/* A kv watch: one etcd watcher on one Watch stream. */
enum etcd_watch_state { ETCD_W_PENDING, ETCD_W_ACTIVE, ETCD_W_FAILED };

struct etcd_watcher {
    int64_t id;        /* kv watch id handed to the caller (also proposed to etcd) */
    int64_t server_id; /* id etcd assigned (== id on etcd >= 3.4) */
    enum etcd_watch_state state;
    int64_t from_revision;
    int error; /* ETCD_W_FAILED: KV_E* */
    char message[EA_ERROR_MSG_MAX];
    int lost; /* an event could not be queued (no memory): end it with an error */
    struct etcd_stream *stream;
};

/* The one keepalive request in flight (lease_keepalive is serialized by ka_op_lock). */
enum etcd_ka_state { ETCD_KA_IDLE, ETCD_KA_PENDING, ETCD_KA_DONE, ETCD_KA_FAILED };

struct etcd_ka {
    enum etcd_ka_state state;
    int64_t lease;
    int64_t ttl_s;
    int error;
    char message[EA_ERROR_MSG_MAX];
    struct etcd_stream *stream;
};

struct etcd {
    struct kv base;

    /* Immutable after open. */
    struct etcd_endpoint *eps;
    size_t neps;
    int timeout_ms;
    char *user, *password;
    grpc_channel_credentials *creds;
    int tls;
    pid_t pid; /* the process that opened the handle (gRPC does not survive fork) */

    pthread_mutex_t lock; /* everything below */
    pthread_cond_t cond;  /* CLOCK_MONOTONIC; broadcast on any watcher/keepalive change */
    size_t current;       /* endpoint in use; moves on to the next one on KV_ECONN */
    char *token;          /* auth token; NULL = not authenticated yet, "" = auth disabled */

    /* I/O thread and its completion queue, started with the first stream. */
    grpc_completion_queue *cq;
    pthread_t thread;
    int thread_started;
    int closing;
    int cq_shut;
    struct etcd_stream *streams;      /* every stream not yet finished */
    struct etcd_stream *watch_stream; /* where new watches go; NULL = open one */
    struct etcd_stream *ka_stream;

    struct etcd_watcher *watchers;
    size_t nwatchers, capwatchers;
    int64_t next_watch_id;
    struct etcd_ka ka;

    struct kv_evq evq; /* events for read_events(); its eventfd is event_fd() */

    pthread_mutex_t watch_op_lock; /* one watch create at a time */
    pthread_mutex_t ka_op_lock;    /* one keepalive at a time */
};

/* ---- etcd_grpc.c: process-wide gRPC, channels, unary calls, auth, status mapping ---- */

/* grpc_init() on the first handle of the process, grpc_shutdown on the last. Refused
 * (KV_EINVAL) in a child forked while the parent had gRPC running. */
int etcd_grpc_acquire(struct ea_error *err);
void etcd_grpc_release(void);
/* KV_EINVAL when `e` was opened by another process (we are a fork child), else 0. */
int etcd_forked(const struct etcd *e, struct ea_error *err);

/* Credentials for every channel of a handle: TLS from cfg->cacert/cert/key, or insecure. */
int etcd_creds_create(const struct kv_config *cfg, grpc_channel_credentials **ret_creds,
                      int *ret_tls, struct ea_error *err);

/* The channel to endpoint `ep`, created on first use. Caller holds e->lock. */
grpc_channel *etcd_channel(struct etcd *e, size_t ep);

/* Outgoing metadata of every call: hasleader, and the auth token when there is one. Caller holds
 * e->lock. Release with etcd_metadata_release(). */
size_t etcd_metadata_fill(struct etcd *e, grpc_metadata md[2]);
void etcd_metadata_release(grpc_metadata *md, size_t n);

/* Absolute gRPC deadline for a CLOCK_MONOTONIC millisecond deadline. */
gpr_timespec etcd_deadline(int64_t deadline_ms);

/* A unary RPC. `idempotent` ones fail over to the next endpoint on any UNAVAILABLE; the others
 * only when the request certainly never reached a server. Authenticates first when configured,
 * re-authenticates once on a rejected token. `what` names the request in error messages. On
 * success *ret is the unpacked response (free with protobuf_c_message_free_unpacked). */
struct etcd_rpc {
    const char *method;
    const ProtobufCMessageDescriptor *resp_desc;
    int idempotent;
    const char *what;
};
int etcd_unary(struct etcd *e, const struct etcd_rpc *rpc, const ProtobufCMessage *req,
               ProtobufCMessage **ret, struct ea_error *err);
/* Most calls etcd_unary_each() has in flight at once. */
#define ETCD_EACH_MAX 128
/* n requests of one kind in flight together (at most ETCD_EACH_MAX at a time) on the member in
 * use: a burst costs about one round trip, not n. ret_codes[i]: 0 or request i's KV_E* code; a
 * request that met a connection or token failure went again through etcd_unary (failover,
 * login). ret_resps (may be NULL): ret_resps[i] is request i's response where ret_codes[i] is 0,
 * else NULL (the caller frees each). A one-message call of a streaming method (a lease
 * keepalive) goes as one call each. 0, or -ENOMEM / KV_EINVAL with nothing sent; err gets the
 * first failed request's message. */
int etcd_unary_each(struct etcd *e, const struct etcd_rpc *rpc, const ProtobufCMessage *const *reqs,
                    size_t n, int *ret_codes, ProtobufCMessage **ret_resps, struct ea_error *err);

/* Make sure a token is held when auth is configured (Authenticate on endpoint `ep`). Called
 * without e->lock. */
int etcd_auth_ensure(struct etcd *e, size_t ep, int64_t deadline_ms, struct ea_error *err);
/* Forget `token` if it is still the current one, so the next call authenticates again. */
void etcd_auth_invalidate(struct etcd *e);

/* KV_E* for a gRPC status and etcd's error text. */
int etcd_status_to_kv(grpc_status_code code, const char *details);
/* Whether a failed call can safely be sent to another endpoint. */
int etcd_status_failover(grpc_status_code code, const char *details, int idempotent);

/* ---- etcd_stream.c: bidi streams driven by the handle's I/O thread ---- */

struct etcd_stream_handler {
    const char *method;
    /* Called on the I/O thread with e->lock held, for every message received. */
    void (*on_message)(struct etcd_stream *s, const uint8_t *data, size_t len);
    /* Called once with e->lock held when the stream has ended (status in s). */
    void (*on_close)(struct etcd_stream *s, int code, const char *message);
    /* Optional liveness check, called on the I/O thread with e->lock held each time the stream
     * has received nothing for the handle's timeout since the later of its last message and
     * the previous call; `n` counts these calls since the last message (1, 2, ...). A handler
     * may probe the server (n == 1) and give the stream up (etcd_stream_abort) when the probe
     * went unanswered (n >= 2). */
    void (*on_idle)(struct etcd_stream *s, int n);
};

/* Open a stream to endpoint `ep` (starting the I/O thread when needed). Caller holds e->lock. */
int etcd_stream_open(struct etcd *e, size_t ep, const struct etcd_stream_handler *h,
                     struct etcd_stream **ret, struct ea_error *err);
/* Queue one message; sends are serialized internally. Caller holds e->lock. */
int etcd_stream_send(struct etcd_stream *s, const ProtobufCMessage *msg, struct ea_error *err);
/* Cancel: on_close follows on the I/O thread. Caller holds e->lock. */
void etcd_stream_cancel(struct etcd_stream *s);
/* Cancel with a local verdict: on_close sees UNAVAILABLE and `reason` (the server is not told).
 * Caller holds e->lock. */
void etcd_stream_abort(struct etcd_stream *s, const char *reason);
/* Whether the stream still accepts requests. Caller holds e->lock. */
int etcd_stream_alive(const struct etcd_stream *s);
size_t etcd_stream_endpoint(const struct etcd_stream *s);
struct etcd *etcd_stream_owner(const struct etcd_stream *s);
/* Cancel every stream, stop the I/O thread and destroy its queue. Called by close, no lock. */
void etcd_streams_shutdown(struct etcd *e);

/* ---- etcd_watch.c: watch, keepalive, read_events (queue: kv_evq.h) ---- */

int etcd_watch(struct kv *kv, const char *prefix, int64_t from_revision, int64_t *ret_watch_id,
               struct ea_error *err);
void etcd_watch_cancel(struct kv *kv, int64_t watch_id);
int etcd_event_fd(struct kv *kv);
int etcd_read_events(struct kv *kv, struct kv_event **ret_events, size_t *ret_n,
                     struct ea_error *err);
int etcd_lease_keepalive(struct kv *kv, int64_t lease, int64_t *ret_ttl_ms, struct ea_error *err);
/* The end of one keepalive attempt on one member, at `now`, of a renewal that must be done by
 * `deadline`, when `tried` members (this one included) of `neps` have been tried: half the time
 * left while another member remains, all of it for the last. A pure function (unit-tested
 * without a clock: tests/unit/test_etcd_attempt.c). */
int64_t etcd_attempt_until(int64_t now, int64_t deadline, size_t tried, size_t neps);
/* Free the watcher table (close path, I/O thread already stopped). */
void etcd_watch_release(struct etcd *e);

/* ---- etcd.c helpers shared with etcd_watch.c ---- */

/* range_end selecting every key with `prefix` (etcd's getPrefix rule); out has len+1 bytes. */
size_t etcd_prefix_range_end(const uint8_t *key, size_t len, uint8_t *out);
/* kv_entry from an etcd KeyValue (copies). 0 or -ENOMEM. */
int etcd_entry_from_kv(struct kv_entry *ret, const Mvccpb__KeyValue *kv);
/* Wait on e->cond until the deadline; e->lock held. Returns 0, or ETIMEDOUT once past it. */
int etcd_cond_wait(struct etcd *e, int64_t deadline_ms);

#endif
