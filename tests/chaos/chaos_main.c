// SPDX-License-Identifier: Apache-2.0
/*
 * The chaos suite's driver (issue #10): N agents (default 8, --min 4 --max 8, lease TTL 2 s) on a
 * real 3-member etcd cluster on loopback, one seeded fault per episode, then an event-driven wait
 * (deadline) until the run is back to one generation with every node in it, then the invariants.
 * A criterion test so that the harnesses' assertions work; `tests/chaos/run --episodes N --seed S`
 * passes its options through the environment (CHAOS_EPISODES, CHAOS_SEED, ...; see README.md).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../helpers/ea_ci.h"
#include "chaos.h"

#define WORKER EA_HELPERS_DIR "/ea-testworker"

const char *const ch_fault_names[F_COUNT] = {
    [F_AGENT_KILL] = "agent_sigkill",   [F_AGENT_STOP] = "agent_sigstop",
    [F_WORKER_KILL] = "worker_sigkill", [F_ETCD_LEADER] = "etcd_kill_leader",
    [F_ETCD_RESTART] = "etcd_restart",  [F_PARTITION] = "partition",
    [F_COMPACT] = "compact_defrag",     [F_CLOCK_JUMP] = "clock_jump",
};
const char *const ch_invariant_names[I_COUNT] = {
    [I_OVERLAP] = "1 generations overlap beyond fence",
    [I_RANKS] = "2 ranks not 0..W-1 exactly once",
    [I_ORPHANS] = "3 orphans/zombies left behind",
    [I_AGENTS] = "4 agent not in generation/spare/documented exit",
    [I_SUCCESS] = "5 no recovery / no success",
};

static struct ch_run R;

uint64_t ch_rand(struct ch_run *r)
{
    uint64_t z = (r->rng += 0x9e3779b97f4a7c15ULL); /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int ch_rand_range(struct ch_run *r, int lo, int hi)
{
    return lo + (int)(ch_rand(r) % (uint64_t)(hi - lo + 1));
}

int64_t ch_scaled(const struct ch_run *r, int64_t ms)
{
    return (int64_t)((double)ms * r->time_scale);
}

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

/* ---- agents --------------------------------------------------------------------------- */

void ch_agent_start(struct ch_run *r, int slot)
{
    struct ch_agent *a = &r->a[slot];
    if (a->incarnation == 0)
        snprintf(a->node, sizeof(a->node), "n%d", slot);
    else
        snprintf(a->node, sizeof(a->node), "n%dr%d", slot, a->incarnation);
    char node[CH_NODE_MAX];
    memcpy(node, a->node, sizeof(node));
    snprintf(a->log, sizeof(a->log), "%s/%s.log", r->dir, node);
    char nproc[8], minn[8], maxn[8], ttl[8], stop[8];
    snprintf(nproc, sizeof(nproc), "%d", a->nproc);
    snprintf(minn, sizeof(minn), "%d", r->min_nodes);
    snprintf(maxn, sizeof(maxn), "%d", r->nodes);
    snprintf(ttl, sizeof(ttl), "%d", r->lease_ttl_s);
    snprintf(stop, sizeof(stop), "%d", r->stop_timeout_s);
    const char *eps = a->in_ns ? r->ns_endpoints[slot] : r->endpoints;
    const char *argv[] = {
        EA_AGENT_BIN, "--run-id",       "chaos",  "--node-id",      a->node, "--rdzv-endpoint",
        eps,          "--min",          minn,     "--max",          maxn,    "--nproc-per-node",
        nproc,        "--lease-ttl",    ttl,      "--settle",       "1",     "--stop-timeout",
        stop,         "--max-restarts", "100000", "--join-timeout", "600",   "--",
        WORKER,       "chaos",          r->evdir, r->gofile,        NULL};
    extern char **environ;
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 2, sizeof(*env));
    cr_assert_not_null(env);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "EA_CHAOS_TAG=", 13) != 0)
            env[k++] = environ[i];
    env[k++] = r->tagenv;
    int fd = open(a->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    cr_assert_geq(fd, 0, "%s: %s", a->log, strerror(errno));
    char nspath[128];
    snprintf(nspath, sizeof(nspath), "/run/netns/%s", r->ns[slot]);
    int nsfd = a->in_ns ? open(nspath, O_RDONLY | O_CLOEXEC) : -1;
    cr_assert(!a->in_ns || nsfd >= 0, "%s: %s", nspath, strerror(errno));
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) { /* no criterion calls in here: they would report from a foreign pid */
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* the driver dies: so do its agents */
        if (getppid() != parent || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(126);
        if (nsfd >= 0 && setns(nsfd, 0) < 0)
            _exit(126);
        execve(argv[0], (char *const *)argv, env);
        _exit(127);
    }
    free(env);
    close(fd);
    if (nsfd >= 0)
        close(nsfd);
    cr_assert_gt(pid, 0, "fork: %s", strerror(errno));
    a->pid = pid;
    a->stopped = false;
    ch_mon_watch_agent(&r->mon, slot, pid);
}

void ch_agent_kill(struct ch_run *r, int slot)
{
    struct ch_agent *a = &r->a[slot];
    if (a->pid <= 0)
        return;
    kill(a->pid, SIGKILL);
    while (waitpid(a->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    ch_mon_watch_agent(&r->mon, slot, 0);
    a->pid = 0;
}

/* ---- waiting for the run ------------------------------------------------------------------ */

struct recovered {
    struct ch_run *r;
    int64_t after_gen; /* a generation newer than this one is wanted (-1: any) */
    int64_t gen;
    int exited_slot; /* set when an agent exited by itself */
};

/* Every agent alive with all its workers in one generation G, and G's ranks complete; no worker
 * of any other generation alive. */
static bool is_recovered(struct ch_monitor *m, void *arg)
{
    struct recovered *rc = arg;
    struct ch_run *r = rc->r;
    for (int s = 0; s < r->nodes; s++)
        if (m->agent_exited[s]) {
            rc->exited_slot = s;
            return true;
        }
    int64_t gen = -1;
    int world = -1, live = 0;
    uint64_t ranks[4] = {0};
    int per_slot[CH_SLOTS_MAX] = {0};
    for (size_t i = 0; i < m->n; i++) {
        const struct ch_worker *w = &m->w[i];
        if (w->stop_ms >= 0)
            continue;
        if (gen >= 0 && (w->gen != gen || w->world != world))
            return false;
        gen = w->gen;
        world = w->world;
        if (w->rank < 0 || w->rank >= 256 || w->rank >= world)
            return false;
        ranks[w->rank / 64] |= 1ULL << (w->rank % 64);
        live++;
        for (int s = 0; s < r->nodes; s++)
            if (strcmp(r->a[s].node, w->node) == 0)
                per_slot[s]++;
    }
    if (gen < 0 || gen <= rc->after_gen || live != world)
        return false;
    int total = 0;
    for (int s = 0; s < r->nodes; s++) {
        if (per_slot[s] != r->a[s].nproc)
            return false;
        total += per_slot[s];
    }
    for (int k = 0; k < world; k++)
        if (!(ranks[k / 64] & (1ULL << (k % 64))))
            return false;
    rc->gen = gen;
    return total == world;
}

/* An agent ended by itself: invariant 4 wants a documented exit code and a message. */
static void agent_exited(struct ch_run *r, int slot)
{
    struct ch_agent *a = &r->a[slot];
    int status = 0;
    waitpid(a->pid, &status, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    bool documented =
        code == 0 || code == 1 || code == 2 || code == 3 || code == 4 || code == 130 || code == 143;
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof(cmd), "grep -qi 'error' '%s'", a->log);
    bool message = system(cmd) == 0;
    printf("  agent %s (pid %d) exited by itself with %d%s\n", a->node, (int)a->pid, code,
           documented && message ? " (documented code, message in its log)" : "");
    if (!documented || !message) {
        r->violations[I_AGENTS]++;
        r->violated_this_episode = true;
        printf("  VIOLATION %s: %s exit %d, message %s\n", ch_invariant_names[I_AGENTS], a->node,
               code, message ? "present" : "missing");
    }
    ch_mon_watch_agent(&r->mon, slot, 0);
    a->pid = 0;
    a->incarnation++;
    ch_agent_start(r, slot); /* keep N nodes */
}

/* Wait until recovered or deadline; 0 and the generation, or -1 on timeout. */
static int64_t wait_recovered(struct ch_run *r, int64_t after_gen, int64_t deadline)
{
    for (;;) {
        struct recovered rc = {.r = r, .after_gen = after_gen, .gen = -1, .exited_slot = -1};
        bool ok = ch_mon_wait(&r->mon, is_recovered, &rc, deadline);
        if (!ok)
            return -1;
        if (rc.exited_slot < 0)
            return rc.gen;
        agent_exited(r, rc.exited_slot);
    }
}

static void show_hang(struct ch_run *r)
{
    printf("  live workers:\n");
    ch_mon_lock(&r->mon);
    for (size_t i = 0; i < r->mon.n; i++) {
        const struct ch_worker *w = &r->mon.w[i];
        if (w->stop_ms < 0)
            printf("    gen %" PRId64 " round %" PRId64 " rank %d/%d node %s pid %d\n", w->gen,
                   w->round, w->rank, w->world, w->node, (int)w->pid);
    }
    ch_mon_unlock(&r->mon);
    ch_print_agent_logs(r, 12);
}

/* ---- setup and teardown ------------------------------------------------------------------ */

static void setup(void)
{
    struct ch_run *r = &R;
    memset(r, 0, sizeof(*r));
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress as it happens, also into a pipe or a file */
    r->episodes = (int)env_long("CHAOS_EPISODES", 20);
    r->seed = (uint64_t)env_long("CHAOS_SEED", 1);
    r->nodes = (int)env_long("CHAOS_NODES", 8);
    r->min_nodes = (int)env_long("CHAOS_MIN", 4);
    r->ns_nodes = (int)env_long("CHAOS_NS_NODES", 2);
    r->lease_ttl_s = 2;
    r->stop_timeout_s = 2;
    r->fence_slack_ms = env_long("CHAOS_FENCE_SLACK_MS", 1000);
    const char *scale = getenv("CHAOS_TIME_SCALE");
    r->time_scale = scale && *scale ? strtod(scale, NULL) : 1.0;
    cr_assert(r->nodes >= 2 && r->nodes <= CH_SLOTS_MAX && r->time_scale > 0,
              "CHAOS_NODES 2..%d, CHAOS_TIME_SCALE > 0", CH_SLOTS_MAX);
    r->episode_deadline_ms = ch_scaled(r, env_long("CHAOS_EPISODE_DEADLINE_MS", 45000));
    r->freeze_extra_max_ms = (int)env_long("CHAOS_FREEZE_EXTRA_MAX_MS", 4000);
    if (r->freeze_extra_max_ms < 500)
        r->freeze_extra_max_ms = 500;
    r->rng = r->seed;
    r->fenced_gen = -1;
    r->checked_gen = -1;
    r->recovery_ms = calloc((size_t)r->episodes + 1, sizeof(*r->recovery_ms));
    for (int k = 0; k < F_COUNT; k++)
        r->kind_ms[k] = calloc((size_t)r->episodes + 1, sizeof(int64_t));
    snprintf(r->dir, sizeof(r->dir), "/tmp/ea-chaos-XXXXXX");
    cr_assert(mkdtemp(r->dir));
    snprintf(r->evdir, sizeof(r->evdir), "%s/ev", r->dir);
    snprintf(r->gofile, sizeof(r->gofile), "%s/go/finish", r->dir);
    cr_assert_eq(mkdir(r->evdir, 0755), 0);
    char godir[PATH_MAX + 8];
    snprintf(godir, sizeof(godir), "%s/go", r->dir);
    cr_assert_eq(mkdir(godir, 0755), 0);
    char suffix[32];
    snprintf(suffix, sizeof(suffix), "%s", strrchr(r->dir, '-') + 1);
    snprintf(r->tag, sizeof(r->tag), "%d-%s", (int)getpid(), suffix);
    snprintf(r->tagenv, sizeof(r->tagenv), "EA_CHAOS_TAG=%s", r->tag);
    prctl(PR_SET_CHILD_SUBREAPER, 1); /* orphans of killed agents come here, to be seen */
    setenv("EA_ETCD_TMPDIR", r->dir, 1);
    cr_assert_eq(etcd_harness_start(&r->etcd, 3), 0, "cannot start the etcd cluster");
    memcpy(r->endpoints, r->etcd.endpoints, sizeof(r->endpoints));
    cr_assert_eq(ch_mon_start(&r->mon, r->evdir), 0);
}

static void teardown(void)
{
    struct ch_run *r = &R;
    for (int s = 0; s < CH_SLOTS_MAX; s++)
        if (r->a[s].pid > 0) {
            kill(r->a[s].pid, SIGCONT);
            ch_agent_kill(r, s);
        }
    ch_mon_stop(&r->mon);
    ch_netns_cleanup(r);
    etcd_harness_stop(&r->etcd);
    /* reap whatever was re-parented to us */
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    free(r->recovery_ms);
    for (int k = 0; k < F_COUNT; k++)
        free(r->kind_ms[k]);
    if (getenv("CHAOS_KEEP"))
        printf("chaos: kept %s\n", r->dir);
    else if (r->dir[0]) {
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", r->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "chaos: could not remove %s\n", r->dir);
    }
}

/* ---- episodes ------------------------------------------------------------------------------ */

static enum ch_fault draw_fault(struct ch_run *r)
{
    for (;;) {
        enum ch_fault k = (enum ch_fault)ch_rand_range(r, 0, F_COUNT - 1);
        if (k != F_PARTITION || r->netns_ok)
            return k;
    }
}

static void violation_evidence(struct ch_run *r)
{
    printf("  ---- evidence of episode %d (seed %" PRIu64 ")\n", r->episode, r->seed);
    ch_mon_lock(&r->mon);
    int64_t gens[64];
    int ng = 0;
    for (size_t i = 0; i < r->mon.n && ng < 64; i++) {
        const struct ch_worker *w = &r->mon.w[i];
        if (w->episode < r->episode - 1)
            continue;
        bool seen = false;
        for (int g = 0; g < ng; g++)
            seen |= gens[g] == w->gen;
        if (!seen)
            gens[ng++] = w->gen;
    }
    ch_mon_unlock(&r->mon);
    for (int g = 0; g < ng; g++)
        ch_print_generation(r, gens[g]);
    ch_print_agent_logs(r, 15);
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int64_t pct(const int64_t *v, size_t n, int p)
{
    if (!n)
        return 0;
    size_t i = (n * (size_t)p + 99) / 100;
    return v[i ? i - 1 : 0];
}

static void summary(struct ch_run *r, int64_t wall_ms)
{
    int total = 0;
    for (int i = 0; i < I_COUNT; i++)
        total += r->violations[i];
    qsort(r->recovery_ms, r->n_recovery, sizeof(*r->recovery_ms), cmp64);
    printf("\n==== chaos summary: seed %" PRIu64 ", %d episode(s), %d agents (%d in network "
           "namespaces), 3 etcd members\n",
           r->seed, r->episode, r->nodes, r->netns_ok ? r->ns_nodes : 0);
    printf("     lease TTL %d s, stop-timeout %d s, fence window %" PRId64 " ms, SIGSTOP up to TTL"
           " + %d ms, time scale %.2f, wall %.1f s\n",
           r->lease_ttl_s, r->stop_timeout_s, r->stop_timeout_s * 1000 + r->fence_slack_ms,
           r->freeze_extra_max_ms, r->time_scale, (double)wall_ms / 1000.0);
    printf("  %-44s %6s %9s %9s %9s\n", "fault", "count", "rec p50", "rec p90", "rec max");
    for (int k = 0; k < F_COUNT; k++) {
        size_t n = r->n_kind[k];
        qsort(r->kind_ms[k], n, sizeof(int64_t), cmp64);
        printf("  %-44s %6d %9" PRId64 " %9" PRId64 " %9" PRId64 "%s\n", ch_fault_names[k],
               r->faults[k], pct(r->kind_ms[k], n, 50), pct(r->kind_ms[k], n, 90),
               pct(r->kind_ms[k], n, 100),
               k == F_PARTITION && !r->netns_ok ? "  (disabled: no network namespaces)" : "");
    }
    printf("  %-44s %6s\n", "invariant", "violations");
    for (int i = 0; i < I_COUNT; i++)
        printf("  %-44s %6d\n", ch_invariant_names[i], r->violations[i]);
    printf("  %-44s %6d\n", "TOTAL violations", total);
    printf("  longest overlap of two generations: %" PRId64 " ms (fence window %" PRId64 " ms)\n",
           r->max_overlap_ms, r->stop_timeout_s * 1000 + r->fence_slack_ms);
    printf("  recovery time (ms, end of fault -> all nodes in one generation): n=%zu p50=%" PRId64
           " p90=%" PRId64 " max=%" PRId64 "\n",
           r->n_recovery, pct(r->recovery_ms, r->n_recovery, 50),
           pct(r->recovery_ms, r->n_recovery, 90), pct(r->recovery_ms, r->n_recovery, 100));
    fflush(stdout);
}

static bool all_exited(struct ch_monitor *m, void *arg)
{
    const struct ch_run *r = arg;
    for (int s = 0; s < r->nodes; s++)
        if (!m->agent_exited[s])
            return false;
    return true;
}

/* Faults stop: workers finish, the run must succeed and every agent exit 0 (invariant 5). */
static void finish(struct ch_run *r)
{
    int fd = open(r->gofile, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    cr_assert_geq(fd, 0);
    close(fd);
    int64_t deadline = ch_now_ms() + ch_scaled(r, 60000);
    bool done = ch_mon_wait(&r->mon, all_exited, r, deadline);
    int bad = 0;
    for (int s = 0; s < r->nodes; s++) {
        struct ch_agent *a = &r->a[s];
        int status = 0;
        if (!done && !r->mon.agent_exited[s]) {
            printf("  agent %s did not exit after the run finished\n", a->node);
            ch_agent_kill(r, s);
            bad++;
            continue;
        }
        waitpid(a->pid, &status, 0);
        ch_mon_watch_agent(&r->mon, s, 0);
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (code != 0) {
            printf("  agent %s exited %d at the end, wanted 0\n", a->node, code);
            bad++;
        }
        a->pid = 0;
    }
    if (bad) {
        r->violations[I_SUCCESS] += bad;
        ch_print_agent_logs(r, 20);
    }
    r->violations[I_ORPHANS] += ch_check_orphans(r, ch_now_ms() + ch_scaled(r, 10000));
}

static void episode(struct ch_run *r, int ep)
{
    r->episode = ep;
    r->violated_this_episode = false;
    ch_mon_lock(&r->mon);
    r->mon.episode = ep;
    ch_mon_unlock(&r->mon);
    enum ch_fault kind = draw_fault(r);
    r->faults[kind]++;
    char what[512] = "";
    int64_t t0 = ch_now_ms();
    bool new_gen = ch_fault_inject(r, kind, what, sizeof(what));
    int64_t t1 = ch_now_ms();
    int64_t gen = wait_recovered(r, new_gen ? r->current_gen : -1, t1 + r->episode_deadline_ms);
    int64_t t2 = ch_now_ms();
    if (gen < 0) {
        printf("ep %3d %-18s %s: NO RECOVERY within %" PRId64 " ms\n", ep, ch_fault_names[kind],
               what, r->episode_deadline_ms);
        r->violations[I_SUCCESS]++;
        show_hang(r);
        violation_evidence(r);
        return;
    }
    r->recovery_ms[r->n_recovery++] = t2 - t1;
    r->kind_ms[kind][r->n_kind[kind]++] = t2 - t1;
    r->current_gen = gen;
    int v = ch_check_overlap(r) + ch_check_ranks(r);
    v += ch_check_orphans(r, ch_now_ms() + ch_scaled(r, (r->stop_timeout_s + 5) * 1000));
    printf("ep %3d %-18s %-60s inject %5" PRId64 " ms, recovered in %5" PRId64
           " ms (generation %" PRId64 ")%s\n",
           ep, ch_fault_names[kind], what, t1 - t0, t2 - t1, gen, v ? "  VIOLATION" : "");
    fflush(stdout);
    if (v || r->violated_this_episode)
        violation_evidence(r);
}

/* Invariant 3 must see a process of ours that no agent owns: start one (a tagged worker, child
 * of the driver) and ask the scan. */
static void self_check_orphan_scan(struct ch_run *r)
{
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    const char *argv[] = {WORKER, "hang", NULL};
    char *envp[] = {r->tagenv, NULL};
    pid_t pid = fork();
    if (pid == 0) {
        if (dup2(p[1], 1) < 0)
            _exit(126);
        execve(argv[0], (char *const *)argv, envp);
        _exit(127);
    }
    close(p[1]);
    cr_assert_gt(pid, 0);
    char line[64] = "";
    ssize_t n = read(p[0], line, sizeof(line) - 1); /* "ready <pid>": it has exec'd */
    close(p[0]);
    bool found = n > 0 && ch_scan_finds(r, pid);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    cr_assert(found, "self-check: the process-table scan missed a stray process (pid %d)",
              (int)pid);
}

TestSuite(chaos, .init = setup, .fini = teardown);

Test(chaos, episodes)
{
    struct ch_run *r = &R;
    int64_t start = ch_now_ms();
    self_check_orphan_scan(r);
    r->netns_ok = r->ns_nodes > 0 && ch_netns_setup(r);
    /* CI runs as root with iproute2: a chaos run without its partition fault must not pass */
    cr_assert(r->netns_ok || r->ns_nodes == 0 || !ea_test_in_ci(),
              "CI: the partition fault needs network namespaces (see the line above)");
    int total_nproc = 0;
    for (int s = 0; s < r->nodes; s++) {
        r->a[s].nproc = ch_rand_range(r, 1, 2);
        r->a[s].in_ns = r->netns_ok && s >= r->nodes - r->ns_nodes;
        total_nproc += r->a[s].nproc;
    }
    printf("chaos: seed %" PRIu64 ", %d episode(s), %d agents, world %d, dir %s\n", r->seed,
           r->episodes, r->nodes, total_nproc, r->dir);
    for (int s = 0; s < r->nodes; s++)
        ch_agent_start(r, s);
    int64_t gen = wait_recovered(r, -1, ch_now_ms() + ch_scaled(r, 60000));
    r->current_gen = gen;
    if (gen < 0) {
        show_hang(r);
        cr_assert_fail("the run never started with all %d agents", r->nodes);
    }
    printf("ep   0 %-18s %-60s started in %" PRId64 " ms (generation %" PRId64 ")\n", "start", "-",
           ch_now_ms() - start, gen);
    for (int ep = 1; ep <= r->episodes; ep++) {
        episode(r, ep);
        if (r->violations[I_SUCCESS])
            break; /* a hang: the rest would measure nothing */
    }
    if (!r->violations[I_SUCCESS])
        finish(r);
    summary(r, ch_now_ms() - start);
    int total = 0;
    for (int i = 0; i < I_COUNT; i++)
        total += r->violations[i];
    cr_assert_eq(total, 0, "%d invariant violation(s) with seed %" PRIu64 " (see above)", total,
                 r->seed);
}
