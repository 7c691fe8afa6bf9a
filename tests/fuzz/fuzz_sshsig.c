// SPDX-License-Identifier: Apache-2.0
/* Fuzz target: the signature parser/verifier and the allowed_signers parser
 * (agent/daemon/sshsig.c, signers.c) — a spec's "signature" is written by anybody with access to
 * the store. The input is read as an armoured SSH signature (then verified over itself) and as
 * an allowed_signers file (then asked about a key); neither may crash, and a refusal always
 * says why. */
#include <string.h>

#include "fuzz.h"
#include "signers.h"
#include "specsig.h"
#include "sshsig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sshsig s;
    struct ea_error err = {0};
    if (sshsig_parse((const char *)data, size, &s, &err) == 0) {
        FUZZ_CHECK(s.ns[0] && (!strcmp(s.hash, "sha256") || !strcmp(s.hash, "sha512")));
        ea_error_clear(&err);
        if (sshsig_verify(&s, SPECSIG_NAMESPACE, data, size, &err) < 0)
            FUZZ_CHECK(err.msg[0]);
        char fp[SSHSIG_FP_MAX];
        sshsig_fingerprint(s.key, fp, sizeof(fp));
        FUZZ_CHECK(strncmp(fp, "SHA256:", 7) == 0 && strlen(fp) == 50);
    } else {
        FUZZ_CHECK(err.msg[0]);
    }
    struct signers *g = NULL;
    ea_error_clear(&err);
    if (signers_parse((const char *)data, size, "fuzz", &g, &err) == 0) {
        FUZZ_CHECK(g->n <= SIGNERS_MAX);
        const struct signer *who = NULL;
        uint8_t key[SSHSIG_ED25519_KEY] = {0};
        if (g->n)
            memcpy(key, g->v[0].key, sizeof(key));
        if (signers_match(g, key, SPECSIG_NAMESPACE, 1700000000, &who, &err) == 0)
            FUZZ_CHECK(who && !memcmp(who->key, key, sizeof(key)));
        else
            FUZZ_CHECK(err.msg[0]);
        signers_free(g);
    } else {
        FUZZ_CHECK(err.msg[0] && !g);
    }
    return 0;
}
