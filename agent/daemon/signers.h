// SPDX-License-Identifier: Apache-2.0
/*
 * signers: an OpenSSH allowed_signers file (ssh-keygen(1), "ALLOWED SIGNERS"; what git's
 * gpg.ssh.allowedSignersFile holds): `principal[,principal...] [options] keytype base64-key
 * [comment]` lines, options namespaces="pattern-list", valid-after=, valid-before= (YYYYMMDD[Z],
 * YYYYMMDDHHMM[SS][Z]; local time unless Z). Which keys may sign what, and until when. Only
 * ssh-ed25519 keys are used (lines of other key types are skipped, and said so); cert-authority
 * lines are refused (SSH certificates are not supported). No logging.
 */
#ifndef EA_AGENT_DAEMON_SIGNERS_H
#define EA_AGENT_DAEMON_SIGNERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"
#include "sshsig.h"

#define SIGNERS_BYTES_MAX (1u << 20)
#define SIGNERS_MAX 10000

struct signer {
    char principals[256];  /* the line's principals field as written */
    char *namespaces;      /* namespaces="..." pattern-list, or NULL: any namespace */
    int64_t valid_after;   /* unix seconds, INT64_MIN: unset */
    int64_t valid_before;  /* unix seconds, INT64_MAX: unset */
    uint8_t key[SSHSIG_ED25519_KEY];
    int line;
};

struct signers {
    char name[256];        /* the file's name, for messages */
    struct signer *v;
    size_t n;
    size_t n_skipped;      /* lines of a key type that is not ssh-ed25519 */
    char skipped[160];     /* the first of them, "NAME:LINE: key type 'ssh-rsa'" */
};

/* Parse the text of an allowed_signers file (`name` is used in messages). 0 and a malloc'ed
 * *ret, or -EINVAL with "NAME:LINE: ..." naming what is wrong (-ENOMEM). */
int signers_parse(const char *text, size_t len, const char *name, struct signers **ret,
                  struct ea_error *err);
/* Read and parse file `path` (at most SIGNERS_BYTES_MAX): as signers_parse, -errno when it
 * cannot be read. */
int signers_load(const char *path, struct signers **ret, struct ea_error *err);
/* NULL-safe. */
void signers_free(struct signers *s);

/*
 * The signer of `key` allowed to sign in namespace `ns` at unix time `now_s`: 0 and *ret (owned by
 * `s`), or -EPERM with the reason (the key's fingerprint, and for a listed key which line refuses
 * it and why: another namespace, not valid yet, no longer valid).
 */
int signers_match(const struct signers *s, const uint8_t key[SSHSIG_ED25519_KEY], const char *ns,
                  int64_t now_s, const struct signer **ret, struct ea_error *err);

/* OpenSSH's pattern-list match (ssh_config(5) PATTERNS): comma-separated patterns with * and ?,
 * a '!' pattern negates; true when `s` matches a pattern and no negated one. */
bool signers_pattern_match(const char *list, const char *s);

#endif
