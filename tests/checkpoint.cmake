# SPDX-License-Identifier: Apache-2.0
# The checkpoint store (issue 39, agent/checkpoint/): its decisions, parser and server in-process;
# end to end with real agents and workers.
ea_add_criterion_test(test_checkpoint SOURCES unit/test_checkpoint.c LIBS ea_checkpoint
                      LABELS safety)
target_include_directories(test_checkpoint PRIVATE ${PROJECT_SOURCE_DIR}/include)
if(TARGET ea_etcd_harness)
  ea_add_criterion_test(test_e2e_checkpoint SOURCES e2e/test_e2e_checkpoint.c
                        LIBS ea_e2e_harness ea_etcd_harness ea_checkpoint TIMEOUT 600 LABELS e2e etcd)
endif()
# Replication (issue 39 stage 4): the wire, the member check, two stores over loopback TCP.
ea_add_criterion_test(test_ckpt_repl SOURCES unit/test_ckpt_repl.c LIBS ea_checkpoint
                      LABELS safety)
# Fetch from any member (issue 39 item 3): the request and summary codecs, the member check, the
# step complete across members (pure); two stores in-process over loopback TCP, and a fake holder.
ea_add_criterion_test(test_ckpt_fetch SOURCES unit/test_ckpt_fetch.c LIBS ea_checkpoint
                      LABELS safety)
# Its keys in the store (rendezvous/ckpt_keys.c): the member check of a fetch, ckpt/<node-id>.
ea_add_criterion_test(test_rdzv_ckpt_keys SOURCES unit/test_rdzv_ckpt_keys.c LIBS ea_rendezvous
                      LABELS safety)
# The spare memfd (issue 39's save stall): counted, dropped first, handed out once; a save after
# a commit gets a backed memfd (the store's decisions, the server in-process, no clock).
ea_add_criterion_test(test_ckpt_spare SOURCES unit/test_ckpt_spare.c LIBS ea_checkpoint
                      LABELS safety)
