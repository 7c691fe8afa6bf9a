// SPDX-License-Identifier: Apache-2.0
/*
 * netif: this host's network interfaces as NIC discovery publishes them (name, numeric address,
 * prefix length), from getifaddrs(). IPv4 and global IPv6 addresses of interfaces that are up;
 * link-local IPv6 is left out (it needs a scope to be probed). Loopback is listed — whether it
 * is probed is decided per round (nic.c: only when every node is on one host). No logging.
 */
#ifndef EA_AGENT_NETIF_H
#define EA_AGENT_NETIF_H

#include <stdbool.h>
#include <stddef.h>

#include "ea_error.h"
#include "state.h"

/* Validate a --iface list: comma-separated interface names of 1-15 characters without '/', ':'
 * or white space. -EINVAL with a message. */
int netif_check_list(const char *list, struct ea_error *err);

/* Is `name` in the comma list (NULL list: every name is)? */
bool netif_in_list(const char *list, const char *name);

/* Enumerate up to `max` addresses, keeping only interfaces named in `filter` (NULL: all). Every
 * name in `filter` must have at least one address, else -ENODEV with a message naming it and
 * the interfaces that exist. *ret_skipped (may be NULL): addresses left out because `max` was
 * reached (their interface names, comma-separated, in skipped_names when it is not NULL). */
int netif_list(const char *filter, struct rdzv_iface *out, size_t max, size_t *ret_n,
               size_t *ret_skipped, char *skipped_names, size_t names_size,
               struct ea_error *err);

/* Is the numeric address a loopback address (127.0.0.0/8, ::1)? */
bool netif_is_loopback(const char *addr);

#endif
