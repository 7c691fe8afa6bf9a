// SPDX-License-Identifier: Apache-2.0
/* Worker environment: torchrun's names and values (DESIGN.md §5) and the topology file. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "workerenv.h"

static struct rdzv_member members[2] = {
    {.node_id = "a", .host = "ha", .addr = "10.0.0.1", .nproc = 2, .group_rank = 0,
     .rank_base = 0},
    {.node_id = "b", .host = "hb", .addr = "10.0.0.2", .nproc = 3, .group_rank = 1,
     .rank_base = 2},
};
static struct rdzv_state st = {.round = 3, .status = RDZV_RUNNING, .members = members,
                               .n_members = 2, .group_world_size = 2, .world_size = 5, .restart_count = 2,
                               .max_restarts = 5, .min_nodes = 1, .max_nodes = 4};

Test(workerenv, torchrun_variables)
{
    char *base[] = {"PATH=/bin", "RANK=99", "HOME=/root", NULL};
    struct wenv_params p = {.state = &st, .self = &members[1], .local_rank = 2,
                            .master_addr = "10.0.0.1", .master_port = 29555, .generation = 41,
                            .run_id = "job", .error_file = "/tmp/e.json",
                            .topology_file = "/tmp/t.json", .base_env = base};
    char **env;
    cr_assert_eq(wenv_build(&p, &env), 0);
    struct {
        const char *k, *v;
    } want[] = {
        {"LOCAL_RANK", "2"}, {"RANK", "4"}, {"GROUP_RANK", "1"}, {"ROLE_RANK", "4"},
        {"ROLE_NAME", "default"}, {"LOCAL_WORLD_SIZE", "3"}, {"WORLD_SIZE", "5"},
        {"GROUP_WORLD_SIZE", "2"}, {"ROLE_WORLD_SIZE", "5"}, {"MASTER_ADDR", "10.0.0.1"},
        {"MASTER_PORT", "29555"}, {"TORCHELASTIC_RESTART_COUNT", "2"},
        {"TORCHELASTIC_MAX_RESTARTS", "5"}, {"TORCHELASTIC_RUN_ID", "job"},
        {"TORCHELASTIC_ERROR_FILE", "/tmp/e.json"}, {"TORCHELASTIC_USE_AGENT_STORE", "False"},
        {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"}, {"OMP_NUM_THREADS", "1"},
        {"ELASTIC_GENERATION", "41"}, {"ELASTIC_TOPOLOGY_FILE", "/tmp/t.json"},
        {"PATH", "/bin"}, {"HOME", "/root"},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++) {
        const char *v = wenv_get(env, want[i].k);
        cr_assert(v, "%s missing", want[i].k);
        cr_assert_str_eq(v, want[i].v, "%s", want[i].k);
    }
    int rank_count = 0;
    for (char **e = env; *e; e++)
        rank_count += strncmp(*e, "RANK=", 5) == 0;
    cr_assert_eq(rank_count, 1, "an inherited RANK is replaced, not duplicated");
    wenv_free(env);
}

Test(workerenv, user_settings_are_kept)
{
    char *base[] = {"OMP_NUM_THREADS=8", "TORCH_NCCL_ASYNC_ERROR_HANDLING=0", NULL};
    struct wenv_params p = {.state = &st, .self = &members[0], .master_addr = "x", .master_port = 1,
                            .run_id = "j", .base_env = base};
    char **env;
    cr_assert_eq(wenv_build(&p, &env), 0);
    cr_assert_str_eq(wenv_get(env, "OMP_NUM_THREADS"), "8");
    cr_assert_str_eq(wenv_get(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING"), "0");
    wenv_free(env);
}

Test(workerenv, topology_file)
{
    char path[] = "/tmp/ea-topo-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    cr_assert_eq(wenv_write_topology(&st, path, NULL), 0);
    json_t *j = json_load_file(path, 0, NULL);
    unlink(path);
    cr_assert(j);
    json_t *ranks = json_object_get(j, "ranks");
    cr_assert_eq(json_array_size(ranks), 5);
    json_t *r4 = json_array_get(ranks, 4);
    cr_assert_eq(json_integer_value(json_object_get(r4, "rank")), 4);
    cr_assert_str_eq(json_string_value(json_object_get(r4, "host")), "hb");
    cr_assert_eq(json_integer_value(json_object_get(r4, "local_rank")), 2);
    cr_assert_eq(json_integer_value(json_object_get(r4, "ring_next")), 0);
    cr_assert_eq(json_integer_value(json_object_get(r4, "ring_prev")), 3);
    /* DMLC's link map for 5: tree 0-{1,4}, 1-{2,3}; the ring 0..4 follows the tree */
    cr_assert_eq(json_integer_value(json_object_get(r4, "tree_parent")), 0);
    json_t *r1 = json_array_get(ranks, 1);
    cr_assert_eq(json_array_size(json_object_get(r1, "tree_children")), 2);
    cr_assert_eq(json_integer_value(json_array_get(json_object_get(r1, "tree_children"), 1)), 3);
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(ranks, 0), "tree_parent")),
                 -1);
    cr_assert_eq(json_array_size(json_object_get(j, "hosts")), 2);
    json_decref(j);
}

/* ---- --env-style maps, NIC discovery result ------------------------------------------------ */

/* Three nodes with 2, 1 and 3 slots: Horovod's cross rank/size depend on the local rank. */
static struct rdzv_member uneven[3] = {
    {.node_id = "a", .host = "ha", .nproc = 2, .group_rank = 0, .rank_base = 0},
    {.node_id = "b", .host = "hb", .nproc = 1, .group_rank = 1, .rank_base = 2},
    {.node_id = "c", .host = "hc", .nproc = 3, .group_rank = 2, .rank_base = 3},
};
static struct rdzv_state st3 = {.round = 1, .status = RDZV_RUNNING, .members = uneven,
                                .n_members = 3, .group_world_size = 3, .world_size = 6, .max_restarts = 3,
                                .min_nodes = 1, .max_nodes = 3};

static char **build(unsigned styles, int node, int local, const char *tracker, const char *ifaces,
                    char **base)
{
    struct wenv_params p = {.state = &st3, .self = &uneven[node], .local_rank = local,
                            .master_addr = "10.0.0.1", .master_port = 29500, .run_id = "j",
                            .base_env = base, .styles = styles, .dmlc_tracker = tracker,
                            .ifaces = ifaces};
    char **env;
    cr_assert_eq(wenv_build(&p, &env), 0);
    return env;
}

static void expect(char **env, const char *name, const char *value)
{
    const char *v = wenv_get(env, name);
    if (!value) {
        cr_assert_null(v, "%s should not be set (is '%s')", name, v);
        return;
    }
    cr_assert_not_null(v, "%s missing", name);
    cr_assert_str_eq(v, value, "%s", name);
}

Test(workerenv, horovod_map)
{
    char *base[] = {"HOROVOD_RANK=77", NULL};
    /* node c, local rank 1: nodes with a local rank 1 are a and c -> cross rank 1 of 2 */
    char **env = build(WENV_HOROVOD, 2, 1, NULL, NULL, base);
    expect(env, "HOROVOD_RANK", "4");
    expect(env, "HOROVOD_SIZE", "6");
    expect(env, "HOROVOD_LOCAL_RANK", "1");
    expect(env, "HOROVOD_LOCAL_SIZE", "3");
    expect(env, "HOROVOD_CROSS_RANK", "1");
    expect(env, "HOROVOD_CROSS_SIZE", "2");
    expect(env, "HOROVOD_HOSTNAME", "hc");
    expect(env, "RANK", NULL); /* torch not asked for */
    expect(env, "ELASTIC_ROUND", "1");
    wenv_free(env);
    /* node c, local rank 2: only c has one -> 0 of 1; node b local 0: 1 of 3 */
    env = build(WENV_HOROVOD, 2, 2, NULL, NULL, NULL);
    expect(env, "HOROVOD_CROSS_RANK", "0");
    expect(env, "HOROVOD_CROSS_SIZE", "1");
    wenv_free(env);
    env = build(WENV_HOROVOD, 1, 0, NULL, NULL, NULL);
    expect(env, "HOROVOD_CROSS_RANK", "1");
    expect(env, "HOROVOD_CROSS_SIZE", "3");
    expect(env, "HOROVOD_LOCAL_SIZE", "1");
    wenv_free(env);
}

Test(workerenv, dmlc_map_and_combined)
{
    char **env = build(WENV_DMLC, 1, 0, NULL, NULL, NULL);
    expect(env, "DMLC_TASK_ID", "2");
    expect(env, "DMLC_NUM_WORKER", "6");
    expect(env, "DMLC_ROLE", "worker");
    expect(env, "DMLC_TRACKER_URI", NULL);
    expect(env, "DMLC_TRACKER_PORT", NULL);
    expect(env, "HOROVOD_RANK", NULL);
    wenv_free(env);
    env = build(WENV_TORCH | WENV_HOROVOD | WENV_DMLC, 0, 1, "tracker.example:9091", NULL, NULL);
    expect(env, "DMLC_TRACKER_URI", "tracker.example");
    expect(env, "DMLC_TRACKER_PORT", "9091");
    expect(env, "DMLC_TASK_ID", "1");
    expect(env, "HOROVOD_RANK", "1");
    expect(env, "RANK", "1");
    expect(env, "MASTER_PORT", "29500");
    wenv_free(env);
    env = build(WENV_DMLC, 0, 0, "[fd00::1]:9091", NULL, NULL);
    expect(env, "DMLC_TRACKER_URI", "fd00::1");
    wenv_free(env);
}

Test(workerenv, parse_styles_and_tracker)
{
    unsigned s = 0;
    cr_assert_eq(wenv_parse_styles("torch", &s, NULL), 0);
    cr_assert_eq(s, WENV_TORCH);
    cr_assert_eq(wenv_parse_styles("dmlc,horovod", &s, NULL), 0);
    cr_assert_eq(s, WENV_DMLC | WENV_HOROVOD);
    struct ea_error err = {0};
    const char *bad_styles[] = {"", "mpi", "torch,", ",torch", "torch,,dmlc", "Torch"};
    for (size_t i = 0; i < sizeof(bad_styles) / sizeof(*bad_styles); i++)
        cr_assert_eq(wenv_parse_styles(bad_styles[i], &s, &err), -EINVAL, "%s", bad_styles[i]);
    cr_assert(strstr(err.msg, "--env-style"));
    char host[64];
    int port = 0;
    cr_assert_eq(cfg_parse_tracker("10.0.0.1:9091", host, sizeof(host), &port, NULL), 0);
    cr_assert_str_eq(host, "10.0.0.1");
    cr_assert_eq(port, 9091);
    const char *bad[] = {"", "host", "host:", ":9091", "host:0", "host:65536", "host:12x",
                         "ho st:1", "host:-1", "[]:1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        ea_error_clear(&err);
        cr_assert_eq(cfg_parse_tracker(bad[i], NULL, 0, NULL, &err), -EINVAL, "%s", bad[i]);
        cr_assert(strstr(err.msg, "--dmlc-tracker"), "%s", err.msg);
    }
}

Test(workerenv, discovered_interfaces)
{
    char **env = build(0, 0, 0, NULL, "eth1,ib0", NULL);
    expect(env, "ELASTIC_IFACES", "eth1,ib0");
    expect(env, "NCCL_SOCKET_IFNAME", "eth1,ib0");
    expect(env, "GLOO_SOCKET_IFNAME", "eth1,ib0");
    expect(env, "RANK", "0"); /* styles 0 = torch */
    wenv_free(env);
    char *base[] = {"NCCL_SOCKET_IFNAME=^docker", "ELASTIC_IFACES=stale", NULL};
    env = build(0, 0, 0, NULL, "eth1", base);
    expect(env, "NCCL_SOCKET_IFNAME", "^docker"); /* the user's choice wins */
    expect(env, "GLOO_SOCKET_IFNAME", "eth1");
    expect(env, "ELASTIC_IFACES", "eth1");
    int n = 0;
    for (char **e = env; *e; e++)
        n += strncmp(*e, "ELASTIC_IFACES=", 15) == 0;
    cr_assert_eq(n, 1);
    wenv_free(env);
    env = build(0, 0, 0, NULL, NULL, base); /* no discovery: nothing exported, stale dropped */
    expect(env, "ELASTIC_IFACES", NULL);
    expect(env, "GLOO_SOCKET_IFNAME", NULL);
    wenv_free(env);
}

/* Hosts are listed once each, in rank order, even when several nodes share one. */
Test(workerenv, topology_hosts_distinct)
{
    struct rdzv_member m[3] = {
        {.node_id = "n1", .host = "hb", .nproc = 1, .group_rank = 0, .rank_base = 0},
        {.node_id = "n2", .host = "ha", .nproc = 2, .group_rank = 1, .rank_base = 1},
        {.node_id = "n3", .host = "hb", .nproc = 1, .group_rank = 2, .rank_base = 3},
    };
    struct rdzv_state s = {.round = 2, .members = m, .n_members = 3, .world_size = 4};
    char path[] = "/tmp/ea-topo-XXXXXX";
    close(mkstemp(path));
    cr_assert_eq(wenv_write_topology(&s, path, NULL), 0);
    json_t *j = json_load_file(path, 0, NULL);
    unlink(path);
    cr_assert(j);
    json_t *hosts = json_object_get(j, "hosts");
    cr_assert_eq(json_array_size(hosts), 2);
    cr_assert_str_eq(json_string_value(json_array_get(hosts, 0)), "hb");
    cr_assert_str_eq(json_string_value(json_array_get(hosts, 1)), "ha");
    cr_assert_eq(json_array_size(json_object_get(j, "nodes")), 3);
    json_t *r3 = json_array_get(json_object_get(j, "ranks"), 3);
    cr_assert_str_eq(json_string_value(json_object_get(r3, "node")), "n3");
    cr_assert_eq(json_integer_value(json_object_get(r3, "local_rank")), 0);
    json_decref(j);
}
