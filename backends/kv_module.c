// SPDX-License-Identifier: Apache-2.0
/* kv_module: the entry points of a backend built as a loadable module (ea-kv-<name>.so), compiled
 * once per module with -DKV_MODULE_OPS=<that backend's ops>. See kv.h. */
#include "kv.h"

extern const struct kv_ops KV_MODULE_OPS;

__attribute__((visibility("default"))) const int kv_module_abi = KV_MODULE_ABI;

__attribute__((visibility("default"))) const struct kv_ops *kv_module(void);

const struct kv_ops *kv_module(void)
{
    return &KV_MODULE_OPS;
}
