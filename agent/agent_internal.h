// SPDX-License-Identifier: Apache-2.0
/*
 * agent internals, shared by the files at the top of agent/: agent.c (the event loop and the
 * lifecycle's actions), agent_setup.c (opening the store, launcher and endpoints, joining, leaving,
 * tearing down), agent_node.c (the glue to its node: node/node.h, and the loop's writes), agent_signal.c, and the
 * loop's glue to health/ (health/health_agent.c, health/preflight_agent.c). Calls go one way: agent.c and
 * agent_setup.c call the others; those never call back into agent.c.
 * Not for other modules: agent.h is the agent's interface.
 */
#ifndef EA_AGENT_AGENT_INTERNAL_H
#define EA_AGENT_AGENT_INTERNAL_H

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "component.h"
#include "config.h"
#include "ea_loop.h"
#include "events.h"
#include "group.h"
#include "heartbeat.h"
#include "http.h"
#include "kv.h"
#include "launcher.h"
#include "lifecycle.h"
#include "metrics.h"
#include "nic.h"
#include "phases.h"
#include "preempt.h"
#include "node.h"
#include "session.h"
#include "tracker.h"
#include "warm.h"

/* Store retries, the join's and every later request's: the node's one back-off (node.h). */
#define AGENT_RETRY_BASE_MS NODE_RETRY_BASE_MS
#define AGENT_RETRY_CAP_MS NODE_RETRY_CAP_MS

/* What the one loop is doing: a node goes through these in order (agent_setup.c moves it on), and
 * each phase's steps act only in their phase. */
enum agent_phase {
    AP_PREFLIGHT, /* --preflight before joining, held out while it fails (health/preflight_agent.c) */
    AP_WARMING,   /* --warm-workers: this node's spares get ready before it joins (warm/warm_agent.c) */
    AP_JOINING,   /* the join, retried with backoff until --join-timeout (agent_setup.c) */
    AP_RUNNING,   /* in the run: the lifecycle's steps (agent.c) */
    AP_DRAINING,  /* leaving: the workers stopped, their exits collected until the stop timeout */
    AP_DONE,
};

struct agent_stage {
    enum agent_phase id;
    bool over;  /* the phase has ended (agent_phase_over): the loop moves on after this pass */
    void *data; /* the phase's own state, owned by it (freed when it ends) */
    int64_t deadline; /* AP_JOINING: the next attempt; AP_DRAINING: the stop's end */
    int64_t delay;    /* AP_JOINING: the retry delay (ea_retry_next) */
    int64_t since;    /* when the phase began */
};

/* The agent's environment: --preflight's, and the workers' base. */
struct agent_env {
    char **envp;        /* this agent's environment: --preflight's */
    char **worker_envp; /* the workers' base: envp plus --worker-env-fd's entries (those win);
                           NULL: envp */
    char *worker_env_buf; /* what --worker-env-fd held (worker_envp points into it) */
};

/* Where this node is: its directory, its keys' prefix, the address other nodes reach it at. */
struct agent_self {
    char workdir[PATH_MAX];
    char prefix[512];
    char addr[64];
    char host[256];
    char self_addr[64]; /* this machine's address (addr is the workers' host's) */
};

/* The liveness ring's thread and the workers' fence (agent_node.c). */
struct agent_ring {
    struct agent_live *live; /* the ring's thread, the node's transport; NULL off */
    int64_t fence_until;     /* last deadline handed to the workers' guards (launcher_fence), 0 */
};

/* Leaving: a signal, a preemption notice (preempt/), the run's end (agent_signal.c, agent.c). */
struct agent_quit {
    int sigfd;
    struct preempt preempt;
    int term_signal;     /* first SIGTERM/SIGINT/...; 0 while running */
    pid_t parent;        /* who started us: when it is gone, a stop does not wait */
    bool exiting;
    int exit_code;
    const char *stop_reason;
};

/* Waiting for a round: the progress line and --join-timeout (agent.c's check_waiting). */
struct agent_wait {
    int64_t since_ms; /* not in a running round since (for --join-timeout), -1 */
    int64_t progress_at_ms;
    size_t progress_count;
    int64_t last_generation_logged;
};

/* Observability (events.h, http.h): never read by the lifecycle. */
struct agent_obs {
    struct events *events;     /* NULL without --events and --log-format json */
    struct http *http;         /* NULL without --http */
    struct metrics_snapshot m; /* counters and store latency; published every loop pass */
    bool joined;
    int64_t rdzv_since_ms; /* workers stopped (or joined) at: for last_rendezvous_seconds */
};

/* Health and the recovery clock (health/health_agent.c, health/preflight_agent.c). */
struct agent_health {
    struct hb *hb;          /* hang detection; NULL when off */
    struct ph ph;           /* per-phase recovery clock */
    int64_t ph_round;       /* last round seen committed with this node in it */
    struct pf *pf;          /* --preflight (health/preflight.h); NULL when off */
    bool pf_fresh;          /* passed at join: good for the first round */
    bool pf_out;            /* failed before a round: leave, hold, rejoin once it passes */
    int64_t pf_gen, pf_run_gen; /* generation the check passed for / is running for */
    char hbdir[PATH_MAX];   /* the round's heartbeat directory (group_start's) */
    int64_t out_until;      /* evicted (--straggler-action evict): the preflight gate holds the
                               node out until then (monotonic), 0: not held */
    char out_reason[256];   /* ... and why (its held/<node-id> key says so) */
};

/* --warm-workers (warm/warm_agent.c). */
struct agent_warm {
    struct warm *spares; /* the parked spares; NULL when off or not created yet */
    bool off;            /* could not be set up: every worker starts cold */
};

/* The rabit tracker this node serves for its round (tracker/tracker_agent.c). */
struct agent_tracker {
    struct tracker *srv; /* or NULL */
    int last_port;       /* its port: the next round's never reuses it */
};

struct agent {
    const struct cfg *cfg;
    const struct agent_hooks *hooks; /* tests: clock, launcher, a step of theirs (agent.h) */
    struct ea_loop *loop;     /* the one event loop (agent.c registers its steps and sources) */
    struct agent_stage stage; /* where the node is in it */
    struct agent_env env;
    struct agent_self me;
    struct agent_quit quit;
    struct node node; /* the store (node.kv), the session, its lease, rejoin, pending reports,
                         the ring's decisions */
    struct launcher *launcher;
    struct group group;
    enum lc_group state;

    struct agent_ring ring;

    struct agent_wait wait;
    struct agent_obs obs;
    /* components */
    struct nic *nic; /* NIC discovery (nic.h); gates the start of each round's workers */
    struct agent_tracker tracker;
    struct agent_health health;
    struct agent_warm warm;
    struct agent_progress *progress; /* progress-aware restarts, stragglers (progress/); NULL
                                        when both are off */
    struct agent_ckpt *ckpt; /* --checkpoint-memory (checkpoint/); NULL when off */
};

/* agent.c's steps of AP_RUNNING (by slot) and its sources, which agent_setup.c registers with
 * the components' (components.c). */
extern const struct agent_step agent_running_steps[];
extern const size_t agent_n_running_steps;
extern const struct ea_loop_source agent_sources[];
extern const size_t agent_n_sources;
/* Phases of the loop outside AP_RUNNING, each: enter (returns after agent_phase_over when there
 * is nothing to wait for), a step run every pass, its next deadline, and the launcher's exits. */
void agent_joining_step(struct agent *a, int64_t now);
void agent_draining_step(struct agent *a, int64_t now);
/* agent_signal.c: drain the signal fd: the first SIGTERM/SIGINT/... starts a graceful leave. */
void agent_on_signal(struct agent *a);
/* Account for every worker exit the launcher reports. */
void agent_on_worker_exits(struct agent *a);
/* Derive run-level events and hand the HTTP thread a fresh snapshot (every loop pass). */
void agent_publish(struct agent *a);

/* agent_node.c: the agent's glue to its node (node/node.h), and the loop's writes to the store.
 * Set up a->node with the agent's callbacks and `clock` (before the session is created). */
void agent_node_init(struct agent *a, const struct ea_clock *clock);
/* A store operation failed: log it once per outage, retry with backoff, give up (exit 3) after
 * --join-timeout; a refused credential exits 2, a corrupt or foreign value 4. */
void agent_store_problem(struct agent *a, int code, const struct ea_error *err);
/* A store request succeeded: the outage (if any) is over. */
void agent_store_ok(struct agent *a);
/* The store's step of every pass: the lease's renewal (a loss stops the workers and rejoins),
 * the rejoin, the pending reports, the session's tick (the coordinator's duties), retries. */
void agent_store_step(struct agent *a, int64_t now);
/* tracker/tracker_agent.c: --env-style with dmlc and no --dmlc-tracker: group rank 0 serves the
 * rabit tracker; serve round `s`'s on `addr` and publish it (before the master). */
bool agent_builtin_tracker(const struct agent *a);
int agent_publish_tracker(struct agent *a, const struct rdzv_state *s, const char *addr);
/* Group rank 0: publish the round's MASTER_ADDR:MASTER_PORT (and the built-in tracker's). */
void agent_publish_master(struct agent *a, const struct rdzv_state *s);
/* Close the built-in tracker once the round moved on or this node no longer hosts it. */
void agent_retire_tracker(struct agent *a);
/* Write the pending local failure (a->node.failure) / this node's done marker; retried on trouble. */
void agent_report_failure(struct agent *a);
void agent_report_done(struct agent *a);
/* health/health_agent.c: hang detection, the recovery clock and the preflight gate's hooks. */
/* Arm hang detection for the round about to start: the heartbeat directory, or NULL when off. */
const char *agent_health_arm(struct agent *a, int n, int rank_base, char *buf, size_t size);
/* Workers of the round started (after group_start succeeded). */
void agent_health_spawned(struct agent *a);
/* A local fault observed now (began at fault_wall, -1 unknown): the recovery clock's detect
 * mark, and the failed round's `detect` key so that other nodes time the same fault. */
void agent_health_fault(struct agent *a, int64_t fault_wall, const char *cause, int rank);
/* The workers are being stopped for `reason` (a stop the agent did not cause itself). */
void agent_health_stopping(struct agent *a);
/* A round including this node is committed (called on every publish; cheap). */
void agent_health_observe(struct agent *a, const struct rdzv_state *s, int64_t gen);
/* Deadlines and first beats: a hung rank fills *ret and returns 1. */
int agent_health_tick(struct agent *a, int64_t now, struct hb_hang *ret);
/* Next monotonic wake-up the health checks need, -1 none. */
int64_t agent_health_wake_ms(const struct agent *a);

/* warm/warm_agent.c: --warm-workers' spares (warm/warm.h); every call is a no-op when it is off. */
/* Park a set of spares when none is (not while leaving, rejoining or after a fault), stop them
 * when the agent is leaving or exiting. Once per loop pass. */
void agent_warm_tick(struct agent *a);
/* The spares the round about to start takes (group_start's .warm), or NULL. */
struct warm *agent_warm_for_round(struct agent *a);
/* The round's workers started (group_start succeeded): log the spares taken; park again. */
void agent_warm_started(struct agent *a, const struct rdzv_state *s);
/* Parked spares' faults are logged here; a fault of a spare the round took (it never sent its
 * ready line, or a bad one) fills *ret and returns 1: the caller fails it like a failed start. */
int agent_warm_check(struct agent *a, int64_t now, struct warm_fault *ret);
/* --in-place: the workers are about to be stopped for new round `s`: in-place capable ones are
 * handed to warm instead (they run on, the next round re-assigns them) and the group forgets
 * them. How many were held. */
int agent_warm_hold(struct agent *a, const struct rdzv_state *s);
/* A process exit: 1 when it was a spare the group never took (accounted for here). */
int agent_warm_on_exit(struct agent *a, const struct launch_exit *e);
/* The spares' next deadline (their ready lines, acks). */
int64_t agent_warm_wake_ms(const struct agent *a);
/* Stop every parked spare (the loop ends). */
void agent_warm_stop(struct agent *a);
/* AP_WARMING: before joining a run that is running, park this node's spares and wait (signals
 * and spares served, progress logged) until each sent its ready line, so that the round this
 * node's join starts does not wait for their set-up. A fault or the ready deadline
 * (--worker-startup-timeout) is logged and the node joins anyway (its workers start cold). Ends
 * with 0 (join now) or 128+signal when interrupted (the spares are stopped). Over at once
 * without --warm-workers or at a run's first start. */
void agent_warming_enter(struct agent *a);
void agent_warming_step(struct agent *a, int64_t now);
int64_t agent_warming_wake_ms(const struct agent *a);

/* health/preflight_agent.c, AP_PREFLIGHT: run --preflight until it passes (0), holding the node out
 * meanwhile; ends with an exit code when interrupted or when the check cannot be set up. Over at
 * once without --preflight. */
void agent_preflight_enter(struct agent *a);
void agent_preflight_step(struct agent *a, int64_t now);
int64_t agent_preflight_wake_ms(const struct agent *a);
void agent_preflight_on_exit(struct agent *a, const struct launch_exit *e);
/* --preflight-every-round: may the workers of generation `gen` start here? Runs the check once
 * per round (not again for the first round after the gate); false while it runs; a failure
 * ends the loop with a->pf_out (agent_run leaves, holds the node out and rejoins). */
bool agent_preflight_round(struct agent *a, int64_t gen);

/* agent_node.c: the liveness ring (liveness/live.h) and its keys (rendezvous/suspect.h).
 * Open it (--liveness on) and put its port into this node's record; no-op when off. */
int agent_liveness_open(struct agent *a, struct rdzv_node *self);
void agent_liveness_close(struct agent *a);
/* Every loop pass, before housekeeping: follow the round with the ring, write suspicions, and
 * (coordinator) probe the suspects. */
void agent_liveness_step(struct agent *a, int64_t now);
/* The ring's fd (-1 when off) was readable: its suspicions and probe results. */
int agent_liveness_fd(const struct agent *a);
void agent_liveness_on_reports(struct agent *a);
/* http_links_fn (observe/http.h) over this node's ring: ctx is the agent. */
void agent_liveness_links(void *ctx, struct metrics_link *out, struct metrics_link *in);
int64_t agent_liveness_wake_ms(const struct agent *a);
/* Hand the workers' guards their deadline (the lease's, tightened while in a ring): it is
 * written (launcher_fence) and returned. */
int64_t agent_liveness_fence(struct agent *a, int64_t lease_until);
/* The deadline the guards hold now: the ring's thread keeps moving it while in a ring; else
 * `handed` (the last one the loop handed them). */
int64_t agent_liveness_fence_held(const struct agent *a, int64_t handed);

/* In AP_RUNNING: a component's running steps and sources act only then. */
static inline bool agent_in_run(const void *c)
{
    return ((const struct agent *)c)->stage.id == AP_RUNNING;
}

/* A source of one fd, ready for reading, polled while `when` holds (a is the agent): defines
 * fd_<name> and on_<name> for an ea_loop_source {"name", 1, fd_<name>, on_<name>, false}. */
#define AGENT_FD_SOURCE(name, when, get, on)                                                         \
    static size_t fd_##name(void *c, struct pollfd *fds, size_t max)                           \
    {                                                                                          \
        (void)max;                                                                             \
        const struct agent *a = c;                                                             \
        if (!(when))                                                                           \
            return 0;                                                                          \
        fds[0] = (struct pollfd){.fd = get, .events = POLLIN};                                 \
        return 1;                                                                              \
    }                                                                                          \
    static void on_##name(void *c, const struct pollfd *fds, size_t n, int64_t now)            \
    {                                                                                          \
        (void)now;                                                                             \
        struct agent *a = c;                                                                   \
        if (n && (fds[0].revents & POLLIN))                                                    \
            on;                                                                                \
    }

/* Emit an event about the run's current round (events.h); a no-op without an event stream.
 * Inline, so that the files here, each of which emits, need not call back into one of them. */
static inline void agent_emit(struct agent *a, const char *name, const char *fmt, ...)
{
    if (!a->obs.events)
        return;
    int64_t gen = 0;
    const struct rdzv_state *s = a->node.rdzv ? rdzv_current(a->node.rdzv, &gen) : NULL;
    va_list ap;
    va_start(ap, fmt);
    events_emitv(a->obs.events, name, s ? s->round : 0, gen, fmt, ap);
    va_end(ap);
}

/* The current phase has ended with exit code `code` (0: go on to the next phase). */
static inline void agent_phase_over(struct agent *a, int code)
{
    a->stage.over = true;
    a->quit.exit_code = code;
}

#endif
