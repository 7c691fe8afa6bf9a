// SPDX-License-Identifier: Apache-2.0
/* Fuzz target: the `nodes/<id>` and `failures/<r>` record decoders (rendezvous/state.c). The first
 * byte picks the decoder so one corpus covers both. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "state.h"

static void node(const char *json, size_t len)
{
    struct rdzv_node n;
    struct ea_error err = {0};
    if (rdzv_node_decode(json, len, &n, &err) < 0) {
        FUZZ_CHECK(err.msg[0]);
        return;
    }
    FUZZ_CHECK(n.nproc >= 1 && n.node_id[0] && n.host[0] && n.addr[0]);
    char *out = NULL;
    struct rdzv_node again;
    if (rdzv_node_encode(&n, &out, &err) == 0) {
        FUZZ_CHECK(rdzv_node_decode(out, strlen(out), &again, &err) == 0);
        FUZZ_CHECK(strcmp(again.node_id, n.node_id) == 0 && again.nproc == n.nproc);
        free(out);
    }
}

static void failure(const char *json, size_t len)
{
    struct rdzv_failure f;
    struct ea_error err = {0};
    if (rdzv_failure_decode(json, len, &f, &err) < 0) {
        FUZZ_CHECK(err.msg[0]);
        return;
    }
    char *out = NULL;
    if (rdzv_failure_encode(&f, &out, &err) == 0) {
        struct rdzv_failure again;
        FUZZ_CHECK(rdzv_failure_decode(out, strlen(out), &again, &err) == 0);
        free(out);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] == 'F')
        failure((const char *)data + 1, size - 1);
    else
        node((const char *)data + (data[0] == 'N'), size - (data[0] == 'N'));
    return 0;
}
