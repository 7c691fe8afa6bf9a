# SPDX-License-Identifier: Apache-2.0
# The built-in rabit tracker (issue 20): protocol tests against simulated rabit workers.
ea_add_criterion_test(test_tracker SOURCES unit/test_tracker.c helpers/rabit_sim.c
                      LIBS ea_agent Threads::Threads TIMEOUT 120)
target_include_directories(test_tracker PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/helpers)
# Real XGBoost (Debian's python3-xgboost) under the built-in tracker, file backend.
ea_add_criterion_test(test_e2e_xgboost SOURCES e2e/test_e2e_xgboost.c LIBS ea_e2e_harness
                      TIMEOUT 300 LABELS e2e xgboost)
# Who the tracker admits (issue 29): member hosts only (a client in a network namespace), one
# start per rank, the hello deadline, the per-host connection cap.
ea_add_criterion_test(test_tracker_admit SOURCES unit/test_tracker_admit.c helpers/rabit_sim.c
                      LIBS ea_agent ea_netns_harness Threads::Threads TIMEOUT 120 LABELS netns)
target_include_directories(test_tracker_admit PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/helpers)
