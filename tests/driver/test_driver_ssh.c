// SPDX-License-Identifier: Apache-2.0
/*
 * Driver mode over SSH, end to end: real sshd processes (tests/ssh/sshd_harness), the driver and
 * its child agents on this machine, workers started over one SSH connection per host. Two hosts
 * are two network namespaces (tests/netns/netns_harness), each with a veth link to the root
 * namespace, its own address and its own sshd; where the kernel refuses namespaces they are the
 * loopback addresses 127.0.0.2 and 127.0.0.3 with one sshd each (the link-down case is then
 * skipped). The file backend is shared: namespaces only separate the network.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../helpers/ea_ci.h"
#include "harness.h"
#include "netns_harness.h"
#include "sshd_harness.h"

#define W EA_HELPERS_DIR "/ea-testworker"

static char dir[256], state[300], envdir[300];
static struct sshd_h sshd[2];
static char addr[2][32];
static char port[16];
static bool in_netns;
static char ns[2][NETNS_NAME_MAX], ifname[] = "eth0";

static void setup(void)
{
    h_suite_dirs("driver-ssh", dir, state, envdir);
}

static void teardown(void)
{
    h_kill_agents();
    sshd_h_stop(&sshd[0]);
    sshd_h_stop(&sshd[1]);
    netns_cleanup();
    h_rmdir(dir);
}

TestSuite(driver_ssh, .init = setup, .fini = teardown, .timeout = 90);

static void skip_without_sshd(void)
{
    char why[256];
    if (!sshd_h_available(why, sizeof(why))) {
        if (ea_test_in_ci()) /* CI installs sshd: as test_ssh_launcher, fail there */
            cr_assert_fail("CI (CI=%s): sshd is required: %s", getenv("CI"), why);
        fprintf(stderr, "skipped: %s\n", why);
        cr_skip_test("%s", why);
    }
}

static void append_file(const char *to, const char *from)
{
    FILE *in = fopen(from, "r"), *out = fopen(to, "a");
    cr_assert(in && out);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
        fwrite(buf, 1, n, out);
    fclose(in);
    fclose(out);
}

/* A port free on both loopback addresses (fallback without namespaces). */
static int common_loopback_port(void)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        int a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000002)};
        socklen_t len = sizeof(sa);
        cr_assert_eq(bind(a, (struct sockaddr *)&sa, sizeof(sa)), 0);
        getsockname(a, (struct sockaddr *)&sa, &len);
        int b = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sa.sin_addr.s_addr = htonl(0x7f000003);
        bool ok = bind(b, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        close(a);
        close(b);
        if (ok)
            return ntohs(sa.sin_port);
    }
    cr_assert_fail("no common free port on 127.0.0.2 and 127.0.0.3");
    return -1;
}

/*
 * Two "hosts", each with its own sshd that also listens on one common port (--ssh-port is one
 * option for every host) and accepts the first sshd's user key.
 */
static void two_hosts(void)
{
    skip_without_sshd();
    /* EA_TEST_NO_NETNS=1 forces the loopback variant (to try it where namespaces work) */
    in_netns = netns_available(NULL, 0) && !getenv("EA_TEST_NO_NETNS");
    char extra[64];
    if (in_netns) {
        int x = 1 + (int)(getpid() % 250);
        for (int i = 0; i < 2; i++) {
            netns_ns_create(i ? "h1" : "h0", ns[i]);
            snprintf(addr[i], sizeof(addr[i]), "10.%d.%d.2", x, 231 + i);
            netns_veth_root(ns[i], ifname, h_fmt("%s/24", addr[i]),
                            h_fmt("10.%d.%d.1/24", x, 231 + i), NULL);
        }
        snprintf(port, sizeof(port), "2222"); /* free in a fresh namespace */
    } else {
        fprintf(stderr, "network namespaces unavailable: two loopback addresses instead\n");
        snprintf(addr[0], sizeof(addr[0]), "127.0.0.2");
        snprintf(addr[1], sizeof(addr[1]), "127.0.0.3");
        snprintf(port, sizeof(port), "%d", common_loopback_port());
    }
    snprintf(extra, sizeof(extra), "Port %s", port);
    for (int i = 0; i < 2; i++) {
        struct sshd_h_opts o = {
            .addr = addr[i], .netns = in_netns ? ns[i] : NULL, .extra_config = extra};
        sshd_h_start(&sshd[i], &o);
    }
    append_file(h_fmt("%s/authorized_keys", sshd[1].dir), h_fmt("%s/id.pub", sshd[0].dir));
}

/* On a failure: what the sshds said. */
static void show_sshd_logs(void)
{
    for (int i = 0; i < 2; i++) {
        if (!sshd[i].log[0])
            continue;
        FILE *f = fopen(sshd[i].log, "r");
        if (!f)
            continue;
        fprintf(stderr, "---- sshd %s (%s)\n", sshd[i].addr, sshd[i].log);
        char line[1024];
        while (fgets(line, sizeof(line), f))
            fputs(line, stderr);
        fclose(f);
    }
}

/* Start the driver: common options, the SSH options for two_hosts(), `extra`, the command. */
static void start(struct h_agent *a, const char *const *ssh, const char *const *extra,
                  const char *const *cmd)
{
    const char *args[80] = {"--state-dir",    state, "--run-id",    "drvssh", "--settle",   "0.5",
                            "--stop-timeout", "2",   "--lease-ttl", "2",      "--launcher", "ssh"};
    int n = 12;
    for (int i = 0; ssh && ssh[i]; i++)
        args[n++] = ssh[i];
    for (int i = 0; extra && extra[i]; i++)
        args[n++] = extra[i];
    args[n++] = "--";
    for (int i = 0; cmd[i]; i++)
        args[n++] = cmd[i];
    args[n] = NULL;
    h_agent_start(a, dir, "driver", args);
}

static const char *const *two_host_ssh_args(void)
{
    static const char *v[32];
    int n = 0;
    v[n++] = "--ssh-port";
    v[n++] = port;
    v[n++] = "--ssh-identity";
    v[n++] = sshd[0].identity;
    /* host keys are the harness's business; here both hosts' keys are not in one file */
    const char *opts[] = {"StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null",
                          "IdentitiesOnly=yes",       "LogLevel=ERROR",
                          "ConnectTimeout=3",         "ServerAliveInterval=1",
                          "ServerAliveCountMax=2"};
    for (size_t i = 0; i < sizeof(opts) / sizeof(*opts); i++) {
        v[n++] = "--ssh-option";
        v[n++] = opts[i];
    }
    v[n] = NULL;
    return v;
}

/* Workers: record the environment, write pid.<RANK>.<gen>, run until DIR/finish exists. */
static const char *long_worker(void)
{
    return h_fmt("%s record %s && readlink /proc/self/ns/net > %s/ns.$RANK && echo $$ > %s/.t$$ "
                 "&& mv %s/.t$$ %s/pid.$RANK.$ELASTIC_GENERATION && exec %s wait-file %s/finish",
                 W, envdir, envdir, envdir, envdir, envdir, W, dir);
}

static void finish(void)
{
    FILE *f = fopen(h_fmt("%s/finish", dir), "w");
    cr_assert_not_null(f);
    fclose(f);
}

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

/* env files: ranks 0..n-1 once each, all of WORLD_SIZE n. */
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
        if (rank >= 0 && rank < n)
            seen[rank]++;
        cr_expect(rank >= 0 && rank < n, "rank %d", rank);
        cr_expect_eq(atoi(h_env_value(p, "WORLD_SIZE")), n);
        files++;
    }
    closedir(dd);
    cr_assert_eq(files, n);
    for (int r = 0; r < n; r++)
        cr_assert_eq(seen[r], 1, "rank %d seen %d times", r, seen[r]);
}

/* How many of ranks 0..n-1 ran inside namespace `name` (their ns.<RANK> file names its inode). */
static int ranks_in_netns(int n, const char *name)
{
    struct stat st;
    cr_assert_eq(stat(h_fmt("/run/netns/%s", name), &st), 0);
    int k = 0;
    for (int r = 0; r < n; r++) {
        FILE *f = fopen(h_fmt("%s/ns.%d", envdir, r), "r");
        unsigned long ino = 0;
        if (f && fscanf(f, "net:[%lu]", &ino) == 1 && ino == (unsigned long)st.st_ino)
            k++;
        if (f)
            fclose(f);
    }
    return k;
}

Test(driver_ssh, loopback_sshd_two_local_names_four_ranks)
{
    skip_without_sshd();
    sshd_h_start(&sshd[0], NULL);
    struct h_agent d;
    const char *extra[] = {"--hosts", "127.0.0.1:2,localhost:2", NULL};
    const char *cmd[] = {W, "record", envdir, NULL};
    start(&d, sshd[0].agent_args, extra, cmd);
    h_expect_exit(&d, 0, 30000);
    expect_ranks(4);
    cr_assert_eq(sshd_h_accepted(&sshd[0]), 2, "one connection per host, not per slot");
}

Test(driver_ssh, two_hosts_by_four_slots_give_ranks_0_to_7)
{
    two_hosts();
    struct h_agent d;
    const char *hl = h_fmt("%s:4,%s:4", addr[0], addr[1]);
    const char *extra[] = {"--hosts", hl, NULL};
    const char *cmd[] = {"/bin/sh", "-c", long_worker(), NULL};
    int64_t t0 = h_now_ms();
    start(&d, two_host_ssh_args(), extra, cmd);
    if (h_wait_files(envdir, "pid.", 8, 30000) != 8) {
        h_show_log(&d);
        show_sshd_logs();
        cr_assert_fail("8 workers not running");
    }
    int64_t t1 = h_now_ms();
    fprintf(stderr,
            "driver_ssh: 2 hosts x 4 slots over ssh (%s): driver start -> 8 workers "
            "running in %lld ms; connections: %d and %d\n",
            in_netns ? "network namespaces" : "loopback addresses", (long long)(t1 - t0),
            sshd_h_accepted(&sshd[0]), sshd_h_accepted(&sshd[1]));
    expect_ranks(8);
    if (in_netns) { /* 4 workers in each host's namespace */
        cr_assert_eq(ranks_in_netns(8, ns[0]), 4);
        cr_assert_eq(ranks_in_netns(8, ns[1]), 4);
    }
    cr_assert_eq(sshd_h_accepted(&sshd[0]), 1, "one connection for 4 slots");
    cr_assert_eq(sshd_h_accepted(&sshd[1]), 1, "one connection for 4 slots");
    finish();
    h_expect_exit(&d, 0, 20000);
}

Test(driver_ssh, sigkill_of_the_driver_leaves_no_worker_on_any_host)
{
    two_hosts();
    struct h_agent d;
    const char *hl = h_fmt("%s:2,%s:2", addr[0], addr[1]);
    /* workers that ignore SIGTERM and a long --stop-timeout: only killing them at once (the
     * nodes see their driver gone) ends them within 2 s */
    const char *extra[] = {"--hosts", hl, "--stop-timeout", "30", NULL};
    const char *cmd[] = {"/bin/sh", "-c",
                         h_fmt("echo $$ > %s/.t$$ && mv %s/.t$$ %s/pid.$RANK.$ELASTIC_GENERATION "
                               "&& exec %s ignore-term",
                               envdir, envdir, envdir, W),
                         NULL};
    start(&d, two_host_ssh_args(), extra, cmd);
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
}

/* Is there a log line from byte `from` on containing `a` and `b`? */
static bool log_line_with(const struct h_agent *d, long from, const char *a, const char *b)
{
    FILE *f = fopen(d->log, "r");
    if (!f)
        return false;
    fseek(f, from, SEEK_SET);
    char line[2048];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, a) && strstr(line, b);
    fclose(f);
    return found;
}

/* Wait (inotify on the log) for a line with `a` and `b` from byte `from` on. */
static bool wait_line(const struct h_agent *d, long from, const char *a, const char *b,
                      int timeout_ms)
{
    int fd = inotify_init1(IN_CLOEXEC);
    cr_assert_geq(fd, 0);
    cr_assert_geq(inotify_add_watch(fd, d->log, IN_MODIFY), 0);
    int64_t end = h_now_ms() + timeout_ms;
    bool ok;
    while (!(ok = log_line_with(d, from, a, b)) && h_now_ms() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(end - h_now_ms())) > 0) {
            char buf[4096];
            if (read(fd, buf, sizeof(buf)) < 0)
                break;
        }
    }
    close(fd);
    if (!ok) {
        h_show_log(d);
        show_sshd_logs();
    }
    return ok;
}

/* The node of the cut host may sit in ssh connect timeouts (--ssh-option ConnectTimeout=3) before
 * it sees its SIGTERM: generous waits, and a longer limit than the suite's. */
Test(driver_ssh, link_down_node_leaves_the_rest_continue_at_min, .timeout = 150)
{
    two_hosts();
    if (!in_netns) {
        cr_assert(!ea_test_in_ci() || getenv("EA_TEST_NO_NETNS"),
                  "CI: network namespaces are required to take a host's link down");
        cr_skip_test("needs network namespaces to take a host's link down");
    }
    struct h_agent d;
    const char *hl = h_fmt("%s:1,%s:1", addr[0], addr[1]);
    const char *extra[] = {"--hosts",        hl,  "--min",           "1",  "--max", "2",
                           "--max-restarts", "3", "--host-cooldown", "60", NULL};
    const char *cmd[] = {"/bin/sh", "-c", long_worker(), NULL};
    start(&d, two_host_ssh_args(), extra, cmd);
    cr_assert(wait_line(&d, 0, "of world 2,", h_fmt("elastic-agent[%s]", addr[0]), 20000));
    cr_assert(wait_line(&d, 0, "of world 2,", h_fmt("elastic-agent[%s]", addr[1]), 10000));
    struct stat st;
    cr_assert_eq(stat(d.log, &st), 0);
    /* the cut host's worker: sshd there never notices the dead connection; the helper's fence
     * watchdog must end it once the agent's lease deadline (TTL 2 s) is no longer renewed */
    cr_assert_eq(h_wait_files(envdir, "pid.", 2, 10000), 2);
    pid_t pids[2], cut = -1;
    int np = worker_pids(pids, 2);
    struct stat nst;
    cr_assert_eq(stat(h_fmt("/run/netns/%s", ns[1]), &nst), 0);
    for (int i = 0; i < np; i++) {
        struct stat pst;
        if (pids[i] > 0 && stat(h_fmt("/proc/%d/ns/net", (int)pids[i]), &pst) == 0 &&
            pst.st_ino == nst.st_ino)
            cut = pids[i];
    }
    cr_assert_gt(cut, 0, "no worker found in the namespace of host %s", addr[1]);
    int64_t t0 = h_now_ms();
    netns_link_set(ns[1], ifname, false);
    cr_assert(h_pid_gone(cut, 10000), "the cut host's worker still runs 10 s after the cut");
    fprintf(stderr, "driver_ssh: link down -> the cut host's worker ended after %lld ms\n",
            (long long)(h_now_ms() - t0));
    cr_assert(h_log_wait(&d, h_fmt("host '%s': its workers failed; blacklisted", addr[1]), 40000),
              "the host with the dead link was not blamed");
    cr_assert(
        wait_line(&d, (long)st.st_size, "of world 1,", h_fmt("elastic-agent[%s]", addr[0]), 40000),
        "the rest did not go on at --min");
    fprintf(stderr, "driver_ssh: link down -> survivors running at --min after %lld ms\n",
            (long long)(h_now_ms() - t0));
    finish();
    h_expect_exit(&d, 0, 10000);
}

Test(driver_ssh, discovery_adds_a_host_scale_up_over_ssh)
{
    two_hosts();
    struct h_agent d;
    const char *hosts = h_fmt("%s/hosts.txt", dir);
    const char *script = h_fmt("%s/discover.sh", dir);
    FILE *f = fopen(hosts, "w");
    cr_assert_not_null(f);
    fprintf(f, "%s:4\n", addr[0]);
    fclose(f);
    f = fopen(script, "w");
    cr_assert_not_null(f);
    fprintf(f, "#!/bin/sh\ncat %s\n", hosts);
    fclose(f);
    cr_assert_eq(chmod(script, 0755), 0);
    const char *extra[] = {"--host-discovery-script",
                           script,
                           "--discovery-interval",
                           "0.3",
                           "--min",
                           "1",
                           "--max",
                           "2",
                           NULL};
    const char *cmd[] = {"/bin/sh", "-c", long_worker(), NULL};
    start(&d, two_host_ssh_args(), extra, cmd);
    cr_assert(wait_line(&d, 0, "of world 4,", h_fmt("elastic-agent[%s]", addr[0]), 20000));
    const char *tmp = h_fmt("%s.tmp", hosts);
    f = fopen(tmp, "w");
    cr_assert_not_null(f);
    fprintf(f, "%s:4\n%s:4\n", addr[0], addr[1]);
    fclose(f);
    cr_assert_eq(rename(tmp, hosts), 0);
    /* the driver keeps running; the new host's node is admitted at the next round */
    cr_assert(wait_line(&d, 0, "of world 8,", h_fmt("elastic-agent[%s]", addr[1]), 20000));
    cr_assert(wait_line(&d, 0, "of world 8,", h_fmt("elastic-agent[%s]", addr[0]), 10000));
    cr_assert_not(h_file_contains(d.log, "driver exiting"));
    /* "started" is logged once the starts are made: the connection is set up after (issue 37) */
    cr_assert(sshd_h_wait_accepted(&sshd[1], 1, 20000), "the new host was never connected to");
    cr_assert_eq(sshd_h_accepted(&sshd[1]), 1, "accepted %d", sshd_h_accepted(&sshd[1]));
    finish();
    h_expect_exit(&d, 0, 15000);
}
