# SPDX-License-Identifier: Apache-2.0
# Tests of the etcd-gateway backend against a real etcd started by the etcd harness
# (tests/etcd/etcd_harness.h, library ea_etcd_harness from etcd.cmake): the shared KV conformance
# suite through tests/etcd_gateway/fixture_gateway.c, and gateway-specific tests (faults, watch
# streams, auth/TLS, cluster failover and a mixed gRPC+gateway fleet, latency figures).
if(NOT TARGET ea_etcd_harness)
  return()
endif()

add_library(ea_gw_testutil STATIC etcd_gateway/gw_test.c)
target_include_directories(ea_gw_testutil PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/etcd_gateway)
target_link_libraries(ea_gw_testutil PUBLIC ea_etcd_testutil ea_etcd_harness ea_backends ea_common
                      Threads::Threads)

foreach(t fault stream security cluster bench)
  ea_add_criterion_test(test_etcd_gateway_${t} SOURCES etcd_gateway/test_gateway_${t}.c
                        LIBS ea_gw_testutil TIMEOUT 90 LABELS etcd etcd_gateway)
endforeach()

if(DEFINED EA_KV_CONFORMANCE_SOURCES)
  ea_add_criterion_test(test_kv_conformance_etcd_gateway
    SOURCES ${EA_KV_CONFORMANCE_SOURCES} etcd_gateway/fixture_gateway.c
    LIBS ${EA_KV_CONFORMANCE_LIBS} ea_gw_testutil TIMEOUT 120 LABELS etcd etcd_gateway)
  target_include_directories(test_kv_conformance_etcd_gateway PRIVATE
    ${CMAKE_CURRENT_SOURCE_DIR}/kv_conformance)
endif()

