# launcher: the spawn recipe, exec-guard and the local launcher, with real processes and signals.
# The guard binary is the build's elastic-agent (EA_AGENT_BIN); workers are ea-testworker.
ea_add_criterion_test(test_guard
  SOURCES unit/test_guard.c unit/test_launch_support.c
  LIBS ea_launcher
  TIMEOUT 60)
# issue 38: strays re-parented to a subreaper are killed, and theirs in turn (a safety test)
ea_add_criterion_test(test_proc
  SOURCES unit/test_proc.c unit/test_launch_support.c
  LIBS ea_launcher
  TIMEOUT 60
  SAFETY "proc/strays_and_their_children_are_killed_registered_children_are_not")
# issue 38: what escapes a SIGKILLed exec-guard is killed by the agent (a safety test)
ea_add_criterion_test(test_launcher_local
  SOURCES unit/test_launcher_local.c unit/test_launch_support.c
  LIBS ea_launcher
  TIMEOUT 60
  SAFETY "local/escapee_of_a_killed_guard_is_killed_by_the_agent")
# The fake launcher and, through it, the core every launcher shares (stop with grace, exit
# collection, release): no processes, a fake clock, so its verdicts do not depend on load.
ea_add_criterion_test(test_launcher_fake
  SOURCES unit/test_launcher_fake.c
  LIBS ea_launcher
  TIMEOUT 30
  SAFETY "fake/@(stop_*|a_second_stop*|release_*|an_unconfirmed_start*)")
