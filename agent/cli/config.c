// SPDX-License-Identifier: Apache-2.0
/* cfg: the option table and the parser and validator it drives (--help: config_help.c). */
#include "config.h"
#include "config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <arpa/inet.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OFF(f) offsetof(struct cfg, f)
#define AGENT CFG_AGENT
#define STORE (CFG_AGENT | CFG_STATUS) /* options that locate and open the store */

/* The one table. ELASTIC_<FLAG> (upper case, '-' -> '_') is implied for every entry. */
const struct opt cfg_opts[] = {
    {"min", OPT_INT, OFF(min_nodes), "1", 1, 100000, NULL, "N",
     "minimum number of nodes to run (a round starts with at least this many)", AGENT},
    {"max", OPT_INT, OFF(max_nodes), NULL, 1, 100000, NULL, "N",
     "maximum number of nodes (default: --min); extra nodes wait as spares", AGENT},
    {"nnodes", OPT_NNODES, 0, NULL, 0, 0, "PET_NNODES", "MIN[:MAX]",
     "torchrun form of --min/--max", AGENT},
    {"nproc-per-node", OPT_INT, OFF(nproc_per_node), "1", 1, 4096, "PET_NPROC_PER_NODE", "N",
     "worker processes on this node", AGENT},
    {"run-id", OPT_STR, OFF(run_id), NULL, 0, 0, "PET_RDZV_ID", "ID",
     "job id shared by every node of the run (default 'default')", STORE},
    {"rdzv-id", OPT_STR, OFF(run_id), NULL, 0, 0, NULL, "ID", "alias of --run-id (torchrun)",
     STORE},
    {"rdzv-backend", OPT_STR, OFF(backend), NULL, 0, 0, "PET_RDZV_BACKEND", "NAME",
     "memory | file | etcd | etcd-gateway (default: from --rdzv-endpoint, else file)", STORE},
    {"rdzv-endpoint", OPT_STR, OFF(endpoints), NULL, 0, 0, "PET_RDZV_ENDPOINT", "LIST",
     "etcd endpoints host:port[,host:port...]; http(s):// selects etcd-gateway", STORE},
    {"standalone", OPT_BOOL, OFF(standalone), "0", 0, 0, "PET_STANDALONE", NULL,
     "single node: in-process (memory) rendezvous, min = max = 1", AGENT},
    {"state-dir", OPT_STR, OFF(state_dir), NULL, 0, 0, NULL, "DIR",
     "file backend directory (default $XDG_RUNTIME_DIR/elastic-agent or /tmp/elastic-agent-UID)",
     STORE},
    {"node-id", OPT_STR, OFF(node_id), NULL, 0, 0, NULL, "ID",
     "this node's id (default: hostname-pid)", AGENT},
    {"local-addr", OPT_STR, OFF(local_addr), NULL, 0, 0, "PET_LOCAL_ADDR", "ADDR",
     "address other nodes' workers use to reach this node (MASTER_ADDR when rank 0)", AGENT},
    {"rank-order", OPT_STR, OFF(rank_order), "arrival", 0, 0, NULL, "ORDER",
     "arrival (survivors keep their order, newcomers appended) | host (sorted host names)", AGENT},
    {"prefix", OPT_STR, OFF(prefix), "/elastic/", 0, 0, NULL, "PREFIX",
     "key prefix in the store; keys are PREFIX<run-id>/...", STORE},
    {"max-restarts", OPT_INT, OFF(max_restarts), "0", 0, 1000000, "PET_MAX_RESTARTS", "N",
     "job-wide worker-failure restarts before the run fails", AGENT},
    {"max-restarts-without-progress", OPT_INT, OFF(max_restarts_without_progress), "3", 0, 1000000,
     NULL, "N",
     "end the run when the same failure comes N times in a row, or N restarts in a row, without "
     "the run getting past the step it had reached (workers beat their step: "
     "elastic_agent.beat(step)); 0: off (docs/restarts.md)", AGENT},
    {"straggler-threshold", OPT_STR, OFF(straggler_threshold_s), "1.3", 0, 0, NULL, "X",
     "report a node whose median compute time (workers time it: elastic_agent.compute()) is X "
     "times the other nodes' median or more for --straggler-window; 0: off (docs/restarts.md)",
     AGENT},
    {"straggler-window", OPT_SEC, OFF(straggler_window_ms), "20", 1, 3600, NULL, "SEC",
     "how long a node must stay above --straggler-threshold to be reported", AGENT},
    {"straggler-action", OPT_STR, OFF(straggler_action), "report", 0, 0, NULL, "ACTION",
     "report (a log line, the `straggler` event), or evict: also make the node leave the run "
     "when a spare node waits, so that the next round takes the spare (a scale event, no "
     "restart spent); without a spare it only reports", AGENT},
    {"straggler-cooldown", OPT_SEC, OFF(straggler_cooldown_ms), "300", 0, 86400, NULL, "SEC",
     "with --straggler-action evict: an evicted node stays out this long (status lists it as "
     "held) before it rejoins as a spare", AGENT},
    {"join-timeout", OPT_SEC, OFF(join_timeout_ms), "600", 0, 1e6, NULL, "SEC",
     "give up when fewer than --min nodes are present for this long", AGENT},
    {"last-call", OPT_SEC, OFF(last_call_ms), "30", 0, 86400, NULL, "SEC",
     "once --min nodes are present, start at the latest after this long", AGENT},
    {"settle", OPT_SEC, OFF(settle_ms), "1", 0, 3600, NULL, "SEC",
     "start once no new node arrived for this long (batches arrivals)", AGENT},
    {"lease-ttl", OPT_SEC, OFF(lease_ttl_ms), "10", 0.1, 3600, NULL, "SEC",
     "a node is declared lost this long after its agent stops renewing its lease (sooner when "
     "the liveness ring sees it); by then its workers are stopped, by their guards if the agent "
     "cannot act", AGENT},
    {"stop-timeout", OPT_SEC, OFF(stop_timeout_ms), "10", 0, 3600, NULL, "SEC",
     "grace between SIGTERM and SIGKILL when stopping workers", AGENT},
    {"preemption-file", OPT_STR, OFF(preemption_file), NULL, 0, 0, NULL, "PATH",
     "leave the run gracefully (like SIGTERM) as soon as PATH exists (a preemption notice)", AGENT},
    {"log-dir", OPT_STR, OFF(log_dir), NULL, 0, 0, "PET_LOG_DIR", "DIR",
     "per-rank worker logs in DIR/<run-id>/<round>/rank_<r>.{out,err}", AGENT},
    {"tee", OPT_BOOL, OFF(tee), "0", 0, 0, NULL, NULL,
     "also print worker output on the console, lines prefixed [<rank>]:", AGENT},
    {"log-level", OPT_STR, OFF(log_level), "info", 0, 0, NULL, "LEVEL",
     "debug | info | warn | error", AGENT},
    {"log-format", OPT_STR, OFF(log_format), "text", 0, 0, NULL, "FORMAT",
     "text | json (one JSON object per log line and per event on stderr)", AGENT},
    {"events", OPT_STR, OFF(events_path), NULL, 0, 0, NULL, "FILE",
     "append one JSON object per line per event (joined, round, workers, failure...) to FILE",
     AGENT},
    {"http", OPT_STR, OFF(http), NULL, 0, 0, NULL, "[ADDR]:PORT",
     "serve /healthz, /readyz and /metrics (Prometheus) on ADDR:PORT (default ADDR 127.0.0.1; "
     "IPv6 as [::1]:PORT; PORT 0 picks a free one and logs it)", AGENT},
    {"local-ranks-filter", OPT_STR, OFF(local_ranks_filter), NULL, 0, 0,
     "PET_LOCAL_RANKS_FILTER", "LIST",
     "show only these local ranks' output on the console, e.g. 0 or 0,3 (--log-dir files still get "
     "every rank's)",
     AGENT},
    {"worker-heartbeat-timeout", OPT_SEC, OFF(heartbeat_timeout_ms), "0", 0, 1e6, NULL, "SEC",
     "hang detection: a worker that does not beat (write or touch $ELASTIC_HEARTBEAT_FILE) for "
     "this long is a failure: its group is stopped and the restart charged (0: off)", AGENT},
    {"worker-startup-timeout", OPT_SEC, OFF(startup_timeout_ms), "0", 0, 1e6, NULL, "SEC",
     "a worker's first beat must come this long after its start (0: the heartbeat timeout); "
     "alone, it bounds only the first beat", AGENT},
    {"warm-workers", OPT_BOOL, OFF(warm_workers), "0", 0, 0, NULL, NULL,
     "start the next round's workers ahead of time, parked without a rank: at a commit each "
     "gets its assignment on ELASTIC_ASSIGN_FD instead of a cold start (the worker must call "
     "elastic_agent.wait_for_assignment(); docs/warm.md)", AGENT},
    {"in-place", OPT_BOOL, OFF(in_place), "0", 0, 0, NULL, NULL,
     "with --warm-workers: at a membership change, workers that said they can re-form keep "
     "running and get the new assignment on ELASTIC_ASSIGN_FD (docs/warm.md, In-place)", AGENT},
    {"in-place-timeout", OPT_SEC, OFF(in_place_timeout_ms), "30", 0.1, 1e6, NULL, "SEC",
     "with --in-place: a re-assigned worker must acknowledge within this long, else it is stopped "
     "and restarted the normal way", AGENT},
    {"checkpoint-memory", OPT_INT, OFF(checkpoint_memory_mb), "0", 0, 16777216, NULL, "MB",
     "hold the workers' checkpoints in this node's memory, up to MB (own shards and saves in "
     "progress: give twice a node's state); workers save and load through "
     "ELASTIC_AGENT_CHECKPOINT_SOCKET (python: elastic_agent.checkpoint; docs/checkpoint.md). "
     "0: off", AGENT},
    {"checkpoint-dir", OPT_STR, OFF(checkpoint_dir), NULL, 0, 0, NULL, "DIR",
     "with --checkpoint-memory: also write checkpoints to DIR/<run-id>/ in the background (every "
     "--checkpoint-every steps, and the newest one when workers fail or the agent leaves); a "
     "whole-run restart resumes from the newest whole step there", AGENT},
    {"checkpoint-every", OPT_INT, OFF(checkpoint_every), "10", 1, 1000000000, NULL, "K",
     "with --checkpoint-dir: write every K-th step (those whose number is a multiple of K)", AGENT},
    {"checkpoint-replicas", OPT_INT, OFF(checkpoint_replicas), "1", 0, 1, NULL, "N",
     "with --checkpoint-memory: send this node's newest shards to N ring successors (0 or 1), "
     "which hold them in their --checkpoint-memory; a survivor serves a dead node's shards from "
     "its replica. 0: send none (replicas from the predecessor are still taken)", AGENT},
    {"checkpoint-bandwidth", OPT_INT, OFF(checkpoint_bandwidth_mb), "100", 0, 1000000, NULL, "MB",
     "with --checkpoint-replicas: send replicas at most MB megabytes a second, so that training "
     "traffic comes first. 0: unbounded", AGENT},
    {"liveness", OPT_STR, OFF(liveness), "on", 0, 0, NULL, "MODE",
     "on | off: a ring of agent-to-agent heartbeat links sees a dead or frozen node in about a "
     "second (a peer suspects it, the coordinator probes it and revokes its lease), not after "
     "--lease-ttl; the lease stays the backstop", AGENT},
    {"liveness-interval", OPT_SEC, OFF(liveness_interval_ms), "0.2", 0.01, 60, NULL, "SEC",
     "heartbeat period on each ring link", AGENT},
    {"liveness-misses", OPT_INT, OFF(liveness_misses), "3", 1, 100, NULL, "N",
     "a ring link silent for this many intervals is broken (and a confirming probe gets as "
     "long); a frozen node's workers are stopped by their guards before it can be evicted",
     AGENT},
    {"failure-domain", OPT_STR, OFF(failure_domain), NULL, 0, 0, NULL, "LABEL",
     "what fails with this node (its rack, switch or zone: 1-63 of A-Z a-z 0-9 . _ : / -; "
     "empty: none): the liveness ring keeps one domain's nodes apart and a suspicion of the "
     "coordinator is confirmed from outside its domain (default: none)", AGENT},
    {"preflight", OPT_STR, OFF(preflight), NULL, 0, 0, NULL, "CMD",
     "health check run (sh -c CMD) before this node joins: a failure keeps it out (status lists "
     "it as held, with the reason) and it is retried after --preflight-cooldown", AGENT},
    {"preflight-every-round", OPT_BOOL, OFF(preflight_every_round), "0", 0, 0, NULL, NULL,
     "also run --preflight before each round's workers start here; a failure takes the node "
     "out of the run until the check passes again", AGENT},
    {"preflight-timeout", OPT_SEC, OFF(preflight_timeout_ms), "60", 0.1, 86400, NULL, "SEC",
     "a check still running after this long is killed (its whole process group) and failed",
     AGENT},
    {"preflight-cooldown", OPT_SEC, OFF(preflight_cooldown_ms), "30", 0, 86400, NULL, "SEC",
     "wait this long after a failed check before running it again", AGENT},
    {"launcher", OPT_STR, OFF(launcher), "auto", 0, 0, NULL, "NAME",
     "local | ssh | auto (ssh when --host names another machine, else local)", AGENT},
    {"host", OPT_STR, OFF(host), NULL, 0, 0, NULL, "HOST",
     "run this node's workers on HOST over SSH (the node's address is HOST's); this "
     "machine's own names and addresses run them locally unless --launcher ssh", AGENT},
    {"ssh-user", OPT_STR, OFF(ssh_user), NULL, 0, 0, NULL, "USER", "ssh login user", AGENT},
    {"ssh-port", OPT_INT, OFF(ssh_port), "0", 0, 65535, NULL, "PORT",
     "ssh port (0: ssh's default)", AGENT},
    {"ssh-identity", OPT_STR, OFF(ssh_identity), NULL, 0, 0, NULL, "FILE",
     "ssh private key file", AGENT},
    {"ssh-option", OPT_SSHOPT, 0, NULL, 0, 0, NULL, "OPT",
     "extra ssh -o option, e.g. StrictHostKeyChecking=no (repeatable)", AGENT},
    {"ssh-parallel", OPT_INT, OFF(ssh_parallel), "8", 1, 1024, NULL, "N",
     "SSH connections set up at once", AGENT},
    {"hosts", OPT_STR, OFF(hosts), NULL, 0, 0, NULL, "LIST",
     "driver mode: act for these hosts (host:slots,...), each a node running its workers over "
     "SSH (locally for this machine, unless --launcher ssh)", AGENT},
    {"hostfile", OPT_STR, OFF(hostfile), NULL, 0, 0, NULL, "FILE",
     "driver mode: hosts from FILE, lines 'host slots=N' or 'host:N'", AGENT},
    {"host-discovery-script", OPT_STR, OFF(host_discovery_script), NULL, 0, 0, NULL, "PATH",
     "driver mode: hosts from PATH's output (host:slots lines), re-run every "
     "--discovery-interval", AGENT},
    {"discovery-interval", OPT_SEC, OFF(discovery_interval_ms), "5", 0.1, 86400, NULL, "SEC",
     "how often --host-discovery-script runs", AGENT},
    {"host-cooldown", OPT_SEC, OFF(host_cooldown_ms), "10", 0.1, 3600, NULL, "SEC",
     "driver mode: a failed host sits out this long, doubling per failure up to 5 min", AGENT},
    {"nic-discovery", OPT_STR, OFF(nic_discovery), "auto", 0, 0, NULL, "MODE",
     "on | off | auto (on when the nodes are on more than one host and --max is at most "
     CFG_FULL_VIEW_MAX_NODES_STR "): find the network interfaces every node can reach", AGENT},
    {"topology", OPT_STR, OFF(topology), "auto", 0, 0, NULL, "MODE",
     "on | off | auto (on up to --max " CFG_FULL_VIEW_MAX_NODES_STR "): write "
     "ELASTIC_TOPOLOGY_FILE (every rank's host, ring and tree links). Costs O(N) per node per "
     "round, as do --nic-discovery and --env-style horovod: each node then reads every member",
     AGENT},
    {"iface", OPT_STR, OFF(iface), NULL, 0, 0, NULL, "NAME,...",
     "only consider these network interfaces", AGENT},
    {"env-style", OPT_STR, OFF(env_style), "torch", 0, 0, NULL, "LIST",
     "worker environment: torch, horovod, dmlc, or several (e.g. torch,horovod); horovod costs "
     "O(N) per node per round (cross ranks need every member)", AGENT},
    {"dmlc-tracker", OPT_STR, OFF(dmlc_tracker), NULL, 0, 0, NULL, "HOST:PORT",
     "with --env-style dmlc: an external rabit tracker for DMLC_TRACKER_URI/PORT (default: the "
     "agent of group rank 0 serves one every round)", AGENT},
    {"json", OPT_BOOL, OFF(json), "0", 0, 0, NULL, NULL, "print the run as one JSON object",
     CFG_STATUS},
    {"watch", OPT_BOOL, OFF(watch), "0", 0, 0, NULL, NULL,
     "print the run again on every change in the store, until SIGINT; a run that does not "
     "exist yet is waited for", CFG_STATUS},
    {"agent", OPT_STR, OFF(agent_http), NULL, 0, 0, NULL, "[ADDR]:PORT",
     "also show one node's own view, from its agent's --http: its liveness ring links (state, "
     "peer, last heartbeat)", CFG_STATUS},
    {"cacert", OPT_STR, OFF(cacert), NULL, 0, 0, NULL, "FILE", "etcd TLS CA certificate", STORE},
    {"cert", OPT_STR, OFF(cert), NULL, 0, 0, NULL, "FILE", "etcd TLS client certificate", STORE},
    {"key", OPT_STR, OFF(key), NULL, 0, 0, NULL, "FILE", "etcd TLS client key", STORE},
    {"user", OPT_STR, OFF(user), NULL, 0, 0, NULL, "NAME",
     "etcd user; the password comes from ELASTIC_ETCD_PASSWORD, --password-file or "
     "--password-fd, and only over TLS (--cacert, https://) unless --insecure-transport", STORE},
    {"password-file", OPT_STR, OFF(password_file), NULL, 0, 0, NULL, "FILE",
     "file holding the etcd password (first line); never give it on the command line", STORE},
    {"password-fd", OPT_STR, OFF(password_fd), NULL, 0, 0, NULL, "N",
     "read the etcd password from open file descriptor N (a pipe, file or memfd; how serve and "
     "driver mode hand it to their agents); no child inherits N", STORE},
    {"insecure-transport", OPT_BOOL, OFF(insecure_transport), "0", 0, 0, NULL, NULL,
     "allow --user's password over a plaintext connection to etcd (no TLS files, or an "
     "http:// endpoint); logged as a warning", STORE},
    {"worker-env-fd", OPT_STR, OFF(worker_env_fd), NULL, 0, 0, NULL, "N",
     "extra variables for the workers only, NUL-separated NAME=VALUE entries read from file "
     "descriptor N (how serve hands over a submitted run's): not this agent's environment nor "
     "--preflight's", AGENT},
    {"help", OPT_BOOL, OFF(help), "0", 0, 0, NULL, NULL, "show this help and exit", STORE},
    {"version", OPT_BOOL, OFF(version), "0", 0, 0, NULL, NULL, "show the version and exit", AGENT},
};
#define N_OPTS (sizeof(cfg_opts) / sizeof(cfg_opts[0]))
const size_t cfg_n_opts = N_OPTS;


bool cfg_opt_in_cmd(const struct opt *o, enum cfg_cmd cmd)
{
    return (o->cmds & cmd) != 0;
}

static void *field(struct cfg *c, const struct opt *o)
{
    return (char *)c + o->off;
}

int cfg_parse_int(const char *s, long *ret)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || isspace((unsigned char)*s))
        return -EINVAL;
    *ret = v;
    return 0;
}

static int parse_bool(const char *s, bool *ret)
{
    static const char *const yes[] = {"", "1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++)
        if (strcasecmp(s, yes[i]) == 0)
            return *ret = true, 0;
    for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++)
        if (strcasecmp(s, no[i]) == 0)
            return *ret = false, 0;
    return -EINVAL;
}

/* Apply one value from `origin` ("--min", "ELASTIC_MIN", ...). */
static int apply(struct cfg *c, const struct opt *o, const char *v, const char *origin,
                 struct ea_error *err)
{
    switch (o->type) {
    case OPT_INT: {
        long n;
        if (cfg_parse_int(v, &n) < 0 || n < o->lo || n > o->hi)
            return ea_errorf(err, -EINVAL, "%s: '%s' is not a whole number from %.0f to %.0f",
                             origin, v, o->lo, o->hi);
        *(int *)field(c, o) = (int)n;
        break;
    }
    case OPT_SEC: {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(d) || d < o->lo || d > o->hi)
            return ea_errorf(err, -EINVAL, "%s: '%s' is not a number of seconds from %g to %g",
                             origin, v, o->lo, o->hi);
        *(int64_t *)field(c, o) = (int64_t)(d * 1000.0 + 0.5); /* d >= 0: rounds */
        break;
    }
    case OPT_STR:
        if (!v[0])
            return ea_errorf(err, -EINVAL, "%s: empty value", origin);
        *(const char **)field(c, o) = v;
        break;
    case OPT_BOOL:
        if (parse_bool(v, (bool *)field(c, o)) < 0)
            return ea_errorf(err, -EINVAL, "%s: '%s' is not a yes/no value (1/0, true/false)",
                             origin, v);
        break;
    case OPT_SSHOPT:
        if (!v[0])
            return ea_errorf(err, -EINVAL, "%s: empty value", origin);
        if (c->n_ssh_options >= CFG_MAX_SSH_OPTIONS)
            return ea_errorf(err, -EINVAL, "%s: more than %d ssh options", origin,
                             CFG_MAX_SSH_OPTIONS);
        c->ssh_options[c->n_ssh_options++] = v;
        break;
    case OPT_NNODES: {
        char buf[64];
        long lo, hi;
        snprintf(buf, sizeof(buf), "%s", v);
        char *colon = strchr(buf, ':');
        if (colon)
            *colon = '\0';
        if (cfg_parse_int(buf, &lo) < 0 || (colon && cfg_parse_int(colon + 1, &hi) < 0) || lo < 1 ||
            lo > 100000)
            return ea_errorf(err, -EINVAL, "%s: '%s' is not in MIN[:MAX] form", origin, v);
        if (!colon)
            hi = lo;
        if (hi < lo || hi > 100000)
            return ea_errorf(err, -EINVAL, "%s: '%s': MAX must be >= MIN", origin, v);
        c->min_nodes = (int)lo;
        c->max_nodes = (int)hi;
        return 0;
    }
    }
    return 0;
}

const struct opt *cfg_find_opt(const char *name, size_t len, enum cfg_cmd cmd)
{
    char norm[64];
    if (len >= sizeof(norm))
        return NULL;
    for (size_t i = 0; i < len; i++)
        norm[i] = name[i] == '_' ? '-' : name[i]; /* torchrun accepts --nproc_per_node */
    norm[len] = '\0';
    for (size_t i = 0; i < N_OPTS; i++)
        if (strcmp(cfg_opts[i].flag, norm) == 0 && cfg_opt_in_cmd(&cfg_opts[i], cmd))
            return &cfg_opts[i];
    return NULL;
}

void cfg_opt_env_name(const struct opt *o, char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "ELASTIC_");
    for (const char *p = o->flag; *p && n + 1 < size; p++)
        buf[n++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    buf[n] = '\0';
}

static const char *getenv_from(char **envp, const char *name)
{
    size_t len = strlen(name);
    for (char **e = envp; e && *e; e++)
        if (strncmp(*e, name, len) == 0 && (*e)[len] == '=')
            return *e + len + 1;
    return NULL;
}

/* Index into the per-option source array; --nnodes records into min's and max's slots. */
size_t cfg_opt_index(const struct opt *o)
{
    return (size_t)(o - cfg_opts);
}

static int apply_tracked(struct cfg *c, const struct opt *o, const char *v, const char *origin,
                         enum cfg_source *srcs, enum cfg_source from, struct ea_error *err)
{
    int r = apply(c, o, v, origin, err);
    if (r < 0)
        return r;
    srcs[cfg_opt_index(o)] = from;
    if (o->type == OPT_NNODES) /* sets both bounds */
        srcs[cfg_opt_index(cfg_find_opt("min", 3, CFG_AGENT))] =
            srcs[cfg_opt_index(cfg_find_opt("max", 3, CFG_AGENT))] = from;
    return 0;
}

int cfg_parse(int argc, char **argv, char **envp, struct cfg *ret, struct ea_error *err)
{
    return cfg_parse_cmd(CFG_AGENT, argc, argv, envp, ret, err);
}

int cfg_parse_cmd(enum cfg_cmd cmd, int argc, char **argv, char **envp, struct cfg *ret,
                  struct ea_error *err)
{
    struct cfg c = {.cmd = cmd};
    enum cfg_source srcs[N_OPTS] = {0};
    int r;
    for (size_t i = 0; i < N_OPTS; i++)
        if (cfg_opts[i].def && (r = apply(&c, &cfg_opts[i], cfg_opts[i].def, cfg_opts[i].flag, err)) < 0)
            return r;
    /* environment: torchrun's PET_* first, then ours, so ELASTIC_* wins; another command's
     * variables are not ours to judge */
    for (size_t i = 0; i < N_OPTS; i++) {
        if (!cfg_opt_in_cmd(&cfg_opts[i], cmd))
            continue;
        const char *v = cfg_opts[i].pet ? getenv_from(envp, cfg_opts[i].pet) : NULL;
        if (v && (r = apply_tracked(&c, &cfg_opts[i], v, cfg_opts[i].pet, srcs, SRC_PET, err)) < 0)
            return r;
    }
    /* Kubeflow once wrote PET_N_PROC_PER_NODE (kubeflow/trainer#1992); accept it too */
    const char *kf = cmd == CFG_AGENT ? getenv_from(envp, "PET_N_PROC_PER_NODE") : NULL;
    if (kf && !getenv_from(envp, "PET_NPROC_PER_NODE") &&
        (r = apply_tracked(&c, cfg_find_opt("nproc-per-node", 14, CFG_AGENT), kf,
                           "PET_N_PROC_PER_NODE", srcs, SRC_PET, err)) < 0)
        return r;
    for (size_t i = 0; i < N_OPTS; i++) {
        char name[64];
        if (!cfg_opt_in_cmd(&cfg_opts[i], cmd))
            continue;
        cfg_opt_env_name(&cfg_opts[i], name, sizeof(name));
        const char *v = getenv_from(envp, name);
        if (v && cfg_opts[i].type != OPT_BOOL && !v[0])
            continue; /* an empty variable means "not set" */
        if (v && (r = apply_tracked(&c, &cfg_opts[i], v, name, srcs, SRC_ENV, err)) < 0)
            return r;
    }
    bool cli_nnodes = false, cli_minmax = false;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strncmp(a, "--", 2) != 0) {
            if (a[0] == '-' && a[1])
                return ea_errorf(err, -EINVAL, "unknown option '%s' (see --help)", a);
            break; /* the worker command starts here */
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const struct opt *o = cfg_find_opt(name, len, cmd);
        if (!o)
            return ea_errorf(err, -EINVAL, "unknown option '%.*s'%s (see %s--help)",
                             (int)len + 2, a, cmd == CFG_STATUS ? " for status" : "",
                             cmd == CFG_STATUS ? "status " : "");
        char origin[80];
        snprintf(origin, sizeof(origin), "--%s", o->flag);
        const char *v;
        if (eq)
            v = eq + 1;
        else if (o->type == OPT_BOOL)
            v = "1";
        else if (i + 1 < argc)
            v = argv[++i];
        else
            return ea_errorf(err, -EINVAL, "%s needs a value (%s)", origin, o->meta);
        if ((r = apply_tracked(&c, o, v, origin, srcs, SRC_CLI, err)) < 0)
            return r;
        cli_nnodes |= o->type == OPT_NNODES;
        cli_minmax |= strcmp(o->flag, "min") == 0 || strcmp(o->flag, "max") == 0;
    }
    if (cli_nnodes && cli_minmax)
        return ea_errorf(err, -EINVAL, "give either --nnodes or --min/--max, not both");
    c.command = i < argc ? argv + i : NULL;
    if (c.help || c.version) {
        *ret = c;
        return 0;
    }
    if ((r = cfg_resolve(&c, srcs, err)) < 0 || (r = cfg_read_password(&c, envp, err)) < 0)
        return r;
    *ret = c;
    /* strings cfg_resolve() composed live in the struct itself: point at the caller's copy */
    if (c.node_id == c.node_id_buf)
        ret->node_id = ret->node_id_buf;
    if (c.state_dir == c.state_dir_buf)
        ret->state_dir = ret->state_dir_buf;
    if (c.password == c.password_buf)
        ret->password = ret->password_buf;
    explicit_bzero(c.password_buf, sizeof(c.password_buf));
    return 0;
}

bool cfg_topology(const struct cfg *c)
{
    return c->topology && (strcmp(c->topology, "on") == 0 ||
                           (strcmp(c->topology, "auto") == 0 &&
                            c->max_nodes <= CFG_FULL_VIEW_MAX_NODES));
}

bool cfg_full_view(const struct cfg *c)
{
    return cfg_topology(c) || (c->nic_discovery && strcmp(c->nic_discovery, "off") != 0) ||
           (c->env_style && strstr(c->env_style, "horovod"));
}
