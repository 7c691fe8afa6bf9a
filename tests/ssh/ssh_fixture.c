// SPDX-License-Identifier: Apache-2.0
/*
 * ssh_fixture: the suite `ssh` of the ssh-launcher tests (test_ssh_launcher.c,
 * test_ssh_connection.c): a real sshd on a loopback port (sshd_harness) and a scratch directory
 * per test, and the launcher helpers both files use.
 */
#include "ssh_fixture.h"

#include <criterion/criterion.h>
#include <pwd.h>
#include <stdio.h>
#include <unistd.h>

struct sshd_h sshd;
bool agent_guard; /* guard mode through the agent binary's own exec-guard subcommand */
char dir[64];

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

char *path_in(const char *name)
{
    static char buf[8][256];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, 256, "%s/%s", dir, name);
    return b;
}

/* sh = the POSIX-sh fallback; identity NULL = the harness's key. */
struct launcher *mk_full(bool sh, const char *identity, int parallel, struct ea_error *err,
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

struct launcher *mk(bool sh)
{
    struct ea_error err = {0};
    int r;
    struct launcher *l = mk_full(sh, NULL, 8, &err, &r);
    cr_assert_eq(r, 0, "create: %s", err.msg);
    return l;
}

const char *const base_env[] = {"PATH=/usr/bin:/bin", NULL};

struct launch_proc *start_spec(struct launcher *l, const struct launch_spec *spec)
{
    struct launch_proc *p = NULL;
    struct ea_error err = {0};
    int r = tl_start(l, spec, &p, &err, 60000); /* the connection, then the helper's P */
    cr_assert_eq(r, 0, "start '%s': %s", spec->argv[0], err.msg);
    return p;
}

struct launch_exit start_fails(struct launcher *l, const struct launch_spec *spec, int code)
{
    struct launch_proc *p = NULL;
    struct ea_error err = {0};
    cr_assert_eq(launch_start(l, spec, &p, &err), 0, "start() never waits: %s", err.msg);
    cr_assert_eq(launch_pid(l, p), 0, "not confirmed when start() returns");
    struct launch_exit e = wait_one(l, 60000);
    cr_assert_eq(e.proc, p);
    cr_assert_not_null(e.start_error, "exit %d signal %d", e.exit_code, e.term_signal);
    cr_assert_eq(e.exit_code, code, "%d: %s", e.exit_code, e.start_error);
    return e;
}

struct launch_proc *start(struct launcher *l, const char *const *argv)
{
    struct launch_spec spec = {.argv = argv,
                               .envp = base_env,
                               .cwd = dir,
                               .stdout_path = path_in("stdout")}; /* "ready <pid>" lines */
    return start_spec(l, &spec);
}

struct launch_exit wait_one(struct launcher *l, int timeout_ms)
{
    struct launch_exit e = {0};
    cr_assert_eq(tl_wait_exits(l, &e, 1, timeout_ms), 1, "no exit within %d ms", timeout_ms);
    return e;
}

/* The comm of pid's parent: "elastic-agent-g" under the guard, "sh" under the fallback. */
void parent_comm(pid_t pid, char *buf, size_t size)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)tl_ppid(pid));
    ssize_t n = tl_read_file(path, buf, size);
    buf[n > 0 ? n - 1 : 0] = '\0';
}
