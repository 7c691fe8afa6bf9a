// SPDX-License-Identifier: Apache-2.0
/*
 * hview: what `elastic-agent status` shows about health, read from a listing of the run's keys:
 * the nodes held out by a failing --preflight (one leased `held/<node-id>` key each) and the last
 * round's recovery phases (`rounds/<r>/recovery`, written by that round's group rank 0). Kept
 * apart from rendezvous/view.c: these keys are the agent's, not the protocol's. No I/O.
 */
#ifndef EA_AGENT_OBSERVE_HEALTH_VIEW_H
#define EA_AGENT_OBSERVE_HEALTH_VIEW_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "kv.h"
#include "phases.h"

struct hview_held {
    char node[128];
    char reason[640]; /* "exit 1: <last lines>" or "timed out after 60 s: ..." */
    long long since_ms;
};

struct hview {
    struct hview_held *held; /* owned */
    size_t n_held;
    bool have_recovery;
    struct ph_record recovery; /* of the highest round that has one */
};

/* Decode from the `n` entries of a listing of `prefix` (ends with '/'). Records that do not
 * parse are skipped. 0 or -ENOMEM (then *ret is untouched). */
int hview_decode(const char *prefix, const struct kv_entry *e, size_t n, struct hview *ret);
void hview_clear(struct hview *v);

/* Lines for the status table ("last recovery ...", "held out ..."); nothing when empty. */
void hview_print_text(FILE *out, const struct hview *v);
/* Add "held" (array of {node, reason, since_ms}) when a node is held, and "last_recovery" (the
 * phases object) when a round has a record. */
void hview_add_json(json_t *o, const struct hview *v);

/* The value of a held/<node-id> key. */
char *hview_held_json(const char *node, const char *reason, long long since_ms);

#endif
