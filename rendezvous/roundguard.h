// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv roundguard: the rendezvous values a node acts on, checked against who may write them
 * (docs/security.md "Rendezvous keys"). `rounds/<r>/master` and `rounds/<r>/tracker` are used
 * only when group rank 0 of round r wrote them, on an address its node record lists;
 * `failures/<r>` and `reform/<r>` count only when they name a member of round r; the
 * coordinator deletes keys of rounds after the one it commits. Session internals (rendezvous/
 * only): no logging, refusals become the session's warnings.
 */
#ifndef EA_RENDEZVOUS_ROUNDGUARD_H
#define EA_RENDEZVOUS_ROUNDGUARD_H

#include <stdbool.h>
#include <stdint.h>

#include "ea_error.h"
#include "state.h"

struct rdzv_session;

/* The per-round values group rank 0 publishes: rounds/<r>/<rdzv_guard_names[i]>. */
enum { RDZV_GUARD_MASTER, RDZV_GUARD_TRACKER, RDZV_GUARD_N };
#define RDZV_GUARD_ADDR_MAX (RDZV_ADDR_MAX + 8) /* "[v6]:port" */

/* What was decided about one value of the current round. */
struct rdzv_guard_value {
    int64_t rev; /* mod_revision of the entry judged; 0: nothing judged */
    bool ok;
    char addr[RDZV_GUARD_ADDR_MAX]; /* ADDR:PORT, when ok */
};

/* Per session: the verdicts for the round `round`, and who group rank 0 of it is. */
struct rdzv_guard {
    int64_t round;             /* the round judged (0: none yet) */
    char claimed[RDZV_ID_MAX]; /* node id a value named, whose standing is below */
    int leader;                /* 1: `claimed` is group rank 0 of `round`, 0: it is not */
    struct rdzv_node record;   /* its node record, when leader */
    struct rdzv_guard_value v[RDZV_GUARD_N];
};

extern const char *const rdzv_guard_names[RDZV_GUARD_N];

/* Index of `name` among rdzv_guard_names, or -1 (a value nobody acts on: recovery, detect). */
int rdzv_guard_index(const char *name);

/* Judge the current round's master and tracker when they changed (light mode: at most two
 * reads a round, of group rank 0's node record and assignment chunk). A value refused is
 * reported once through the session's warning and never returned by rdzv_guard_value().
 * 0, or a store error (judged again on the next call). */
int rdzv_guard_round_keys(struct rdzv_session *s, struct ea_error *err);

/* The accepted ADDR:PORT of rounds/<round>/<name> (a guarded name), or NULL. */
const char *rdzv_guard_value(const struct rdzv_session *s, int64_t round, int which);

/*
 * Group rank 0 publishes rounds/<round>/<name> = addr_port, fenced on the commit record (it is
 * group rank 0 of the round `state` names): create-only, and when a value is there that does
 * not pass the check (a forged or stale one), it is overwritten (CAS on its mod_revision); a
 * value that passes (ours) wins. -EPERM when this node is not group rank 0
 * of `round`; KV_ECONFLICT when the commit record or the key changed meanwhile (try again).
 */
int rdzv_guard_publish(struct rdzv_session *s, int64_t round, int which, const char *addr_port,
                       struct ea_error *err);

/* Full mode: does `key` (failures/<r> or reform/<r> of the committed round) exist and name a
 * member of that round? A record naming anyone else is reported once and does not count.
 * A failure record that counts and says the run ends (its progress.stop) sets *ret_stop (NULL:
 * not asked; left alone otherwise). */
bool rdzv_guard_report_counts(struct rdzv_session *s, const char *key, bool is_failure,
                              bool *ret_stop);

/* The coordinator, right after a commit: delete every key of a round later than the committed
 * one (rounds/<n>/..., failures/<n>, reform/<n>, done/<n>/...) in transactions fenced on
 * `state` and `coord`. Nobody may write them yet, so they were planted; a failure is reported
 * as a warning (the next commit tries again). */
void rdzv_guard_cleanup(struct rdzv_session *s);

#endif
