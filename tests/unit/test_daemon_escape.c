// SPDX-License-Identifier: Apache-2.0
/*
 * Issue 38: `status --pool`, `submit` and `cancel` print strings a store writer controls (queue
 * keys, daemon records, refusal records, a run's state): each command runs in-process against a
 * file store that holds such strings with every control character (C0, C1 as UTF-8 and raw, DEL),
 * and nothing but printable text and its own line feeds may reach its stdout and stderr.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "daemon_internal.h"
#include "escape_check.h"
#include "kv.h"
#include "pool.h"
#include "state.h"

static char dir[64];
static char *no_env[] = {NULL};

static void rm_store(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (dir[0])
        (void)!system(cmd);
}

/* A file store in a fresh directory, with the pool "default" under "/elastic/". */
static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/ea-test-escape-XXXXXX");
    cr_assert(mkdtemp(dir));
}

TestSuite(daemon_escape, .init = setup, .fini = rm_store, .timeout = 60);

static void put(const char *key, const char *value)
{
    struct kv_config kc = {.backend = "file", .state_dir = dir};
    struct kv *kv = NULL;
    struct ea_error err = {0};
    cr_assert_eq(kv_open(&kc, &kv, &err), 0, "%s", err.msg);
    cr_assert_eq(kv_put(kv, key, value, strlen(value), 0, NULL, &err), 0, "%s", err.msg);
    kv_close(kv);
}

static struct pool pool(void)
{
    struct pool p;
    struct ea_error err = {0};
    cr_assert_eq(pool_init(&p, NULL, "/elastic/", "default", &err), 0, "%s", err.msg);
    return p;
}

/* A queue entry whose key is `name`: not a spec, so every walk of the queue reports it (the
 * finding's vector). */
static void put_queue_key(const char *name)
{
    struct pool p = pool();
    char key[POOL_KEY_MAX];
    pool_queue_prefix(&p, key, sizeof(key));
    strncat(key, name, sizeof(key) - strlen(key) - 1);
    put(key, "not a spec");
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert(f);
    static char bufs[2][16384];
    static int k;
    char *buf = bufs[k++ % 2];
    size_t n = fread(buf, 1, sizeof(bufs[0]) - 1, f);
    buf[n] = '\0';
    fclose(f);
    unlink(path);
    return buf;
}

/* Run `main_fn` with args (NULL-terminated) and the store options, stdout and stderr to files:
 * its exit code, and what it wrote in *ret_out / *ret_err (static buffers). */
static int run(int (*main_fn)(int, char **, char **), const char *const *args, char **ret_out,
               char **ret_err)
{
    const char *store[] = {"--rdzv-backend", "file", "--state-dir", dir};
    char *argv[32] = {(char *)args[0]}; /* the store options first: a command may follow "--" */
    int argc = 1;
    for (size_t i = 0; i < 4; i++)
        argv[argc++] = (char *)store[i];
    for (size_t i = 1; args[i]; i++)
        argv[argc++] = (char *)args[i];
    argv[argc] = NULL;
    char out_path[] = "/tmp/ea-test-escape-out-XXXXXX",
         err_path[] = "/tmp/ea-test-escape-err-XXXXXX";
    int ofd = mkstemp(out_path), efd = mkstemp(err_path);
    cr_assert(ofd >= 0 && efd >= 0);
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(STDOUT_FILENO), saved_err = dup(STDERR_FILENO);
    dup2(ofd, STDOUT_FILENO);
    dup2(efd, STDERR_FILENO);
    close(ofd);
    close(efd);
    int code = main_fn(argc, argv, no_env);
    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, STDOUT_FILENO);
    dup2(saved_err, STDERR_FILENO);
    close(saved_out);
    close(saved_err);
    *ret_out = slurp(out_path);
    *ret_err = slurp(err_path);
    return code;
}

/* status --pool: queue keys (skipped specs: one valid UTF-8, which its JSON holds as it is, one
 * not, which it holds escaped), a daemon's node and host, a refusal's reason, principal and
 * author. Mutation checked: the escape of the skipped-spec line; the listing of a key that is
 * not UTF-8. */
Test(daemon_escape, status_pool)
{
    put_queue_key(EVIL);
    put_queue_key("y" EVIL_UTF8);
    struct pool p = pool();
    char key[POOL_KEY_MAX];
    struct daemon_record d = {.pid = 42, .since_ms = 1};
    snprintf(d.node, sizeof(d.node), "%s", EVIL_UTF8);
    snprintf(d.host, sizeof(d.host), "%s", EVIL_UTF8);
    char *rec = daemon_record_encode(&d);
    cr_assert(rec);
    pool_daemon_key(&p, "n1", key, sizeof(key));
    put(key, rec);
    free(rec);
    json_t *r = json_pack("{s:s, s:s, s:b, s:s, s:s, s:s, s:I}", "run", "r9", "reason", EVIL_UTF8,
                          "signed", 1, "principal", EVIL_UTF8, "fingerprint", "SHA256:abc", "by",
                          EVIL_UTF8, "at_ms", (json_int_t)1);
    char *refusal = json_dumps(r, JSON_COMPACT);
    json_decref(r);
    pool_refused_key(&p, "r9", key, sizeof(key));
    put(key, refusal);
    free(refusal);
    char *out, *err;
    const char *argv[] = {"status", "--pool", "default", NULL};
    cr_assert_eq(run(pool_status_main, argv, &out, &err), 0, "%s", err);
    assert_terminal_safe(out, "status --pool (stdout)");
    assert_terminal_safe(err, "status --pool (stderr)");
    cr_expect(strstr(out, "\nskipped spec '/elastic/~pools/default/queue/" EVIL_ESC "': "), "%s",
              out);
    cr_expect(strstr(out, "\nskipped spec '/elastic/~pools/default/queue/y" EVIL_UTF8_ESC "': "),
              "%s", out);
    cr_expect(strstr(out, "\n" EVIL_UTF8_ESC " " EVIL_UTF8_ESC " 42 "), "%s", out);
    cr_expect(strstr(out, "\nr9                       " EVIL_UTF8_ESC
                          "; key SHA256:abc of " EVIL_UTF8_ESC " (by " EVIL_UTF8_ESC ")\n"),
              "%s", out);
}

/* submit walks the queue after queueing its run and warns of the spec it skips: the key is
 * shown escaped. Mutation checked: the escape of that warning. */
Test(daemon_escape, submit)
{
    put_queue_key(EVIL);
    char *out, *err;
    const char *argv[] = {"submit", "--run-id", "r1", "--", "true", NULL};
    cr_assert_eq(run(submit_main, argv, &out, &err), 0, "%s", err);
    assert_terminal_safe(out, "submit (stdout)");
    assert_terminal_safe(err, "submit (stderr)");
    cr_expect(strstr(err, "elastic-agent submit: warning: skipping run spec "
                          "'/elastic/~pools/default/queue/" EVIL_ESC "': "),
              "%s", err);
    cr_expect(strstr(out, "submitted run 'r1' to pool 'default'"), "%s", out);
}

/* cancel of a run whose state a store writer made up: the refusal quotes the state's status.
 * Mutation checked: the escape of cancel's error line. */
Test(daemon_escape, cancel)
{
    struct rdzv_state s = {.round = 1, .status = RDZV_WAITING, .min_nodes = 1, .max_nodes = 1};
    char *json = NULL;
    cr_assert_eq(rdzv_state_encode(&s, &json, NULL), 0);
    json_t *j = json_loads(json, 0, NULL);
    free(json);
    json_object_set_new(j, "status", json_string(EVIL_UTF8));
    json = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    put("/elastic/r2/state", json);
    free(json);
    char *out, *err;
    const char *argv[] = {"cancel", "r2", NULL};
    cr_assert_neq(run(cancel_main, argv, &out, &err), 0, "%s", out);
    assert_terminal_safe(out, "cancel (stdout)");
    assert_terminal_safe(err, "cancel (stderr)");
    cr_expect(strstr(err, "elastic-agent cancel: refusing to touch key '/elastic/r2/state': "
                          "state: unknown status '" EVIL_UTF8_ESC "'\n"),
              "%s", err);
}
