// SPDX-License-Identifier: Apache-2.0
/*
 * ea-testworker: one multi-mode worker for the tests (STYLE 14). Every mode blocks on events
 * (signals, pipes, inotify), never on sleeps. Modes:
 *   exit N                  exit with N
 *   signal N                die by signal N (reset to the default action first)
 *   record DIR [N]          write DIR/env.<RANK or pid>.<pid>: the environment, one KEY=VALUE a
 *                           line (temp file + rename), then exit N (default 0)
 *   fail-once DIR N         exit N if DIR/failed.marker could be created, else `record DIR 0`
 *   hang                    print "ready <pid>", block until a signal ends it
 *   ignore-term             ignore SIGTERM, print "ready <pid>", block forever
 *   orphan PIDFILE          fork a grandchild (ignores SIGHUP, writes its pid to PIDFILE
 *                           atomically, blocks forever); exit 0 once PIDFILE exists
 *   orphan-setsid PIDFILE   the same, the grandchild calls setsid() first
 *   escape PIDFILE          a double-forked setsid() grandchild as in orphan-setsid (its pid in
 *                           PIDFILE); once it is set up, SIGKILL the parent (the exec-guard)
 *                           and block until a signal (the guard's death signal) ends it
 *   escape-all PIDFILE [N]  the same grandchild leaves the agent too: it stops the agent (the
 *                           guard's parent: no cleanup) and, with N = 2, the agent's parent (a
 *                           daemon), SIGKILLs the guard, then those, and is re-parented past
 *                           them all; then blocks forever
 *   errorfile MSG N         write torch's error-file JSON to $TORCHELASTIC_ERROR_FILE, exit N
 *   echo-lines K            "line 1".."line K" on stdout, "eline 1".."eline K" on stderr
 *   wait-file PATH [N]      block until PATH exists (inotify on its directory), exit N
 *   chaos DIR GOFILE        evidence for tests/chaos: write DIR/w.<pid>.<t0> (a "start" line:
 *                           generation, round, rank, world, node, pid, CLOCK_MONOTONIC ns;
 *                           temp file + rename), block until GOFILE exists (exit 0) or a
 *                           SIGTERM/SIGINT/SIGHUP (exit 128+sig), appending one "stop" line
 *   warm DIR [GOFILE]       a warm spare (--warm-workers) through include/elastic_agent_assign.h:
 *                           with ELASTIC_ASSIGN_FD, write DIR/parked.<pid> (its environment),
 *                           then wait for the assignment (its error on stderr, exit 3); beat
 *                           once ($ELASTIC_HEARTBEAT_FILE) and `record DIR`; then wait for
 *                           GOFILE when given. Without ELASTIC_ASSIGN_FD: the same, cold
 *   warm-bad DIR [LEN]      with ELASTIC_ASSIGN_FD: a malformed line on it (LEN bytes 'x' and no
 *                           newline when given), then block reading it (exit 4 at its end);
 *                           without: `record DIR`
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "elastic_agent_assign.h"

extern char **environ;

static int die(const char *what)
{
    fprintf(stderr, "ea-testworker: %s: %s\n", what, strerror(errno));
    return 120;
}

static int num(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || end == s) {
        fprintf(stderr, "ea-testworker: not a number: '%s'\n", s);
        exit(2);
    }
    return (int)v;
}

/* Write `len` bytes to `path` through a temp name in the same directory and rename(2). The temp
 * name is hidden (".tmp.<name>.<pid>") so a reader scanning for "<name>" never sees it. */
static int write_atomic(const char *path, const char *data, size_t len)
{
    char tmp[PATH_MAX];
    const char *slash = strrchr(path, '/');
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    snprintf(tmp, sizeof(tmp), "%.*s.tmp.%s.%d", dirlen, path, path + dirlen, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    for (size_t off = 0; off < len;) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            close(fd);
            unlink(tmp);
            return -1;
        }
        off += (size_t)n;
    }
    if (close(fd) < 0 || rename(tmp, path) < 0)
        return -1;
    return 0;
}

static void block_forever(void)
{
    for (;;)
        pause();
}

static int ready_then_block(void)
{
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    block_forever();
    return 0;
}

static int record_as(const char *dir, const char *prefix, int code)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (char **e = environ; buf && *e; e++) {
        size_t n = strlen(*e);
        while (buf && len + n + 2 > cap) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger)
                free(buf);
            buf = bigger;
        }
        if (!buf)
            break;
        memcpy(buf + len, *e, n);
        len += n;
        buf[len++] = '\n';
    }
    if (!buf)
        return die("out of memory");
    const char *rank = getenv("RANK");
    char path[PATH_MAX];
    if (strcmp(prefix, "env") != 0)
        snprintf(path, sizeof(path), "%s/%s.%d", dir, prefix, (int)getpid());
    else if (rank)
        snprintf(path, sizeof(path), "%s/env.%s.%d", dir, rank, (int)getpid());
    else
        snprintf(path, sizeof(path), "%s/env.%d.%d", dir, (int)getpid(), (int)getpid());
    int r = write_atomic(path, buf, len);
    free(buf);
    return r < 0 ? die(path) : code;
}

static int do_record(const char *dir, int code)
{
    return record_as(dir, "env", code);
}

static int do_fail_once(const char *dir, int code)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/failed.marker", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
        close(fd);
        return code;
    }
    if (errno != EEXIST)
        return die(path);
    return do_record(dir, 0);
}

/* Fork a process that writes its pid to `pidfile` and closes `ready_fd` (its copy; the caller
 * closes its own), then blocks forever. 0 in the caller, -1 when fork fails. */
static int fork_grandchild(const char *pidfile, int ready_fd)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        signal(SIGHUP, SIG_IGN);
        char buf[32];
        int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
        if (write_atomic(pidfile, buf, (size_t)n) < 0)
            _exit(die(pidfile));
        close(ready_fd);
        block_forever();
    }
    close(ready_fd);
    return 0;
}

/* The grandchild tells its parent it is set up by closing the pipe: no polling for the file. */
static int do_orphan(const char *pidfile, int new_session)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return die("pipe");
    pid_t pid = fork();
    if (pid < 0)
        return die("fork");
    if (pid == 0) {
        close(p[0]);
        signal(SIGHUP, SIG_IGN);
        if (new_session && setsid() < 0)
            _exit(die("setsid"));
        char buf[32];
        int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
        if (write_atomic(pidfile, buf, (size_t)n) < 0)
            _exit(die(pidfile));
        close(p[1]);
        block_forever();
    }
    close(p[1]);
    char c;
    while (read(p[0], &c, 1) < 0 && errno == EINTR)
        ;
    close(p[0]);
    return access(pidfile, F_OK) == 0 ? 0 : 121;
}

static pid_t ppid_of(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    char state;
    int ppid;
    return rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 ? (pid_t)ppid : -1;
}

/* escape-all: the grandchild, once set up, takes the guard and `levels` ancestors above it
 * (the agent, the daemon) out of its way. */
static int do_escape_all(const char *pidfile, int levels)
{
    pid_t guard = getppid(), up[2] = {-1, -1};
    if (levels < 1 || levels > 2)
        return 2;
    for (int i = 0; i < levels; i++)
        if ((up[i] = ppid_of(i ? up[i - 1] : guard)) <= 1)
            return die("an ancestor's pid");
    pid_t pid = fork();
    if (pid < 0)
        return die("fork");
    if (pid == 0) { /* the middle child */
        if (setsid() < 0)
            _exit(die("setsid"));
        pid_t e = fork();
        if (e != 0)
            _exit(e < 0 ? die("fork") : 0);
        char buf[32]; /* its pid first: what it does next may end it at once */
        int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
        if (write_atomic(pidfile, buf, (size_t)n) < 0)
            _exit(die(pidfile));
        /* the grandchild: stopped, an ancestor cannot kill it when it comes there */
        for (int i = levels; i-- > 0;)
            if (kill(up[i], SIGSTOP) < 0)
                _exit(die("kill"));
        if (kill(guard, SIGKILL) < 0)
            _exit(die("kill"));
        for (int i = 0; i < levels; i++)
            if (kill(up[i], SIGKILL) < 0)
                _exit(die("kill"));
        block_forever();
    }
    block_forever(); /* until the guard's death signal */
    return 0;
}

/* Issue 38's escape: what a hostile worker does to leave its guard's reach. */
static int do_escape(const char *pidfile)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return die("pipe");
    pid_t pid = fork();
    if (pid < 0)
        return die("fork");
    if (pid == 0) { /* the middle child: setsid, fork the grandchild, exit */
        close(p[0]);
        if (setsid() < 0 || fork_grandchild(pidfile, p[1]) < 0)
            _exit(die("setsid/fork"));
        _exit(0);
    }
    close(p[1]);
    char c;
    while (read(p[0], &c, 1) < 0 && errno == EINTR)
        ;
    close(p[0]);
    if (access(pidfile, F_OK) != 0)
        return 121;
    kill(getppid(), SIGKILL);
    return ready_then_block();
}

/* JSON string body of s (quotes, backslashes, control characters escaped). */
static void json_str(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

static int do_errorfile(const char *msg, int code)
{
    const char *path = getenv("TORCHELASTIC_ERROR_FILE");
    if (!path) {
        fprintf(stderr, "ea-testworker: TORCHELASTIC_ERROR_FILE is not set\n");
        return code;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return die("open_memstream");
    fputs("{\"message\": {\"message\": \"RuntimeError: ", f);
    json_str(f, msg);
    fputs("\", \"extraInfo\": {\"py_callstack\": \"", f);
    json_str(f, "Traceback (most recent call last):\n  File \"ea-testworker\", line 1, in "
                "<module>\nRuntimeError: ");
    json_str(f, msg);
    fprintf(f, "\\n\", \"timestamp\": \"%lld\"}}}\n", (long long)time(NULL));
    fclose(f);
    int r = write_atomic(path, buf, len);
    free(buf);
    return r < 0 ? die(path) : code;
}

static int do_echo_lines(int k)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i <= k; i++) {
        printf("line %d\n", i);
        fprintf(stderr, "eline %d\n", i);
    }
    return 0;
}

static int do_wait_file(const char *path, int code)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int fd = inotify_init1(IN_CLOEXEC);
    if (fd < 0)
        return die("inotify_init1");
    if (inotify_add_watch(fd, dir, IN_CREATE | IN_MOVED_TO | IN_ATTRIB) < 0)
        return die(dir);
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    while (access(path, F_OK) < 0) { /* checked after the watch exists: no lost wake-up */
        if (read(fd, buf, sizeof(buf)) < 0 && errno != EINTR)
            return die("inotify read");
    }
    close(fd);
    return code;
}

static int do_warm(const char *dir, const char *gofile)
{
    if (getenv("ELASTIC_ASSIGN_FD")) {
        int r = record_as(dir, "parked", 0);
        if (r)
            return r;
        char err[256];
        if (ea_assign_wait(err, sizeof(err)) < 0) {
            fprintf(stderr, "ea-testworker: %s\n", err);
            return 3;
        }
    }
    const char *hb = getenv("ELASTIC_HEARTBEAT_FILE");
    int fd = hb ? open(hb, O_WRONLY | O_CREAT | O_CLOEXEC, 0644) : -1;
    if (fd >= 0)
        close(fd);
    int r = do_record(dir, 0);
    return r || !gofile ? r : do_wait_file(gofile, 0);
}

static int do_warm_bad(const char *dir, int len)
{
    const char *v = getenv("ELASTIC_ASSIGN_FD");
    if (!v)
        return do_record(dir, 0);
    int fd = num(v);
    static const char bad[] = "hello, agent\n";
    char *buf = len > 0 ? malloc((size_t)len) : NULL;
    if (buf)
        memset(buf, 'x', (size_t)len);
    if (write(fd, buf ? buf : bad, buf ? (size_t)len : sizeof(bad) - 1) < 0)
        return die("write");
    free(buf);
    char c;
    for (ssize_t n; (n = read(fd, &c, 1)) != 0;)
        if (n < 0 && errno != EINTR)
            break;
    return 4;
}

static long long clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

/* Append one line with a single write(2) on an O_APPEND descriptor: never interleaved. */
static void append_line(const char *path, const char *line)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = write(fd, line, strlen(line));
    (void)n;
    close(fd);
}

static int do_chaos(const char *dir, const char *gofile)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    char gdir[PATH_MAX];
    snprintf(gdir, sizeof(gdir), "%s", gofile);
    char *slash = strrchr(gdir, '/');
    if (slash)
        *slash = '\0';
    int ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (sfd < 0 || ifd < 0 ||
        inotify_add_watch(ifd, slash ? gdir : ".", IN_CREATE | IN_MOVED_TO) < 0)
        return die("signalfd/inotify");
    char path[PATH_MAX], line[512];
    long long t0 = clock_ns(CLOCK_MONOTONIC); /* in the name too: pids are reused */
    snprintf(path, sizeof(path), "%s/w.%d.%lld", dir, (int)getpid(), t0);
    int n = snprintf(line, sizeof(line),
                     "start gen=%s round=%s rank=%s world=%s local=%s node=%s pid=%d ppid=%d "
                     "mono_ns=%lld real_ns=%lld\n",
                     env_or("ELASTIC_GENERATION", "-1"), env_or("ELASTIC_ROUND", "-1"),
                     env_or("RANK", "-1"), env_or("WORLD_SIZE", "-1"), env_or("LOCAL_RANK", "-1"),
                     env_or("ELASTIC_NODE_ID", "?"), (int)getpid(), (int)getppid(), t0,
                     clock_ns(CLOCK_REALTIME));
    if (write_atomic(path, line, (size_t)n) < 0)
        return die(path);
    int code = -1;
    while (code < 0) {
        if (access(gofile, F_OK) == 0) {
            code = 0;
            break;
        }
        struct pollfd p[2] = {{.fd = sfd, .events = POLLIN}, {.fd = ifd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            return die("poll");
        struct signalfd_siginfo si;
        if ((p[0].revents & POLLIN) && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
            code = 128 + (int)si.ssi_signo;
        char buf[4096];
        while (read(ifd, buf, sizeof(buf)) > 0)
            ;
    }
    snprintf(line, sizeof(line), "stop code=%d mono_ns=%lld real_ns=%lld\n", code,
             clock_ns(CLOCK_MONOTONIC), clock_ns(CLOCK_REALTIME));
    append_line(path, line);
    return code;
}

static int do_signal(int sig)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigaction(sig, &sa, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
    return 128 + sig;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "exit") == 0 && argc == 3)
        return num(argv[2]);
    if (strcmp(mode, "signal") == 0 && argc == 3)
        return do_signal(num(argv[2]));
    if (strcmp(mode, "record") == 0 && (argc == 3 || argc == 4))
        return do_record(argv[2], argc == 4 ? num(argv[3]) : 0);
    if (strcmp(mode, "fail-once") == 0 && argc == 4)
        return do_fail_once(argv[2], num(argv[3]));
    if (strcmp(mode, "hang") == 0 && argc == 2)
        return ready_then_block();
    if (strcmp(mode, "ignore-term") == 0 && argc == 2) {
        signal(SIGTERM, SIG_IGN);
        return ready_then_block();
    }
    if (strcmp(mode, "orphan") == 0 && argc == 3)
        return do_orphan(argv[2], 0);
    if (strcmp(mode, "orphan-setsid") == 0 && argc == 3)
        return do_orphan(argv[2], 1);
    if (strcmp(mode, "escape") == 0 && argc == 3)
        return do_escape(argv[2]);
    if (strcmp(mode, "escape-all") == 0 && (argc == 3 || argc == 4))
        return do_escape_all(argv[2], argc == 4 ? num(argv[3]) : 1);
    if (strcmp(mode, "errorfile") == 0 && argc == 4)
        return do_errorfile(argv[2], num(argv[3]));
    if (strcmp(mode, "echo-lines") == 0 && argc == 3)
        return do_echo_lines(num(argv[2]));
    if (strcmp(mode, "wait-file") == 0 && (argc == 3 || argc == 4))
        return do_wait_file(argv[2], argc == 4 ? num(argv[3]) : 0);
    if (strcmp(mode, "chaos") == 0 && argc == 4)
        return do_chaos(argv[2], argv[3]);
    if (strcmp(mode, "warm") == 0 && (argc == 3 || argc == 4))
        return do_warm(argv[2], argc == 4 ? argv[3] : NULL);
    if (strcmp(mode, "warm-bad") == 0 && (argc == 3 || argc == 4))
        return do_warm_bad(argv[2], argc == 4 ? num(argv[3]) : 0);
    fprintf(stderr, "usage: ea-testworker exit N | signal N | record DIR [N] | fail-once DIR N |"
                    " hang | ignore-term | orphan PIDFILE | orphan-setsid PIDFILE | escape PIDFILE |"
                    " escape-all PIDFILE [N] |"
                    " errorfile MSG N | echo-lines K | wait-file PATH [N] | chaos DIR GOFILE |"
                    " warm DIR [GOFILE] | warm-bad DIR [LEN]\n");
    return 2;
}
