// SPDX-License-Identifier: Apache-2.0
/* daemon_trust: which specs a daemon runs, and saying once why it refuses one (daemon_trust.h). */
#include "daemon_trust.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ea_time.h"
#include "log.h"

static void file_id(struct daemon_trust *t, const struct stat *st)
{
    t->dev = st->st_dev;
    t->ino = st->st_ino;
    t->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    t->ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
    t->size = st->st_size;
}

static bool file_same(const struct daemon_trust *t, const struct stat *st)
{
    return st->st_dev == t->dev && st->st_ino == t->ino && st->st_size == t->size &&
           (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec == t->mtime_ns &&
           (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec == t->ctime_ns;
}

/* The trust of a file that cannot be used: no key at all. Points policy.signers at it, never
 * NULL, which would mean "signatures not checked". */
static const struct signers no_keys = {.name = "none: the allowed signers file cannot be used"};

int daemon_trust_open(struct daemon_trust *t, const char *path, bool allow_unsigned,
                      const char *pool_name, const char *prefix, struct pool *pool,
                      const char *node, struct ea_error *err)
{
    *t = (struct daemon_trust){.path = path, .pool = pool, .node = node,
                               .policy = {.allow_unsigned = allow_unsigned, .pool = pool_name,
                                          .prefix = prefix}};
    if (!path && !allow_unsigned)
        return ea_errorf(err, -EINVAL,
                         "no --allowed-signers FILE: a daemon runs only the specs signed by a key "
                         "that file allows (submit --sign-with KEY); --allow-unsigned runs "
                         "anything written to the pool's queue, by anyone who can write to the "
                         "store");
    if (!path)
        return 0;
    struct stat st;
    if (stat(path, &st) == 0)
        file_id(t, &st);
    struct ea_error perr = {0};
    if (signers_load(path, &t->signers, &perr) < 0)
        return ea_errorf(err, -EINVAL, "--allowed-signers: %s", perr.msg);
    if (t->signers->n == 0)
        return ea_errorf(err, -EINVAL,
                         "--allowed-signers: '%s' lists no ssh-ed25519 key%s%s%s: no signed "
                         "spec could ever run",
                         path, t->signers->n_skipped ? " (ignored: " : "",
                         t->signers->n_skipped ? t->signers->skipped : "",
                         t->signers->n_skipped ? ")" : "");
    t->policy.signers = t->signers;
    return 0;
}

void daemon_trust_announce(const struct daemon_trust *t)
{
    if (t->signers) {
        log_info("running specs signed (namespace '" SPECSIG_NAMESPACE "') by the %zu key(s) "
                 "of '%s'%s",
                 t->signers->n, t->path,
                 t->policy.allow_unsigned ? ", and unsigned ones (--allow-unsigned)" : "");
        if (t->signers->n_skipped)
            log_warn("allowed signers: %zu line(s) of a key type other than ssh-ed25519 are "
                     "ignored (first: %s)",
                     t->signers->n_skipped, t->signers->skipped);
    }
    if (t->policy.allow_unsigned)
        log_warn("--allow-unsigned: this daemon runs unsigned specs of pool '%s': anyone who can "
                 "write to the store can run any command on this node as its user",
                 t->pool->name);
}

void daemon_trust_close(struct daemon_trust *t)
{
    signers_free(t->signers);
    t->signers = NULL;
    t->policy.signers = NULL;
}

/* No key is trusted from now on (the file is gone or cannot be used): said once per reason. */
static void distrust(struct daemon_trust *t, const char *why)
{
    if (strcmp(t->unusable, why) != 0)
        log_warn("--allowed-signers: %s: no key is trusted until it can be read again (signed "
                 "specs are refused)",
                 why);
    snprintf(t->unusable, sizeof(t->unusable), "%s", why);
    signers_free(t->signers);
    t->signers = NULL;
    t->policy.signers = &no_keys;
}

/* Re-read the allowed signers when the file (or what its path points to) changed, and while it
 * cannot be used. Fails closed: a file that is gone or unusable trusts no key. (A ConfigMap's
 * update swaps a symlink with rename(2): the path never stops resolving.) */
static void reload(struct daemon_trust *t)
{
    struct stat st;
    if (!t->path)
        return;
    if (stat(t->path, &st) < 0) {
        char why[EA_ERROR_MSG_MAX];
        snprintf(why, sizeof(why), "'%s': %s", t->path, strerror(errno));
        distrust(t, why);
        return;
    }
    if (file_same(t, &st) && !t->unusable[0])
        return;
    file_id(t, &st);
    struct signers *fresh = NULL;
    struct ea_error err = {0};
    if (signers_load(t->path, &fresh, &err) < 0) {
        distrust(t, err.msg);
        return;
    }
    log_info("--allowed-signers '%s' changed: %zu key(s) now", t->path, fresh->n);
    t->unusable[0] = '\0';
    signers_free(t->signers);
    t->signers = fresh;
    t->policy.signers = fresh;
}

int daemon_trust_gate(void *ctx, const struct runspec *s, struct specsig_verdict *v)
{
    struct daemon_trust *t = ctx;
    reload(t);
    int r = specsig_check(&t->policy, s, ea_wall_ms(), v);
    if (r < 0 && v->is_signed && t->unusable[0]) /* not "the key is not in the file" */
        snprintf(v->reason, sizeof(v->reason), "no key is trusted: %s", t->unusable);
    return r;
}

void daemon_trust_refused(void *ctx, const struct runspec *s, const struct specsig_verdict *v)
{
    struct daemon_trust *t = ctx;
    char key[POOL_KEY_MAX];
    pool_refused_key(t->pool, s->run_id, key, sizeof(key));
    bool named = !v->fingerprint[0] || strstr(v->reason, v->fingerprint);
    log_warn("refusing run '%s' of pool '%s': %s%s%s; never run (moved to '%s')", s->run_id,
             t->pool->name, v->reason, named ? "" : "; signing key ",
             named ? "" : v->fingerprint, key);
    events_emit(t->events, "spec_refused", 0, 0, "{s:s, s:s, s:s, s:b, s:s, s:s}", "run",
                s->run_id, "pool", t->pool->name, "reason", v->reason, "signed", v->is_signed,
                "principal", v->principal, "fingerprint", v->fingerprint);
}

int daemon_trust_admit(struct daemon_trust *t, const struct runspec *s,
                       struct specsig_verdict *v)
{
    if (daemon_trust_gate(t, s, v) == 0)
        return 0;
    struct ea_error err = {0};
    int r = pool_refuse(t->pool, s, v, t->node, &err);
    if (r == 0)
        daemon_trust_refused(t, s, v);
    else if (r != KV_ECONFLICT) /* the first daemon to refuse it said so */
        log_warn("refusing run '%s': %s; moving it aside: %s", s->run_id, v->reason, err.msg);
    return -EPERM;
}
