# SPDX-License-Identifier: Apache-2.0
# The node daemon (issue 23): the run spec's codec and validation (unit), and serve / submit /
# cancel / status --pool end to end against a real etcd.
ea_add_criterion_test(test_runspec SOURCES unit/test_runspec.c LIBS ea_daemon)
# issue 38: status --pool, submit and cancel show a store writer's control characters escaped
# (in-process, against a file store)
ea_add_criterion_test(test_daemon_escape SOURCES unit/test_daemon_escape.c LIBS ea_daemon
                      LABELS safety)
# safety: a run never takes more daemons than its --max, and shows full at it
ea_add_criterion_test(test_e2e_daemon SOURCES e2e/test_e2e_daemon.c
                      LIBS ea_e2e_harness ea_etcd_harness PkgConfig::JANSSON TIMEOUT 300
                      LABELS e2e etcd
                      SAFETY "daemon/@(fifo_two_runs_on_three_nodes|what_a_run_left_behind_is_killed_at_its_end|what_a_killed_daemons_run_left_is_killed_when_it_starts_again)")
# Signed submissions (issue 29): the SSHSIG parser/verifier, allowed_signers and the decision on a
# spec against real ssh-keygen signatures (unit); specs put straight into a real etcd that no
# daemon may ever run (e2e, label safety: never retried).
ea_add_criterion_test(test_sshsig SOURCES unit/test_sshsig.c LIBS ea_daemon TIMEOUT 120)
# a spec's submit time and expiry against a given "now" (no clock): signed for later, overflow
ea_add_criterion_test(test_specsig SOURCES unit/test_specsig.c LIBS ea_daemon LABELS safety)
ea_add_criterion_test(test_e2e_signed SOURCES e2e/test_e2e_signed.c
                      LIBS ea_e2e_harness ea_etcd_harness ea_daemon PkgConfig::JANSSON TIMEOUT 300
                      LABELS e2e etcd safety)
# A hostile queue (issue 38): bad entries moved aside once each, the queue read in pages, scans
# on writes of `next` spaced (unit, memory backend).
ea_add_criterion_test(test_pool_queue SOURCES unit/test_pool_queue.c LIBS ea_daemon
                      SAFETY "pool_queue/*")
# serve's rescan gap decided on the loop's clock (issue 37): a fake one, so load cannot decide it.
ea_add_criterion_test(test_serve_rescan SOURCES unit/test_serve_rescan.c LIBS ea_daemon
                      PkgConfig::JANSSON SAFETY "serve_rescan/*")
ea_add_criterion_test(test_e2e_queue_flood SOURCES e2e/test_e2e_queue_flood.c
                      LIBS ea_e2e_harness ea_etcd_harness ea_daemon TIMEOUT 300 LABELS e2e etcd)
