// SPDX-License-Identifier: Apache-2.0
#include "ea_signal.h"

void ea_term_sigset(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGQUIT);
}
