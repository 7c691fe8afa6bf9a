// SPDX-License-Identifier: Apache-2.0
/* State codec: round trips, and every kind of foreign/corrupt value is rejected with a reason. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

static struct rdzv_state sample(void)
{
    static struct rdzv_member m[2] = {
        {.node_id = "a", .host = "ha", .addr = "10.0.0.1", .nproc = 2, .group_rank = 0,
         .rank_base = 0, .slot = 7},
        {.node_id = "b", .host = "hb", .addr = "10.0.0.2", .nproc = 3, .group_rank = 1,
         .rank_base = 2, .slot = 9},
    };
    return (struct rdzv_state){.round = 4, .status = RDZV_RUNNING, .members = m, .n_members = 2,
                               .group_world_size = 2, .n_chunks = 1, .world_size = 5,
                               .restart_count = 1, .max_restarts = 3, .min_nodes = 1,
                               .max_nodes = 4};
}

Test(state, round_trip)
{
    struct rdzv_state s = sample(), d = {0};
    char *json = NULL;
    cr_assert_eq(rdzv_state_encode(&s, &json, NULL), 0);
    cr_assert_null(strstr(json, "\"ha\""), "the commit record lists no member: %s", json);
    cr_assert_eq(rdzv_state_decode(json, strlen(json), &d, NULL), 0);
    cr_assert_eq(d.round, 4);
    cr_assert_eq(d.status, RDZV_RUNNING);
    cr_assert_eq(d.n_members, 0);
    cr_assert_null(d.members);
    cr_assert_eq(d.group_world_size, 2);
    cr_assert_eq(d.n_chunks, 1);
    cr_assert_eq(d.world_size, 5);
    cr_assert_eq(d.restart_count, 1);
    cr_assert_eq(d.max_restarts, 3);
    free(json);
    /* the members travel in chunks: encode, decode, gather back in group-rank order */
    cr_assert_eq(rdzv_chunk_encode(&s, 0, &json, NULL), 0);
    int64_t round;
    int chunk;
    struct rdzv_member *m = NULL;
    size_t n = 0;
    cr_assert_eq(rdzv_chunk_decode(json, strlen(json), &round, &chunk, &m, &n, NULL), 0);
    cr_assert_eq(round, 4);
    cr_assert_eq(chunk, 0);
    cr_assert_eq(n, 2);
    free(json);
    struct rdzv_member *chunks[1] = {m};
    size_t counts[1] = {n};
    cr_assert_eq(rdzv_state_gather(&d, chunks, counts, NULL), 0);
    cr_assert_eq(d.n_members, 2);
    cr_assert_str_eq(d.members[1].node_id, "b");
    cr_assert_eq(d.members[1].rank_base, 2);
    cr_assert_eq(d.members[1].slot, 9);
    cr_assert_eq(rdzv_state_find(&d, "b"), 1);
    cr_assert_eq(rdzv_state_find(&d, "zz"), -1);
    /* a chunk missing a member, or one whose workers do not add up, is refused */
    counts[0] = 1;
    struct ea_error err = {0};
    cr_assert_eq(rdzv_state_gather(&d, chunks, counts, &err), -EBADMSG);
    cr_assert(strstr(err.msg, "1 of 2 members"), "%s", err.msg);
    free(m);
    rdzv_state_clear(&d);
}

Test(state, chunks_spread_members_by_slot)
{
    cr_assert_eq(rdzv_chunk_count(0), 0);
    cr_assert_eq(rdzv_chunk_count(1), 1);
    cr_assert_eq(rdzv_chunk_count(RDZV_CHUNK_NODES), 1);
    cr_assert_eq(rdzv_chunk_count(RDZV_CHUNK_NODES + 1), 2);
    cr_assert_eq(rdzv_chunk_count(10000), 313);
    /* consecutive create_revisions (a cold start) fill the chunks evenly */
    int per[313] = {0};
    for (int64_t slot = 1000; slot < 11000; slot++)
        per[rdzv_chunk_of(slot, 313)]++;
    for (int k = 0; k < 313; k++)
        cr_assert(per[k] >= 31 && per[k] <= 32, "chunk %d has %d", k, per[k]);
}

static void expect_rejected(const char *json, const char *needle)
{
    struct rdzv_state d = {0};
    struct ea_error err = {0};
    cr_assert_eq(rdzv_state_decode(json, strlen(json), &d, &err), -EBADMSG, "accepted: %s", json);
    cr_assert(strstr(err.msg, needle), "message '%s' lacks '%s'", err.msg, needle);
}

#define V2 "{\"schema\":\"elastic-agent/v2\","

Test(state, rejects_foreign_and_corrupt)
{
    expect_rejected("not json", "not valid JSON");
    expect_rejected("[1,2]", "not a JSON object");
    expect_rejected("{\"round\": 1}", "schema");
    expect_rejected("{\"schema\": \"torch\"}", "schema 'torch'");
    /* a run of the protocol before this one: said so, never guessed at */
    expect_rejected("{\"schema\":\"elastic-agent/v1\",\"round\":1,\"members\":[]}",
                    "written by an older elastic-agent (schema 'elastic-agent/v1'");
    expect_rejected(V2 "\"round\":1}", "state:");
    expect_rejected(V2 "\"round\":1,\"status\":\"dancing\",\"members\":0,\"chunks\":0,"
                       "\"world_size\":0,\"restart_count\":0,\"max_restarts\":0,\"min\":1,"
                       "\"max\":1}",
                    "unknown status 'dancing'");
    /* fewer workers than nodes */
    expect_rejected(V2 "\"round\":1,\"status\":\"running\",\"members\":2,\"chunks\":1,"
                       "\"world_size\":1,\"restart_count\":0,\"max_restarts\":0,\"min\":1,"
                       "\"max\":2}",
                    "inconsistent");
    /* a chunk count that does not match the members */
    expect_rejected(V2 "\"round\":1,\"status\":\"running\",\"members\":40,\"chunks\":1,"
                       "\"world_size\":40,\"restart_count\":0,\"max_restarts\":0,\"min\":1,"
                       "\"max\":40}",
                    "inconsistent");
    /* running with nobody */
    expect_rejected(V2 "\"round\":1,\"status\":\"running\",\"members\":0,\"chunks\":0,"
                       "\"world_size\":0,\"restart_count\":0,\"max_restarts\":0,\"min\":1,"
                       "\"max\":1}",
                    "inconsistent");
    /* duplicate keys are an attack surface, not data */
    expect_rejected("{\"schema\":\"elastic-agent/v2\",\"schema\":\"elastic-agent/v2\"}", "JSON");
    /* chunks: wrong shape */
    int64_t round;
    int chunk;
    struct rdzv_member *m = NULL;
    size_t n = 0;
    struct ea_error err = {0};
    const char *bad = V2 "\"round\":1,\"chunk\":0,\"m\":[[\"a\",\"h\",0,0,0,1]]}";
    cr_assert_eq(rdzv_chunk_decode(bad, strlen(bad), &round, &chunk, &m, &n, &err), -EBADMSG);
    cr_assert(strstr(err.msg, "invalid values"), "%s", err.msg);
    bad = V2 "\"round\":1,\"chunk\":0,\"m\":[[\"a\",\"h\",1,0,0,1,\"extra\"]]}";
    cr_assert_eq(rdzv_chunk_decode(bad, strlen(bad), &round, &chunk, &m, &n, &err), -EBADMSG);
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
    const char *bad = "{\"schema\":\"elastic-agent/v2\",\"node\":\"n\",\"host\":\"h\","
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
    const char *ok = "{\"schema\":\"elastic-agent/v2\"}";
    memcpy(big, ok, strlen(ok));
    struct rdzv_state s;
    struct ea_error err = {0};
    cr_assert_eq(rdzv_state_decode(big, n, &s, &err), -EBADMSG);
    char want[96];
    snprintf(want, sizeof(want), "state is %zu bytes, more than the %u", n, RDZV_STATE_BYTES_MAX);
    cr_assert(strstr(err.msg, want), "%s", err.msg);
    struct rdzv_node node;
    ea_error_clear(&err);
    cr_assert_eq(rdzv_node_decode(big, RDZV_RECORD_BYTES_MAX + 1, &node, &err), -EBADMSG);
    cr_assert(strstr(err.msg, "node record is 65537 bytes"), "%s", err.msg);
    free(big);
}

/* The commit record names group rank 0 and its addresses ("leader"): every node checks the
 * round's master against it without a read. A malformed one is refused, not trusted. */
Test(state, leader_round_trip_and_refusals)
{
    struct rdzv_state s = {.round = 3, .status = RDZV_RUNNING, .group_world_size = 2,
                           .n_chunks = 1, .world_size = 2, .min_nodes = 1, .max_nodes = 4,
                           .leader = {.node_id = "n0", .slot = 17, .n_addrs = 2,
                                      .addrs = {"10.0.0.1", "fd00::1"}}};
    char *json = NULL;
    cr_assert_eq(rdzv_state_encode(&s, &json, NULL), 0);
    struct rdzv_state d = {0};
    cr_assert_eq(rdzv_state_decode(json, strlen(json), &d, NULL), 0, "%s", json);
    cr_assert_str_eq(d.leader.node_id, "n0");
    cr_assert_eq(d.leader.slot, 17);
    cr_assert_eq(d.leader.n_addrs, 2);
    cr_assert_str_eq(d.leader.addrs[1], "fd00::1");
    free(json);
    const char *base = "{\"schema\":\"" RDZV_SCHEMA "\",\"round\":3,\"status\":\"running\","
                       "\"members\":2,\"chunks\":1,\"world_size\":2,\"restart_count\":0,"
                       "\"max_restarts\":0,\"min\":1,\"max\":4,\"leader\":";
    const char *bad[] = {"{\"node\":\"\",\"slot\":1,\"addrs\":[\"a\"]}",
                         "{\"node\":\"n0\",\"slot\":0,\"addrs\":[\"a\"]}",
                         "{\"node\":\"n0\",\"slot\":1,\"addrs\":[]}",
                         "{\"node\":\"n0\",\"slot\":1,\"addrs\":[7]}",
                         "{\"node\":\"n0\",\"slot\":1,\"addrs\":[\"a\",\"a\",\"a\",\"a\",\"a\","
                         "\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\","
                         "\"a\",\"a\"]}",
                         "\"n0\""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char buf[1024];
        snprintf(buf, sizeof(buf), "%s%s}", base, bad[i]);
        struct ea_error err = {0};
        cr_assert_eq(rdzv_state_decode(buf, strlen(buf), &d, &err), -EBADMSG, "accepted: %s", buf);
        cr_assert(strstr(err.msg, "leader"), "%s", err.msg);
    }
}

/* issue 39 stage 4: the checkpoint replication port is optional in a node record */
Test(state, node_record_ckpt_port_round_trip_absent_and_refused)
{
    struct rdzv_node n = {.node_id = "n1", .host = "h", .addr = "10.0.0.1", .nproc = 1, .pid = 2,
                          .ckpt_port = 40123},
                     d = {0};
    char *json = NULL;
    struct ea_error err = {0};
    cr_assert_eq(rdzv_node_encode(&n, &json, NULL), 0);
    cr_assert(strstr(json, "\"ckpt_port\":40123"), "%s", json);
    cr_assert_eq(rdzv_node_decode(json, strlen(json), &d, &err), 0, "%s", err.msg);
    cr_assert_eq(d.ckpt_port, 40123);
    free(json);
    const char *old = "{\"schema\":\"elastic-agent/v2\",\"node\":\"n\",\"host\":\"h\","
                      "\"addr\":\"a\",\"nproc\":1,\"pid\":1}";
    cr_assert_eq(rdzv_node_decode(old, strlen(old), &d, &err), 0, "an older record: %s", err.msg);
    cr_assert_eq(d.ckpt_port, 0);
    const char *vals[] = {"0", "65536", "-1", "\"40000\"", "1.5"};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        char rec[256];
        snprintf(rec, sizeof(rec),
                 "{\"schema\":\"elastic-agent/v2\",\"node\":\"n\",\"host\":\"h\",\"addr\":\"a\","
                 "\"nproc\":1,\"pid\":1,\"ckpt_port\":%s}",
                 vals[i]);
        cr_assert_eq(rdzv_node_decode(rec, strlen(rec), &d, &err), -EBADMSG, "%s", rec);
        cr_assert(strstr(err.msg, "ckpt_port"), "%s", err.msg);
    }
}
