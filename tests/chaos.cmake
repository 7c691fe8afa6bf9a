# SPDX-License-Identifier: Apache-2.0
# The chaos suite (issue #10): N agents on a real 3-member etcd cluster, one seeded fault per
# episode, invariants checked from the workers' evidence and /proc (tests/chaos/README.md).
# `chaos-run` is the driver (a criterion binary; tests/chaos/run is its command line). CI runs
# the short form, chaos_short; the long run is `tests/chaos/run --episodes 100 --seed S`.
if(TARGET ea_etcd_harness)
  add_executable(chaos-run chaos/chaos_main.c chaos/chaos_monitor.c chaos/chaos_check.c
                 chaos/chaos_faults.c chaos/chaos_netns.c)
  target_include_directories(chaos-run PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/chaos)
  target_link_libraries(chaos-run PRIVATE ea_etcd_harness PkgConfig::CRITERION Threads::Threads)
  target_compile_definitions(chaos-run PRIVATE
    EA_AGENT_BIN="$<TARGET_FILE:elastic-agent>"
    EA_HELPERS_DIR="${CMAKE_CURRENT_BINARY_DIR}/helpers")
  add_dependencies(chaos-run elastic-agent ea_test_helpers)
  if(TARGET ea_netns_harness) # tests/nic.cmake: agents in network namespaces, the partition fault
    target_link_libraries(chaos-run PRIVATE ea_netns_harness)
    target_compile_definitions(chaos-run PRIVATE EA_CHAOS_NETNS)
  endif()
  add_test(NAME chaos_short COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/chaos/run
           --binary $<TARGET_FILE:chaos-run> --episodes 20 --seed 1)
  set_tests_properties(chaos_short PROPERTIES TIMEOUT 600 LABELS chaos)
endif()
