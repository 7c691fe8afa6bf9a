// SPDX-License-Identifier: Apache-2.0
/*
 * rabit_sim: the worker side of the rabit tracker protocol, as XGBoost 1.7's rabit client does
 * it (handshake, hello, link map, brokered peer connections, listening port, accepts), with
 * blocking sockets and a receive timeout. For the tracker's tests and benchmark: one call is one
 * worker; rsim_run() runs n of them on threads at once. Not a general rabit client.
 */
#ifndef EA_TESTS_RABIT_SIM_H
#define EA_TESTS_RABIT_SIM_H

#include <stddef.h>
#include <stdint.h>

struct rsim_result {
    int rank, parent, world; /* as the tracker assigned them */
    int n_nn, nn[4];         /* the links the tracker asked for (tree, then ring) */
    int prev, next;          /* the ring links as sent (-1: none) */
    int n_linked, linked[8]; /* the peers actually connected, by the rank they said */
    int64_t linked_ms;       /* monotonic time when every link was up */
    int err;                 /* 0, or a negative errno */
    char msg[160];
};

/* One worker: connect to host:port, say `cmd` with rank `rank` (-1 for none), world size
 * `world` (-1 for none) and task id `task`, then get linked. 0 or a negative errno (r->msg). */
int rsim_worker(const char *host, int port, const char *cmd, int rank, int world, const char *task,
                struct rsim_result *r);

/* n workers at once, task ids "0".."n-1", command start, world `world`: 0 when all linked. */
int rsim_run(const char *host, int port, int n, int world, struct rsim_result *res);

/* A `shutdown` or `print` hello from `rank` (print sends `msg`). 0 or a negative errno. */
int rsim_shutdown(const char *host, int port, int rank);
int rsim_print(const char *host, int port, int rank, const char *msg);

/* Connect to host:port with a receive timeout: the fd, or a negative errno. */
int rsim_connect(const char *host, int port);
/* Send all of buf; receive exactly n bytes (-ECONNRESET on EOF). */
int rsim_send(int fd, const void *buf, size_t n);
int rsim_recv(int fd, void *buf, size_t n);

#endif
