# SPDX-License-Identifier: Apache-2.0
# The liveness ring (issue 31): its links and wire format over loopback sockets, its keys in the
# store (suspicion, confirmation, revoke) with sessions on the file backend, and end to end on a
# real etcd (a node SIGKILLed, frozen, the coordinator killed, a false suspicion).
ea_add_criterion_test(test_liveness_ring SOURCES unit/test_liveness_ring.c LIBS ea_agent)
ea_add_criterion_test(test_rdzv_suspect SOURCES unit/test_rdzv_suspect.c LIBS ea_rendezvous
                      PkgConfig::JANSSON)
if(TARGET ea_etcd_harness)
  ea_add_criterion_test(test_e2e_liveness SOURCES e2e/test_e2e_liveness.c
                        LIBS ea_e2e_harness ea_etcd_harness ea_rendezvous TIMEOUT 600
                        LABELS e2e etcd)
endif()
if(TARGET ea_netns_harness)
  ea_add_criterion_test(test_e2e_liveness_netns SOURCES e2e/test_e2e_liveness_netns.c
                        LIBS ea_e2e_harness ea_netns_harness TIMEOUT 300 LABELS e2e netns)
endif()
# issue 41: a rack of three of six agents cut at its switch, with and without the coordinator,
# the store (etcd) on the switch too, or the file store the cut rack still reaches
if(TARGET ea_netns_harness AND TARGET ea_etcd_harness)
  ea_add_criterion_test(test_e2e_rack_netns SOURCES e2e/test_e2e_rack_netns.c
                        LIBS ea_e2e_harness ea_netns_harness ea_etcd_harness PkgConfig::JANSSON
                        TIMEOUT 300 LABELS e2e netns etcd)
endif()
# issue 37: the node unit's decisions (agent/node/) on the memory store with a fake clock and a
# fake ring transport: no real time, no sockets (scripts/mutants.d/node.sh)
ea_add_criterion_test(test_node SOURCES unit/test_node.c unit/node_fx.c LIBS ea_node
                      SAFETY "node/@(a_suspicion*|a_probe*|the_coordinators*|a_lost_lease*|a_node_that*|a_failure_report*)")
# issue 41: the successor walk (agent/node/node_walk.c): a run of dead members in one pass
# (scripts/mutants.d/walk.sh)
ea_add_criterion_test(test_node_walk SOURCES unit/test_node_walk.c unit/node_fx.c LIBS ea_node
                      SAFETY "walk/*")
# issue 41: a burst's failed probes evicted together, and its round waiting a beat for the burst's
# last member (scripts/mutants.d/burst.sh)
ea_add_criterion_test(test_node_burst SOURCES unit/test_node_burst.c unit/node_fx.c LIBS ea_node
                      SAFETY "burst/*")
# issue 41: the member confirming the coordinator's death probes the round's other suspects too,
# and evicts them once it claims `coord` (scripts/mutants.d/node.sh)
ea_add_criterion_test(test_node_succession SOURCES unit/test_node_succession.c unit/node_fx.c
                      LIBS ea_node SAFETY "succession/*")
# issue 41: a failure domain cut from its peers that still reaches the store (agent/node/node_cut.c):
# correlated evidence needs the watcher reached too; an eviction of a node cut from its ring
# waits one cooldown before its rejoin (scripts/mutants.d/rackstore.sh)
ea_add_criterion_test(test_node_cut SOURCES unit/test_node_cut.c unit/node_fx.c LIBS ea_node
                      SAFETY "@(cut|corr)/*")
