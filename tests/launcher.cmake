# launcher: the spawn recipe, exec-guard and the local launcher, with real processes and signals.
# The guard binary is the build's elastic-agent (EA_AGENT_BIN); workers are ea-testworker.
foreach(t proc guard)
  ea_add_criterion_test(test_${t}
    SOURCES unit/test_${t}.c unit/test_launch_support.c
    LIBS ea_launcher
    TIMEOUT 60)
endforeach()
# issue 38: what escapes a SIGKILLed exec-guard is killed by the agent (a safety test)
ea_add_criterion_test(test_launcher_local
  SOURCES unit/test_launcher_local.c unit/test_launch_support.c
  LIBS ea_launcher
  TIMEOUT 60
  SAFETY "local/escapee_of_a_killed_guard_is_killed_by_the_agent")
