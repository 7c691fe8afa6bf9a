# SPDX-License-Identifier: Apache-2.0
# End to end against a real etcd: elastic-agent processes on the etcd backend, etcd members
# started by tests/etcd/etcd_harness (single member, 3-member cluster, TLS + auth), real workers.
ea_add_criterion_test(test_e2e_etcd SOURCES e2e/test_e2e_etcd.c
                      LIBS ea_e2e_harness ea_etcd_harness ea_rendezvous TIMEOUT 600 LABELS e2e etcd)
# Credentials a worker cannot read (issue 29): agents and daemons as uid 65534 with the password,
# probed as that uid; --user over plaintext; a spec's loader variables and a lying max refused.
ea_add_criterion_test(test_e2e_secrets SOURCES e2e/test_e2e_secrets.c
                      LIBS ea_e2e_harness ea_etcd_harness TIMEOUT 300 LABELS e2e etcd
                      SAFETY "secrets/password_race_reads_nothing*")
# Rendezvous values checked against who may write them (issue 29): a forged master of the next
# round (pointing into a network namespace the test made) and a failure record of a non-member.
ea_add_criterion_test(test_e2e_rdzv_guard SOURCES e2e/test_e2e_rdzv_guard.c
                      LIBS ea_e2e_harness ea_etcd_harness ea_netns_harness TIMEOUT 300
                      LABELS e2e etcd netns)
# Progress-aware restarts (issue 40): a deterministic failure at step 50 ends the run after at
# most 3 restarts without progress; random failures that progress are never stopped.
ea_add_criterion_test(test_e2e_progress SOURCES e2e/test_e2e_progress.c
                      LIBS ea_e2e_harness ea_etcd_harness TIMEOUT 600 LABELS e2e etcd)
