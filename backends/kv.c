// SPDX-License-Identifier: Apache-2.0
/* kv: backend registry, generic wrappers and ownership helpers shared by every backend. */
#include "kv.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern const struct kv_ops kv_memory_ops;
extern const struct kv_ops kv_file_ops;
/*
 * The etcd backends pull in gRPC, libcurl and OpenSSL (~80 shared libraries, ~9 ms of dynamic
 * loading per exec). The agent loads them as modules, only when one is chosen; a program that
 * links their static libraries and uses one of their symbols (the tests, for etcd_compact) gets
 * them directly: these weak references do not pull archive members in, they only see what is
 * there.
 */
extern const struct kv_ops kv_etcd_ops __attribute__((weak));
extern const struct kv_ops kv_etcd_gateway_ops __attribute__((weak));

const struct kv_ops *const kv_backends[] = {&kv_memory_ops, &kv_file_ops, NULL};
static const char *const kv_module_names[] = {"etcd", "etcd-gateway", NULL};

/* Modules loaded so far (each once; never unloaded: handles keep pointers into them). */
static const struct kv_ops *kv_loaded[4];

static const struct kv_ops *kv_linked(const char *name)
{
    if (strcmp(name, "etcd") == 0 && &kv_etcd_ops)
        return &kv_etcd_ops;
    if (strcmp(name, "etcd-gateway") == 0 && &kv_etcd_gateway_ops)
        return &kv_etcd_gateway_ops;
    return NULL;
}

/* ea-kv-NAME.so next to the running binary, in its installed module directory, or in the build
 * tree (for test programs, which live elsewhere in it). */
static const struct kv_ops *kv_module_load(const char *name, struct ea_error *err)
{
    char self[PATH_MAX], path[PATH_MAX + 64], tried[512] = "";
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    int dlen = slash ? (int)(slash - self) : 0;
    const char *where[][2] = {{self, ""}, {self, "/" EA_KV_MODULE_REL_DIR}, {EA_KV_MODULE_BUILD_DIR, ""}};
    for (size_t i = 0; i < sizeof(where) / sizeof(*where); i++) {
        if (where[i][0] == self)
            snprintf(path, sizeof(path), "%.*s%s/ea-kv-%s.so", dlen, self, where[i][1], name);
        else
            snprintf(path, sizeof(path), "%s/ea-kv-%s.so", where[i][0], name);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *why = dlerror();
            if (access(path, F_OK) == 0) /* there but broken: say why */
                return ea_errorf(err, KV_EINVAL, "cannot load the %s backend '%s': %s", name,
                                 path, why ? why : "?"),
                       NULL;
            size_t t = strlen(tried);
            snprintf(tried + t, sizeof(tried) - t, "%s%s", t ? ", " : "", path);
            continue;
        }
        const int *abi = dlsym(h, "kv_module_abi");
        const struct kv_ops *(*entry)(void);
        *(void **)&entry = dlsym(h, "kv_module");
        const struct kv_ops *ops = abi && *abi == KV_MODULE_ABI && entry ? entry() : NULL;
        if (!ops || strcmp(ops->name, name) != 0)
            return ea_errorf(err, KV_EINVAL,
                             "'%s' is not an elastic-agent %s backend of this version", path,
                             name),
                   NULL;
        return ops;
    }
    ea_errorf(err, KV_EINVAL, "the %s backend is not installed (looked for %s)", name, tried);
    return NULL;
}

static const struct kv_ops *kv_find(const char *name, struct ea_error *err)
{
    for (size_t i = 0; kv_backends[i]; i++)
        if (strcmp(kv_backends[i]->name, name) == 0)
            return kv_backends[i];
    const struct kv_ops *ops = kv_linked(name);
    if (ops)
        return ops;
    for (size_t i = 0; kv_module_names[i]; i++) {
        if (strcmp(kv_module_names[i], name) != 0)
            continue;
        if (!kv_loaded[i])
            kv_loaded[i] = kv_module_load(name, err);
        return kv_loaded[i];
    }
    char names[256] = "";
    size_t off = 0;
    for (size_t i = 0; kv_backends[i]; i++)
        off += (size_t)snprintf(names + off, sizeof(names) - off, "%s, ", kv_backends[i]->name);
    for (size_t i = 0; kv_module_names[i] && off < sizeof(names); i++)
        off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s", kv_module_names[i],
                                kv_module_names[i + 1] ? ", " : "");
    ea_errorf(err, KV_EINVAL, "unknown rendezvous backend '%s' (known: %s)", name, names);
    return NULL;
}

const struct kv_ops *kv_backend_find(const char *name)
{
    return name ? kv_find(name, NULL) : NULL;
}

int kv_open(const struct kv_config *cfg, struct kv **ret_kv, struct ea_error *err)
{
    const struct kv_ops *ops = kv_find(cfg->backend ? cfg->backend : "", err);
    if (!ops)
        return KV_EINVAL;
    return ops->open(cfg, ret_kv, err);
}

void kv_close(struct kv *kv)
{
    if (kv)
        kv->ops->close(kv);
}

int kv_get(struct kv *kv, const char *key, struct kv_entry *ret, struct ea_error *err)
{
    return kv->ops->get(kv, key, ret, err);
}

int kv_get_at(struct kv *kv, const char *key, int64_t at, struct kv_entry *ret,
              struct ea_error *err)
{
    if (at <= 0 || !kv->ops->get_at) /* the latest value is never older than `at` */
        return kv->ops->get(kv, key, ret, err);
    return kv->ops->get_at(kv, key, at, ret, err);
}

int kv_list(struct kv *kv, const char *prefix, struct kv_list *ret, struct ea_error *err)
{
    return kv->ops->list(kv, prefix, ret, err);
}

/* A backend without list_page: the whole list, cut down to the page (no bound on memory). */
static int list_page_by_list(struct kv *kv, const char *prefix, const char *after, size_t limit,
                             struct kv_list *ret, struct ea_error *err)
{
    struct kv_list l = {0};
    int r = kv->ops->list(kv, prefix, &l, err);
    if (r < 0)
        return r;
    size_t first = 0;
    while (after && first < l.n && strcmp(l.entries[first].key, after) <= 0)
        kv_entry_clear(&l.entries[first++]);
    size_t n = l.n - first < limit ? l.n - first : limit;
    for (size_t i = first + n; i < l.n; i++)
        kv_entry_clear(&l.entries[i]);
    memmove(l.entries, l.entries + first, n * sizeof(*l.entries));
    l.more = first + n < l.n;
    l.n = n;
    *ret = l;
    return 0;
}

int kv_list_page(struct kv *kv, const char *prefix, const char *after, size_t limit,
                 struct kv_list *ret, struct ea_error *err)
{
    if (limit == 0 || limit > KV_PAGE_MAX)
        return ea_errorf(err, KV_EINVAL, "list '%s': a page of %zu keys (1 to %d)", prefix,
                         limit, KV_PAGE_MAX);
    if (after && !after[0])
        after = NULL;
    if (after && strncmp(after, prefix, strlen(prefix)) != 0)
        return ea_errorf(err, KV_EINVAL, "list '%s': page after '%s', outside the prefix",
                         prefix, after);
    if (!kv->ops->list_page)
        return list_page_by_list(kv, prefix, after, limit, ret, err);
    return kv->ops->list_page(kv, prefix, after, limit, ret, err);
}

int kv_cas(struct kv *kv, const char *key, const char *value, size_t len,
           int64_t expected_mod_revision, int64_t lease, int64_t *ret_mod_revision,
           struct kv_entry *ret_current, struct ea_error *err)
{
    return kv->ops->cas(kv, key, value, len, expected_mod_revision, lease, ret_mod_revision,
                        ret_current, err);
}

int kv_txn_check(const char *who, const struct kv_cmp *cmps, size_t n_cmps,
                 const struct kv_op *ops, size_t n_ops, struct ea_error *err)
{
    if (n_ops == 0 || n_ops > KV_TXN_OPS_MAX || n_cmps > KV_TXN_OPS_MAX)
        return ea_errorf(err, KV_EINVAL,
                         "%s: %zu op(s) and %zu compare(s): 1 to %d ops and at most %d compares "
                         "allowed",
                         who, n_ops, n_cmps, KV_TXN_OPS_MAX, KV_TXN_OPS_MAX);
    for (size_t i = 0; i < n_cmps; i++)
        if (cmps[i].mod_revision < 0)
            return ea_errorf(err, KV_EINVAL, "%s: compare on '%s': negative revision", who,
                             cmps[i].key);
    /* etcd refuses a repeated key too ("duplicate key given in txn request"); refuse it before
     * any I/O, the same way for every backend. n <= 128: pairwise is fine. */
    for (size_t i = 1; i < n_ops; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(ops[i].key, ops[j].key) == 0)
                return ea_errorf(err, KV_EINVAL,
                                 "%s: key '%s' appears twice among its ops (ops #%zu and #%zu)",
                                 who, ops[i].key, j, i);
    return 0;
}

int kv_txn(struct kv *kv, const struct kv_cmp *cmps, size_t n_cmps, const struct kv_op *ops,
           size_t n_ops, int64_t *ret_revision, struct ea_error *err)
{
    return kv->ops->txn(kv, cmps, n_cmps, ops, n_ops, ret_revision, err); /* each checks */
}

int kv_put(struct kv *kv, const char *key, const char *value, size_t len, int64_t lease,
           int64_t *ret_mod_revision, struct ea_error *err)
{
    return kv->ops->put(kv, key, value, len, lease, ret_mod_revision, err);
}

int kv_del(struct kv *kv, const char *key, struct ea_error *err)
{
    return kv->ops->del(kv, key, err);
}

int kv_lease_grant(struct kv *kv, int64_t ttl_ms, int64_t *ret_lease, struct ea_error *err)
{
    return kv->ops->lease_grant(kv, ttl_ms, ret_lease, err);
}

int kv_lease_keepalive(struct kv *kv, int64_t lease, int64_t *ret_ttl_ms, struct ea_error *err)
{
    return kv->ops->lease_keepalive(kv, lease, ret_ttl_ms, err);
}

int kv_lease_revoke(struct kv *kv, int64_t lease, struct ea_error *err)
{
    return kv->ops->lease_revoke(kv, lease, err);
}

/* The fallback of the _each ops: one request after the other, the first failure named. */
static int each_one(struct kv *kv, const int64_t *leases, size_t n, int *ret_codes,
                    struct ea_error *err, bool revoke)
{
    bool failed = false;
    for (size_t i = 0; i < n; i++) {
        struct ea_error one = {0};
        ret_codes[i] = revoke ? kv->ops->lease_revoke(kv, leases[i], &one)
                              : kv->ops->lease_keepalive(kv, leases[i], NULL, &one);
        if (ret_codes[i] < 0 && !failed && err)
            *err = one;
        failed = failed || ret_codes[i] < 0;
    }
    return 0;
}

int kv_lease_revoke_each(struct kv *kv, const int64_t *leases, size_t n, int *ret_codes,
                         struct ea_error *err)
{
    if (kv->ops->lease_revoke_each)
        return kv->ops->lease_revoke_each(kv, leases, n, ret_codes, err);
    return each_one(kv, leases, n, ret_codes, err, true);
}

int kv_lease_keepalive_each(struct kv *kv, const int64_t *leases, size_t n, int *ret_codes,
                            struct ea_error *err)
{
    if (kv->ops->lease_keepalive_each)
        return kv->ops->lease_keepalive_each(kv, leases, n, ret_codes, err);
    return each_one(kv, leases, n, ret_codes, err, false);
}

int kv_watch(struct kv *kv, const char *prefix, int64_t from_revision, int64_t *ret_watch_id,
             struct ea_error *err)
{
    return kv->ops->watch(kv, prefix, from_revision, ret_watch_id, err);
}

void kv_watch_cancel(struct kv *kv, int64_t watch_id)
{
    kv->ops->watch_cancel(kv, watch_id);
}

int kv_event_fd(struct kv *kv)
{
    return kv->ops->event_fd(kv);
}

int kv_read_events(struct kv *kv, struct kv_event **ret_events, size_t *ret_n,
                   struct ea_error *err)
{
    return kv->ops->read_events(kv, ret_events, ret_n, err);
}

void kv_entry_clear(struct kv_entry *e)
{
    if (!e)
        return;
    free(e->key);
    free(e->value);
    memset(e, 0, sizeof(*e));
}

void kv_list_clear(struct kv_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        kv_entry_clear(&l->entries[i]);
    free(l->entries);
    memset(l, 0, sizeof(*l));
}

void kv_events_free(struct kv_event *events, size_t n)
{
    if (!events)
        return;
    for (size_t i = 0; i < n; i++)
        kv_entry_clear(&events[i].entry);
    free(events);
}

int kv_entry_copy(struct kv_entry *dst, const struct kv_entry *src)
{
    struct kv_entry e = *src;
    e.key = strdup(src->key ? src->key : "");
    e.value = malloc(src->value_len + 1);
    if (!e.key || !e.value) {
        free(e.key);
        free(e.value);
        return -ENOMEM;
    }
    if (src->value_len)
        memcpy(e.value, src->value, src->value_len);
    e.value[src->value_len] = '\0';
    *dst = e;
    return 0;
}

const char *kv_strerror(int code)
{
    switch (code) {
    case 0:
        return "ok";
    case KV_ENOTFOUND:
        return "not found";
    case KV_ECONFLICT:
        return "revision conflict";
    case KV_ECONN:
        return "store unreachable";
    case KV_ECOMPACTED:
        return "revision compacted";
    case KV_EAUTH:
        return "authentication failed";
    case KV_ECORRUPT:
        return "corrupt store data";
    case KV_ENOLEASE:
        return "lease expired or unknown";
    case KV_EINVAL:
        return "invalid argument";
    default:
        return strerror(-code);
    }
}
