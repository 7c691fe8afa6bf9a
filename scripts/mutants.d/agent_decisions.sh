# The agent's decisions on a fake clock with the fake launcher (tests/unit/test_agent_decisions.c):
# verdicts that do not depend on the machine's load.
# the restart budget: one restart more than --max-restarts allows
mutant --target test_agent_decisions --filter 'agent_decisions/a_failed_worker*' \
  rendezvous/plan.c 's/^    if (restarts > s->max_restarts || stop) {$/    if (restarts > s->max_restarts + 1 || stop) {/' \
  '^test_agent_decisions$'
# the stop's grace: SIGKILL before --stop-timeout has passed
mutant --target test_agent_decisions --filter 'agent_decisions/a_worker_that_ignores*' \
  agent/group.c 's/launch_stop(g->launcher, g->w\[i\].proc, g->cfg->stop_timeout_ms);/launch_stop(g->launcher, g->w[i].proc, g->cfg->stop_timeout_ms \/ 2);/' \
  '^test_agent_decisions$'
