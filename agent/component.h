// SPDX-License-Identifier: Apache-2.0
/*
 * component: how a feature plugs into the agent's one loop. A component (warm spares, hang
 * detection and the recovery clock, --preflight, NIC discovery, the rabit tracker, the
 * preemption notice, ...) keeps its state in its own folder and gives the agent one const
 * `struct agent_component`: the steps it runs in a pass (at a named point of it), the fds it
 * waits on, and hooks the agent calls at the moments of a round's life. The agent lists the
 * components in one table (components.c) and calls each hook in the table's order; agent.c names
 * none of them. Every member may be NULL / 0.
 * Adding one: docs/architecture.md ("Adding a component").
 */
#ifndef EA_AGENT_COMPONENT_H
#define EA_AGENT_COMPONENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ea_loop.h"

struct agent;
struct group_start;
struct group_worker;
struct launch_exit;
struct rdzv_failure;
struct rdzv_state;

/* Where in a pass a component's step runs (a pass runs the slots in this order; within a slot,
 * the agent's own step first, then the components' in table order). */
enum agent_slot {
    AGENT_AT_PHASE,   /* a phase of its own outside AP_RUNNING (the step checks a->stage.id) */
    AGENT_AT_STORE,   /* AP_RUNNING from here: the ring, the store, the fence */
    AGENT_AT_CHECK,   /* faults of the workers (the agent applies the components' `check`s) */
    AGENT_AT_DECIDE,  /* after publishing, before the lifecycle decides */
    AGENT_AT_DECIDED, /* right after the lifecycle acted (a round may have taken something) */
    AGENT_AT_END,     /* last: the progress line, timers of their own */
    AGENT_SLOTS
};

struct agent_step {
    enum agent_slot at;
    struct ea_loop_step step; /* ctx is the agent */
};

/* A worker of this node that a component found failed while it still runs (a missed heartbeat,
 * a spare that never sent its ready line): the agent charges it like a failed exit. */
struct agent_fault {
    int local_rank;
    int pid;            /* 0: whichever worker has the rank; else only while that one runs */
    int64_t began_wall; /* when it began, wall clock ms */
    const char *cause;  /* "hang", "failure" */
    char message[512];  /* the failure record's message */
    char what[640];     /* the log's "worker <what>; stopping its group" */
};

struct agent_component {
    const char *name;
    const struct agent_step *steps;
    size_t n_steps;
    const struct ea_loop_source *sources; /* ctx is the agent */
    size_t n_sources;

    /* Set up once the store and the launcher are (launcher: its name, "local", "ssh", ...):
     * 0, or the exit code the agent exits with (logged here). Torn down at the end, after the
     * node left the run and before its "exited" event. */
    int (*open)(struct agent *a, const char *launcher);
    void (*close)(struct agent *a);
    /* The node entered phase `phase` (enum agent_phase). */
    void (*enter)(struct agent *a, int phase);
    /* A round with this node in it is committed (gen): may its workers start? Asked on every
     * pass until they do; false holds them (the component keeps working towards true). */
    bool (*round_ready)(struct agent *a, const struct rdzv_state *s, int64_t gen);
    /* Last word before a round's workers start: false holds them (asked only then). */
    bool (*may_start)(struct agent *a, int64_t gen);
    /* The workers of round `s` are about to start: fill this component's part of `gs`. */
    void (*starting)(struct agent *a, const struct rdzv_state *s, struct group_start *gs);
    /* They started (group_start succeeded). */
    void (*started)(struct agent *a, const struct rdzv_state *s);
    /* They are being stopped (`s`: the store's state now, or NULL). */
    void (*stopping)(struct agent *a, const struct rdzv_state *s);
    /* A process exit: true when it is this component's (the group never sees it). */
    bool (*take_exit)(struct agent *a, const struct launch_exit *e);
    /* A worker of the group exited (after the group accounted for it). */
    void (*worker_exited)(struct agent *a, const struct group_worker *w);
    /* Faults the component's checks found this pass: how many of ret[0..max) it filled. */
    size_t (*check)(struct agent *a, int64_t now, struct agent_fault *ret, size_t max);
    /* A local failure's record, before it is reported: add to it (e.g. the run's progress). */
    void (*failing)(struct agent *a, struct rdzv_failure *f);
    /* The run failed with record f (s->failure_round's): true when this component said why,
     * once (the agent then says nothing of the budget). */
    bool (*run_failed)(struct agent *a, const struct rdzv_state *s, const struct rdzv_failure *f);
    /* A local fault observed (a failed worker, a hang): its time and cause. */
    void (*fault)(struct agent *a, int64_t fault_wall, const char *cause, int rank);
    /* Every pass: the round the store shows (s may be NULL), for the component's own view. */
    void (*observe)(struct agent *a, const struct rdzv_state *s, int64_t gen);
    /* What this component publishes for round `s` that the workers need is in the store (the
     * built-in tracker's address): false holds the start. */
    bool (*published)(const struct agent *a, const struct rdzv_state *s);
    /* The node leaves the run (AP_RUNNING ends). */
    void (*leaving)(struct agent *a);
};

/* A component's tables: `.name = "x", AGENT_STEPS(x_steps), AGENT_SOURCES(x_sources), ...` */
#define AGENT_STEPS(arr) .steps = (arr), .n_steps = sizeof(arr) / sizeof((arr)[0])
#define AGENT_SOURCES(arr) .sources = (arr), .n_sources = sizeof(arr) / sizeof((arr)[0])

/* The table (components.c), in the order their hooks, steps and sources run. */
extern const struct agent_component *const agent_components[];
extern const size_t agent_n_components;

/* Call `hook` of every component that has one. */
#define AGENT_EACH(hook, ...)                                                                  \
    do {                                                                                       \
        for (size_t i_ = 0; i_ < agent_n_components; i_++)                                     \
            if (agent_components[i_]->hook)                                                    \
                agent_components[i_]->hook(__VA_ARGS__);                                       \
    } while (0)

#endif
