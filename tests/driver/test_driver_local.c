// SPDX-License-Identifier: Apache-2.0
/*
 * Driver mode end to end on this machine: one elastic-agent driver process, a child agent per
 * host ("localhost" and "127.0.0.1" both mean this machine: the local launcher), the file
 * backend, real workers (ea-testworker), real signals. Host lists from --hosts, a hostfile and a
 * discovery script that the test rewrites.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define W EA_HELPERS_DIR "/ea-testworker"

static char dir[256], state[300], envdir[300];

static void setup(void)
{
    h_suite_dirs("driver", dir, state, envdir);
}

static void teardown(void)
{
    h_kill_agents(); /* a driver SIGKILLed: its nodes get SIGTERM (PDEATHSIG) */
    h_rmdir(dir);
}

TestSuite(driver, .init = setup, .fini = teardown, .timeout = 90);

/* Start the driver with the common options, `extra` and the worker command `cmd`. */
static void start(struct h_agent *a, const char *const *extra, const char *const *cmd)
{
    const char *base[] = {"--state-dir",    state, "--run-id",    "drv", "--settle", "0.5",
                            "--stop-timeout", "2",   "--lease-ttl", "2", NULL};
    h_agent_start_argv(a, dir, "driver", base, extra, cmd);
}

static void write_file(const char *path, const char *text)
{
    char tmp[400];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    cr_assert_eq(rename(tmp, path), 0);
}

static void write_script(const char *path, const char *body)
{
    write_file(path, body);
    cr_assert_eq(chmod(path, 0755), 0);
}

/* Is there a log line containing `a` and `b` but not `not` (may be NULL)? */
static bool log_line_with_not(const struct h_agent *d, const char *a, const char *b,
                              const char * not )
{
    FILE *f = fopen(d->log, "r");
    if (!f)
        return false;
    char line[2048];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, a) && strstr(line, b) && !(not &&strstr(line, not ));
    fclose(f);
    return found;
}

/* Wait (inotify on the log) until log_line_with_not() holds; true if in time. */
static bool wait_line(const struct h_agent *d, const char *a, const char *b, const char * not,
                      int timeout_ms)
{
    int fd = inotify_init1(IN_CLOEXEC);
    cr_assert_geq(fd, 0);
    cr_assert_geq(inotify_add_watch(fd, d->log, IN_MODIFY), 0);
    int64_t end = h_now_ms() + timeout_ms;
    bool ok;
    while (!(ok = log_line_with_not(d, a, b, not )) && h_now_ms() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(end - h_now_ms())) > 0) {
            char buf[4096];
            if (read(fd, buf, sizeof(buf)) < 0)
                break;
        }
    }
    close(fd);
    if (!ok)
        h_show_log(d);
    return ok;
}

/* Ranks seen in env files of envdir: asserts each of 0..n-1 exactly once. */
static void expect_ranks(int n)
{
    int seen[64] = {0}, files = 0;
    DIR *dd = opendir(envdir);
    cr_assert_not_null(dd);
    for (struct dirent *e; (e = readdir(dd));) {
        if (strncmp(e->d_name, "env.", 4) != 0)
            continue;
        const char *p = h_fmt("%s/%s", envdir, e->d_name);
        int rank = atoi(h_env_value(p, "RANK"));
        cr_assert(rank >= 0 && rank < n, "rank %d", rank);
        seen[rank]++;
        cr_assert_eq(atoi(h_env_value(p, "WORLD_SIZE")), n);
        files++;
    }
    closedir(dd);
    cr_assert_eq(files, n);
    for (int r = 0; r < n; r++)
        cr_assert_eq(seen[r], 1, "rank %d seen %d times", r, seen[r]);
}

Test(driver, two_local_hosts_give_four_ranks)
{
    struct h_agent d;
    const char *extra[] = {"--hosts", "localhost:2,127.0.0.1:2", NULL};
    const char *cmd[] = {W, "record", envdir, NULL};
    start(&d, extra, cmd);
    h_expect_exit(&d, 0, 30000);
    expect_ranks(4);
    /* node ids come from the host names, and each child logs with its own */
    cr_assert(h_file_contains(d.log, "elastic-agent[localhost]"));
    cr_assert(h_file_contains(d.log, "elastic-agent[127.0.0.1]"));
    cr_assert(h_file_contains(d.log, "started node 'localhost' with 2 slot(s)"));
}

Test(driver, hostfile_with_default_slots)
{
    struct h_agent d;
    const char *hf = h_fmt("%s/hosts", dir);
    write_file(hf, "# two hosts\nlocalhost slots=1\n\n127.0.0.1   # slots from --nproc-per-node\n");
    const char *extra[] = {"--hostfile", hf, "--nproc-per-node", "3", NULL};
    const char *cmd[] = {W, "record", envdir, NULL};
    start(&d, extra, cmd);
    h_expect_exit(&d, 0, 30000);
    expect_ranks(4);
}

Test(driver, garbage_hostfile_is_a_clear_usage_error)
{
    struct h_agent d;
    const char *hf = h_fmt("%s/hosts", dir);
    write_file(hf, "localhost:1\n# fine\nnode2 slots=two\n");
    const char *extra[] = {"--hostfile", hf, NULL};
    const char *cmd[] = {W, "exit", "0", NULL};
    start(&d, extra, cmd);
    h_expect_exit(&d, 2, 10000);
    cr_assert(h_file_contains(d.log, h_fmt("%s:3: 'node2 slots=two': slots must be a whole "
                                           "number",
                                           hf)));
}

Test(driver, too_few_hosts_exit_4_at_once)
{
    struct h_agent d;
    const char *extra[] = {"--hosts", "localhost:1", "--min", "2", NULL};
    const char *cmd[] = {W, "exit", "0", NULL};
    start(&d, extra, cmd);
    h_expect_exit(&d, 4, 10000);
    cr_assert(h_file_contains(d.log, "1 host(s) listed but --min is 2"));
}

Test(driver, hanging_discovery_script_is_killed_and_reported)
{
    struct h_agent d;
    const char *script = h_fmt("%s/discover.sh", dir);
    write_script(script, h_fmt("#!/bin/sh\necho $$ > %s/script.pid\nexec %s hang\n", dir, W));
    const char *extra[] = {"--host-discovery-script", script, "--discovery-interval", "0.5", NULL};
    const char *cmd[] = {W, "exit", "0", NULL};
    int64_t t0 = h_now_ms();
    start(&d, extra, cmd);
    h_expect_exit(&d, 2, 15000);
    cr_assert_lt(h_now_ms() - t0, 10000);
    cr_assert(h_file_contains(d.log, "did not finish within 2.0 s: killed"));
    pid_t sp = h_read_pid(h_fmt("%s/script.pid", dir));
    cr_assert_gt(sp, 0);
    cr_assert(h_pid_gone(sp, 2000), "the hanging script survived");
}

Test(driver, garbage_discovery_output_at_start_is_a_usage_error)
{
    struct h_agent d;
    const char *script = h_fmt("%s/discover.sh", dir);
    write_script(script,
                 "#!/bin/sh\necho localhost:1\necho 'Traceback (most recent call last):'\n");
    const char *extra[] = {"--host-discovery-script", script, NULL};
    const char *cmd[] = {W, "exit", "0", NULL};
    start(&d, extra, cmd);
    h_expect_exit(&d, 2, 10000);
    cr_assert(h_file_contains(d.log, "line 2: 'Traceback (most recent call last):'"));
}

/* Workers that run until DIR/finish exists, each first writing its pid to DIR/pid.<RANK>.<gen>. */
static const char *long_worker(void)
{
    return h_fmt("echo $$ > %s/.t$$ && mv %s/.t$$ %s/pid.$RANK.$ELASTIC_GENERATION && "
                 "exec %s wait-file %s/finish",
                 envdir, envdir, envdir, W, dir);
}

Test(driver, discovery_adds_then_removes_a_host)
{
    struct h_agent d;
    const char *hosts = h_fmt("%s/hosts.txt", dir);
    const char *script = h_fmt("%s/discover.sh", dir);
    write_file(hosts, "localhost:1\n");
    write_script(script, h_fmt("#!/bin/sh\ncat %s\n", hosts));
    const char *extra[] = {"--host-discovery-script",
                           script,
                           "--discovery-interval",
                           "0.3",
                           "--min",
                           "1",
                           "--max",
                           "3",
                           NULL};
    const char *cmd[] = {"/bin/sh", "-c", long_worker(), NULL};
    start(&d, extra, cmd);
    cr_assert(h_log_wait(&d, "ranks 0-0 of world 1", 20000), "no first round");
    /* a host appears: admitted on the next round, the driver keeps running */
    write_file(hosts, "localhost:1\n127.0.0.1:2\n");
    cr_assert(h_log_wait(&d, "host '127.0.0.1': started node '127.0.0.1' with 2 slot(s)", 10000));
    cr_assert(wait_line(&d, "round 2 (generation", "of world 3", NULL, 15000), "no scale-up");
    /* garbage in between: reported, the list is kept */
    write_file(hosts, "localhost:1\n127.0.0.1:2\n!!garbage\n");
    cr_assert(h_log_wait(&d, "line 3: '!!garbage'", 5000));
    cr_assert(h_file_contains(d.log, "keeping the previous 2 host(s)"));
    /* the host vanishes: its node leaves, the rest go on at --min */
    write_file(hosts, "localhost:1\n");
    cr_assert(h_log_wait(&d, "host '127.0.0.1': no longer listed: stopping its node", 5000));
    cr_assert(wait_line(&d, "round 3 (generation", "of world 1", NULL, 15000), "no scale-down");
    cr_assert_not(h_file_contains(d.log, "driver exiting"), "the driver restarted or ended");
    write_file(h_fmt("%s/finish", dir), "");
    h_expect_exit(&d, 0, 15000);
}

Test(driver, failing_host_is_blacklisted_then_retried)
{
    struct h_agent d;
    /* the first worker to start fails once; every other one runs until `finish` exists */
    const char *sh = h_fmt("%s fail-once %s 3 || exit 3; %s", W, dir, long_worker());
    const char *extra[] = {
        "--hosts", "localhost:1,127.0.0.1:1", "--min", "1", "--max", "2", "--max-restarts",
        "3",       "--host-cooldown",         "1",     NULL};
    const char *cmd[] = {"/bin/sh", "-c", sh, NULL};
    start(&d, extra, cmd);
    cr_assert(h_log_wait(&d, "exited with 3: stopping its node", 20000), "no blame");
    cr_assert(
        h_log_wait(&d, "its workers failed; blacklisted for 1.0 s (failure 1 in a row)", 10000));
    cr_assert(h_log_wait(&d, "cooldown over, retrying", 5000));
    /* it comes back as a newcomer: a scale-up round (not charged) with both hosts again */
    cr_assert(wait_line(&d, "of world 2,", "scale events", "scale events 0", 15000));
    write_file(h_fmt("%s/finish", dir), "");
    h_expect_exit(&d, 0, 10000);
}

/* pids of the workers (pid.<rank>.<gen> files) */
static int worker_pids(pid_t *out, int max)
{
    int n = 0;
    DIR *dd = opendir(envdir);
    for (struct dirent *e; dd && (e = readdir(dd)) && n < max;)
        if (strncmp(e->d_name, "pid.", 4) == 0)
            out[n++] = h_read_pid(h_fmt("%s/%s", envdir, e->d_name));
    if (dd)
        closedir(dd);
    return n;
}

Test(driver, sigkill_of_the_driver_leaves_no_worker)
{
    struct h_agent d;
    const char *extra[] = {"--hosts", "localhost:2,127.0.0.1:2", NULL};
    const char *cmd[] = {"/bin/sh", "-c", long_worker(), NULL};
    start(&d, extra, cmd);
    cr_assert_eq(h_wait_files(envdir, "pid.", 4, 30000), 4);
    pid_t pids[8];
    cr_assert_eq(worker_pids(pids, 8), 4);
    h_agent_signal(&d, SIGKILL);
    int64_t t0 = h_now_ms();
    for (int i = 0; i < 4; i++) {
        cr_assert_gt(pids[i], 0);
        int left = (int)(t0 + 2000 - h_now_ms());
        cr_assert(h_pid_gone(pids[i], left > 0 ? left : 0),
                  "worker %d still alive 2 s after the driver's SIGKILL", (int)pids[i]);
    }
    /* and the nodes' agents (PR_SET_PDEATHSIG) */
    FILE *f = fopen(d.log, "r");
    cr_assert_not_null(f);
    char line[2048];
    int agents = 0;
    while (fgets(line, sizeof(line), f)) {
        const char *p = strstr(line, "slot(s) (pid ");
        if (!strstr(line, "started node") || !p)
            continue;
        pid_t pid = (pid_t)atoi(p + 13);
        cr_assert(h_pid_gone(pid, 2000), "node agent %d outlived the driver", (int)pid);
        agents++;
    }
    fclose(f);
    cr_assert_eq(agents, 2);
}

Test(driver, sigterm_stops_every_node_exit_143)
{
    struct h_agent d;
    const char *extra[] = {"--hosts", "localhost:1,127.0.0.1:1", NULL};
    const char *cmd[] = {"/bin/sh", "-c", long_worker(), NULL};
    start(&d, extra, cmd);
    cr_assert_eq(h_wait_files(envdir, "pid.", 2, 30000), 2);
    pid_t pids[8];
    cr_assert_eq(worker_pids(pids, 8), 2);
    h_agent_signal(&d, SIGTERM);
    h_expect_exit(&d, 143, 15000);
    for (int i = 0; i < 2; i++)
        cr_assert(h_pid_gone(pids[i], 1000));
    cr_assert(h_file_contains(d.log, "received SIGTERM: stopping every node"));
}

Test(driver, refuses_what_it_cannot_honour)
{
    static const struct {
        const char *a, *b, *msg;
    } cases[] = {
        {"--node-id", "x", "each host's node id is made from its name"},
        {"--nic-discovery", "on", "not available in driver mode"},
        {"--http", "127.0.0.1:9", "every host's node would serve it"},
        {"--standalone", NULL, "needs a shared store"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        struct h_agent d;
        const char *extra[] = {"--hosts", "localhost", cases[i].a, cases[i].b, NULL};
        const char *cmd[] = {W, "exit", "0", NULL};
        start(&d, extra, cmd);
        h_expect_exit(&d, 2, 10000);
        cr_assert(h_file_contains(d.log, cases[i].msg), "%s: no '%s'", cases[i].a, cases[i].msg);
    }
}
