// SPDX-License-Identifier: Apache-2.0
/* specsig: the decision whether a daemon may run a queued run spec (specsig.h). */
#include "specsig.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int refuse(struct specsig_verdict *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int refuse(struct specsig_verdict *v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->reason, sizeof(v->reason), fmt, ap);
    va_end(ap);
    v->verified = false;
    v->principal[0] = '\0';
    return -EPERM;
}

static void iso_ms(int64_t ms, char *buf, size_t size)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, size, "%lld ms", (long long)ms);
}

void specsig_describe(const struct runspec *s, struct specsig_verdict *v)
{
    memset(v, 0, sizeof(*v));
    if (!s->signature)
        return;
    v->is_signed = true;
    struct sshsig sig;
    struct ea_error err = {0};
    if (sshsig_parse(s->signature, strlen(s->signature), &sig, &err) < 0)
        snprintf(v->reason, sizeof(v->reason), "signature: %s", err.msg);
    else
        sshsig_fingerprint(sig.key, v->fingerprint, sizeof(v->fingerprint));
}

/* A signature there: it must verify by an allowed signer (with p->signers). */
static int check_signature(const struct specsig_policy *p, const struct runspec *s,
                           int64_t now_ms, struct specsig_verdict *v)
{
    struct sshsig sig;
    struct ea_error err = {0};
    if (sshsig_parse(s->signature, strlen(s->signature), &sig, &err) < 0)
        return refuse(v, "signature: %s", err.msg);
    sshsig_fingerprint(sig.key, v->fingerprint, sizeof(v->fingerprint));
    if (!p->signers)
        return 0; /* --allow-unsigned without allowed signers: not checked */
    char *msg = NULL;
    size_t len = 0;
    if (runspec_canonical(s, &msg, &len, &err) < 0)
        return refuse(v, "%s", err.msg);
    int r = sshsig_verify(&sig, SPECSIG_NAMESPACE, msg, len, &err);
    free(msg);
    if (r < 0)
        return refuse(v, "signature by key %s: %s", v->fingerprint, err.msg);
    const struct signer *who = NULL;
    if (signers_match(p->signers, sig.key, SPECSIG_NAMESPACE, now_ms / 1000, &who, &err) < 0)
        return refuse(v, "%s", err.msg);
    v->verified = true;
    snprintf(v->principal, sizeof(v->principal), "%s", who->principals);
    return 0;
}

int specsig_check(const struct specsig_policy *p, const struct runspec *s, int64_t now_ms,
                  struct specsig_verdict *v)
{
    memset(v, 0, sizeof(*v));
    v->is_signed = s->signature != NULL;
    if (!v->is_signed && !p->allow_unsigned)
        return refuse(v, "unsigned: this pool's daemons run signed specs only (submit "
                         "--sign-with KEY)");
    if (v->is_signed && check_signature(p, s, now_ms, v) < 0)
        return -EPERM;
    /* what the signature binds: this pool, and a time after which nobody may start it */
    if (v->verified && (!s->pool[0] || !s->prefix[0] || !s->expires_ms))
        return refuse(v, "the signed spec names no %s",
                      !s->pool[0] ? "pool" : !s->prefix[0] ? "prefix" : "expiry");
    if (s->pool[0] && strcmp(s->pool, p->pool) != 0)
        return refuse(v, "submitted to pool '%s', not '%s'", s->pool, p->pool);
    if (s->prefix[0] && p->prefix && strcmp(s->prefix, p->prefix) != 0)
        return refuse(v, "submitted to pool '%s' under '%s', not under '%s'", s->pool,
                      s->prefix, p->prefix);
    struct ea_error err = {0};
    if (specsig_check_time(s, now_ms, &err) < 0)
        return refuse(v, "%s", err.msg);
    return 0;
}

int specsig_check_time(const struct runspec *s, int64_t now_ms, struct ea_error *err)
{
    if (!s->expires_ms)
        return 0;
    char at[32], at2[32];
    /* these two first: after them 0 <= submitted_ms < expires_ms, so no difference overflows */
    if (s->submitted_ms < 0)
        return ea_errorf(err, -EPERM, "submitted at a negative time (%lld ms)",
                         (long long)s->submitted_ms);
    if (s->expires_ms <= s->submitted_ms) {
        iso_ms(s->expires_ms, at, sizeof(at));
        iso_ms(s->submitted_ms, at2, sizeof(at2));
        return ea_errorf(err, -EPERM, "expires at %s, not after its submission at %s", at, at2);
    }
    /* submitted_ms - SKEW >= -SKEW: no overflow whatever now_ms is */
    if (now_ms < s->submitted_ms - SPECSIG_CLOCK_SKEW_MS) {
        iso_ms(s->submitted_ms, at, sizeof(at));
        iso_ms(now_ms, at2, sizeof(at2));
        return ea_errorf(err, -EPERM,
                         "submitted at %s, in the future: this node's clock says %s (at most "
                         "%lld s ahead is taken for clock skew)",
                         at, at2, SPECSIG_CLOCK_SKEW_MS / 1000);
    }
    if (now_ms > s->expires_ms) {
        iso_ms(s->expires_ms, at, sizeof(at));
        return ea_errorf(err, -EPERM, "expired at %s", at);
    }
    if (s->expires_ms - s->submitted_ms > SPECSIG_VALID_MAX_MS)
        return ea_errorf(err, -EPERM, "valid for %lld days from its submission (at most %lld)",
                         (long long)((s->expires_ms - s->submitted_ms) / 86400000),
                         SPECSIG_VALID_MAX_MS / 86400000);
    return 0;
}
