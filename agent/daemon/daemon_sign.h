// SPDX-License-Identifier: Apache-2.0
/*
 * daemon_sign: signing a run spec at submit (submit --sign-with KEY) by running OpenSSH's own
 * `ssh-keygen -Y sign -f KEY -n elastic-agent-submit` on its canonical bytes: KEY is a private
 * key file, or a public key whose private half ssh-agent holds; a passphrase is asked by
 * ssh-keygen on the terminal. No key material passes through this program. Not a public interface.
 */
#ifndef EA_AGENT_DAEMON_DAEMON_SIGN_H
#define EA_AGENT_DAEMON_DAEMON_SIGN_H

#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"
#include "runspec.h"
#include "sshsig.h"

/*
 * Sign `s` (every field but its signature: runspec_canonical) with `key`, running ssh-keygen
 * from the PATH of `envp` with that environment (SSH_AUTH_SOCK reaches it), and check the
 * signature it made (an ssh-ed25519 one that verifies). 0 with s->signature set and the key's
 * fingerprint in ret_fp (SSHSIG_FP_MAX bytes); -errno with ssh-keygen's own message on failure.
 */
int daemon_sign(char **envp, const char *key, struct runspec *s, char *ret_fp,
                struct ea_error *err);

/* A --valid-for DURATION: N[s|m|h|d] (plain N: seconds) into ms within the bounds of specsig.h.
 * 0, or -EINVAL naming the value and the bounds. */
int daemon_parse_validity(const char *v, int64_t *ret_ms, struct ea_error *err);

#endif
