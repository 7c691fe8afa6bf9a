// SPDX-License-Identifier: Apache-2.0
/*
 * specsig: whether a daemon may run a queued run spec (docs/security.md, "Signed submissions"):
 * the spec's SSH signature (sshsig.c) over its canonical bytes (runspec_canonical) must verify,
 * for our namespace, by a key of the allowed signers (signers.c) valid now; the spec must name
 * this pool and be unexpired. Pure decisions: no I/O, no logging.
 */
#ifndef EA_AGENT_DAEMON_SPECSIG_H
#define EA_AGENT_DAEMON_SPECSIG_H

#include <stdbool.h>
#include <stdint.h>

#include "ea_error.h"
#include "runspec.h"
#include "signers.h"
#include "sshsig.h"

/* The signature namespace of a run spec: a signature made for git, a file or e-mail is not one. */
#define SPECSIG_NAMESPACE "elastic-agent-submit"
/* submit --valid-for: its default and bounds (a daemon refuses a spec valid for longer). */
#define SPECSIG_VALID_DEFAULT_MS (24LL * 3600 * 1000)
#define SPECSIG_VALID_MIN_MS (60LL * 1000)
#define SPECSIG_VALID_MAX_MS (30LL * 86400 * 1000)
/* How far a spec's submit time may lie ahead of this node's clock (the signer's clock is ahead):
 * beyond it, the spec is signed for later, and its validity would start when the signer chose. */
#define SPECSIG_CLOCK_SKEW_MS (5LL * 60 * 1000)

struct specsig_policy {
    const struct signers *signers; /* the allowed signers, or NULL (then allow_unsigned) */
    bool allow_unsigned;           /* run specs without a signature (serve --allow-unsigned) */
    const char *pool;              /* the daemon's pool */
    const char *prefix;            /* ... under this --prefix (NULL: not checked) */
};

struct specsig_verdict {
    bool is_signed;                  /* the spec carries a signature */
    bool verified;                   /* ... that verified by an allowed signer */
    char principal[256];             /* that signer's principals ("" unless verified) */
    char fingerprint[SSHSIG_FP_MAX]; /* the signing key's, "" when unsigned or unreadable */
    char reason[EA_ERROR_MSG_MAX];   /* why the spec is refused ("" when it is not) */
};

/*
 * The decision on spec `s` at wall-clock time now_ms: 0 (may run; *v says who signed it) or
 * -EPERM with v->reason. In this order: a signature is required unless p->allow_unsigned; one
 * that is there must parse, and with p->signers verify over runspec_canonical(s) for
 * SPECSIG_NAMESPACE by a key that signers_match() allows now; then the spec's pool must be
 * p->pool (under p->prefix), and its times must pass specsig_check_time (a verified spec must
 * name pool, prefix and expiry; an unsigned one is held to those it names).
 */
int specsig_check(const struct specsig_policy *p, const struct runspec *s, int64_t now_ms,
                  struct specsig_verdict *v);

/*
 * The time part of specsig_check, pure (now_ms is the caller's wall clock): 0 when spec `s` may
 * start at now_ms by its submit time and expiry, else -EPERM with what is wrong in err. A spec
 * without an expiry (expires_ms 0: only an unsigned one may lack it) is held to nothing. Else it is
 * refused, in this order, when: submitted_ms is negative; expires_ms is not after submitted_ms;
 * submitted_ms is more than SPECSIG_CLOCK_SKEW_MS ahead of now_ms; now_ms is past expires_ms; it
 * is valid (expires_ms - submitted_ms) for longer than SPECSIG_VALID_MAX_MS. Whatever the values,
 * nothing overflows.
 */
int specsig_check_time(const struct runspec *s, int64_t now_ms, struct ea_error *err);

/* What `s` carries without judging it (status without allowed signers): is_signed, the key's
 * fingerprint, or in reason why the signature cannot be read. */
void specsig_describe(const struct runspec *s, struct specsig_verdict *v);

#endif
