# issue 38 item 1 (docs/security.md, "Credentials and process hygiene"): the store password
# handed to a child agent by a socket, which /proc cannot reopen (a pipe here: it can)
mutant --target test_config --filter 'config/password_handover_is_not_reopenable*' \
  agent/cli/config_secret.c \
  's/if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)/if (pipe2(sv, O_CLOEXEC) < 0)/;s/ssize_t n = send(sv\[1\], c->password, len, MSG_NOSIGNAL);/ssize_t n = write(sv[1], c->password, len);/' \
  '^test_config_safety$'
# issue 38 item 1: what escapes a SIGKILLed exec-guard is killed by the agent, not only reaped
mutant --target test_launcher_local --filter 'local/escapee_of_a_killed_guard*' launcher/local.c \
  's|^        proc_kill_strays(); /\* what a SIGKILLed guard|        (void)0; /* mutant: only reaped|' \
  '^test_launcher_local_safety$'
# ... and end to end (the race of the issue: ea-pwrace as the agents' uid while a pool starts
# 20 runs) with the shared memfd of before (it read the password from the run agents' fd)
mutant --target test_e2e_secrets --filter 'secrets/password_race_reads_nothing*' \
  agent/cli/config_secret.c \
  's/if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)/if ((sv[0] = memfd_create("pw", MFD_CLOEXEC)) < 0 || (sv[1] = dup(sv[0])) < 0)/;s/ssize_t n = send(sv\[1\], c->password, len, MSG_NOSIGNAL);/ssize_t n = write(sv[1], c->password, len);/' \
  '^test_e2e_secrets_safety$'
# ... and not read under a tracer (one attached while the fresh agent was dumpable)
mutant --target test_config --filter 'config/handed_password_is_not_read_under_a_tracer' \
  agent/cli/config_secret.c \
  's/    long tracer = handed ? tracer_pid() : 0;/    long tracer = handed \&\& 0 ? tracer_pid() : 0;/' \
  '^test_config_safety$'
# ... and what a run left behind past its guard and its agent is killed by serve at the run's
# end (its cgroup, and what was re-parented to the daemon)
mutant --target test_e2e_daemon --filter 'daemon/what_a_run_left_behind_is_killed*' \
  agent/daemon/serve_runs.c 's/^    daemon_cg_run_end(\&d->cg, d->run);/    (void)0;/' \
  '^test_e2e_daemon_safety$'
# ... where no cgroup is used: what was re-parented, and theirs in turn (a unit test, no clock)
mutant --target test_proc --filter 'proc/strays_and_their_children*' launcher/proc.c \
  's/^        if (proc_kill_strays() <= 0)$/        if (1)/' '^test_proc_safety$'
# ... and a run of a SIGKILLed daemon: its cgroup is killed when the daemon starts again
mutant --target test_e2e_daemon \
  --filter 'daemon/what_a_killed_daemons_run_left_is_killed_when_it_starts_again' \
  agent/daemon/daemon_cg.c 's/    int n = runcg_reap_stale(/    int n = 0 \&\& runcg_reap_stale(/' \
  '^test_e2e_daemon_safety$'
