// SPDX-License-Identifier: Apache-2.0
/* status_node: a node's own view (its liveness links) as /status JSON, and `status --agent`'s
 * read of it. */
#include "status_node.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ea_escape.h"
#include "ea_loop.h"
#include "ea_time.h"

/* Largest /status answer read (headers included): the agent's is a few hundred bytes. */
#define ANSWER_MAX (64u << 10)

static json_t *link_json(const struct metrics_link *l)
{
    return json_pack("{s:s, s:s, s:o}", "peer", l->peer, "state", l->state[0] ? l->state : "none",
                     "heartbeat_age_s",
                     l->heartbeat_age_s >= 0 && strcmp(l->state, "up") == 0
                         ? json_real(l->heartbeat_age_s)
                         : json_null());
}

char *status_node_json(const struct metrics_snapshot *m)
{
    bool ring = m->liveness_out.state[0] || m->liveness_in.state[0];
    json_t *live = ring ? json_pack("{s:o, s:o}", "successor", link_json(&m->liveness_out),
                                    "predecessor", link_json(&m->liveness_in))
                        : json_null();
    json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:o, s:s, s:o}", "node", m->node_id, "run",
                          m->run_id, "run_status", m->run_status, "round", (json_int_t)m->round,
                          "group_rank",
                          m->group_rank >= 0 ? json_integer(m->group_rank) : json_null(),
                          "workers", m->group_state, "liveness", live);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    return s;
}

static void print_link(FILE *out, const char *what, const json_t *l)
{
    const char *peer = json_string_value(json_object_get(l, "peer"));
    const char *state = json_string_value(json_object_get(l, "state"));
    const json_t *age = json_object_get(l, "heartbeat_age_s");
    ea_fprintf(out, "  ring link %s", what);
    if (peer && peer[0])
        ea_fprintf(out, " '%s'", peer);
    ea_fprintf(out, ": %s", state ? state : "unknown");
    if (json_is_number(age))
        ea_fprintf(out, ", last heartbeat %.1f s ago", json_number_value(age));
    fputc('\n', out);
}

void status_node_print_text(FILE *out, const char *where, const json_t *node)
{
    const char *id = json_string_value(json_object_get(node, "node"));
    ea_fprintf(out, "\nthis node: %s (its agent at %s)\n", id ? id : "?", where);
    const json_t *rank = json_object_get(node, "group_rank");
    const char *workers = json_string_value(json_object_get(node, "workers"));
    ea_fprintf(out, "  round %lld, ",
               (long long)json_integer_value(json_object_get(node, "round")));
    if (json_is_integer(rank))
        ea_fprintf(out, "group rank %lld", (long long)json_integer_value(rank));
    else
        fputs("not a member", out);
    ea_fprintf(out, ", workers %s\n", workers ? workers : "unknown");
    const json_t *live = json_object_get(node, "liveness");
    if (!json_is_object(live)) {
        fputs("  liveness ring: off, or this node is in none\n", out);
        return;
    }
    print_link(out, "to successor", json_object_get(live, "successor"));
    print_link(out, "from predecessor", json_object_get(live, "predecessor"));
}

/* "[ADDR]:PORT" into a socket address. */
static int parse_addr(const char *spec, struct sockaddr_storage *ss, socklen_t *len,
                      struct ea_error *err)
{
    const char *colon = strrchr(spec, ':');
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || !colon[1] || *end || port < 1 || port > 65535)
        return ea_errorf(err, -EINVAL, "--agent: '%s' is not [ADDR]:PORT (PORT 1-65535)", spec);
    char host[64];
    size_t alen = (size_t)(colon - spec);
    const char *a = spec;
    bool v6 = alen >= 2 && a[0] == '[' && a[alen - 1] == ']';
    if (v6)
        a++, alen -= 2;
    if (alen >= sizeof(host))
        return ea_errorf(err, -EINVAL, "--agent: the address in '%s' is too long", spec);
    if (alen)
        snprintf(host, sizeof(host), "%.*s", (int)alen, a);
    else
        snprintf(host, sizeof(host), "127.0.0.1");
    if (!v6 && strcmp(host, "localhost") == 0)
        snprintf(host, sizeof(host), "127.0.0.1");
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    if (v6 ? inet_pton(AF_INET6, host, &s6->sin6_addr) != 1
           : inet_pton(AF_INET, host, &s4->sin_addr) != 1)
        return ea_errorf(err, -EINVAL,
                         v6 ? "--agent: '%s' is not an IPv6 address"
                            : "--agent: '%s' is not an IPv4 address (IPv6: [ADDR]:PORT)",
                         host);
    if (v6) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        *len = sizeof(*s6);
    } else {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        *len = sizeof(*s4);
    }
    return 0;
}

int status_node_check_addr(const char *spec, struct ea_error *err)
{
    struct sockaddr_storage ss;
    socklen_t len;
    return parse_addr(spec, &ss, &len, err);
}

/* Wait for `events` on fd until the deadline: 0, or -ETIMEDOUT / -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    struct pollfd p = {.fd = fd, .events = events};
    int n;
    while ((n = ea_wait_fds(&p, 1, deadline)) < 0 && errno == EINTR)
        ;
    return n < 0 ? -errno : n == 0 ? -ETIMEDOUT : 0;
}

int status_node_fetch(const char *spec, int timeout_ms, json_t **ret, struct ea_error *err)
{
    struct sockaddr_storage ss;
    socklen_t len = 0; /* gcc -O3 cannot see that parse_addr sets it unless r < 0 */
    int r = parse_addr(spec, &ss, &len, err);
    if (r < 0)
        return r;
    int64_t deadline = ea_now_ms() + timeout_ms;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return ea_errorf(err, -errno, "socket: %s", strerror(errno));
    char *buf = malloc(ANSWER_MAX + 1);
    size_t got = 0;
    if (!buf) {
        close(fd);
        return ea_errorf(err, -ENOMEM, "out of memory");
    }
    if (connect(fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS)
        r = -errno;
    if (r == 0 && (r = wait_fd(fd, POLLOUT, deadline)) == 0) {
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
        r = -soerr;
    }
    static const char req[] = "GET /status HTTP/1.0\r\nConnection: close\r\n\r\n";
    if (r == 0 && send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) != (ssize_t)sizeof(req) - 1)
        r = -EIO;
    while (r == 0 && got < ANSWER_MAX && (r = wait_fd(fd, POLLIN, deadline)) == 0) {
        ssize_t n = recv(fd, buf + got, ANSWER_MAX - got, 0);
        if (n == 0)
            break;
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            r = -errno;
        got += n > 0 ? (size_t)n : 0;
    }
    close(fd);
    buf[got] = '\0';
    if (r < 0) {
        free(buf);
        return ea_errorf(err, r, "cannot read /status from the agent at '%s': %s", spec,
                         r == -ETIMEDOUT ? "timed out" : strerror(-r));
    }
    const char *body = strstr(buf, "\r\n\r\n");
    json_error_t je;
    json_t *j = body && strncmp(buf, "HTTP/1.", 7) == 0 && strncmp(buf + 8, " 200", 4) == 0
                    ? json_loads(body + 4, JSON_REJECT_DUPLICATES, &je)
                    : NULL;
    free(buf);
    if (!json_is_object(j) || !json_is_string(json_object_get(j, "node"))) {
        json_decref(j);
        return ea_errorf(err, -EBADMSG, "'%s' did not answer /status as an elastic-agent does",
                         spec);
    }
    *ret = j;
    return 0;
}
