// SPDX-License-Identifier: Apache-2.0
/*
 * ea_signal: the signals that ask a process of ours to end (SIGTERM, SIGINT, SIGHUP, SIGQUIT),
 * one set for the agent, the driver, the daemon and the guard, each of which blocks them and
 * reads them from a signalfd.
 */
#ifndef EA_COMMON_EA_SIGNAL_H
#define EA_COMMON_EA_SIGNAL_H

#include <signal.h>

/* Empty `set`, then add the termination signals. */
void ea_term_sigset(sigset_t *set);

#endif
