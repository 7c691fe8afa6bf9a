# Observability (issue 12): status and its run view (golden output), the event stream, and end
# to end with real agents: status/--watch, --events, --log-format json, the HTTP endpoint.
ea_add_criterion_test(test_status SOURCES unit/test_status.c LIBS ea_observe)
ea_add_criterion_test(test_status_node SOURCES unit/test_status_node.c LIBS ea_observe)
ea_add_criterion_test(test_events SOURCES unit/test_events.c LIBS ea_observe)
ea_add_criterion_test(test_status_metrics SOURCES unit/test_status_metrics.c LIBS ea_observe)
if(TARGET ea_e2e_harness)
  ea_add_criterion_test(test_e2e_observe SOURCES e2e/test_e2e_observe.c
                        LIBS ea_e2e_harness PkgConfig::JANSSON TIMEOUT 600 LABELS e2e)
endif()
if(TARGET ea_e2e_harness)
  # `status` golden output for a live run in every state; `status --watch` before the run exists
  ea_add_criterion_test(test_e2e_status_states SOURCES e2e/test_e2e_status_states.c
                        LIBS ea_e2e_harness PkgConfig::JANSSON TIMEOUT 300 LABELS e2e)
endif()
if(TARGET ea_e2e_harness AND TARGET ea_etcd_harness)
  # /healthz turns 503 when the agent loses its etcd (SIGSTOP), 200 again once it rejoins
  ea_add_criterion_test(test_e2e_observe_etcd SOURCES e2e/test_e2e_observe_etcd.c
                        LIBS ea_e2e_harness ea_etcd_harness TIMEOUT 300 LABELS e2e etcd)
endif()
# the bash completion and the man page the build generates cover every option of the table
add_test(NAME test_completion_man
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_completion_man.sh
                 $<TARGET_FILE:elastic-agent> ${PROJECT_BINARY_DIR})
set_tests_properties(test_completion_man PROPERTIES TIMEOUT 60)
# the progress line and `status --watch` on a real terminal (a pty from util-linux `script`)
add_test(NAME test_tty
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/test_tty.sh $<TARGET_FILE:elastic-agent>
                 ${CMAKE_CURRENT_BINARY_DIR}/helpers)
set_tests_properties(test_tty PROPERTIES TIMEOUT 120 LABELS e2e)
# issue 29: control characters in text log lines are escaped; the --http server's per-address
# connection limit; worker logs 0600 in 0700 directories, and an error file cannot forge a line
ea_add_criterion_test(test_log SOURCES unit/test_log.c LIBS ea_agent PkgConfig::JANSSON)
# issue 38: the one escaper of foreign strings (store values, a peer's answer) and its printf;
# each command's test of it is beside the command's others (test_status, test_status_node,
# test_report, test_daemon_escape)
ea_add_criterion_test(test_escape SOURCES unit/test_escape.c LIBS ea_common LABELS safety)
ea_add_criterion_test(test_http SOURCES unit/test_http.c LIBS ea_observe)
if(TARGET ea_e2e_harness)
  ea_add_criterion_test(test_e2e_log_hardening SOURCES e2e/test_e2e_log_hardening.c
                        LIBS ea_e2e_harness TIMEOUT 120 LABELS e2e)
endif()
