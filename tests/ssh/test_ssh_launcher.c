// SPDX-License-Identifier: Apache-2.0
/*
 * The ssh launcher against a real sshd on a loopback port (ssh_fixture): quoting of argv, env
 * and cwd; exits, exec failures, output; stop, fencing and orphans end every remote process; one
 * connection for many slots. Most cases run twice: with the remote exec-guard (the build dir is
 * on the remote PATH) and with the POSIX-sh fallback (ELASTIC_SSH_GUARD=none sent with ssh's
 * SetEnv). The connection's failures are in test_ssh_connection.c.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ea_time.h"
#include "ssh_fixture.h"

#define REC EA_HELPERS_DIR "/ea-ssh-recorder"

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
        struct launch_exit f = start_fails(l, &spec, 127);
        cr_assert(strstr(f.start_error, missing[i][0]) && strstr(f.start_error, "'127.0.0.1'"),
                  "%s", f.start_error);
        launch_release(l, f.proc);
    }
    const char *ok[] = {TW, "exit", "0", NULL};
    struct launch_spec spec = {.argv = ok, .envp = base_env, .cwd = "/nonexistent/dir"};
    struct launch_exit f = start_fails(l, &spec, 127);
    cr_assert(strstr(f.start_error, "/nonexistent/dir") && strstr(f.start_error, "127.0.0.1"),
              "%s", f.start_error);
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

/* A line reaches the log file while its worker still runs. Mutation: without `-W interactive`
 * for mawk in the helper (launcher/ssh_remote.c) the tagger reads its fifo in blocks and holds
 * "early" back until the worker ends. */
static void output_arrives_while_the_worker_runs(bool sh)
{
    struct launcher *l = mk(sh);
    char *go = path_in("go");
    cr_assert_eq(mkfifo(go, 0600), 0);
    const char *argv[] = {"/bin/sh", "-c", "echo early; read x <\"$1\"; echo late", "w", go,
                          NULL};
    char *out = path_in("early");
    struct launch_spec spec = {.argv = argv, .envp = base_env, .stdout_path = out};
    struct launch_proc *p = start_spec(l, &spec);
    char buf[256] = "";
    int64_t deadline = tl_now_ms() + 10000;
    while (strcmp(buf, "early\n") != 0 && tl_now_ms() < deadline) {
        struct launch_exit none;
        cr_assert_eq(tl_wait_exits(l, &none, 1, 50), 0, "the worker ended before it was told to");
        if (tl_read_file(out, buf, sizeof(buf)) < 0)
            buf[0] = '\0';
    }
    cr_assert_str_eq(buf, "early\n", "the worker's first line was held back while it ran");
    int fd = open(go, O_RDWR | O_CLOEXEC); /* O_RDWR: does not wait for the reader */
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "go\n", 3), 3);
    struct launch_exit e = wait_one(l, 20000);
    cr_assert_eq(e.exit_code, 0);
    close(fd);
    launch_release(l, p);
    tl_read_file(out, buf, sizeof(buf));
    cr_assert_str_eq(buf, "early\nlate\n");
    launcher_destroy(l);
}

Test(ssh, output_arrives_while_the_worker_runs_guard)
{
    output_arrives_while_the_worker_runs(false);
}

Test(ssh, output_arrives_while_the_worker_runs_sh)
{
    output_arrives_while_the_worker_runs(true);
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
    /* the stubborn worker writes "ready <pid>" (its SIGTERM handler is in place) straight to a
     * fifo of ours (same machine), a path that does not depend on the output relay */
    int keep, rfd = tl_fifo(path_in("fifo"), &keep);
    const char *stubborn[] = {"/bin/sh",       "-c", "exec \"$0\" ignore-term >\"$1\"", TW,
                              path_in("fifo"), NULL};
    struct launch_spec ss = {.argv = stubborn, .envp = base_env, .cwd = dir};
    struct launch_proc *p1 = start(l, hang), *p2 = start_spec(l, &ss);
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
    /* the worker leads its own process group: at once under the exec-guard; in sh mode once its
     * `setsid` has run (the remote reports the pid when it forks, and its kill reaches the pid
     * itself until then), so wait for that, with a deadline */
    for (int64_t until = ea_now_ms() + 5000; getpgid(w1) != w1 && ea_now_ms() < until;)
        poll(NULL, 0, 5);
    cr_assert_eq(getpgid(w1), w1);
    /* ignore-term must have installed its handler before SIGTERM: wait for its "ready", so
     * only the escalation to SIGKILL after the grace can end it.
     * Mutation: launcher/ssh.c collect() sends SIGCONT, not SIGKILL -> "...was not killed". */
    pid_t ready;
    cr_assert_eq(tl_read_ready(rfd, &ready, 1, 10000), 1, "no 'ready' from ignore-term");
    cr_assert_eq(ready, w2, "ready from %d, not the worker %d", (int)ready, (int)w2);
    int64_t t0 = tl_now_ms();
    launch_stop(l, p1, 300);
    launch_stop(l, p2, 300);
    struct launch_exit ex[2];
    cr_assert_eq(tl_wait_exits(l, ex, 2, 5000), 2, "the stubborn worker was not killed");
    const struct launch_exit *e1 = tl_find_exit(ex, 2, p1), *e2 = tl_find_exit(ex, 2, p2);
    cr_assert_eq(e1->term_signal, SIGTERM);
    cr_assert_eq(e2->term_signal, SIGKILL, "a worker ignoring SIGTERM ends by SIGKILL");
    int64_t took = e2->end_ms - t0;
    cr_assert_geq(took, 300, "SIGKILL came before the grace: %lld ms", (long long)took);
    cr_assert_lt(took, 300 + 2000, "SIGKILL too late: %lld ms", (long long)took);
    close(rfd);
    close(keep);
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

/* A fence renewed before its deadline never ends the worker, however close the deadline was:
 * the agent's first fence on a new connection is as old as its last lease renewal (the ssh
 * connect blocked it meanwhile), so it may have only a fraction of a second left (issue 27). */
static void fence_renewed_just_in_time(bool sh)
{
    struct launcher *l = mk(sh);
    const char *hang[] = {TW, "hang", NULL};
    struct launch_proc *p = start(l, hang);
    pid_t w = launch_pid(l, p);
    cr_assert_gt(w, 0);
    for (int i = 0; i < 4; i++) { /* 0.4 s left at each, renewed 0.25 s later */
        launcher_fence(l, tl_now_ms() + 400);
        cr_assert_not(tl_pid_gone(w, 250), "fenced before its deadline (fence %d)", i);
    }
    launch_release(l, p);
    launcher_destroy(l);
}

Test(ssh, fence_renewed_before_its_deadline_keeps_the_worker_guard)
{
    fence_renewed_just_in_time(false);
}

Test(ssh, fence_renewed_before_its_deadline_keeps_the_worker_sh)
{
    fence_renewed_just_in_time(true);
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
