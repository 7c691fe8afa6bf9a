# launcher: the spawn recipe, exec-guard and the local launcher, with real processes and signals.
# The guard binary is the build's elastic-agent (EA_AGENT_BIN); workers are ea-testworker.
foreach(t proc guard launcher_local)
  ea_add_criterion_test(test_${t}
    SOURCES unit/test_${t}.c unit/test_launch_support.c
    LIBS ea_launcher
    TIMEOUT 60)
endforeach()
