// SPDX-License-Identifier: Apache-2.0
/* Fuzz target: the run spec decoder (agent/daemon/runspec.c) — what a daemon reads from its pool's
 * queue, written by anybody with access to the store. A spec that decodes re-encodes to one that
 * decodes the same, and its validation (cfg_parse on its argv) never crashes. */
#include <stdlib.h>
#include <string.h>

#include "daemon_internal.h"
#include "fuzz.h"
#include "runspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct runspec s = {0}, again = {0};
    struct ea_error err = {0};
    if (runspec_decode((const char *)data, size, &s, &err) < 0) {
        FUZZ_CHECK(err.msg[0] && !s.args);
        return 0;
    }
    FUZZ_CHECK(s.run_id[0] && s.n_command >= 1 && s.command[0][0] && !s.command[s.n_command]);
    FUZZ_CHECK(s.min_nodes >= 1 && s.max_nodes >= s.min_nodes);
    char *out = NULL;
    if (runspec_encode(&s, &out, &err) == 0) {
        FUZZ_CHECK(runspec_decode(out, strlen(out), &again, &err) == 0);
        FUZZ_CHECK(strcmp(again.run_id, s.run_id) == 0 && again.n_args == s.n_args &&
                   again.n_command == s.n_command && again.n_env == s.n_env);
        for (size_t i = 0; i < s.n_args; i++)
            FUZZ_CHECK(strcmp(again.args[i], s.args[i]) == 0);
        free(out);
    }
    char *no_env[] = {NULL};
    struct cfg c;
    char **argv = NULL;
    if (runspec_validate(&s, NULL, 0, no_env, &c, &argv, &err) == 0) {
        FUZZ_CHECK(strcmp(c.run_id, s.run_id) == 0 && c.command && c.command[0]);
        free(argv);
    }
    char **env = NULL;
    if (daemon_child_env(no_env, &env) == 0)
        free(env);
    runspec_clear(&s);
    runspec_clear(&again);
    return 0;
}
