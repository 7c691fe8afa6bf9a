// SPDX-License-Identifier: Apache-2.0
/* Fuzz target: what reaches the liveness ring from anyone (agent/liveness/ring_proto.c: a hello,
 * an answer) and a suspicion's value in the store (rendezvous/suspect.c). The first byte picks
 * the decoder: 'A' an answer, 'S' a suspicion, anything else a hello. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "ring_proto.h"
#include "suspect.h"

static void hello(const uint8_t *data, size_t size)
{
    struct ring_hello h;
    size_t used = 0;
    struct ea_error err = {0};
    int r = ring_hello_decode(data, size, &h, &used, &err);
    FUZZ_CHECK(r == 0 || r == 1 || (r == -EBADMSG && err.msg[0]));
    if (r != 1)
        return;
    FUZZ_CHECK(used <= size && used <= RING_HELLO_MAX);
    uint8_t out[RING_HELLO_MAX];
    int n = ring_hello_encode(&h, out, sizeof(out));
    FUZZ_CHECK(n == (int)used && memcmp(out, data, used) == 0);
}

static void answer(const uint8_t *data, size_t size)
{
    enum ring_status st;
    int64_t round;
    int r = ring_answer_decode(data, size, &st, &round);
    FUZZ_CHECK(r == 0 || r == 1 || r == -EBADMSG);
    if (r != 1)
        return;
    uint8_t out[RING_ANSWER_LEN];
    ring_answer_encode(st, round, out);
    FUZZ_CHECK(memcmp(out, data, RING_ANSWER_LEN) == 0);
}

static void suspicion(const char *json, size_t len)
{
    struct rdzv_suspicion x = {0}, again = {0};
    struct ea_error err = {0};
    if (rdzv_suspicion_decode(json, len, &x, &err) < 0) {
        FUZZ_CHECK(err.msg[0]);
        return;
    }
    FUZZ_CHECK(x.by[0] && x.cause[0] && x.detected_ms > 0);
    char *out = NULL;
    if (rdzv_suspicion_encode(&x, &out, &err) == 0) {
        FUZZ_CHECK(rdzv_suspicion_decode(out, strlen(out), &again, &err) == 0);
        FUZZ_CHECK(strcmp(again.by, x.by) == 0 && again.fault_ms == x.fault_ms);
        free(out);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] == 'A')
        answer(data + 1, size - 1);
    else if (data[0] == 'S')
        suspicion((const char *)data + 1, size - 1);
    else
        hello(data, size);
    return 0;
}
