// SPDX-License-Identifier: Apache-2.0
/*
 * Warm spares (agent/warm/, docs/warm.md): the line protocol both ways (the agent's parser of a
 * worker's ready line as hostile input, its assignment line read back by the C helper
 * include/elastic_agent_assign.h, escapes and the generation check), and the spare pool with the
 * real local launcher and ea-testworker: the generation check on an assignment, the hand-over,
 * a line past the bound, a spare that never sends its ready line.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <unistd.h>

#include "elastic_agent_assign.h"
#include "ea_time.h"
#include "test_launch_support.h"
#include "warm.h"
#include "warm_proto.h"

extern char **environ;

/* ---- the protocol ------------------------------------------------------------------------- */

TestSuite(warm_proto, .timeout = 10);

Test(warm_proto, ready_line_is_parsed_as_hostile_input)
{
    long pid = 0;
    bool inplace = true;
    struct ea_error err = {0};
    cr_assert_eq(warm_parse_ready("{\"ready\":1,\"pid\":42}", 20, &pid, &inplace, &err), 0,
                 "%s", err.msg);
    cr_assert_eq(pid, 42);
    cr_assert_not(inplace);
    const char *ip = "{\"ready\":1,\"pid\":42,\"inplace\":1}";
    cr_assert_eq(warm_parse_ready(ip, strlen(ip), &pid, &inplace, &err), 0, "%s", err.msg);
    cr_assert(inplace);
    const char *ok2 = "{\"pid\": 7, \"ready\": 1, \"later\": [1, {\"x\": null}]}";
    cr_assert_eq(warm_parse_ready(ok2, strlen(ok2), &pid, &inplace, NULL), 0);
    cr_assert_eq(pid, 7);
    static const struct {
        const char *line, *why;
    } bad[] = {
        {"", "not JSON"},
        {"hello, agent", "not JSON"},
        {"[1]", "not a JSON object"},
        {"{\"ready\":2,\"pid\":1}", "no \"ready\":1"},
        {"{\"ready\":\"1\",\"pid\":1}", "no \"ready\":1"},
        {"{\"pid\":1}", "no \"ready\":1"},
        {"{\"ready\":1}", "no \"pid\""},
        {"{\"ready\":1,\"pid\":0}", "no \"pid\""},
        {"{\"ready\":1,\"pid\":-3}", "no \"pid\""},
        {"{\"ready\":1,\"pid\":1.5}", "no \"pid\""},
        {"{\"ready\":1,\"pid\":99999999999}", "no \"pid\""},
        {"{\"ready\":1,\"ready\":1,\"pid\":1}", "not JSON"},
        {"{\"ready\":1,\"pid\":1} {}", "not JSON"},
        {"{\"ready\":1,\"pid\":1,\"inplace\":2}", "\"inplace\" is not 0 or 1"},
        {"{\"ready\":1,\"pid\":1,\"inplace\":true}", "\"inplace\" is not 0 or 1"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        pid = -1;
        ea_error_clear(&err);
        cr_assert_eq(warm_parse_ready(bad[i].line, strlen(bad[i].line), &pid, &inplace, &err),
                     -EBADMSG,
                     "accepted '%s'", bad[i].line);
        cr_assert(strstr(err.msg, bad[i].why), "'%s': '%s'", bad[i].line, err.msg);
        cr_assert_eq(pid, -1, "the pid is set on failure");
    }
    const char nul[] = "{\"ready\":1,\0\"pid\":1}";
    cr_assert_eq(warm_parse_ready(nul, sizeof(nul) - 1, &pid, &inplace, &err), -EBADMSG);
    cr_assert(strstr(err.msg, "NUL"), "%s", err.msg);
}

Test(warm_proto, ack_line_is_parsed_as_hostile_input)
{
    int64_t gen = 0;
    struct ea_error err = {0};
    cr_assert_eq(warm_parse_ack("{\"ack\":7}", 9, &gen, &err), 0, "%s", err.msg);
    cr_assert_eq(gen, 7);
    static const char *const bad[] = {"", "ack 7", "[7]", "{\"ack\":0}", "{\"ack\":-1}",
                                      "{\"ack\":\"7\"}", "{\"ack\":1.5}", "{}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        gen = -1;
        cr_assert_eq(warm_parse_ack(bad[i], strlen(bad[i]), &gen, &err), -EBADMSG, "'%s'", bad[i]);
        cr_assert_eq(gen, -1, "set on failure");
    }
}

/* Put `line` where ea_assign_wait reads it: a socketpair whose other end we keep. */
static int feed(const char *line, size_t len, int *ret_ours)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    cr_assert_eq(write(sv[0], line, len), (ssize_t)len);
    char fd[16];
    snprintf(fd, sizeof(fd), "%d", sv[1]);
    setenv("ELASTIC_ASSIGN_FD", fd, 1);
    *ret_ours = sv[0];
    return sv[1];
}

Test(warm_proto, assignment_reaches_the_c_helper_byte_for_byte)
{
    char *env[] = {"PLAIN=1", "QUOTES=a \"b\" \\c\\", "CTRL=line1\nline2\ttab\x01\x7f",
                   "UTF8=caf\xc3\xa9 \xf0\x9f\x9a\x80", "RAW=\xff\xfe", "EMPTY=",
                   "EQ=a=b=c", "ELASTIC_GENERATION=12", NULL};
    char *line = NULL;
    size_t len = 0;
    cr_assert_eq(warm_format_assignment(12, 3, env, &line, &len), 0);
    cr_assert_eq(line[len - 1], '\n');
    cr_assert_null(memchr(line, '\n', len - 1), "one line");
    unsetenv("ELASTIC_GENERATION");
    int ours;
    feed(line, len, &ours);
    free(line);
    char err[256] = "";
    cr_assert_eq(ea_assign_wait(err, sizeof(err)), 1, "%s", err);
    for (int i = 0; env[i]; i++) {
        char *eq = strchr(env[i], '=');
        char name[32];
        snprintf(name, sizeof(name), "%.*s", (int)(eq - env[i]), env[i]);
        cr_assert_str_eq(getenv(name) ? getenv(name) : "(unset)", eq + 1, "%s", name);
    }
    cr_assert_null(getenv("ELASTIC_ASSIGN_FD"), "the fd variable stays");
    char ready[128] = "";
    ssize_t n = read(ours, ready, sizeof(ready) - 1);
    cr_assert_gt(n, 0);
    ready[n] = '\0';
    long pid = 0;
    bool inplace = true;
    cr_assert_eq(warm_parse_ready(ready, (size_t)n - 1, &pid, &inplace, NULL), 0, "its line: '%s'",
                 ready);
    cr_assert_not(inplace);
    cr_assert_eq(pid, getpid());
    cr_assert_eq(read(ours, ready, 1), 0, "the helper closed its end");
    close(ours);
    /* without ELASTIC_ASSIGN_FD (a cold start) it does nothing */
    cr_assert_eq(ea_assign_wait(err, sizeof(err)), 0);
}

Test(warm_proto, c_helper_refuses_a_generation_that_is_not_newer)
{
    char *env[] = {"RANK=5", NULL};
    char *line = NULL;
    size_t len = 0;
    cr_assert_eq(warm_format_assignment(7, 2, env, &line, &len), 0);
    setenv("ELASTIC_GENERATION", "7", 1); /* the worker already took generation 7 */
    unsetenv("RANK");
    int ours;
    int fd = feed(line, len, &ours);
    free(line);
    char err[256] = "";
    cr_assert_eq(ea_assign_wait(err, sizeof(err)), -1);
    cr_assert_eq(errno, ESTALE);
    cr_assert(strstr(err, "not newer than generation 7"), "%s", err);
    cr_assert_null(getenv("RANK"), "a refused assignment changed the environment");
    close(ours);
    close(fd);
    unsetenv("ELASTIC_GENERATION");
}

/* One assignment line of generation gen with `env`, written to `ours`. */
static void send_assignment(int ours, int64_t gen, char *const *env)
{
    char *line = NULL;
    size_t len = 0;
    cr_assert_eq(warm_format_assignment(gen, gen, env, &line, &len), 0);
    cr_assert_eq(write(ours, line, len), (ssize_t)len);
    free(line);
}

Test(warm_proto, c_helper_in_place_takes_forward_reassignments_and_acks)
{
    unsetenv("ELASTIC_GENERATION");
    char *env3[] = {"RANK=0", "WORLD_SIZE=2", "ELASTIC_GENERATION=3", "ONLY_IN_3=x", NULL};
    char *line = NULL;
    size_t len = 0;
    cr_assert_eq(warm_format_assignment(3, 1, env3, &line, &len), 0);
    int ours;
    feed(line, len, &ours);
    free(line);
    char err[256] = "";
    cr_assert_eq(ea_assign_wait_inplace(err, sizeof(err)), 1, "%s", err);
    char buf[256] = "";
    ssize_t n = read(ours, buf, sizeof(buf) - 1);
    cr_assert_gt(n, 0);
    buf[n] = '\0';
    long pid = 0;
    bool inplace = false;
    cr_assert_eq(warm_parse_ready(buf, (size_t)n - 1, &pid, &inplace, NULL), 0, "%s", buf);
    cr_assert(inplace, "the ready line does not say inplace: %s", buf);
    cr_assert_eq(ea_reassignment(0, err, sizeof(err)), 0, "nothing came yet");
    /* a newer one: taken, the old one's variables it lacks gone, acknowledged */
    char *env8[] = {"RANK=2", "WORLD_SIZE=3", "ELASTIC_GENERATION=8", NULL};
    send_assignment(ours, 8, env8);
    cr_assert_eq(ea_reassignment(5000, err, sizeof(err)), 1, "%s", err);
    cr_assert_str_eq(getenv("RANK"), "2");
    cr_assert_str_eq(getenv("WORLD_SIZE"), "3");
    cr_assert_null(getenv("ONLY_IN_3"));
    n = read(ours, buf, sizeof(buf) - 1);
    cr_assert_gt(n, 0);
    buf[n] = '\0';
    int64_t gen = 0;
    cr_assert_eq(warm_parse_ack(buf, (size_t)n - 1, &gen, NULL), 0, "%s", buf);
    cr_assert_eq(gen, 8);
    /* not newer: refused, nothing taken, the socket closed (the agent restarts the worker) */
    char *env8b[] = {"RANK=1", "ELASTIC_GENERATION=8", NULL};
    send_assignment(ours, 8, env8b);
    cr_assert_eq(ea_reassignment(5000, err, sizeof(err)), -1);
    cr_assert_eq(errno, ESTALE);
    cr_assert(strstr(err, "not newer than generation 8"), "%s", err);
    cr_assert_str_eq(getenv("RANK"), "2");
    cr_assert_eq(read(ours, buf, 1), 0, "the helper closed its end");
    cr_assert_eq(ea_reassignment(0, err, sizeof(err)), 0, "no socket any more");
    close(ours);
    unsetenv("ELASTIC_GENERATION");
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
}

Test(warm_proto, c_helper_refuses_a_malformed_assignment)
{
    static const char *const bad[] = {
        "{\"generation\":3,\"env\":{\"A\":\"1\"}\n",           /* truncated */
        "{\"generation\":3,\"env\":{\"A\":1}}\n",              /* a number for a value */
        "{\"generation\":0,\"env\":{\"A\":\"1\"}}\n",          /* generation 0 */
        "{\"env\":{\"A\":\"1\"}}\n",                           /* no generation */
        "{\"generation\":3,\"env\":{\"A\":\"\\u0000\"}}\n",    /* a NUL */
        "{\"generation\":3,\"env\":{\"A=B\":\"1\"}}\n",        /* '=' in a name */
        "{\"generation\":3,\"env\":{\"A\":\"1\"}} trailing\n", /* more after the object */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        unsetenv("A");
        unsetenv("ELASTIC_GENERATION");
        int ours;
        int fd = feed(bad[i], strlen(bad[i]), &ours);
        char err[256] = "";
        cr_assert_eq(ea_assign_wait(err, sizeof(err)), -1, "accepted %s", bad[i]);
        cr_assert_eq(errno, EBADMSG, "%s: %s", bad[i], err);
        cr_assert_null(getenv("A"));
        close(ours);
        close(fd);
    }
    /* members it does not know are skipped */
    const char *later = "{\"v\":[1,{\"x\":\"}\"},true,null,-1.5e3],\"generation\":3,"
                        "\"env\":{\"A\":\"\\ud83d\\ude80\"},\"round\":1}\n";
    int ours;
    feed(later, strlen(later), &ours);
    char err[256] = "";
    cr_assert_eq(ea_assign_wait(err, sizeof(err)), 1, "%s", err);
    cr_assert_str_eq(getenv("A"), "\xf0\x9f\x9a\x80");
    close(ours);
    unsetenv("ELASTIC_GENERATION");
}

Test(warm_proto, assignment_is_bounded)
{
    size_t big = WARM_ASSIGN_MAX / 2;
    char *a = malloc(big + 3), *b = malloc(big + 3);
    memset(a, 'a', big + 2);
    memset(b, 'b', big + 2);
    memcpy(a, "A=", 2);
    memcpy(b, "B=", 2);
    a[big + 2] = b[big + 2] = '\0';
    char *env[] = {a, b, NULL};
    char *line = NULL;
    size_t len = 0;
    cr_assert_eq(warm_format_assignment(1, 1, env, &line, &len), -E2BIG);
    char *noeq[] = {"NOEQUALS", NULL};
    cr_assert_eq(warm_format_assignment(1, 1, noeq, &line, &len), -EINVAL);
    cr_assert_eq(warm_format_assignment(0, 1, env + 2, &line, &len), -EINVAL);
    free(a);
    free(b);
}

/* ---- the spare pool ----------------------------------------------------------------------- */

static char dir[64];
static struct launcher *l;
static struct warm *w;

static void setup(void)
{
    tl_mkdtemp(dir, sizeof(dir));
    l = tl_launcher();
    w = NULL;
}

static void teardown(void)
{
    warm_destroy(w);
    launcher_destroy(l);
    tl_rmrf(dir);
}

TestSuite(warm, .init = setup, .fini = teardown, .timeout = 30);

static void make(const char *const *cmd, int nproc, int64_t ready_ms)
{
    char *env[] = {"PATH=/usr/bin:/bin", "SPARE=1", NULL};
    struct warm_config c = {.launcher = l, .command = (char *const *)cmd, .nproc = nproc,
                            .env = env, .ready_timeout_ms = ready_ms, .stop_grace_ms = 500};
    struct ea_error err = {0};
    cr_assert_eq(warm_create(&c, &w, &err), 0, "%s", err.msg);
}

/* Drive the spares' sockets and the launcher's exits until `done` or the deadline. */
/* The proc whose pid the pump learns: the launcher confirms a start after launch_start returned,
 * so a pid is known only once a dispatch did (and before an exit releases the proc). */
static struct launch_proc *watch_p;
static pid_t watch_pid;

static bool pump(bool (*done)(void), int timeout_ms)
{
    int64_t deadline = ea_now_ms() + timeout_ms;
    while (!done()) {
        int64_t wake = warm_wake_ms(w);
        int64_t until = wake >= 0 && wake < deadline ? wake : deadline;
        if (ea_now_ms() >= deadline)
            return false;
        struct pollfd p[64];
        p[0] = (struct pollfd){.fd = launcher_fd(l), .events = POLLIN};
        size_t n_spares = warm_pollfds(w, p + 1, 63);
        poll(p, 1 + n_spares, ea_timeout_until(until));
        warm_on_poll(w, p + 1, n_spares);
        struct launch_exit *ex = NULL;
        size_t n = 0;
        launcher_dispatch(l, &ex, &n, NULL);
        if (watch_p && !watch_pid)
            watch_pid = launch_pid(l, watch_p);
        for (size_t i = 0; i < n; i++)
            if (!warm_on_exit(w, &ex[i]))
                launch_release(l, ex[i].proc); /* a handed-over one: ours to release */
        free(ex);
    }
    return true;
}

static struct warm_fault fault;
static bool got_fault(void)
{
    return warm_tick(w, ea_now_ms(), &fault) > 0;
}

static struct warm_take take(char *const *env, int64_t gen)
{
    return (struct warm_take){.env = env, .generation = gen, .round = gen, .label = "0"};
}

static int64_t gen_wanted;
static bool assigned(void)
{
    return warm_assigned_ms(w, gen_wanted) >= 0;
}

/* Assigned, and its pid known (watch_p set to its proc first). */
static bool assigned_with_pid(void)
{
    return assigned() && watch_pid != 0;
}

static void watch(struct launch_proc *p)
{
    watch_p = p;
    watch_pid = 0;
}

Test(warm, assignment_of_a_generation_not_newer_than_the_spare_is_refused)
{
    const char *cmd[] = {TW, "warm", dir, NULL};
    make(cmd, 1, 10000);
    cr_assert_eq(warm_park(w, 5, NULL), 1);
    cr_assert_eq(warm_park(w, 5, NULL), 0, "a second set while one is parked");
    cr_assert_eq(warm_parked(w), 1);
    char *env[] = {"RANK=0", "ELASTIC_GENERATION=5", NULL};
    struct warm_take t = take(env, 5);
    struct launch_proc *p = NULL;
    pid_t pid = 0;
    struct ea_error err = {0};
    /* parked after generation 5's workers started: it is not for generation 5 */
    cr_assert_eq(warm_assign(w, 0, &t, &p, &pid, &err), -ESTALE);
    cr_assert(strstr(err.msg, "generation 5 is not newer than 5"), "%s", err.msg);
    cr_assert_null(p);
    cr_assert_eq(warm_parked(w), 0, "the spare is stopped");

    cr_assert_eq(warm_park(w, 5, NULL), 1);
    char *env6[] = {"RANK=0", "ELASTIC_GENERATION=6", NULL};
    t = take(env6, 6);
    cr_assert_eq(warm_assign(w, 0, &t, &p, &pid, &err), 0, "%s", err.msg);
    cr_assert_not_null(p);
    gen_wanted = 6;
    watch(p);
    cr_assert(pump(assigned_with_pid, 10000), "the spare never took its assignment");
    pid = watch_pid;
    watch(NULL);
    const char *rec = NULL;
    char path[160];
    snprintf(path, sizeof(path), "%s/env.0.%d", dir, (int)pid);
    cr_assert(tl_pid_gone(pid, 10000), "the worker did not finish");
    char buf[8192];
    cr_assert_gt(tl_read_file(path, buf, sizeof(buf)), 0, "no %s", path);
    rec = strstr(buf, "ELASTIC_GENERATION=6\n");
    cr_assert(rec, "%s", buf);
    cr_assert(strstr(buf, "SPARE=1\n"), "the parked environment is kept: %s", buf);

    /* the same rank never goes back: not even to the generation it has */
    cr_assert_eq(warm_park(w, 0, NULL), 1);
    cr_assert_eq(warm_assign(w, 0, &t, &p, &pid, &err), -ESTALE);
    cr_assert(strstr(err.msg, "generation 6 is not newer than 6"), "%s", err.msg);
    cr_assert_eq(warm_assign(w, 0, &t, &p, &pid, &err), -ENOENT, "none parked any more");
}

Test(warm, line_past_the_bound_is_a_fault)
{
    const char *cmd[] = {TW, "warm-bad", dir, "5000", NULL};
    make(cmd, 2, 10000);
    cr_assert_eq(warm_park(w, 0, NULL), 1);
    cr_assert(pump(got_fault, 10000), "no fault for a line without a newline");
    cr_assert_not(fault.assigned);
    cr_assert(strstr(fault.message, "no newline in its first 1024 bytes"), "%s", fault.message);
    cr_assert_eq(warm_parked(w), 0, "the whole set is stopped");
    cr_assert_eq(warm_park(w, 0, NULL), 0, "parking is suspended until a round started");
    warm_round_started(w);
    cr_assert_eq(warm_park(w, 0, NULL), 1);
}

Test(warm, spare_without_a_ready_line_misses_its_deadline)
{
    const char *cmd[] = {TW, "hang", NULL};
    make(cmd, 1, 300);
    int64_t t0 = ea_now_ms();
    cr_assert_eq(warm_park(w, 0, NULL), 1);
    cr_assert(pump(got_fault, 10000), "no fault");
    cr_assert_geq(ea_now_ms() - t0, 300, "before its deadline");
    cr_assert_not(fault.assigned);
    cr_assert(strstr(fault.message, "did not call elastic_agent.wait_for_assignment()"), "%s",
              fault.message);
    cr_assert(tl_pid_gone(fault.pid, 5000), "the spare is still running");

    /* taken, then late: an assigned fault (the caller fails the worker) */
    warm_round_started(w);
    cr_assert_eq(warm_park(w, 0, NULL), 1);
    char *env[] = {"RANK=0", NULL};
    struct warm_take t = take(env, 1);
    struct launch_proc *p = NULL;
    pid_t pid = 0;
    cr_assert_eq(warm_assign(w, 0, &t, &p, &pid, NULL), 0);
    cr_assert(pump(got_fault, 10000), "no fault");
    cr_assert(fault.assigned);
    cr_assert_eq(fault.pid, launch_pid(l, p));
    launch_signal(l, p, SIGKILL); /* the caller's to stop */
}

/* ---- in place (--in-place) ------------------------------------------------------------------ */

#define IPW EA_SOURCE_DIR "/tests/helpers/inplace_worker.py"

static const char *ip_cmd[5]; /* warm borrows the argv */

static void make_inplace(const char *mode, int64_t timeout_ms)
{
    const char **cmd = ip_cmd;
    cmd[0] = "/usr/bin/python3";
    cmd[1] = IPW;
    cmd[2] = dir;
    cmd[3] = mode;
    cmd[4] = NULL;
    char *env[] = {"PATH=/usr/bin:/bin", NULL};
    struct warm_config c = {.launcher = l, .command = (char *const *)cmd, .nproc = 1, .env = env,
                            .ready_timeout_ms = 20000, .stop_grace_ms = 500,
                            .inplace_timeout_ms = timeout_ms};
    struct ea_error err = {0};
    cr_assert_eq(warm_create(&c, &w, &err), 0, "%s", err.msg);
}

/* The file the worker writes (a rename) for each assignment it holds: gen.<generation>.<pid>;
 * waited for with inotify, up to timeout_ms. */
static bool has_gen(int64_t gen, pid_t pid, int timeout_ms)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/gen.%lld.%d", dir, (long long)gen, (int)pid);
    int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    cr_assert_geq(fd, 0);
    cr_assert_geq(inotify_add_watch(fd, dir, IN_MOVED_TO | IN_CREATE), 0);
    int64_t deadline = ea_now_ms() + timeout_ms;
    bool ok;
    while (!(ok = access(path, F_OK) == 0) && ea_now_ms() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, ea_timeout_until(deadline)) == 1) {
            char buf[4096];
            while (read(fd, buf, sizeof(buf)) > 0)
                ;
        }
    }
    close(fd);
    return ok;
}

/* Park, assign generation `gen` and pump until the worker holds it and settled in place. */
static struct launch_proc *running_inplace(int64_t gen, pid_t *ret_pid)
{
    struct ea_error perr = {0};
    int r = warm_park(w, gen - 1, &perr);
    cr_assert_eq(r, 1, "%d %s", r, perr.msg);
    char g[32];
    snprintf(g, sizeof(g), "ELASTIC_GENERATION=%lld", (long long)gen);
    char *env[] = {"RANK=0", "WORLD_SIZE=2", g, NULL};
    struct warm_take t = take(env, gen);
    struct launch_proc *p = NULL;
    struct ea_error err = {0};
    cr_assert_eq(warm_assign(w, 0, &t, &p, ret_pid, &err), 0, "%s", err.msg);
    gen_wanted = gen;
    watch(p);
    cr_assert(pump(assigned_with_pid, 20000), "the spare never took its assignment");
    *ret_pid = watch_pid;
    watch(NULL);
    return p;
}

Test(warm, in_place_worker_is_reassigned_forward_only)
{
    make_inplace("good", 5000);
    pid_t pid = 0;
    struct launch_proc *p = running_inplace(5, &pid);
    cr_assert_eq(warm_hold(w, p), 1, "an in-place worker that settled is held");
    cr_assert_eq(warm_held(w), 1);
    /* the same generation (or an older one) never reaches it: it is stopped */
    char *env5[] = {"RANK=1", "ELASTIC_GENERATION=5", NULL};
    struct warm_take t = take(env5, 5);
    struct launch_proc *q = NULL;
    pid_t qpid = 0;
    struct ea_error err = {0};
    cr_assert_eq(warm_assign(w, 0, &t, &q, &qpid, &err), -ESTALE);
    cr_assert(strstr(err.msg, "generation 5 is not newer than 5"), "%s", err.msg);
    cr_assert_eq(warm_held(w), 0);
    cr_assert(tl_pid_gone(pid, 10000), "the stale worker still runs");
    cr_assert_eq(warm_assign(w, 0, &t, &q, &qpid, &err), -ENOENT, "nothing held, none parked");

    /* a newer one: the same process takes it and acknowledges */
    p = running_inplace(6, &pid);
    cr_assert_eq(warm_hold(w, p), 1);
    char *env8[] = {"RANK=1", "WORLD_SIZE=3", "ELASTIC_GENERATION=8", NULL};
    t = take(env8, 8);
    cr_assert_eq(warm_assign(w, 0, &t, &q, &qpid, &err), 1, "%s", err.msg);
    cr_assert_eq(q, p);
    cr_assert_eq(qpid, pid, "re-assigned in place: the same process");
    gen_wanted = 8;
    cr_assert(pump(assigned, 10000), "no ack of generation 8");
    cr_assert(has_gen(8, pid, 10000), "the worker does not hold generation 8");
    cr_assert_eq(warm_tick(w, ea_now_ms(), &fault), 0, "a fault: %s", fault.message);
    launch_signal(l, p, SIGKILL); /* the caller's to stop */
}

Test(warm, in_place_worker_that_does_not_ack_is_an_assigned_fault)
{
    make_inplace("ignore", 300);
    pid_t pid = 0;
    struct launch_proc *p = running_inplace(3, &pid);
    cr_assert_eq(warm_hold(w, p), 1);
    char *env[] = {"RANK=0", "ELASTIC_GENERATION=4", NULL};
    struct warm_take t = take(env, 4);
    struct launch_proc *q = NULL;
    pid_t qpid = 0;
    int64_t t0 = ea_now_ms();
    cr_assert_eq(warm_assign(w, 0, &t, &q, &qpid, NULL), 1);
    cr_assert(pump(got_fault, 10000), "no fault");
    cr_assert_geq(ea_now_ms() - t0, 300, "before its deadline");
    cr_assert(fault.assigned, "the caller fails it");
    cr_assert_eq(fault.pid, pid);
    cr_assert(strstr(fault.message, "did not acknowledge its re-assignment to generation 4"),
              "%s", fault.message);
    launch_signal(l, q, SIGKILL);
}

Test(warm, ready_line_without_inplace_is_not_held)
{
    char go[300];
    snprintf(go, sizeof(go), "%s/never", dir); /* it waits for this file: it keeps running */
    const char *cmd[] = {TW, "warm", dir, go, NULL};
    char *penv[] = {"PATH=/usr/bin:/bin", NULL};
    struct warm_config c = {.launcher = l, .command = (char *const *)cmd, .nproc = 1,
                            .env = penv, .ready_timeout_ms = 10000, .stop_grace_ms = 500,
                            .inplace_timeout_ms = 5000};
    cr_assert_eq(warm_create(&c, &w, NULL), 0);
    cr_assert_eq(warm_park(w, 0, NULL), 1);
    char *env[] = {"RANK=0", "ELASTIC_GENERATION=1", NULL};
    struct warm_take t = take(env, 1);
    struct launch_proc *p = NULL;
    pid_t pid = 0;
    cr_assert_eq(warm_assign(w, 0, &t, &p, &pid, NULL), 0);
    gen_wanted = 1;
    cr_assert(pump(assigned, 10000));
    cr_assert_eq(warm_hold(w, p), 0, "a worker that did not say inplace is stopped as usual");
    launch_signal(l, p, SIGKILL);
}

/* ---- a parked spare costs nothing ---------------------------------------------------------- */

/* /proc/PID/stat's state, utime + stime (clock ticks); false once it is gone. */
static bool proc_cpu(pid_t pid, char *ret_state, unsigned long long *ret_ticks)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    ssize_t n = tl_read_file(path, buf, sizeof(buf));
    const char *rp = n > 0 ? strrchr(buf, ')') : NULL;
    unsigned long long ut = 0, st = 0;
    /* after "(comm)": state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
     * utime stime */
    if (!rp || sscanf(rp + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", ret_state,
                      &ut, &st) != 3)
        return false;
    *ret_ticks = ut + st;
    return true;
}

/* Where the kernel has it waiting (/proc/PID/wchan), "" when unknown. */
static void proc_wchan(pid_t pid, char *buf, size_t size)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/wchan", (int)pid);
    ssize_t n = tl_read_file(path, buf, size);
    buf[n > 0 ? (size_t)n < size ? (size_t)n : size - 1 : 0] = '\0';
}

Test(warm, parked_python_spare_uses_no_cpu_while_blocked_in_read)
{
    static char script[1024];
    snprintf(script, sizeof(script),
             "import os, sys; sys.path.insert(0, '%s/python'); import elastic_agent; "
             "open('%s/parked.' + str(os.getpid()), 'w').close(); "
             "elastic_agent.wait_for_assignment()",
             EA_SOURCE_DIR, dir);
    static const char *cmd[4];
    cmd[0] = "/usr/bin/python3";
    cmd[1] = "-c";
    cmd[2] = script;
    cmd[3] = NULL;
    make(cmd, 1, 30000);
    cr_assert_eq(warm_park(w, 0, NULL), 1);
    /* its pid, once its set-up (the import) is done */
    pid_t pid = -1;
    int64_t deadline = ea_now_ms() + 20000;
    while (pid < 0) {
        cr_assert_lt(ea_now_ms(), deadline, "the spare never wrote its parked file");
        DIR *d = opendir(dir);
        for (struct dirent *e; d && (e = readdir(d));)
            if (strncmp(e->d_name, "parked.", 7) == 0)
                pid = (pid_t)atoi(e->d_name + 7);
        if (d)
            closedir(d);
        if (pid < 0)
            poll(NULL, 0, 10);
    }
    /* then blocked in the read of its assignment: asleep on the socket */
    char state = '?', wchan[128] = "";
    unsigned long long t0 = 0, t1 = 0;
    for (;;) {
        cr_assert(proc_cpu(pid, &state, &t0), "the spare %d is gone", (int)pid);
        proc_wchan(pid, wchan, sizeof(wchan));
        if (state == 'S' && strstr(wchan, "unix_stream"))
            break;
        cr_assert_lt(ea_now_ms(), deadline, "the spare is not blocked on its socket: state %c, "
                                            "wchan '%s'",
                     state, wchan);
        poll(NULL, 0, 10);
    }
    /* a window of 100 clock ticks' worth: not one tick of CPU in it */
    long hz = sysconf(_SC_CLK_TCK);
    poll(NULL, 0, (int)(100 * 1000 / (hz > 0 ? hz : 100)));
    cr_assert(proc_cpu(pid, &state, &t1));
    proc_wchan(pid, wchan, sizeof(wchan));
    cr_assert_eq(t1, t0, "the parked spare used %llu clock ticks of CPU while blocked", t1 - t0);
    cr_assert(state == 'S' && strstr(wchan, "unix_stream"), "state %c, wchan '%s'", state,
              wchan);
}
