// SPDX-License-Identifier: Apache-2.0
/*
 * sshsig: OpenSSH's signature format (PROTOCOL.sshsig; what `ssh-keygen -Y sign` writes and git
 * verifies against an allowed_signers file): parse an armoured SSHSIG, verify it over a message
 * for a namespace, and name a key as `ssh-keygen -l` does (SHA256:<base64>). Ed25519 keys only;
 * every cryptographic step is OpenSSL 3's (EVP), never our own. No I/O, never logs.
 */
#ifndef EA_AGENT_DAEMON_SSHSIG_H
#define EA_AGENT_DAEMON_SSHSIG_H

#include <stddef.h>
#include <stdint.h>

#include "ea_error.h"

#define SSHSIG_ED25519_KEY 32
#define SSHSIG_ED25519_SIG 64
/* "SHA256:" + 43 base64 characters + NUL */
#define SSHSIG_FP_MAX 52
/* Largest armoured signature accepted (an Ed25519 one is about 300 bytes). */
#define SSHSIG_ARMOR_MAX 4096

struct sshsig {
    uint8_t key[SSHSIG_ED25519_KEY]; /* the signer's Ed25519 public key */
    char ns[128];                    /* the namespace it was made for */
    char hash[8];                    /* "sha256" or "sha512" */
    uint8_t sig[SSHSIG_ED25519_SIG];
};

/*
 * Parse `text` (len bytes): "-----BEGIN SSH SIGNATURE-----", base64 lines, "-----END SSH
 * SIGNATURE-----". Checks the blob's shape: magic "SSHSIG", version 1, an ssh-ed25519 public key,
 * a namespace, a hash algorithm sha256/sha512, an ssh-ed25519 signature, nothing after it.
 * 0, or -EBADMSG with a message naming what is wrong (-ENOTSUP for another key type, naming it).
 * *ret untouched on failure.
 */
int sshsig_parse(const char *text, size_t len, struct sshsig *ret, struct ea_error *err);

/*
 * Verify `s` over message `msg` (len bytes) for namespace `ns`: the namespace must be `ns`, and
 * the Ed25519 signature must verify over "SSHSIG" || string(ns) || string("") || string(hash) ||
 * string(H(msg)) with the key in `s`. 0, or -EBADMSG with the reason (-ENOMEM: OpenSSL failed).
 */
int sshsig_verify(const struct sshsig *s, const char *ns, const void *msg, size_t len,
                  struct ea_error *err);

/* The key's fingerprint as `ssh-keygen -l` prints it: "SHA256:" and the unpadded base64 of the
 * SHA-256 of its wire blob (string "ssh-ed25519", string key). buf of SSHSIG_FP_MAX bytes. */
void sshsig_fingerprint(const uint8_t key[SSHSIG_ED25519_KEY], char *buf, size_t size);

/* Decode the base64 of a key as an allowed_signers or .pub file writes it (the wire blob) into
 * the Ed25519 key: 0, -ENOTSUP naming another key type in *err, or -EBADMSG. */
int sshsig_key_from_base64(const char *b64, size_t len, uint8_t ret[SSHSIG_ED25519_KEY],
                           struct ea_error *err);

#endif
