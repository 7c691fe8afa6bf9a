# SPDX-License-Identifier: Apache-2.0
# The built-in rabit tracker (issue 20): protocol tests against simulated rabit workers.
# safety: the rank checks (each worker its task's rank, nothing outside the round's world, no
# worker of another round, a recovering rank's own rank and links, never the old round's port)
ea_add_criterion_test(test_tracker SOURCES unit/test_tracker.c helpers/rabit_sim.c
                      helpers/tracker_srv.c
                      LIBS ea_agent Threads::Threads TIMEOUT 120
                      SAFETY "tracker/@(workers_get_their_task_rank_and_the_topology_links|task_id_outside_the_world|stale_round_is_refused|avoided_port_is_refused_when_the_kernel_offers_it|recover_gives_the_rank_back|a_recovering_rank_no_longer_accepts_on_its_old_port)")
target_include_directories(test_tracker PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/helpers)
# the test offers the tracker's bind() a chosen port (the one it must avoid): __wrap_bind
target_link_options(test_tracker PRIVATE -Wl,--wrap=bind)
# Real XGBoost (Debian's python3-xgboost) under the built-in tracker, file backend.
ea_add_criterion_test(test_e2e_xgboost SOURCES e2e/test_e2e_xgboost.c LIBS ea_e2e_harness
                      TIMEOUT 300 LABELS e2e xgboost)
# Who the tracker admits (issue 29): member hosts only (a client in a network namespace), one
# start per rank, the hello deadline, the per-host connection cap.
ea_add_criterion_test(test_tracker_admit SOURCES unit/test_tracker_admit.c helpers/rabit_sim.c
                      helpers/tracker_srv.c
                      LIBS ea_agent ea_netns_harness Threads::Threads TIMEOUT 120 LABELS netns)
target_include_directories(test_tracker_admit PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/helpers)
