// SPDX-License-Identifier: Apache-2.0
/*
 * chaos_faults: one fault per call, every choice drawn from the run's seeded PRNG (so a seed
 * replays the same sequence of faults and targets). A fault that lasts (a frozen agent, a downed
 * link, a dead etcd member) lasts for a drawn time: a timed wait on the monitor, which keeps
 * recording meanwhile — a fault's duration, not a synchronisation.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "chaos.h"

static bool never(struct ch_monitor *m, void *arg)
{
    (void)m;
    (void)arg;
    return false;
}

/* Let `ms` pass (scaled) while the monitor records. */
static void hold(struct ch_run *r, int64_t ms)
{
    ch_mon_wait(&r->mon, never, NULL, ch_now_ms() + ch_scaled(r, ms));
}

/* A metric's value from member i's /metrics; -1 when absent. */
static long long metric(struct ch_run *r, int i, const char *name)
{
    if (r->etcd.m[i].pid <= 0)
        return -1;
    size_t size = 1 << 20;
    char *buf = malloc(size);
    if (!buf)
        return -1;
    long long v = -1;
    if (etcd_harness_http_get(r->etcd.m[i].health_port, "/metrics", buf, size, 3000) > 0) {
        char key[128];
        snprintf(key, sizeof(key), "\n%s ", name);
        const char *p = strstr(buf, key);
        if (p)
            v = (long long)strtod(p + strlen(key), NULL);
    }
    free(buf);
    return v;
}

static int etcd_leader(struct ch_run *r)
{
    for (int i = 0; i < r->etcd.n; i++)
        if (metric(r, i, "etcd_server_is_leader") == 1)
            return i;
    return -1;
}

static void etcd_bounce(struct ch_run *r, int i, char *what, size_t size, const char *role)
{
    int down_ms = ch_rand_range(r, 0, 1500);
    etcd_harness_kill(&r->etcd, i);
    hold(r, down_ms);
    int rc = etcd_harness_restart(&r->etcd, i);
    snprintf(what, size, "%s %s down %d ms%s", role, r->etcd.m[i].name, down_ms,
             rc ? " (RESTART FAILED)" : "");
    if (rc) /* the harness printed why; another try, the cluster must not stay short */
        etcd_harness_restart(&r->etcd, i);
}

static int live_worker(struct ch_run *r, pid_t *pid, char *node, size_t size)
{
    ch_mon_lock(&r->mon);
    int live = 0;
    for (size_t i = 0; i < r->mon.n; i++)
        live += r->mon.w[i].stop_ms < 0;
    uint64_t x = ch_rand(r); /* drawn even when nothing lives: the sequence stays the same */
    int pick = live ? (int)(x % (uint64_t)live) : -1, k = 0;
    *pid = 0;
    for (size_t i = 0; i < r->mon.n && pick >= 0; i++)
        if (r->mon.w[i].stop_ms < 0 && k++ == pick) {
            *pid = r->mon.w[i].pid;
            snprintf(node, size, "rank %d on %s", r->mon.w[i].rank, r->mon.w[i].node);
        }
    ch_mon_unlock(&r->mon);
    return *pid > 0 ? 0 : -1;
}

static bool inject_one(struct ch_run *r, enum ch_fault kind, char *what, size_t size)
{
    int slot = ch_rand_range(r, 0, r->nodes - 1);
    struct ch_agent *a = &r->a[slot];
    switch (kind) {
    case F_AGENT_KILL: {
        char old[CH_NODE_MAX];
        snprintf(old, sizeof(old), "%s", a->node);
        pid_t pid = a->pid;
        ch_agent_kill(r, slot);
        a->incarnation++;
        ch_agent_start(r, slot);
        snprintf(what, size, "%s (pid %d), replaced by %s", old, (int)pid, a->node);
        return true;
    }
    case F_AGENT_STOP: {
        int freeze = r->lease_ttl_s * 1000 + ch_rand_range(r, 500, r->freeze_extra_max_ms);
        kill(a->pid, SIGSTOP);
        a->stopped = true;
        hold(r, freeze);
        kill(a->pid, SIGCONT);
        a->stopped = false;
        snprintf(what, size, "%s frozen %d ms (lease TTL %d s)", a->node, freeze, r->lease_ttl_s);
        return true;
    }
    case F_WORKER_KILL: {
        pid_t pid;
        char desc[96];
        if (live_worker(r, &pid, desc, sizeof(desc)) < 0) {
            snprintf(what, size, "no live worker");
            return false;
        }
        kill(pid, SIGKILL);
        snprintf(what, size, "%s (pid %d)", desc, (int)pid);
        return true;
    }
    case F_ETCD_LEADER: {
        int leader = etcd_leader(r);
        if (leader < 0) {
            snprintf(what, size, "no leader found");
            return false;
        }
        etcd_bounce(r, leader, what, size, "leader");
        return false;
    }
    case F_ETCD_RESTART:
        etcd_bounce(r, ch_rand_range(r, 0, r->etcd.n - 1), what, size, "member");
        return false;
    case F_PARTITION: {
        int first = r->nodes - r->ns_nodes;
        slot = ch_rand_range(r, first, r->nodes - 1);
        a = &r->a[slot];
        int down = r->lease_ttl_s * 1000 + ch_rand_range(r, 500, 3000);
        ch_netns_link(r, slot, false);
        hold(r, down);
        ch_netns_link(r, slot, true);
        snprintf(what, size, "%s cut off %d ms (link down)", a->node, down);
        return true;
    }
    case F_COMPACT: {
        long long rev = -1; /* the newest any member has applied */
        for (int i = 0; i < r->etcd.n; i++) {
            long long v = metric(r, i, "etcd_debugging_mvcc_current_revision");
            rev = v > rev ? v : rev;
        }
        char revs[32];
        snprintf(revs, sizeof(revs), "%lld", rev);
        const char *compact[] = {"compaction", "--physical", revs, NULL};
        const char *defrag[] = {"defrag", NULL};
        /* nothing written since the last compaction: etcd would refuse the same revision */
        bool again = rev <= r->compacted_rev;
        int c = rev > 0 && !again ? etcd_harness_etcdctl(&r->etcd, compact) : -1;
        if (c == 0)
            r->compacted_rev = rev;
        int d = etcd_harness_etcdctl(&r->etcd, defrag);
        snprintf(what, size, "compact at revision %lld (%s), defrag (%s)", rev,
                 again    ? "already compacted"
                 : c == 0 ? "ok"
                          : "failed",
                 d == 0 ? "ok" : "failed");
        return false;
    }
    case F_CLOCK_JUMP:
    case F_COUNT:
        break;
    }
    return false;
}

/* clock_jump: the driver's clock jumps past the wait that normally separates two faults — two
 * faults are injected back to back, the second before the run recovered from the first. */
bool ch_fault_inject(struct ch_run *r, enum ch_fault kind, char *what, size_t size)
{
    if (kind != F_CLOCK_JUMP)
        return inject_one(r, kind, what, size);
    enum ch_fault k[2];
    char w[2][256];
    for (int i = 0; i < 2; i++)
        do
            k[i] = (enum ch_fault)ch_rand_range(r, 0, F_COUNT - 1);
        while (k[i] == F_CLOCK_JUMP || (k[i] == F_PARTITION && !r->netns_ok));
    bool new_gen = false;
    for (int i = 0; i < 2; i++)
        new_gen |= inject_one(r, k[i], w[i], sizeof(w[i]));
    snprintf(what, size, "%s: %s; then %s: %s", ch_fault_names[k[0]], w[0], ch_fault_names[k[1]],
             w[1]);
    return new_gen;
}
