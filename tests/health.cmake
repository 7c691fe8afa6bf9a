# SPDX-License-Identifier: Apache-2.0
# Hung workers, sick nodes and the per-phase recovery clock (issue 21).
ea_add_criterion_test(test_phases SOURCES unit/test_phases.c LIBS ea_agent)
ea_add_criterion_test(test_heartbeat SOURCES unit/test_heartbeat.c LIBS ea_agent)
if(TARGET ea_e2e_harness)
  ea_add_criterion_test(test_e2e_health SOURCES e2e/test_e2e_health.c LIBS ea_e2e_harness
                        TIMEOUT 400 LABELS e2e pytorch)
endif()
