# Network namespaces (issue #11): the netns harness (shared with the driver and chaos suites),
# NIC discovery, topology and rank-by-host end to end. Needs root; tests skip with the reason
# printed otherwise.
add_library(ea_netns_harness STATIC netns/netns_harness.c)
target_include_directories(ea_netns_harness PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/netns)
target_link_libraries(ea_netns_harness PUBLIC PkgConfig::CRITERION)

ea_add_criterion_test(test_netns_harness SOURCES nic/test_netns_harness.c LIBS ea_netns_harness
                      TIMEOUT 60 LABELS netns)

# Pure parts: topology builder (N = 1..9), node record NIC fields, interface lists.
ea_add_criterion_test(test_nic_unit SOURCES nic/test_nic_unit.c LIBS ea_agent TIMEOUT 30)

# End to end in namespaces: real agents (file backend on the shared filesystem), one network +
# UTS namespace per host.
if(TARGET ea_e2e_harness)
  ea_add_criterion_test(test_nic_e2e SOURCES nic/test_nic_e2e.c
                        LIBS ea_e2e_harness ea_netns_harness PkgConfig::JANSSON
                        TIMEOUT 300 LABELS e2e netns)
endif()
