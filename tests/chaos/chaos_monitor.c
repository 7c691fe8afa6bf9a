// SPDX-License-Identifier: Apache-2.0
/*
 * chaos_monitor: a thread that records workers' evidence files as they appear (inotify on the
 * evidence directory) and when each worker ends (pidfd), and agents' exits (pidfd), waking the
 * driver's waits (a condition variable on CLOCK_MONOTONIC). Nothing here sleeps.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "chaos.h"

int64_t ch_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int pidfd_open_(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

static const char *field(const char *line, const char *name)
{
    char key[32];
    snprintf(key, sizeof(key), " %s=", name);
    const char *p = strstr(line, key);
    return p ? p + strlen(key) : NULL;
}

static long long num_field(const char *line, const char *name, long long dflt)
{
    const char *p = field(line, name);
    return p ? strtoll(p, NULL, 10) : dflt;
}

/* Read the stop line of a worker's file: 1 (stop_ms/code set), 0 none yet. */
static int read_stop(const char *dir, const char *file, int64_t *stop_ms, int *code)
{
    char path[PATH_MAX + 64], buf[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int found = 0;
    while (fgets(buf, sizeof(buf), f))
        if (strncmp(buf, "stop ", 5) == 0) {
            char line[1030];
            snprintf(line, sizeof(line), " %s", buf);
            *stop_ms = num_field(line, "mono_ns", 0) / 1000000;
            *code = (int)num_field(line, "code", -1);
            found = 1;
        }
    fclose(f);
    return found;
}

/* True when `pid` is not the process that wrote the evidence at start_ms (CLOCK_MONOTONIC): it
 * started later (/proc/<pid>/stat field 22, in clock ticks of CLOCK_BOOTTIME) — a reused pid. */
static bool reused_pid(pid_t pid, int64_t start_ms)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    size_t len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = '\0';
    const char *p = strrchr(buf, ')');
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    if (!p)
        return false;
    long long ticks = strtoll(p + 1, NULL, 10);
    struct timespec boot, mono;
    clock_gettime(CLOCK_BOOTTIME, &boot);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    int64_t skew =
        ((int64_t)boot.tv_sec - mono.tv_sec) * 1000 + (boot.tv_nsec - mono.tv_nsec) / 1000000;
    int64_t started_ms = ticks * 1000 / sysconf(_SC_CLK_TCK) - skew;
    return started_ms > start_ms + 20; /* a tick of granularity */
}

static bool known(const struct ch_monitor *m, const char *file)
{
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->w[i].file, file) == 0)
            return true;
    return false;
}

static void ended(struct ch_monitor *m, struct ch_worker *w)
{
    int64_t now = ch_now_ms();
    if (!read_stop(m->dir, w->file, &w->stop_ms, &w->code))
        w->stop_ms = now; /* killed without a word: when we saw it end (an upper bound) */
    if (w->pidfd >= 0)
        close(w->pidfd);
    w->pidfd = -1;
}

/* New evidence files (called with mu held). */
static void scan(struct ch_monitor *m)
{
    DIR *d = opendir(m->dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "w.", 2) != 0)
            continue;
        pid_t pid = (pid_t)atoi(e->d_name + 2);
        if (pid <= 0 || strlen(e->d_name) >= sizeof(m->w[0].file) || known(m, e->d_name))
            continue;
        char path[PATH_MAX + 300], line[1024];
        snprintf(path, sizeof(path), "%s/%s", m->dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        bool ok = fgets(line + 1, sizeof(line) - 1, f) != NULL;
        fclose(f);
        line[0] = ' ';
        if (!ok || strncmp(line + 1, "start ", 6) != 0)
            continue;
        if (m->n == m->cap) {
            size_t cap = m->cap ? m->cap * 2 : 256;
            struct ch_worker *nw = realloc(m->w, cap * sizeof(*nw));
            if (!nw)
                break;
            m->w = nw;
            m->cap = cap;
        }
        struct ch_worker *w = &m->w[m->n++];
        memset(w, 0, sizeof(*w));
        snprintf(w->file, sizeof(w->file), "%s", e->d_name);
        w->pid = pid;
        w->gen = num_field(line, "gen", -1);
        w->round = num_field(line, "round", -1);
        w->rank = (int)num_field(line, "rank", -1);
        w->world = (int)num_field(line, "world", -1);
        w->local = (int)num_field(line, "local", -1);
        const char *node = field(line, "node");
        snprintf(w->node, sizeof(w->node), "%.*s", node ? (int)strcspn(node, " \n") : 1,
                 node ? node : "?");
        w->start_ms = num_field(line, "mono_ns", 0) / 1000000;
        w->stop_ms = -1;
        w->code = -1;
        w->episode = m->episode;
        w->pidfd = pidfd_open_(pid);
        if (w->pidfd >= 0 && reused_pid(pid, w->start_ms)) {
            close(w->pidfd); /* ours ended before we looked, and its pid went to another */
            w->pidfd = -1;
        }
        if (w->pidfd < 0)
            ended(m, w);
    }
    closedir(d);
}

/* The driver may have swapped an agent's pidfd (same number, a new agent) while we polled the
 * old one: ask the descriptor we hold now. */
static bool ended_now(int pidfd)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static void *run(void *arg)
{
    struct ch_monitor *m = arg;
    struct pollfd *fds = NULL;
    size_t *idx = NULL, cap = 0;
    pthread_mutex_lock(&m->mu);
    scan(m);
    while (!m->quit) {
        size_t need = m->n + CH_SLOTS_MAX + 2;
        if (need > cap) {
            cap = need * 2;
            struct pollfd *nf = realloc(fds, cap * sizeof(*fds));
            if (nf)
                fds = nf;
            size_t *ni = realloc(idx, cap * sizeof(*idx));
            if (ni)
                idx = ni;
            if (!nf || !ni)
                abort(); /* a test driver out of memory: nothing sensible to do */
        }
        size_t k = 0;
        fds[k++] = (struct pollfd){.fd = m->wakefd, .events = POLLIN};
        fds[k++] = (struct pollfd){.fd = m->ifd, .events = POLLIN};
        for (int s = 0; s < CH_SLOTS_MAX; s++)
            if (m->agent_pidfd[s] >= 0) {
                idx[k] = (size_t)s;
                fds[k++] = (struct pollfd){.fd = m->agent_pidfd[s], .events = POLLIN};
            }
        size_t first_worker = k;
        for (size_t i = 0; i < m->n; i++)
            if (m->w[i].pidfd >= 0) {
                idx[k] = i;
                fds[k++] = (struct pollfd){.fd = m->w[i].pidfd, .events = POLLIN};
            }
        pthread_mutex_unlock(&m->mu);
        int r = poll(fds, k, -1);
        pthread_mutex_lock(&m->mu);
        if (r < 0)
            continue;
        uint64_t v;
        char buf[8192];
        if (fds[0].revents && read(m->wakefd, &v, sizeof(v)) < 0) {
            /* nothing: the flag is what counts */
        }
        if (fds[1].revents) {
            while (read(m->ifd, buf, sizeof(buf)) > 0)
                ;
            scan(m);
        }
        for (size_t j = 2; j < first_worker; j++)
            if (fds[j].revents && m->agent_pidfd[idx[j]] == fds[j].fd && ended_now(fds[j].fd)) {
                m->agent_exited[idx[j]] = true;
                close(m->agent_pidfd[idx[j]]);
                m->agent_pidfd[idx[j]] = -1;
            }
        for (size_t j = first_worker; j < k; j++)
            if (fds[j].revents && idx[j] < m->n && m->w[idx[j]].pidfd == fds[j].fd)
                ended(m, &m->w[idx[j]]);
        pthread_cond_broadcast(&m->cv);
    }
    pthread_mutex_unlock(&m->mu);
    free(fds);
    free(idx);
    return NULL;
}

int ch_mon_start(struct ch_monitor *m, const char *dir)
{
    memset(m, 0, sizeof(*m));
    snprintf(m->dir, sizeof(m->dir), "%s", dir);
    for (int s = 0; s < CH_SLOTS_MAX; s++)
        m->agent_pidfd[s] = -1;
    pthread_mutex_init(&m->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cv, &ca);
    pthread_condattr_destroy(&ca);
    m->ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    m->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (m->ifd < 0 || m->wakefd < 0 || inotify_add_watch(m->ifd, dir, IN_CREATE | IN_MOVED_TO) < 0)
        return -errno;
    int r = pthread_create(&m->thread, NULL, run, m);
    return -r;
}

static void wake(struct ch_monitor *m)
{
    uint64_t one = 1;
    if (write(m->wakefd, &one, sizeof(one)) < 0) {
        /* the counter is full: the thread is awake anyway */
    }
}

void ch_mon_stop(struct ch_monitor *m)
{
    if (m->wakefd <= 0)
        return;
    pthread_mutex_lock(&m->mu);
    m->quit = true;
    pthread_mutex_unlock(&m->mu);
    wake(m);
    pthread_join(m->thread, NULL);
    for (size_t i = 0; i < m->n; i++)
        if (m->w[i].pidfd >= 0)
            close(m->w[i].pidfd);
    for (int s = 0; s < CH_SLOTS_MAX; s++)
        if (m->agent_pidfd[s] >= 0)
            close(m->agent_pidfd[s]);
    free(m->w);
    close(m->ifd);
    close(m->wakefd);
    m->wakefd = -1;
    m->w = NULL;
    m->n = 0;
}

void ch_mon_watch_agent(struct ch_monitor *m, int slot, pid_t pid)
{
    pthread_mutex_lock(&m->mu);
    if (m->agent_pidfd[slot] >= 0)
        close(m->agent_pidfd[slot]);
    m->agent_pidfd[slot] = pid > 0 ? pidfd_open_(pid) : -1;
    m->agent_exited[slot] = pid > 0 && m->agent_pidfd[slot] < 0;
    pthread_mutex_unlock(&m->mu);
    wake(m);
}

void ch_mon_lock(struct ch_monitor *m)
{
    pthread_mutex_lock(&m->mu);
}

void ch_mon_unlock(struct ch_monitor *m)
{
    pthread_mutex_unlock(&m->mu);
}

bool ch_mon_wait(struct ch_monitor *m, bool (*pred)(struct ch_monitor *, void *), void *arg,
                 int64_t deadline_ms)
{
    struct timespec ts = {.tv_sec = deadline_ms / 1000, .tv_nsec = (deadline_ms % 1000) * 1000000};
    pthread_mutex_lock(&m->mu);
    bool ok;
    while (!(ok = pred(m, arg)))
        if (pthread_cond_timedwait(&m->cv, &m->mu, &ts) == ETIMEDOUT) {
            ok = pred(m, arg);
            break;
        }
    pthread_mutex_unlock(&m->mu);
    return ok;
}
