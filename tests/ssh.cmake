# SSH launcher (issue #6): a real sshd on a loopback port (tests/ssh/sshd_harness), the launcher
# driven directly, and real agents with --launcher ssh. The harness library is shared with the
# driver-mode and chaos tests.
add_library(ea_sshd_harness STATIC ssh/sshd_harness.c)
target_include_directories(ea_sshd_harness PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/ssh)
target_link_libraries(ea_sshd_harness PUBLIC PkgConfig::CRITERION)

add_executable(ea-ssh-recorder ssh/ssh_recorder.c)
set_target_properties(ea-ssh-recorder PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                      ${CMAKE_CURRENT_BINARY_DIR}/helpers)
add_dependencies(ea_test_helpers ea-ssh-recorder)

ea_add_criterion_test(test_ssh_launcher
  SOURCES ssh/test_ssh_launcher.c ssh/test_ssh_connection.c ssh/ssh_fixture.c
          unit/test_launch_support.c
  LIBS ea_launcher ea_sshd_harness
  TIMEOUT 120)
target_include_directories(test_ssh_launcher PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)
# Its connection_setup_waits_for_a_free_slot case takes every inotify instance of the user (a
# thousand nodes waiting at once): no other test may run beside it (test_e2e_ssh's sshd harness
# failed twice in a clean-clone CI when they overlapped).
set_tests_properties(test_ssh_launcher PROPERTIES RUN_SERIAL TRUE)
target_compile_definitions(test_ssh_launcher PRIVATE
  EA_BIN_DIR="$<TARGET_FILE_DIR:elastic-agent>")

ea_add_criterion_test(test_e2e_ssh
  SOURCES ssh/test_e2e_ssh.c
  LIBS ea_e2e_harness ea_sshd_harness
  TIMEOUT 180 LABELS e2e)
target_compile_definitions(test_e2e_ssh PRIVATE EA_BIN_DIR="$<TARGET_FILE_DIR:elastic-agent>")
