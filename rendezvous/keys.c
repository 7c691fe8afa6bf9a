// SPDX-License-Identifier: Apache-2.0
/* rdzv keys: the keys outside a session (keys.h). */
#include "keys.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"
#include "state.h"

int rdzv_key_held(const char *prefix, const char *node_id, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%sheld/%s", prefix, node_id);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

enum rdzv_key_kind rdzv_key_parse(const char *prefix, const char *key, int64_t *round,
                                  const char **rest)
{
    size_t plen = strlen(prefix);
    if (strncmp(key, prefix, plen) != 0)
        return RDZV_KEY_OUTSIDE;
    const char *k = key + plen;
    if (strncmp(k, "held/", 5) == 0 && k[5]) {
        *rest = k + 5;
        return RDZV_KEY_HELD;
    }
    if (strncmp(k, "rounds/", 7) != 0 || k[7] < '1' || k[7] > '9')
        return RDZV_KEY_OTHER;
    char *end = NULL;
    errno = 0;
    long long r = strtoll(k + 7, &end, 10);
    if (errno || *end != '/' || !end[1])
        return RDZV_KEY_OTHER;
    *round = (int64_t)r;
    *rest = end + 1;
    return RDZV_KEY_ROUND;
}

int rdzv_peek_running(struct kv *kv, const char *prefix, bool *running, struct ea_error *err)
{
    *running = false;
    char key[1024];
    if (snprintf(key, sizeof(key), "%sstate", prefix) >= (int)sizeof(key))
        return ea_errorf(err, -ENAMETOOLONG, "the run's prefix is too long");
    struct kv_entry e = {0};
    int r = kv_get(kv, key, &e, err);
    if (r == KV_ENOTFOUND)
        return 0;
    if (r < 0)
        return r;
    struct rdzv_state s = {0};
    struct ea_error derr = {0};
    *running = rdzv_state_decode(e.value, e.value_len, &s, &derr) == 0 &&
               s.status == RDZV_RUNNING;
    rdzv_state_clear(&s);
    kv_entry_clear(&e);
    return 0;
}
