// SPDX-License-Identifier: Apache-2.0
/* Options: the CLI contract (names, env, PET_*, precedence) and one-line errors for bad input. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"

#define ARGV(...) ((char *[]){"elastic-agent", __VA_ARGS__, NULL})

static int parse(char **argv, char **envp, struct cfg *c, struct ea_error *err)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    return cfg_parse(argc, argv, envp, c, err);
}

Test(config, defaults)
{
    struct cfg c;
    char **argv = ARGV("--", "true");
    cr_assert_eq(parse(argv, NULL, &c, NULL), 0);
    cr_assert_eq(c.min_nodes, 1);
    cr_assert_eq(c.max_nodes, 1);
    cr_assert_eq(c.nproc_per_node, 1);
    cr_assert_eq(c.max_restarts, 0);
    cr_assert_eq(c.join_timeout_ms, 600000);
    cr_assert_eq(c.last_call_ms, 30000);
    cr_assert_eq(c.settle_ms, 1000);
    cr_assert_eq(c.lease_ttl_ms, 10000);
    cr_assert_eq(c.stop_timeout_ms, 10000);
    cr_assert_str_eq(c.backend, "file");
    cr_assert_str_eq(c.run_id, "default");
    cr_assert_str_eq(c.command[0], "true");
    cr_assert(c.node_id && c.node_id[0]);
}

Test(config, cli_contract)
{
    struct cfg c;
    struct ea_error err = {0};
    char **argv = ARGV("--min", "2", "--max=8", "--nproc-per-node", "4", "--run-id", "job1",
                       "--max-restarts", "3", "--settle", "0.25", "--lease-ttl", "1.5", "--tee",
                       "--log-dir", "/tmp/x", "python", "train.py", "--lr", "1");
    cr_assert_eq(parse(argv, NULL, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(c.min_nodes, 2);
    cr_assert_eq(c.max_nodes, 8);
    cr_assert_eq(c.nproc_per_node, 4);
    cr_assert_str_eq(c.run_id, "job1");
    cr_assert_eq(c.max_restarts, 3);
    cr_assert_eq(c.settle_ms, 250);
    cr_assert_eq(c.lease_ttl_ms, 1500);
    cr_assert(c.tee);
    cr_assert_str_eq(c.command[0], "python");
    cr_assert_str_eq(c.command[2], "--lr", "options after the command belong to the worker");
}

Test(config, torchrun_spellings)
{
    struct cfg c;
    cr_assert_eq(parse(ARGV("--nnodes", "2:4", "--nproc_per_node", "2", "--rdzv_id", "r",
                            "--rdzv-endpoint", "127.0.0.1:2379", "x"),
                       NULL, &c, NULL),
                 0);
    cr_assert_eq(c.min_nodes, 2);
    cr_assert_eq(c.max_nodes, 4);
    cr_assert_eq(c.nproc_per_node, 2);
    cr_assert_str_eq(c.run_id, "r");
    cr_assert_str_eq(c.backend, "etcd");
    cr_assert_eq(parse(ARGV("--rdzv-endpoint", "http://127.0.0.1:2379", "x"), NULL, &c, NULL), 0);
    cr_assert_str_eq(c.backend, "etcd-gateway");
}

Test(config, env_precedence)
{
    struct cfg c;
    char *env[] = {"PET_NNODES=3", "PET_NPROC_PER_NODE=5", "ELASTIC_NPROC_PER_NODE=6",
                   "ELASTIC_RUN_ID=fromenv", "PET_MAX_RESTARTS=2", NULL};
    cr_assert_eq(parse(ARGV("--max-restarts", "9", "x"), env, &c, NULL), 0);
    cr_assert_eq(c.min_nodes, 3);
    cr_assert_eq(c.max_nodes, 3);
    cr_assert_eq(c.nproc_per_node, 6, "ELASTIC_* wins over PET_*");
    cr_assert_str_eq(c.run_id, "fromenv");
    cr_assert_eq(c.max_restarts, 9, "the command line wins over the environment");
    char *kf[] = {"PET_N_PROC_PER_NODE=7", "PET_STANDALONE=", NULL};
    cr_assert_eq(parse(ARGV("x"), kf, &c, NULL), 0);
    cr_assert_eq(c.nproc_per_node, 7);
    cr_assert(c.standalone, "Kubeflow writes PET_STANDALONE=\"\" to mean on");
    cr_assert_str_eq(c.backend, "memory");
}

static void expect_error(char **argv, const char *needle)
{
    struct cfg c;
    struct ea_error err = {0};
    cr_assert_eq(parse(argv, NULL, &c, &err), -EINVAL, "accepted, wanted '%s'", needle);
    cr_assert(strstr(err.msg, needle), "message '%s' lacks '%s'", err.msg, needle);
    cr_assert_null(strchr(err.msg, '\n'), "one line");
}

Test(config, bad_input_is_named)
{
    expect_error(ARGV("--bogus", "x"), "unknown option '--bogus'");
    expect_error(ARGV("-x", "y"), "unknown option '-x'");
    expect_error(ARGV("--min", "3", "--max", "2", "x"), "--min 3 is larger than --max 2");
    expect_error(ARGV("--min", "two", "x"), "--min: 'two'");
    expect_error(ARGV("--min", "2x", "x"), "--min: '2x'");
    expect_error(ARGV("--min", "0", "x"), "--min: '0'");
    expect_error(ARGV("--settle", "-1", "x"), "--settle: '-1'");
    expect_error(ARGV("--settle", "nan", "x"), "--settle: 'nan'");
    expect_error(ARGV("--nnodes", "4:2", "x"), "MAX must be >= MIN");
    expect_error(ARGV("--nnodes", "a:b", "x"), "MIN[:MAX]");
    expect_error(ARGV("--nnodes", "2", "--min", "1", "x"), "either --nnodes or --min/--max");
    expect_error(ARGV("--min", "2"), "missing the worker command");
    expect_error(ARGV("--run-id"), "--run-id needs a value");
    expect_error(ARGV("--run-id", "a/b", "x"), "--run-id: 'a/b'");
    expect_error(ARGV("--rdzv-backend", "c10d", "x"), "torchrun backend");
    expect_error(ARGV("--rdzv-backend", "etcd", "x"), "needs --rdzv-endpoint");
    expect_error(ARGV("--rdzv-endpoint", "h:1", "--rdzv-backend", "file", "x"), "no meaning");
    expect_error(ARGV("--standalone", "--max", "4", "x"), "--standalone");
    expect_error(ARGV("--log-level", "loud", "x"), "--log-level: 'loud'");
    expect_error(ARGV("--tee=maybe", "x"), "--tee: 'maybe'");
    expect_error(ARGV("--rank-order", "random", "x"), "--rank-order: 'random'");
}

/* issue 41: --failure-domain / ELASTIC_FAILURE_DOMAIN: a short label, published in the node
 * record; anything else is a usage error naming the flag; empty (a downward-API variable whose
 * node label is missing) is none. */
Test(config, failure_domain)
{
    struct cfg c;
    struct ea_error err = {0};
    cr_assert_eq(parse(ARGV("x"), NULL, &c, NULL), 0);
    cr_assert(!c.failure_domain || !c.failure_domain[0], "default: none");
    cr_assert_eq(parse(ARGV("--failure-domain", "rack-7", "x"), NULL, &c, &err), 0, "%s",
                 err.msg);
    cr_assert_str_eq(c.failure_domain, "rack-7");
    char *env[] = {"ELASTIC_FAILURE_DOMAIN=eu-west-1b", NULL};
    cr_assert_eq(parse(ARGV("x"), env, &c, &err), 0, "%s", err.msg);
    cr_assert_str_eq(c.failure_domain, "eu-west-1b");
    char *empty[] = {"ELASTIC_FAILURE_DOMAIN=", NULL};
    cr_assert_eq(parse(ARGV("x"), empty, &c, &err), 0, "%s", err.msg);
    cr_assert(!c.failure_domain || !c.failure_domain[0], "empty: none");
    char max[64];
    memset(max, 'r', 63);
    max[63] = '\0';
    cr_assert_eq(parse(ARGV("--failure-domain", max, "x"), NULL, &c, &err), 0, "%s", err.msg);
    char over[65];
    memset(over, 'r', 64);
    over[64] = '\0';
    expect_error(ARGV("--failure-domain", over, "x"), "--failure-domain: 'rrrr");
    expect_error(ARGV("--failure-domain", "rack 7", "x"),
                 "--failure-domain: 'rack 7' must be 1-63 characters of A-Z a-z 0-9 . _ : / -");
    expect_error(ARGV("--failure-domain", "rack\"7", "x"), "--failure-domain");
    expect_error(ARGV("--failure-domain", "r\xc3\xa4" "ck", "x"), "--failure-domain");
}

Test(config, env_errors_name_the_variable)
{
    struct cfg c;
    struct ea_error err = {0};
    char *env[] = {"ELASTIC_MAX_RESTARTS=lots", NULL};
    cr_assert_eq(parse(ARGV("x"), env, &c, &err), -EINVAL);
    cr_assert(strstr(err.msg, "ELASTIC_MAX_RESTARTS: 'lots'"), "%s", err.msg);
}

static char *help_of(enum cfg_cmd cmd)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert(f);
    cfg_print_help_cmd(cmd, f);
    fclose(f);
    return buf;
}

/* True when the parser of `cmd` knows `--flag` (given a value; any other complaint is fine). */
static bool parser_accepts(enum cfg_cmd cmd, const char *flag)
{
    char arg[96];
    snprintf(arg, sizeof(arg), "--%s=1", flag);
    char *argv[] = {cmd == CFG_STATUS ? "status" : "elastic-agent", arg, NULL};
    struct cfg c;
    struct ea_error err = {0};
    return cfg_parse_cmd(cmd, 2, argv, NULL, &c, &err) == 0 || !strstr(err.msg, "unknown option");
}

/* The option line of `--flag` in `help`: "  --flag" followed by a blank or the line's end. */
static bool has_option_line(const char *help, const char *flag)
{
    char line[96];
    int n = snprintf(line, sizeof(line), "\n  --%s", flag);
    for (const char *p = help; (p = strstr(p, line)); p += n)
        if (p[n] == ' ' || p[n] == '\n')
            return true;
    return false;
}

/* Every option the table gives a command is in that command's --help, and only those. */
static void help_matches_table(enum cfg_cmd cmd)
{
    char *help = help_of(cmd);
    size_t n_cmd = 0;
    for (size_t i = 0; i < cfg_option_count(); i++) {
        unsigned cmds = 0;
        const char *flag = cfg_option_flag(i, &cmds);
        cr_assert(flag && flag[0]);
        if (!(cmds & cmd)) {
            cr_assert_not(has_option_line(help, flag), "help of command %d lists --%s", cmd, flag);
            continue;
        }
        n_cmd++;
        cr_assert(parser_accepts(cmd, flag), "the parser refuses --%s of its table", flag);
        cr_assert(has_option_line(help, flag), "help of command %d lacks --%s:\n%s", cmd, flag,
                  help);
    }
    cr_assert_gt(n_cmd, 2);
    cr_assert_null(cfg_option_flag(cfg_option_count(), NULL));

    /* the other way: every --flag the help names is one the parser accepts, an option line for
     * this command, prose (e.g. "fewer than --min nodes") for some command */
    size_t n_lines = 0;
    for (const char *p = help; (p = strstr(p, "--"));) {
        bool line = p >= help + 3 && p[-1] == ' ' && p[-2] == ' ' && p[-3] == '\n';
        p += 2;
        size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789-_");
        if (len == 0 || !isalpha((unsigned char)p[0]))
            continue; /* "[--]", "--" alone */
        char flag[64];
        cr_assert_lt(len, sizeof(flag));
        memcpy(flag, p, len);
        flag[len] = '\0';
        if (line) {
            n_lines++;
            cr_assert(parser_accepts(cmd, flag), "help of command %d offers --%s, which it refuses",
                      cmd, flag);
        } else {
            cr_assert(parser_accepts(CFG_AGENT, flag) || parser_accepts(CFG_STATUS, flag),
                      "help of command %d mentions --%s, which no parser accepts", cmd, flag);
        }
        p += len;
    }
    cr_assert_eq(n_lines, n_cmd, "help of command %d has %zu option lines for %zu options", cmd,
                 n_lines, n_cmd);
    free(help);
}

Test(config, help_lists_every_option)
{
    help_matches_table(CFG_AGENT);
    help_matches_table(CFG_STATUS);
    char *help = help_of(CFG_AGENT);
    cr_assert(strstr(help, "PET_NPROC_PER_NODE"), "--help names torchrun's variables");
    free(help);
    struct cfg c;
    cr_assert_eq(parse(ARGV("--help"), NULL, &c, NULL), 0);
    cr_assert(c.help, "--help needs no command");
    cr_assert_eq(parse(ARGV("--no-such-flag=1"), NULL, &c, NULL), -EINVAL);
    cr_assert_not(parser_accepts(CFG_AGENT, "no-such-flag"), "the check can fail");
    cr_assert_not(parser_accepts(CFG_STATUS, "watchful"));
}

Test(config, etcd_password_never_from_the_command_line)
{
    struct cfg c;
    struct ea_error err = {0};
    char **argv = ARGV("--password", "hunter2", "x");
    cr_assert_eq(parse(argv, NULL, &c, &err), -EINVAL);
    cr_assert(strstr(err.msg, "unknown option '--password'"), "%s", err.msg);

    char **with_user = ARGV("--rdzv-endpoint", "127.0.0.1:2379", "--user", "root",
                            "--insecure-transport", "x");
    cr_assert_eq(parse(with_user, NULL, &c, &err), -EINVAL);
    cr_assert(strstr(err.msg, "ELASTIC_ETCD_PASSWORD"), "%s", err.msg);

    char *env[] = {"ELASTIC_ETCD_PASSWORD=s3cret", NULL};
    cr_assert_eq(parse(with_user, env, &c, &err), 0, "%s", err.msg);
    cr_assert_str_eq(c.password, "s3cret");

    char path[] = "/tmp/ea-pw-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_eq(write(fd, "fromfile\n", 9), 9);
    close(fd);
    char **with_file = ARGV("--rdzv-endpoint", "127.0.0.1:2379", "--user", "root",
                            "--password-file", path, "--insecure-transport", "x");
    cr_assert_eq(parse(with_file, env, &c, &err), 0, "%s", err.msg);
    cr_assert_str_eq(c.password, "fromfile", "the file wins; its newline is dropped");
    unlink(path);
    cr_assert_eq(parse(with_file, env, &c, &err), -EINVAL);
    cr_assert(strstr(err.msg, "--password-file: cannot read"), "%s", err.msg);
}

extern char **environ;

/* --user over plaintext (gRPC without TLS files, an http:// gateway endpoint) is refused unless
 * --insecure-transport says so; TLS files or https:// endpoints are not plaintext. */
Test(config, user_needs_tls_or_insecure_transport)
{
    struct cfg c;
    struct ea_error err = {0};
    char *env[] = {"ELASTIC_ETCD_PASSWORD=s3cret", NULL};
    cr_assert_eq(parse(ARGV("--rdzv-endpoint", "127.0.0.1:2379", "--user", "root", "x"), env, &c,
                       &err),
                 -EINVAL);
    cr_assert(strstr(err.msg, "--user 'root': the password would cross a plaintext connection "
                              "to '127.0.0.1:2379'"),
              "%s", err.msg);
    cr_assert(strstr(err.msg, "--insecure-transport"), "%s", err.msg);
    cr_assert_eq(parse(ARGV("--rdzv-endpoint", "https://a:1,http://b:2", "--user", "root", "x"),
                       env, &c, &err),
                 -EINVAL);
    cr_assert(strstr(err.msg, "use https:// endpoints"), "%s", err.msg);
    cr_assert_eq(parse(ARGV("--rdzv-endpoint", "https://a:1", "--user", "root", "x"), env, &c,
                       &err),
                 0, "%s", err.msg);
    cr_assert_eq(parse(ARGV("--rdzv-endpoint", "a:1", "--cacert", "/ca.pem", "--user", "root",
                            "x"),
                       env, &c, &err),
                 0, "%s", err.msg);
    cr_assert(!cfg_store_plaintext(&c));
    cr_assert_eq(parse(ARGV("--rdzv-endpoint", "a:1", "--user", "root", "--insecure-transport",
                            "x"),
                       env, &c, &err),
                 0, "%s", err.msg);
    cr_assert(cfg_store_plaintext(&c) && c.insecure_transport);
    cr_assert_eq(parse(ARGV("--rdzv-endpoint", "a:1", "--insecure-transport", "x"), env, &c, &err),
                 -EINVAL);
    cr_assert(strstr(err.msg, "without --user it means nothing"), "%s", err.msg);
    /* status and the daemon's store options: the same rule */
    char *st[] = {"status", "--rdzv-endpoint", "a:1", "--user", "root", NULL};
    cr_assert_eq(cfg_parse_cmd(CFG_STATUS, 5, st, env, &c, &err), -EINVAL);
    cr_assert(strstr(err.msg, "plaintext"), "%s", err.msg);
}

/* --password-fd: a pipe (read to its end), a memfd (read from its start) or a parent's hand-over
 * socket (its message peeked, again and again); the fd becomes close-on-exec. Not with
 * --password-file; not a closed fd. */
Test(config, password_from_a_file_descriptor)
{
    struct cfg c;
    struct ea_error err = {0};
    int p[2];
    cr_assert_eq(pipe(p), 0);
    cr_assert_eq(write(p[1], "piped-pw\n", 9), 9);
    close(p[1]);
    char num[16];
    snprintf(num, sizeof(num), "%d", p[0]);
    cr_assert_eq(parse(ARGV("--rdzv-endpoint", "a:1", "--user", "u", "--insecure-transport",
                            "--password-fd", num, "x"),
                       NULL, &c, &err),
                 0, "%s", err.msg);
    cr_assert_str_eq(c.password, "piped-pw");
    cr_assert_neq(fcntl(p[0], F_GETFD) & FD_CLOEXEC, 0, "no child inherits it");
    close(p[0]);
    cr_assert_eq(parse(ARGV("--rdzv-endpoint", "a:1", "--user", "u", "--insecure-transport",
                            "--password-fd", num, "x"),
                       NULL, &c, &err),
                 -EINVAL);
    cr_assert(strstr(err.msg, "is not open"), "%s", err.msg);

    cr_assert_eq(parse(ARGV("--rdzv-endpoint", "a:1", "--user", "u", "--insecure-transport",
                            "x"),
                       (char *[]){"ELASTIC_ETCD_PASSWORD=handed-pw", NULL}, &c, &err),
                 0, "%s", err.msg);
    int fd = -1;
    cr_assert_eq(cfg_password_socket(&c, &fd, &err), 0, "%s", err.msg);
    snprintf(num, sizeof(num), "%d", fd);
    for (int i = 0; i < 2; i++) { /* a daemon validates, then its agent reads: twice */
        struct cfg d;
        cr_assert_eq(parse(ARGV("--rdzv-endpoint", "a:1", "--user", "u", "--insecure-transport",
                                "--password-fd", num, "x"),
                           NULL, &d, &err),
                     0, "%s", err.msg);
        cr_assert_str_eq(d.password, "handed-pw");
    }
    close(fd);
    cr_assert_eq(parse(ARGV("--rdzv-endpoint", "a:1", "--user", "u", "--insecure-transport",
                            "--password-fd", "0", "--password-file", "/p", "x"),
                       NULL, &c, &err),
                 -EINVAL);
    cr_assert(strstr(err.msg, "give one of --password-fd and --password-file"), "%s", err.msg);
    cr_assert_eq(parse(ARGV("--password-fd", "0", "x"), NULL, &c, &err), -EINVAL);
    cr_assert(strstr(err.msg, "--password-fd needs --user"), "%s", err.msg);
}

/* Parsing this process's own environment takes the password out of it: the bytes where it lay
 * are overwritten (what /proc/<pid>/environ would show) and the variable is gone. */
Test(config, password_taken_out_of_the_process_environment)
{
    cr_assert_eq(setenv("ELASTIC_ETCD_PASSWORD", "scrub-me-77", 1), 0);
    char *where = getenv("ELASTIC_ETCD_PASSWORD");
    cr_assert_not_null(where);
    struct cfg c;
    struct ea_error err = {0};
    cr_assert_eq(parse(ARGV("--rdzv-endpoint", "a:1", "--user", "u", "--insecure-transport",
                            "x"),
                       environ, &c, &err),
                 0, "%s", err.msg);
    cr_assert_str_eq(c.password, "scrub-me-77");
    cr_assert_null(getenv("ELASTIC_ETCD_PASSWORD"));
    cr_assert_eq(where[0], '\0', "the bytes are overwritten where they lie");
    cr_assert_eq(memchr(where, 's', 11), NULL);
    /* without --user too: it never stays for a child */
    cr_assert_eq(setenv("ELASTIC_ETCD_PASSWORD", "unused-88", 1), 0);
    cr_assert_eq(parse(ARGV("x"), environ, &c, &err), 0, "%s", err.msg);
    cr_assert_null(getenv("ELASTIC_ETCD_PASSWORD"));
}

/* Issue 38: the fd a daemon or driver hands its new agent the password by cannot be opened
 * again through /proc. Until the new agent's prctl(PR_SET_DUMPABLE, 0) — after exec, the dynamic
 * loading, the constructors — any process of its uid may open /proc/<agent>/fd/N: a memfd or a
 * pipe opens and gives the password away; a socket does not open (ENXIO). Checked on this
 * process's own link (the same rule the kernel applies to the agent's). */
Test(config, password_handover_is_not_reopenable_through_proc)
{
    struct cfg c;
    struct ea_error err = {0};
    cr_assert_eq(parse(ARGV("--rdzv-endpoint", "a:1", "--user", "u", "--insecure-transport",
                            "x"),
                       (char *[]){"ELASTIC_ETCD_PASSWORD=race-pw", NULL}, &c, &err),
                 0, "%s", err.msg);
    int fd = -1;
    cr_assert_eq(cfg_password_socket(&c, &fd, &err), 0, "%s", err.msg);
    cr_assert_geq(fd, 3, "proc_spawn's keep_fd takes 3 and above");
    cr_assert_neq(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0, "only the one child it is kept for");
    char path[64], buf[64] = {0};
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), fd);
    int again = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    ssize_t n = again >= 0 ? read(again, buf, sizeof(buf) - 1) : -1;
    cr_assert_lt(again, 0, "%s opened again (read %zd bytes: '%s')", path, n, buf);
    cr_assert_eq(errno, ENXIO, "%s", strerror(errno));
    char num[16];
    snprintf(num, sizeof(num), "%d", fd);
    struct cfg d;
    cr_assert_eq(parse(ARGV("--rdzv-endpoint", "a:1", "--user", "u", "--insecure-transport",
                            "--password-fd", num, "x"),
                       NULL, &d, &err),
                 0, "%s", err.msg);
    cr_assert_str_eq(d.password, "race-pw", "its holder still reads it");
    close(fd);
}

/* A process of the agent's uid may attach to a fresh agent while it is dumpable (no Yama, or
 * ptrace_scope 0); the attachment outlives the agent's prctl, and the password read afterwards
 * would be in reach of the tracer. A hand-over is therefore not read under a tracer. */
Test(config, handed_password_is_not_read_under_a_tracer)
{
    struct cfg c;
    struct ea_error err = {0};
    cr_assert_eq(parse(ARGV("--rdzv-endpoint", "a:1", "--user", "u", "--insecure-transport",
                            "x"),
                       (char *[]){"ELASTIC_ETCD_PASSWORD=traced-pw", NULL}, &c, &err),
                 0, "%s", err.msg);
    int fd = -1;
    cr_assert_eq(cfg_password_socket(&c, &fd, &err), 0, "%s", err.msg);
    char num[16];
    snprintf(num, sizeof(num), "%d", fd);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) { /* traced by the test from here on */
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0)
            _exit(10);
        raise(SIGSTOP);
        struct cfg d;
        struct ea_error e = {0};
        int r = parse(ARGV("--rdzv-endpoint", "a:1", "--user", "u", "--insecure-transport",
                           "--password-fd", num, "x"),
                      NULL, &d, &e);
        if (r != -EPERM || !strstr(e.msg, "traces this one"))
            fprintf(stderr, "traced: %d %s\n", r, e.msg);
        _exit(r == -EPERM && strstr(e.msg, "traces this one") ? 0 : 1);
    }
    int st = 0;
    for (;;) {
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        if (!WIFSTOPPED(st))
            break;
        int sig = WSTOPSIG(st) == SIGSTOP || WSTOPSIG(st) == SIGTRAP ? 0 : WSTOPSIG(st);
        ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig);
    }
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 10, "PTRACE_TRACEME failed");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "a traced process read the handed-over password (status %d)", st);
    close(fd);
}
