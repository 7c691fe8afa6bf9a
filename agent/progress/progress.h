// SPDX-License-Identifier: Apache-2.0
/*
 * pg: progress-aware restarts (issue 40, docs/restarts.md). Each rank beats its step into its own
 * file (ELASTIC_HEARTBEAT_FILE, the same file hang detection watches); the agent reads the files
 * only when a local worker fails and, for `status` and /metrics, at most every PG_READ_MS. The
 * failing node carries where the run was (struct rdzv_progress) in its failure record, following
 * on from the previous failure's record: no store write per step, O(1) bytes per failed round.
 * pg_next() (the rule) and pg_stop_message() are pure. No logging.
 */
#ifndef EA_AGENT_PROGRESS_PROGRESS_H
#define EA_AGENT_PROGRESS_PROGRESS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"
#include "state.h"

/* The running round's steps are read this often for status and /metrics (a failure reads them at
 * once). */
#define PG_READ_MS 5000

struct pg {
    int limit;          /* --max-restarts-without-progress (0: the rule is off) */
    int64_t read_ms;    /* the files are read this often (PG_READ_MS, or faster) */
    double *compute;    /* per rank: the compute time its file said at the last read
                           (seconds, 0 none): straggler detection's samples */
    char dir[PATH_MAX]; /* the round's heartbeat directory: <dir>/rank_<rank> */
    int n, rank_base;   /* this node's ranks of the armed round */
    bool armed;
    int64_t step;             /* highest step this node's ranks beat in the armed round, -1 */
    int64_t read_at;          /* monotonic: next read of the files (pg_due) */
    struct rdzv_progress run; /* the run's, from the last failure record known here */
    int64_t run_round;        /* round of that record, 0: none */
    bool passed;              /* the armed round got past run.best (reported once) */
};

/* Create the state for `limit` (--max-restarts-without-progress) reading the files every
 * `read_ms` (0: PG_READ_MS); *ret NULL (off, every call below a no-op) when limit is 0 and not
 * `always` (straggler detection wants the files too). */
int pg_create(int limit, bool always, int64_t read_ms, struct pg **ret, struct ea_error *err);
void pg_destroy(struct pg *p);

/* A round's workers are about to start: their files are <dir>/rank_<rank_base + i>, i < n. With
 * `prepare` the directory is created and those files removed (hang detection did neither); the
 * step read is -1 until a rank beats. */
int pg_arm(struct pg *p, const char *dir, bool prepare, int n, int rank_base, int64_t now,
           struct ea_error *err);
void pg_disarm(struct pg *p);

/* Read every rank's file now: the highest step among them (-1: none beat a step), kept in
 * p->step, and each rank's compute time in p->compute[i]. One open/read per rank. */
int64_t pg_read(struct pg *p, int64_t now);
/* Is a periodic read due at `now`? Its monotonic time (-1: not armed) for the loop's wake. */
bool pg_due(const struct pg *p, int64_t now);
int64_t pg_wake_ms(const struct pg *p);
/* After a read: true once per armed round, when this node's ranks got past the run's best step
 * of the last failure (a progress restart). */
bool pg_passed(struct pg *p);
/* Restarts without progress as known here (0 once the running round passed the best step). */
int pg_no_progress(const struct pg *p);

/* What a rank's file says: the leading decimal step ("1234\n", "1234 0.5\n"), else -1 (a phase
 * name, empty, a touch). Pure. */
int64_t pg_parse_step(const char *buf, size_t len);

/* Are a and b the same failure: the same rank position or the same node, and the same exit code
 * and signal? Pure. */
bool pg_same(const struct rdzv_failure *a, const struct rdzv_failure *b);

/*
 * The rule (pure): failure `f` happened at `step` (the failing node's highest beat, -1 unknown);
 * `prev` is the run's previous failure record (NULL: none). Progress: `step` passed prev's best
 * step (or there is no earlier failure): the counts start again (no_progress 0, repeat 1).
 * Otherwise no_progress is one more, and repeat is one more when `f` is the same failure as prev
 * (else 1). Without any step known (step -1, no best before) nothing can be said: counts as
 * progress. stop (limit > 0, never after progress): the same failure `limit` times in a row, or
 * `limit` restarts in a row without progress (and failing again).
 */
void pg_next(const struct rdzv_failure *prev, const struct rdzv_failure *f, int64_t step, int limit,
             struct rdzv_progress *ret);

/* The one line that ends a run with progress.stop set, root cause once (its first line):
 * "the same failure 3 times in a row at step 1200, no progress: <root cause>" (pure). */
void pg_stop_message(const struct rdzv_failure *f, char *buf, size_t size);

#endif
