// SPDX-License-Identifier: Apache-2.0
/* kv: backend registry, generic wrappers and ownership helpers shared by every backend. */
#include "kv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const struct kv_ops kv_memory_ops;
extern const struct kv_ops kv_file_ops;
#ifdef EA_HAVE_ETCD
extern const struct kv_ops kv_etcd_ops;
#endif
#ifdef EA_HAVE_ETCD_GATEWAY
extern const struct kv_ops kv_etcd_gateway_ops;
#endif

const struct kv_ops *const kv_backends[] = {
    &kv_memory_ops,
    &kv_file_ops,
#ifdef EA_HAVE_ETCD
    &kv_etcd_ops,
#endif
#ifdef EA_HAVE_ETCD_GATEWAY
    &kv_etcd_gateway_ops,
#endif
    NULL,
};

const struct kv_ops *kv_backend_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; kv_backends[i]; i++)
        if (strcmp(kv_backends[i]->name, name) == 0)
            return kv_backends[i];
    return NULL;
}

int kv_open(const struct kv_config *cfg, struct kv **ret_kv, struct ea_error *err)
{
    const struct kv_ops *ops = kv_backend_find(cfg->backend);
    if (!ops) {
        char names[256] = "";
        size_t off = 0;
        for (size_t i = 0; kv_backends[i] && off < sizeof(names); i++)
            off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s", i ? ", " : "",
                                    kv_backends[i]->name);
        return ea_errorf(err, KV_EINVAL, "unknown rendezvous backend '%s' (built in: %s)",
                         cfg->backend ? cfg->backend : "", names);
    }
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

int kv_list(struct kv *kv, const char *prefix, struct kv_list *ret, struct ea_error *err)
{
    return kv->ops->list(kv, prefix, ret, err);
}

int kv_cas(struct kv *kv, const char *key, const char *value, size_t len,
           int64_t expected_mod_revision, int64_t lease, int64_t *ret_mod_revision,
           struct kv_entry *ret_current, struct ea_error *err)
{
    return kv->ops->cas(kv, key, value, len, expected_mod_revision, lease, ret_mod_revision,
                        ret_current, err);
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
