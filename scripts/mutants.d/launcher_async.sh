# Launcher start() never waits (issue 37): a start's confirmation and an ssh connection's set-up
# are driven by the agent's loop, each with a deadline. The checks' tests decide on the fake
# launcher's clock, or on an `ssh` that never answers (no sshd, only lower bounds on time): their
# verdicts do not depend on the machine's load.
# An unconfirmed start is given up at its deadline, not a tick later:
mutant --target test_launcher_fake --filter 'fake/an_unconfirmed_start_fails_at_its_deadline_not_before' \
  launcher/launch_core.c 's/return p->starting \&\& !p->exited \&\& p->start_by >= 0 \&\& now_ms >= p->start_by;/return p->starting \&\& !p->exited \&\& p->start_by >= 0 \&\& now_ms > p->start_by;/' \
  '^test_launcher_fake_safety$'
# ... and given up at all: without it a start held behind a dead connection never fails its rank
mutant --target test_agent_decisions --filter 'agent_decisions/an_unconfirmed_start_does_not_hold_the_loop*' \
  launcher/launch_core.c 's/        if (launch_core_start_overdue(p, now_ms)) {/        if (false) {/' \
  '^test_agent_decisions$'
# The ssh connection's set-up ends at its deadline (the helper's "R" never came) ...
mutant --target test_ssh_launcher --filter 'ssh_async/*' \
  launcher/ssh_conn.c 's/    if (now >= c->deadline) {/    if (now >= c->deadline + 600000) {/' \
  '^test_ssh_launcher$'
# ... counted from the slot, not failed at once:
mutant --target test_ssh_launcher --filter 'ssh_async/*' \
  launcher/ssh_conn.c 's/        c->deadline = now + c->timeout_ms; \/\* once it is our turn \*\//        c->deadline = now;/' \
  '^test_ssh_launcher$'
