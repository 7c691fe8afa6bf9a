# End-to-end tests: real agent processes on one host (file backend), real workers and signals.
add_library(ea_e2e_harness STATIC e2e/harness.c)
target_include_directories(ea_e2e_harness PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/e2e)
target_link_libraries(ea_e2e_harness PUBLIC PkgConfig::CRITERION)
target_compile_definitions(ea_e2e_harness PRIVATE EA_AGENT_BIN="$<TARGET_FILE:elastic-agent>")
ea_add_criterion_test(test_e2e_local SOURCES e2e/test_e2e_local.c LIBS ea_e2e_harness
                      TIMEOUT 600 LABELS e2e)

# Elastic membership (issue #7): one source, two backends.
ea_add_criterion_test(test_e2e_elastic_file SOURCES e2e/test_e2e_elastic.c LIBS ea_e2e_harness
                      TIMEOUT 600 LABELS e2e)
if(TARGET ea_etcd_harness)
  ea_add_criterion_test(test_e2e_elastic_etcd SOURCES e2e/test_e2e_elastic.c
                        LIBS ea_e2e_harness ea_etcd_harness TIMEOUT 600 LABELS e2e etcd)
  target_compile_definitions(test_e2e_elastic_etcd PRIVATE EA_E2E_ETCD)
  # the fleet path: no O(N) extras, so every non-coordinator reads only the commit record and
  # its own assignment chunk (the file variant above runs with the full view of small runs)
  set_tests_properties(test_e2e_elastic_etcd PROPERTIES
                       ENVIRONMENT "ELASTIC_TOPOLOGY=off;ELASTIC_NIC_DISCOVERY=off")
endif()

# Agents on etcd's JSON gateway (issue #5): mixed fleet with gRPC agents; etcd restart.
if(TARGET ea_etcd_harness)
  ea_add_criterion_test(test_e2e_gateway SOURCES e2e/test_e2e_gateway.c
                        LIBS ea_e2e_harness ea_etcd_harness TIMEOUT 300 LABELS e2e etcd)
endif()

# Warm spares (--warm-workers, issue 32): parked workers take each round's ranks; faults.
ea_add_criterion_test(test_e2e_warm SOURCES e2e/test_e2e_warm.c LIBS ea_e2e_harness
                      TIMEOUT 300 LABELS e2e)
# In-place re-assignment (--in-place, issue 32 part 2) on a real etcd: survivors keep their
# process across a node added and one lost; an ignored re-assignment and a malformed ack.
if(TARGET ea_etcd_harness)
  ea_add_criterion_test(test_e2e_inplace SOURCES e2e/test_e2e_inplace.c
                        LIBS ea_e2e_harness ea_etcd_harness TIMEOUT 400 LABELS e2e etcd)
endif()
