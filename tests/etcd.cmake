# SPDX-License-Identifier: Apache-2.0
# Integration tests of the etcd backend against a real etcd (Debian etcd-server, etcdctl) that
# the tests start on free loopback ports (tests/etcd/etcd_harness.h). The harness is a small
# library so other suites (the kv conformance suite) can run against etcd too.
add_library(ea_etcd_harness STATIC etcd/etcd_harness.c)
target_include_directories(ea_etcd_harness PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/etcd)
target_link_libraries(ea_etcd_harness PUBLIC ea_backends ea_kv_etcd ea_kv_etcd_gateway ea_common)
# Criterion helpers shared with the etcd-gateway tests (etcd_testutil.h); kept out of the harness,
# which the conformance suite links too.
add_library(ea_etcd_testutil STATIC etcd/etcd_testutil.c)
target_link_libraries(ea_etcd_testutil PUBLIC ea_etcd_harness PkgConfig::CRITERION)

foreach(t kv watch fault security cluster bench big)
  ea_add_criterion_test(test_etcd_${t} SOURCES etcd/test_etcd_${t}.c LIBS ea_etcd_testutil
                        TIMEOUT 90)
  set_tests_properties(test_etcd_${t} PROPERTIES LABELS etcd)
endforeach()
ea_add_criterion_test(test_etcd_progress SOURCES etcd/test_etcd_progress.c LIBS ea_etcd_testutil
                      TIMEOUT 90 LABELS etcd)

# The shared KV conformance suite (tests/kv_conformance, registered in backends.cmake) run
# against etcd through this directory's fixture.
if(DEFINED EA_KV_CONFORMANCE_SOURCES)
  ea_add_criterion_test(test_kv_conformance_etcd
    SOURCES ${EA_KV_CONFORMANCE_SOURCES} etcd/fixture_etcd.c
    LIBS ${EA_KV_CONFORMANCE_LIBS} ea_etcd_harness TIMEOUT 120)
  target_include_directories(test_kv_conformance_etcd PRIVATE
    ${CMAKE_CURRENT_SOURCE_DIR}/kv_conformance)
  set_tests_properties(test_kv_conformance_etcd PROPERTIES LABELS etcd)
endif()

# The fleet-scale protocol (issue 18): 200 simulated nodes, bytes per node per round bounded,
# every committed round's ranks unique and contiguous. Not through etcd's grpc-proxy: at 100
# nodes it loses leases (bench/RESULTS.md, "Keepalive load").
ea_add_criterion_test(test_rdzv_fleet SOURCES etcd/test_rdzv_fleet.c
                      LIBS ea_etcd_testutil ea_rendezvous TIMEOUT 300 LABELS etcd)
target_compile_definitions(test_rdzv_fleet PRIVATE EA_RDZV_SIM="$<TARGET_FILE:rdzv-sim>")
add_dependencies(test_rdzv_fleet rdzv-sim)

# Issue 30: idle nodes stay quiet after etcd compacted its history and restarted.
ea_add_criterion_test(test_rdzv_compaction SOURCES etcd/test_rdzv_compaction.c
                      LIBS ea_etcd_harness ea_rendezvous TIMEOUT 90 LABELS etcd)

# Issue 30: a lease renewal when the keepalive stream's member answers nothing (SIGSTOP).
ea_add_criterion_test(test_etcd_ka_silent SOURCES etcd/test_etcd_ka_silent.c
                      LIBS ea_etcd_harness TIMEOUT 120 LABELS etcd)

# The keepalive's split of its time between members, without a clock or an etcd (a unit test of
# the backend's internal etcd_attempt_until: its mutation check's verdict does not depend on load).
ea_add_criterion_test(test_etcd_attempt SOURCES unit/test_etcd_attempt.c LIBS ea_kv_etcd
                      TIMEOUT 30)
target_include_directories(test_etcd_attempt PRIVATE
                           $<TARGET_PROPERTY:ea_kv_etcd,INCLUDE_DIRECTORIES>)
