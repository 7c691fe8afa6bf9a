// SPDX-License-Identifier: Apache-2.0
/*
 * exec-guard: the middleman between the agent and one worker (DESIGN.md §6), run as
 * `elastic-agent exec-guard [--report-fd N] [--watch-stdin] [--fence-fd N [--fence-grace-ms MS]]
 *  [--pass-fd N] -- CMD ARGS...`.
 *
 * The local launcher starts it as the leader of a new session with PR_SET_PDEATHSIG(SIGTERM).
 * The guard is a child subreaper and starts CMD (PATH looked up in its own environment, which is
 * the worker's) as the leader of a process group of its own inside that session. The launcher
 * signals that group directly, so a SIGKILL to the worker's group never kills the guard: it
 * stays to clean up what the worker left behind, including descendants that called setsid() and
 * were re-parented to it. It ends every descendant before it exits, with the worker's status.
 *
 * Signals are taken synchronously from a signalfd (tini's shape): SIGTERM/SIGINT/SIGHUP/SIGQUIT
 * sent to the guard itself are forwarded to the worker's group, unless the parent has gone
 * (the death signal), which kills everything; SIGCHLD wakes the reaping, which goes by pid
 * through our list of children so that the worker's zombie can be kept until the very end.
 * Exit codes of its own: 2 usage, 127/126 the worker could not be started (as a shell does).
 *
 * Fencing (--fence-fd): the fd is a shared memory page where the agent keeps, as a monotonic
 * millisecond deadline, how long its lease is surely valid (launch_fence()). The agent renews it
 * at every lease renewal; should the agent stop renewing while it cannot act on anything (frozen
 * by SIGSTOP, a paused VM, a swap storm), the guard stops the worker itself at the deadline:
 * SIGTERM to its group, SIGKILL after the fence grace. The others can declare this node dead
 * only once its lease has expired, so the worker never runs on in an abandoned generation.
 *
 * --pass-fd N: fd N (the worker's end of a warm spare's assignment socket, docs/warm.md) is the
 * one fd above 2 the worker inherits, at the same number; the guard closes its own copy as soon
 * as the worker started, so the agent sees the socket close when the worker is gone.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ea_loop.h"
#include "ea_signal.h"
#include "ea_time.h"
#include "launcher.h"
#include "proc.h"

#define GUARD_GRACE_MS 500         /* SIGTERM to leftovers, then SIGKILL this much later */
#define GUARD_KILL_RECHECK_MS 1000 /* safety net while killing: re-list children */
#define GUARD_MAX_KIDS 256

enum guard_phase {
    GUARD_RUN,   /* the worker runs */
    GUARD_DRAIN, /* the worker ended by itself: SIGTERM to what is left, until kill_at */
    GUARD_KILL,  /* SIGKILL to everything left (parent gone, worker SIGKILLed, grace over) */
};

struct guard {
    pid_t ppid;    /* parent at start; another one later means it died */
    pid_t wpid;    /* the worker, leader of the group we signal */
    bool wdone;    /* the worker has exited (it stays an unreaped zombie until we finish) */
    int wcode;     /* its exit code, or */
    int wsig;      /* the signal that killed it */
    bool children; /* children other than the worker are left */
    enum guard_phase phase;
    int64_t kill_at;
    int sigfd;
    int watch_fd;                 /* stdin while --watch-stdin and not at EOF, else -1 */
    const int64_t *fence;         /* the agent's deadline (0 = none yet), or NULL: no fencing */
    int64_t fence_grace_ms;
    pid_t termed[GUARD_MAX_KIDS]; /* leftovers already sent SIGTERM */
    size_t ntermed;
};

static void usage(void)
{
    fprintf(stderr, "usage: elastic-agent exec-guard [--report-fd N] [--watch-stdin] "
                    "[--fence-fd N [--fence-grace-ms MS]] [--pass-fd N] -- CMD [ARGS...]\n");
}

static int parse_num(const char *s, long max, long *ret)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < 0 || v > max)
        return -EINVAL;
    *ret = v;
    return 0;
}

struct guard_args {
    int report_fd, fence_fd, pass_fd;
    long fence_grace_ms;
    bool watch;
    char **cmd;
};

static int parse_args(int argc, char **argv, struct guard_args *a)
{
    int i = 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        long v;
        if (strcmp(argv[i], "--watch-stdin") == 0) {
            a->watch = true;
        } else if (strcmp(argv[i], "--report-fd") == 0 && i + 1 < argc) {
            if (parse_num(argv[++i], 1 << 20, &v) < 0)
                return -EINVAL;
            a->report_fd = (int)v;
        } else if (strcmp(argv[i], "--fence-fd") == 0 && i + 1 < argc) {
            if (parse_num(argv[++i], 1 << 20, &v) < 0 || v < 3)
                return -EINVAL;
            a->fence_fd = (int)v;
        } else if (strcmp(argv[i], "--pass-fd") == 0 && i + 1 < argc) {
            if (parse_num(argv[++i], 1 << 20, &v) < 0 || v < 3)
                return -EINVAL;
            a->pass_fd = (int)v;
        } else if (strcmp(argv[i], "--fence-grace-ms") == 0 && i + 1 < argc) {
            if (parse_num(argv[++i], 24L * 3600 * 1000, &a->fence_grace_ms) < 0)
                return -EINVAL;
        } else {
            return -EINVAL;
        }
    }
    if (i >= argc || strcmp(argv[i - 1], "--") != 0)
        return -EINVAL;
    a->cmd = argv + i;
    return 0;
}

/* Children of this (single-threaded) process, from /proc/self/task/<pid>/children, or from a
 * scan of /proc when the kernel lacks CONFIG_PROC_CHILDREN; zombies included. -1 without /proc. */
static ssize_t scan_proc(pid_t *out, size_t max)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    size_t n = 0;
    pid_t self = getpid();
    for (struct dirent *e; n < max && (e = readdir(d));) {
        char path[300], buf[512];
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t len = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (len <= 0)
            continue;
        buf[len] = '\0';
        const char *rp = strrchr(buf, ')'); /* comm may contain spaces and ')' */
        char state;
        int ppid;
        if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == self)
            out[n++] = (pid_t)atoi(e->d_name);
    }
    closedir(d);
    return (ssize_t)n;
}

static ssize_t list_children(pid_t *out, size_t max)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return scan_proc(out, max);
    size_t n = 0;
    long cur = 0;
    bool in_num = false;
    char buf[1024];
    ssize_t len;
    while (n < max && ((len = read(fd, buf, sizeof(buf))) > 0 || (len < 0 && errno == EINTR))) {
        for (ssize_t i = 0; i < len && n < max; i++) {
            if (buf[i] >= '0' && buf[i] <= '9') {
                cur = cur * 10 + (buf[i] - '0');
                in_num = true;
            } else if (in_num) {
                out[n++] = (pid_t)cur;
                cur = 0;
                in_num = false;
            }
        }
    }
    if (in_num && n < max)
        out[n++] = (pid_t)cur;
    close(fd);
    return (ssize_t)n;
}

static bool parent_gone(const struct guard *g)
{
    return getppid() != g->ppid;
}

static int64_t fence_deadline(const struct guard *g)
{
    return g->fence ? __atomic_load_n(g->fence, __ATOMIC_ACQUIRE) : 0;
}

/* The agent has not renewed its lease in time: stop the worker on our own (see the top). */
static void check_fence(struct guard *g)
{
    int64_t d = fence_deadline(g), now = ea_now_ms();
    if (g->phase != GUARD_RUN || d <= 0 || now < d)
        return;
    fprintf(stderr,
            "exec-guard: the agent has not renewed its lease for %lld ms past the deadline; "
            "stopping the worker (pid %d): this node is fenced out\n",
            (long long)(now - d), (int)g->wpid);
    g->phase = GUARD_DRAIN;
    g->kill_at = now + g->fence_grace_ms;
    kill(-g->wpid, SIGTERM);
}

static void begin_cleanup(struct guard *g, bool hard)
{
    if (hard) {
        g->phase = GUARD_KILL;
    } else if (g->phase == GUARD_RUN) {
        g->phase = GUARD_DRAIN;
        g->kill_at = ea_now_ms() + GUARD_GRACE_MS;
        kill(-g->wpid, SIGTERM);
    }
}

static void worker_ended(struct guard *g, int code, int sig)
{
    g->wdone = true;
    g->wcode = code;
    g->wsig = sig;
    /* a SIGKILLed worker means "now", not "after a grace" */
    begin_cleanup(g, sig == SIGKILL);
}

/* Without /proc: plain waitpid(-1) (the worker is reaped at once). */
static void reap_blind(struct guard *g)
{
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid <= 0) {
            g->children = pid == 0;
            return;
        }
        if (pid == g->wpid && !g->wdone)
            worker_ended(g, WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                         WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    }
}

/*
 * Reap what has exited, except the worker: its end is only noted (WNOWAIT), and its zombie stays
 * until everything else is gone. The zombie keeps the worker's pid, hence its process group id,
 * from being reused while the agent may still signal -wpid. Returns the children still running
 * (the worker excluded) in kids[].
 */
static size_t reap(struct guard *g, pid_t *kids)
{
    if (!g->wdone) {
        siginfo_t si;
        memset(&si, 0, sizeof(si));
        if (waitid(P_PID, (id_t)g->wpid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            si.si_pid == g->wpid)
            worker_ended(g, si.si_code == CLD_EXITED ? si.si_status : -1,
                         si.si_code == CLD_EXITED ? 0 : si.si_status);
    }
    ssize_t n = list_children(kids, GUARD_MAX_KIDS);
    if (n < 0) {
        reap_blind(g);
        return 0;
    }
    size_t left = 0;
    for (ssize_t i = 0; i < n; i++) {
        if (kids[i] == g->wpid)
            continue;
        pid_t r;
        while ((r = waitpid(kids[i], NULL, WNOHANG)) < 0 && errno == EINTR)
            ;
        if (r == 0) /* still ours and running: a zombie cannot be reused until we reap it */
            kids[left++] = kids[i];
    }
    g->children = left > 0 || n == GUARD_MAX_KIDS;
    return left;
}

static bool termed_already(struct guard *g, pid_t pid)
{
    for (size_t i = 0; i < g->ntermed; i++)
        if (g->termed[i] == pid)
            return true;
    if (g->ntermed < GUARD_MAX_KIDS)
        g->termed[g->ntermed++] = pid;
    return false;
}

/* After the worker: its group and every child we have (re-parented descendants, some of which
 * may have left the group with setsid) get SIGTERM once, or SIGKILL on every pass. */
static void signal_leftovers(struct guard *g, const pid_t *kids, size_t n)
{
    if (g->phase == GUARD_DRAIN && ea_now_ms() >= g->kill_at)
        g->phase = GUARD_KILL;
    if (g->phase == GUARD_RUN)
        return;
    if (g->phase == GUARD_KILL)
        kill(-g->wpid, SIGKILL);
    for (size_t i = 0; i < n; i++) {
        if (g->phase == GUARD_KILL)
            kill(kids[i], SIGKILL);
        else if (!termed_already(g, kids[i]))
            kill(kids[i], SIGTERM);
    }
}

static void on_signals(struct guard *g)
{
    struct signalfd_siginfo si;
    while (read(g->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGCHLD)
            continue; /* reap() runs on every pass */
        if (parent_gone(g))
            g->phase = GUARD_KILL; /* the death signal */
        else if (g->phase == GUARD_RUN)
            kill(-g->wpid, (int)si.ssi_signo);
    }
}

static void on_stdin(struct guard *g)
{
    char buf[512];
    ssize_t n = read(g->watch_fd, buf, sizeof(buf));
    if (n > 0 || (n < 0 && (errno == EINTR || errno == EAGAIN)))
        return;       /* input is ignored; only its end matters */
    g->watch_fd = -1; /* EOF or error: the connection (our lifeline) is gone */
    g->phase = GUARD_KILL;
}

/* Exit like the worker did: its code, or its fatal signal re-raised on ourselves. */
static int finish(const struct guard *g)
{
    while (waitpid(g->wpid, NULL, 0) < 0 && errno == EINTR)
        ; /* the last zombie: only now may its pid and group id be reused */
    if (!g->wsig)
        return g->wcode;
    int sig = g->wsig;
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core); /* the worker dumped its own core, if any */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigaction(sig, &sa, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    return 128 + sig; /* not reached for a fatal signal */
}

static void guard_loop(struct guard *g)
{
    pid_t kids[GUARD_MAX_KIDS];
    for (;;) {
        size_t n = reap(g, kids);
        if (g->phase != GUARD_KILL && parent_gone(g))
            g->phase = GUARD_KILL;
        check_fence(g);
        signal_leftovers(g, kids, n);
        if (g->wdone && !g->children)
            return;
        struct pollfd pfd[2] = {{.fd = g->sigfd, .events = POLLIN},
                                {.fd = g->watch_fd, .events = POLLIN}};
        int64_t fence = fence_deadline(g);
        int64_t until = g->phase == GUARD_DRAIN  ? g->kill_at
                        : g->phase == GUARD_KILL ? ea_now_ms() + GUARD_KILL_RECHECK_MS
                        : fence > 0              ? fence
                                                 : -1;
        int ready = ea_wait_fds(pfd, 2, until);
        if (ready < 0 && errno != EINTR)
            g->phase = GUARD_KILL; /* cannot wait for events: end it all */
        if (ready <= 0)
            continue;
        if (pfd[0].revents)
            on_signals(g);
        if (g->watch_fd >= 0 && pfd[1].revents)
            on_stdin(g);
    }
}

/* Start the worker; report its pid or why it could not start through report_fd. */
static int start_worker(struct guard *g, char **cmd, int report_fd, bool watch, int pass_fd)
{
    int devnull = -1;
    if (watch && (devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        proc_report_write(report_fd, PROC_REPORT_TARGET_SETUP, errno);
        return 127;
    }
    struct proc_spawn_opts o = {
        .argv = (const char *const *)cmd,
        .stdin_fd = devnull, /* stdin is the lifeline being watched */
        .stdout_fd = -1,
        .stderr_fd = -1,
        .flags = PROC_NEW_PGROUP | PROC_DEATHSIG | PROC_SEARCH_PATH | PROC_CLOSE_FDS,
        .deathsig = SIGKILL, /* should the guard itself be SIGKILLed */
        .report_fd = -1,
        .keep_fd = pass_fd, /* < 3: none */
    };
    struct ea_error err = {0};
    int r = proc_spawn(&o, &g->wpid, NULL, &err);
    if (devnull >= 0)
        close(devnull);
    if (pass_fd >= 0)
        close(pass_fd); /* the worker's now: its end closes when the worker is gone */
    if (r < 0) {
        if (report_fd >= 0)
            proc_report_write(report_fd, PROC_REPORT_TARGET_EXEC, -r);
        else
            fprintf(stderr, "exec-guard: %s\n", err.msg);
        return r == -ENOENT ? 127 : 126; /* the shell's convention */
    }
    if (report_fd >= 0) {
        proc_report_write(report_fd, PROC_REPORT_TARGET_PID, g->wpid);
        close(report_fd);
    }
    return 0;
}

int launch_guard_main(int argc, char **argv)
{
    /* First of all: the death signal was armed before our exec, so a parent that dies from
     * here on either kills us (SIGTERM still has its default action) or is seen as a change. */
    struct guard g = {.ppid = getppid(), .sigfd = -1, .watch_fd = -1};
    struct guard_args a = {.report_fd = -1, .fence_fd = -1, .pass_fd = -1,
                           .fence_grace_ms = GUARD_GRACE_MS};
    if (parse_args(argc, argv, &a) < 0 ||
        (a.pass_fd >= 0 && (a.pass_fd == a.report_fd || a.pass_fd == a.fence_fd ||
                            fcntl(a.pass_fd, F_SETFD, FD_CLOEXEC) < 0)) ||
        (a.report_fd >= 0 && fcntl(a.report_fd, F_SETFD, FD_CLOEXEC) < 0) ||
        (a.fence_fd >= 0 && fcntl(a.fence_fd, F_SETFD, FD_CLOEXEC) < 0)) {
        usage();
        if (a.report_fd >= 0)
            proc_report_write(a.report_fd, PROC_REPORT_TARGET_SETUP, EINVAL);
        return 2;
    }
    int report_fd = a.report_fd;
    g.fence_grace_ms = a.fence_grace_ms;
    if (a.fence_fd >= 0) {
        void *m = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, a.fence_fd, 0);
        close(a.fence_fd); /* the mapping stays */
        if (m == MAP_FAILED) {
            int e = errno;
            if (report_fd >= 0)
                proc_report_write(report_fd, PROC_REPORT_TARGET_SETUP, e);
            else
                fprintf(stderr, "exec-guard: cannot map the fence: %s\n", strerror(e));
            return 127;
        }
        g.fence = m;
    }
    struct sigaction ign;
    memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, NULL); /* a dead agent must not kill us through report_fd */
    sigset_t set;
    ea_term_sigset(&set);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL);
    g.sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (g.sigfd < 0 || prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
        int e = errno;
        if (report_fd >= 0)
            proc_report_write(report_fd, PROC_REPORT_TARGET_SETUP, e);
        else
            fprintf(stderr, "exec-guard: cannot set up: %s\n", strerror(e));
        if (g.sigfd >= 0)
            close(g.sigfd);
        return 127;
    }
    if (parent_gone(&g)) { /* nobody to work for: start nothing */
        close(g.sigfd);
        return 127;
    }
    int r = start_worker(&g, a.cmd, report_fd, a.watch, a.pass_fd);
    if (r) {
        close(g.sigfd);
        return r;
    }
    if (a.watch)
        g.watch_fd = STDIN_FILENO;
    guard_loop(&g);
    close(g.sigfd);
    return finish(&g);
}
