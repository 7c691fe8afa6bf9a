// SPDX-License-Identifier: Apache-2.0
/*
 * ea-bad-etcd: a real etcd (tests/etcd/etcd_harness) for the shell-driven bad-input table.
 *   ea-bad-etcd [--tls] ENVFILE
 * starts one member (with --tls: CA, server and client certificates, client certs required),
 * writes ENVFILE (shell assignments ETCD_ENDPOINTS, ETCD_CACERT, ETCD_CERT, ETCD_KEY, ETCD_DIR,
 * ETCD_METRICS, ETCD_LOG; with --tls, auth tokens live 1 s unused; requests up to 8 MiB),
 * then serves commands on stdin, one a line, answering "ok" or "error" on stdout:
 *   restart    kill the member and start it again on its data (recent logins may be replayed)
 * and stops etcd and removes its data at end of input or on SIGTERM/SIGINT.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "etcd_harness.h"

int main(int argc, char **argv)
{
    /* 8 MiB requests: the table stores states over the agent's 4 MiB limit */
    struct etcd_harness_opts opts = {.members = 1, .max_request_bytes = 8L << 20};
    int i = 1;
    if (i < argc && strcmp(argv[i], "--tls") == 0) {
        opts.tls = 1;
        opts.auth_token_ttl = 1; /* the auth cases see tokens expire while a run is idle */
        i++;
    }
    if (i + 1 != argc) {
        fprintf(stderr, "usage: ea-bad-etcd [--tls] ENVFILE\n");
        return 2;
    }
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* the runner died: clean up all the same */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    static struct etcd_harness h;
    if (etcd_harness_start_opts(&h, &opts) < 0)
        return 1;
    FILE *env = fopen(argv[i], "w");
    if (!env) {
        perror(argv[i]);
        etcd_harness_stop(&h);
        return 1;
    }
    fprintf(env, "ETCD_ENDPOINTS='%s'\nETCD_CACERT='%s'\nETCD_CERT='%s'\nETCD_KEY='%s'\n"
                 "ETCD_DIR='%s'\nETCD_METRICS='http://127.0.0.1:%d/metrics'\nETCD_LOG='%s'\n",
            h.endpoints, h.cacert, h.cert, h.key, h.dir, h.m[0].health_port, h.m[0].log);
    fclose(env);
    printf("ready\n");
    fflush(stdout);
    char line[256];
    size_t len = 0;
    for (;;) {
        struct pollfd p[2] = {{.fd = 0, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (!p[0].revents)
            continue;
        ssize_t n = read(0, line + len, sizeof(line) - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        line[len] = '\0';
        char *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = '\0';
            int ok = strcmp(line, "restart") == 0 && etcd_harness_restart(&h, 0) == 0;
            printf("%s\n", ok ? "ok" : "error");
            fflush(stdout);
            len -= (size_t)(nl + 1 - line);
            memmove(line, nl + 1, len + 1);
        }
        if (len == sizeof(line) - 1)
            len = 0; /* an overlong line: drop it */
    }
    etcd_harness_stop(&h);
    return 0;
}
