// SPDX-License-Identifier: Apache-2.0
/*
 * /healthz follows the agent's hold on its store (issue 12), with a real etcd
 * (tests/etcd/etcd_harness): an agent with --http runs a worker; etcd is frozen with SIGSTOP
 * (connections stay open, nothing answers); within the lease TTL plus slack the agent declares
 * its lease lost, stops its worker (DESIGN.md §4 "Lost store") and /healthz turns 503 with the
 * reason, /readyz too; after SIGCONT the agent rejoins (as documented) and /healthz is 200 again,
 * then a new round runs and /readyz follows.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etcd_harness.h"
#include "harness.h"

#define W EA_HELPERS_DIR "/ea-testworker"

static char dir[256], state[300], envdir[300];
static struct etcd_harness eh;

static void setup(void)
{
    h_suite_dirs("observe-etcd", dir, state, envdir);
    memset(&eh, 0, sizeof(eh));
}

static void teardown(void)
{
    h_kill_agents();
    for (int i = 0; i < eh.n; i++)
        if (eh.m[i].pid > 0)
            kill(eh.m[i].pid, SIGCONT);
    etcd_harness_stop(&eh);
    h_rmdir(dir);
}

TestSuite(observe_etcd, .init = setup, .fini = teardown, .timeout = 120);

/* GET `path` from 127.0.0.1:port with the harness's HTTP helper: the status code (0: no answer),
 * the body in `body`. */
static int get(int port, const char *path, char *body, size_t size)
{
    char buf[16384];
    int code = 0;
    etcd_harness_http_get(port, path, buf, sizeof(buf), 5000);
    if (sscanf(buf, "HTTP/1.%*d %d", &code) != 1)
        code = 0;
    const char *b = strstr(buf, "\r\n\r\n");
    snprintf(body, size, "%s", b ? b + 4 : "");
    return code;
}

/* GET until the status is (want_ok ? 200 : anything answered but 200), within the deadline. */
static int get_until(int port, const char *path, bool want_ok, char *body, size_t size,
                     int timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    int code;
    do {
        code = get(port, path, body, size);
        if (code && (code == 200) == want_ok)
            return code;
    } while (h_now_ms() < deadline);
    return code;
}

Test(observe_etcd, healthz_flips_when_the_agent_loses_etcd_and_back_when_it_rejoins)
{
    cr_assert_eq(etcd_harness_start(&eh, 1), 0, "etcd did not start");
    struct h_agent a;
    const char *args[] = {"--rdzv-endpoint",
                          eh.endpoints,
                          "--run-id",
                          "hz",
                          "--node-id",
                          "n0",
                          "--min",
                          "1",
                          "--settle",
                          "0.3",
                          "--lease-ttl",
                          "2",
                          "--join-timeout",
                          "120",
                          "--stop-timeout",
                          "2",
                          "--http",
                          "127.0.0.1:0",
                          "--",
                          W,
                          "wait-file",
                          h_fmt("%s/go", envdir),
                          NULL};
    h_agent_start(&a, dir, "n0", args);
    cr_assert(h_log_wait(&a, "/metrics on http://127.0.0.1:", 20000), "no HTTP endpoint logged");
    char body[8192];
    FILE *f = fopen(a.log, "r");
    cr_assert(f);
    int port = 0;
    while (fgets(body, sizeof(body), f) && !port) {
        const char *p = strstr(body, "/metrics on http://127.0.0.1:");
        if (p)
            port = atoi(p + strlen("/metrics on http://127.0.0.1:"));
    }
    fclose(f);
    cr_assert(port > 0 && port < 65536);
    cr_assert(h_log_wait(&a, "round 1 ", 20000), "round 1 did not start");
    cr_assert_eq(get_until(port, "/readyz", true, body, sizeof(body), 5000), 200, "%s", body);
    cr_assert_eq(get(port, "/healthz", body, sizeof(body)), 200, "%s", body);
    cr_assert_str_eq(body, "ok\n");

    /* freeze etcd: the lease (TTL 2 s, renewed every TTL/3) cannot be renewed */
    cr_assert_eq(kill(eh.m[0].pid, SIGSTOP), 0);
    int64_t t0 = h_now_ms();
    cr_assert(h_log_wait(&a, "lease lost", 15000), "the agent never noticed etcd had gone");
    int code = get_until(port, "/healthz", false, body, sizeof(body), 3000);
    int64_t flipped = h_now_ms() - t0;
    cr_assert_eq(code, 503, "/healthz with etcd frozen: %d %s", code, body);
    cr_assert(strstr(body, "lease lost") || strstr(body, "store unreachable"), "%s", body);
    cr_log_info("/healthz turned 503 ('%.*s') %lld ms after etcd froze (lease TTL 2000 ms)",
                (int)strcspn(body, "\n"), body, (long long)flipped);
    cr_expect_lt(flipped, 2000 + 4000, "/healthz took %lld ms to turn unhealthy",
                 (long long)flipped);
    cr_assert_eq(get(port, "/readyz", body, sizeof(body)), 503, "%s", body);
    cr_assert_eq(get(port, "/metrics", body, sizeof(body)), 200);
    cr_assert(strstr(body, "\nelastic_agent_up 0\n"), "%s", body);

    /* etcd back: the agent rejoins (its old lease is gone or unusable) and is healthy again */
    cr_assert_eq(kill(eh.m[0].pid, SIGCONT), 0);
    int64_t t1 = h_now_ms();
    cr_assert(h_log_wait(&a, "rejoined run 'hz'", 20000), "the agent did not rejoin");
    code = get_until(port, "/healthz", true, body, sizeof(body), 5000);
    cr_assert_eq(code, 200, "/healthz after etcd came back: %d %s", code, body);
    cr_log_info("/healthz 200 again %lld ms after etcd resumed", (long long)(h_now_ms() - t1));
    cr_assert(h_log_wait(&a, "round 2 ", 20000), "no new round after rejoining");
    cr_assert_eq(get_until(port, "/readyz", true, body, sizeof(body), 5000), 200, "%s", body);

    f = fopen(h_fmt("%s/go", envdir), "w");
    cr_assert(f);
    fclose(f);
    h_expect_exit(&a, 0, 20000);
}
