// SPDX-License-Identifier: Apache-2.0
/* cfg resolve: the parsed options checked against each other and completed (config_internal.h):
 * options of another mode refused, the launcher and driver mode, the ranks filter, health,
 * stragglers, --http. Split from config.c (the option table and parser). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_internal.h"
#include "domain.h"
#include "hostsel.h"
#include "netif.h"

static int copy_str(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size)
        return -ENAMETOOLONG;
    memcpy(dst, src, n + 1);
    return 0;
}


/* Is `v` one of the NULL-terminated `words`? */
static bool one_of(const char *v, const char *const *words)
{
    for (; *words; words++)
        if (strcmp(v, *words) == 0)
            return true;
    return false;
}

/* Is every comma-separated item of `v` one of `words` (no empty item)? */
static bool list_of(const char *v, const char *const *words)
{
    char buf[256];
    if (copy_str(buf, sizeof(buf), v) < 0)
        return false;
    char *save = NULL;
    size_t n = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), n++)
        if (!one_of(t, words))
            return false;
    return n > 0 && v[0] != ',' && v[strlen(v) - 1] != ',' && !strstr(v, ",,");
}

/* Launcher, driver-mode, NIC and environment options. */
/* Whether option `flag` was given on the command line (not a default or an environment
 * variable: a deployment's shared environment may carry settings for other modes). */
static bool on_cli(const enum cfg_source *srcs, const char *flag)
{
    const struct opt *o = cfg_find_opt(flag, strlen(flag), CFG_AGENT);
    return o && srcs[cfg_opt_index(o)] == SRC_CLI;
}

/* Options that only mean something in another mode are refused, never silently ignored. */
static int check_mode_options(struct cfg *c, const enum cfg_source *srcs, bool driver,
                              struct ea_error *err)
{
    if (!c->host_discovery_script && on_cli(srcs, "discovery-interval"))
        return ea_errorf(err, -EINVAL, "--discovery-interval is how often "
                                       "--host-discovery-script runs, which is not given");
    if (!driver && on_cli(srcs, "host-cooldown"))
        return ea_errorf(err, -EINVAL, "--host-cooldown is for driver mode (--hosts, "
                                       "--hostfile, --host-discovery-script)");
    /* with --host, ssh settings apply when it is another machine: one command line can serve
     * every host, this one included */
    bool ssh = driver || c->host || strcmp(c->launcher, "ssh") == 0;
    static const char *const ssh_flags[] = {"ssh-user", "ssh-port", "ssh-identity", "ssh-option",
                                            "ssh-parallel"};
    for (size_t i = 0; !ssh && i < sizeof(ssh_flags) / sizeof(*ssh_flags); i++)
        if (on_cli(srcs, ssh_flags[i]))
            return ea_errorf(err, -EINVAL,
                             "--%s has no effect: without --host (or driver mode) this node's "
                             "workers run on this machine",
                             ssh_flags[i]);
    /* NIC discovery probes this machine's interfaces: with the workers on another host (one
     * node over ssh) they are not the workers' (driver mode turns it off for its nodes) */
    if (ssh && !driver && c->host && !hostsel_is_local(c->host)) {
        if (strcmp(c->nic_discovery, "on") == 0)
            return ea_errorf(err, -EINVAL,
                             "--nic-discovery on probes this machine's interfaces, but the "
                             "workers run on '%s': give --nic-discovery off",
                             c->host);
        c->nic_discovery = "off";
    }
    return 0;
}

static int resolve_launch(struct cfg *c, const enum cfg_source *srcs, struct ea_error *err)
{
    static const char *const launchers[] = {"auto", "local", "ssh", NULL};
    static const char *const nic_modes[] = {"on", "off", "auto", NULL};
    static const char *const styles[] = {"torch", "horovod", "dmlc", NULL};
    if (!one_of(c->launcher, launchers))
        return ea_errorf(err, -EINVAL, "--launcher: '%s' is not local, ssh or auto",
                         c->launcher);
    if (!one_of(c->nic_discovery, nic_modes))
        return ea_errorf(err, -EINVAL, "--nic-discovery: '%s' is not on, off or auto",
                         c->nic_discovery);
    if (!one_of(c->topology, nic_modes))
        return ea_errorf(err, -EINVAL, "--topology: '%s' is not on, off or auto", c->topology);
    /* auto stays O(1) per node in big runs: discovery reads every node's record */
    if (strcmp(c->nic_discovery, "auto") == 0 && c->max_nodes > CFG_FULL_VIEW_MAX_NODES)
        c->nic_discovery = "off";
    if (!list_of(c->env_style, styles))
        return ea_errorf(err, -EINVAL,
                         "--env-style: '%s' is not a comma list of torch, horovod, dmlc",
                         c->env_style);
    if (c->dmlc_tracker && cfg_parse_tracker(c->dmlc_tracker, NULL, 0, NULL, err) < 0)
        return -EINVAL;
    if (c->dmlc_tracker && !strstr(c->env_style, "dmlc"))
        return ea_errorf(err, -EINVAL, "--dmlc-tracker needs --env-style with dmlc (e.g. "
                                       "--env-style torch,dmlc)");
    if (c->iface && netif_check_list(c->iface, err) < 0)
        return -EINVAL;
    if (c->iface && strcmp(c->nic_discovery, "off") == 0)
        return ea_errorf(err, -EINVAL, "--iface restricts NIC discovery, which --nic-discovery "
                                       "off turns off: give one or the other");
    int sources = !!c->hosts + !!c->hostfile + !!c->host_discovery_script;
    if (sources > 1)
        return ea_errorf(err, -EINVAL,
                         "give one of --hosts, --hostfile, --host-discovery-script");
    if (sources && c->host)
        return ea_errorf(err, -EINVAL,
                         "--host names one node's host; driver mode (--hosts, --hostfile, "
                         "--host-discovery-script) names them all: give one or the other");
    if (!sources && !c->host && strcmp(c->launcher, "ssh") == 0)
        return ea_errorf(err, -EINVAL, "--launcher ssh needs --host HOST (the machine to run "
                                       "this node's workers on) or driver mode (--hosts ...)");
    return check_mode_options(c, srcs, sources > 0, err);
}

/* --local-ranks-filter: comma-separated local ranks, each in 0..nproc-1. */
static int resolve_ranks_filter(const struct cfg *c, struct ea_error *err)
{
    const char *v = c->local_ranks_filter;
    for (const char *p = v;;) {
        char *end;
        errno = 0;
        long r = isdigit((unsigned char)*p) ? strtol(p, &end, 10) : -1;
        if (r < 0 || errno || (*end != ',' && *end != '\0'))
            return ea_errorf(err, -EINVAL,
                             "--local-ranks-filter: '%s' is not a comma-separated list of local "
                             "ranks (e.g. 0 or 0,3)",
                             v);
        if (r >= c->nproc_per_node)
            return ea_errorf(err, -EINVAL,
                             "--local-ranks-filter: local rank %ld is out of range (0..%d with "
                             "--nproc-per-node %d)",
                             r, c->nproc_per_node - 1, c->nproc_per_node);
        if (*end == '\0')
            return 0;
        p = end + 1;
    }
}

/* Hang detection reads each worker's heartbeat file on this machine; the preflight options
 * mean nothing without --preflight, nor the ring's without the ring. */
static int resolve_health(const struct cfg *c, const enum cfg_source *srcs, struct ea_error *err)
{
    bool remote = c->hosts || c->hostfile || c->host_discovery_script ||
                  (c->host && !hostsel_is_local(c->host)) || strcmp(c->launcher, "ssh") == 0;
    if ((c->heartbeat_timeout_ms || c->startup_timeout_ms) && remote)
        return ea_errorf(err, -EINVAL, "--worker-heartbeat-timeout and --worker-startup-timeout "
                                       "need the workers on this machine (the local launcher)");
    if (c->warm_workers && remote) /* the assignment travels on an inherited socket */
        return ea_errorf(err, -EINVAL, "--warm-workers needs the workers on this machine (the "
                                       "local launcher)");
    if ((c->checkpoint_dir || on_cli(srcs, "checkpoint-every")) && c->checkpoint_memory_mb == 0)
        return ea_errorf(err, -EINVAL, "--checkpoint-dir and --checkpoint-every need "
                                       "--checkpoint-memory (the store they write from)");
    if (c->checkpoint_memory_mb > 0 && remote) /* the socket and the memfds are this machine's */
        return ea_errorf(err, -EINVAL, "--checkpoint-memory needs the workers on this machine "
                                       "(not --host/--launcher ssh)");
    if (c->in_place && !c->warm_workers) /* only a worker holding ELASTIC_ASSIGN_FD can be told */
        return ea_errorf(err, -EINVAL, "--in-place needs --warm-workers (the new assignment "
                                       "travels on the fd a warm worker holds)");
    if (on_cli(srcs, "in-place-timeout") && !c->in_place)
        return ea_errorf(err, -EINVAL, "--in-place-timeout has no effect without --in-place");
    if (strcmp(c->liveness, "on") != 0 && strcmp(c->liveness, "off") != 0)
        return ea_errorf(err, -EINVAL, "--liveness: '%s' is not on or off", c->liveness);
    /* the node's own word, published in its record: a short label, never free text */
    if (c->failure_domain && c->failure_domain[0] && !rdzv_domain_ok(c->failure_domain))
        return ea_errorf(err, -EINVAL,
                         "--failure-domain: '%s' must be 1-%d characters of A-Z a-z 0-9 . _ : / -",
                         c->failure_domain, RDZV_DOMAIN_MAX - 1);
    static const char *const lv[] = {"liveness-interval", "liveness-misses"};
    for (size_t i = 0; strcmp(c->liveness, "off") == 0 && i < sizeof(lv) / sizeof(*lv); i++)
        if (on_cli(srcs, lv[i]))
            return ea_errorf(err, -EINVAL, "--%s has no effect with --liveness off", lv[i]);
    static const char *const pf[] = {"preflight-every-round", "preflight-timeout",
                                     "preflight-cooldown"};
    for (size_t i = 0; !c->preflight && i < sizeof(pf) / sizeof(*pf); i++)
        if (on_cli(srcs, pf[i]))
            return ea_errorf(err, -EINVAL, "--%s needs --preflight CMD", pf[i]);
    return 0;
}

/* --straggler-threshold X (0, or 1.05-100) into straggler_threshold; --straggler-action. */
static int resolve_straggler(struct cfg *c, const enum cfg_source *srcs, struct ea_error *err)
{
    char *end = NULL;
    const char *s = c->straggler_threshold_s;
    double x = s && s[0] ? strtod(s, &end) : -1;
    if (!end || *end || !(x == 0 || (x >= 1.05 && x <= 100)))
        return ea_errorf(err, -EINVAL, "--straggler-threshold: '%s' is not 0 (off) or a number "
                                       "from 1.05 to 100", s ? s : "");
    c->straggler_threshold = x;
    c->straggler_evict = strcmp(c->straggler_action, "evict") == 0;
    if (!c->straggler_evict && strcmp(c->straggler_action, "report") != 0)
        return ea_errorf(err, -EINVAL, "--straggler-action: '%s' is not report or evict",
                         c->straggler_action);
    if (!c->straggler_evict && on_cli(srcs, "straggler-cooldown"))
        return ea_errorf(err, -EINVAL, "--straggler-cooldown needs --straggler-action evict");
    if (x == 0 && (on_cli(srcs, "straggler-window") || on_cli(srcs, "straggler-action")))
        return ea_errorf(err, -EINVAL, "--%s has no effect with --straggler-threshold 0",
                         on_cli(srcs, "straggler-window") ? "straggler-window"
                                                          : "straggler-action");
    return 0;
}

/* --http [ADDR]:PORT into http_addr/http_port. */
static int resolve_http(struct cfg *c, struct ea_error *err)
{
    const char *colon = strrchr(c->http, ':');
    long port;
    if (!colon || cfg_parse_int(colon + 1, &port) < 0 || port < 0 || port > 65535)
        return ea_errorf(err, -EINVAL, "--http: '%s' is not [ADDR]:PORT (PORT 0-65535)",
                         c->http);
    size_t alen = (size_t)(colon - c->http);
    const char *a = c->http;
    bool v6 = alen >= 2 && a[0] == '[' && a[alen - 1] == ']'; /* [::1]:PORT */
    if (v6) {
        a++;
        alen -= 2;
    }
    if (alen == 0 && !v6)
        snprintf(c->http_addr, sizeof(c->http_addr), "127.0.0.1");
    else if (alen >= sizeof(c->http_addr))
        return ea_errorf(err, -EINVAL, "--http: address in '%s' is too long", c->http);
    else
        snprintf(c->http_addr, sizeof(c->http_addr), "%.*s", (int)alen, a);
    if (!v6 && strcmp(c->http_addr, "localhost") == 0)
        snprintf(c->http_addr, sizeof(c->http_addr), "127.0.0.1");
    struct in6_addr in;
    if (inet_pton(v6 ? AF_INET6 : AF_INET, c->http_addr, &in) != 1)
        return ea_errorf(err, -EINVAL,
                         v6 ? "--http: '%s' is not an IPv6 address"
                            : "--http: '%s' is not an IPv4 address (IPv6: [ADDR]:PORT)",
                         c->http_addr);
    c->http_port = (int)port;
    return 0;
}

int cfg_resolve(struct cfg *c, const enum cfg_source *srcs, struct ea_error *err)
{
    if (c->cmd == CFG_STATUS) {
        if (c->command && c->command[0])
            return ea_errorf(err, -EINVAL, "status takes no arguments ('%s'; see status --help)",
                             c->command[0]);
        int r = cfg_resolve_store(c, err);
        if (r == 0 && strcmp(c->backend, "memory") == 0)
            return ea_errorf(err, -EINVAL, "the memory backend lives inside one agent's process: "
                                           "status cannot read it");
        return r;
    }
    size_t i_min = cfg_opt_index(cfg_find_opt("min", 3, CFG_AGENT));
    size_t i_max = cfg_opt_index(cfg_find_opt("max", 3, CFG_AGENT));
    if (c->standalone) {
        if ((srcs[i_min] && c->min_nodes != 1) || (srcs[i_max] && c->max_nodes != 1))
            return ea_errorf(err, -EINVAL, "--standalone runs exactly one node; drop --min/--max");
        c->min_nodes = c->max_nodes = 1;
        if (c->backend && strcmp(c->backend, "memory") != 0)
            return ea_errorf(err, -EINVAL, "--standalone uses the memory backend, not '%s'",
                             c->backend);
        c->backend = "memory";
    }
    if (!srcs[i_max] || c->max_nodes == 0)
        c->max_nodes = c->max_nodes > c->min_nodes ? c->max_nodes : c->min_nodes;
    if (c->min_nodes > c->max_nodes)
        return ea_errorf(err, -EINVAL, "--min %d is larger than --max %d", c->min_nodes,
                         c->max_nodes);
    int r = cfg_resolve_store(c, err);
    if (r < 0)
        return r;
    if (!c->node_id) {
        char host[64] = "node";
        gethostname(host, sizeof(host) - 1);
        host[sizeof(host) - 1] = '\0';
        for (char *p = host; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '-' && *p != '.')
                *p = '-';
        snprintf(c->node_id_buf, sizeof(c->node_id_buf), "%s-%ld", host, (long)getpid());
        c->node_id = c->node_id_buf;
    }
    if (!cfg_valid_id(c->node_id))
        return ea_errorf(err, -EINVAL,
                         "--node-id: '%s' must be 1-100 characters of A-Z a-z 0-9 . _ - "
                         "(not . or ..)",
                         c->node_id);
    if (strcmp(c->rank_order, "arrival") != 0 && strcmp(c->rank_order, "host") != 0)
        return ea_errorf(err, -EINVAL, "--rank-order: '%s' is not arrival or host",
                         c->rank_order);
    static const char *const levels[] = {"debug", "info", "warn", "error"};
    bool level_ok = false;
    for (size_t i = 0; i < 4; i++)
        level_ok |= strcmp(c->log_level, levels[i]) == 0;
    if (!level_ok)
        return ea_errorf(err, -EINVAL, "--log-level: '%s' is not debug, info, warn or error",
                         c->log_level);
    if (strcmp(c->log_format, "text") != 0 && strcmp(c->log_format, "json") != 0)
        return ea_errorf(err, -EINVAL, "--log-format: '%s' is not text or json", c->log_format);
    if (c->http && (r = resolve_http(c, err)) < 0)
        return r;
    if (c->local_ranks_filter && (r = resolve_ranks_filter(c, err)) < 0)
        return r;
    if ((r = resolve_launch(c, srcs, err)) < 0)
        return r;
    if ((r = resolve_health(c, srcs, err)) < 0)
        return r;
    if ((r = resolve_straggler(c, srcs, err)) < 0)
        return r;
    int wfd;
    if (c->worker_env_fd && (r = cfg_parse_fd("--worker-env-fd", c->worker_env_fd, &wfd, err)) < 0)
        return r;
    if (!c->command || !c->command[0])
        return ea_errorf(err, -EINVAL,
                         "missing the worker command: elastic-agent [OPTIONS] -- COMMAND [ARGS...]");
    return 0;
}

int cfg_parse_tracker(const char *hostport, char *ret_host, size_t host_size, int *ret_port,
                      struct ea_error *err)
{
    const char *colon = hostport ? strrchr(hostport, ':') : NULL;
    const char *host = hostport;
    size_t hlen = colon ? (size_t)(colon - hostport) : 0;
    if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') { /* [v6]:port */
        host++;
        hlen -= 2;
    }
    char *end = NULL;
    long port = colon && isdigit((unsigned char)colon[1]) ? strtol(colon + 1, &end, 10) : -1;
    bool host_ok = hlen > 0 && hlen < 256;
    for (size_t i = 0; host_ok && i < hlen; i++)
        host_ok = isalnum((unsigned char)host[i]) || strchr(".-_:", host[i]);
    if (!host_ok || port < 1 || port > 65535 || *end)
        return ea_errorf(err, -EINVAL,
                         "--dmlc-tracker: '%s' is not HOST:PORT (the tracker's address and port "
                         "1-65535, e.g. 10.0.0.1:9091)",
                         hostport ? hostport : "");
    if (ret_host) {
        if (hlen >= host_size)
            return ea_errorf(err, -EINVAL, "--dmlc-tracker: host name too long");
        memcpy(ret_host, host, hlen);
        ret_host[hlen] = '\0';
    }
    if (ret_port)
        *ret_port = (int)port;
    return 0;
}
