// SPDX-License-Identifier: Apache-2.0
/*
 * cfg: the agent's options as ONE declarative table (flag, environment names, type, default,
 * bounds, help) that drives parsing, validation and --help, so they cannot drift apart.
 * Precedence: command line > ELASTIC_<NAME> > PET_<NAME> (torchrun) > default.
 */
#ifndef EA_AGENT_CONFIG_H
#define EA_AGENT_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ea_error.h"
#include "kv.h"

/* Exit codes (DESIGN.md §7). */
enum {
    AGENT_EXIT_OK = 0,
    AGENT_EXIT_FAILED = 1,
    AGENT_EXIT_USAGE = 2,
    AGENT_EXIT_STORE = 3,
    AGENT_EXIT_RDZV = 4,
};

/* Which command an option belongs to (a bit set in the table). */
enum cfg_cmd {
    CFG_AGENT = 1,  /* elastic-agent [OPTIONS] -- COMMAND */
    CFG_STATUS = 2, /* elastic-agent status [OPTIONS] */
};

#define CFG_MAX_SSH_OPTIONS 16

struct cfg {
    enum cfg_cmd cmd;
    int min_nodes, max_nodes;
    int nproc_per_node;
    const char *run_id;
    const char *backend;   /* memory, file, etcd, etcd-gateway (resolved, never NULL) */
    const char *endpoints; /* NULL unless given */
    bool standalone;
    const char *state_dir;
    const char *node_id;
    const char *local_addr; /* NULL: chosen from the backend (loopback for memory/file) */
    const char *prefix;     /* key prefix, default "/elastic/" */
    const char *rank_order; /* "arrival" or "host" */
    int max_restarts;
    int max_restarts_without_progress; /* issue 40: 0 off */
    const char *straggler_threshold_s; /* issue 40 part 2: as given */
    double straggler_threshold;        /* 0: off */
    int64_t straggler_window_ms;
    const char *straggler_action;      /* "report" or "evict" */
    bool straggler_evict;              /* --straggler-action evict */
    int64_t straggler_cooldown_ms;     /* an evicted node stays out this long */
    int64_t join_timeout_ms, last_call_ms, settle_ms, lease_ttl_ms, stop_timeout_ms;
    const char *log_dir;
    const char *preemption_file;
    bool tee;
    const char *log_level;
    const char *log_format;  /* "text" or "json" */
    const char *events_path; /* --events FILE: one JSON object per line per event, or NULL */
    const char *http;        /* --http [ADDR]:PORT as given, or NULL */
    char http_addr[64];      /* resolved from --http (":PORT" binds 127.0.0.1) */
    int http_port;           /* 0: the kernel picks one (logged) */
    bool json, watch;        /* status: --json, --watch */
    const char *agent_http;  /* status: --agent [ADDR]:PORT (a node's --http), or NULL */
    const char *cacert, *cert, *key, *user;
    const char *password_file;
    const char *password_fd; /* --password-fd N as given */
    const char *password; /* from --password-fd/-file or ELASTIC_ETCD_PASSWORD; never logged */
    bool insecure_transport; /* --user allowed over a plaintext connection */
    const char *worker_env_fd; /* --worker-env-fd N as given: the workers' extra variables */
    /* launcher (--launcher, --host, --ssh-*) */
    const char *launcher; /* "auto" (local, or ssh when --host is not this machine), "local", "ssh" */
    const char *host;     /* --host: the host this node's workers run on, or NULL (this machine) */
    const char *ssh_user, *ssh_identity;
    int ssh_port;     /* 0: ssh's own default */
    int ssh_parallel; /* SSH connections being set up at once (driver mode: across hosts) */
    const char *ssh_options[CFG_MAX_SSH_OPTIONS + 1]; /* --ssh-option, repeatable; NULL-ended */
    int n_ssh_options;
    /* driver mode: one agent acting for many hosts */
    const char *hosts;                 /* --hosts a:4,b:4 */
    const char *hostfile;              /* --hostfile FILE */
    const char *host_discovery_script; /* --host-discovery-script PATH */
    int64_t discovery_interval_ms;
    int64_t host_cooldown_ms; /* first blacklist period of a failed host (doubles, capped) */
    /* NIC discovery and worker environment */
    const char *nic_discovery; /* "on" | "off" | "auto" */
    const char *topology;      /* "on" | "off" | "auto": ELASTIC_TOPOLOGY_FILE */
    const char *iface;         /* --iface NAME,... or NULL */
    const char *env_style;     /* comma list of torch, horovod, dmlc */
    const char *dmlc_tracker;  /* --dmlc-tracker HOST:PORT or NULL */
    const char *local_ranks_filter; /* --local-ranks-filter 0,2 or NULL (all) */
    /* health (agent/health/): hang detection and the pre-admission check; 0/NULL = off */
    int64_t heartbeat_timeout_ms, startup_timeout_ms;
    bool warm_workers; /* --warm-workers: parked spares take each round's ranks (docs/warm.md) */
    bool in_place;     /* --in-place: capable workers are re-assigned, not restarted */
    int64_t in_place_timeout_ms; /* --in-place-timeout: a re-assignment's ack is due */
    /* the checkpoint store (agent/checkpoint/, docs/checkpoint.md); 0 MB = off */
    int checkpoint_memory_mb;
    const char *checkpoint_dir; /* --checkpoint-dir, or NULL */
    int checkpoint_every;       /* write every k-th step to --checkpoint-dir */
    int checkpoint_replicas;    /* ring successors that get this node's newest shards (0, 1) */
    int checkpoint_bandwidth_mb; /* their send cap, MB/s; 0 unbounded */
    const char *liveness; /* "on" | "off": the liveness ring (agent/liveness/) */
    int64_t liveness_interval_ms;
    int liveness_misses;
    const char *failure_domain; /* --failure-domain LABEL (issue 41), or NULL / "": none */
    const char *preflight;
    bool preflight_every_round;
    int64_t preflight_timeout_ms, preflight_cooldown_ms;
    char *const *command; /* NULL-terminated worker argv (points into argv) */
    bool help, version;

    /* storage for strings the parser made (defaults computed at run time) */
    char node_id_buf[128];
    char state_dir_buf[512];
    char run_id_buf[64];
    char password_buf[256];
};

/*
 * Parse argv (argv[0] is the program) and the environment `envp` into *ret. Returns 0, or -EINVAL
 * with a one-line reason naming the option and value in `err` (the caller exits 2).
 * --help/--version set the flags and skip command validation.
 */
int cfg_parse(int argc, char **argv, char **envp, struct cfg *ret, struct ea_error *err);

/*
 * The same for command `cmd`: only the table's options of that command are accepted (from the
 * command line and the environment). For CFG_STATUS, argv[0] is "status", no worker command is
 * allowed and only the store options are resolved (backend, endpoints, state dir, run id, prefix,
 * credentials); the memory backend is refused (it lives inside one agent).
 */
int cfg_parse_cmd(enum cfg_cmd cmd, int argc, char **argv, char **envp, struct cfg *ret,
                  struct ea_error *err);

/* The option table, for tests and generators: its number of entries, and entry i's long flag
 * (without "--"; static storage) with the commands (enum cfg_cmd bits) that accept it in
 * *ret_cmds (may be NULL). NULL, *ret_cmds untouched, when i >= cfg_option_count(). */
size_t cfg_option_count(void);
const char *cfg_option_flag(size_t i, unsigned *ret_cmds);
/* The table entry named `name` (len bytes, without "--"; '_' matches '-' as on the command line)
 * for any command: its index, and in *ret_value (may be NULL) whether it takes a value (every
 * type but a yes/no flag); -1 when no option has that name. */
int cfg_option_find(const char *name, size_t len, bool *ret_value);
/* The environment variable of table entry i (ELASTIC_<NAME>) in buf. */
void cfg_option_env_name(size_t i, char *buf, size_t size);

/* Print --help, generated from the option table. */
void cfg_print_help(FILE *out);
/* Print the help of command `cmd`. */
void cfg_print_help_cmd(enum cfg_cmd cmd, FILE *out);
/* One option's --help line (table entry i, as cfg_option_flag numbers them). */
void cfg_print_option(FILE *out, size_t i);

/* The store settings of `c` (backend, endpoints, TLS, credentials) for kv_open(); the strings
 * stay owned by `c`. request_timeout_ms: 0 = the backend's default. */
struct kv_config cfg_kv_config(const struct cfg *c, int request_timeout_ms);

/* Whether `c`'s store connection is plaintext: the etcd backend without TLS files, or the
 * gateway with an http:// endpoint (a password there crosses the network in clear). */
bool cfg_store_plaintext(const struct cfg *c);
/* The hand-over of c->password to one child agent (serve, driver mode: --password-fd N with
 * proc_spawn's keep_fd): a close-on-exec AF_UNIX SOCK_SEQPACKET socket (fd >= 3) whose peer
 * has sent the password as one message and is closed. Not a memfd or a pipe: while a freshly
 * exec'd child is still dumpable (until its prctl), a process of its uid may open
 * /proc/<child>/fd/N of those and read them; a socket cannot be opened through /proc. Make one
 * per child and close it once the child is started. 0 and *ret_fd, or -errno. */
int cfg_password_socket(const struct cfg *c, int *ret_fd, struct ea_error *err);
/* File descriptor number `v` (option `origin`, for the message) into *ret_fd: 0, or -EINVAL
 * when it is not a number or not open. */
int cfg_parse_fd(const char *origin, const char *v, int *ret_fd, struct ea_error *err);
/* Validate a --dmlc-tracker HOST:PORT (PORT 1-65535, HOST non-empty, [v6] allowed); the host part
 * is copied to ret_host (may be NULL) and the port to *ret_port (may be NULL). -EINVAL. */
int cfg_parse_tracker(const char *hostport, char *ret_host, size_t host_size, int *ret_port,
                      struct ea_error *err);

/* Runs up to this many nodes get the O(N) extras by default (topology file, NIC discovery). */
#define CFG_FULL_VIEW_MAX_NODES 16
#define CFG_FULL_VIEW_MAX_NODES_STR "16"
/* True when this node needs every member of each round (the topology file, NIC discovery,
 * Horovod's cross ranks): its session then mirrors the whole run, O(N) per round. */
bool cfg_full_view(const struct cfg *c);
/* True when workers get ELASTIC_TOPOLOGY_FILE. */
bool cfg_topology(const struct cfg *c);

#endif
