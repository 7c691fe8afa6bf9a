// SPDX-License-Identifier: Apache-2.0
/*
 * elastic-agent-guard: the exec-guard middleman as a binary of its own, linked with nothing but
 * libc, so that starting a worker costs one small exec instead of loading the agent's ~85 shared
 * libraries again (bench/RESULTS.md, "Where the cold start goes"). Same arguments as the hidden
 * `elastic-agent exec-guard` subcommand, which stays for hosts where only the agent is installed
 * (the ssh launcher's remote side).
 */
#include <stdio.h>
#include <string.h>

#include "launcher.h"

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exec-guard") == 0)
        return launch_guard_main(argc - 1, argv + 1);
    fprintf(stderr, "elastic-agent-guard: internal helper of elastic-agent; usage: "
                    "elastic-agent-guard exec-guard [--report-fd N] [--watch-stdin] [--fence-fd N] "
                    "[--pass-fd N] -- CMD...\n");
    return 2;
}
