// SPDX-License-Identifier: Apache-2.0
/* node internals, shared by node.c and node_ring.c. Not for other modules: node.h is the unit's
 * interface. */
#ifndef EA_AGENT_NODE_NODE_INTERNAL_H
#define EA_AGENT_NODE_NODE_INTERNAL_H

#include "node.h"

/* Hand a log line to the owner (node_ops.log); formatted only when there is one. */
void node_log(struct node *n, enum node_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void node_event(struct node *n, const struct node_event *e);
/* The session's warning, if any, logged as a warning. */
void node_take_warning(struct node *n);

#endif
