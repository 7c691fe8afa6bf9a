// SPDX-License-Identifier: Apache-2.0
/*
 * ea_ci: whether the tests run in CI, where a missing prerequisite (root, network namespaces,
 * sshd, etcd) is a failure and never a skip: CI installs them (scripts/install-deps.sh --test)
 * and runs as root, so a skip there would hide the cases it leaves out. .ci/run sets CI=1.
 * Check: `CI=1 setpriv --reuid=65534 ... test_netns_harness` fails; without CI=1 it skips.
 */
#ifndef EA_TESTS_HELPERS_EA_CI_H
#define EA_TESTS_HELPERS_EA_CI_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* True when $CI is set to anything but "", "0" or "false". */
static inline bool ea_test_in_ci(void)
{
    const char *ci = getenv("CI");
    return ci && *ci && strcmp(ci, "0") != 0 && strcmp(ci, "false") != 0;
}

#endif
