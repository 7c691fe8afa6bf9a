// SPDX-License-Identifier: Apache-2.0
/*
 * Observability end to end (issue 12), with real agents on the file backend: `status` against a
 * live run (JSON, table, a missing run, --watch following a join through a pipe), the --events
 * stream of a run with one restart, --log-format json, and the HTTP endpoint (/healthz, /readyz
 * flipping from 503 to 200, /metrics checked by a Prometheus text-format parser).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define W EA_HELPERS_DIR "/ea-testworker"

static char dir[256], state[300], envdir[300];

static void setup(void)
{
    h_suite_dirs("observe", dir, state, envdir);
}

static void teardown(void)
{
    h_kill_agents(); /* whatever a failed assertion left running */
    h_rmdir(dir);
}

TestSuite(observe, .init = setup, .fini = teardown, .timeout = 90);

/* Start agent `name` on run "obs" with `extra` options (NULL-terminated) and `cmd`. */
static void start(struct h_agent *a, const char *name, const char *const *extra,
                  const char *const *cmd)
{
    const char *base[] = {"--state-dir", state, "--run-id",       "obs", "--node-id", name,
                            "--settle",    "0.3", "--stop-timeout", "2", NULL};
    h_agent_start_argv(a, dir, name, base, extra, cmd);
}

/* Workers that run until the test creates envdir/go. */
static const char *const *waiting_cmd(void)
{
    static const char *cmd[] = {W, "wait-file", NULL, NULL};
    cmd[2] = h_fmt("%s/go", envdir);
    return cmd;
}

static void release_workers(void)
{
    FILE *f = fopen(h_fmt("%s/go", envdir), "w");
    cr_assert(f);
    fclose(f);
}

/* `elastic-agent status ARGS` to completion: its exit code; stdout in dir/<name>.out. */
static int status_run(struct h_agent *s, const char *name, const char *const *extra)
{
    const char *args[16] = {"status", "--state-dir", state, "--run-id", "obs"};
    int n = 5;
    for (int i = 0; extra && extra[i]; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    h_agent_start(s, dir, name, args);
    return h_agent_wait(s, 10000);
}

/* Occurrences of `needle` in the file at `path`. */
static int count_lines(const char *path, const char *needle)
{
    char *t = h_slurp(path, NULL);
    int n = 0;
    for (const char *p = t; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    free(t);
    return n;
}

Test(observe, status_of_a_live_run_json_table_and_missing_run)
{
    struct h_agent a[2], s;
    const char *extra[] = {"--min", "2", "--max", "3", "--nproc-per-node", "2", NULL};
    for (int i = 0; i < 2; i++)
        start(&a[i], h_fmt("n%d", i), extra, waiting_cmd());
    for (int i = 0; i < 2; i++)
        cr_assert(h_log_wait(&a[i], "round 1 ", 20000), "n%d did not start round 1", i);

    const char *json_args[] = {"--json", NULL};
    cr_assert_eq(status_run(&s, "status-json", json_args), 0);
    json_error_t jerr;
    json_t *j = json_load_file(s.out, 0, &jerr);
    cr_assert(j, "status --json is not JSON: %s", jerr.text);
    cr_assert_str_eq(json_string_value(json_object_get(j, "status")), "running");
    cr_assert_eq(json_integer_value(json_object_get(j, "round")), 1);
    cr_assert_gt(json_integer_value(json_object_get(j, "generation")), 0);
    cr_assert_eq(json_integer_value(json_object_get(j, "world_size")), 4);
    json_t *ms = json_object_get(j, "members");
    cr_assert_eq(json_array_size(ms), 2);
    bool seen[2] = {false, false};
    for (size_t i = 0; i < 2; i++) {
        json_t *m = json_array_get(ms, i);
        const char *node = json_string_value(json_object_get(m, "node"));
        cr_assert(node && (strcmp(node, "n0") == 0 || strcmp(node, "n1") == 0));
        seen[node[1] - '0'] = true;
        cr_assert_eq(json_integer_value(json_object_get(m, "group_rank")), (json_int_t)i);
        cr_assert_eq(json_integer_value(json_object_get(m, "rank_first")), (json_int_t)(2 * i));
        cr_assert_eq(json_integer_value(json_object_get(m, "rank_last")), (json_int_t)(2 * i + 1));
        cr_assert_str_eq(json_string_value(json_object_get(m, "state")), "running");
    }
    cr_assert(seen[0] && seen[1]);
    cr_assert_eq(json_array_size(json_object_get(j, "spares")), 0);
    json_decref(j);

    cr_assert_eq(status_run(&s, "status-text", NULL), 0);
    char *text = h_slurp(s.out, NULL);
    cr_assert(strstr(text, "status        running\n"), "%s", text);
    cr_assert(strstr(text, "round         1 (generation "), "%s", text);
    cr_assert(strstr(text, "GROUP  NODE  HOST"), "%s", text);
    cr_assert(strstr(text, "0-1") && strstr(text, "2-3"), "%s", text);
    free(text);

    struct h_agent missing;
    const char *args[] = {"status", "--state-dir", state, "--run-id", "nope", NULL};
    h_agent_start(&missing, dir, "status-missing", args);
    cr_assert_eq(h_agent_wait(&missing, 10000), 4);
    cr_assert(h_file_contains(missing.log, "no run 'nope'"));

    release_workers();
    for (int i = 0; i < 2; i++)
        h_expect_exit(&a[i], 0, 20000);
    cr_assert_eq(status_run(&s, "status-done", NULL), 0);
    cr_assert(h_file_contains(s.out, "status        succeeded"));
}

/* ---- status --watch through a pipe ----------------------------------------------------- */

struct piped {
    pid_t pid;
    int fd;
    char buf[1 << 16];
    size_t len;
};

static void spawn_piped(struct piped *p, const char *const *args)
{
    int fds[2];
    cr_assert_eq(pipe2(fds, O_CLOEXEC), 0);
    p->len = 0;
    p->pid = fork();
    cr_assert_geq(p->pid, 0);
    if (p->pid == 0) {
        dup2(fds[1], 1);
        const char *argv[32] = {EA_AGENT_BIN};
        for (int i = 0; i < 30 && args[i]; i++)
            argv[i + 1] = args[i];
        execv(argv[0], (char **)argv);
        _exit(127);
    }
    close(fds[1]);
    p->fd = fds[0];
}

/* Read lines until one satisfies `pred`, within the deadline: that line (static), or NULL. */
static const char *read_line_until(struct piped *p, bool (*pred)(const char *), int timeout_ms)
{
    static char line[1 << 16];
    int64_t deadline = h_now_ms() + timeout_ms;
    for (;;) {
        char *nl;
        while ((nl = memchr(p->buf, '\n', p->len))) {
            size_t n = (size_t)(nl - p->buf);
            memcpy(line, p->buf, n);
            line[n] = '\0';
            memmove(p->buf, nl + 1, p->len - n - 1);
            p->len -= n + 1;
            if (pred(line))
                return line;
        }
        int64_t left = deadline - h_now_ms();
        struct pollfd pfd = {.fd = p->fd, .events = POLLIN};
        if (left <= 0 || poll(&pfd, 1, (int)left) != 1)
            return NULL;
        ssize_t r = read(p->fd, p->buf + p->len, sizeof(p->buf) - p->len - 1);
        if (r <= 0)
            return NULL;
        p->len += (size_t)r;
    }
}

static json_int_t members_in(const char *line)
{
    json_t *j = json_loads(line, 0, NULL);
    cr_assert(j, "--watch --json printed a line that is not JSON: %s", line);
    json_int_t n = json_object_get(j, "status") &&
                           strcmp(json_string_value(json_object_get(j, "status")), "running") == 0
                       ? (json_int_t)json_array_size(json_object_get(j, "members"))
                       : 0;
    json_decref(j);
    return n;
}

static bool two_members(const char *line)
{
    return members_in(line) == 2;
}

static bool three_members(const char *line)
{
    return members_in(line) == 3;
}

Test(observe, status_watch_prints_a_new_view_when_a_node_joins)
{
    struct h_agent a[3];
    const char *extra[] = {"--min", "2", "--max", "3", NULL};
    for (int i = 0; i < 2; i++)
        start(&a[i], h_fmt("n%d", i), extra, waiting_cmd());
    for (int i = 0; i < 2; i++)
        cr_assert(h_log_wait(&a[i], "round 1 ", 20000));
    struct piped w;
    const char *args[] = {"status", "--state-dir", state,     "--run-id",
                          "obs",    "--json",      "--watch", NULL};
    spawn_piped(&w, args);
    cr_assert(read_line_until(&w, two_members, 10000), "no first view with 2 members");
    start(&a[2], "n2", extra, waiting_cmd());
    const char *line = read_line_until(&w, three_members, 20000);
    cr_assert(line, "--watch did not show the third node joining");
    json_t *j = json_loads(line, 0, NULL);
    cr_assert_eq(json_integer_value(json_object_get(j, "round")), 2);
    json_decref(j);
    struct h_agent watcher = {.pid = w.pid, .pidfd = (int)syscall(SYS_pidfd_open, w.pid, 0)};
    cr_assert_geq(watcher.pidfd, 0);
    kill(w.pid, SIGINT);
    cr_assert_eq(h_agent_wait(&watcher, 5000), 0, "status --watch did not exit 0 on SIGINT");
    close(w.fd);
    release_workers();
    for (int i = 0; i < 3; i++)
        h_expect_exit(&a[i], 0, 20000);
}

/* ---- events ---------------------------------------------------------------------------- */

struct ev_line {
    char event[32], node[16];
    json_int_t round;
    json_t *o;
};

/* Every line of the file parses, with the required fields. */
static size_t load_events(const char *path, struct ev_line *out, size_t max)
{
    regex_t re;
    cr_assert_eq(regcomp(&re, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$",
                         REG_EXTENDED | REG_NOSUB),
                 0);
    FILE *f = fopen(path, "r");
    cr_assert(f, "no events file %s", path);
    char line[8192];
    size_t n = 0;
    while (fgets(line, sizeof(line), f)) {
        json_error_t jerr;
        json_t *o = json_loads(line, 0, &jerr);
        cr_assert(json_is_object(o), "event line is not a JSON object: %s", line);
        const char *t = json_string_value(json_object_get(o, "time"));
        cr_assert(t && regexec(&re, t, 0, NULL, 0) == 0, "bad time in %s", line);
        cr_assert_str_eq(json_string_value(json_object_get(o, "run_id")), "obs");
        cr_assert(json_is_string(json_object_get(o, "node")), "%s", line);
        cr_assert(json_is_integer(json_object_get(o, "round")), "%s", line);
        cr_assert(json_is_integer(json_object_get(o, "generation")), "%s", line);
        cr_assert(json_is_string(json_object_get(o, "event")), "%s", line);
        cr_assert_lt(n, max);
        snprintf(out[n].event, sizeof(out[n].event), "%s",
                 json_string_value(json_object_get(o, "event")));
        snprintf(out[n].node, sizeof(out[n].node), "%s",
                 json_string_value(json_object_get(o, "node")));
        out[n].round = json_integer_value(json_object_get(o, "round"));
        out[n].o = o;
        n++;
    }
    fclose(f);
    regfree(&re);
    return n;
}

/* Index of the first event of `node` after `from` named `name` (and in `round` if > 0). */
static size_t find_ev(const struct ev_line *e, size_t n, size_t from, const char *node,
                      const char *name, json_int_t round)
{
    for (size_t i = from; i < n; i++)
        if (strcmp(e[i].node, node) == 0 && strcmp(e[i].event, name) == 0 &&
            (round <= 0 || e[i].round == round))
            return i;
    cr_assert_fail("no '%s' event of %s (round %lld) after line %zu", name, node, (long long)round,
                   from);
    return n;
}

Test(observe, events_of_a_run_with_one_restart_come_in_order)
{
    struct h_agent a[2];
    const char *events = h_fmt("%s/events.jsonl", dir);
    const char *extra[] = {
        "--min", "2",        "--max", "2", "--nproc-per-node", "2", "--max-restarts",
        "1",     "--events", events,  NULL};
    const char *cmd[] = {W, "fail-once", envdir, "3", NULL};
    for (int i = 0; i < 2; i++)
        start(&a[i], h_fmt("n%d", i), extra, cmd); /* both append to one file */
    for (int i = 0; i < 2; i++)
        h_expect_exit(&a[i], 0, 30000);
    struct ev_line e[256];
    size_t n = load_events(events, e, 256);
    /* the node whose worker failed */
    const char *failed = NULL;
    for (size_t i = 0; i < n && !failed; i++)
        if (strcmp(e[i].event, "failure") == 0)
            failed = e[i].node;
    cr_assert(failed, "no failure event");
    size_t i = find_ev(e, n, 0, failed, "joined", 0);
    i = find_ev(e, n, i, failed, "workers_started", 1);
    i = find_ev(e, n, i, failed, "worker_exited", 1);
    while (json_is_true(json_object_get(e[i].o, "ok")))
        i = find_ev(e, n, i + 1, failed, "worker_exited", 1);
    cr_assert_eq(json_integer_value(json_object_get(e[i].o, "exit_code")), 3);
    i = find_ev(e, n, i, failed, "failure", 1);
    i = find_ev(e, n, i, failed, "restart", 2);
    cr_assert_eq(json_integer_value(json_object_get(e[i].o, "restart_count")), 1);
    i = find_ev(e, n, i, failed, "workers_started", 2);
    i = find_ev(e, n, i, failed, "success", 0);
    i = find_ev(e, n, i, failed, "exited", 0);
    cr_assert_eq(json_integer_value(json_object_get(e[i].o, "exit_code")), 0);
    /* the other node saw the same run: a round committed by a failure, then success */
    const char *other = strcmp(failed, "n0") == 0 ? "n1" : "n0";
    size_t k = find_ev(e, n, 0, other, "round_committed", 2);
    cr_assert_str_eq(json_string_value(json_object_get(e[k].o, "cause")), "failure");
    find_ev(e, n, k, other, "success", 0);
    for (size_t j = 0; j < n; j++)
        json_decref(e[j].o);
}

Test(observe, log_format_json_puts_log_lines_and_events_on_stderr)
{
    struct h_agent a;
    const char *extra[] = {"--standalone", "--log-format", "json", NULL};
    const char *cmd[] = {"true", NULL};
    start(&a, "solo", extra, cmd);
    h_expect_exit(&a, 0, 20000);
    FILE *f = fopen(a.log, "r");
    cr_assert(f);
    char line[8192];
    int logs = 0, events = 0;
    while (fgets(line, sizeof(line), f)) {
        json_t *o = json_loads(line, 0, NULL);
        cr_assert(json_is_object(o), "stderr line is not JSON: %s", line);
        cr_assert_str_eq(json_string_value(json_object_get(o, "node")), "solo");
        cr_assert(json_is_string(json_object_get(o, "time")));
        if (json_object_get(o, "msg")) {
            cr_assert(json_is_string(json_object_get(o, "level")), "%s", line);
            cr_assert(json_is_integer(json_object_get(o, "round")), "%s", line);
            logs++;
        } else {
            cr_assert(json_is_string(json_object_get(o, "event")), "%s", line);
            events++;
        }
        json_decref(o);
    }
    fclose(f);
    cr_assert_gt(logs, 0);
    cr_assert_gt(events, 0);
    cr_assert(h_file_contains(a.log, "\"event\":\"joined\""));
    cr_assert(h_file_contains(a.log, "\"event\":\"success\""));
}

/* ---- HTTP ------------------------------------------------------------------------------ */

/* GET `path` from 127.0.0.1:port or [::1]:port (`family`): the status code (body in *ret_body,
 * malloc'ed). */
static int http_get_at(int family, int port, const char *path, char **ret_body)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct sockaddr_in6 sa6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
                               .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int c = family == AF_INET6 ? connect(fd, (struct sockaddr *)&sa6, sizeof(sa6))
                               : connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    cr_assert_eq(c, 0, "connect: %s", strerror(errno));
    char req[256];
    int len = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
    cr_assert_eq(write(fd, req, (size_t)len), len);
    size_t cap = 1 << 16, got = 0;
    char *buf = malloc(cap);
    int64_t deadline = h_now_ms() + 5000;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left = deadline - h_now_ms();
        cr_assert(left > 0 && poll(&p, 1, (int)left) == 1, "no HTTP answer for %s", path);
        if (got + 1 >= cap) {
            char *bigger = realloc(buf, cap *= 2);
            cr_assert_not_null(bigger);
            buf = bigger;
        }
        ssize_t r = read(fd, buf + got, cap - got - 1);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    int code = 0;
    cr_assert_eq(sscanf(buf, "HTTP/1.%*d %d", &code), 1, "not an HTTP answer: %s", buf);
    char *body = strstr(buf, "\r\n\r\n");
    *ret_body = strdup(body ? body + 4 : "");
    free(buf);
    return code;
}

static int http_get(int port, const char *path, char **ret_body)
{
    return http_get_at(AF_INET, port, path, ret_body);
}

/* GET until the answer has status `want` (the agent publishes after it logs): true if in time. */
static bool http_until_at(int family, int port, const char *path, int want, int timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    do {
        char *body;
        int code = http_get_at(family, port, path, &body);
        free(body);
        if (code == want)
            return true;
    } while (h_now_ms() < deadline);
    return false;
}

static bool http_until(int port, const char *path, int want, int timeout_ms)
{
    return http_until_at(AF_INET, port, path, want, timeout_ms);
}

static bool http_until6(int port, const char *path, int want, int timeout_ms)
{
    return http_until_at(AF_INET6, port, path, want, timeout_ms);
}

/* A minimal Prometheus text-format (0.0.4) parser: every sample belongs to a declared TYPE,
 * names and labels are well formed, values are numbers. Returns the value of `want` (a name
 * with its labels exactly as printed), or NAN when absent. */
static double prom_parse(const char *text, const char *want)
{
    regex_t sample, type;
    cr_assert_eq(regcomp(&sample,
                         "^([a-zA-Z_:][a-zA-Z0-9_:]*)(\\{[a-zA-Z_][a-zA-Z0-9_]*=\"[^\"]*\""
                         "(,[a-zA-Z_][a-zA-Z0-9_]*=\"[^\"]*\")*\\})? ([-+0-9.eEInfNa]+)$",
                         REG_EXTENDED),
                 0);
    cr_assert_eq(regcomp(&type,
                         "^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) "
                         "(counter|gauge|histogram|summary|untyped)$",
                         REG_EXTENDED),
                 0);
    char typed[64][96];
    size_t n_typed = 0;
    double found = NAN;
    char *copy = strdup(text), *save = NULL;
    for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        regmatch_t m[5];
        if (strncmp(l, "# HELP ", 7) == 0)
            continue;
        if (l[0] == '#') {
            cr_assert_eq(regexec(&type, l, 2, m, 0), 0, "bad comment line '%s'", l);
            cr_assert_lt(n_typed, 64);
            snprintf(typed[n_typed++], 96, "%.*s", (int)(m[1].rm_eo - m[1].rm_so), l + m[1].rm_so);
            continue;
        }
        cr_assert_eq(regexec(&sample, l, 5, m, 0), 0, "bad sample line '%s'", l);
        char name[128];
        snprintf(name, sizeof(name), "%.*s", (int)(m[1].rm_eo - m[1].rm_so), l + m[1].rm_so);
        bool declared = false;
        for (size_t i = 0; i < n_typed && !declared; i++) {
            size_t tl = strlen(typed[i]);
            declared = strncmp(name, typed[i], tl) == 0 &&
                       (name[tl] == '\0' || strcmp(name + tl, "_bucket") == 0 ||
                        strcmp(name + tl, "_sum") == 0 || strcmp(name + tl, "_count") == 0);
        }
        cr_assert(declared, "sample '%s' has no TYPE line before it", name);
        char *end;
        double v = strtod(l + m[4].rm_so, &end);
        cr_assert(end == l + m[4].rm_eo, "bad value in '%s'", l);
        if (strncmp(l, want, strlen(want)) == 0 && l[strlen(want)] == ' ')
            found = v;
    }
    free(copy);
    regfree(&sample);
    regfree(&type);
    return found;
}

/* Every thread of `pid` blocks SIGTERM, SIGINT, SIGHUP and SIGCHLD (/proc/PID/task/TID/status). */
static void assert_every_thread_blocks(pid_t pid)
{
    unsigned long long want =
        1ULL << (SIGTERM - 1) | 1ULL << (SIGINT - 1) | 1ULL << (SIGHUP - 1) | 1ULL << (SIGCHLD - 1);
    DIR *d = opendir(h_fmt("/proc/%d/task", (int)pid));
    cr_assert(d);
    int threads = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char *st = h_slurp(h_fmt("/proc/%d/task/%s/status", (int)pid, e->d_name), NULL);
        const char *blk = strstr(st, "SigBlk:");
        cr_assert(blk);
        unsigned long long mask = strtoull(blk + 7, NULL, 16);
        cr_assert_eq(mask & want, want, "thread %s blocks only %llx", e->d_name, mask);
        free(st);
        threads++;
    }
    closedir(d);
    cr_assert_geq(threads, 2, "the HTTP server runs in its own thread");
}

static int port_of(const struct h_agent *a)
{
    cr_assert(h_log_wait(a, "/metrics on http://", 10000), "no HTTP endpoint logged");
    char *log = h_slurp(a->log, NULL);
    const char *p = strstr(log, "/metrics on http://127.0.0.1:");
    cr_assert(p);
    int port = atoi(p + strlen("/metrics on http://127.0.0.1:"));
    free(log);
    cr_assert(port > 0 && port < 65536);
    return port;
}

Test(observe, http_health_readiness_and_metrics)
{
    struct h_agent a[2];
    const char *extra[] = {"--min", "2", "--nproc-per-node", "2", "--http", "127.0.0.1:0", NULL};
    const char *plain[] = {"--min", "2", "--nproc-per-node", "2", NULL};
    start(&a[0], "n0", extra, waiting_cmd());
    int port = port_of(&a[0]);
    cr_assert(h_log_wait(&a[0], "waiting for nodes", 10000));
    cr_assert(http_until(port, "/healthz", 200, 5000), "/healthz is not 200 once joined");
    char *body;
    cr_assert_eq(http_get(port, "/readyz", &body), 503, "/readyz while waiting: %s", body);
    free(body);
    cr_assert_eq(http_get(port, "/nothing", &body), 404);
    free(body);

    start(&a[1], "n1", plain, waiting_cmd());
    cr_assert(h_log_wait(&a[0], "round 1 ", 20000));
    cr_assert(http_until(port, "/readyz", 200, 5000), "/readyz is not 200 while running");
    cr_assert_eq(http_get(port, "/metrics", &body), 200);
    cr_assert_eq(prom_parse(body, "elastic_agent_round"), 1, "%s", body);
    cr_assert_eq(prom_parse(body, "elastic_agent_workers_running"), 2, "%s", body);
    cr_assert_eq(prom_parse(body, "elastic_agent_world_size"), 4, "%s", body);
    cr_assert_eq(prom_parse(body, "elastic_agent_members"), 2, "%s", body);
    cr_assert_eq(prom_parse(body, "elastic_agent_rounds_started_total"), 1, "%s", body);
    cr_assert_eq(prom_parse(body, "elastic_agent_restarts"), 0, "%s", body);
    cr_assert_eq(prom_parse(body, "elastic_agent_scale_events_total"), 0, "%s", body);
    cr_assert_eq(prom_parse(body, "elastic_agent_lease_renew_failures_total"), 0, "%s", body);
    cr_assert_eq(prom_parse(body, "elastic_agent_up"), 1, "%s", body);
    cr_assert_eq(prom_parse(body, "elastic_agent_run_status{state=\"running\"}"), 1, "%s", body);
    cr_assert_eq(prom_parse(body, "elastic_agent_state{state=\"running\"}"), 1, "%s", body);
    double rdzv = prom_parse(body, "elastic_agent_last_rendezvous_seconds");
    cr_assert(rdzv > 0 && rdzv < 30, "last rendezvous %g s", rdzv);
    double count = prom_parse(body, "elastic_agent_store_request_duration_seconds_count");
    double inf =
        prom_parse(body, "elastic_agent_store_request_duration_seconds_bucket{le=\"+Inf\"}");
    cr_assert(count >= 3 && inf == count, "store requests: count %g, +Inf bucket %g", count, inf);
    cr_assert(prom_parse(body, "elastic_agent_store_request_duration_seconds_sum") > 0);
    free(body);

    /* libmicrohttpd's thread must not take signals meant for the agent's signalfd */
    assert_every_thread_blocks(a[0].pid);

    release_workers();
    for (int i = 0; i < 2; i++)
        h_expect_exit(&a[i], 0, 20000);
}

/* The real `promtool check metrics` (Debian's prometheus package, installed by install-deps.sh
 * --test) on a live agent's /metrics: Prometheus's naming rules, beside prom_parse's values.
 * Missing promtool is a failure, not a skip: CI must run this check. */
Test(observe, metrics_pass_promtool)
{
    /* mutation checked: metric "restarts" back to "restart_count" in agent/observe/metrics.c: fails */
    cr_assert_eq(system("command -v promtool >/dev/null"), 0,
                 "promtool not found: ./scripts/install-deps.sh --test installs it (prometheus)");
    struct h_agent a;
    const char *extra[] = {"--standalone", "--nproc-per-node", "2", "--http", "127.0.0.1:0", NULL};
    start(&a, "solo", extra, waiting_cmd());
    int port = port_of(&a);
    cr_assert(http_until(port, "/readyz", 200, 10000), "workers never ran");
    char *body;
    cr_assert_eq(http_get(port, "/metrics", &body), 200);
    const char *path = h_fmt("%s/metrics.txt", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(body, f);
    fclose(f);
    free(body);
    const char *out = h_fmt("%s/promtool.out", dir);
    int rc = system(h_fmt("promtool check metrics < '%s' > '%s' 2>&1", path, out));
    char *said = h_slurp(out, NULL);
    cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "promtool check metrics: %s", said);
    free(said);
    release_workers();
    h_expect_exit(&a, 0, 20000);
}

/* GET /metrics until `name` has value `want` (the agent publishes its snapshot after it logs):
 * true if in time; the last body (for the message) in *ret_body, to be freed. */
static bool metric_until(int port, const char *name, double want, int timeout_ms, char **ret_body)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    for (;;) {
        char *body;
        cr_assert_eq(http_get(port, "/metrics", &body), 200);
        bool ok = prom_parse(body, name) == want;
        if (ok || h_now_ms() >= deadline) {
            *ret_body = body;
            return ok;
        }
        free(body);
        poll(NULL, 0, 20); /* the next scrape; the deadline bounds the wait */
    }
}

static void expect_metric(int port, const char *name, double want)
{
    char *body;
    bool ok = metric_until(port, name, want, 5000, &body);
    cr_assert(ok, "%s is %g, not %g, 5 s after the event that sets it:\n%s", name,
              prom_parse(body, name), want, body);
    free(body);
}

/*
 * The counters and gauges that only move on events: a worker failure, another node joining, this
 * agent frozen past its lease (fenced out) and back, rejoining. Each is read after its event.
 * Mutations (one at a time): `a->m.worker_failures++;` or `a->m.rejoins++;` (agent/agent.c)
 * deleted, `m->live_nodes = ...` or `m->max_restarts = ...` set to 0 -> the matching assertion.
 */
Test(observe, metrics_follow_failures_joins_and_rejoins)
{
    struct h_agent a[2];
    const char *extra[] = {"--min",          "1",           "--max",       "2",
                           "--max-restarts", "3",           "--lease-ttl", "1",
                           "--http",         "127.0.0.1:0", NULL};
    const char *plain[] = {"--min", "1",           "--max", "2", "--max-restarts",
                           "3",     "--lease-ttl", "1",     NULL};
    /* round 1's worker fails; later rounds' workers wait for the go file */
    const char *cmd[] = {
        "/bin/sh", "-c",
        h_fmt("[ \"$ELASTIC_ROUND\" = 1 ] && exit 3; exec %s wait-file %s/go", W, envdir), NULL};
    start(&a[0], "n0", extra, cmd);
    int port = port_of(&a[0]);
    cr_assert(h_log_wait(&a[0], "round 2 ", 20000), "no restart after the failure");
    expect_metric(port, "elastic_agent_worker_failures_total", 1);
    expect_metric(port, "elastic_agent_max_restarts", 3);
    expect_metric(port, "elastic_agent_live_nodes", 1);
    expect_metric(port, "elastic_agent_rejoins_total", 0);

    start(&a[1], "n1", plain, cmd);
    cr_assert(h_log_wait(&a[1], "round 3 ", 20000), "n1 never joined a round");
    expect_metric(port, "elastic_agent_live_nodes", 2);

    /* frozen past its lease: n1 goes on alone (round 4), n0 is fenced out and rejoins */
    h_agent_freeze(&a[0]);
    bool lost = h_log_wait(&a[1], "round 4 ", 20000);
    h_agent_signal(&a[0], SIGCONT);
    cr_assert(lost, "n1 did not go on without the frozen n0");
    cr_assert(h_log_wait(&a[0], "rejoined run", 20000), "n0 did not rejoin");
    expect_metric(port, "elastic_agent_rejoins_total", 1);
    expect_metric(port, "elastic_agent_worker_failures_total", 1);
    cr_assert(h_log_wait(&a[0], "round 5 ", 20000), "n0 is not back in a round");
    expect_metric(port, "elastic_agent_live_nodes", 2);

    release_workers();
    for (int i = 0; i < 2; i++)
        h_expect_exit(&a[i], 0, 20000);
}

Test(observe, http_port_in_use_is_a_usage_error)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(fd, 1), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    struct h_agent a;
    const char *extra[] = {"--standalone", "--http", h_fmt(":%d", ntohs(sa.sin_port)), NULL};
    const char *cmd[] = {"true", NULL};
    start(&a, "solo", extra, cmd);
    h_expect_exit(&a, 2, 10000);
    cr_assert(h_file_contains(a.log, "--http: cannot listen on 127.0.0.1:"));
    close(fd);
}

/* ---- worker output: --local-ranks-filter, the stderr tail in the failure table ----------- */

Test(observe, local_ranks_filter_tees_only_those_ranks_and_logs_all)
{
    struct h_agent a;
    const char *logdir = h_fmt("%s/wlogs", dir);
    const char *extra[] = {"--standalone", "--nproc-per-node",     "3",   "--tee", "--log-dir",
                           logdir,         "--local-ranks-filter", "0,2", NULL};
    const char *cmd[] = {W, "echo-lines", "2", NULL};
    start(&a, "solo", extra, cmd);
    h_expect_exit(&a, 0, 20000);
    for (int r = 0; r < 3; r++) {
        bool shown = r != 1;
        cr_assert_eq(h_file_contains(a.out, h_fmt("[%d]:line 2\n", r)), shown, "rank %d stdout", r);
        cr_assert_eq(h_file_contains(a.log, h_fmt("[%d]:eline 2\n", r)), shown, "rank %d stderr",
                     r);
        /* every rank, shown or not, in its log files */
        cr_assert(h_file_contains(h_fmt("%s/obs/1/rank_%d.out", logdir, r), "line 2\n"));
        cr_assert(h_file_contains(h_fmt("%s/obs/1/rank_%d.err", logdir, r), "eline 2\n"));
    }
    /* without --tee (and no --log-dir) the filter still keeps rank 1 off the console */
    const char *plain[] = {
        "--standalone", "--nproc-per-node", "2", "--local-ranks-filter", "1", NULL};
    start(&a, "solo-plain", plain, cmd);
    h_expect_exit(&a, 0, 20000);
    cr_assert_eq(count_lines(a.out, "line 1\n"), 1, "one rank's stdout on the console");
    cr_assert_eq(count_lines(a.log, "eline 1\n"), 1, "one rank's stderr on the console");

    const char *bad[][2] = {{"3", "local rank 3 is out of range (0..2"},
                            {"0,,1", "is not a comma-separated list of local ranks"},
                            {"x", "is not a comma-separated list of local ranks"}};
    for (size_t i = 0; i < 3; i++) {
        const char *args[] = {"--standalone",         "--nproc-per-node", "3",
                              "--local-ranks-filter", bad[i][0],          NULL};
        start(&a, h_fmt("bad%zu", i), args, cmd);
        h_expect_exit(&a, 2, 10000);
        cr_assert(h_file_contains(a.log, bad[i][1]), "no clear error for '%s'", bad[i][0]);
    }
}

Test(observe, failure_table_shows_the_tail_of_the_failed_ranks_stderr)
{
    /* local rank 1 writes 30 lines to stderr and exits 1, rank 0 stays quiet and waits */
    const char *script =
        "if [ \"$LOCAL_RANK\" = 1 ]; then i=0; while [ $i -lt 30 ]; do i=$((i+1)); "
        "echo \"stderr line $i of rank $RANK\" >&2; done; "
        "echo 'OSError: [Errno 28] No space left on device (token-6021)' >&2; exit 1; fi; "
        "exec \"$0\" hang";
    const char *cmd[] = {"sh", "-c", script, W, NULL};
    const char *logdir = h_fmt("%s/tlogs", dir);
    for (int with_logdir = 0; with_logdir < 2; with_logdir++) {
        struct h_agent a;
        const char *extra[] = {"--standalone",
                               "--nproc-per-node",
                               "2",
                               with_logdir ? "--log-dir" : NULL,
                               logdir,
                               NULL};
        start(&a, h_fmt("tail%d", with_logdir), extra, cmd);
        h_expect_exit(&a, 1, 20000);
        cr_assert(h_file_contains(a.log, "sh FAILED"), "no failure table");
        char *log = h_slurp(a.log, NULL);
        const char *table = strstr(log, "Root Cause");
        cr_assert(table);
        cr_assert(strstr(table, "  rank      : 1 (local_rank: 1)\n"), "%s", table);
        cr_assert(strstr(table, "exited with code 1 and left no error file"), "%s", table);
        /* the last 10 lines, in order, and nothing before them */
        const char *tail = strstr(table, "    last lines of stderr:\n");
        cr_assert(tail, "no stderr tail in the table:\n%s", table);
        tail += strlen("    last lines of stderr:\n");
        char want[2048] = "";
        for (int i = 22; i <= 30; i++)
            snprintf(want + strlen(want), sizeof(want) - strlen(want),
                     "    stderr line %d of rank 1\n", i);
        strcat(want, "    OSError: [Errno 28] No space left on device (token-6021)\n====");
        cr_assert(strncmp(tail, want, strlen(want)) == 0, "tail:\n%s\nwanted:\n%s", tail, want);
        cr_assert(!strstr(table, "stderr line 21 of rank 1"));
        free(log);
        /* the worker's stderr still reached the console (raw) or its log file */
        const char *where = with_logdir ? h_fmt("%s/obs/1/rank_1.err", logdir) : a.log;
        cr_assert(h_file_contains(where, "stderr line 1 of rank 1\n"), "stderr lost: %s", where);
        if (with_logdir)
            cr_assert(!h_file_contains(a.log, "stderr line 1 of rank 1"));
    }
}

/* stderr is pumped (for the tail) even without --tee: what a worker writes must still reach
 * the console at once, a progress bar's unterminated line included */
Test(observe, worker_stderr_reaches_the_console_at_once_without_tee)
{
    struct h_agent a;
    const char *extra[] = {"--standalone", NULL};
    const char *cmd[] = {"sh",
                         "-c",
                         "printf 'progress 50%%\\r' >&2; exec \"$0\" wait-file \"$1\"",
                         W,
                         h_fmt("%s/go", envdir),
                         NULL};
    start(&a, "solo", extra, cmd);
    cr_assert(h_log_wait(&a, "progress 50%\r", 10000), "a partial stderr line was held back");
    release_workers();
    h_expect_exit(&a, 0, 20000);
}

/* ---- HTTP on IPv6 loopback ---------------------------------------------------------------- */

Test(observe, http_on_ipv6_loopback)
{
    int probe = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    if (probe < 0 || bind(probe, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        if (probe >= 0)
            close(probe);
        cr_skip_test("no IPv6 loopback here");
    }
    close(probe);
    struct h_agent a;
    const char *extra[] = {"--standalone", "--http", "[::1]:0", NULL};
    start(&a, "solo", extra, waiting_cmd());
    cr_assert(h_log_wait(&a, "/metrics on http://[::1]:", 10000), "no IPv6 endpoint logged");
    char *log = h_slurp(a.log, NULL);
    int port = atoi(strstr(log, "http://[::1]:") + strlen("http://[::1]:"));
    free(log);
    cr_assert(port > 0 && port < 65536);
    cr_assert(http_until6(port, "/readyz", 200, 10000), "/readyz on [::1] never became 200");
    char *body;
    cr_assert_eq(http_get_at(AF_INET6, port, "/healthz", &body), 200);
    cr_assert_str_eq(body, "ok\n");
    free(body);
    cr_assert_eq(http_get_at(AF_INET6, port, "/metrics", &body), 200);
    cr_assert_eq(prom_parse(body, "elastic_agent_up"), 1, "%s", body);
    free(body);
    /* IPv6 only: the agent does not answer on 127.0.0.1 at that port (another test's server may,
     * running beside this one: then it must not be an agent's /metrics) */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in v4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool v4_open = connect(fd, (struct sockaddr *)&v4, sizeof(v4)) == 0;
    close(fd);
    if (v4_open) {
        body = NULL;
        int code = http_get_at(AF_INET, port, "/metrics", &body);
        cr_assert_not(code == 200 && body && strstr(body, "elastic_agent_up"),
                      "the agent answers on 127.0.0.1:%d", port);
        free(body);
    }
    release_workers();
    h_expect_exit(&a, 0, 20000);

    const char *bad[] = {"--standalone", "--http", "[127.0.0.1]:0", NULL};
    const char *cmd[] = {"true", NULL};
    start(&a, "bad6", bad, cmd);
    h_expect_exit(&a, 2, 10000);
    cr_assert(h_file_contains(a.log, "--http: '127.0.0.1' is not an IPv6 address"));
}
