// SPDX-License-Identifier: Apache-2.0
/* submit and cancel: queue a run spec in a pool (and with --wait follow the run to its end),
 * close a run (docs/daemon.md). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "daemon.h"
#include "daemon_internal.h"
#include "daemon_sign.h"
#include "ea_escape.h"
#include "ea_loop.h"
#include "ea_time.h"
#include "pool.h"
#include "state.h"

static const char submit_help[] =
    "Usage: elastic-agent submit --run-id ID [--pool NAME] [--wait] [--env NAME=VALUE]...\n"
    "                            [--sign-with KEY] [--valid-for DURATION]\n"
    "                            [RUN OPTIONS] [STORE OPTIONS] -- COMMAND [ARGS...]\n"
    "\n"
    "Queues a run in a pool of `elastic-agent serve` daemons and returns. The spec is data:\n"
    "the run's options, COMMAND's argv and the --env entries are stored as JSON arrays (no\n"
    "shell line, no secrets); it is validated here exactly like `elastic-agent [OPTIONS] --\n"
    "COMMAND`, and refused with the same messages. Daemons join it, oldest run first, while it\n"
    "has room (fewer nodes than --max); COMMAND runs as the daemons' user.\n"
    "\n"
    "  --run-id ID                  the run's id (1-100 of A-Z a-z 0-9 . _ -; new in the store)\n"
    "  --pool NAME                  the pool [default default] [env ELASTIC_POOL]\n"
    "  --wait                       follow the run to its end; exit with its code\n"
    "  --env NAME=VALUE             extra variable for the workers (repeatable; not ELASTIC_*\n"
    "                               or PET_*: give the option instead)\n"
    "  --sign-with KEY              sign the spec (with its pool, run id, submit time and\n"
    "                               expiry) by `ssh-keygen -Y sign -f KEY -n "
    "elastic-agent-submit`:\n"
    "                               KEY is an ed25519 private key file, or its .pub with the\n"
    "                               private half in ssh-agent; daemons with --allowed-signers\n"
    "                               run only signed specs [env ELASTIC_SIGN_WITH]\n"
    "  --valid-for DURATION         no daemon starts the run after this long, N[s|m|h|d], 1m\n"
    "                               to 30d; nodes join it only while it is valid [default 24h]\n"
    "                               [env ELASTIC_VALID_FOR]\n"
    "\nRun options (as in `elastic-agent --help`; --nproc-per-node and --stop-timeout: else each\n"
    "daemon's; per-node options such as --node-id, --host, --log-dir belong to serve and are\n"
    "refused here):\n";

static const char submit_help_store[] =
    "\nStore options (each also from ELASTIC_<NAME>):\n";

static const char submit_help_end[] =
    "\nExit status: 0 queued (with --wait: the run succeeded), 1 the run failed, 2 usage error\n"
    "or a spec refused, 3 store unreachable, 4 the run was closed or cancelled (or timed out\n"
    "before reaching --min).\n";

static const char cancel_help[] =
    "Usage: elastic-agent cancel ID [--pool NAME] [STORE OPTIONS]\n"
    "\n"
    "  --pool NAME                  the pool [default default] [env ELASTIC_POOL]\n"
    "\n"
    "Closes run ID: its state goes `closed`, so every agent of it stops its workers (SIGTERM,\n"
    "SIGKILL after --stop-timeout) and exits 4, and its daemons go back to idle; a queued run\n"
    "that never started is closed before it does. It leaves the pool's queue.\n"
    "\nExit status: 0 closed (or over already), 2 usage error, 3 store unreachable, 4 no such\n"
    "run.\n";

static bool submit_lists_run(const char *flag, unsigned cmds)
{
    return (cmds & CFG_AGENT) && runspec_is_run_option(flag);
}

/* --run-id is submit's own (listed above) */
static bool submit_lists_store(const char *flag, unsigned cmds)
{
    return daemon_is_store_option(flag, cmds) && strcmp(flag, "run-id") != 0 &&
           strcmp(flag, "rdzv-id") != 0;
}

struct sub_args {
    const char *run_id, *pool, *sign_with, *valid_for;
    bool wait, help;
    char **env;
    size_t n_env;
};

static int on_own(void *ctx, const char *flag, const char *v)
{
    struct sub_args *a = ctx;
    if (strcmp(flag, "help") == 0)
        a->help = true;
    else if (strcmp(flag, "wait") == 0)
        a->wait = true;
    else if (strcmp(flag, "pool=") == 0)
        a->pool = v;
    else if (strcmp(flag, "run-id=") == 0 || strcmp(flag, "rdzv-id=") == 0)
        a->run_id = v;
    else if (strcmp(flag, "env=") == 0)
        a->env[a->n_env++] = (char *)v;
    else if (strcmp(flag, "sign-with=") == 0)
        a->sign_with = v;
    else if (strcmp(flag, "valid-for=") == 0)
        a->valid_for = v;
    return 0;
}

static void report_bad(void *ctx, const char *key, int64_t rev, const char *why)
{
    (void)ctx;
    (void)rev;
    ea_fprintf(stderr, "elastic-agent submit: warning: skipping run spec '%s': %s (never run)\n",
               key, why);
}

static char **dup_strv(char *const *v, size_t n)
{
    char **out = calloc(n + 1, sizeof(*out));
    for (size_t i = 0; out && i < n; i++)
        if (!(out[i] = strdup(v[i]))) {
            for (size_t k = 0; k < i; k++)
                free(out[k]);
            free(out);
            return NULL;
        }
    return out;
}

/* --wait: following a run's `state` until it is final, on an ea_loop (one step, two sources). */
struct follow {
    struct kv *kv;
    const char *id;
    char key[POOL_KEY_MAX];
    int sigfd;
    int code; /* -1 until known */
    int64_t watch;
};

static void follow_state(struct follow *f, const char *value, size_t len)
{
    struct rdzv_state s = {0};
    if (rdzv_state_decode(value, len, &s, NULL) == 0)
        f->code = pool_status_exit(rdzv_status_name(s.status));
    rdzv_state_clear(&s);
}

/* No watch (at first, or broken): read the state and watch from there. */
static void step_follow(void *ctx, int64_t now)
{
    struct follow *f = ctx;
    (void)now;
    if (f->watch)
        return;
    struct ea_error err = {0};
    struct kv_list l = {0};
    int r = kv_list(f->kv, f->key, &l, &err);
    if (r == 0)
        r = kv_watch(f->kv, f->key, l.revision + 1, &f->watch, &err);
    for (size_t i = 0; r == 0 && i < l.n && f->code < 0; i++)
        if (strcmp(l.entries[i].key, f->key) == 0)
            follow_state(f, l.entries[i].value, l.entries[i].value_len);
    kv_list_clear(&l);
    if (r < 0) {
        ea_fprintf(stderr, "elastic-agent submit: following run '%s': %s\n", f->id, err.msg);
        f->code = AGENT_EXIT_STORE;
    }
}

static const struct ea_loop_step follow_steps[] = {{"follow", step_follow, NULL, true}};

static size_t fds_signal(void *ctx, struct pollfd *fds, size_t max)
{
    (void)max;
    fds[0] = (struct pollfd){.fd = ((struct follow *)ctx)->sigfd, .events = POLLIN};
    return 1;
}

static void ready_signal(void *ctx, const struct pollfd *fds, size_t n, int64_t now)
{
    struct follow *f = ctx;
    struct signalfd_siginfo si;
    (void)fds, (void)n, (void)now;
    if (read(f->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
        f->code = 128 + (int)si.ssi_signo; /* the run goes on: cancel stops it */
}

static size_t fds_store(void *ctx, struct pollfd *fds, size_t max)
{
    (void)max;
    fds[0] = (struct pollfd){.fd = kv_event_fd(((struct follow *)ctx)->kv), .events = POLLIN};
    return 1;
}

static void ready_store(void *ctx, const struct pollfd *fds, size_t n, int64_t now)
{
    struct follow *f = ctx;
    struct kv_event *ev = NULL;
    size_t k = 0;
    (void)fds, (void)n, (void)now;
    if (kv_read_events(f->kv, &ev, &k, NULL) < 0)
        return;
    for (size_t i = 0; i < k && f->code < 0; i++) {
        if (ev[i].type == KV_EVENT_ERROR)
            f->watch = 0; /* list and watch again */
        else if (ev[i].type == KV_EVENT_PUT && strcmp(ev[i].entry.key, f->key) == 0)
            follow_state(f, ev[i].entry.value, ev[i].entry.value_len);
    }
    kv_events_free(ev, k);
}

static const struct ea_loop_source follow_sources[] = {
    {"signal", 1, fds_signal, ready_signal, false},
    {"store", 1, fds_store, ready_store, false},
};

static bool follow_done(void *ctx)
{
    return ((const struct follow *)ctx)->code >= 0;
}

/* Follow run `id` until its state is final: its exit code (0/1/4), or 3/130-ish on trouble. */
static int wait_run(struct pool *pool, const char *id)
{
    struct follow f = {.kv = pool->kv, .id = id, .code = -1};
    pool_run_key(pool, id, "state", f.key, sizeof(f.key));
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    f.sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    struct ea_loop *l = ea_loop_create(NULL, follow_done, &f);
    int r = l ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < sizeof(follow_steps) / sizeof(follow_steps[0]); i++)
        r = ea_loop_add_step(l, &follow_steps[i], &f);
    for (size_t i = 0; r == 0 && i < sizeof(follow_sources) / sizeof(follow_sources[0]); i++)
        r = ea_loop_add_source(l, &follow_sources[i], &f);
    if (r == 0)
        ea_loop_run(l); /* until the code is known, or the wait fails (code -1) */
    ea_loop_destroy(l);
    if (f.watch)
        kv_watch_cancel(f.kv, f.watch);
    if (f.sigfd >= 0)
        close(f.sigfd);
    return f.code;
}

int submit_main(int argc, char **argv, char **envp)
{
    static const char *const own[] = {"help",  "wait", "pool=", "run-id=", "rdzv-id=", "env=",
                                      "sign-with=", "valid-for=", NULL};
    struct sub_args a = {.pool = daemon_default_pool(envp),
                         .sign_with = daemon_env(envp, "ELASTIC_SIGN_WITH"),
                         .valid_for = daemon_env(envp, "ELASTIC_VALID_FOR"),
                         .env = calloc((size_t)argc + 1, sizeof(char *))};
    struct cfg store;
    char **rest = NULL;
    size_t n_rest = 0;
    struct runspec s = {0};
    struct kv *kv = NULL;
    int code = AGENT_EXIT_USAGE;
    if (!a.env || daemon_split_args("submit", argc, argv, envp, own, on_own, &a, &store, &rest,
                                    &n_rest) < 0)
        goto out;
    if (a.help) {
        fputs(submit_help, stdout);
        daemon_print_options(stdout, submit_lists_run);
        fputs(submit_help_store, stdout);
        daemon_print_options(stdout, submit_lists_store);
        fputs(submit_help_end, stdout);
        code = 0;
        goto out;
    }
    if (!a.run_id) {
        ea_fprintf(stderr, "elastic-agent submit: --run-id ID is required (see submit --help)\n");
        goto out;
    }
    /* the run's options (each with its value), then "--" (or the command) and the command */
    size_t dash = 0, cmd = n_rest;
    while (dash < n_rest) {
        const char *o = rest[dash];
        if (strcmp(o, "--") == 0) {
            cmd = dash + 1;
            break;
        }
        if (strncmp(o, "--", 2) != 0) {
            cmd = dash;
            break;
        }
        bool value = false;
        const char *name = o + 2, *eq = strchr(name, '=');
        cfg_option_find(name, eq ? (size_t)(eq - name) : strlen(name), &value);
        dash += value && !eq && dash + 1 < n_rest ? 2 : 1;
    }
    struct ea_error err = {0};
    int64_t valid_ms = SPECSIG_VALID_DEFAULT_MS;
    if (a.valid_for && daemon_parse_validity(a.valid_for, &valid_ms, &err) < 0) {
        ea_fprintf(stderr, "elastic-agent submit: %s\n", err.msg);
        goto out;
    }
    struct pool p;
    if (pool_init(&p, NULL, store.prefix, a.pool, &err) < 0) {
        ea_fprintf(stderr, "elastic-agent submit: %s\n", err.msg);
        goto out;
    }
    snprintf(s.run_id, sizeof(s.run_id), "%s", a.run_id);
    snprintf(s.pool, sizeof(s.pool), "%s", p.name);
    snprintf(s.prefix, sizeof(s.prefix), "%s", p.prefix);
    s.n_args = dash;
    s.n_command = n_rest - cmd;
    s.n_env = a.n_env;
    s.submitted_ms = ea_wall_ms();
    s.expires_ms = s.submitted_ms + valid_ms;
    if (!(s.args = dup_strv(rest, s.n_args)) || !(s.command = dup_strv(rest + cmd, s.n_command)) ||
        !(s.env = dup_strv(a.env, a.n_env))) {
        ea_fprintf(stderr, "elastic-agent submit: out of memory\n");
        goto out;
    }
    char *no_env[] = {NULL}; /* the submitter's ELASTIC_* variables are not the run's */
    struct cfg rc;
    char **rargv = NULL;
    if (runspec_validate(&s, NULL, 0, no_env, &rc, &rargv, &err) < 0) {
        ea_fprintf(stderr, "elastic-agent submit: %s\n", err.msg);
        goto out;
    }
    s.min_nodes = rc.min_nodes;
    s.max_nodes = rc.max_nodes;
    free(rargv);
    /* the run id's form: runspec_decode's check, on the encoded spec */
    char *json = NULL;
    struct runspec back = {0};
    if (runspec_encode(&s, &json, &err) < 0 ||
        runspec_decode(json, strlen(json), &back, &err) < 0) {
        free(json);
        ea_fprintf(stderr, "elastic-agent submit: --run-id '%s': %s\n", a.run_id, err.msg);
        goto out;
    }
    free(json);
    runspec_clear(&back);
    char fp[SSHSIG_FP_MAX] = "";
    if (a.sign_with && daemon_sign(envp, a.sign_with, &s, fp, &err) < 0) {
        ea_fprintf(stderr, "elastic-agent submit: %s\n", err.msg);
        goto out;
    }
    if ((code = daemon_open_store("submit", &store, &kv)) != 0)
        goto out;
    p.kv = kv;
    static const struct pool_hooks hooks = {.bad = report_bad};
    int r = pool_submit(&p, &s, &err);
    if (r == 0)
        r = pool_advance(&p, NULL, 0, &hooks, NULL, &err);
    if (r < 0) {
        ea_fprintf(stderr, "elastic-agent submit: %s\n", err.msg);
        code = r == -EEXIST ? AGENT_EXIT_USAGE : r == KV_EAUTH ? AGENT_EXIT_USAGE
                                                                : AGENT_EXIT_STORE;
        goto out;
    }
    char until[32];
    time_t t = (time_t)(s.expires_ms / 1000);
    struct tm tm;
    strftime(until, sizeof(until), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    ea_fprintf(stdout, "submitted run '%s' to pool '%s' (min %d, max %d), %s%s, valid until %s\n",
               s.run_id, p.name, s.min_nodes, s.max_nodes, fp[0] ? "signed with key " : "unsigned",
               fp, until);
    fflush(stdout);
    code = 0;
    if (a.wait) {
        code = wait_run(&p, s.run_id);
        ea_fprintf(stdout, "run '%s' %s (exit %d)\n", s.run_id,
                   code == 0   ? "succeeded"
                   : code == 1 ? "failed"
                   : code == 4 ? "closed"
                               : "not followed",
                   code);
    }
out:
    kv_close(kv);
    runspec_clear(&s);
    free(rest);
    free(a.env);
    return code;
}

int cancel_main(int argc, char **argv, char **envp)
{
    static const char *const own[] = {"help", "pool=", "run-id=", "rdzv-id=", NULL};
    struct sub_args a = {.pool = daemon_default_pool(envp)};
    struct cfg store;
    char **rest = NULL;
    size_t n_rest = 0;
    struct kv *kv = NULL;
    int code = AGENT_EXIT_USAGE;
    /* the run's id may come anywhere: take the first word that is not an option's value */
    char **args = calloc((size_t)argc + 1, sizeof(char *));
    int n = 0;
    for (int i = 0; args && i < argc; i++) {
        const char *o = argv[i], *eq = strchr(o, '=');
        bool value = false;
        if (i > 0 && !a.run_id && strncmp(o, "-", 1) != 0) {
            a.run_id = o;
            continue;
        }
        args[n++] = argv[i];
        if (i > 0 && strncmp(o, "--", 2) == 0 && !eq && i + 1 < argc &&
            (strcmp(o, "--pool") == 0 ||
             (cfg_option_find(o + 2, strlen(o + 2), &value) >= 0 && value)))
            args[n++] = argv[++i];
    }
    if (!args || daemon_split_args("cancel", n, args, envp, own, on_own, &a, &store, &rest,
                                   &n_rest) < 0)
        goto out;
    if (a.help) {
        fputs(cancel_help, stdout);
        code = 0;
        goto out;
    }
    if (n_rest > 0) {
        ea_fprintf(stderr, "elastic-agent cancel: unexpected '%s' (see cancel --help)\n", rest[0]);
        goto out;
    }
    if (!a.run_id) {
        ea_fprintf(stderr, "elastic-agent cancel: which run? elastic-agent cancel ID\n");
        goto out;
    }
    if ((code = daemon_open_store("cancel", &store, &kv)) != 0)
        goto out;
    struct pool p;
    struct ea_error err = {0};
    if (pool_init(&p, kv, store.prefix, a.pool, &err) < 0) {
        ea_fprintf(stderr, "elastic-agent cancel: %s\n", err.msg);
        code = AGENT_EXIT_USAGE;
        goto out;
    }
    int r = pool_close_run(&p, a.run_id, &err);
    if (r < 0) {
        ea_fprintf(stderr, "elastic-agent cancel: %s\n", err.msg);
        code = r == -ENOENT ? AGENT_EXIT_RDZV : r == -EBADMSG ? AGENT_EXIT_RDZV
                                                             : AGENT_EXIT_STORE;
        goto out;
    }
    ea_fprintf(stdout, "run '%s' closed\n", a.run_id);
    code = 0;
out:
    kv_close(kv);
    free(rest);
    free(args);
    return code;
}
