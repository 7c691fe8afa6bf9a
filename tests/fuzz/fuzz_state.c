// SPDX-License-Identifier: Apache-2.0
/* Fuzz target: the run's `state` value decoder (rendezvous/state.c), plus encode/decode round trip
 * of whatever it accepts. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rdzv_state s = {0}, again = {0};
    struct ea_error err = {0};
    if (rdzv_state_decode((const char *)data, size, &s, &err) < 0) {
        FUZZ_CHECK(err.msg[0]); /* a refusal always says why */
        return 0;
    }
    char *json = NULL;
    if (rdzv_state_encode(&s, &json, &err) == 0) {
        /* what we accept we can write back, and read again to the same thing */
        int r = rdzv_state_decode(json, strlen(json), &again, &err);
        FUZZ_CHECK(r == 0);
        FUZZ_CHECK(again.round == s.round && again.n_members == s.n_members &&
               again.world_size == s.world_size && again.status == s.status);
        for (size_t i = 0; i < s.n_members; i++)
            FUZZ_CHECK(rdzv_state_find(&again, s.members[i].node_id) >= 0);
        rdzv_state_clear(&again);
        free(json);
    }
    rdzv_state_clear(&s);
    return 0;
}
