# Observability (issue 12): status and its run view (golden output), the event stream, and end
# to end with real agents: status/--watch, --events, --log-format json, the HTTP endpoint.
ea_add_criterion_test(test_status SOURCES unit/test_status.c LIBS ea_agent)
ea_add_criterion_test(test_events SOURCES unit/test_events.c LIBS ea_agent)
ea_add_criterion_test(test_status_metrics SOURCES unit/test_status_metrics.c LIBS ea_agent)
if(TARGET ea_e2e_harness)
  ea_add_criterion_test(test_e2e_observe SOURCES e2e/test_e2e_observe.c
                        LIBS ea_e2e_harness PkgConfig::JANSSON TIMEOUT 600 LABELS e2e)
endif()
