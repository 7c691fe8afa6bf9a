# Driver mode (issue #6): host-list parsers and the driver's pure parts (unit), and the driver
# with real child agents on local hosts, over SSH to loopback sshds and into network namespaces
# (e2e).
ea_add_criterion_test(test_hostsource SOURCES unit/test_hostsource.c LIBS ea_driver)
ea_add_criterion_test(test_driver_args SOURCES unit/test_driver_args.c LIBS ea_driver)
# its loop on a fake clock: the cooldown and --join-timeout decided at their deadlines (issue 37)
ea_add_criterion_test(test_driver_loop SOURCES unit/test_driver_loop.c LIBS ea_driver)
if(TARGET ea_e2e_harness)
  ea_add_criterion_test(test_e2e_driver SOURCES driver/test_driver_local.c LIBS ea_e2e_harness
                        TIMEOUT 300 LABELS e2e)
endif()
# Over SSH: real sshd processes, two hosts as network namespaces (loopback addresses where the
# kernel refuses namespaces). The netns harness is compiled in: its library (tests/nic.cmake)
# is defined after this fragment.
if(TARGET ea_e2e_harness AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/ssh/sshd_harness.c
   AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/netns/netns_harness.c)
  if(TARGET ea_sshd_harness)
    set(EA_DRIVER_SSHD ea_sshd_harness)
  else()
    set(EA_DRIVER_SSHD_SRC ssh/sshd_harness.c)
  endif()
  ea_add_criterion_test(test_e2e_driver_ssh SOURCES driver/test_driver_ssh.c
                        ${EA_DRIVER_SSHD_SRC} netns/netns_harness.c
                        LIBS ea_e2e_harness ${EA_DRIVER_SSHD} TIMEOUT 300 LABELS e2e)
  target_include_directories(test_e2e_driver_ssh PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/ssh
                             ${CMAKE_CURRENT_SOURCE_DIR}/netns)
endif()
