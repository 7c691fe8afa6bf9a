// SPDX-License-Identifier: Apache-2.0
/*
 * daemon_trust: a daemon's policy on who may make it run what (serve --allowed-signers FILE,
 * --allow-unsigned; docs/security.md, "Signed submissions"). It judges each spec before the
 * daemon runs it (specsig.c), says once in the pool why a spec is refused (a log line and a
 * `spec_refused` event by the daemon that moved it aside) and re-reads the allowed signers file
 * when it changes. Not a public interface: serve.c's.
 */
#ifndef EA_AGENT_DAEMON_DAEMON_TRUST_H
#define EA_AGENT_DAEMON_DAEMON_TRUST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "events.h"
#include "pool.h"
#include "signers.h"
#include "specsig.h"

struct daemon_trust {
    struct specsig_policy policy;
    struct signers *signers; /* owned; NULL without --allowed-signers */
    const char *path;        /* --allowed-signers, or NULL */
    dev_t dev;               /* the file as last read: re-read when any of these change */
    ino_t ino;
    int64_t mtime_ns;
    int64_t ctime_ns;        /* a chmod or chown changes only this */
    off_t size;
    char unusable[EA_ERROR_MSG_MAX]; /* why the file cannot be used now ("": it can): no key is
                                      * trusted meanwhile */
    struct pool *pool;      /* borrowed */
    struct events *events;  /* borrowed, may be NULL */
    const char *node;       /* borrowed */
};

/*
 * Set up `t` for pool `pool_name` under `prefix` from --allowed-signers `path` (NULL: none) and --allow-unsigned:
 * neither is a configuration error, as is an allowed signers file that cannot be read or parsed.
 * `pool` (borrowed) is that pool's handle, set up before the first gate. 0, or -EINVAL with the
 * message to print in *err. Logs nothing.
 */
int daemon_trust_open(struct daemon_trust *t, const char *path, bool allow_unsigned,
                      const char *pool_name, const char *prefix, struct pool *pool,
                      const char *node, struct ea_error *err);
/* Log what the policy is (the allowed signers, the --allow-unsigned warning) at start. */
void daemon_trust_announce(const struct daemon_trust *t);
void daemon_trust_close(struct daemon_trust *t);

/* pool_hooks.gate: the decision on `s` now, re-reading the allowed signers file first when it
 * changed. Fails closed: while the file is missing, unreadable or does not parse, no key is
 * trusted (signed specs are refused, naming why); said once when that starts, and again when the
 * file is read again. */
int daemon_trust_gate(void *ctx, const struct runspec *s, struct specsig_verdict *v);
/* pool_hooks.refused: log and emit `spec_refused` (the one daemon whose move won). */
void daemon_trust_refused(void *ctx, const struct runspec *s, const struct specsig_verdict *v);

/*
 * The last check before a daemon runs `s` (read from the queue): 0 to run it, *v naming its
 * signer; -EPERM when refused: then moved aside and said (by this daemon, or by the one that was
 * first). A KV error moving it aside is logged; -EPERM all the same.
 */
int daemon_trust_admit(struct daemon_trust *t, const struct runspec *s,
                       struct specsig_verdict *v);

#endif
