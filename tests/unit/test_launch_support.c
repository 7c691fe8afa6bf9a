// SPDX-License-Identifier: Apache-2.0
/* test_launch_support: see the header. */
#include "test_launch_support.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ea_time.h"

int64_t tl_now_ms(void)
{
    return ea_now_ms();
}

void tl_mkdtemp(char *buf, size_t size)
{
    snprintf(buf, size, "/tmp/ea-launch-XXXXXX");
    cr_assert_not_null(mkdtemp(buf), "mkdtemp: %s", strerror(errno));
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void tl_rmrf(const char *dir)
{
    if (dir && dir[0])
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int tl_fifo(const char *path, int *ret_keep_fd)
{
    cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo %s: %s", path, strerror(errno));
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    cr_assert_geq(fd, 0);
    *ret_keep_fd = open(path, O_WRONLY | O_CLOEXEC);
    cr_assert_geq(*ret_keep_fd, 0);
    return fd;
}

int tl_read_ready(int fd, pid_t *pids, int n, int timeout_ms)
{
    int64_t deadline = ea_now_ms() + timeout_ms;
    char buf[1024];
    size_t len = 0;
    int got = 0;
    while (got < n) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int t = ea_timeout_until(deadline);
        if (t == 0 || poll(&pfd, 1, t) <= 0)
            break;
        ssize_t r = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (r <= 0)
            break; /* cannot happen while the test keeps its own writer open */
        len += (size_t)r;
        buf[len] = '\0';
        char *nl;
        while (got < n && (nl = strchr(buf, '\n'))) {
            *nl = '\0';
            int pid;
            if (sscanf(buf, "ready %d", &pid) == 1)
                pids[got++] = pid;
            len -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, len + 1);
        }
    }
    return got;
}

int tl_pidfd(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

bool tl_pidfds_gone(const int *fds, int n, int timeout_ms)
{
    int64_t deadline = ea_now_ms() + timeout_ms;
    for (int i = 0; i < n; i++) {
        if (fds[i] < 0)
            continue;
        struct pollfd pfd = {.fd = fds[i], .events = POLLIN};
        int r;
        while ((r = poll(&pfd, 1, ea_timeout_until(deadline))) < 0 && errno == EINTR)
            ;
        if (r <= 0)
            return false;
    }
    return true;
}

bool tl_pid_gone(pid_t pid, int timeout_ms)
{
    int fd = tl_pidfd(pid);
    if (fd < 0)
        return errno == ESRCH;
    bool gone = tl_pidfds_gone(&fd, 1, timeout_ms);
    close(fd);
    return gone;
}

bool tl_no_such_pid(pid_t pid)
{
    return kill(pid, 0) < 0 && errno == ESRCH;
}

ssize_t tl_read_file(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    ssize_t r;
    while (len + 1 < size && (r = read(fd, buf + len, size - 1 - len)) > 0)
        len += (size_t)r;
    close(fd);
    buf[len] = '\0';
    return (ssize_t)len;
}

pid_t tl_ppid(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (tl_read_file(path, buf, sizeof(buf)) <= 0)
        return -1;
    const char *rp = strrchr(buf, ')');
    char state;
    int ppid;
    if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2)
        return -1;
    return ppid;
}

pid_t tl_read_pid(const char *path)
{
    char buf[64];
    if (tl_read_file(path, buf, sizeof(buf)) <= 0)
        return -1;
    return (pid_t)atoi(buf);
}

int tl_child_count(void)
{
    char path[64], buf[4096];
    snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
    if (tl_read_file(path, buf, sizeof(buf)) < 0)
        return -1;
    int n = 0;
    for (char *tok = strtok(buf, " \n"); tok; tok = strtok(NULL, " \n"))
        n++;
    return n;
}

/* Exits dispatched while tl_start waited for a confirmation: tl_wait_exits hands them out first. */
static struct launch_exit stash[64];
static size_t nstash;

int tl_start(struct launcher *l, const struct launch_spec *spec, struct launch_proc **ret,
             struct ea_error *err, int timeout_ms)
{
    struct launch_proc *p = NULL;
    int r = launch_start(l, spec, &p, err);
    if (r < 0)
        return r;
    *ret = p;
    int64_t deadline = ea_now_ms() + timeout_ms;
    while (launch_pid(l, p) == 0) {
        for (size_t i = 0; i < nstash; i++)
            if (stash[i].proc == p)
                return stash[i].start_error ? 1 : 0; /* ended (never started, or at once) */
        struct pollfd pfd = {.fd = launcher_fd(l), .events = POLLIN};
        int t = ea_timeout_until(deadline);
        if (t == 0)
            return -ETIMEDOUT;
        if (poll(&pfd, 1, t) <= 0)
            continue;
        struct launch_exit *ex = NULL;
        size_t n = 0;
        cr_assert_eq(launcher_dispatch(l, &ex, &n, err), 0, "dispatch: %s", err ? err->msg : "");
        for (size_t i = 0; i < n; i++) {
            cr_assert_lt(nstash, sizeof(stash) / sizeof(*stash));
            stash[nstash++] = ex[i];
        }
        free(ex);
    }
    return 0;
}

size_t tl_wait_exits(struct launcher *l, struct launch_exit *out, size_t want, int timeout_ms)
{
    int64_t deadline = ea_now_ms() + timeout_ms;
    size_t got = 0;
    while (got < want && nstash > 0) {
        out[got++] = stash[0];
        memmove(stash, stash + 1, --nstash * sizeof(*stash));
    }
    while (got < want) {
        struct pollfd pfd = {.fd = launcher_fd(l), .events = POLLIN};
        int t = ea_timeout_until(deadline);
        if (t == 0)
            break;
        if (poll(&pfd, 1, t) <= 0)
            continue;
        struct launch_exit *ex = NULL;
        size_t n = 0;
        struct ea_error err = {0};
        cr_assert_eq(launcher_dispatch(l, &ex, &n, &err), 0, "dispatch: %s", err.msg);
        for (size_t i = 0; i < n && got < want; i++)
            out[got++] = ex[i];
        free(ex);
    }
    return got;
}

const struct launch_exit *tl_find_exit(const struct launch_exit *ex, size_t n,
                                       const struct launch_proc *p)
{
    for (size_t i = 0; i < n; i++)
        if (ex[i].proc == p)
            return &ex[i];
    return NULL;
}

struct launcher *tl_launcher(void)
{
    struct launcher_config cfg = {.name = "local", .guard_path = TG};
    struct launcher *l = NULL;
    struct ea_error err = {0};
    cr_assert_eq(launcher_create(&cfg, &l, &err), 0, "create: %s", err.msg);
    return l;
}
