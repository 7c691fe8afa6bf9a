// SPDX-License-Identifier: Apache-2.0
/* cfg: --help of the agent and of `status`, and the option accessors, from the one table. */
#include "config.h"
#include "config_internal.h"

#include <stdio.h>

size_t cfg_option_count(void)
{
    return cfg_n_opts;
}

const char *cfg_option_flag(size_t i, unsigned *ret_cmds)
{
    if (i >= cfg_n_opts)
        return NULL;
    if (ret_cmds)
        *ret_cmds = cfg_opts[i].cmds;
    return cfg_opts[i].flag;
}

void cfg_option_env_name(size_t i, char *buf, size_t size)
{
    if (i < cfg_n_opts)
        cfg_opt_env_name(&cfg_opts[i], buf, size);
    else if (size)
        buf[0] = '\0';
}

int cfg_option_find(const char *name, size_t len, bool *ret_value)
{
    for (size_t i = 0; i < cfg_n_opts; i++) {
        const char *f = cfg_opts[i].flag;
        size_t k = 0;
        while (k < len && f[k] && (f[k] == name[k] || (f[k] == '-' && name[k] == '_')))
            k++;
        if (k == len && f[k] == '\0') {
            if (ret_value)
                *ret_value = cfg_opts[i].type != OPT_BOOL;
            return (int)i;
        }
    }
    return -1;
}

void cfg_print_help(FILE *out)
{
    cfg_print_help_cmd(CFG_AGENT, out);
}

static const char agent_intro[] =
    "Usage: elastic-agent [OPTIONS] [--] COMMAND [ARGS...]\n"
    "       elastic-agent status [OPTIONS]   (see elastic-agent status --help)\n"
    "       elastic-agent serve | submit | cancel ...   (a pool of node daemons that run\n"
    "                                 submitted runs; see each one's --help, docs/daemon.md)\n"
    "\n"
    "Runs COMMAND as --nproc-per-node worker processes on this node, in an elastic job\n"
    "whose nodes agree on membership through a shared store (file, memory, etcd v3).\n"
    "Workers get torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, ...) and are\n"
    "restarted with new ranks whenever a node joins, leaves, dies or a worker fails.\n"
    "\nOptions (each also from ELASTIC_<NAME>, e.g. ELASTIC_RUN_ID; SEC accepts fractions):\n";

static const char status_intro[] =
    "Usage: elastic-agent status [OPTIONS]\n"
    "\n"
    "Reads the store and prints the run: status, round, generation, world size, restarts,\n"
    "members with their ranks, spares, nodes waiting and the failure that ended the run (else\n"
    "the last one recorded). A member's SINCE is when its agent joined the run (UTC, from its\n"
    "node record; since_ms in --json, milliseconds since the epoch) and since_revision the\n"
    "store revision at which that record was created (compare it with the round's generation,\n"
    "the revision that committed the round). A gone member's record is deleted with its lease\n"
    "(SINCE '-').\n"
    "\nOptions (each also from ELASTIC_<NAME>):\n";

void cfg_print_option(FILE *out, size_t i)
{
    if (i >= cfg_n_opts)
        return;
    const struct opt *o = &cfg_opts[i];
    char lhs[64], env[64];
    snprintf(lhs, sizeof(lhs), "--%s%s%s", o->flag, o->meta ? " " : "", o->meta ? o->meta : "");
    cfg_opt_env_name(o, env, sizeof(env));
    fprintf(out, "  %-28s %s", lhs, o->help);
    if (o->def && o->type != OPT_BOOL)
        fprintf(out, " [default %s]", o->def);
    if (o->pet)
        fprintf(out, " [env %s, %s]", env, o->pet);
    fputc('\n', out);
}

void cfg_print_help_cmd(enum cfg_cmd cmd, FILE *out)
{
    fputs(cmd == CFG_STATUS ? status_intro : agent_intro, out);
    for (size_t i = 0; i < cfg_n_opts; i++)
        if (cfg_opt_in_cmd(&cfg_opts[i], cmd))
            cfg_print_option(out, i);
    if (cmd == CFG_STATUS)
        fprintf(out, "\nStatus: forming (no round yet), starting or restarting (a round is\n"
                     "committed, its workers are being started), running, waiting (fewer than\n"
                     "--min nodes), succeeded, failed, closed.\n"
                     "\nExit status: 0 shown, 2 usage error, 3 store unreachable, 4 no such run\n"
                     "(or its state is not ours; with --watch, a missing run is waited for).\n");
    else
        fprintf(out,
                "\nExit status: 0 success, 1 workers failed past --max-restarts, 2 usage error,\n"
                "3 store unreachable past --join-timeout, 4 rendezvous closed or timed out,\n"
                "130/143 interrupted by SIGINT/SIGTERM (workers stopped).\n");
}
