# Fuzz targets (tests/fuzz/fuzz_<name>.c). Every build links each one with replay_main.c into
# fuzz_replay_<name>, a ctest (label fuzz) that feeds it every file of tests/fuzz/corpus/<name>/,
# so an input that once crashed stays a test. With -DEA_FUZZ=ON (clang) each also links with
# libFuzzer into fuzz_<name>; scripts/fuzz.sh builds and runs those.
if(EA_FUZZ)
  add_custom_target(fuzz) # `cmake --build DIR --target fuzz`: only the fuzzers and what they link
endif()
set(EA_FUZZ_TARGETS state:ea_rendezvous node:ea_rendezvous cfg:ea_config report:ea_observe
    runspec:ea_daemon sshsig:ea_daemon ring:ea_agent)
if(EXISTS ${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_hostsource.c
   AND EXISTS ${PROJECT_SOURCE_DIR}/agent/driver/hostsource.h)
  list(APPEND EA_FUZZ_TARGETS hostsource:ea_driver)
endif()
foreach(entry ${EA_FUZZ_TARGETS})
  string(REPLACE ":" ";" parts ${entry})
  list(GET parts 0 name)
  list(GET parts 1 lib)
  add_executable(fuzz_replay_${name} fuzz/fuzz_${name}.c fuzz/replay_main.c)
  target_link_libraries(fuzz_replay_${name} PRIVATE ${lib})
  add_test(NAME fuzz_replay_${name}
           COMMAND fuzz_replay_${name} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${name})
  set_tests_properties(fuzz_replay_${name} PROPERTIES LABELS fuzz TIMEOUT 60)
  if(EA_FUZZ)
    add_executable(fuzz_${name} fuzz/fuzz_${name}.c)
    target_link_libraries(fuzz_${name} PRIVATE ${lib})
    target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer)
    add_dependencies(fuzz fuzz_${name})
  endif()
endforeach()
