// SPDX-License-Identifier: Apache-2.0
/*
 * hostsel: which launcher runs this node's workers, and where (--launcher, --host, --ssh-*).
 * `auto` is ssh when --host names another machine, else local; --host's resolved address is
 * what this node publishes (its workers run there). No I/O beyond name resolution.
 */
#ifndef EA_AGENT_HOSTSEL_H
#define EA_AGENT_HOSTSEL_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "ea_error.h"
#include "launcher.h"

/* True when `host` is this machine: localhost, 127.x, ::1, our host name, or one of our
 * interfaces' addresses (after resolving it). */
bool hostsel_is_local(const char *host);

/* The address (numeric, IPv4 preferred) `host` resolves to. -EINVAL naming the host. */
int hostsel_resolve(const char *host, char *addr, size_t size, struct ea_error *err);

/*
 * Fill *lc from the options: name, host, user, identity, port, extra options, guard path and the
 * connection-slot directory (lock_dir, a buffer of lock_size bytes kept by the caller, shared by
 * every agent of this user on this machine). -EINVAL with a message for `--launcher ssh` without
 * --host.
 */
int hostsel_config(const struct cfg *c, struct launcher_config *lc, char *lock_dir,
                   size_t lock_size, struct ea_error *err);

#endif
