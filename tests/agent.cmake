# Unit tests of the agent's pure parts: options, lifecycle, worker environment, reports.
ea_add_criterion_test(test_config SOURCES unit/test_config.c LIBS ea_config
                      SAFETY "config/@(password_handover_is_not_reopenable_through_proc|handed_password_is_not_read_under_a_tracer)")
ea_add_criterion_test(test_lifecycle SOURCES unit/test_lifecycle.c LIBS ea_agent)
ea_add_criterion_test(test_workerenv SOURCES unit/test_workerenv.c LIBS ea_agent PkgConfig::JANSSON)
ea_add_criterion_test(test_report SOURCES unit/test_report.c LIBS ea_observe)
# Warm spares: the assignment protocol (with include/elastic_agent_assign.h) and the spare pool
# with the real local launcher and ea-testworker.
ea_add_criterion_test(test_warm SOURCES unit/test_warm.c unit/test_launch_support.c
                      LIBS ea_agent PkgConfig::JANSSON TIMEOUT 60)
target_include_directories(test_warm PRIVATE ${PROJECT_SOURCE_DIR}/include)
# common/ea_time's schedules (backoff, the jittered store retry), decided without a clock.
ea_add_criterion_test(test_ea_time SOURCES unit/test_ea_time.c LIBS ea_common TIMEOUT 30)
# common/ea_loop: the registration loop on a fake clock.
ea_add_criterion_test(test_ea_loop SOURCES unit/test_ea_loop.c LIBS ea_common TIMEOUT 30)
# The agent's decisions (a worker failure, the restart budget, the stop's grace, SIGTERM) on a
# fake clock with the fake launcher: the whole agent in-process, in milliseconds (issue 37).
ea_add_criterion_test(test_agent_decisions SOURCES unit/test_agent_decisions.c
                      LIBS ea_agent TIMEOUT 60)
# Progress-aware restarts (agent/progress/, issue 40): the no-progress rule on synthetic failure
# sequences, the ranks' step files, the record's codec and the plan's stop.
ea_add_criterion_test(test_progress SOURCES unit/test_progress.c LIBS ea_agent TIMEOUT 30)
# Straggler scoring (agent/straggler/, issue 40 part 2) on synthetic timings, without a clock.
ea_add_criterion_test(test_straggler SOURCES unit/test_straggler.c LIBS ea_straggler m TIMEOUT 30)
target_include_directories(test_straggler PRIVATE ${PROJECT_SOURCE_DIR}/include)
# --straggler-action evict: the decision (a spare waits, the cooldown) without a clock, and who
# may write rounds/<r>/evict, on sessions sharing the file backend.
ea_add_criterion_test(test_straggler_evict SOURCES unit/test_straggler_evict.c
                      LIBS ea_straggler ea_rendezvous TIMEOUT 60)
