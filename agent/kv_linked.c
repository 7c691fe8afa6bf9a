// SPDX-License-Identifier: Apache-2.0
/* kv_linked: in builds without backend modules (EA_KV_MODULES=OFF, the sanitizer builds), this
 * reference pulls the etcd backends' static libraries into the program; backends/kv.c then finds
 * them through its weak references instead of loading ea-kv-*.so. */
#include "kv.h"

extern const struct kv_ops kv_etcd_ops, kv_etcd_gateway_ops;

__attribute__((used)) const struct kv_ops *const ea_kv_linked[] = {&kv_etcd_ops,
                                                                    &kv_etcd_gateway_ops};
