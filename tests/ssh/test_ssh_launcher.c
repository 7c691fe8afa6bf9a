// SPDX-License-Identifier: Apache-2.0
/*
 * The ssh launcher against a real sshd on a loopback port (sshd_harness): quoting of argv, env
 * and cwd; exits, exec failures, output; stop, orphans, the agent's death and a dropped
 * connection end every remote process; one connection for many slots; connection-slot bound;
 * clear errors for refused authentication. Most cases run twice: with the remote exec-guard
 * (the build dir is on the remote PATH) and with the POSIX-sh fallback
 * (ELASTIC_SSH_GUARD=none sent with ssh's SetEnv).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher.h"
#include "sshd_harness.h"
#include "test_launch_support.h"

#define REC EA_HELPERS_DIR "/ea-ssh-recorder"

static struct sshd_h sshd;
static bool agent_guard; /* guard mode through the agent binary's own exec-guard subcommand */
static char dir[64];

static void setup(void)
{
    tl_mkdtemp(dir, sizeof(dir));
    struct sshd_h_opts o = {.extra_config = "SetEnv PATH=" EA_BIN_DIR ":/usr/bin:/bin\n"
                                            "AcceptEnv ELASTIC_SSH_GUARD"};
    sshd_h_start(&sshd, &o);
}

static void teardown(void)
{
    sshd_h_stop(&sshd);
    tl_rmrf(dir);
}

TestSuite(ssh, .init = setup, .fini = teardown, .timeout = 60);

static char *path_in(const char *name)
{
    static char buf[8][256];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, 256, "%s/%s", dir, name);
    return b;
}

/* sh = the POSIX-sh fallback; identity NULL = the harness's key. */
static struct launcher *mk_full(bool sh, const char *identity, int parallel, struct ea_error *err,
                                int *ret)
{
    const char *opts[16];
    int n = 0;
    for (int i = 0; sshd.ssh_options[i]; i++)
        opts[n++] = sshd.ssh_options[i];
    if (sh)
        opts[n++] = "SetEnv=ELASTIC_SSH_GUARD=none";
    else if (agent_guard) /* `elastic-agent exec-guard` rather than elastic-agent-guard */
        opts[n++] = "SetEnv=ELASTIC_SSH_GUARD=" EA_AGENT_BIN;
    opts[n] = NULL;
    struct passwd *pw = getpwuid(getuid()); /* --ssh-user, given explicitly */
    cr_assert_not_null(pw);
    struct launcher_config c = {.name = "ssh",
                                .host = "127.0.0.1",
                                .port = sshd.port,
                                .user = pw->pw_name,
                                .identity = identity ? identity : sshd.identity,
                                .ssh_options = opts,
                                .conn_lock_dir = path_in("locks"),
                                .conn_parallel = parallel};
    struct launcher *l = NULL;
    *ret = launcher_create(&c, &l, err);
    return l;
}

static struct launcher *mk(bool sh)
{
    struct ea_error err = {0};
    int r;
    struct launcher *l = mk_full(sh, NULL, 8, &err, &r);
    cr_assert_eq(r, 0, "create: %s", err.msg);
    return l;
}

static const char *const base_env[] = {"PATH=/usr/bin:/bin", NULL};

static struct launch_proc *start_spec(struct launcher *l, const struct launch_spec *spec)
{
    struct launch_proc *p = NULL;
    struct ea_error err = {0};
    int r = launch_start(l, spec, &p, &err);
    cr_assert_eq(r, 0, "start '%s': %s", spec->argv[0], err.msg);
    return p;
}

static struct launch_proc *start(struct launcher *l, const char *const *argv)
{
    struct launch_spec spec = {.argv = argv,
                               .envp = base_env,
                               .cwd = dir,
                               .stdout_path = path_in("stdout")}; /* "ready <pid>" lines */
    return start_spec(l, &spec);
}

static struct launch_exit wait_one(struct launcher *l, int timeout_ms)
{
    struct launch_exit e = {0};
    cr_assert_eq(tl_wait_exits(l, &e, 1, timeout_ms), 1, "no exit within %d ms", timeout_ms);
    return e;
}

/* The comm of pid's parent: "elastic-agent-g" under the guard, "sh" under the fallback. */
static void parent_comm(pid_t pid, char *buf, size_t size)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)tl_ppid(pid));
    ssize_t n = tl_read_file(path, buf, size);
    buf[n > 0 ? n - 1 : 0] = '\0';
}

/* ---- quoting ------------------------------------------------------------------------------ */

static const char *const torture[] = {"",
                                      " ",
                                      "a b",
                                      "it's",
                                      "\"dq\"",
                                      "$HOME",
                                      "${PATH}",
                                      "`id`",
                                      "$(id)",
                                      "back\\slash",
                                      "\\",
                                      "new\nline",
                                      "\n",
                                      "trail\n\n",
                                      "tab\there",
                                      "cr\rhere",
                                      "ünïcödé ✓ 日本",
                                      "*",
                                      "?",
                                      "~",
                                      "-n",
                                      "--",
                                      "a'b\"c$d\\e\nf`g",
                                      "'",
                                      "''",
                                      "!",
                                      ";",
                                      "&&",
                                      "|",
                                      ">x",
                                      "%s%n",
                                      " lead",
                                      "#hash",
                                      "'\"'\"'",
                                      "\x01\x7f\xff",
                                      NULL};

static void quoting_round_trip(bool sh)
{
    struct launcher *l = mk(sh);
    char cwd[256];
    snprintf(cwd, sizeof(cwd), "%s/dir with 'q' $x \"dq\"\nnl ✓", dir);
    cr_assert_eq(mkdir(cwd, 0755), 0);
    const char *out = path_in("rec");
    const char *argv[64] = {REC, out};
    int argc = 2;
    for (int i = 0; torture[i]; i++)
        argv[argc++] = torture[i];
    argv[argc] = NULL;
    const char *envp[] = {"PATH=/usr/bin:/bin",
                          "EMPTY=",
                          "EQ=a=b=c",
                          "Q1=it's \"x\" $y `z` \\",
                          "NL=line1\nline2\n",
                          "U=ünï ✓",
                          "IFS=x",
                          "SP= lead and trail ",
                          "BAD.NAME=dots",
                          "DASH-NAME=v",
                          "_ea_n=helper-like",
                          "1DIGIT=d",
                          "HOME=/nonexistent-home",
                          NULL};
    struct launch_spec spec = {.argv = argv, .envp = envp, .cwd = cwd};
    struct launch_proc *p = start_spec(l, &spec);
    struct launch_exit e = wait_one(l, 20000);
    cr_assert_eq(e.exit_code, 0, "recorder exit %d signal %d", e.exit_code, e.term_signal);
    launch_release(l, p);

    static char buf[65536];
    ssize_t n = tl_read_file(out, buf, sizeof(buf));
    cr_assert_gt(n, 0);
    const char *s = buf, *end = buf + n;
    cr_assert_str_eq(s, cwd, "cwd");
    s += strlen(s) + 1;
    cr_assert_eq(atoi(s), argc - 2, "argc");
    s += strlen(s) + 1;
    for (int i = 2; i < argc; i++) {
        cr_assert(s < end);
        cr_assert_str_eq(s, argv[i], "argv[%d]", i - 2);
        s += strlen(s) + 1;
    }
    /* the environment is exactly envp (as a set) */
    int seen = 0;
    for (; s < end; s += strlen(s) + 1) {
        bool found = false;
        for (int i = 0; envp[i] && !found; i++)
            found = strcmp(s, envp[i]) == 0;
        cr_assert(found, "unexpected environment entry '%s'", s);
        seen++;
    }
    cr_assert_eq(seen, (int)(sizeof(envp) / sizeof(*envp)) - 1, "environment entries");
    launcher_destroy(l);
}

Test(ssh, quoting_argv_env_cwd_round_trip_exactly_guard)
{
    quoting_round_trip(false);
}

Test(ssh, quoting_argv_env_cwd_round_trip_exactly_sh)
{
    quoting_round_trip(true);
}

/* ---- exits, failures, output -------------------------------------------------------------- */

static void exits_and_failures(bool sh)
{
    struct launcher *l = mk(sh);
    const char *a7[] = {TW, "exit", "7", NULL};
    struct launch_proc *p = start(l, a7);
    struct launch_exit e = wait_one(l, 20000);
    cr_assert_eq(e.proc, p);
    cr_assert_eq(e.exit_code, 7);
    cr_assert_eq(e.term_signal, 0);
    launch_release(l, p);
    const char *s9[] = {TW, "signal", "9", NULL};
    p = start(l, s9);
    e = wait_one(l, 20000);
    cr_assert_eq(e.term_signal, 9);
    cr_assert_eq(e.exit_code, -1);
    launch_release(l, p);

    const char *missing[][2] = {{"/nonexistent/prog", NULL}, {"no-such-program-xyz", NULL}};
    for (int i = 0; i < 2; i++) {
        struct launch_spec spec = {.argv = missing[i], .envp = base_env};
        struct ea_error err = {0};
        struct launch_proc *q = NULL;
        cr_assert_eq(launch_start(l, &spec, &q, &err), -ENOENT, "%s", err.msg);
        cr_assert(strstr(err.msg, missing[i][0]) && strstr(err.msg, "'127.0.0.1'"), "%s", err.msg);
    }
    const char *ok[] = {TW, "exit", "0", NULL};
    struct launch_spec spec = {.argv = ok, .envp = base_env, .cwd = "/nonexistent/dir"};
    struct ea_error err = {0};
    struct launch_proc *q = NULL;
    cr_assert_lt(launch_start(l, &spec, &q, &err), 0);
    cr_assert(strstr(err.msg, "/nonexistent/dir") && strstr(err.msg, "127.0.0.1"), "%s", err.msg);
    launcher_destroy(l);
}

Test(ssh, exit_codes_signals_and_start_failures_guard)
{
    exits_and_failures(false);
}

Test(ssh, exit_codes_signals_and_start_failures_sh)
{
    exits_and_failures(true);
}

static void outputs(bool sh)
{
    struct launcher *l = mk(sh);
    const char *argv[] = {TW, "echo-lines", "3", NULL};
    struct launch_spec spec = {.argv = argv,
                               .envp = base_env,
                               .stdout_path = path_in("o"),
                               .stderr_path = path_in("e"),
                               .stderr_tail = 64};
    struct launch_proc *p = start_spec(l, &spec);
    struct launch_exit e = wait_one(l, 20000);
    cr_assert_eq(e.exit_code, 0);
    cr_assert_str_eq(e.stderr_tail, "eline 1\neline 2\neline 3\n");
    launch_release(l, p);
    char buf[16384];
    tl_read_file(path_in("o"), buf, sizeof(buf));
    cr_assert_str_eq(buf, "line 1\nline 2\nline 3\n");
    tl_read_file(path_in("e"), buf, sizeof(buf));
    cr_assert_str_eq(buf, "eline 1\neline 2\neline 3\n");
    /* a line longer than one record travels in pieces and is put back together */
    const char *lng[] = {"/bin/sh", "-c", "printf '%05000d\\n' 7; printf 'x\\ty\\n'", NULL};
    struct launch_spec s2 = {.argv = lng, .envp = base_env, .stdout_path = path_in("long")};
    p = start_spec(l, &s2);
    e = wait_one(l, 20000);
    cr_assert_eq(e.exit_code, 0);
    launch_release(l, p);
    ssize_t n = tl_read_file(path_in("long"), buf, sizeof(buf));
    cr_assert_eq(n, 5001 + 4);
    cr_assert_eq(buf[4999], '7');
    cr_assert_str_eq(buf + 5000, "\nx\ty\n");
    launcher_destroy(l);
}

Test(ssh, output_reaches_the_log_files_byte_exact_guard)
{
    outputs(false);
}

Test(ssh, output_reaches_the_log_files_byte_exact_sh)
{
    outputs(true);
}

Test(ssh, tee_prefixes_lines_and_still_writes_the_file)
{
    /* in a child whose stdout is a file: tee writes to the launcher's process's stdout */
    const char *teed = path_in("teed");
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        int fd = open(teed, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        dup2(fd, 1);
        struct launcher *l = mk(false);
        const char *argv[] = {TW, "echo-lines", "2", NULL};
        struct launch_spec spec = {.argv = argv,
                                   .envp = base_env,
                                   .label = "5",
                                   .tee = 1,
                                   .stdout_path = path_in("o5"),
                                   .stderr_path = path_in("e5")};
        struct launch_proc *p = start_spec(l, &spec);
        struct launch_exit e = wait_one(l, 20000);
        launch_release(l, p);
        launcher_destroy(l);
        _exit(e.exit_code);
    }
    int st;
    waitpid(child, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char buf[4096];
    tl_read_file(teed, buf, sizeof(buf));
    cr_assert_str_eq(buf, "[5]:line 1\n[5]:line 2\n");
    tl_read_file(path_in("o5"), buf, sizeof(buf));
    cr_assert_str_eq(buf, "line 1\nline 2\n");
    tl_read_file(path_in("e5"), buf, sizeof(buf));
    cr_assert_str_eq(buf, "eline 1\neline 2\n");
}

/* ---- stopping and reaping ----------------------------------------------------------------- */

static void stop_ends_everything(bool sh)
{
    struct launcher *l = mk(sh);
    const char *hang[] = {TW, "hang", NULL};
    const char *stubborn[] = {TW, "ignore-term", NULL};
    struct launch_proc *p1 = start(l, hang), *p2 = start(l, stubborn);
    pid_t w1 = launch_pid(l, p1), w2 = launch_pid(l, p2);
    cr_assert_gt(w1, 0);
    cr_assert_gt(w2, 0);
    char comm[64];
    parent_comm(w1, comm, sizeof(comm));
    cr_assert_str_eq(comm,
                     sh            ? "sh"
                     : agent_guard ? "elastic-agent"
                                   : "elastic-agent-g",
                     "the middleman");
    /* the worker leads its own process group */
    cr_assert_eq(getpgid(w1), w1);
    /* ignore-term must have installed its handler before SIGTERM: wait for its "ready" */
    int64_t t0 = tl_now_ms();
    launch_stop(l, p1, 300);
    launch_stop(l, p2, 300);
    struct launch_exit ex[2];
    cr_assert_eq(tl_wait_exits(l, ex, 2, 20000), 2);
    const struct launch_exit *e1 = tl_find_exit(ex, 2, p1), *e2 = tl_find_exit(ex, 2, p2);
    cr_assert_eq(e1->term_signal, SIGTERM);
    cr_assert(e2->term_signal == SIGKILL || e2->term_signal == SIGTERM);
    if (e2->term_signal == SIGKILL)
        cr_assert_geq(tl_now_ms() - t0, 250, "SIGKILL came before the grace");
    cr_assert(tl_pid_gone(w1, 3000));
    cr_assert(tl_pid_gone(w2, 3000));
    cr_assert_eq(launch_signal(l, p1, SIGTERM), -ESRCH);
    launch_release(l, p1);
    launch_release(l, p2);
    launcher_destroy(l);
}

Test(ssh, stop_sigterms_then_sigkills_after_the_grace_guard)
{
    stop_ends_everything(false);
}

Test(ssh, stop_sigterms_then_sigkills_after_the_grace_sh)
{
    stop_ends_everything(true);
}

/* The fence (launcher_fence): renewed in time, the worker runs on; no longer renewed, the
 * remote helper's watchdog ends it by itself (a partition: nothing reaches the helper). */
static void fence_ends_workers(bool sh)
{
    struct launcher *l = mk(sh);
    const char *hang[] = {TW, "hang", NULL};
    launcher_fence(l, tl_now_ms() + 2000);
    struct launch_proc *p = start(l, hang);
    pid_t w = launch_pid(l, p);
    cr_assert_gt(w, 0);
    for (int i = 0; i < 3; i++) { /* renewals, as the agent's lease keepalives */
        cr_assert_not(tl_pid_gone(w, 800), "fenced although renewed (renewal %d)", i);
        launcher_fence(l, tl_now_ms() + 2000);
    }
    cr_assert(tl_pid_gone(w, 6000), "the worker outlived its fence by 4 s");
    launch_release(l, p);
    launcher_destroy(l);
}

Test(ssh, fence_not_renewed_ends_the_remote_workers_guard)
{
    fence_ends_workers(false);
}

Test(ssh, fence_not_renewed_ends_the_remote_workers_sh)
{
    fence_ends_workers(true);
}

Test(ssh, middleman_can_be_the_agent_binarys_exec_guard)
{
    agent_guard = true;
    stop_ends_everything(false);
    quoting_round_trip(false);
}

static void orphan_gone(bool sh)
{
    struct launcher *l = mk(sh);
    const char *argv[] = {TW, "orphan", path_in("gc.pid"), NULL};
    struct launch_proc *p = start(l, argv);
    struct launch_exit e = wait_one(l, 20000);
    cr_assert_eq(e.exit_code, 0);
    pid_t gc = tl_read_pid(path_in("gc.pid"));
    cr_assert_gt(gc, 0);
    cr_assert(tl_pid_gone(gc, 3000), "the worker's grandchild %d survived it", (int)gc);
    launch_release(l, p);
    launcher_destroy(l);
}

Test(ssh, orphaned_grandchild_ends_with_the_worker_guard)
{
    orphan_gone(false);
}

Test(ssh, orphaned_grandchild_ends_with_the_worker_sh)
{
    orphan_gone(true);
}

Test(ssh, setsid_grandchild_ends_with_the_worker_guard)
{
    /* only the guard (a subreaper) can find descendants that left the worker's session */
    struct launcher *l = mk(false);
    const char *argv[] = {TW, "orphan-setsid", path_in("gc.pid"), NULL};
    struct launch_proc *p = start(l, argv);
    struct launch_exit e = wait_one(l, 20000);
    cr_assert_eq(e.exit_code, 0);
    pid_t gc = tl_read_pid(path_in("gc.pid"));
    cr_assert_gt(gc, 0);
    cr_assert(tl_pid_gone(gc, 3000));
    launch_release(l, p);
    launcher_destroy(l);
}

/* ---- one connection, many slots ----------------------------------------------------------- */

static void many_slots_one_connection(bool sh, int n)
{
    struct launcher *l = mk(sh);
    const char *hang[] = {TW, "hang", NULL};
    struct launch_proc *p[32];
    int64_t t0 = tl_now_ms();
    for (int i = 0; i < n; i++)
        p[i] = start(l, hang);
    int64_t t1 = tl_now_ms();
    fprintf(stderr, "ssh launcher (%s): %d workers started in %lld ms over %d connection(s)\n",
            sh ? "sh" : "guard", n, (long long)(t1 - t0), sshd_h_accepted(&sshd));
    cr_assert_eq(sshd_h_accepted(&sshd), 1, "connections opened for %d slots", n);
    pid_t dummy[64];
    cr_assert_eq(sshd_h_sessions(&sshd, dummy, 64), 1);
    for (int i = 0; i < n; i++)
        launch_stop(l, p[i], 2000);
    struct launch_exit ex[32];
    cr_assert_eq(tl_wait_exits(l, ex, (size_t)n, 20000), (size_t)n);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(ex[i].term_signal, SIGTERM);
        cr_assert(tl_pid_gone(launch_pid(l, ex[i].proc), 3000));
        launch_release(l, ex[i].proc);
    }
    launcher_destroy(l);
}

Test(ssh, sixteen_slots_use_one_connection_guard)
{
    many_slots_one_connection(false, 16);
}

Test(ssh, sixteen_slots_use_one_connection_sh)
{
    many_slots_one_connection(true, 16);
}

/* ---- failures of the connection ----------------------------------------------------------- */

/* The ssh client among our children. */
static pid_t ssh_client(void)
{
    char path[64], text[4096];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)getpid(), (int)getpid());
    if (tl_read_file(path, text, sizeof(text)) <= 0)
        return -1;
    for (char *t = text, *end;; t = end) {
        long v = strtol(t, &end, 10);
        if (end == t)
            return -1;
        char comm[64];
        snprintf(path, sizeof(path), "/proc/%ld/comm", v);
        if (tl_read_file(path, comm, sizeof(comm)) > 0 && strcmp(comm, "ssh\n") == 0)
            return (pid_t)v;
    }
}

static void dropped_connection(bool sh, bool kill_client)
{
    struct launcher *l = mk(sh);
    const char *hang[] = {TW, "hang", NULL};
    struct launch_proc *p[3];
    pid_t w[3];
    for (int i = 0; i < 3; i++) {
        struct launch_spec spec = {
            .argv = hang, .envp = base_env, .stderr_tail = 512, .stdout_path = path_in("stdout")};
        p[i] = start_spec(l, &spec);
        w[i] = launch_pid(l, p[i]);
    }
    if (kill_client) {
        pid_t c = ssh_client();
        cr_assert_gt(c, 0, "no ssh client among our children");
        kill(c, SIGKILL);
    } else {
        pid_t s[8];
        cr_assert_eq(sshd_h_sessions(&sshd, s, 8), 1);
        kill(s[0], SIGKILL);
    }
    struct launch_exit ex[3];
    cr_assert_eq(tl_wait_exits(l, ex, 3, 20000), 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(ex[i].exit_code, 255);
        cr_assert(ex[i].stderr_tail &&
                      strstr(ex[i].stderr_tail, "lost the ssh connection to host '127.0.0.1'"),
                  "%s", ex[i].stderr_tail ? ex[i].stderr_tail : "(no tail)");
        launch_release(l, ex[i].proc);
    }
    for (int i = 0; i < 3; i++)
        cr_assert(tl_pid_gone(w[i], 3000), "worker %d survived the dropped connection", (int)w[i]);
    /* the next start connects again */
    const char *ok[] = {TW, "exit", "0", NULL};
    struct launch_proc *q = start(l, ok);
    cr_assert_eq(wait_one(l, 20000).exit_code, 0);
    cr_assert_eq(sshd_h_accepted(&sshd), 2);
    launch_release(l, q);
    launcher_destroy(l);
}

Test(ssh, killed_sshd_session_ends_workers_and_is_reported_guard)
{
    dropped_connection(false, false);
}

Test(ssh, killed_sshd_session_ends_workers_and_is_reported_sh)
{
    dropped_connection(true, false);
}

Test(ssh, killed_ssh_client_ends_workers_and_is_reported_sh)
{
    dropped_connection(true, true);
}

/* The remote helper itself SIGKILLed: its lifeline fifo loses its only writer, and the guards
 * (guard mode) or the watcher (sh mode) kill every worker group. */
static void helper_killed(bool sh)
{
    struct launcher *l = mk(sh);
    const char *hang[] = {TW, "hang", NULL};
    pid_t w[2];
    for (int i = 0; i < 2; i++)
        w[i] = launch_pid(l, start(l, hang));
    /* worker <- [guard <-] slot subshell <- helper */
    pid_t helper = tl_ppid(tl_ppid(w[0]));
    if (!sh)
        helper = tl_ppid(helper);
    char comm[64], path[64];
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)helper);
    tl_read_file(path, comm, sizeof(comm));
    cr_assert_str_eq(comm, "sh\n", "the helper");
    kill(helper, SIGKILL);
    for (int i = 0; i < 2; i++)
        cr_assert(tl_pid_gone(w[i], 3000), "worker %d outlived its helper", (int)w[i]);
    struct launch_exit ex[2];
    cr_assert_eq(tl_wait_exits(l, ex, 2, 20000), 2);
    for (int i = 0; i < 2; i++) {
        cr_assert(ex[i].term_signal == SIGKILL || ex[i].exit_code == 255);
        launch_release(l, ex[i].proc);
    }
    launcher_destroy(l);
}

Test(ssh, killed_remote_helper_takes_its_workers_along_guard)
{
    helper_killed(false);
}

Test(ssh, killed_remote_helper_takes_its_workers_along_sh)
{
    helper_killed(true);
}

Test(ssh, refused_authentication_is_an_error_naming_the_host)
{
    const char *key = path_in("other_id");
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "ssh-keygen -q -t ed25519 -N '' -f '%s' >/dev/null", key);
    cr_assert_eq(system(cmd), 0);
    struct ea_error err = {0};
    int r;
    struct launcher *l = mk_full(false, key, 8, &err, &r);
    cr_assert_eq(r, 0);
    const char *ok[] = {TW, "exit", "0", NULL};
    struct launch_spec spec = {.argv = ok, .envp = base_env};
    struct launch_proc *p = NULL;
    r = launch_start(l, &spec, &p, &err);
    cr_assert_lt(r, 0);
    cr_assert(strstr(err.msg, "'127.0.0.1'") && strstr(err.msg, "Permission denied"), "%s",
              err.msg);
    launcher_destroy(l);
}

Test(ssh, unknown_host_key_is_an_error_naming_the_host)
{
    /* a known_hosts without the server's key, and StrictHostKeyChecking=yes */
    const char *empty = path_in("empty_known_hosts");
    close(open(empty, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    char kh[300];
    snprintf(kh, sizeof(kh), "UserKnownHostsFile=%s", empty);
    const char *opts[] = {kh, "StrictHostKeyChecking=yes", "GlobalKnownHostsFile=/dev/null", NULL};
    struct launcher_config c = {.name = "ssh",
                                .host = "127.0.0.1",
                                .port = sshd.port,
                                .identity = sshd.identity,
                                .ssh_options = opts};
    struct launcher *l = NULL;
    struct ea_error err = {0};
    cr_assert_eq(launcher_create(&c, &l, &err), 0);
    const char *ok[] = {TW, "exit", "0", NULL};
    struct launch_spec spec = {.argv = ok, .envp = base_env};
    struct launch_proc *p = NULL;
    cr_assert_lt(launch_start(l, &spec, &p, &err), 0);
    cr_assert(strstr(err.msg, "'127.0.0.1'") && strstr(err.msg, "Host key verification failed"),
              "%s", err.msg);
    launcher_destroy(l);
}

Test(ssh, unreachable_port_is_an_error_naming_the_host)
{
    sshd_h_stop(&sshd); /* nothing listens on its port now */
    struct launcher *l = mk(false);
    const char *ok[] = {TW, "exit", "0", NULL};
    struct launch_spec spec = {.argv = ok, .envp = base_env};
    struct launch_proc *p = NULL;
    struct ea_error err = {0};
    cr_assert_lt(launch_start(l, &spec, &p, &err), 0);
    cr_assert(strstr(err.msg, "'127.0.0.1'") && strstr(err.msg, "refused"), "%s", err.msg);
    launcher_destroy(l);
}

/* ---- the agent's death -------------------------------------------------------------------- */

static void agent_death(bool sh)
{
    int sync[2];
    cr_assert_eq(pipe(sync), 0);
    pid_t agent = fork();
    cr_assert_geq(agent, 0);
    if (agent == 0) { /* a stand-in agent: start workers, report their pids, wait to be killed */
        close(sync[0]);
        struct launcher *l = mk(sh);
        const char *hang[] = {TW, "hang", NULL};
        const char *orphan[] = {TW, "orphan", path_in("gc.pid"), NULL};
        pid_t pids[5];
        for (int i = 0; i < 4; i++)
            pids[i] = launch_pid(l, start(l, hang));
        start(l, orphan);
        struct launch_exit e; /* the orphan worker exits once its grandchild's pid file exists */
        if (tl_wait_exits(l, &e, 1, 20000) != 1 || e.exit_code != 0)
            _exit(1);
        if (write(sync[1], pids, sizeof(pid_t) * 4) < 0)
            _exit(1);
        for (;;)
            pause();
    }
    close(sync[1]);
    pid_t pids[4];
    struct pollfd pf = {.fd = sync[0], .events = POLLIN};
    cr_assert_eq(poll(&pf, 1, 30000), 1);
    cr_assert_eq(read(sync[0], pids, sizeof(pids)), (ssize_t)sizeof(pids));
    close(sync[0]);
    int fds[5];
    for (int i = 0; i < 4; i++)
        fds[i] = tl_pidfd(pids[i]);
    pid_t gc = tl_read_pid(path_in("gc.pid"));
    cr_assert_gt(gc, 0);
    fds[4] = gc > 0 ? tl_pidfd(gc) : -1;
    kill(agent, SIGKILL);
    while (waitpid(agent, NULL, 0) < 0 && errno == EINTR)
        ;
    int64_t t0 = tl_now_ms();
    cr_assert(tl_pidfds_gone(fds, 5, 2000), "a worker outlived the agent by 2 s");
    fprintf(stderr, "ssh launcher (%s): workers gone %lld ms after the agent's SIGKILL\n",
            sh ? "sh" : "guard", (long long)(tl_now_ms() - t0));
    for (int i = 0; i < 5; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

Test(ssh, sigkill_of_the_agent_ends_every_remote_process_within_2s_guard)
{
    agent_death(false);
}

Test(ssh, sigkill_of_the_agent_ends_every_remote_process_within_2s_sh)
{
    agent_death(true);
}

/* ---- bounded connection setup ------------------------------------------------------------- */

/* Both slots held by the test; a child launcher must wait, connect nowhere, and connect once
 * the slot `freed(child)` is released. */
static void slot_wait(int (*freed)(pid_t child))
{
    mkdir(path_in("locks"), 0700);
    int held[2];
    for (int i = 0; i < 2; i++) {
        char p[300];
        snprintf(p, sizeof(p), "%s/slot.%d", path_in("locks"), i);
        held[i] = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        cr_assert_eq(flock(held[i], LOCK_EX), 0);
    }
    int accepted = sshd_h_accepted(&sshd);
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        close(held[0]); /* shared lock descriptions: the parent's close must release them */
        close(held[1]);
        struct ea_error err = {0};
        int r;
        struct launcher *l = mk_full(false, NULL, 2, &err, &r);
        const char *ok[] = {TW, "exit", "0", NULL};
        struct launch_proc *p = start(l, ok);
        struct launch_exit e = wait_one(l, 20000);
        launch_release(l, p);
        launcher_destroy(l);
        _exit(e.exit_code == 0 ? 0 : 1);
    }
    int pidfd = tl_pidfd(child);
    struct pollfd pf = {.fd = pidfd, .events = POLLIN};
    struct pollfd none = {.fd = -1};
    poll(&none, 1, 1000); /* a negative check: give a wrongly unbounded child time to connect */
    cr_assert_eq(sshd_h_accepted(&sshd), accepted, "connected although every slot was taken");
    cr_assert_eq(poll(&pf, 1, 0), 0);
    int f = freed(child);
    close(held[f]);
    if (poll(&pf, 1, 20000) != 1)
        kill(child, SIGKILL); /* not left behind by a failing test */
    cr_assert_eq(poll(&pf, 1, 0), 1, "no connection although slot %d was freed", f);
    int st;
    waitpid(child, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    cr_assert_eq(sshd_h_accepted(&sshd), accepted + 1);
    close(held[1 - f]);
    close(pidfd);
}

/* the slot it tries first is its pid modulo the count */
static int first_tried(pid_t child)
{
    return child % 2;
}

static int not_first_tried(pid_t child)
{
    return 1 - child % 2;
}

/* It takes whichever slot is freed, not only the one it tried first. Then, with every inotify
 * instance of the user taken (a thousand nodes waiting at once), it still waits, on the slot it
 * tried first, rather than failing. One test, so that no other test of this binary runs while
 * the instances are used up (it would fall back too). */
Test(ssh, connection_setup_waits_for_a_free_slot)
{
    slot_wait(not_first_tried);
    int fds[4096], n = 0;
    while (n < 4096 && (fds[n] = inotify_init1(IN_CLOEXEC)) >= 0)
        n++;
    int e = errno;
    if (n == 4096) {
        while (n > 0)
            close(fds[--n]);
        cr_skip_test("fs.inotify.max_user_instances is over 4096: cannot use them all up");
    }
    cr_assert_eq(e, EMFILE, "inotify_init1: %s", strerror(e));
    slot_wait(first_tried);
    while (n > 0)
        close(fds[--n]);
}
