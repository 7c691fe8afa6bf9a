// SPDX-License-Identifier: Apache-2.0
/* agent checkpoint hooks: --checkpoint-memory's store (checkpoint/checkpoint.h) tied to the
 * agent: opened in its workdir, its notes logged and emitted, a breakpoint's writes to
 * --checkpoint-dir; kept out of agent.c. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "agent_internal.h"
#include "checkpoint.h"
#include "log.h"
#include "workerenv.h"

struct agent_ckpt {
    struct ckpt *c;
    bool at_break; /* the breakpoint's writes are queued: again once workers run again */
};

static int agent_checkpoint_open(struct agent *a, const char *launcher)
{
    (void)launcher;
    const struct cfg *cfg = a->cfg;
    if (cfg->checkpoint_memory_mb <= 0)
        return 0;
    char sdir[PATH_MAX];
    snprintf(sdir, sizeof(sdir), WENV_CHECKPOINT_SOCKET_FMT, a->me.workdir);
    *strrchr(sdir, '/') = '\0'; /* the socket's directory, created 0700 by ckpt_create */
    struct ckpt_config cc = {.socket_dir = sdir, .run_id = cfg->run_id,
                             .memory = (uint64_t)cfg->checkpoint_memory_mb << 20,
                             .persist_dir = cfg->checkpoint_dir,
                             .persist_every = cfg->checkpoint_every, .uid = geteuid()};
    struct agent_ckpt *ac = calloc(1, sizeof(*ac));
    struct ea_error err = {0};
    int64_t restored = -1;
    int r = ac ? ckpt_create(&cc, &ac->c, &restored, &err) : ea_errorf(&err, -ENOMEM, "out of memory");
    if (r < 0) {
        log_error("--checkpoint-memory: %s", err.msg);
        free(ac);
        return AGENT_EXIT_USAGE;
    }
    a->ckpt = ac;
    int64_t step;
    int shards;
    if (restored >= 0 && ckpt_store_latest(ckpt_store_of(ac->c), &step, &shards) == 0)
        log_info("checkpoint store: step %" PRId64 " (%d shard(s)) read back from "
                 "--checkpoint-dir '%s'", step, shards, cfg->checkpoint_dir);
    log_info("checkpoint store: up to %d MB in memory, workers' socket %s%s%s", cfg->checkpoint_memory_mb,
             ckpt_socket_path(ac->c), cfg->checkpoint_dir ? ", written to " : "",
             cfg->checkpoint_dir ? cfg->checkpoint_dir : "");
    return 0;
}

static void on_note(struct agent *a, const struct ckpt_note *n)
{
    static const char *const names[] = {
        [CKPT_NOTE_COMPLETE] = "checkpoint_complete", [CKPT_NOTE_NOFIT] = "checkpoint_nofit",
        [CKPT_NOTE_BAD] = "checkpoint_bad_request", [CKPT_NOTE_REFUSED] = "checkpoint_refused",
        [CKPT_NOTE_PERSISTED] = "checkpoint_persisted",
        [CKPT_NOTE_PERSIST_FAILED] = "checkpoint_persist_failed",
    };
    switch (n->kind) {
    case CKPT_NOTE_COMPLETE:
    case CKPT_NOTE_PERSISTED:
        log_debug("checkpoint store: %s", n->message);
        break;
    case CKPT_NOTE_NOFIT:
    case CKPT_NOTE_PERSIST_FAILED:
        log_error("checkpoint store: %s", n->message);
        break;
    case CKPT_NOTE_BAD:
    case CKPT_NOTE_REFUSED:
        log_warn("checkpoint store: %s", n->message);
        break;
    }
    agent_emit(a, names[n->kind], "{s:I, s:i, s:i, s:I, s:s}", "step", (json_int_t)n->step,
               "shard", n->shard, "shards", n->shards, "bytes", (json_int_t)n->bytes, "message",
               n->message);
}

static void agent_checkpoint_close(struct agent *a)
{
    if (!a->ckpt)
        return;
    int q = ckpt_breakpoint(a->ckpt->c); /* leaving: what is not on disk yet goes there now */
    if (q > 0)
        log_info("checkpoint store: writing %d shard(s) to --checkpoint-dir before exiting", q);
    ckpt_flush(a->ckpt->c);
    struct ckpt_note n;
    while (ckpt_next_note(a->ckpt->c, &n) > 0)
        on_note(a, &n); /* a write that failed is said, not lost */
    ckpt_destroy(a->ckpt->c);
    free(a->ckpt);
    a->ckpt = NULL;
}

static void agent_checkpoint_step(struct agent *a, int64_t now)
{
    (void)now;
    if (!a->ckpt)
        return;
    struct ckpt_note n;
    while (ckpt_next_note(a->ckpt->c, &n) > 0)
        on_note(a, &n);
    bool brk = a->state == LC_FAILED || a->state == LC_STOPPING || a->quit.term_signal || a->node.lease_lost;
    if (brk && !a->ckpt->at_break) {
        int q = ckpt_breakpoint(a->ckpt->c);
        if (q > 0)
            log_info("checkpoint store: workers stopping: %d shard(s) not on disk yet are being "
                     "written to --checkpoint-dir", q);
    }
    a->ckpt->at_break = brk;
}

static int agent_checkpoint_fd(const struct agent *a)
{
    return a->ckpt ? ckpt_fd(a->ckpt->c) : -1;
}

static void agent_checkpoint_on_events(struct agent *a)
{
    if (a->ckpt)
        ckpt_on_events(a->ckpt->c);
}

/* ---- the component ----------------------------------------------------------------------- */

static void checkpoint_tick(void *c, int64_t now)
{
    if (agent_in_run(c))
        agent_checkpoint_step(c, now);
}

/* the workers' saves and loads */
AGENT_FD_SOURCE(checkpoint, agent_in_run(a), agent_checkpoint_fd(a), agent_checkpoint_on_events(a))

static const struct agent_step checkpoint_steps[] = {
    {AGENT_AT_CHECK, {"checkpoint", checkpoint_tick, NULL, false}}, /* notes; a breakpoint's writes */
};

static const struct ea_loop_source checkpoint_sources[] = {
    {"checkpoint", 1, fd_checkpoint, on_checkpoint, false},
};

const struct agent_component agent_checkpoint_component = {
    .name = "checkpoint",
    AGENT_STEPS(checkpoint_steps),
    AGENT_SOURCES(checkpoint_sources),
    .open = agent_checkpoint_open,
    .close = agent_checkpoint_close, /* after leaving (nobody waits on our disk), before "exited" */
};
