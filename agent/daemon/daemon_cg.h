// SPDX-License-Identifier: Apache-2.0
/* daemon_cg: serve's end of a run — what the run left behind is killed before the daemon starts
 * anything else: the run's own cgroup (launcher/runcg) where the node lets the daemon make one,
 * and always what was re-parented to the daemon (proc_kill_strays). docs/security.md, "Nothing a
 * run started outlives it". */
#ifndef EA_DAEMON_DAEMON_CG_H
#define EA_DAEMON_DAEMON_CG_H

#define DAEMON_CG_END_MS 1000 /* a run's leftovers get this long to be killed at its end */

struct daemon_cg {
    int parent_fd;    /* this daemon's own cgroup v2; -1: runs are not put into cgroups */
    int fd;           /* the current run's cgroup, -1 = none */
    char prefix[160]; /* "elastic-agent-<node>-": the runs' cgroups are <prefix><pid>-<n> */
    char name[200];   /* the current run's */
    unsigned seq;
};

/* Find this daemon's cgroup and remove the runs' cgroups killed daemons left next to it (their
 * processes killed; any node id: two daemons may share a host); without a writable cgroup v2,
 * runs go without. Logs what it does. */
void daemon_cg_open(struct daemon_cg *cg, const char *node_id);
/* A new cgroup for the next run: its fd for proc_spawn's cgroup_fd, or -1 (none: the first
 * failure is logged and cgroups are not tried again). */
int daemon_cg_run_start(struct daemon_cg *cg);
/* The run `run` ended (its agent exited, or never started): kill everything in its cgroup and
 * remove it, then kill what was re-parented to the daemon, and theirs in turn
 * (proc_kill_strays_until), within DAEMON_CG_END_MS; a warning names what was left. */
void daemon_cg_run_end(struct daemon_cg *cg, const char *run);
void daemon_cg_close(struct daemon_cg *cg);

#endif
