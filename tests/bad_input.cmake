# Bad input (tests/bad_input/): a table of cases (table.txt), each with the exact exit code and
# message the agent must give, run by run_table.sh against the real binary (file backend, real
# etcd from tests/etcd where a case needs one).
add_executable(ea-bad-kvput bad_input/kvput.c)
target_link_libraries(ea-bad-kvput PRIVATE ea_backends)
# `etcd:ENDPOINTS` needs the etcd backend: a module next to the agent, or (sanitizer builds have
# no modules) linked in, as the agent does
if(EA_KV_MODULES)
  get_property(EA_KV_MODULE_TARGETS GLOBAL PROPERTY EA_KV_MODULES)
  add_dependencies(ea-bad-kvput ${EA_KV_MODULE_TARGETS})
else()
  get_property(EA_KV_LINKED GLOBAL PROPERTY EA_KV_LINKED)
  target_sources(ea-bad-kvput PRIVATE ${PROJECT_SOURCE_DIR}/agent/kv_linked.c)
  target_link_libraries(ea-bad-kvput PRIVATE ${EA_KV_LINKED})
endif()
set(EA_BAD_INPUT_ENV "EA_AGENT_BIN=$<TARGET_FILE:elastic-agent>"
    "EA_HELPERS_DIR=${CMAKE_CURRENT_BINARY_DIR}/helpers" "EA_BAD_KVPUT=$<TARGET_FILE:ea-bad-kvput>")
if(TARGET ea_etcd_harness)
  add_executable(ea-bad-etcd bad_input/etcd_fixture.c)
  target_link_libraries(ea-bad-etcd PRIVATE ea_etcd_harness)
  list(APPEND EA_BAD_INPUT_ENV "EA_BAD_ETCD=$<TARGET_FILE:ea-bad-etcd>")
endif()
add_test(NAME bad_input
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/bad_input/run_table.sh
                 ${CMAKE_CURRENT_SOURCE_DIR}/bad_input/table.txt)
set_tests_properties(bad_input PROPERTIES TIMEOUT 300 LABELS bad_input
  ENVIRONMENT "${EA_BAD_INPUT_ENV}")

# Valgrind memcheck pass of the agent (release build only: valgrind cannot run ASan binaries):
# test_e2e_local (14 cases, ~25 s) with every agent under memcheck; any error or definite leak
# makes an agent exit 99, which fails the case.
find_program(EA_VALGRIND valgrind)
if(EA_VALGRIND AND NOT EA_SANITIZE)
  add_test(NAME e2e_valgrind COMMAND test_e2e_local --jobs 1)
  set(EA_VALGRIND_ENV "EA_AGENT_WRAPPER=${EA_VALGRIND} -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite")
  set_tests_properties(e2e_valgrind PROPERTIES TIMEOUT 300 LABELS "e2e;valgrind"
    ENVIRONMENT "${EA_VALGRIND_ENV}")
  # the elastic membership cases (file backend: lease loss, SIGTERM/SIGKILL of a node, spares,
  # frozen agent fenced by its guards), ~35 s
  if(TARGET test_e2e_elastic_file)
    add_test(NAME e2e_valgrind_elastic COMMAND test_e2e_elastic_file --jobs 1)
    set_tests_properties(e2e_valgrind_elastic PROPERTIES TIMEOUT 300 LABELS "e2e;valgrind"
      ENVIRONMENT "${EA_VALGRIND_ENV}")
  endif()
  # the etcd (gRPC) backend too: the cases of test_e2e_etcd whose deadlines allow valgrind's pace
  if(TARGET test_e2e_etcd)
    add_test(NAME e2e_valgrind_etcd COMMAND test_e2e_etcd --jobs 1
      "--filter=e2e_etcd/@(leader_killed_during_rendezvous_round_still_commits_once|unreachable_store_retries_until_join_timeout_then_exits_3)")
    set_tests_properties(e2e_valgrind_etcd PROPERTIES TIMEOUT 300 LABELS "e2e;valgrind;etcd"
      ENVIRONMENT "${EA_VALGRIND_ENV}")
  endif()
endif()

# The runner itself: a check that fails in any position fails its case (selftest.txt).
add_test(NAME bad_input_runner
         COMMAND bash -c "out=$(\"$0\" \"$1\"); [[ $out == *'bad_input: 1 passed, 2 failed, 0 skipped'* ]] || { echo \"$out\"; exit 1; }"
                 ${CMAKE_CURRENT_SOURCE_DIR}/bad_input/run_table.sh
                 ${CMAKE_CURRENT_SOURCE_DIR}/bad_input/selftest.txt)
set_tests_properties(bad_input_runner PROPERTIES TIMEOUT 60 LABELS bad_input
  ENVIRONMENT "${EA_BAD_INPUT_ENV}")
