// SPDX-License-Identifier: Apache-2.0
/* runcg: a cgroup v2 per run (see runcg.h). */
#include "runcg.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ea_loop.h"
#include "ea_time.h"

/* The cgroup2 mount point and its root from /proc/self/mountinfo, into mnt/root. */
static int cgroup2_mount(char *mnt, size_t mlen, char *root, size_t rlen)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -errno;
    char line[4096];
    int r = -ENOENT;
    while (r < 0 && fgets(line, sizeof(line), f)) {
        char rt[1024], mp[1024];
        const char *sep = strstr(line, " - ");
        if (!sep || strncmp(sep + 3, "cgroup2 ", 8) != 0 ||
            sscanf(line, "%*s %*s %*s %1023s %1023s", rt, mp) != 2)
            continue;
        snprintf(mnt, mlen, "%s", mp);
        snprintf(root, rlen, "%s", rt);
        r = 0;
    }
    fclose(f);
    return r;
}

int runcg_self(int *ret_fd, struct ea_error *err)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return ea_errorf(err, -errno, "/proc/self/cgroup: %s", strerror(errno));
    char line[4096], path[4096] = "";
    bool found = false;
    while (!found && fgets(line, sizeof(line), f))
        if (strncmp(line, "0::", 3) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(path, sizeof(path), "%s", line + 3);
            found = true;
        }
    fclose(f);
    char mnt[1024], root[1024];
    if (!found || cgroup2_mount(mnt, sizeof(mnt), root, sizeof(root)) < 0)
        return ea_errorf(err, -ENOENT, "no cgroup v2 here");
    size_t rl = strlen(root);
    const char *rel = path; /* PATH is below the mount's root (a cgroup namespace's view) */
    if (strcmp(root, "/") != 0 && strncmp(path, root, rl) == 0)
        rel = path + rl;
    char dir[8192];
    snprintf(dir, sizeof(dir), "%s/%s", mnt, rel[0] == '/' ? rel + 1 : rel);
    int fd = open(dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ea_errorf(err, -errno, "cgroup '%s': %s", dir, strerror(errno));
    *ret_fd = fd;
    return 0;
}

/* Whether a process can move itself into cgroup `fd` (a forked probe does, then exits): the
 * mkdir may succeed where a move is refused (a common ancestor's cgroup.procs not writable, a
 * parent with controllers and processes). 0 or -errno. */
static int probe_move(int fd)
{
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        int p = openat(fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
        _exit(p >= 0 && write(p, "0", 1) == 1 ? 0 : errno > 0 && errno < 256 ? errno : EIO);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -errno;
    return WIFEXITED(st) ? -WEXITSTATUS(st) : -EIO;
}

int runcg_create(int parent_fd, const char *name, int *ret_fd, struct ea_error *err)
{
    if (mkdirat(parent_fd, name, 0755) < 0 && errno == EEXIST) {
        runcg_kill(parent_fd, name, ea_now_ms() + 1000, NULL); /* a stale one of that name */
        mkdirat(parent_fd, name, 0755);
    }
    int fd = openat(parent_fd, name, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ea_errorf(err, -errno, "cgroup '%s': %s", name, strerror(errno));
    int r = probe_move(fd);
    if (r < 0) {
        close(fd);
        unlinkat(parent_fd, name, AT_REMOVEDIR);
        return ea_errorf(err, r, "cannot move a process into cgroup '%s': %s", name, strerror(-r));
    }
    *ret_fd = fd;
    return 0;
}

/* Whether cgroup `fd` still holds processes ("populated 1" in cgroup.events); false on error. */
static bool populated(int events_fd)
{
    char buf[256];
    ssize_t n = pread(events_fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return strstr(buf, "populated 1") != NULL;
}

/* Before cgroup.kill: SIGKILL every pid cgroup.procs lists; how many. */
static int kill_listed(int fd)
{
    int p = openat(fd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
    if (p < 0)
        return 0;
    FILE *f = fdopen(p, "r");
    if (!f) {
        close(p);
        return 0;
    }
    int n = 0;
    long pid;
    while (fscanf(f, "%ld", &pid) == 1)
        n += pid > 0 && kill((pid_t)pid, SIGKILL) == 0;
    fclose(f);
    return n;
}

int runcg_kill(int parent_fd, const char *name, int64_t deadline_ms, struct ea_error *err)
{
    int fd = openat(parent_fd, name, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ea_errorf(err, -errno, "cgroup '%s': %s", name, strerror(errno));
    int ev = openat(fd, "cgroup.events", O_RDONLY | O_CLOEXEC);
    int k = openat(fd, "cgroup.kill", O_WRONLY | O_CLOEXEC);
    bool killed = k >= 0 && write(k, "1", 1) == 1;
    if (k >= 0)
        close(k);
    while (ev >= 0 && populated(ev)) {
        if (!killed)
            kill_listed(fd); /* again on every pass: what forked meanwhile */
        int t = ea_timeout_until(deadline_ms);
        if (t == 0)
            break;
        struct pollfd p = {.fd = ev, .events = POLLPRI}; /* cgroup.events changed */
        ea_wait_fds(&p, 1, killed || t < 50 ? deadline_ms : ea_now_ms() + 50);
    }
    bool busy = ev >= 0 && populated(ev);
    if (ev >= 0)
        close(ev);
    close(fd);
    if (busy)
        return ea_errorf(err, -ETIMEDOUT, "cgroup '%s' still holds processes", name);
    if (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0)
        return ea_errorf(err, -errno, "removing cgroup '%s': %s", name, strerror(errno));
    return 0;
}

int runcg_reap_stale(int parent_fd, const char *prefix, int64_t deadline_ms)
{
    int dfd = openat(parent_fd, ".", O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return 0;
    }
    size_t pl = strlen(prefix);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, pl) != 0)
            continue;
        /* <prefix><anything>-<pid>-<n>: the pid is the next to last field */
        char *last = strrchr(e->d_name + pl, '-'), *end;
        const char *p = last;
        while (p && p > e->d_name + pl && p[-1] != '-')
            p--;
        long pid = p && p < last ? strtol(p, &end, 10) : 0;
        if (pid <= 0 || end != last || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* not ours, or its process still runs (it ends its own) */
        n += runcg_kill(parent_fd, e->d_name, deadline_ms, NULL) == 0;
    }
    closedir(d);
    return n;
}
