// SPDX-License-Identifier: Apache-2.0
/*
 * rdzv keys: the run's keys that live outside a session (docs/protocol.md's table), built and
 * told apart here, so that no folder outside rendezvous/ spells a key: `state` read before a
 * node joins, `held/<node-id>` (a node --preflight holds out), and the kind of a key in a
 * listing (`held/...`, `rounds/<r>/<name>`). A session's own keys are built in session.c.
 */
#ifndef EA_RENDEZVOUS_KEYS_H
#define EA_RENDEZVOUS_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"

struct kv;

/* "<prefix>held/<node_id>" into buf: 0, or -ENAMETOOLONG when it does not fit. */
int rdzv_key_held(const char *prefix, const char *node_id, char *buf, size_t size);

enum rdzv_key_kind {
    RDZV_KEY_OUTSIDE, /* not under the prefix */
    RDZV_KEY_OTHER,   /* under it, none of the below */
    RDZV_KEY_HELD,    /* held/<node-id>: *rest is the node id */
    RDZV_KEY_ROUND,   /* rounds/<r>/<name>: *round is r (> 0), *rest is name */
};

/* What `key` of a listing of `prefix` is. */
enum rdzv_key_kind rdzv_key_parse(const char *prefix, const char *key, int64_t *round,
                                  const char **rest);

/* Is a round of the run under `prefix` running (its `state` says RUNNING)? One read, for a node
 * that has not joined: *running false when there is no state yet, it is over, or it is not ours
 * (the join finds out why). A store error: its code, *running false. */
int rdzv_peek_running(struct kv *kv, const char *prefix, bool *running, struct ea_error *err);

#endif
