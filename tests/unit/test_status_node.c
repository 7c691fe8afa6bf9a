// SPDX-License-Identifier: Apache-2.0
/*
 * status --agent's read of a node's /status (agent/observe/status_node.c) against a socket that
 * a forked child serves: an agent's answer is decoded; one that never answers is given up on at
 * the deadline; an answer that is not an agent's 200 is refused; bad addresses are refused. And
 * the agent's JSON of its links.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ea_time.h"
#include "escape_check.h"
#include "status_node.h"

static pid_t child = -1;

static void reap(void)
{
    if (child > 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    child = -1;
}

TestSuite(status_node, .fini = reap, .timeout = 10);

/* Listen on a free loopback port; the child accepts one connection and writes `answer` (NULL:
 * it never answers). Returns "127.0.0.1:PORT". */
static const char *serve(const char *answer)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(fd, 4), 0);
    socklen_t len = sizeof(sa);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) { /* alone, should the test be killed: no output pipe held, a time limit */
        close(STDOUT_FILENO);
        close(STDERR_FILENO);
        alarm(8);
        int c = accept(fd, NULL, NULL);
        char req[512];
        (void)!read(c, req, sizeof(req));
        if (!answer)
            for (;;)
                pause();
        (void)!write(c, answer, strlen(answer));
        close(c);
        _exit(0);
    }
    close(fd);
    static char spec[64];
    snprintf(spec, sizeof(spec), "127.0.0.1:%d", ntohs(sa.sin_port));
    return spec;
}

Test(status_node, an_agents_answer_is_decoded)
{
    const char *spec = serve("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"
                             "{\"node\":\"n0\",\"round\":3,\"liveness\":null}");
    json_t *j = NULL;
    struct ea_error err = {0};
    cr_assert_eq(status_node_fetch(spec, 2000, &j, &err), 0, "%s", err.msg);
    cr_assert_str_eq(json_string_value(json_object_get(j, "node")), "n0");
    json_decref(j);
}

/* Mutation: wait_fd without its deadline -> the read blocks forever, the test times out. */
Test(status_node, an_agent_that_never_answers_is_given_up_on)
{
    const char *spec = serve(NULL);
    json_t *j = NULL;
    struct ea_error err = {0};
    int64_t t0 = ea_now_ms();
    cr_assert_eq(status_node_fetch(spec, 300, &j, &err), -ETIMEDOUT, "%s", err.msg);
    cr_assert_lt(ea_now_ms() - t0, 3000);
    cr_assert(strstr(err.msg, "timed out"), "%s", err.msg);
}

/* Mutation: the status line's check dropped -> an error page with a JSON body is taken. */
Test(status_node, an_answer_that_is_not_an_agents_is_refused)
{
    const char *spec = serve("HTTP/1.1 404 Not Found\r\n\r\n{\"node\":\"n0\"}");
    json_t *j = NULL;
    struct ea_error err = {0};
    cr_assert_eq(status_node_fetch(spec, 2000, &j, &err), -EBADMSG, "%s", err.msg);
    cr_assert(strstr(err.msg, "did not answer /status as an elastic-agent does"), "%s", err.msg);
}

Test(status_node, addresses_are_checked)
{
    struct ea_error err = {0};
    cr_assert_eq(status_node_check_addr(":8080", &err), 0, "%s", err.msg);
    cr_assert_eq(status_node_check_addr("[::1]:8080", &err), 0, "%s", err.msg);
    const char *bad[] = {"8080",        "host:8080",       "127.0.0.1:0",
                         "127.0.0.1:x", "127.0.0.1:70000", "[::1:80"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        cr_assert_eq(status_node_check_addr(bad[i], &err), -EINVAL, "%s", bad[i]);
}

Test(status_node, the_agents_json_of_its_links)
{
    struct metrics_snapshot m = {.round = 2, .group_rank = 1};
    snprintf(m.node_id, sizeof(m.node_id), "n1");
    snprintf(m.liveness_out.peer, sizeof(m.liveness_out.peer), "n2");
    snprintf(m.liveness_out.state, sizeof(m.liveness_out.state), "up");
    m.liveness_out.heartbeat_age_s = 0.25;
    snprintf(m.liveness_in.peer, sizeof(m.liveness_in.peer), "n0");
    snprintf(m.liveness_in.state, sizeof(m.liveness_in.state), "connecting");
    m.liveness_in.heartbeat_age_s = -1;
    char *s = status_node_json(&m);
    cr_assert(s);
    json_t *j = json_loads(s, 0, NULL);
    free(s);
    json_t *live = json_object_get(j, "liveness");
    json_t *out = json_object_get(live, "successor"), *in = json_object_get(live, "predecessor");
    cr_assert_str_eq(json_string_value(json_object_get(out, "state")), "up");
    cr_assert_float_eq(json_number_value(json_object_get(out, "heartbeat_age_s")), 0.25, 1e-9);
    cr_assert(json_is_null(json_object_get(in, "heartbeat_age_s")));
    cr_assert_str_eq(json_string_value(json_object_get(in, "peer")), "n0");
    json_decref(j);
    struct metrics_snapshot off = {.group_rank = -1};
    s = status_node_json(&off);
    j = json_loads(s, 0, NULL);
    free(s);
    cr_assert(json_is_null(json_object_get(j, "liveness")), "no ring: null");
    cr_assert(json_is_null(json_object_get(j, "group_rank")));
    json_decref(j);
}

/* Issue 38: `status --agent` prints what a peer's /status says (its node id, workers, ring links'
 * peers and states) under the store's view: a fake agent's control characters there must not
 * clear the screen, retitle the terminal or forge lines. Its answer is JSON: valid UTF-8, so no
 * raw C1 bytes. Mutation checked: the escape of the node line, of a link's peer. */
Test(status_node, a_peers_control_characters_are_escaped)
{
    json_t *link =
        json_pack("{s:s, s:s, s:f}", "peer", EVIL_UTF8, "state", EVIL_UTF8, "heartbeat_age_s", 0.5);
    json_t *body =
        json_pack("{s:s, s:i, s:i, s:s, s:{s:O, s:o}}", "node", EVIL_UTF8, "round", 3, "group_rank",
                  1, "workers", EVIL_UTF8, "liveness", "successor", link, "predecessor", link);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    cr_assert(text);
    char answer[4096];
    snprintf(answer, sizeof(answer), "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n%s",
             text);
    free(text);
    const char *spec = serve(answer);
    json_t *j = NULL;
    struct ea_error err = {0};
    cr_assert_eq(status_node_fetch(spec, 2000, &j, &err), 0, "%s", err.msg);
    char *got = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&got, &len);
    status_node_print_text(f, spec, j);
    fclose(f);
    json_decref(j);
    assert_terminal_safe(got, "status --agent");
    cr_expect(strstr(got, "\nthis node: " EVIL_UTF8_ESC " (its agent at 127.0.0.1:"), "%s", got);
    cr_expect(strstr(got, "group rank 1, workers " EVIL_UTF8_ESC "\n"), "%s", got);
    cr_expect(strstr(got, "  ring link to successor '" EVIL_UTF8_ESC "': " EVIL_UTF8_ESC
                          ", last heartbeat 0.5 s ago\n"),
              "%s", got);
    free(got);
}
