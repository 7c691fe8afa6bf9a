// SPDX-License-Identifier: Apache-2.0
/*
 * Real PyTorch end to end (issue #13): four elastic-agent processes on a real etcd run an
 * unmodified DDP training script (examples/pytorch/train_elastic.py: gloo on CPU, checkpoint
 * to a shared directory every epoch, resume from it on start) with Debian's python3-torch.
 * The node holding rank 0 is SIGKILLed in the middle of an epoch; the survivors must run again
 * as 3 ranks within the lease TTL (+1.5 s for etcd's expiry granularity) and resume from the
 * last checkpoint; a fifth agent joins and the job scales back to 4; every agent exits 0 with no
 * restart charged. Afterwards the per-round worker logs (--log-dir) prove the training itself:
 * every round resumed from the last saved epoch, each epoch was saved exactly once and in order,
 * only the epoch a restart interrupted was begun twice, and the loss went down.
 *
 * Waits are on log lines (inotify) and pidfds with deadlines, never sleeps. Without an
 * importable torch (/usr/bin/python3, package python3-torch, installed by
 * scripts/install-deps.sh --test) the test fails: it never skips.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "etcd_harness.h"
#include "harness.h"

#define PYTHON "/usr/bin/python3"
#define TRAIN EA_SOURCE_DIR "/examples/pytorch/train_elastic.py"
#define RUN "pt"
#define EPOCHS 8
#define TTL "2" /* etcd's minimum lease TTL is about 1.5 s */
#define TTL_MS 2000
#define EXPIRY_SLACK_MS 1500 /* etcd revokes expired leases in its own time, up to ~1 s late */
#define MAX_ROUNDS 32
/* All four first agents must make round 1 together: a generous --settle keeps a slow start
 * (loaded machine) from committing a round of three first. It also delays the scale-up. */
#define SETTLE "3"

static char dir[256], ckpt[300], logs[300];
static struct etcd_harness eh;
static struct h_agent agents[5];
static int n_started;

static void setup(void)
{
    h_mkdtemp(dir, sizeof(dir), "pytorch");
    snprintf(ckpt, sizeof(ckpt), "%s/ckpt", dir);
    snprintf(logs, sizeof(logs), "%s/logs", dir);
    prctl(PR_SET_CHILD_SUBREAPER, 1); /* orphans of the killed agent come to us */
    n_started = 0;
}

static void teardown(void)
{
    h_kill_agents(); /* whatever a failed assertion left running */
    for (int i = 0; i < n_started; i++)
        if (!agents[i].reaped) {
            h_agent_signal(&agents[i], SIGKILL);
            h_agent_wait(&agents[i], 5000);
        }
    etcd_harness_stop(&eh);
    if (getenv("EA_E2E_KEEP"))
        cr_log_warn("kept %s", dir);
    else
        h_rmdir(dir);
}

TestSuite(pytorch, .init = setup, .fini = teardown, .timeout = 300);

static struct h_agent *start(const char *name)
{
    cr_assert_lt(n_started, 5);
    struct h_agent *a = &agents[n_started++];
    /* torchrun's --nnodes form; a lost node or a failure it causes must cost no restart */
    static const char *const opts[] = {"--nnodes",       "3:4", "--settle",       SETTLE,
                                       "--lease-ttl",    TTL,   "--stop-timeout", "2",
                                       "--max-restarts", "0",   "--local-addr",   "127.0.0.1",
                                       "--tee",          NULL};
    const char *args[64] = {"--rdzv-endpoint", eh.endpoints, "--run-id",  RUN,
                            "--node-id",       name,         "--log-dir", logs};
    int n = 8;
    for (int i = 0; opts[i]; i++)
        args[n++] = opts[i];
    const char *cmd[] = {
        "--",          PYTHON, TRAIN, "--ckpt-dir", ckpt, "--epochs", h_fmt("%d", EPOCHS),
        "--step-time", "0.03", NULL};
    for (int i = 0; cmd[i]; i++)
        args[n++] = cmd[i];
    args[n] = NULL;
    h_agent_start(a, dir, name, args);
    return a;
}

/* The first line of `path` containing `needle`, into line; false if none. */
static bool find_line(const char *path, const char *needle, char *line, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool found = false;
    while (!found && fgets(line, (int)size, f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    if (found)
        line[strcspn(line, "\n")] = '\0';
    return found;
}

static void wait_log(const struct h_agent *a, const char *needle, int timeout_ms)
{
    bool ok = h_log_wait(a, needle, timeout_ms);
    if (!ok)
        h_show_log(a);
    cr_assert(ok, "'%s' not in %s within %d ms", needle, a->log, timeout_ms);
}

/* Wait for `needle` in the agent's stdout (the workers' tee'd output). */
static void wait_out(const struct h_agent *a, const char *needle, int timeout_ms)
{
    struct h_agent view = *a;
    snprintf(view.log, sizeof(view.log), "%s", a->out);
    bool ok = h_log_wait(&view, needle, timeout_ms);
    if (!ok) {
        h_show_log(a);
        h_show_log(&view);
    }
    cr_assert(ok, "'%s' not in %s within %d ms", needle, a->out, timeout_ms);
}

/* Wait until the stdout of one of `a[0..n)` contains `needle`: its index (asserted in time). */
static int wait_out_any(struct h_agent *const *a, int n, const char *needle, int timeout_ms)
{
    int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    cr_assert_geq(fd, 0);
    cr_assert_geq(inotify_add_watch(fd, dir, IN_MODIFY), 0);
    int64_t deadline = h_now_ms() + timeout_ms;
    for (;;) {
        for (int i = 0; i < n; i++)
            if (h_file_contains(a[i]->out, needle)) {
                close(fd);
                return i;
            }
        int64_t left = deadline - h_now_ms();
        if (left <= 0)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) == 1) {
            char buf[4096];
            while (read(fd, buf, sizeof(buf)) > 0)
                ;
        }
    }
    close(fd);
    for (int i = 0; i < n; i++)
        h_show_log(a[i]);
    cr_assert_fail("'%s' not in any worker output within %d ms", needle, timeout_ms);
    return -1;
}

/* The agent's "round N (generation G): started ..." line containing `what`: N, and the line. */
static int round_with(const struct h_agent *a, const char *what, char *line, size_t size)
{
    char l[1024];
    FILE *f = fopen(a->log, "r");
    cr_assert(f);
    int round = -1;
    while (fgets(l, sizeof(l), f)) {
        const char *r = strstr(l, "INFO: round ");
        if (r && strstr(l, ": started ") && strstr(l, what)) {
            round = atoi(r + strlen("INFO: round "));
            l[strcspn(l, "\n")] = '\0';
            snprintf(line, size, "%s", l);
            break;
        }
    }
    fclose(f);
    return round;
}

/* ---- what the workers logged, round by round (--log-dir DIR/<run>/<round>/rank_<r>.out) ---- */

struct round_log {
    int round;
    int workers;   /* rank_*.out files whose worker started (printed its "start:" line) */
    int world;     /* from the "[train rank r/W]" prefix; all workers agree */
    int resumed;   /* the epoch every worker resumed from (0 = fresh); all agree; -1 = none */
    int begun_max; /* highest "epoch E begin" */
    int saved_min, saved_max, saved_n; /* "checkpoint epoch E saved" lines */
    double loss[EPOCHS + 1];           /* "epoch E loss L" (0 = not completed here) */
    int done;                          /* "done:" lines */
    double first_loss, last_loss;      /* from the "done:" line */
};

/* Parse one worker's log into rl; false if the worker never got as far as saying where it
 * started from (stopped while importing torch: it trained nothing). */
static bool parse_worker_log(const char *path, struct round_log *rl)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    char line[1024];
    int resumed = -1, last_saved = 0;
    while (fgets(line, sizeof(line), f)) {
        const char *p = strstr(line, "[train rank ");
        if (!p)
            continue;
        int rank, world;
        cr_assert_eq(sscanf(p, "[train rank %d/%d]", &rank, &world), 2, "%s: %s", path, line);
        if (rl->world == 0)
            rl->world = world;
        cr_assert_eq(world, rl->world, "round %d: worlds %d and %d", rl->round, world, rl->world);
        const char *msg = strchr(p, ']') + 2;
        int e;
        double loss, loss2;
        if (strncmp(msg, "start:", 6) == 0) {
            const char *r = strstr(msg, "resumed from epoch ");
            resumed = r ? atoi(r + strlen("resumed from epoch ")) : 0;
            cr_assert(r || strstr(msg, "fresh"), "%s: %s", path, line);
        } else if (sscanf(msg, "epoch %d begin", &e) == 1 && strstr(msg, "begin")) {
            cr_assert(e >= 1 && e <= EPOCHS);
            if (e > rl->begun_max)
                rl->begun_max = e;
        } else if (sscanf(msg, "epoch %d loss %lf", &e, &loss) == 2) {
            cr_assert(e >= 1 && e <= EPOCHS);
            rl->loss[e] = loss;
        } else if (sscanf(msg, "checkpoint epoch %d saved", &e) == 1) {
            /* in order, one at a time, within this worker */
            cr_assert(last_saved == 0 || e == last_saved + 1,
                      "round %d: checkpoint epoch %d saved after epoch %d (%s)", rl->round, e,
                      last_saved, path);
            last_saved = e;
            if (rl->saved_n++ == 0)
                rl->saved_min = e;
            rl->saved_max = e;
        } else if (sscanf(msg, "done: epochs %d, first loss %lf, last loss %lf", &e, &loss,
                          &loss2) == 3) {
            rl->done++;
            rl->first_loss = loss;
            rl->last_loss = loss2;
        }
    }
    fclose(f);
    if (resumed == -1) {
        cr_assert_eq(rl->begun_max, 0, "%s: training without a start line", path);
        return false;
    }
    if (rl->resumed == -1)
        rl->resumed = resumed;
    cr_assert_eq(resumed, rl->resumed, "round %d: workers resumed from epochs %d and %d", rl->round,
                 resumed, rl->resumed);
    return true;
}

/* Read every round that started workers, in order; returns how many. */
static int read_rounds(struct round_log *out, int max)
{
    int n = 0;
    for (int r = 1; r <= MAX_ROUNDS && n < max; r++) {
        const char *rd = h_fmt("%s/%s/%d", logs, RUN, r);
        DIR *d = opendir(rd);
        if (!d)
            continue; /* no worker of that round started (e.g. its rank 0 was the dead node) */
        struct round_log *rl = &out[n];
        memset(rl, 0, sizeof(*rl));
        rl->round = r;
        rl->resumed = -1;
        for (struct dirent *e; (e = readdir(d));) {
            size_t len = strlen(e->d_name);
            if (strncmp(e->d_name, "rank_", 5) != 0 || len < 4 ||
                strcmp(e->d_name + len - 4, ".out") != 0)
                continue;
            rl->workers += parse_worker_log(h_fmt("%s/%s", rd, e->d_name), rl);
        }
        closedir(d);
        if (rl->workers > 0)
            n++;
    }
    return n;
}

Test(pytorch, ddp_kill_rank0_node_resume_from_checkpoint_then_scale_back_to_4)
{
    h_require_torch();
    cr_assert_eq(etcd_harness_start(&eh, 1), 0, "cannot start etcd");
    setenv("OMP_NUM_THREADS", "1", 1);     /* 4 workers share 2 cores */
    setenv("GLOO_SOCKET_IFNAME", "lo", 1); /* loopback only */
    int64_t t_launch = h_now_ms();

    /* 1. four agents, one worker each: round 1, world 4 */
    struct h_agent *a[4];
    for (int i = 0; i < 4; i++)
        a[i] = start(h_fmt("n%d", i));
    int victim = -1;
    char line[1024];
    for (int i = 0; i < 4; i++) {
        wait_log(a[i], "round 1 ", 60000);
        cr_assert_eq(round_with(a[i], "", line, sizeof(line)), 1);
        cr_assert(strstr(line, " of world 4,"),
                  "round 1 must hold all 4 nodes (did an agent take longer than --settle %s s "
                  "to join?); n%d: %s",
                  SETTLE, i, line);
        if (strstr(line, "ranks 0-0 of world 4"))
            victim = i;
    }
    cr_assert_geq(victim, 0, "nobody got rank 0 in round 1");

    /* 2. SIGKILL the node of rank 0 (the checkpoint writer and the gloo store host) once its
     * worker has begun epoch 3: epochs 1 and 2 are saved, epoch 3 cannot complete without it. */
    wait_out(a[victim], "[train rank 0/4] epoch 3 begin", 120000);
    cr_assert(h_file_contains(a[victim]->out, "[train rank 0/4] checkpoint epoch 2 saved"));
    h_agent_signal(a[victim], SIGKILL);
    int64_t t_kill = h_now_ms();
    int64_t t_round1 = t_kill - t_launch;
    struct h_agent *s[3];
    for (int i = 0, k = 0; i < 4; i++)
        if (i != victim)
            s[k++] = a[i];

    /* 3. the survivors run as 3 ranks within the lease TTL + etcd's expiry slack */
    int r3 = -1;
    for (int k = 0; k < 3; k++) {
        wait_log(s[k], " of world 3,", TTL_MS + 20000);
        int r = round_with(s[k], " of world 3,", line, sizeof(line));
        cr_assert(r3 == -1 || r == r3, "survivors restarted in rounds %d and %d", r3, r);
        r3 = r;
    }
    int64_t restarted = h_now_ms() - t_kill;
    cr_assert_eq(h_agent_wait(a[victim], 5000), 128 + SIGKILL);

    /* ... and resume from the checkpoint of epoch 2: the interrupted epoch 3 runs again */
    for (int k = 0; k < 3; k++)
        wait_out(s[k], "/3] start: ", 60000);
    for (int k = 0; k < 3; k++) {
        cr_assert(find_line(s[k]->out, "/3] start: ", line, sizeof(line)));
        cr_assert(strstr(line, "resumed from epoch 2"), "survivor: %s", line);
    }
    wait_out_any(s, 3, "/3] epoch 3 begin", 30000);
    int64_t resumed = h_now_ms() - t_kill;
    /* one epoch at world 3, saved */
    wait_out_any(s, 3, "/3] checkpoint epoch 3 saved", 60000);

    /* 4. a new node joins: back to 4 */
    struct h_agent *x = start("n4");
    int64_t t_join = h_now_ms();
    struct h_agent *b[4] = {s[0], s[1], s[2], x};
    for (int k = 0; k < 4; k++)
        wait_log(b[k], h_fmt("round %d ", r3 + 1), 30000);
    int64_t scaled = h_now_ms() - t_join;
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(round_with(b[k], h_fmt("round %d ", r3 + 1), line, sizeof(line)), r3 + 1);
        cr_assert(strstr(line, " of world 4,"), "scale-up round: %s", line);
    }
    wait_out_any(b, 4, "/4] start: ", 60000);

    /* 5. the run finishes: exit 0 everywhere, nothing charged to --max-restarts 0 */
    for (int k = 0; k < 4; k++)
        h_expect_exit(b[k], 0, 120000);
    int64_t total = h_now_ms() - t_launch;
    for (int k = 0; k < 4; k++) {
        cr_assert(h_file_contains(b[k]->log, "run '" RUN "' succeeded"));
        cr_assert(find_line(b[k]->log, h_fmt("round %d (", r3 + 1), line, sizeof(line)));
        cr_assert(strstr(line, "restarts 0/0"), "a node loss or join was charged: %s", line);
    }

    /* 6. the training, round by round */
    struct round_log rl[MAX_ROUNDS];
    int n = read_rounds(rl, MAX_ROUNDS);
    int saved = 0; /* the last checkpoint written before the round */
    double first_loss = 0, last_loss = 0;
    int trained = 0; /* rounds that saved a checkpoint */
    bool saw3 = false;
    for (int i = 0; i < n; i++) {
        struct round_log *r = &rl[i];
        cr_log_info("round %d: %d workers, world %d, resumed from epoch %d, began up to %d, "
                    "saved %d..%d",
                    r->round, r->workers, r->world, r->resumed, r->begun_max, r->saved_min,
                    r->saved_max);
        /* every start resumes from the latest checkpoint */
        cr_assert_eq(r->resumed, saved, "round %d resumed from epoch %d, the last saved was %d",
                     r->round, r->resumed, saved);
        /* checkpoints continue where the last one left off, each epoch once */
        if (r->saved_n > 0) {
            cr_assert_eq(r->workers, r->world, "round %d trained with %d of %d workers", r->round,
                         r->workers, r->world);
            cr_assert_eq(r->saved_min, saved + 1, "round %d saved epoch %d after %d", r->round,
                         r->saved_min, saved);
            cr_assert_eq(r->saved_n, r->saved_max - r->saved_min + 1);
            saved = r->saved_max;
            trained++;
            saw3 |= r->world == 3;
        }
        /* nothing was begun twice but the one epoch a restart interrupted */
        cr_assert(r->begun_max <= saved + 1, "round %d began epoch %d with %d saved", r->round,
                  r->begun_max, saved);
        for (int e = 1; e <= EPOCHS; e++)
            if (r->loss[e] > 0) {
                cr_assert(e > r->resumed && e <= saved, "round %d: loss of epoch %d", r->round, e);
                if (e == 1)
                    first_loss = r->loss[e];
                if (e == EPOCHS)
                    last_loss = r->loss[e];
            }
    }
    cr_assert_eq(saved, EPOCHS, "the last checkpoint is epoch %d of %d", saved, EPOCHS);
    cr_assert_geq(trained, 3, "rounds that trained: %d (world 4, 3, 4)", trained);
    cr_assert_eq(rl[0].world, 4);
    cr_assert_eq(rl[n - 1].world, 4);
    cr_assert_eq(rl[n - 1].done, 4, "the last round's 4 workers all finished");
    cr_assert(saw3, "no epoch was trained at world 3");
    cr_assert(first_loss > 0 && last_loss > 0);
    cr_assert_lt(last_loss, first_loss, "loss %f at epoch %d, %f at epoch 1", last_loss, EPOCHS,
                 first_loss);
    cr_assert_lt(rl[n - 1].last_loss, rl[n - 1].first_loss);

    cr_log_info("round 1 at world 4 until the kill: %lld ms after launch", (long long)t_round1);
    cr_log_info("SIGKILL of rank 0's node -> survivors restarted as world 3: %lld ms "
                "(lease TTL %d ms); -> training resumed (epoch 3 begun again): %lld ms",
                (long long)restarted, TTL_MS, (long long)resumed);
    cr_log_info("5th agent joined -> world 4 round started: %lld ms (--settle " SETTLE ")",
                (long long)scaled);
    cr_log_info("whole run: %lld ms; loss %.4f (epoch 1) -> %.4f (epoch %d)", (long long)total,
                first_loss, last_loss, EPOCHS);
    cr_assert_lt(restarted, TTL_MS + EXPIRY_SLACK_MS,
                 "survivors restarted %lld ms after the kill, lease TTL %d ms",
                 (long long)restarted, TTL_MS);
}
