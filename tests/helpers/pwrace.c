// SPDX-License-Identifier: Apache-2.0
/*
 * ea-pwrace NEEDLE OUTFILE: the attacker of issue 38 (docs/security.md, "Credentials and process
 * hygiene"), run by the tests as the agents' uid. It polls /proc/sys/kernel/ns_last_pid; every
 * new pid is watched for 2 s, and on every pass each watched process's /proc/<pid>/fd entry is
 * opened and read (a memfd, a file or a pipe opens while the process is dumpable: between a
 * fresh exec and the agent's prctl; a pipe is peeked with tee(2)), and so is
 * /proc/<pid>/environ. On SIGTERM it writes
 * "hits H pids P windows W agents A\n" to OUTFILE: H reads that held NEEDLE, P new pids seen,
 * W processes whose fd directory it could list (caught while dumpable), A of those named
 * elastic-agent. Busy by design (the race is milliseconds); it never sleeps.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WATCH_MAX 512
#define WATCH_MS 2000

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long last_pid(void)
{
    char buf[32] = {0};
    int fd = open("/proc/sys/kernel/ns_last_pid", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    return n > 0 ? atol(buf) : -1;
}

static int copy_pipe[2] = {-1, -1}; /* tee(2) target: a pipe's bytes are seen, not taken */

/* Whether `path` opens and what it gives holds `needle`. A pipe is read without consuming it
 * (tee into our own pipe), so the race does not break the processes it watches. */
static bool leaks(const char *path, const char *needle)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return false;
    static char buf[1 << 16];
    struct stat st;
    ssize_t n = -1;
    if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
        if (tee(fd, copy_pipe[1], sizeof(buf), SPLICE_F_NONBLOCK) > 0)
            n = read(copy_pipe[0], buf, sizeof(buf));
        while (read(copy_pipe[0], buf + sizeof(buf) / 2, sizeof(buf) / 2) > 0)
            ;                         /* empty for the next one */
    } else if (S_ISREG(st.st_mode)) { /* files and memfds; not ttys or devices */
        n = pread(fd, buf, sizeof(buf), 0);
    }
    close(fd);
    return n > 0 && memmem(buf, (size_t)n, needle, strlen(needle)) != NULL;
}

struct watched {
    long pid;
    int64_t until;
    bool listed; /* its fd directory opened once at least */
};

static bool is_agent(long pid)
{
    char path[64], comm[32] = {0};
    snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, comm, sizeof(comm) - 1);
    close(fd);
    return n > 0 && strcmp(comm, "elastic-agent\n") == 0;
}

/* One look at `w`: every fd, then the environment. Returns the reads that held the needle. */
static long probe(struct watched *w, const char *needle, long *windows, long *agents)
{
    char path[96];
    long hits = 0;
    snprintf(path, sizeof(path), "/proc/%ld/fd", w->pid);
    DIR *d = opendir(path);
    if (d) {
        if (!w->listed) {
            w->listed = true;
            (*windows)++;
            *agents += is_agent(w->pid);
        }
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof(path), "/proc/%ld/fd/%s", w->pid, e->d_name);
            hits += leaks(path, needle);
        }
        closedir(d);
    }
    snprintf(path, sizeof(path), "/proc/%ld/environ", w->pid);
    hits += leaks(path, needle);
    return hits;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: ea-pwrace NEEDLE OUTFILE\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    if (pipe2(copy_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        return 1;
    static struct watched w[WATCH_MAX];
    size_t nw = 0;
    long hits = 0, pids = 0, windows = 0, agents = 0, last = last_pid(), self = (long)getpid();
    if (last < 0) {
        fprintf(stderr, "ea-pwrace: /proc/sys/kernel/ns_last_pid: %s\n", strerror(errno));
        return 1;
    }
    while (!stop) {
        long cur = last_pid();
        int64_t now = now_ms();
        for (long p = cur < last ? cur : last + 1; p <= cur; p++) { /* wrapped: from cur */
            if (p == self)
                continue;
            if (nw == WATCH_MAX)
                memmove(w, w + 1, --nw * sizeof(*w)); /* the oldest goes */
            w[nw++] = (struct watched){.pid = p, .until = now + WATCH_MS};
            pids++;
        }
        last = cur;
        for (size_t i = 0; i < nw;) {
            hits += probe(&w[i], argv[1], &windows, &agents);
            if (now >= w[i].until)
                w[i] = w[--nw];
            else
                i++;
        }
    }
    FILE *f = fopen(argv[2], "we");
    if (!f)
        return 1;
    fprintf(f, "hits %ld pids %ld windows %ld agents %ld\n", hits, pids, windows, agents);
    return fclose(f) == 0 ? 0 : 1;
}
