# launcher: the spawn recipe, exec-guard and the local launcher, with real processes and signals.
# The guard binary is the build's elastic-agent (EA_AGENT_BIN); workers are ea-testworker.
foreach(t proc guard launcher_local)
  ea_add_criterion_test(test_${t}
    SOURCES unit/test_${t}.c unit/test_launch_support.c
    LIBS ea_launcher
    TIMEOUT 60)
endforeach()
# The fake launcher and, through it, the core every launcher shares (stop with grace, exit
# collection, release): no processes, a fake clock, so its verdicts do not depend on load.
ea_add_criterion_test(test_launcher_fake
  SOURCES unit/test_launcher_fake.c
  LIBS ea_launcher
  TIMEOUT 30
  SAFETY "fake/@(stop_*|a_second_stop*|release_*)")
