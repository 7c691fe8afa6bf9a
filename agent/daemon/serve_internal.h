// SPDX-License-Identifier: Apache-2.0
/*
 * serve's internals, shared by serve.c (the store, the loop, set-up), serve_opts.c (its options)
 * and serve_runs.c (picking a run, starting its agent, its end, room in it). Not a public
 * interface.
 */
#ifndef EA_AGENT_DAEMON_SERVE_INTERNAL_H
#define EA_AGENT_DAEMON_SERVE_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "config.h"
#include "daemon_cg.h"
#include "daemon_trust.h"
#include "ea_loop.h"
#include "events.h"
#include "http.h"
#include "kv.h"
#include "metrics.h"
#include "pool.h"

#define SKIP_MAX 16
#define SKIP_MS 10000 /* a run this node could not run is looked at again after this long */
#define BAD_MAX 16

struct daemon {
    const struct ea_clock *clock; /* the loop's: every deadline below is on its scale */
    struct cfg cfg;    /* the node's options (store, node id, lease TTL, log, --http) */
    char **cfg_argv;   /* what cfg points into */
    char **node_args;  /* handed to every run's agent (no --pool, no --http; the password
                          only as --password-fd pwfd_arg: each run's own hand-over socket) */
    size_t n_node;
    char pwfd_arg[16];
    char **envp;
    char exe[PATH_MAX];
    struct kv *kv;
    struct pool pool;
    struct daemon_trust trust; /* which specs it runs (--allowed-signers, --allow-unsigned) */
    struct daemon_cg cg;       /* the run's cgroup, and the end of what a run left behind */
    struct pool_hooks hooks;
    struct events *events;
    const char *signers_path;
    bool allow_unsigned;
    int sigfd, chldfd;
    struct http *http;
    struct metrics_snapshot m;
    int64_t lease, keepalive_at, watch_id, retry_at;
    int64_t backoff_ms; /* store retries: doubling from 250 ms to 5 s; 0 after a success */
    bool pick, full_scan;
    pid_t child;
    int seat;           /* the child's run's seat this daemon holds */
    int run_max;        /* its --max */
    int64_t state_watch; /* its `state` (O(1): one small value per round) */
    int64_t room_rev;   /* revision of the round that left the run room, 0 = none pending */
    int64_t advance_at; /* when this daemon recomputes `next` for that room (0 = not armed) */
    int64_t rescan_at;  /* idle: look at the queue again (seats all taken; a scan's gap) */
    int64_t scan_ms;    /* when this daemon last scanned the queue (0: never) */
    char run[128];      /* the run the child runs */
    char run_signer[256], run_fp[SSHSIG_FP_MAX]; /* who signed it ("": unsigned) */
    int64_t run_since;  /* wall ms */
    int term_signal;
    struct { char run[128]; int64_t until; } skip[SKIP_MAX];
    struct { char key[POOL_KEY_MAX]; int64_t rev; } bad[BAD_MAX];
    size_t n_bad;
};

/* The loop's time (monotonic ms): real, or a test's ea_fake_clock. */
static inline int64_t serve_now(const struct daemon *d)
{
    return d->clock->now_ms(d->clock->ctx);
}

/* serve_opts.c: the options (0, or -EINVAL said on stderr, -ENOMEM), and --help. */
int serve_parse(struct daemon *d, int argc, char **argv, char **envp, const char **ret_pool,
                bool *ret_help);
void serve_print_help(FILE *f);

/* serve.c: register the daemon's steps and sources (a const table) with loop `l` on d->clock
 * (0, -ENOMEM); the loop's done() for it (a signal came and no run's agent is left). */
int serve_loop_add(struct ea_loop *l, struct daemon *d);
bool serve_done(void *ctx);

/* serve.c: the daemon's record on its lease; a store error noted (backing off). */
int serve_put_record(struct daemon *d, struct ea_error *err);
void serve_store_failed(struct daemon *d, const char *what, const struct ea_error *err);

/* serve_runs.c: idle, pick a run and start its agent; the agent exited with `status`; in a run,
 * watch its `state`, an event of that watch, and recompute `next` for its room. */
void serve_pick(struct daemon *d);
void serve_run_ended(struct daemon *d, int status);
void serve_watch_run_state(struct daemon *d);
void serve_on_run_state(struct daemon *d, const struct kv_event *ev);
void serve_advance_for_room(struct daemon *d);

#endif
