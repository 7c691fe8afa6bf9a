// SPDX-License-Identifier: Apache-2.0
/*
 * `elastic-agent status` against live runs in every state, with golden output (issue 12): forming
 * (fewer than --min nodes joined, no round yet), running, restarting (caught deterministically: the
 * round after a failure cannot start while group rank 0's worker ignores SIGTERM for the whole
 * --stop-timeout), failed, waiting (a member left, fewer than --min remain) and succeeded; both the
 * table and --json. Volatile fields (generation, host name, addresses, pids, times, the store
 * revisions members joined at) are normalised here, nothing else. Plus `status --watch` on a run
 * that does not exist yet (it waits and shows the run once it appears) against plain `status`
 * (exit 4).
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define W EA_HELPERS_DIR "/ea-testworker"

static char dir[256], state[300], envdir[300];

static void setup(void)
{
    h_suite_dirs("status-states", dir, state, envdir);
}

static void teardown(void)
{
    h_kill_agents();
    h_rmdir(dir);
}

TestSuite(status_states, .init = setup, .fini = teardown, .timeout = 120);

/* Agent `name` of run `run`: `extra` options (NULL-terminated), then `cmd`. */
static void start(struct h_agent *a, const char *run, const char *name, const char *const *extra,
                  const char *const *cmd)
{
    const char *base[] = {"--state-dir", state, "--run-id",     run,        "--node-id", name,
                            "--settle",    "0.3", "--local-addr", "127.0.0.1", NULL};
    h_agent_start_argv(a, dir, name, base, extra, cmd);
}

/* ---- normalising ----------------------------------------------------------------------- */

/* Replace every match of the extended regex `re` in *s by `with`, where \1..\9 stand for the
 * match's groups. */
static void subst(char **s, const char *re, const char *with)
{
    regex_t r;
    cr_assert_eq(regcomp(&r, re, REG_EXTENDED | REG_NEWLINE), 0, "bad regex %s", re);
    size_t cap = strlen(*s) + 1, n = 0;
    char *out = malloc(cap);
    const char *p = *s;
    regmatch_t m[10];
    int flags = 0;
#define PUT(src, len)                                                                              \
    do {                                                                                           \
        size_t l_ = (len);                                                                         \
        if (n + l_ + 1 > cap) {                                                                    \
            char *bigger_ = realloc(out, cap = (n + l_ + 1) * 2);                                  \
            cr_assert_not_null(bigger_);                                                           \
            out = bigger_;                                                                         \
        }                                                                                          \
        memcpy(out + n, (src), l_);                                                                \
        n += l_;                                                                                   \
    } while (0)
    while (*p && regexec(&r, p, 10, m, flags) == 0 && m[0].rm_eo > m[0].rm_so) {
        PUT(p, (size_t)m[0].rm_so);
        for (const char *w = with; *w; w++) {
            if (w[0] == '\\' && w[1] >= '1' && w[1] <= '9') {
                const regmatch_t *g = &m[w[1] - '0'];
                if (g->rm_so >= 0)
                    PUT(p + g->rm_so, (size_t)(g->rm_eo - g->rm_so));
                w++;
            } else {
                PUT(w, 1);
            }
        }
        p += m[0].rm_eo;
        flags = p[-1] == '\n' ? 0 : REG_NOTBOL;
    }
    PUT(p, strlen(p) + 1);
#undef PUT
    regfree(&r);
    free(*s);
    *s = out;
}

/* The table with its volatile fields replaced; runs of blanks inside a line become two blanks
 * (column widths follow the host name's length). */
static char *norm_text(const char *path)
{
    char *t = h_slurp(path, NULL);
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    if (host[0]) {
        char re[600] = "";
        for (const char *h = host; *h; h++) /* host names are [A-Za-z0-9.-]: escape the dots */
            snprintf(re + strlen(re), sizeof(re) - strlen(re), *h == '.' ? "\\." : "%c", *h);
        subst(&t, h_fmt("(^|[ '])%s([ ',]|$)", re), "\\1HOST\\2");
    }
    subst(&t, "\\(generation [0-9]+\\)", "(generation G)");
    subst(&t, "^master +[^ ]+$", "master ADDR:PORT");
    subst(&t, "pid [0-9]+:", "pid P:");
    subst(&t, " rev [0-9]+ ", " rev R ");
    subst(&t, " [0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}Z ", " SINCE ");
    subst(&t, " at [0-9]{4}-[0-9-]{5}T[0-9:.]{12}Z", " at TIME");
    subst(&t, "^last recovery: [^(]*\\(", "last recovery: PHASES (");
    subst(&t, "([^ \n])  +", "\\1  ");
    return t;
}

/* The JSON view with its volatile fields replaced by fixed strings, compact with sorted keys. */
static void norm_obj(json_t *o)
{
    static const char *const keys[] = {"host",       "addr",           "pid",     "time",
                                       "master",     "generation",     "since_ms",
                                       "since_revision"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++) {
        json_t *v = json_object_get(o, keys[i]);
        if (v && !json_is_null(v) && !(json_is_integer(v) && json_integer_value(v) == 0))
            json_object_set_new(o, keys[i], json_string(h_fmt("<%s>", keys[i])));
    }
}

static char *norm_json(const char *path)
{
    json_error_t jerr;
    json_t *j = json_load_file(path, 0, &jerr);
    cr_assert(j, "status --json printed no JSON: %s", jerr.text);
    norm_obj(j);
    const char *arrays[] = {"members", "spares"};
    for (int k = 0; k < 2; k++) {
        json_t *a = json_object_get(j, arrays[k]), *e;
        size_t i;
        json_array_foreach(a, i, e) norm_obj(e);
    }
    if (json_is_object(json_object_get(j, "failure")))
        norm_obj(json_object_get(j, "failure"));
    json_t *rec = json_object_get(j, "last_recovery"), *v; /* phase times vary */
    const char *k;
    json_object_foreach(rec, k, v) if (json_is_number(v) && strcmp(k, "round") != 0)
        json_object_set_new(rec, k, json_string("<s>"));
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    return s;
}

/* Before normalising: a live member joined (its node record was created) before the round that
 * holds it committed, so 0 < since_revision < generation; a gone or finished one has none. */
static void check_since(const char *path, const char *tag)
{
    json_t *j = json_load_file(path, 0, NULL);
    cr_assert(j, "status --json (%s) printed no JSON", tag);
    json_int_t gen = json_integer_value(json_object_get(j, "generation"));
    json_t *m;
    size_t i;
    json_array_foreach(json_object_get(j, "members"), i, m)
    {
        json_t *since = json_object_get(m, "since_revision");
        if (json_is_true(json_object_get(m, "live"))) {
            json_int_t rev = json_integer_value(since);
            cr_expect(json_is_integer(since) && rev > 0 && rev < gen,
                      "%s: member %zu since_revision %lld, generation %lld", tag, i, (long long)rev,
                      (long long)gen);
        } else {
            cr_expect(json_is_null(since), "%s: member %zu is gone but has a since", tag, i);
        }
    }
    json_decref(j);
}

/* `status` (table) and `status --json` of `run`: both normalised, stored in *text and *json. */
static void status_both(const char *run, const char *tag, char **text, char **json)
{
    struct h_agent s;
    const char *args[] = {"status", "--state-dir", state, "--run-id", run, NULL, NULL};
    h_agent_start(&s, dir, h_fmt("status-%s", tag), args);
    cr_assert_eq(h_agent_wait(&s, 10000), 0, "status (%s) failed", tag);
    *text = norm_text(s.out);
    args[5] = "--json";
    h_agent_start(&s, dir, h_fmt("status-%s-json", tag), args);
    cr_assert_eq(h_agent_wait(&s, 10000), 0, "status --json (%s) failed", tag);
    check_since(s.out, tag);
    *json = norm_json(s.out);
    if (getenv("EA_PRINT_GOLDEN"))
        fprintf(stderr, "---- %s\n%s---- %s json\n%s\n", tag, *text, tag, *json);
}

/* Compare with the goldens; the JSON golden may be spread over several C strings. */
static void expect_status(const char *run, const char *tag, const char *golden_text,
                          const char *golden_json)
{
    char *text, *json;
    status_both(run, tag, &text, &json);
    cr_expect_str_eq(text, golden_text, "status (%s):\n%s\nwanted:\n%s", tag, text, golden_text);
    json_t *want = json_loads(golden_json, 0, NULL);
    cr_assert(want, "the %s JSON golden is not JSON", tag);
    char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
    cr_expect_str_eq(json, w, "status --json (%s):\n%s\nwanted:\n%s", tag, json, w);
    free(w);
    json_decref(want);
    free(text);
    free(json);
}

/* Wait (inotify on the existing file `path`) until it holds `count` copies of `needle`. */
static bool file_wait(const char *path, const char *needle, int count, int timeout_ms)
{
    int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    cr_assert_geq(fd, 0);
    cr_assert_geq(inotify_add_watch(fd, path, IN_MODIFY), 0, "cannot watch %s", path);
    int64_t deadline = h_now_ms() + timeout_ms;
    bool ok;
    while (!(ok = h_count_in(path, needle) >= count) && h_now_ms() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(deadline - h_now_ms())) == 1) {
            char buf[4096];
            while (read(fd, buf, sizeof(buf)) > 0)
                ;
        }
    }
    close(fd);
    return ok;
}

/* The pid in the k-th (from 1) "ready <pid>" line of `path` (ea-testworker ignore-term). */
static pid_t ready_pid(const char *path, int k)
{
    cr_assert(file_wait(path, "ready ", k, 20000), "no ready line #%d in %s", k, path);
    char *t = h_slurp(path, NULL);
    const char *p = t;
    for (int i = 1; i < k; i++)
        p = strstr(p, "ready ") + 6;
    pid_t pid = (pid_t)atoi(strstr(p, "ready ") + 6);
    free(t);
    cr_assert_gt(pid, 0);
    return pid;
}

/* ---- forming, running, restarting, failed ------------------------------------------------ */

/* Goldens (normalised as above). */
#include "status_goldens.inc"

Test(status_states, forming_running_restarting_failed)
{
    struct h_agent a[2];
    /* n0 (group rank 0) runs a worker that ignores SIGTERM: after n1's worker fails, the next
     * round cannot start before n0's stop ends, which the 60 s --stop-timeout leaves to us */
    const char *extra[] = {"--min",          "2",  "--max", "2", "--max-restarts", "1",
                           "--stop-timeout", "60", NULL};
    /* n0's worker marks each round it runs in (r<restart count>) once it ignores SIGTERM; n1's
     * fails once the test says so in round 1, at once in round 2 but never before n0's worker
     * of that round is in place */
    const char *cmd0[] = {"sh", "-c",
                          "trap '' TERM; : > \"$1/r$TORCHELASTIC_RESTART_COUNT\"; "
                          "exec \"$0\" ignore-term",
                          W, envdir, NULL};
    const char *cmd1[] = {"sh",
                          "-c",
                          "\"$0\" wait-file \"$1/fail\" 0; "
                          "\"$0\" wait-file \"$1/r$TORCHELASTIC_RESTART_COUNT\" 0; "
                          "echo \"rank $RANK: CUDA error: an illegal memory access was "
                          "encountered\" >&2; exit 1",
                          W,
                          envdir,
                          NULL};
    start(&a[0], "A", "n0", extra, cmd0);
    cr_assert(h_log_wait(&a[0], "waiting for nodes", 20000));
    expect_status("A", "forming", GOLDEN_FORMING, GOLDEN_FORMING_JSON);

    start(&a[1], "A", "n1", extra, cmd1);
    for (int i = 0; i < 2; i++)
        cr_assert(h_log_wait(&a[i], "round 1 ", 20000), "n%d did not start round 1", i);
    expect_status("A", "running", GOLDEN_RUNNING, GOLDEN_RUNNING_JSON);

    pid_t held = ready_pid(a[0].out, 1);
    FILE *f = fopen(h_fmt("%s/fail", envdir), "w");
    cr_assert(f);
    fclose(f);
    cr_assert(h_log_wait(&a[0], "stopping 1 worker(s) of round 1", 20000));
    expect_status("A", "restarting", GOLDEN_RESTARTING, GOLDEN_RESTARTING_JSON);

    /* end the hold: round 2 starts, n1's worker fails again, the budget (1) is spent */
    kill(held, SIGKILL);
    pid_t held2 = ready_pid(a[0].out, 2);
    h_expect_exit(&a[1], 1, 20000);
    cr_assert(h_log_wait(&a[0], "stopping 1 worker(s) of round 2", 20000));
    kill(held2, SIGKILL);
    h_expect_exit(&a[0], 1, 20000);
    expect_status("A", "failed", GOLDEN_FAILED, GOLDEN_FAILED_JSON);
    /* the failure table of the agent whose worker failed shows the tail of its stderr */
    cr_assert(h_file_contains(a[1].log, "    last lines of stderr:\n    rank 1: CUDA error: an "
                                        "illegal memory access was encountered\n"));
}

/* ---- waiting, succeeded ----------------------------------------------------------------- */

Test(status_states, waiting_and_succeeded)
{
    struct h_agent a[3];
    const char *extra[] = {"--min", "2", "--max", "3", "--stop-timeout", "5", NULL};
    const char *cmd[] = {W, "wait-file", h_fmt("%s/go", envdir), NULL};
    start(&a[0], "B", "n0", extra, cmd);
    cr_assert(h_log_wait(&a[0], "waiting for nodes", 20000));
    start(&a[1], "B", "n1", extra, cmd);
    for (int i = 0; i < 2; i++)
        cr_assert(h_log_wait(&a[i], "round 1 ", 20000), "n%d did not start round 1", i);
    h_agent_signal(&a[1], SIGTERM); /* leaves gracefully: 1 node left, --min is 2 */
    h_expect_exit(&a[1], 143, 20000);
    cr_assert(h_log_wait(&a[0], "stopping 1 worker(s) of round 1", 20000));
    expect_status("B", "waiting", GOLDEN_WAITING, GOLDEN_WAITING_JSON);

    start(&a[2], "B", "n2", extra, cmd);
    for (int i = 0; i < 3; i += 2)
        cr_assert(h_log_wait(&a[i], "round 2 ", 20000), "n%d did not start round 2", i);
    FILE *f = fopen(h_fmt("%s/go", envdir), "w");
    cr_assert(f);
    fclose(f);
    for (int i = 0; i < 3; i += 2)
        h_expect_exit(&a[i], 0, 20000);
    expect_status("B", "succeeded", GOLDEN_SUCCEEDED, GOLDEN_SUCCEEDED_JSON);
}

/* ---- status --watch before the run exists ------------------------------------------------ */

struct watcher {
    struct h_agent h; /* pid/pidfd for h_agent_wait; h.log is its stderr */
    int fd;           /* its stdout */
    char buf[1 << 16];
    size_t len;
};

/* `elastic-agent status ARGS --watch` with stdout on a pipe and stderr in dir/<name>.log. */
static void watch_start(struct watcher *w, const char *name, const char *const *args)
{
    memset(w, 0, sizeof(*w));
    snprintf(w->h.log, sizeof(w->h.log), "%s/%s.log", dir, name);
    int err = open(w->h.log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int fds[2];
    cr_assert(err >= 0 && pipe2(fds, O_CLOEXEC) == 0);
    w->h.pid = fork();
    cr_assert_geq(w->h.pid, 0);
    if (w->h.pid == 0) {
        dup2(fds[1], 1);
        dup2(err, 2);
        const char *argv[32] = {EA_AGENT_BIN, "status", "--watch"};
        for (int i = 0; i < 28 && args[i]; i++)
            argv[i + 3] = args[i];
        execv(argv[0], (char **)argv);
        _exit(127);
    }
    close(fds[1]);
    close(err);
    w->fd = fds[0];
    w->h.pidfd = (int)syscall(SYS_pidfd_open, w->h.pid, 0);
    cr_assert_geq(w->h.pidfd, 0);
}

/* Read its stdout until it contains `needle` (deadline): true when it did. */
static bool watch_until(struct watcher *w, const char *needle, int timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    while (!memmem(w->buf, w->len, needle, strlen(needle))) {
        struct pollfd p = {.fd = w->fd, .events = POLLIN};
        int64_t left = deadline - h_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) != 1 || w->len == sizeof(w->buf))
            return false;
        ssize_t r = read(w->fd, w->buf + w->len, sizeof(w->buf) - w->len);
        if (r <= 0)
            return false;
        w->len += (size_t)r;
    }
    return true;
}

static void watch_stop(struct watcher *w)
{
    kill(w->h.pid, SIGINT);
    cr_assert_eq(h_agent_wait(&w->h, 10000), 0, "status --watch did not exit 0 on SIGINT");
    close(w->fd);
}

Test(status_states, watch_waits_for_a_run_that_does_not_exist_yet)
{
    const char *late = h_fmt("%s/late/store", dir); /* neither it nor its parent exist yet */
    struct h_agent s, a[2];

    /* without --watch, a missing run is an error (4), in a missing store or an existing one */
    const char *plain[] = {"status", "--state-dir", late, "--run-id", "L", NULL};
    h_agent_start(&s, dir, "status-nostore", plain);
    cr_assert_eq(h_agent_wait(&s, 10000), 4);
    cr_assert(h_file_contains(s.log, "no run 'L': the file store"));

    struct watcher w1, w2;
    const char *args1[] = {"--json", "--state-dir", late, "--run-id", "L", NULL};
    watch_start(&w1, "watch-nostore", args1);
    cr_assert(file_wait(w1.h.log, "waiting for run 'L' to appear", 1, 10000));
    cr_assert_eq(w1.len, 0);

    const char *extra[] = {"--state-dir", late, "--run-id", "L",         "--node-id",
                           "n0",          "--", W,          "wait-file", h_fmt("%s/go", envdir),
                           NULL};
    h_agent_start(&a[0], dir, "late-n0", extra);
    cr_assert(watch_until(&w1, "\"status\":\"running\"", 20000),
              "--watch did not show run L once it appeared: %.*s", (int)w1.len, w1.buf);
    cr_assert(memmem(w1.buf, w1.len, "\"run_id\":\"L\"", 12));

    /* the store exists now, run L2 does not: plain status says so (4), --watch waits */
    plain[4] = "L2";
    h_agent_start(&s, dir, "status-norun", plain);
    cr_assert_eq(h_agent_wait(&s, 10000), 4);
    cr_assert(h_file_contains(s.log, "no run 'L2' in the file store"));
    const char *args2[] = {"--state-dir", late, "--run-id", "L2", NULL};
    watch_start(&w2, "watch-norun", args2);
    cr_assert(file_wait(w2.h.log, "waiting for run 'L2' to appear in the file store", 1, 10000));
    extra[3] = "L2";
    h_agent_start(&a[1], dir, "late-n1", extra);
    cr_assert(watch_until(&w2, "status        running\n", 20000),
              "--watch did not show run L2 once it appeared: %.*s", (int)w2.len, w2.buf);
    cr_assert(memmem(w2.buf, w2.len, "run           L2\n", 17));

    watch_stop(&w1);
    watch_stop(&w2);
    FILE *f = fopen(h_fmt("%s/go", envdir), "w");
    cr_assert(f);
    fclose(f);
    for (int i = 0; i < 2; i++)
        h_expect_exit(&a[i], 0, 20000);
}

/* ---- one node's liveness links (status --agent) ------------------------------------------ */

static int count_in_text(const char *t, const char *needle)
{
    int n = 0;
    for (const char *p = t; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* The port of the agent's --http :0, from its log. */
static int http_port_of(const struct h_agent *a)
{
    cr_assert(h_log_wait(a, "/metrics on http://127.0.0.1:", 10000), "no --http port logged");
    char *t = h_slurp(a->log, NULL);
    const char *p = strstr(t, "/metrics on http://127.0.0.1:");
    int port = atoi(p + strlen("/metrics on http://127.0.0.1:"));
    free(t);
    cr_assert_gt(port, 0);
    return port;
}

/* `status --agent 127.0.0.1:PORT [--json]` of run L: its output (malloc'ed). */
static char *status_agent(int port, bool json, const char *tag)
{
    struct h_agent s;
    const char *args[] = {"status",  "--state-dir", state, "--run-id", "L", "--agent",
                          h_fmt("127.0.0.1:%d", port), json ? "--json" : NULL, NULL};
    h_agent_start(&s, dir, h_fmt("status-agent-%s", tag), args);
    int code = h_agent_wait(&s, 10000);
    if (code != 0) {
        char *log = h_slurp(s.log, NULL);
        char *snap = h_slurp(h_fmt("%s/snapshot.json", state), NULL);
        cr_assert_fail("status --agent (%s) exited %d:\n%s\nstore:\n%s", tag, code, log, snap);
    }
    return h_slurp(s.out, NULL);
}

/* The JSON's "agent" object (new reference). */
static json_t *agent_of(const char *out)
{
    json_t *j = json_loads(out, 0, NULL);
    cr_assert(j, "status --agent --json printed no JSON:\n%s", out);
    json_t *a = json_incref(json_object_get(j, "agent"));
    json_decref(j);
    cr_assert(json_is_object(a), "no \"agent\" object:\n%s", out);
    return a;
}

/* `status --agent` shows that node's two ring links (issue 31): both up with a fresh heartbeat in
 * a running round; once its successor is SIGKILLed, the link to it is not up and has no
 * heartbeat (a wide --liveness-misses keeps the eviction that follows a few seconds away). Fails
 * without the agent's /status or status's --agent (the section is missing). */
Test(status_states, agent_shows_its_liveness_links)
{
    struct h_agent a[3];
    const char *cmd[] = {"sleep", "60", NULL};
    for (int i = 0; i < 3; i++) {
        const char *extra[] = {"--min", "3", "--max", "3", "--liveness-interval", "0.5",
                               "--liveness-misses", "6", i == 0 ? "--http" : NULL,
                               "127.0.0.1:0", NULL};
        start(&a[i], "L", h_fmt("n%d", i), extra, cmd);
        cr_assert(h_log_wait(&a[i], i < 2 ? "waiting for nodes" : "round 1 ", 20000));
    }
    int port = http_port_of(&a[0]);
    /* until both of n0's links are up (the ring links right after the commit) */
    char *text = NULL;
    int64_t deadline = h_now_ms() + 10000;
    do {
        free(text);
        text = status_agent(port, false, "up");
    } while (count_in_text(text, ": up, last heartbeat") < 2 && h_now_ms() < deadline);
    char *part = strstr(text, "this node: ");
    cr_assert(part, "no node section:\n%s", text);
    char *t = strdup(part);
    subst(&t, "its agent at 127\\.0\\.0\\.1:[0-9]+", "its agent at ADDR:PORT");
    subst(&t, "last heartbeat [0-9]+\\.[0-9] s ago", "last heartbeat S s ago");
    cr_expect_str_eq(t, GOLDEN_AGENT_LINKS_UP, "status --agent:\n%s\nwanted:\n%s", t,
                     GOLDEN_AGENT_LINKS_UP);
    free(t);
    free(text);
    json_t *ag = agent_of(text = status_agent(port, true, "up-json"));
    free(text);
    json_t *live = json_object_get(ag, "liveness"), *k;
    const char *name;
    json_object_foreach(live, name, k)
    {
        double age = json_number_value(json_object_get(k, "heartbeat_age_s"));
        cr_expect(age >= 0 && age < 3.0, "%s heartbeat %.3f s old", name, age);
        json_object_set_new(k, "heartbeat_age_s", json_string("<s>"));
    }
    char *got = json_dumps(ag, JSON_COMPACT | JSON_SORT_KEYS);
    json_t *want = json_loads(GOLDEN_AGENT_LINKS_UP_JSON, 0, NULL);
    cr_assert(want, "the golden is not JSON");
    char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
    cr_expect_str_eq(got, w, "status --agent --json:\n%s\nwanted:\n%s", got, w);
    free(got);
    free(w);
    json_decref(want);
    json_decref(ag);

    /* n0's successor n1 is killed: the link to it goes down at once */
    h_agent_signal(&a[1], SIGKILL);
    const char *state_seen = NULL;
    deadline = h_now_ms() + 3000;
    while (!state_seen && h_now_ms() < deadline) {
        ag = agent_of(text = status_agent(port, true, "down"));
        free(text);
        json_t *succ = json_object_get(json_object_get(ag, "liveness"), "successor");
        const char *st = json_string_value(json_object_get(succ, "state"));
        const char *peer = json_string_value(json_object_get(succ, "peer"));
        cr_assert(peer && strcmp(peer, "n1") == 0, "the ring moved on before the link was seen "
                                                   "down (peer %s)", peer ? peer : "none");
        if (st && strcmp(st, "up") != 0) {
            cr_expect(json_is_null(json_object_get(succ, "heartbeat_age_s")),
                      "a link that is %s has no heartbeat", st);
            state_seen = strcmp(st, "retrying") == 0     ? "retrying"
                         : strcmp(st, "connecting") == 0 ? "connecting"
                         : strcmp(st, "closed by peer") == 0 ? "closed by peer"
                                                             : "other";
        }
        json_decref(ag);
    }
    cr_assert(state_seen, "n0's link to its killed successor still shows up after 3 s");
    cr_expect_str_neq(state_seen, "other", "an unexpected link state");
    text = status_agent(port, false, "down-text");
    cr_assert(strstr(text, "ring link to successor"), "%s", text);
    cr_assert_null(strstr(text, "ring link to successor 'n1': up"), "%s", text);
    free(text);
}
