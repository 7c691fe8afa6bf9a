// SPDX-License-Identifier: Apache-2.0
/*
 * A rack cut at its switch (issue 41): six "hosts", each agent in its own network namespace on
 * one bridge, three with --failure-domain rackA and three with rackB (the ring alternates them).
 * rackA's three switch ports go down at once; the three rackB agents must start their workers in
 * the NEXT round (one round, not one per eviction) with exactly the three of them, within
 * seconds (the ring and the cross-domain confirmation), not after the 10 s lease, and no rackB
 * member may be evicted. With the coordinator in rackA its successor is in rackB and the
 * coordinator's key is taken once, after at most 3 claims. Each case with the coordinator among
 * the cut and not, on two stores: etcd on a seventh host of the switch (the rack is gone, store
 * and all) and the shared file store (the cut rack still reaches the store: then, too, no rackB
 * member is evicted, and the cut members, evicted, wait before they rejoin: loose bounds on the
 * revokes and rounds of the 30 s after the cut, where they were 27-33 revokes before;
 * docs/security.md, "A rack cut at its switch").
 *
 * What it reads: the workers' environment records (`ea-testworker record`: ELASTIC_ROUND,
 * ELASTIC_NODE_ID, GROUP_WORLD_SIZE), an empty file s<round>.<node> each worker writes once its
 * record is there (what the test waits on, inotify), the agents' logs (who revoked whom), their
 * /metrics (ring links up; elastic_agent_coordinator_claims_total), and the store (a watch on
 * `coord` from the test process: every claim that won is a create of that key).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "etcd_harness.h"
#include "harness.h"
#include "kv.h"
#include "netns_harness.h"

#define W EA_HELPERS_DIR "/ea-testworker"
#define N 6
#define RUN "rack"
#define COORD_KEY "/elastic/" RUN "/coord"
#define HTTP_PORT "9464" /* each agent's /metrics, on loopback in its own namespace */

static char dir[256], state[300], envdir[300];
static char sw[NETNS_NAME_MAX], ns[N][NETNS_NAME_MAX];
static struct h_agent a[N];
static const char *dom[N]; /* each host's --failure-domain */
/* The store: the file backend (shared filesystem: a cut node still reaches it), or etcd on a
 * seventh host of the same switch (a cut node loses it with its peers: the rack is gone). */
static bool on_etcd;
static char st[NETNS_NAME_MAX];
#define ETCD_ADDR "10.79.0.100"

static void setup(void)
{
    netns_require();
    h_suite_dirs("rackns", dir, state, envdir);
}

static void teardown(void)
{
    netns_cleanup(); /* SIGKILLs the agents still running, removes namespaces and bridges */
    if (getenv("EA_E2E_KEEP"))
        cr_log_warn("kept %s", dir);
    else
        h_rmdir(dir);
}

TestSuite(rack_netns, .init = setup, .fini = teardown, .timeout = 150);

static void start_in(int i)
{
    const char *cmd = h_fmt("%s record %s && : > %s/s$ELASTIC_ROUND.$ELASTIC_NODE_ID && "
                            "exec %s wait-file %s/go",
                            W, envdir, envdir, W, envdir);
    const char *argv[] = {EA_AGENT_BIN,
                          "--run-id",
                          RUN,
                          "--node-id",
                          h_fmt("n%d", i),
                          "--min",
                          "3",
                          "--max",
                          h_fmt("%d", N),
                          "--settle",
                          "1",
                          "--stop-timeout",
                          "2",
                          "--lease-ttl",
                          "10",
                          on_etcd ? "--rdzv-endpoint" : "--state-dir",
                          on_etcd ? ETCD_ADDR ":2379" : state,
                          "--local-addr",
                          h_fmt("10.79.0.%d", i + 1),
                          "--failure-domain",
                          dom[i],
                          "--nic-discovery",
                          "off",
                          "--log-level",
                          "debug",
                          "--http",
                          "127.0.0.1:" HTTP_PORT,
                          "--",
                          "/bin/sh",
                          "-c",
                          cmd,
                          NULL};
    memset(&a[i], 0, sizeof(a[i]));
    snprintf(a[i].log, sizeof(a[i].log), "%s/n%d.log", dir, i);
    snprintf(a[i].out, sizeof(a[i].out), "%s/n%d.out", dir, i);
    a[i].pid = netns_spawn(&(struct netns_spawn_opts){.ns = ns[i],
                                                      .hostname = h_fmt("host%d", i),
                                                      .stdout_path = a[i].out,
                                                      .stderr_path = a[i].log},
                           argv);
    a[i].pidfd = (int)syscall(SYS_pidfd_open, a[i].pid, 0);
    cr_assert_geq(a[i].pidfd, 0, "pidfd_open: %s", strerror(errno));
}

/* What one worker's environment record says. */
struct rec {
    int64_t round;
    int world; /* GROUP_WORLD_SIZE: the round's members */
    int node;  /* i of n<i> */
};

/* Every environment record in envdir, up to `max`: how many. */
static int records(struct rec *out, int max)
{
    DIR *d = opendir(envdir);
    cr_assert(d, "opendir %s", envdir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        if (strncmp(e->d_name, "env.", 4) != 0)
            continue;
        const char *path = h_fmt("%s/%s", envdir, e->d_name);
        const char *v = h_env_value(path, "ELASTIC_ROUND");
        cr_assert(v, "%s: no ELASTIC_ROUND", path);
        out[n].round = strtoll(v, NULL, 10);
        v = h_env_value(path, "GROUP_WORLD_SIZE");
        cr_assert(v, "%s: no GROUP_WORLD_SIZE", path);
        out[n].world = atoi(v);
        v = h_env_value(path, "ELASTIC_NODE_ID");
        cr_assert(v && v[0] == 'n', "%s: ELASTIC_NODE_ID", path);
        out[n].node = atoi(v + 1);
        n++;
    }
    closedir(d);
    return n;
}

/* The members of round `round` as the records say (a bit per node); *ret_world: their
 * GROUP_WORLD_SIZE (-1 when they disagree). */
static unsigned members_of(int64_t round, int *ret_world)
{
    struct rec r[256];
    int n = records(r, 256);
    unsigned set = 0;
    int world = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].round != round)
            continue;
        set |= 1u << r[i].node;
        world = world == 0 || world == r[i].world ? r[i].world : -1;
    }
    *ret_world = world;
    return set;
}

static void show_logs(void)
{
    for (int i = 0; i < N; i++)
        h_show_log(&a[i]);
}

/* The value of metric `name` (a whole number) on agent i's /metrics (a GET on loopback inside its
 * namespace: a cut port does not stop it); -1 when it cannot be read (not listening yet). */
static long long metric_of(int i, const char *name)
{
    int fd = netns_socket(ns[i], AF_INET, SOCK_STREAM);
    cr_assert_geq(fd, 0, "socket in %s: %s", ns[i], strerror(-fd));
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)atoi(HTTP_PORT)),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    static char buf[65536];
    size_t len = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
        if (write(fd, req, sizeof(req) - 1) == (ssize_t)sizeof(req) - 1)
            for (ssize_t got;
                 len < sizeof(buf) - 1 && (got = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0;)
                len += (size_t)got;
    }
    close(fd);
    buf[len] = '\0';
    const char *line = h_fmt("\nelastic_agent_%s ", name);
    const char *at = strstr(buf, line);
    return at ? atoll(at + strlen(line)) : -1;
}

static int links_up(int i)
{
    return (int)metric_of(i, "liveness_links_up");
}

/* Tries to take `coord` all six agents made (elastic_agent_coordinator_claims_total). */
static long long claims_tried(void)
{
    long long sum = 0;
    for (int i = 0; i < N; i++) {
        long long c = metric_of(i, "coordinator_claims_total");
        cr_assert_geq(c, 0, "n%d: no elastic_agent_coordinator_claims_total", i);
        sum += c;
    }
    return sum;
}

/* Every agent's two ring links up (a cut before that is another case: links that never came
 * up). Polled every 100 ms until the deadline, on each agent's pidfd (an agent that dies ends
 * the wait: nothing else wakes on a link coming up). */
static void ring_up(int timeout_ms)
{
    int64_t deadline = h_now_ms() + timeout_ms;
    for (int i = 0; i < N;) {
        int up = links_up(i);
        if (up == 2) {
            i++;
            continue;
        }
        int left = (int)(deadline - h_now_ms());
        if (left <= 0)
            show_logs();
        cr_assert_gt(left, 0, "n%d: %d ring link(s) up after %d ms", i, up, timeout_ms);
        struct pollfd p = {.fd = a[i].pidfd, .events = POLLIN};
        cr_assert_eq(poll(&p, 1, left < 100 ? left : 100), 0, "n%d exited", i);
    }
}

/* etcd on its own host on the switch (ETCD_ADDR), and this test process moved into that host's
 * namespace, where it reaches etcd on loopback (to watch `coord`). */
static void etcd_host(const char *br)
{
    netns_ns_create("st", st);
    netns_veth_bridge_in(st, "eth0", ETCD_ADDR "/24", sw, br);
    struct h_agent e = {0};
    snprintf(e.log, sizeof(e.log), "%s/etcd.log", dir);
    const char *data = h_fmt("%s/etcd", dir);
    const char *argv[] = {"etcd",
                          "--name",
                          "st",
                          "--data-dir",
                          data,
                          "--listen-client-urls",
                          "http://0.0.0.0:2379",
                          "--advertise-client-urls",
                          "http://" ETCD_ADDR ":2379",
                          "--listen-peer-urls",
                          "http://127.0.0.1:2380",
                          "--initial-advertise-peer-urls",
                          "http://127.0.0.1:2380",
                          "--initial-cluster",
                          "st=http://127.0.0.1:2380",
                          "--logger",
                          "zap",
                          "--log-outputs",
                          "stderr",
                          NULL};
    netns_spawn(&(struct netns_spawn_opts){.ns = st, .stderr_path = e.log, .stdout_path = e.log},
                argv);
    bool ok = h_log_wait(&e, "serving client traffic", 20000);
    if (!ok)
        h_show_log(&e);
    cr_assert(ok, "etcd did not start");
    int fd = open(h_fmt("/run/netns/%s", st), O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0, "open the store host's namespace: %s", strerror(errno));
    cr_assert_eq(setns(fd, CLONE_NEWNET), 0, "setns: %s", strerror(errno));
    close(fd);
}

/* Six hosts on one bridge; n0 joins first (it coordinates), then n1 to n5 one after another
 * (newcomers are ranked by arrival); wait until a round runs with all six and every worker has
 * started: that round. */
static int64_t six_hosts_running(void)
{
    char br[NETNS_NAME_MAX] = "br0";
    netns_ns_create("sw", sw);
    netns_bridge_in(sw, br);
    for (int i = 0; i < N; i++) {
        netns_ns_create(h_fmt("h%d", i), ns[i]);
        netns_veth_bridge_in(ns[i], "eth0", h_fmt("10.79.0.%d/24", i + 1), sw, br);
    }
    if (on_etcd)
        etcd_host(br);
    for (int i = 0; i < N; i++) {
        start_in(i);
        cr_assert(h_log_wait(&a[i], "joined run", 20000), "n%d joins", i);
    }
    for (int i = 0; i < N; i++) {
        bool ok = h_log_wait(&a[i], h_fmt("of %d, master", N), 30000);
        if (!ok)
            h_show_log(&a[i]);
        cr_assert(ok, "n%d: no round with all %d nodes", i, N);
    }
    /* the round of six: the latest round any record has with six members */
    int64_t round = -1;
    for (int64_t deadline = h_now_ms() + 10000; round < 0 || h_now_ms() < deadline;) {
        struct rec r[256];
        int n = records(r, 256);
        for (int i = 0; i < n; i++)
            if (r[i].world == N && r[i].round > round)
                round = r[i].round;
        if (round >= 0 && h_wait_files(envdir, h_fmt("s%lld.", (long long)round), N,
                                       (int)(deadline - h_now_ms())) == N)
            break;
        if (round < 0)
            h_wait_files(envdir, "env.", n + 1, (int)(deadline - h_now_ms()));
        if (h_now_ms() >= deadline)
            break;
    }
    int world = 0;
    unsigned set = round >= 0 ? members_of(round, &world) : 0;
    cr_assert_eq(set, (1u << N) - 1, "round %lld: members 0x%x, not all six", (long long)round,
                 set);
    cr_assert_eq(world, N);
    ring_up(15000);
    return round;
}

/* The node `coord` names now (its create revision in *ret_rev), "" when there is none. */
static const char *coord_holder(struct kv *kv, int64_t *ret_rev)
{
    static char holder[64];
    struct kv_entry e = {0};
    struct ea_error err = {0};
    holder[0] = '\0';
    *ret_rev = 0;
    int r = kv_get(kv, COORD_KEY, &e, &err);
    if (r == KV_ENOTFOUND)
        return holder;
    cr_assert_geq(r, 0, "get coord: %s", err.msg);
    json_t *j = json_loads(e.value, 0, NULL);
    const char *node = j ? json_string_value(json_object_get(j, "node")) : NULL;
    cr_assert(node, "coord: %s", e.value);
    snprintf(holder, sizeof(holder), "%s", node);
    *ret_rev = e.create_revision;
    json_decref(j);
    kv_entry_clear(&e);
    return holder;
}

/* A watch on `coord` from now on: the claims that won after this point. */
struct claims {
    struct kv *kv;
    int64_t watch;
};

static void claims_watch(struct claims *c)
{
    struct ea_error err = {0};
    int r = on_etcd
                ? etcd_harness_open("127.0.0.1:2379", 5000, NULL, NULL, &c->kv, &err)
                : kv_open(&(struct kv_config){.backend = "file", .state_dir = state}, &c->kv, &err);
    cr_assert_geq(r, 0, "open the store: %s", err.msg);
    struct kv_list l = {0};
    cr_assert_geq(kv_list(c->kv, COORD_KEY, &l, &err), 0, "list: %s", err.msg);
    cr_assert_geq(kv_watch(c->kv, COORD_KEY, l.revision + 1, &c->watch, &err), 0, "watch: %s",
                  err.msg);
    kv_list_clear(&l);
}

/* Creates of `coord` since claims_watch (each a claim that won), their holders in `who`: the
 * events up to `upto` (the revision the key now standing was created at; 0: none to wait for). */
static int claims_won(struct claims *c, int64_t upto, char *who, size_t who_size)
{
    struct kv_event *ev = NULL;
    size_t n = 0;
    struct ea_error err = {0};
    int64_t seen = 0;
    for (int64_t deadline = h_now_ms() + 10000;;) {
        struct kv_event *more = NULL;
        size_t k = 0;
        cr_assert_geq(kv_read_events(c->kv, &more, &k, &err), 0, "read events: %s", err.msg);
        if (k) {
            struct kv_event *grown = realloc(ev, (n + k) * sizeof(*ev));
            cr_assert(grown);
            ev = grown;
            memcpy(ev + n, more, k * sizeof(*ev));
            n += k;
            free(more); /* the entries moved into ev */
            seen = ev[n - 1].entry.mod_revision;
        } else {
            kv_events_free(more, 0);
        }
        int left = (int)(deadline - h_now_ms());
        if (seen >= upto || left <= 0)
            break;
        struct pollfd p = {.fd = kv_event_fd(c->kv), .events = POLLIN};
        poll(&p, 1, left);
    }
    cr_assert_geq(seen, upto, "the watch on coord never delivered revision %lld", (long long)upto);
    int won = 0;
    who[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        cr_assert_neq(ev[i].type, KV_EVENT_ERROR, "the watch on coord ended: %s", ev[i].message);
        if (ev[i].type != KV_EVENT_PUT || ev[i].entry.create_revision != ev[i].entry.mod_revision)
            continue;
        won++;
        json_t *j = json_loads(ev[i].entry.value, 0, NULL);
        const char *node = j ? json_string_value(json_object_get(j, "node")) : NULL;
        size_t len = strlen(who);
        snprintf(who + len, who_size - len, "%s%s", len ? "," : "", node ? node : "?");
        json_decref(j);
    }
    kv_events_free(ev, n);
    return won;
}

/* The first round after `round` that node i started workers in (its s<k>.n<i> file), waited for
 * until `deadline` (new files in envdir: inotify); -1 when there is none by then. */
static int64_t next_round_of(int i, int64_t round, int64_t deadline)
{
    for (;;) {
        int64_t best = -1;
        int files = 0;
        DIR *d = opendir(envdir);
        cr_assert(d, "opendir %s", envdir);
        for (struct dirent *e; (e = readdir(d));) {
            long long k;
            int node;
            if (e->d_name[0] != 's')
                continue;
            files++;
            if (sscanf(e->d_name, "s%lld.n%d", &k, &node) == 2 && node == i && k > round &&
                (best < 0 || k < best))
                best = k;
        }
        closedir(d);
        int left = (int)(deadline - h_now_ms());
        if (best >= 0 || left <= 0)
            return best;
        h_wait_files(envdir, "s", files + 1, left);
    }
}

/* Who revoked whose lease (the agents' logs: "evictor>evicted ..."), the survivors (a bit per
 * node in `keep`) among the evicted as bits in the return value. */
static unsigned evictions(unsigned keep, char *list, size_t size)
{
    static const char needle[] = "liveness ring: node '";
    unsigned hit = 0;
    list[0] = '\0';
    for (int i = 0; i < N; i++) {
        FILE *f = fopen(a[i].log, "r");
        char line[4096];
        while (f && fgets(line, sizeof(line), f)) {
            const char *at = strstr(line, needle);
            if (!at || !strstr(line, "its lease is revoked"))
                continue;
            int victim = atoi(at + strlen(needle) + 1); /* 'n<i>' */
            size_t len = strlen(list);
            snprintf(list + len, size - len, "%sn%d>n%d", len ? " " : "", i, victim);
            if (victim >= 0 && victim < N && (keep & (1u << victim)))
                hit |= 1u << victim;
        }
        if (f)
            fclose(f);
    }
    return hit;
}

static int domain_of(const char *node)
{
    return node[0] == 'n' ? atoi(node + 1) : -1;
}

/* Cut `cut` (a bit per node, all of rackA) at the switch at once, after a round `round` of six:
 * the survivors' next round, its members, how long it took; the coordinator after it and the
 * claims that won. `coord_cut`: whether the coordinator is among the cut. The cut moment. */
static int64_t cut_the_rack(int64_t round, unsigned cut, bool coord_cut)
{
    struct claims c = {0};
    claims_watch(&c);
    int64_t rev0 = 0;
    char before[64];
    snprintf(before, sizeof(before), "%s", coord_holder(c.kv, &rev0));
    int ci = domain_of(before);
    cr_assert(ci >= 0 && ci < N, "coord is held by '%s'", before);
    cr_assert_eq(!!(cut & (1u << ci)), coord_cut, "the coordinator '%s' is %s the cut", before,
                 coord_cut ? "not among" : "among");
    long long tried0 = claims_tried();
    unsigned keep = ((1u << N) - 1) & ~cut;
    int live = 0;
    for (int i = 0; i < N; i++)
        if (cut & (1u << i))
            netns_port_set(ns[i], "eth0", false); /* at the switch: its packets are lost */
        else
            live++;
    int64_t t0 = h_now_ms();

    /* the survivors' workers of the next round: waited for past the lease, to tell the ring's
     * recovery from the lease's; the time is asserted below, loosely */
    int64_t next[N];
    int started = 0, several = -1;
    for (int i = 0; i < N; i++) {
        if (cut & (1u << i))
            continue;
        next[i] = next_round_of(i, round, t0 + 30000);
        started += next[i] > round;
        if (next[i] > round + 1)
            several = i;
    }
    int64_t took = h_now_ms() - t0;
    int world = 0;
    unsigned set = members_of(round + 1, &world);
    int64_t rev = 0;
    char after[64];
    snprintf(after, sizeof(after), "%s", coord_holder(c.kv, &rev));
    char who[256];
    int won = claims_won(&c, rev > rev0 ? rev : 0, who, sizeof(who));
    long long tried = claims_tried() - tried0; /* the metric follows each agent's loop: after */
    int64_t later = -1;                        /* a survivor in a round after round+1 already */
    for (int i = 0; i < N; i++)
        if (!(cut & (1u << i)) &&
            h_file_contains(a[i].log, h_fmt("round %lld ", (long long)round + 2)))
            later = i;
    char evicted[512];
    unsigned wrong = evictions(keep, evicted, sizeof(evicted));
    cr_log_info("rack cut (coordinator %s): survivors' round %lld (members 0x%x, world %d) "
                "started %lld ms after the cut; coordinator '%s' -> '%s'; claims tried %lld, won "
                "%d (%s); revokes (by>of): %s",
                coord_cut ? "among the cut" : "not cut", (long long)round + 1, set, world,
                (long long)took, before, after, tried, won, who, evicted);
    printf("rack: coordinator %s: cut -> survivors' round %lld workers: %lld ms; members 0x%x; "
           "coord %s -> %s; claims tried %lld won %d; revokes %s\n",
           coord_cut ? "cut" : "kept", (long long)round + 1, (long long)took, set, before, after,
           tried, won, evicted);
    if (started < live || several >= 0 || set != keep || world != live || later >= 0 || wrong)
        show_logs();
    cr_assert_eq(started, live,
                 "only %d of the %d survivors started a round after %lld; revokes "
                 "(by>of) %s",
                 started, live, (long long)round, evicted);
    /* two vantage points inside the cut rack (its watcher, and a prober there) are no evidence
     * against a node outside it: a survivor evicted is the failure this test is about */
    cr_assert_eq(wrong, 0, "survivors evicted (bits 0x%x): revokes %s", wrong, evicted);
    if (!on_etcd) {
        /* the rack still reaches the store: its members renew their leases, so each leaves by
         * the survivors' probes, and one the next round's links find (the first in line to
         * succeed may hold `coord` a moment) can take a round more (CI under load, 2026-11-29:
         * round 2 still had n1); what is asserted here is that no survivor is evicted, and by
         * no_storm() that the rounds and revokes stay bounded */
        kv_close(c.kv);
        return t0;
    }
    cr_assert_lt(several, 0,
                 "n%d's next round was %lld, not %lld: more than one round (%lld ms "
                 "after the cut); revokes (by>of) %s",
                 several, (long long)next[several < 0 ? 0 : several], (long long)round + 1,
                 (long long)took, evicted);
    cr_assert_eq(set, keep, "round %lld: members 0x%x, not the survivors 0x%x",
                 (long long)round + 1, set, keep);
    cr_assert_eq(world, live, "round %lld: GROUP_WORLD_SIZE %d, not %d", (long long)round + 1,
                 world, live);
    cr_assert_lt(later, 0, "n%lld: already past round %lld: more than one round", (long long)later,
                 (long long)round + 1);
    int ai = domain_of(after);
    cr_assert(ai >= 0 && ai < N && !(cut & (1u << ai)),
              "the coordinator after the cut is '%s', not a survivor", after);
    if (coord_cut) { /* a bounded number of claims (issue 41: <= 3), a survivor's the last */
        cr_assert_eq(won, 1, "the coordinator's key was taken %d times (%s)", won, who);
        cr_assert(tried >= 1 && tried <= 3, "%lld claims of the coordinator's key", tried);
    } else {
        cr_assert_str_eq(after, before, "the coordinator changed");
        cr_assert_eq(won, 0, "the coordinator's key was taken (%s)", who);
        cr_assert_eq(tried, 0, "%lld claims of the coordinator's key", tried);
    }
    /* well under the 10 s lease whatever the machine's load (the target, 1.5 s, is reported) */
    cr_assert_lt(took, 8000, "the survivors' round took %lld ms: the lease, not the ring",
                 (long long)took);
    kv_close(c.kv);
    return t0;
}

/* The 30 s after the cut at t0 with the cut rack still reaching the store: its members, evicted,
 * rejoin only after a wait (one lease TTL, then doubled) and are evicted again (nobody reaches
 * them), and nobody else is evicted. Waited out on the agents' pidfds (one that exits ends it).
 * Loose bounds: the verdict must not depend on the machine's load. */
static void no_storm(int64_t round, unsigned cut, int64_t t0)
{
    for (int64_t left; (left = t0 + 30000 - h_now_ms()) > 0;) {
        struct pollfd p[N];
        for (int i = 0; i < N; i++)
            p[i] = (struct pollfd){.fd = a[i].pidfd, .events = POLLIN};
        cr_assert_eq(poll(p, N, (int)left), 0, "an agent exited during the 30 s after the cut");
    }
    int revokes = 0;
    for (int i = 0; i < N; i++)
        revokes += h_count_in(a[i].log, "its lease is revoked");
    int64_t last = round;
    for (int i = 0; i < N; i++)
        for (int64_t k; !(cut & (1u << i)) && (k = next_round_of(i, last, 0)) > 0;)
            last = k;
    char evicted[1024];
    unsigned wrong = evictions(((1u << N) - 1) & ~cut, evicted, sizeof(evicted));
    cr_log_info("30 s after the cut: %d revokes, survivors' rounds %lld to %lld; revokes (by>of): "
                "%s",
                revokes, (long long)round + 1, (long long)last, evicted);
    printf("rack (store reached): 30 s after the cut: %d revokes, %lld rounds\n", revokes,
           (long long)(last - round));
    if (wrong || revokes > 12 || last - round > 10)
        show_logs();
    cr_assert_eq(wrong, 0, "survivors evicted (bits 0x%x): revokes %s", wrong, evicted);
    cr_assert_leq(revokes, 12, "a storm: %d revokes in the 30 s after the cut", revokes);
    cr_assert_leq(last - round, 10, "a storm: %lld rounds in the 30 s after the cut",
                  (long long)(last - round));
}

static const char *const coord_in_a[N] = {"rackA", "rackA", "rackA", "rackB", "rackB", "rackB"};
static const char *const coord_in_b[N] = {"rackB", "rackA", "rackA", "rackA", "rackB", "rackB"};

static void rack_case(bool etcd, const char *const *domains, unsigned cut, bool coord_cut)
{
    on_etcd = etcd;
    memcpy(dom, domains, sizeof(dom));
    int64_t round = six_hosts_running();
    int64_t t0 = cut_the_rack(round, cut, coord_cut);
    if (!etcd)
        no_storm(round, cut, t0);
}

/* The store on the switch too: the rack is gone (peers and store). rackA: the coordinator n0 and
 * n1, n2; rackB: n3, n4, n5. Before the suspicion's `also`, about one run in two took two rounds:
 * the member that took `coord` (n3) had been the first to report its ring neighbour n1 (its
 * create-only key won, n4's report was refused), and as coordinator it skipped the keys it wrote
 * itself: n1 stayed in the next round and was evicted one round later (~3.7 s). */
Test(rack_netns, a_rack_gone_with_the_coordinator_leaves_in_one_round)
{
    rack_case(true, coord_in_a, 0x7, true);
}

/* rackB: the coordinator n0 and n4, n5; rackA: n1, n2, n3. */
Test(rack_netns, a_rack_gone_without_the_coordinator_leaves_in_one_round)
{
    rack_case(true, coord_in_b, 0xe, false);
}

/*
 * The rack cut from its peers while it still reaches the store (here the shared file store; in
 * production a store reached over another network). Before the fix, every run: two vantage
 * points inside the cut rack (a watcher and the cut coordinator's probe, or a watcher and the
 * committed confirmer, both in rackA) evicted healthy members outside it, and the evicted nodes
 * that still reach the store rejoined at once and were taken into the next round: a storm of
 * rounds (27-33 revokes in 30 s). Now such a probe counts only if the prober reaches the watcher
 * too (rackA's switch is down: it does not), and a node evicted in the round in which it reported
 * its own links broken waits a lease TTL (then doubled) before it rejoins.
 */

Test(rack_netns, a_rack_cut_from_its_peers_with_the_coordinator_evicts_no_survivor)
{
    rack_case(false, coord_in_a, 0x7, true);
}

Test(rack_netns, a_rack_cut_from_its_peers_without_the_coordinator_evicts_no_survivor)
{
    rack_case(false, coord_in_b, 0xe, false);
}
