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

# A fleet under routine faults (issue 30): simulated nodes (real rendezvous sessions, several per
# process) on a 3-member etcd cluster through compaction + member restarts, a leader kill, a rack
# (the coordinator and group ranks 1-7), 20% of the nodes and a partitioned member; ranks,
# convergence, the request rate per node and the leases checked after each (bench/fleet_faults.c,
# bench/fleet_faults.sh for 2,000 and more).
if(TARGET ea_etcd_harness)
  add_executable(fleet-faults ${PROJECT_SOURCE_DIR}/bench/fleet_faults.c
                 ${PROJECT_SOURCE_DIR}/bench/lib/fleet_host.c)
  target_include_directories(fleet-faults PRIVATE ${PROJECT_SOURCE_DIR}/bench/lib)
  target_link_libraries(fleet-faults PRIVATE ea_etcd_harness ea_node ea_rendezvous)
  set_target_properties(fleet-faults PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
  add_test(NAME fleet_faults COMMAND fleet-faults --nodes 200 --procs 4 --ttl 10)
  set_tests_properties(fleet_faults PROPERTIES TIMEOUT 900 LABELS chaos)
  # the compaction fault alone (the re-sync loop of issue 30; scripts/test.sh's mutation check)
  add_test(NAME fleet_faults_compaction COMMAND fleet-faults --nodes 100 --procs 2 --ttl 10
           --faults compact_restart)
  set_tests_properties(fleet_faults_compaction PROPERTIES TIMEOUT 300 LABELS "chaos;etcd")
endif()
