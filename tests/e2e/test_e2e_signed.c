// SPDX-License-Identifier: Apache-2.0
/*
 * Signed submissions end to end (issue 29) against a real etcd, with keys made by ssh-keygen at
 * test time: a run submitted with `submit --sign-with` runs through two `serve --allowed-signers`
 * daemons, and status --pool names its signer. Then what someone who can write to the store
 * puts straight into the pool's queue (pointing `next` at it, bypassing submit): an unsigned
 * spec, one signed by a key the daemons do not allow, an expired one, one signed for another
 * pool, one changed after signing. None of them ever runs on any daemon: the worker would create
 * a marker file, which never exists; each is refused once (one daemon's log line and event),
 * moved aside and listed by status --pool with its reason and key; the daemons then run the next
 * signed run. `serve` without --allowed-signers exits 2; with --allow-unsigned it says so.
 * Waits poll status --pool with deadlines (and fail at once if a marker appears); no sleeps.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "etcd_harness.h"
#include "harness.h"
#include "kv.h"
#include "runspec.h"
#include "specsig.h"

static char dir[256], state[300], envdir[300];
static struct etcd_harness eh;
static int n_cmds;
static char fp_alice[64], fp_mallory[64];

/* Run argv (execvp) quietly, stdout to `out` (NULL: /dev/null); its exit code. */
static int run(const char *const *argv, const char *out)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int fd = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int64_t wall_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void fingerprint(const char *pub, char *buf)
{
    const char *argv[] = {"ssh-keygen", "-l", "-f", pub, NULL};
    const char *out = h_fmt("%s/fp.out", dir);
    cr_assert_eq(run(argv, out), 0);
    char *line = h_slurp(out, NULL);
    cr_assert_eq(sscanf(line, "%*d %63s", buf), 1);
    free(line);
}

static void setup(void)
{
    h_suite_dirs("signed", dir, state, envdir);
    n_cmds = 0;
    for (int i = 0; i < 2; i++) {
        const char *name = i ? "mallory" : "alice";
        const char *argv[] = {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f",
                              h_fmt("%s/%s", dir, name), NULL};
        cr_assert_eq(run(argv, NULL), 0, "ssh-keygen");
    }
    fingerprint(h_fmt("%s/alice.pub", dir), fp_alice);
    fingerprint(h_fmt("%s/mallory.pub", dir), fp_mallory);
    /* the daemons' allowed signers: alice, for our namespace */
    char *pub = h_slurp(h_fmt("%s/alice.pub", dir), NULL);
    FILE *f = fopen(h_fmt("%s/allowed_signers", dir), "w");
    cr_assert(f);
    fprintf(f, "# who may submit runs to this pool\nalice@example.com namespaces=\"%s\" %s",
            SPECSIG_NAMESPACE, pub);
    fclose(f);
    free(pub);
    cr_assert_eq(etcd_harness_start(&eh, 1), 0, "etcd did not start");
}

static void teardown(void)
{
    h_kill_agents();
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
    etcd_harness_stop(&eh);
    if (getenv("EA_E2E_KEEP"))
        cr_log_warn("kept %s", dir);
    else
        h_rmdir(dir);
}

TestSuite(signed, .init = setup, .fini = teardown, .timeout = 90);

/* `elastic-agent ARGS...`: its exit code (within 30 s); its stdout's path in out (may be NULL). */
static int cmd(const char *const *args, char *out, size_t size)
{
    struct h_agent a;
    h_agent_start(&a, dir, h_fmt("cmd%d", n_cmds++), args);
    int code = h_agent_wait(&a, 30000);
    if (out)
        snprintf(out, size, "%s", a.out);
    if (code != 0)
        h_show_log(&a);
    return code;
}

/* Daemon `name` of pool "default" checking signatures against the allowed signers. */
static void serve(struct h_agent *a, const char *name, const char *extra)
{
    const char *args[20] = {"serve", "--rdzv-endpoint", eh.endpoints, "--node-id", name,
                            "--local-addr", "127.0.0.1", "--lease-ttl", "2", "--allowed-signers",
                            h_fmt("%s/allowed_signers", dir), "--events",
                            h_fmt("%s/%s.events", dir, name)};
    int n = 13;
    if (extra)
        args[n++] = extra;
    args[n] = NULL;
    h_agent_start(a, dir, name, args);
    cr_assert(h_log_wait(a, "serving pool 'default'", 10000), "daemon %s did not start", name);
}

static json_t *pool_status(void)
{
    char out[512];
    const char *args[] = {"status", "--pool", "default", "--json", "--rdzv-endpoint",
                          eh.endpoints, NULL};
    cr_assert_eq(cmd(args, out, sizeof(out)), 0, "status --pool failed");
    json_error_t je;
    json_t *j = json_load_file(out, 0, &je);
    cr_assert(j, "status --pool --json: %s", je.text);
    return j;
}

static json_t *find(json_t *list, const char *field, const char *value)
{
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        const char *v = json_string_value(json_object_get(e, field));
        if (v && strcmp(v, value) == 0)
            return e;
    }
    return NULL;
}

/* Two daemons d1, d2, idle. */
static void serve_two(struct h_agent *d)
{
    serve(&d[0], "d1", NULL);
    serve(&d[1], "d2", NULL);
    int64_t end = h_now_ms() + 10000;
    for (;;) {
        json_t *j = pool_status();
        size_t n = json_array_size(json_object_get(j, "daemons"));
        json_decref(j);
        if (n == 2)
            return;
        cr_assert_lt(h_now_ms(), end, "the daemons did not register");
        poll(NULL, 0, 100); /* the next look at the status, not a synchronisation */
    }
}

static const char *marker(const char *run)
{
    return h_fmt("%s/marker-%s", envdir, run);
}

/* A spec of run `id` whose worker creates marker(id): what submit would write, not signed. */
static struct runspec make_spec(const char *id, const char *pool, int64_t submitted,
                                int64_t expires)
{
    struct runspec s = {.min_nodes = 1, .max_nodes = 2, .submitted_ms = submitted,
                        .expires_ms = expires};
    snprintf(s.run_id, sizeof(s.run_id), "%s", id);
    snprintf(s.pool, sizeof(s.pool), "%s", pool);
    snprintf(s.prefix, sizeof(s.prefix), "/elastic/");
    s.args = calloc(3, sizeof(char *));
    s.args[0] = strdup("--max");
    s.args[1] = strdup("2");
    s.n_args = 2;
    s.command = calloc(3, sizeof(char *));
    s.command[0] = strdup("touch");
    s.command[1] = strdup(marker(id));
    s.n_command = 2;
    s.env = calloc(1, sizeof(char *));
    return s;
}

/* Sign `s` with `key` the way submit does: ssh-keygen -Y sign over its canonical bytes. */
static void sign_spec(struct runspec *s, const char *key)
{
    char *msg = NULL;
    size_t len = 0;
    cr_assert_eq(runspec_canonical(s, &msg, &len, NULL), 0);
    const char *file = h_fmt("%s/%s.spec", dir, s->run_id);
    FILE *f = fopen(file, "w");
    cr_assert(f);
    fwrite(msg, 1, len, f);
    fclose(f);
    free(msg);
    const char *argv[] = {"ssh-keygen", "-Y", "sign", "-f", h_fmt("%s/%s", dir, key), "-n",
                          SPECSIG_NAMESPACE, file, NULL};
    cr_assert_eq(run(argv, NULL), 0, "ssh-keygen -Y sign");
    s->signature = h_slurp(h_fmt("%s.sig", file), NULL);
}

/* What a store writer does: put `json` as queue/<id> and point `next` at it. */
static void put_spec(const char *id, const char *json)
{
    struct kv *kv = NULL;
    struct ea_error err = {0};
    cr_assert_eq(etcd_harness_open(eh.endpoints, 5000, NULL, NULL, &kv, &err), 0, "%s", err.msg);
    const char *q = h_fmt("/elastic/~pools/default/queue/%s", id);
    cr_assert_eq(kv_put(kv, q, json, strlen(json), 0, NULL, &err), 0, "%s", err.msg);
    const char *next = h_fmt("{\"run\":\"%s\",\"schema\":\"" RUNSPEC_SCHEMA "\"}", id);
    cr_assert_eq(kv_put(kv, "/elastic/~pools/default/next", next, strlen(next), 0, NULL, &err),
                 0, "%s", err.msg);
    kv_close(kv);
}

static char *encode(const struct runspec *s)
{
    char *json = NULL;
    cr_assert_eq(runspec_encode(s, &json, NULL), 0);
    return json;
}

/* Submit run `id` signed by `key` (NULL: alice) with --wait: its worker creates marker(id).
 * Exit code. */
static int submit_signed(const char *id, const char *key)
{
    const char *args[20] = {"submit", "--rdzv-endpoint", eh.endpoints, "--run-id", id,
                            "--sign-with", h_fmt("%s/%s", dir, key ? key : "alice"), "--wait",
                            "--max", "2"};
    int n = 10;
    args[n++] = "--";
    args[n++] = "touch";
    args[n++] = marker(id);
    args[n] = NULL;
    return cmd(args, NULL, 0);
}

static int count_in_logs(struct h_agent *d, int n, const char *needle)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += h_file_contains(d[i].log, needle);
    return k;
}

/*
 * The spec put as `json` for run `id` is never run: wait (deadline) until status --pool lists it
 * as refused with `reason` and key `fp` ("" none), failing at once if marker(id) (or `also`)
 * appears; exactly one daemon said so (log line and spec_refused event); then a signed run goes
 * through the same daemons, the refusal is not said again and the marker still does not exist.
 */
static void never_runs_after(struct h_agent *d, const char *id, const char *json,
                             const char *reason, const char *fp, const char *also,
                             const char *signer);

static void never_runs(struct h_agent *d, const char *id, const char *json, const char *reason,
                       const char *fp, const char *also)
{
    never_runs_after(d, id, json, reason, fp, also, "alice");
}

/* never_runs(), the next run signed by `signer`. */
static void never_runs_after(struct h_agent *d, const char *id, const char *json,
                             const char *reason, const char *fp, const char *also,
                             const char *signer)
{
    put_spec(id, json);
    int64_t end = h_now_ms() + 20000;
    json_t *refused = NULL, *j = NULL;
    while (!refused) {
        cr_assert_eq(access(marker(id), F_OK), -1, "run '%s' ran: %s exists", id, marker(id));
        cr_assert(!also || access(also, F_OK) == -1, "run '%s' ran: %s exists", id, also);
        json_decref(j);
        j = pool_status();
        refused = find(json_object_get(j, "refused"), "run", id);
        if (refused)
            break;
        cr_assert_lt(h_now_ms(), end, "run '%s' not refused after 20 s", id);
        poll(NULL, 0, 100); /* the next look at the status */
    }
    const char *why = json_string_value(json_object_get(refused, "reason"));
    cr_assert(strstr(why, reason), "run '%s' refused for '%s', not '%s'", id, why, reason);
    cr_assert_str_eq(json_string_value(json_object_get(refused, "fingerprint")), fp);
    cr_assert_null(find(json_object_get(j, "runs"), "run", id), "still queued");
    json_decref(j);
    const char *line = h_fmt("refusing run '%s' of pool 'default'", id);
    cr_assert_eq(count_in_logs(d, 2, line), 1, "said %d times", count_in_logs(d, 2, line));
    const char *event = h_fmt("\"event\":\"spec_refused\"");
    int events = 0;
    for (int i = 0; i < 2; i++) {
        const char *path = h_fmt("%s/d%d.events", dir, i + 1);
        events += access(path, F_OK) == 0 && h_file_contains(path, event) &&
                  h_file_contains(path, h_fmt("\"run\":\"%s\"", id));
    }
    cr_assert_eq(events, 1, "%d spec_refused events", events);
    /* the daemons go on: the next signed run runs */
    cr_assert_eq(submit_signed(h_fmt("after-%s", id), signer), 0);
    cr_assert_eq(access(marker(h_fmt("after-%s", id)), F_OK), 0);
    cr_assert_eq(access(marker(id), F_OK), -1, "run '%s' ran", id);
    cr_assert(!also || access(also, F_OK) == -1);
    cr_assert_eq(count_in_logs(d, 2, line), 1, "the refusal was said again");
}

Test(signed, signed_run_completes_through_two_daemons)
{
    struct h_agent d[2], s;
    serve_two(d);
    /* both daemons in the run (min 2), which holds until go exists */
    const char *args[] = {"submit", "--rdzv-endpoint", eh.endpoints, "--run-id", "good",
                          "--sign-with", h_fmt("%s/alice", dir), "--valid-for", "2h", "--wait",
                          "--min", "2", "--max", "2", "--settle", "0.5", "--", "sh", "-c",
                          h_fmt("touch %s/ran-$ELASTIC_NODE_ID && exec %s/ea-testworker wait-file "
                                "%s/go",
                                envdir, EA_HELPERS_DIR, envdir),
                          NULL};
    h_agent_start(&s, dir, "submit-good", args);
    cr_assert_eq(h_wait_files(envdir, "ran-", 2, 20000), 2, "the run did not start on both");
    cr_assert(h_file_contains(s.out, h_fmt("signed with key %s", fp_alice)));
    json_t *j = pool_status();
    json_t *run = find(json_object_get(j, "runs"), "run", "good");
    cr_assert(run, "run 'good' not listed");
    json_t *g = json_object_get(run, "signer");
    cr_assert(json_is_true(json_object_get(g, "verified")), "signer not verified");
    cr_assert_str_eq(json_string_value(json_object_get(g, "principal")), "alice@example.com");
    cr_assert_str_eq(json_string_value(json_object_get(g, "fingerprint")), fp_alice);
    int64_t valid = json_integer_value(json_object_get(run, "expires_ms")) -
                    json_integer_value(json_object_get(run, "submitted_ms"));
    cr_assert_eq(valid, 2 * 3600 * 1000);
    cr_assert_eq(json_array_size(json_object_get(j, "allow_unsigned")), 0);
    json_decref(j);
    for (int i = 0; i < 2; i++)
        cr_assert(h_log_wait(&d[i], h_fmt("signed by 'alice@example.com' %s", fp_alice), 1000));
    /* status with the allowed signers verifies the queued spec itself */
    char vout[512];
    const char *verify[] = {"status", "--pool", "default", "--json", "--allowed-signers",
                            h_fmt("%s/allowed_signers", dir), "--rdzv-endpoint", eh.endpoints,
                            NULL};
    cr_assert_eq(cmd(verify, vout, sizeof(vout)), 0);
    char *vj = h_slurp(vout, NULL);
    cr_assert(strstr(vj, "\"principal\":\"alice@example.com\"") &&
                  strstr(vj, "\"verified\":true"),
              "%s", vj);
    free(vj);
    /* the text form names the signer too */
    char out[512];
    const char *text[] = {"status", "--pool", "default", "--rdzv-endpoint", eh.endpoints, NULL};
    cr_assert_eq(cmd(text, out, sizeof(out)), 0);
    cr_assert(h_file_contains(out, h_fmt("alice@example.com %s", fp_alice)));
    FILE *f = fopen(h_fmt("%s/go", envdir), "w");
    cr_assert(f);
    fclose(f);
    h_expect_exit(&s, 0, 30000);
}

Test(signed, unsigned_spec_never_runs)
{
    struct h_agent d[2];
    serve_two(d);
    int64_t now = wall_ms();
    struct runspec s = make_spec("nosig", "default", now, now + 3600000);
    char *json = encode(&s);
    never_runs(d, "nosig", json, "unsigned", "", NULL);
    /* cancel forgets a refused spec */
    const char *cancel[] = {"cancel", "nosig", "--rdzv-endpoint", eh.endpoints, NULL};
    cr_assert_eq(cmd(cancel, NULL, 0), 0);
    json_t *j = pool_status();
    cr_assert_null(find(json_object_get(j, "refused"), "run", "nosig"));
    json_decref(j);
    free(json);
    runspec_clear(&s);
}

Test(signed, spec_signed_by_an_unknown_key_never_runs)
{
    struct h_agent d[2];
    serve_two(d);
    int64_t now = wall_ms();
    struct runspec s = make_spec("mallory", "default", now, now + 3600000);
    sign_spec(&s, "mallory");
    char *json = encode(&s);
    never_runs(d, "mallory", json, h_fmt("key %s is not in the allowed signers", fp_mallory),
               fp_mallory, NULL);
    free(json);
    runspec_clear(&s);
}

Test(signed, expired_spec_never_runs)
{
    struct h_agent d[2];
    serve_two(d);
    int64_t now = wall_ms();
    struct runspec s = make_spec("stale", "default", now - 7200000, now - 3600000);
    sign_spec(&s, "alice");
    char *json = encode(&s);
    never_runs(d, "stale", json, "expired at", fp_alice, NULL);
    free(json);
    runspec_clear(&s);
}

Test(signed, spec_signed_for_another_pool_never_runs)
{
    struct h_agent d[2];
    serve_two(d);
    int64_t now = wall_ms();
    struct runspec s = make_spec("elsewhere", "gpu", now, now + 3600000);
    sign_spec(&s, "alice"); /* a real submission to pool gpu, replayed into default */
    char *json = encode(&s);
    never_runs(d, "elsewhere", json, "submitted to pool 'gpu', not 'default'", fp_alice, NULL);
    free(json);
    runspec_clear(&s);
}

Test(signed, spec_changed_after_signing_never_runs)
{
    struct h_agent d[2];
    serve_two(d);
    int64_t now = wall_ms();
    struct runspec s = make_spec("changed", "default", now, now + 3600000);
    free(s.command[1]);
    s.command[1] = strdup(h_fmt("%s/changed-A", envdir));
    sign_spec(&s, "alice");
    char *json = encode(&s);
    /* one byte of the signed command changed: the worker would create changed-B instead */
    char *at = strstr(json, "changed-A");
    cr_assert(at);
    at[8] = 'B';
    never_runs(d, "changed", json, "does not verify", fp_alice, h_fmt("%s/changed-B", envdir));
    cr_assert_eq(access(h_fmt("%s/changed-A", envdir), F_OK), -1);
    free(json);
    runspec_clear(&s);
}

/* A key taken out of the allowed signers file (a revoked laptop key): the running daemons read
 * the file again, and a spec it signs is refused from then on; the key that replaced it works. */
Test(signed, key_removed_from_the_file_is_refused)
{
    struct h_agent d[2];
    serve_two(d);
    cr_assert_eq(submit_signed("before", NULL), 0); /* alice is allowed */
    char *pub = h_slurp(h_fmt("%s/mallory.pub", dir), NULL);
    const char *tmp = h_fmt("%s/allowed_signers.new", dir);
    FILE *f = fopen(tmp, "w");
    cr_assert(f);
    fprintf(f, "mallory@example.com %s", pub);
    fclose(f);
    free(pub);
    cr_assert_eq(rename(tmp, h_fmt("%s/allowed_signers", dir)), 0); /* as a ConfigMap swaps */
    int64_t now = wall_ms();
    struct runspec s = make_spec("revoked", "default", now, now + 3600000);
    sign_spec(&s, "alice");
    char *json = encode(&s);
    never_runs_after(d, "revoked", json, h_fmt("key %s is not in the allowed signers", fp_alice),
                     fp_alice, NULL, "mallory");
    free(json);
    runspec_clear(&s);
    cr_assert_geq(count_in_logs(d, 2, "allowed_signers' changed: 1 key(s) now"), 1);
}

Test(signed, serve_needs_allowed_signers_or_allow_unsigned)
{
    struct h_agent a;
    const char *bare[] = {"serve", "--rdzv-endpoint", eh.endpoints, "--node-id", "x", NULL};
    h_agent_start(&a, dir, "bare", bare);
    h_expect_exit(&a, 2, 10000);
    cr_assert(h_file_contains(a.log, "no --allowed-signers FILE"));
    cr_assert(h_file_contains(a.log, "--allow-unsigned"));
    const char *missing[] = {"serve", "--rdzv-endpoint", eh.endpoints, "--allowed-signers",
                             h_fmt("%s/nosuch", dir), NULL};
    h_agent_start(&a, dir, "missing", missing);
    h_expect_exit(&a, 2, 10000);
    cr_assert(h_file_contains(a.log, "--allowed-signers:"));
    /* --allow-unsigned: warned at start, shown by status --pool; a signed spec is still checked */
    struct h_agent d;
    serve(&d, "open", "--allow-unsigned");
    cr_assert(h_log_wait(&d, "--allow-unsigned: this daemon runs unsigned specs", 5000));
    int64_t end = h_now_ms() + 10000;
    json_t *j = NULL;
    while (!j || !json_array_size(json_object_get(j, "allow_unsigned"))) {
        json_decref(j);
        cr_assert_lt(h_now_ms(), end, "status --pool does not show --allow-unsigned");
        poll(NULL, 0, 100);
        j = pool_status();
    }
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "allow_unsigned"), 0)),
                     "open");
    json_decref(j);
    char out[512];
    const char *text[] = {"status", "--pool", "default", "--rdzv-endpoint", eh.endpoints, NULL};
    cr_assert_eq(cmd(text, out, sizeof(out)), 0);
    cr_assert(h_file_contains(out, "run unsigned specs (--allow-unsigned): open"));
    /* an unsigned submission runs there */
    const char *sub[] = {"submit", "--rdzv-endpoint", eh.endpoints, "--run-id", "plain",
                         "--wait", "--", "touch", marker("plain"), NULL};
    cr_assert_eq(cmd(sub, NULL, 0), 0);
    cr_assert_eq(access(marker("plain"), F_OK), 0);
}
