// SPDX-License-Identifier: Apache-2.0
/*
 * ssh launcher internals shared by ssh.c (the launcher ops), ssh_conn.c (the one ssh connection
 * per host: spawn, connection slots, handshake, line I/O) and ssh_remote.c (the remote helper
 * script and the shell quoting of the lines sent to it). Not a public interface.
 */
#ifndef EA_LAUNCHER_SSH_INTERNAL_H
#define EA_LAUNCHER_SSH_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ea_error.h"

/* A growable byte buffer. */
struct ssh_buf {
    char *p;
    size_t len, cap;
};

int ssh_buf_add(struct ssh_buf *b, const void *data, size_t n); /* 0 or -ENOMEM */
void ssh_buf_free(struct ssh_buf *b);

/* ---- ssh_remote.c ---- */

/* The command given to ssh: reads "<length>\n" and then the helper script from stdin. */
extern const char ssh_bootstrap[];
/* The remote helper (POSIX sh), sent after the bootstrap line. */
extern const char ssh_helper_script[];

/* Append " " and `s` quoted as one word for the helper's `eval` (single quotes; a newline becomes
 * '"$_ea_nl"' so that the whole command stays on one line). */
int ssh_quote(struct ssh_buf *b, const char *s);

/* Append the line that starts `slot`: cwd (strict: fail when it does not exist remotely, else
 * fall back to the remote home), the complete environment, argv. */
int ssh_start_line(struct ssh_buf *b, unsigned slot, const char *cwd, bool strict,
                   const char *const *envp, const char *const *argv);
/* The fence line for a deadline `valid_until_ms` at `now_ms` (whole seconds left, rounded up, 0
 * only once it has passed: the helper's watchdog counts whole seconds and never stops a worker
 * before the deadline) and the grace in whole seconds (rounded up, at least 1). Returns its
 * length. */
int ssh_fence_line(char *buf, size_t size, int64_t valid_until_ms, int64_t now_ms,
                   int64_t grace_ms);

/* ---- ssh_conn.c ---- */

struct ssh_target {
    const char *host, *user, *identity;
    int port;
    const char *const *options; /* extra -o values, NULL-terminated, may be NULL */
    const char *lock_dir;       /* connection slots (flock'ed files); NULL = no bound */
    int parallel;               /* number of slots */
};

enum ssh_conn_state {
    SSH_CONN_DOWN = 0, /* none (never set up, failed, closed) */
    SSH_CONN_SLOT,     /* waiting for a connection slot */
    SSH_CONN_HELLO,    /* ssh started, the helper sent: waiting for its "R" */
    SSH_CONN_UP,
};

struct ssh_conn {
    enum ssh_conn_state state;
    int64_t timeout_ms, deadline; /* the set-up's bound, from the slot on; its deadline */
    int *slots, nslots, slot_start; /* the slot files while waiting for one */
    int slot_in;                    /* inotify on the slot directory, or -1 */
    int slot_fd;                    /* the slot held while connecting, or -1 */
    int64_t slot_retry;             /* without inotify: the next try */
    pid_t pid;           /* the ssh client, 0 when none */
    int pidfd;           /* of the client, or -1 */
    int in_fd;           /* its stdin (a socket: send() never raises SIGPIPE), -1 once closed */
    int out_fd;          /* its stdout, -1 at EOF */
    int err_fd;          /* its stderr, -1 at EOF */
    bool exited;         /* the client has been reaped */
    int status;          /* its wait status, once exited */
    struct ssh_buf rbuf; /* stdout not yet split into lines, from rpos on */
    size_t rpos;
    char errtail[1024]; /* the last bytes of its stderr, NUL-terminated */
    size_t errlen;
    char mode[8]; /* "guard" or "sh": the remote middleman */
};

/* Set up the connection without waiting (the agent's loop drives it): begin takes a connection
 * slot when one is free (else waits for one: state SSH_CONN_SLOT), starts `ssh ... host
 * <bootstrap>` and sends the helper (SSH_CONN_HELLO); step, whenever one of ssh_conn_fds() is
 * ready or ssh_conn_wake() has come, goes on: 1 once the helper said "R" (SSH_CONN_UP), 0 while
 * pending, else the failure, with nothing left running (SSH_CONN_DOWN): -EHOSTUNREACH, or
 * -ETIMEDOUT when no "R" came within timeout_ms of taking the slot, -ENOENT when ssh is not
 * installed, ...) with a message naming the host and quoting ssh's stderr. */
#define SSH_HELLO_SEND_MS 5000 /* the helper's few KB into an empty socket: never waits really */
int ssh_conn_begin(struct ssh_conn *c, const struct ssh_target *t, int64_t timeout_ms,
                   int64_t now, struct ea_error *err);
int ssh_conn_step(struct ssh_conn *c, const struct ssh_target *t, int64_t now,
                  struct ea_error *err);
/* When step must run even without an fd ready (the set-up's deadline, a slot retry), -1: none. */
int64_t ssh_conn_wake(const struct ssh_conn *c);
/* The fds the set-up or the connection wait on (at most 4): how many. */
int ssh_conn_fds(const struct ssh_conn *c, int fds[4]);

/* Send bytes to the helper (blocking, bounded by timeout_ms). -EPIPE when the connection is
 * gone, -ETIMEDOUT. */
int ssh_conn_send(struct ssh_conn *c, const char *data, size_t n, int timeout_ms);

/* Non-blocking: read what ssh printed on stdout (into rbuf) and stderr (errtail); notice its
 * exit. Returns true while the connection is alive (stdout not at EOF). */
bool ssh_conn_pump(struct ssh_conn *c);

/* Pop the next complete line from rbuf (without its '\n', NUL-terminated in place); the pointer
 * is valid until the next pump. false when there is none. */
bool ssh_conn_line(struct ssh_conn *c, char **ret_line, size_t *ret_len);

/* Close the helper's stdin (it then kills every worker group and exits), give the client up to
 * wait_ms to end, SIGKILL it otherwise, reap it, close everything. Zeroed or closed: no-op. */
void ssh_conn_close(struct ssh_conn *c, int wait_ms);

/* A one-line summary of ssh's stderr for messages ("" when it said nothing). */
const char *ssh_conn_stderr(const struct ssh_conn *c, char *buf, size_t size);

#endif
