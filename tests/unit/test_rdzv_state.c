// SPDX-License-Identifier: Apache-2.0
/* State codec: round trips, and every kind of foreign/corrupt value is rejected with a reason. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

static struct rdzv_state sample(void)
{
    static struct rdzv_member m[2] = {
        {.node_id = "a", .host = "ha", .addr = "10.0.0.1", .nproc = 2, .group_rank = 0,
         .rank_base = 0},
        {.node_id = "b", .host = "hb", .addr = "10.0.0.2", .nproc = 3, .group_rank = 1,
         .rank_base = 2},
    };
    return (struct rdzv_state){.round = 4, .status = RDZV_RUNNING, .members = m, .n_members = 2,
                               .world_size = 5, .restart_count = 1, .max_restarts = 3,
                               .min_nodes = 1, .max_nodes = 4};
}

Test(state, round_trip)
{
    struct rdzv_state s = sample(), d = {0};
    char *json = NULL;
    cr_assert_eq(rdzv_state_encode(&s, &json, NULL), 0);
    cr_assert_eq(rdzv_state_decode(json, strlen(json), &d, NULL), 0);
    cr_assert_eq(d.round, 4);
    cr_assert_eq(d.status, RDZV_RUNNING);
    cr_assert_eq(d.n_members, 2);
    cr_assert_str_eq(d.members[1].node_id, "b");
    cr_assert_eq(d.members[1].rank_base, 2);
    cr_assert_eq(d.world_size, 5);
    cr_assert_eq(d.restart_count, 1);
    cr_assert_eq(d.max_restarts, 3);
    cr_assert_eq(rdzv_state_find(&d, "b"), 1);
    cr_assert_eq(rdzv_state_find(&d, "zz"), -1);
    free(json);
    rdzv_state_clear(&d);
}

static void expect_rejected(const char *json, const char *needle)
{
    struct rdzv_state d = {0};
    struct ea_error err = {0};
    cr_assert_eq(rdzv_state_decode(json, strlen(json), &d, &err), -EBADMSG, "accepted: %s", json);
    cr_assert(strstr(err.msg, needle), "message '%s' lacks '%s'", err.msg, needle);
}

Test(state, rejects_foreign_and_corrupt)
{
    expect_rejected("not json", "not valid JSON");
    expect_rejected("[1,2]", "not a JSON object");
    expect_rejected("{\"round\": 1}", "schema");
    expect_rejected("{\"schema\": \"torch\"}", "schema 'torch'");
    expect_rejected("{\"schema\":\"elastic-agent/v1\",\"round\":1}", "state:");
    expect_rejected("{\"schema\":\"elastic-agent/v1\",\"round\":1,\"status\":\"dancing\","
                    "\"members\":[],\"world_size\":0,\"restart_count\":0,\"max_restarts\":0,"
                    "\"min\":1,\"max\":1}",
                    "unknown status 'dancing'");
    /* world size that does not add up */
    expect_rejected("{\"schema\":\"elastic-agent/v1\",\"round\":1,\"status\":\"running\","
                    "\"members\":[{\"node\":\"a\",\"host\":\"h\",\"addr\":\"x\",\"nproc\":2,"
                    "\"group_rank\":0,\"rank_base\":0}],\"world_size\":3,\"restart_count\":0,"
                    "\"max_restarts\":0,\"min\":1,\"max\":1}",
                    "inconsistent");
    /* ranks out of order */
    expect_rejected("{\"schema\":\"elastic-agent/v1\",\"round\":1,\"status\":\"running\","
                    "\"members\":[{\"node\":\"a\",\"host\":\"h\",\"addr\":\"x\",\"nproc\":1,"
                    "\"group_rank\":1,\"rank_base\":0}],\"world_size\":1,\"restart_count\":0,"
                    "\"max_restarts\":0,\"min\":1,\"max\":1}",
                    "member 0");
    /* running with nobody */
    expect_rejected("{\"schema\":\"elastic-agent/v1\",\"round\":1,\"status\":\"running\","
                    "\"members\":[],\"world_size\":0,\"restart_count\":0,"
                    "\"max_restarts\":0,\"min\":1,\"max\":1}",
                    "inconsistent");
    /* duplicate keys are an attack surface, not data */
    expect_rejected("{\"schema\":\"elastic-agent/v1\",\"schema\":\"elastic-agent/v1\"}", "JSON");
}

Test(state, node_and_failure_records)
{
    struct rdzv_node n = {.node_id = "n1", .host = "h", .addr = "127.0.0.1", .nproc = 4,
                          .pid = 42},
                     d = {0};
    char *json = NULL;
    cr_assert_eq(rdzv_node_encode(&n, &json, NULL), 0);
    cr_assert_eq(rdzv_node_decode(json, strlen(json), &d, NULL), 0);
    cr_assert_str_eq(d.node_id, "n1");
    cr_assert_eq(d.nproc, 4);
    cr_assert_eq(d.pid, 42);
    free(json);
    struct ea_error err = {0};
    const char *bad = "{\"schema\":\"elastic-agent/v1\",\"node\":\"n\",\"host\":\"h\","
                      "\"addr\":\"a\",\"nproc\":0,\"pid\":1}";
    cr_assert_eq(rdzv_node_decode(bad, strlen(bad), &d, &err), -EBADMSG);
    cr_assert(strstr(err.msg, "nproc"));

    struct rdzv_failure f = {.node_id = "n1", .host = "h", .rank = 3, .local_rank = 1,
                             .exit_code = -1, .signal = 9, .pid = 7, .time_ms = 1000,
                             .message = "boom\nline2"},
                        g = {0};
    cr_assert_eq(rdzv_failure_encode(&f, &json, NULL), 0);
    cr_assert_eq(rdzv_failure_decode(json, strlen(json), &g, NULL), 0);
    cr_assert_eq(g.rank, 3);
    cr_assert_eq(g.signal, 9);
    cr_assert_str_eq(g.message, "boom\nline2");
    free(json);
}

Test(state, values_over_the_size_limit_are_refused_before_parsing)
{
    size_t n = RDZV_STATE_BYTES_MAX + 1;
    char *big = malloc(n);
    cr_assert_not_null(big);
    memset(big, ' ', n); /* whitespace around a valid object would parse: the size decides */
    const char *ok = "{\"schema\":\"elastic-agent/v1\"}";
    memcpy(big, ok, strlen(ok));
    struct rdzv_state s;
    struct ea_error err = {0};
    cr_assert_eq(rdzv_state_decode(big, n, &s, &err), -EBADMSG);
    cr_assert(strstr(err.msg, "state is 4194305 bytes, more than the 4194304"), "%s", err.msg);
    struct rdzv_node node;
    ea_error_clear(&err);
    cr_assert_eq(rdzv_node_decode(big, RDZV_RECORD_BYTES_MAX + 1, &node, &err), -EBADMSG);
    cr_assert(strstr(err.msg, "node record is 65537 bytes"), "%s", err.msg);
    free(big);
}
