// SPDX-License-Identifier: Apache-2.0
/* runspec (agent/daemon/runspec.c): the run spec's codec and its validation — a round trip, and
 * bad input: corrupt JSON, a foreign schema, a forbidden option, a missing command, a bad env
 * entry; the per-node options combined at the daemon; the run's agent's environment. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon_internal.h"
#include "runspec.h"

static char *no_env[] = {NULL};

/* A spec with the given args and command (NULL-terminated lists), copied. */
static struct runspec make(const char *id, const char *const *args, const char *const *cmd,
                           const char *const *env)
{
    struct runspec s = {.min_nodes = 1, .max_nodes = 1};
    snprintf(s.run_id, sizeof(s.run_id), "%s", id);
    const char *const *lists[3] = {args, cmd, env};
    char ***dst[3] = {&s.args, &s.command, &s.env};
    size_t *ns[3] = {&s.n_args, &s.n_command, &s.n_env};
    for (int l = 0; l < 3; l++) {
        size_t n = 0;
        while (lists[l] && lists[l][n])
            n++;
        *dst[l] = calloc(n + 1, sizeof(char *));
        for (size_t i = 0; i < n; i++)
            (*dst[l])[i] = strdup(lists[l][i]);
        *ns[l] = n;
    }
    return s;
}

Test(runspec, round_trip)
{
    const char *args[] = {"--min", "2", "--max=4", "--settle", "0.5", NULL};
    const char *cmd[] = {"python", "train.py", "--lr", "0.1 ; rm -rf /", NULL};
    const char *env[] = {"TAG=a=b", NULL};
    struct runspec s = make("job-1", args, cmd, env), back = {0};
    s.min_nodes = 2;
    s.max_nodes = 4;
    s.submitted_ms = 1234;
    char *json = NULL;
    cr_assert_eq(runspec_encode(&s, &json, NULL), 0);
    cr_assert(strstr(json, "\"schema\":\"" RUNSPEC_SCHEMA "\""));
    cr_assert(strstr(json, "\"command\":[\"python\",\"train.py\",\"--lr\",\"0.1 ; rm -rf /\"]"),
              "%s", json); /* argv as a JSON array, never a shell line */
    cr_assert_eq(runspec_decode(json, strlen(json), &back, NULL), 0);
    cr_assert_str_eq(back.run_id, "job-1");
    cr_assert_eq(back.n_args, 5);
    cr_assert_str_eq(back.args[2], "--max=4");
    cr_assert_eq(back.n_command, 4);
    cr_assert_str_eq(back.command[3], "0.1 ; rm -rf /");
    cr_assert_null(back.command[4]);
    cr_assert_str_eq(back.env[0], "TAG=a=b");
    cr_assert_eq(back.min_nodes, 2);
    cr_assert_eq(back.max_nodes, 4);
    cr_assert_eq(back.submitted_ms, 1234);
    struct cfg c;
    char **argv = NULL;
    cr_assert_eq(runspec_validate(&back, NULL, 0, no_env, &c, &argv, NULL), 0);
    cr_assert_eq(c.min_nodes, 2);
    cr_assert_eq(c.max_nodes, 4);
    cr_assert_str_eq(c.run_id, "job-1");
    cr_assert_str_eq(c.command[0], "python");
    free(argv);
    free(json);
    runspec_clear(&s);
    runspec_clear(&back);
    runspec_clear(NULL);
}

static void refused(const char *json, const char *needle)
{
    struct runspec s = {0};
    struct ea_error err = {0};
    cr_assert_eq(runspec_decode(json, strlen(json), &s, &err), -EBADMSG, "accepted %s", json);
    cr_assert(strstr(err.msg, needle), "'%s' for %s", err.msg, json);
    cr_assert_null(s.args); /* nothing set on failure */
}

#define GOOD_TAIL "\"min\":1,\"max\":2,\"args\":[],\"env\":[]"
Test(runspec, bad_values_are_refused)
{
    refused("{not json", "not JSON");
    refused("[1,2]", "not a JSON object");
    refused("{\"schema\":\"someone-else/v9\",\"run\":\"a\"}", "someone-else/v9");
    refused("{\"run\":\"a\"}", "schema is missing");
    refused("{\"schema\":\"" RUNSPEC_SCHEMA "\",\"run\":\"a b\"," GOOD_TAIL ",\"command\":[\"x\"]}",
            "run id");
    refused("{\"schema\":\"" RUNSPEC_SCHEMA "\",\"run\":\"a\"," GOOD_TAIL ",\"command\":[]}",
            "\"command\" is empty");
    refused("{\"schema\":\"" RUNSPEC_SCHEMA "\",\"run\":\"a\"," GOOD_TAIL "}", "\"command\"");
    refused("{\"schema\":\"" RUNSPEC_SCHEMA "\",\"run\":\"a\"," GOOD_TAIL ",\"command\":\"x y\"}",
            "array of strings");
    refused("{\"schema\":\"" RUNSPEC_SCHEMA "\",\"run\":\"a\"," GOOD_TAIL ",\"command\":[\"x\",1]}",
            "\"command\"[1]");
    refused("{\"schema\":\"" RUNSPEC_SCHEMA "\",\"run\":\"a\",\"min\":3,\"max\":2,\"args\":[],"
            "\"env\":[],\"command\":[\"x\"]}",
            "min");
    refused("{\"schema\":\"" RUNSPEC_SCHEMA "\",\"run\":\"a\",\"min\":1,\"max\":2,\"args\":[],"
            "\"env\":[\"NOEQUALS\"],\"command\":[\"x\"]}",
            "NAME=VALUE");
}

static void invalid(const char *const *args, const char *const *cmd, const char *const *env,
                    const char *needle)
{
    struct runspec s = make("r", args, cmd, env);
    struct ea_error err = {0};
    cr_assert_eq(runspec_validate(&s, NULL, 0, no_env, NULL, NULL, &err), -EINVAL);
    cr_assert(strstr(err.msg, needle), "'%s' does not say '%s'", err.msg, needle);
    runspec_clear(&s);
}

Test(runspec, forbidden_options_and_bad_specs)
{
    const char *cmd[] = {"true", NULL};
    invalid((const char *[]){"--node-id", "n1", NULL}, cmd, NULL,
            "--node-id is a per-node option");
    invalid((const char *[]){"--host", "h", NULL}, cmd, NULL, "--host is a per-node option");
    invalid((const char *[]){"--password-file", "/etc/p", NULL}, cmd, NULL,
            "--password-file is a store option");
    invalid((const char *[]){"--rdzv-endpoint", "x:1", NULL}, cmd, NULL,
            "--rdzv-endpoint is a store option");
    invalid((const char *[]){"--prefix=/x/", NULL}, cmd, NULL, "--prefix is a store option");
    invalid((const char *[]){"--bogus", NULL}, cmd, NULL, "unknown option '--bogus'");
    invalid((const char *[]){"stray", NULL}, cmd, NULL, "'stray' is not an option");
    invalid((const char *[]){"--min", NULL}, cmd, NULL, "--min needs a value");
    /* the one-shot form's own messages */
    invalid((const char *[]){"--min", "3", "--max", "2", NULL}, cmd, NULL,
            "--min 3 is larger than --max 2");
    invalid((const char *[]){"--settle", "-1", NULL}, cmd, NULL, "--settle: '-1'");
    invalid((const char *[]){"--rank-order", "random", NULL}, cmd, NULL, "--rank-order");
    /* the liveness ring's options are the run's (issue 31), checked as the one-shot form does */
    invalid((const char *[]){"--liveness", "maybe", NULL}, cmd, NULL,
            "--liveness: 'maybe' is not on or off");
    invalid((const char *[]){"--liveness-interval", "0", NULL}, cmd, NULL,
            "--liveness-interval: '0' is not a number of seconds from 0.01 to 60");
    invalid((const char *[]){"--liveness", "off", "--liveness-misses", "5", NULL}, cmd, NULL,
            "--liveness-misses has no effect with --liveness off");
    invalid(NULL, (const char *[]){NULL}, NULL, "missing the worker command");
    invalid(NULL, cmd, (const char *[]){"ELASTIC_MIN=3", NULL}, "give the option itself");
    invalid(NULL, cmd, (const char *[]){"1X=3", NULL}, "not NAME=VALUE");
    /* every run option is in the option table */
    const char *run[] = {"min",      "max",      "settle",           "nproc-per-node",
                         "worker-heartbeat-timeout", "liveness", "liveness-interval",
                         "liveness-misses"};
    for (size_t i = 0; i < sizeof(run) / sizeof(*run); i++)
        cr_assert(runspec_is_run_option(run[i]));
    size_t n_run = 0;
    for (size_t i = 0; i < cfg_option_count(); i++)
        n_run += runspec_is_run_option(cfg_option_flag(i, NULL));
    cr_assert_eq(n_run, 21, "a run option is missing from the table");
}

/* A spec's --env reaches the workers only, and not with a name that changes how a process
 * loads or connects: refused at submit (validate) and when read from the store (decode). */
Test(runspec, loader_and_connection_variables_are_refused)
{
    const char *cmd[] = {"true", NULL};
    const char *bad[] = {"LD_PRELOAD=/tmp/x.so", "LD_LIBRARY_PATH=/x", "GCONV_PATH=/x",
                         "MALLOC_TRACE=/x", "GRPC_TRACE=all", "SSL_CERT_FILE=/x",
                         "OPENSSL_CONF=/x", "TMPDIR=/x", "XDG_RUNTIME_DIR=/x", "HOSTALIASES=/x",
                         "RES_OPTIONS=x", "LOCALDOMAIN=x", "NLSPATH=/x", "GLIBC_TUNABLES=x",
                         "BASH_ENV=/x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        size_t len = strcspn(bad[i], "=");
        char name[64];
        snprintf(name, sizeof(name), "'%.*s'", (int)len, bad[i]);
        invalid(NULL, cmd, (const char *[]){"OK=1", bad[i], NULL}, name);
        char json[256];
        snprintf(json, sizeof(json),
                 "{\"schema\":\"" RUNSPEC_SCHEMA "\",\"run\":\"a\",\"min\":1,\"max\":1,"
                 "\"args\":[],\"env\":[\"%s\"],\"command\":[\"x\"]}",
                 bad[i]);
        refused(json, name);
    }
    invalid(NULL, cmd, (const char *[]){"LD_PRELOAD=x", NULL}, "changes how a process loads");
    /* the workers' own business passes */
    const char *ok[] = {"http_proxy=http://p:3128", "PYTHONPATH=/x", "CUDA_VISIBLE_DEVICES=0",
                        "LDX=1", "TMPDIRS=1", "NCCL_DEBUG=INFO", "TAG=x", NULL};
    struct runspec s = make("r", NULL, cmd, ok);
    struct ea_error err = {0};
    cr_assert_eq(runspec_validate(&s, NULL, 0, no_env, NULL, NULL, &err), 0, "%s", err.msg);
    runspec_clear(&s);
}

/* The daemon sizes a run by the spec's min/max and its agent by the parsed options: a spec
 * whose two disagree is refused where the daemon validates it. */
Test(runspec, spec_min_max_must_match_its_options)
{
    const char *args[] = {"--min", "1", "--max", "2", NULL};
    const char *cmd[] = {"true", NULL};
    struct runspec s = make("r", args, cmd, NULL);
    struct ea_error err = {0};
    s.min_nodes = 1;
    s.max_nodes = 2;
    cr_assert_eq(runspec_validate(&s, NULL, 0, no_env, NULL, NULL, &err), 0, "%s", err.msg);
    s.max_nodes = 50;
    cr_assert_eq(runspec_validate(&s, NULL, 0, no_env, NULL, NULL, &err), -EINVAL);
    cr_assert(strstr(err.msg, "the spec says min 1, max 50 but its options give --min 1 --max 2"),
              "%s", err.msg);
    s.max_nodes = 2;
    s.min_nodes = 2;
    cr_assert_eq(runspec_validate(&s, NULL, 0, no_env, NULL, NULL, &err), -EINVAL);
    runspec_clear(&s);
}

Test(runspec, combined_with_the_node_options)
{
    const char *args[] = {"--min", "1", "--nproc-per-node", "3", NULL};
    const char *cmd[] = {"true", NULL};
    struct runspec s = make("r", args, cmd, NULL);
    char *node[] = {"--node-id", "n7", "--nproc-per-node", "2", "--lease-ttl", "3"};
    cr_assert(runspec_is_node_default("nproc-per-node") && runspec_is_node_default("stop-timeout"));
    cr_assert(!runspec_is_node_default("min"));
    struct cfg c;
    char **argv = NULL;
    cr_assert_eq(runspec_validate(&s, node, 6, no_env, &c, &argv, NULL), 0);
    cr_assert_str_eq(c.node_id, "n7");
    cr_assert_eq(c.nproc_per_node, 3); /* the spec's wins */
    cr_assert_eq(c.lease_ttl_ms, 3000);
    free(argv);
    /* a node option the spec's values do not fit: refused at the daemon */
    char *remote[] = {"--launcher", "ssh", "--host", "elsewhere"};
    const char *hb[] = {"--worker-heartbeat-timeout", "5", NULL};
    struct runspec h = make("r", hb, cmd, NULL);
    struct ea_error err = {0};
    cr_assert_eq(runspec_validate(&h, remote, 4, no_env, NULL, NULL, &err), -EINVAL);
    cr_assert(strstr(err.msg, "--worker-heartbeat-timeout"), "%s", err.msg);
    runspec_clear(&s);
    runspec_clear(&h);
}

/* The run's agent gets the daemon's environment without the run's options, the daemon's own
 * and the password; the spec's --env is not in it (the workers get it by --worker-env-fd). */
Test(runspec, the_run_agents_environment)
{
    const char *cmd[] = {"true", NULL};
    const char *env[] = {"TAG=spec", NULL};
    struct runspec s = make("r", NULL, cmd, env);
    char *daemon_env[] = {"PATH=/bin", "TAG=daemon", "ELASTIC_MIN=5", "ELASTIC_HTTP=:9000",
                          "ELASTIC_RDZV_ENDPOINT=e:1", "ELASTIC_NPROC_PER_NODE=2", "ELASTIC_POOL=gpu",
                          "ELASTIC_ETCD_PASSWORD=pw", "ELASTIC_PASSWORD_FILE=/p", NULL};
    char **out = NULL;
    cr_assert_eq(daemon_child_env(daemon_env, &out), 0);
    const char *want[] = {"PATH=/bin", "TAG=daemon", "ELASTIC_RDZV_ENDPOINT=e:1",
                          "ELASTIC_NPROC_PER_NODE=2", NULL};
    size_t n = 0;
    for (; out[n]; n++)
        cr_assert_str_eq(out[n], want[n]);
    cr_assert_eq(n, 4);
    free(out);
    /* the workers' entries: NUL-separated in a memfd the run's agent inherits */
    int fd = -1;
    cr_assert_eq(daemon_worker_env_fd(&s, &fd, NULL), 0);
    char buf[64] = {0};
    cr_assert_eq(pread(fd, buf, sizeof(buf), 0), 9);
    cr_assert_eq(memcmp(buf, "TAG=spec\0", 9), 0);
    cr_assert_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0, "the run's agent inherits it");
    close(fd);
    runspec_clear(&s);
    char *with_pool[] = {"ELASTIC_POOL=gpu", NULL}, *without[] = {NULL};
    cr_assert_str_eq(daemon_default_pool(with_pool), "gpu");
    cr_assert_str_eq(daemon_default_pool(without), "default");
}
