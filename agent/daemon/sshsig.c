// SPDX-License-Identifier: Apache-2.0
/* sshsig: parse and verify OpenSSH signatures (PROTOCOL.sshsig) with OpenSSL's EVP. */
#include "sshsig.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARMOR_BEGIN "-----BEGIN SSH SIGNATURE-----"
#define ARMOR_END "-----END SSH SIGNATURE-----"
#define KEY_TYPE "ssh-ed25519"

/* ---- the wire format: uint32 big-endian, string = uint32 length + bytes --------------------- */

struct rd {
    const uint8_t *p;
    size_t n;
};

static bool rd_u32(struct rd *r, uint32_t *ret)
{
    if (r->n < 4)
        return false;
    *ret = (uint32_t)r->p[0] << 24 | (uint32_t)r->p[1] << 16 | (uint32_t)r->p[2] << 8 | r->p[3];
    r->p += 4;
    r->n -= 4;
    return true;
}

static bool rd_string(struct rd *r, const uint8_t **ret, size_t *ret_len)
{
    uint32_t len;
    if (!rd_u32(r, &len) || len > r->n)
        return false;
    *ret = r->p;
    *ret_len = len;
    r->p += len;
    r->n -= len;
    return true;
}

static bool is_str(const uint8_t *p, size_t n, const char *s)
{
    return n == strlen(s) && memcmp(p, s, n) == 0;
}

static size_t put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
    return 4;
}

static size_t put_string(uint8_t *p, const void *s, size_t n)
{
    put_u32(p, (uint32_t)n);
    if (n)
        memcpy(p + 4, s, n);
    return 4 + n;
}

/* A string's bytes as a printable name for messages (at most 40 bytes, others as '?'). */
static void printable(const uint8_t *p, size_t n, char *buf, size_t size)
{
    size_t k = 0;
    for (size_t i = 0; i < n && i < 40 && k + 1 < size; i++)
        buf[k++] = isprint(p[i]) ? (char)p[i] : '?';
    buf[k] = '\0';
}

/* ---- base64 (OpenSSL's codec; canonical, padded input only) ---------------------------------- */

static bool b64_char(unsigned char c)
{
    return isalnum(c) || c == '+' || c == '/';
}

/* Decode base64 `s` (len bytes, white space skipped) into a malloc'ed buffer. */
static int b64_decode(const char *s, size_t len, uint8_t **ret, size_t *ret_len)
{
    if (len > (size_t)INT_MAX / 2)
        return -EBADMSG;
    char *clean = malloc(len + 1);
    uint8_t *out = malloc(len / 4 * 3 + 3);
    size_t n = 0, pad = 0;
    int r = -EBADMSG;
    if (!clean || !out) {
        r = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (isspace(c))
            continue;
        if (c == '=' ? ++pad > 2 : pad || !b64_char(c))
            goto out; /* a character that is not base64, or data after the padding */
        clean[n++] = (char)c;
    }
    if (n == 0 || n % 4)
        goto out;
    int got = EVP_DecodeBlock(out, (const unsigned char *)clean, (int)n);
    if (got < 0 || (size_t)got < pad)
        goto out;
    *ret = out;
    *ret_len = (size_t)got - pad; /* EVP_DecodeBlock counts the padding as zero bytes */
    out = NULL;
    r = 0;
out:
    free(clean);
    free(out);
    return r;
}

/* ---- keys ------------------------------------------------------------------------------------ */

/* An ssh-ed25519 public key wire blob. */
static int key_parse(const uint8_t *blob, size_t len, uint8_t ret[SSHSIG_ED25519_KEY],
                     struct ea_error *err)
{
    struct rd r = {blob, len};
    const uint8_t *type, *key;
    size_t tlen, klen;
    if (!rd_string(&r, &type, &tlen))
        return ea_errorf(err, -EBADMSG, "the public key is truncated");
    if (!is_str(type, tlen, KEY_TYPE)) {
        char name[48];
        printable(type, tlen, name, sizeof(name));
        return ea_errorf(err, -ENOTSUP, "key type '%s' is not supported (ssh-ed25519 only)", name);
    }
    if (!rd_string(&r, &key, &klen) || klen != SSHSIG_ED25519_KEY || r.n != 0)
        return ea_errorf(err, -EBADMSG, "the ssh-ed25519 public key is not 32 bytes");
    memcpy(ret, key, SSHSIG_ED25519_KEY);
    return 0;
}

int sshsig_key_from_base64(const char *b64, size_t len, uint8_t ret[SSHSIG_ED25519_KEY],
                           struct ea_error *err)
{
    uint8_t *blob = NULL;
    size_t n = 0;
    int r = b64_decode(b64, len, &blob, &n);
    if (r < 0)
        return ea_errorf(err, r, r == -ENOMEM ? "out of memory" : "the key is not base64");
    r = key_parse(blob, n, ret, err);
    free(blob);
    return r;
}

void sshsig_fingerprint(const uint8_t key[SSHSIG_ED25519_KEY], char *buf, size_t size)
{
    uint8_t blob[4 + sizeof(KEY_TYPE) - 1 + 4 + SSHSIG_ED25519_KEY], h[EVP_MAX_MD_SIZE];
    unsigned char b64[64];
    unsigned hl = 0;
    size_t n = put_string(blob, KEY_TYPE, strlen(KEY_TYPE));
    n += put_string(blob + n, key, SSHSIG_ED25519_KEY);
    if (EVP_Digest(blob, n, h, &hl, EVP_sha256(), NULL) != 1) {
        snprintf(buf, size, "SHA256:?");
        return;
    }
    int k = EVP_EncodeBlock(b64, h, (int)hl);
    while (k > 0 && b64[k - 1] == '=')
        k--; /* ssh-keygen prints it unpadded */
    snprintf(buf, size, "SHA256:%.*s", k, (const char *)b64);
}

/* ---- the signature --------------------------------------------------------------------------- */

int sshsig_parse(const char *text, size_t len, struct sshsig *ret, struct ea_error *err)
{
    if (len > SSHSIG_ARMOR_MAX)
        return ea_errorf(err, -EBADMSG, "the signature is %zu bytes (at most %d)", len,
                         SSHSIG_ARMOR_MAX);
    const char *end = text + len, *b = text;
    while (b < end && isspace((unsigned char)*b))
        b++;
    size_t nb = strlen(ARMOR_BEGIN), ne = strlen(ARMOR_END);
    if ((size_t)(end - b) < nb || memcmp(b, ARMOR_BEGIN, nb) != 0)
        return ea_errorf(err, -EBADMSG, "not an SSH signature (no '" ARMOR_BEGIN "')");
    b += nb;
    const char *e = end;
    while (e > b && isspace((unsigned char)e[-1]))
        e--;
    if ((size_t)(e - b) < ne || memcmp(e - ne, ARMOR_END, ne) != 0)
        return ea_errorf(err, -EBADMSG, "the SSH signature has no '" ARMOR_END "'");
    e -= ne;
    uint8_t *blob = NULL;
    size_t n = 0;
    int r = b64_decode(b, (size_t)(e - b), &blob, &n);
    if (r < 0)
        return ea_errorf(err, r, r == -ENOMEM ? "out of memory"
                                              : "the SSH signature's body is not base64");
    struct rd rd = {blob, n};
    struct sshsig s = {0};
    const uint8_t *key, *ns, *reserved, *hash, *sig, *type, *raw;
    size_t klen, nslen, rlen, hlen, slen, tlen, rawlen;
    uint32_t version = 0;
    r = -EBADMSG;
    if (n < 6 || memcmp(blob, "SSHSIG", 6) != 0) {
        ea_errorf(err, r, "the SSH signature does not start with \"SSHSIG\"");
        goto out;
    }
    rd.p += 6;
    rd.n -= 6;
    if (!rd_u32(&rd, &version) || version != 1) {
        ea_errorf(err, r, "SSH signature version %u (only 1 is known)", version);
        goto out;
    }
    if (!rd_string(&rd, &key, &klen) || !rd_string(&rd, &ns, &nslen) ||
        !rd_string(&rd, &reserved, &rlen) || !rd_string(&rd, &hash, &hlen) ||
        !rd_string(&rd, &sig, &slen) || rd.n != 0) {
        ea_errorf(err, r, "the SSH signature is truncated or has trailing bytes");
        goto out;
    }
    (void)reserved; /* what is signed carries an empty reserved field, as OpenSSH's verify */
    if ((r = key_parse(key, klen, s.key, err)) < 0)
        goto out;
    r = -EBADMSG;
    if (nslen == 0 || nslen >= sizeof(s.ns) || memchr(ns, '\0', nslen)) {
        ea_errorf(err, r, "the SSH signature's namespace is empty, too long or has a NUL byte");
        goto out;
    }
    memcpy(s.ns, ns, nslen);
    if (!is_str(hash, hlen, "sha256") && !is_str(hash, hlen, "sha512")) {
        char name[48];
        printable(hash, hlen, name, sizeof(name));
        ea_errorf(err, r, "hash algorithm '%s' (sha256 or sha512 expected)", name);
        goto out;
    }
    memcpy(s.hash, hash, hlen);
    struct rd sr = {sig, slen};
    if (!rd_string(&sr, &type, &tlen) || !is_str(type, tlen, KEY_TYPE) ||
        !rd_string(&sr, &raw, &rawlen) || rawlen != SSHSIG_ED25519_SIG || sr.n != 0) {
        ea_errorf(err, r, "the signature inside is not a 64-byte ssh-ed25519 one");
        goto out;
    }
    memcpy(s.sig, raw, SSHSIG_ED25519_SIG);
    *ret = s;
    r = 0;
out:
    free(blob);
    return r;
}

int sshsig_verify(const struct sshsig *s, const char *ns, const void *msg, size_t len,
                  struct ea_error *err)
{
    if (strcmp(s->ns, ns) != 0)
        return ea_errorf(err, -EBADMSG, "signed for namespace '%s', not '%s'", s->ns, ns);
    const EVP_MD *md = strcmp(s->hash, "sha512") == 0 ? EVP_sha512() : EVP_sha256();
    uint8_t h[EVP_MAX_MD_SIZE];
    unsigned hl = 0;
    if (EVP_Digest(msg, len, h, &hl, md, NULL) != 1)
        return ea_errorf(err, -ENOMEM, "OpenSSL could not hash the message");
    /* what was signed: "SSHSIG", string namespace, string reserved, string hash, string H */
    size_t nsl = strlen(s->ns), hashl = strlen(s->hash);
    uint8_t *buf = malloc(6 + 4 + nsl + 4 + 4 + hashl + 4 + hl);
    if (!buf)
        return ea_errorf(err, -ENOMEM, "out of memory");
    size_t n = 6;
    memcpy(buf, "SSHSIG", 6);
    n += put_string(buf + n, s->ns, nsl);
    n += put_string(buf + n, "", 0);
    n += put_string(buf + n, s->hash, hashl);
    n += put_string(buf + n, h, hl);
    int r = -ENOMEM;
    EVP_PKEY *pk = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, s->key, SSHSIG_ED25519_KEY);
    EVP_MD_CTX *c = pk ? EVP_MD_CTX_new() : NULL;
    if (!c || EVP_DigestVerifyInit(c, NULL, NULL, NULL, pk) != 1) {
        ea_errorf(err, r, "OpenSSL could not set up an Ed25519 verification");
    } else if (EVP_DigestVerify(c, s->sig, SSHSIG_ED25519_SIG, buf, n) == 1) {
        r = 0;
    } else {
        r = ea_errorf(err, -EBADMSG, "the signature does not verify (the signed bytes were "
                                     "changed, or it was made by another key)");
    }
    EVP_MD_CTX_free(c);
    EVP_PKEY_free(pk);
    free(buf);
    return r;
}
