// SPDX-License-Identifier: Apache-2.0
/*
 * chaos_check: the invariants, from the workers' evidence (the monitor's records) and from the
 * process table (/proc).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chaos.h"

static int64_t stop_or_now(const struct ch_worker *w, int64_t now)
{
    return w->stop_ms >= 0 ? w->stop_ms : now;
}

/* 1. Workers of two generations never run at the same time for longer than the fence window
 * (--stop-timeout plus slack for the news of a new round to travel). Checked on every pair of
 * workers of different generations where one belongs to a generation not checked yet. */
int ch_check_overlap(struct ch_run *r)
{
    int found = 0;
    int64_t fence = r->stop_timeout_s * 1000 + r->fence_slack_ms;
    int64_t now = ch_now_ms(), top = r->fenced_gen;
    ch_mon_lock(&r->mon);
    const struct ch_worker *w = r->mon.w;
    size_t n = r->mon.n;
    int64_t worst = 0;
    size_t wi = 0, wj = 0;
    for (size_t i = 0; i < n; i++) {
        if (w[i].gen > top)
            top = w[i].gen;
        if (w[i].gen <= r->fenced_gen)
            continue;
        for (size_t j = 0; j < n; j++) {
            if (w[j].gen == w[i].gen || (j < i && w[j].gen > r->fenced_gen))
                continue;
            int64_t lo = w[i].start_ms > w[j].start_ms ? w[i].start_ms : w[j].start_ms;
            int64_t si = stop_or_now(&w[i], now), sj = stop_or_now(&w[j], now);
            int64_t ov = (si < sj ? si : sj) - lo;
            if (ov > worst) {
                worst = ov;
                wi = i;
                wj = j;
            }
        }
    }
    int64_t g1 = worst > 0 ? w[wi].gen : 0, g2 = worst > 0 ? w[wj].gen : 0;
    if (worst > r->max_overlap_ms)
        r->max_overlap_ms = worst;
    if (worst > fence) {
        printf("  VIOLATION %s: generation %" PRId64
               " (rank %d on %s, pid %d) and generation %" PRId64
               " (rank %d on %s, pid %d) ran together for %" PRId64 " ms (fence %" PRId64 " ms)\n",
               ch_invariant_names[I_OVERLAP], g1, w[wi].rank, w[wi].node, (int)w[wi].pid, g2,
               w[wj].rank, w[wj].node, (int)w[wj].pid, worst, fence);
        found++;
    }
    ch_mon_unlock(&r->mon);
    if (found) {
        ch_print_generation(r, g1);
        ch_print_generation(r, g2);
    }
    r->fenced_gen = top;
    r->violations[I_OVERLAP] += found;
    return found;
}

/* 2. Within a generation, every rank at most once and below the world size (which all its
 * workers agree on); a generation that finished starting has every rank 0..W-1. */
int ch_check_ranks(struct ch_run *r)
{
    int found = 0;
    int64_t top = r->checked_gen;
    int64_t bad_gen = -1;
    ch_mon_lock(&r->mon);
    const struct ch_worker *w = r->mon.w;
    size_t n = r->mon.n;
    for (size_t i = 0; i < n; i++) {
        if (w[i].gen > top)
            top = w[i].gen;
        if (w[i].gen <= r->checked_gen)
            continue;
        const char *why = NULL;
        if (w[i].rank < 0 || w[i].rank >= w[i].world)
            why = "rank outside 0..W-1";
        for (size_t j = i + 1; j < n && !why; j++) {
            if (w[j].gen != w[i].gen)
                continue;
            if (w[j].world != w[i].world)
                why = "two world sizes";
            else if (w[j].rank == w[i].rank)
                why = "a rank twice";
        }
        if (why) {
            printf("  VIOLATION %s: generation %" PRId64 ": %s (rank %d of %d on %s, pid %d)\n",
                   ch_invariant_names[I_RANKS], w[i].gen, why, w[i].rank, w[i].world, w[i].node,
                   (int)w[i].pid);
            bad_gen = w[i].gen;
            found++;
            break;
        }
    }
    ch_mon_unlock(&r->mon);
    if (bad_gen >= 0)
        ch_print_generation(r, bad_gen);
    r->checked_gen = top;
    r->violations[I_RANKS] += found;
    return found;
}

/* ---- 3. the process table -------------------------------------------------------------- */

struct proc {
    pid_t pid, ppid;
    char state;
    char comm[64];
};

static bool read_stat(pid_t pid, struct proc *p)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = '\0';
    char *open = strchr(buf, '('), *close = strrchr(buf, ')');
    if (!open || !close || close[1] != ' ')
        return false;
    p->pid = pid;
    snprintf(p->comm, sizeof(p->comm), "%.*s", (int)(close - open - 1), open + 1);
    p->state = close[2];
    p->ppid = (pid_t)atoi(close + 4);
    return true;
}

static bool tagged(pid_t pid, const char *tagenv)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len;
    bool found = false;
    while (!found && (len = getdelim(&buf, &cap, '\0', f)) > 0)
        found = strcmp(buf, tagenv) == 0;
    free(buf);
    fclose(f);
    return found;
}

static bool is_agent(const struct ch_run *r, pid_t pid)
{
    for (int s = 0; s < r->nodes; s++)
        if (r->a[s].pid == pid)
            return true;
    return false;
}

static bool is_etcd(const struct ch_run *r, pid_t pid)
{
    for (int i = 0; i < r->etcd.n; i++)
        if (r->etcd.m[i].pid == pid)
            return true;
    return false;
}

/* Processes of this suite (their environment carries our tag) with no live agent of ours among
 * their ancestors (orphans), or zombies whose parent is not this driver. Our own zombies
 * (guards and workers re-parented to us, the subreaper) are reaped on the way. */
static size_t scan(struct ch_run *r, struct proc *bad, size_t max)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    size_t n = 0;
    pid_t me = getpid();
    for (struct dirent *e; (e = readdir(d)) && n < max;) {
        pid_t pid = (pid_t)atoi(e->d_name);
        struct proc p;
        if (pid <= 0 || pid == me || !read_stat(pid, &p))
            continue;
        if (p.state == 'Z' && p.ppid == me && !is_agent(r, pid) && !is_etcd(r, pid)) {
            waitpid(pid, NULL, WNOHANG); /* a guard re-parented to us (a zombie has no environ) */
            continue;
        }
        if (!tagged(pid, r->tagenv))
            continue;
        if (is_agent(r, pid))
            continue;
        if (p.state == 'Z') {
            if (p.ppid == me)
                waitpid(pid, NULL, WNOHANG);
            else
                bad[n++] = p;
            continue;
        }
        bool owned = false;
        struct proc q = p;
        for (int depth = 0; depth < 16 && q.ppid > 1 && q.ppid != me; depth++) {
            if (is_agent(r, q.ppid)) {
                owned = true;
                break;
            }
            if (!read_stat(q.ppid, &q))
                break;
        }
        if (!owned)
            bad[n++] = p;
    }
    closedir(d);
    return n;
}

bool ch_scan_finds(struct ch_run *r, pid_t pid)
{
    struct proc bad[64];
    size_t n = scan(r, bad, 64);
    for (size_t i = 0; i < n; i++)
        if (bad[i].pid == pid)
            return true;
    return false;
}

int ch_check_orphans(struct ch_run *r, int64_t deadline_ms)
{
    struct proc bad[64];
    size_t n;
    /* A guard cleans up after its agent died within its grace (and the stop-timeout): wait for
     * the processes found to end (pidfd), up to the deadline, before calling them left behind.
     * Zombies give no event; they are re-checked every 200 ms. */
    while ((n = scan(r, bad, 64)) > 0) {
        int64_t left = deadline_ms - ch_now_ms();
        if (left <= 0)
            break;
        struct pollfd p = {.fd = -1, .events = POLLIN};
        for (size_t i = 0; i < n && p.fd < 0; i++)
            if (bad[i].state != 'Z')
                p.fd = (int)syscall(SYS_pidfd_open, bad[i].pid, 0);
        poll(&p, 1, p.fd >= 0 ? (int)left : (left < 200 ? (int)left : 200));
        if (p.fd >= 0)
            close(p.fd);
    }
    for (size_t i = 0; i < n; i++)
        printf("  VIOLATION %s: pid %d (%s) state %c, parent %d%s\n", ch_invariant_names[I_ORPHANS],
               (int)bad[i].pid, bad[i].comm, bad[i].state, (int)bad[i].ppid,
               bad[i].state == 'Z' ? " (zombie)" : " (no live agent above it)");
    r->violations[I_ORPHANS] += (int)n;
    /* leave nothing running for the next episode */
    for (size_t i = 0; i < n; i++)
        if (bad[i].state != 'Z' && bad[i].ppid == getpid() && kill(bad[i].pid, 9) == 0)
            waitpid(bad[i].pid, NULL, 0);
    return (int)n;
}

/* ---- evidence --------------------------------------------------------------------------- */

void ch_print_generation(struct ch_run *r, int64_t gen)
{
    ch_mon_lock(&r->mon);
    printf("  generation %" PRId64 ":\n", gen);
    for (size_t i = 0; i < r->mon.n; i++) {
        const struct ch_worker *w = &r->mon.w[i];
        if (w->gen != gen)
            continue;
        printf("    round %" PRId64
               " rank %d/%d local %d node %-8s pid %-7d episode %d start %" PRId64
               " ms stop %" PRId64 " ms code %d\n",
               w->round, w->rank, w->world, w->local, w->node, (int)w->pid, w->episode, w->start_ms,
               w->stop_ms, w->code);
    }
    ch_mon_unlock(&r->mon);
    fflush(stdout);
}

void ch_print_agent_logs(struct ch_run *r, int lines)
{
    fflush(stdout);
    for (int s = 0; s < r->nodes; s++) {
        char cmd[PATH_MAX + 128];
        snprintf(cmd, sizeof(cmd),
                 "echo '  ---- %s (last %d lines)'; tail -n %d '%s' | "
                 "sed 's/^/    /'",
                 r->a[s].log, lines, lines, r->a[s].log);
        if (system(cmd) != 0)
            printf("  (cannot show %s)\n", r->a[s].log);
    }
    fflush(stdout);
}
