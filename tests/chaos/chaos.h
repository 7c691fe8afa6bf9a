// SPDX-License-Identifier: Apache-2.0
/*
 * chaos: the chaos suite's shared pieces (issue #10). The driver (chaos_main.c) runs N agents on a
 * 3-member etcd cluster and injects one seeded fault per episode (chaos_faults.c). Workers
 * (`ea-testworker chaos DIR GOFILE`) write one evidence file each; a monitor thread
 * (chaos_monitor.c) records them as they appear and the moment each worker process ends (pidfd),
 * so every wait in the suite is an event with a deadline. chaos_check.c holds the invariants.
 * Times are CLOCK_MONOTONIC, which is one clock for every process of the machine.
 */
#ifndef EA_TESTS_CHAOS_H
#define EA_TESTS_CHAOS_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "etcd_harness.h"

#define CH_SLOTS_MAX 16
#define CH_NODE_MAX 32

/* One worker process, from its evidence file and the monitor's pidfd. */
struct ch_worker {
    char file[48]; /* "w.<pid>.<start ns>": pids are reused, names are not */
    pid_t pid;
    int64_t gen, round;
    int rank, world, local;
    char node[CH_NODE_MAX];
    int64_t start_ms; /* CLOCK_MONOTONIC, written by the worker */
    int64_t stop_ms;  /* -1 while alive; the worker's own stop line, else when its pidfd fired */
    int code;         /* from the stop line; -1 unknown (killed without a word) */
    int episode;      /* the driver's episode when the monitor saw it start */
    int pidfd;        /* -1 once ended */
};

struct ch_monitor {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    char dir[PATH_MAX];
    int ifd, wakefd;
    bool quit;
    struct ch_worker *w;
    size_t n, cap;
    int episode;                   /* set by the driver (under mu) */
    int agent_pidfd[CH_SLOTS_MAX]; /* agents watched for exit; -1 none */
    bool agent_exited[CH_SLOTS_MAX];
};

/* Start the monitor on evidence directory `dir` (created by the caller). 0 or -errno. */
int ch_mon_start(struct ch_monitor *m, const char *dir);
void ch_mon_stop(struct ch_monitor *m);
/* Watch agent `slot`'s pid (exit sets agent_exited[slot] and wakes waiters); pid <= 0 clears. */
void ch_mon_watch_agent(struct ch_monitor *m, int slot, pid_t pid);
/* Wait, holding m->mu while pred runs, until pred(m, arg) or deadline_ms (monotonic). */
bool ch_mon_wait(struct ch_monitor *m, bool (*pred)(struct ch_monitor *, void *), void *arg,
                 int64_t deadline_ms);
void ch_mon_lock(struct ch_monitor *m);
void ch_mon_unlock(struct ch_monitor *m);

int64_t ch_now_ms(void);

/* ---- agents ---- */
struct ch_agent {
    char node[CH_NODE_MAX]; /* "n<slot>" or "n<slot>r<incarnation>" */
    pid_t pid;              /* 0: none */
    int nproc;
    int incarnation;
    bool stopped; /* SIGSTOPped by the driver right now */
    bool in_ns;   /* runs in its own network namespace (partition target) */
    char log[PATH_MAX];
};

/* ---- the run ---- */
enum ch_fault {
    F_AGENT_KILL,
    F_AGENT_STOP,
    F_WORKER_KILL,
    F_ETCD_LEADER,
    F_ETCD_RESTART,
    F_PARTITION,
    F_COMPACT,
    F_CLOCK_JUMP,
    F_COUNT
};
extern const char *const ch_fault_names[F_COUNT];

enum ch_invariant { I_OVERLAP, I_RANKS, I_ORPHANS, I_AGENTS, I_SUCCESS, I_COUNT };
extern const char *const ch_invariant_names[I_COUNT];

struct ch_run {
    /* options */
    int episodes, nodes, min_nodes, stop_timeout_s, lease_ttl_s, ns_nodes;
    uint64_t seed, rng;
    double time_scale;      /* every driver deadline is multiplied by this */
    int64_t fence_slack_ms; /* allowed generation overlap beyond --stop-timeout */
    int64_t episode_deadline_ms;
    int freeze_extra_max_ms; /* SIGSTOP lasts lease TTL + 500 ms .. this (>= 500) */
    /* environment */
    char dir[PATH_MAX], evdir[PATH_MAX], gofile[PATH_MAX], tag[64], tagenv[96];
    char endpoints[ETCD_HARNESS_MAX * 32];
    struct etcd_harness etcd;
    struct ch_monitor mon;
    struct ch_agent a[CH_SLOTS_MAX];
    /* partition support (chaos_netns.c): namespace and relayed endpoints per slot */
    char ns[CH_SLOTS_MAX][64];
    char ns_endpoints[CH_SLOTS_MAX][ETCD_HARNESS_MAX * 32];
    char ns_if[CH_SLOTS_MAX][32];
    bool netns_ok;
    /* results */
    int episode;
    int faults[F_COUNT];
    int violations[I_COUNT];
    int64_t *recovery_ms;
    size_t n_recovery;
    int64_t *kind_ms[F_COUNT]; /* recovery times by fault kind */
    size_t n_kind[F_COUNT];
    int64_t fenced_gen; /* generations <= this were checked for overlap already */
    int64_t checked_gen;
    int64_t current_gen;     /* of the last recovery */
    long long compacted_rev; /* the last etcd compaction */
    int64_t max_overlap_ms;  /* the longest two generations were seen running together */
    bool violated_this_episode;
};

uint64_t ch_rand(struct ch_run *r);
int ch_rand_range(struct ch_run *r, int lo, int hi); /* lo..hi inclusive */
int64_t ch_scaled(const struct ch_run *r, int64_t ms);

/* Agents (chaos_main.c). */
void ch_agent_start(struct ch_run *r, int slot);
void ch_agent_kill(struct ch_run *r, int slot); /* SIGKILL + reap */

/* Faults (chaos_faults.c): inject one fault of `kind`; a line describing it goes to `what`.
 * True when the fault must end the current generation (the run recovers in a newer one). */
bool ch_fault_inject(struct ch_run *r, enum ch_fault kind, char *what, size_t size);

/* Invariants (chaos_check.c). Each returns the number of violations found and prints them. */
int ch_check_overlap(struct ch_run *r);
int ch_check_ranks(struct ch_run *r);
int ch_check_orphans(struct ch_run *r, int64_t deadline_ms);
/* True when the process-table scan of invariant 3 reports `pid` (for the self-check). */
bool ch_scan_finds(struct ch_run *r, pid_t pid);
void ch_print_generation(struct ch_run *r, int64_t gen);
void ch_print_agent_logs(struct ch_run *r, int lines);

/* Network partition support (chaos_netns.c). */
bool ch_netns_setup(struct ch_run *r);
void ch_netns_cleanup(struct ch_run *r);
void ch_netns_link(struct ch_run *r, int slot, bool up);

#endif
