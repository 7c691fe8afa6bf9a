// SPDX-License-Identifier: Apache-2.0
/* Worker environment: torchrun's names and values (DESIGN.md §5) and the topology file. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "workerenv.h"

static struct rdzv_member members[2] = {
    {.node_id = "a", .host = "ha", .addr = "10.0.0.1", .nproc = 2, .group_rank = 0,
     .rank_base = 0},
    {.node_id = "b", .host = "hb", .addr = "10.0.0.2", .nproc = 3, .group_rank = 1,
     .rank_base = 2},
};
static struct rdzv_state st = {.round = 3, .status = RDZV_RUNNING, .members = members,
                               .n_members = 2, .world_size = 5, .restart_count = 2,
                               .max_restarts = 5, .min_nodes = 1, .max_nodes = 4};

Test(workerenv, torchrun_variables)
{
    char *base[] = {"PATH=/bin", "RANK=99", "HOME=/root", NULL};
    struct wenv_params p = {.state = &st, .my_index = 1, .local_rank = 2,
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
    struct wenv_params p = {.state = &st, .my_index = 0, .master_addr = "x", .master_port = 1,
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
    cr_assert_eq(json_integer_value(json_object_get(r4, "tree_parent")), 1);
    json_t *r1 = json_array_get(ranks, 1);
    cr_assert_eq(json_array_size(json_object_get(r1, "tree_children")), 2);
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(ranks, 0), "tree_parent")),
                 -1);
    cr_assert_eq(json_array_size(json_object_get(j, "hosts")), 2);
    json_decref(j);
}
