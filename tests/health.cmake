# SPDX-License-Identifier: Apache-2.0
# Hung workers, sick nodes and the per-phase recovery clock (issue 21).
ea_add_criterion_test(test_phases SOURCES unit/test_phases.c LIBS ea_agent)
ea_add_criterion_test(test_heartbeat SOURCES unit/test_heartbeat.c LIBS ea_agent)
# --preflight's check through the local launcher (the build's elastic-agent as its exec-guard)
ea_add_criterion_test(test_preflight SOURCES unit/test_preflight.c unit/test_launch_support.c
                      LIBS ea_agent TIMEOUT 60)
if(TARGET ea_e2e_harness)
  ea_add_criterion_test(test_e2e_health SOURCES e2e/test_e2e_health.c LIBS ea_e2e_harness
                        TIMEOUT 400 LABELS e2e pytorch)
endif()
