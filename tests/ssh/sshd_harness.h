// SPDX-License-Identifier: Apache-2.0
/*
 * sshd_harness: a real OpenSSH server for the ssh launcher's tests. Starts
 * `/usr/sbin/sshd -D -e -f <generated config>` on a free port at a given address (optionally
 * inside a network namespace, via `ip netns exec NS`), with a generated host key and a generated
 * user key in authorized_keys (StrictModes no) for the current user, and hands back the client
 * options to reach it. Waits for readiness by connecting with a deadline (never sleeps).
 * Test-only; uses criterion's cr_assert for set-up failures unless stated otherwise.
 */
#ifndef EA_TESTS_SSH_SSHD_HARNESS_H
#define EA_TESTS_SSH_SSHD_HARNESS_H

#include <stdbool.h>
#include <sys/types.h>

#define SSHD_H_MAX_ARGS 24

struct sshd_h {
    pid_t pid; /* the listening sshd (-D: it does not fork away) */
    int pidfd;
    int port;
    char addr[64];         /* address it listens on, e.g. "127.0.0.1" or "10.7.0.2" */
    char netns[64];        /* "" = the test's own namespace */
    char dir[256];         /* temp dir: keys, sshd_config, known_hosts, logs (removed by stop) */
    char log[320];         /* sshd's -E log: "Accepted publickey ..." lines are counted */
    char identity[320];    /* private user key (ssh -i) */
    char known_hosts[320]; /* UserKnownHostsFile given to clients (host key pre-entered) */
    char port_str[16];
    /* Options for elastic-agent, NULL-terminated, e.g. {"--ssh-port", "2222", "--ssh-identity",
     * ".../id", "--ssh-option", "UserKnownHostsFile=...", "--ssh-option",
     * "StrictHostKeyChecking=yes", ..., NULL}. Points into this struct. */
    const char *agent_args[SSHD_H_MAX_ARGS];
    /* The same as plain ssh(1) client options (no host), NULL-terminated: {"-p", "2222", "-i",
     * ..., "-o", "UserKnownHostsFile=...", ..., NULL}. */
    const char *ssh_args[SSHD_H_MAX_ARGS];
    /* For launcher_config: port, identity, and the -o values (NULL-terminated). */
    const char *ssh_options[8];
    char opt_buf[4][360];
};

struct sshd_h_opts {
    const char *addr;  /* NULL = "127.0.0.1" */
    const char *netns; /* NULL = none: run sshd in the test's namespace */
    /* Extra sshd_config lines appended verbatim ("\n"-separated), e.g.
     * "SetEnv PATH=/build:/usr/bin:/bin\nMaxSessions 2"; NULL = none. */
    const char *extra_config;
    int ready_timeout_ms; /* 0 = 10000 */
};

/* True when sshd and ssh-keygen are installed; otherwise false and a reason in why[]. */
bool sshd_h_available(char *why, size_t size);

/* Start sshd as described (asserts on failure, showing sshd's log). opts may be NULL. */
void sshd_h_start(struct sshd_h *s, const struct sshd_h_opts *opts);

/* Stop sshd (SIGTERM, then SIGKILL after 2 s), kill the session processes it forked, reap, and
 * remove the temp dir. Safe to call twice and on a zeroed struct. */
void sshd_h_stop(struct sshd_h *s);

/* Connections that authenticated so far ("Accepted publickey" lines in the log). */
int sshd_h_accepted(const struct sshd_h *s);

/* Pids of the per-connection sshd processes (children of the listener); returns how many
 * (at most max). */
int sshd_h_sessions(const struct sshd_h *s, pid_t *out, int max);

/* Wait until sshd_h_accepted() >= n; true if in time (inotify on the log). */
bool sshd_h_wait_accepted(const struct sshd_h *s, int n, int timeout_ms);

#endif
