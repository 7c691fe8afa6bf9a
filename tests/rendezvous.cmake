# Unit tests of the rendezvous protocol (pure functions: codec, plan) and the session over the
# memory backend.
ea_add_criterion_test(test_rdzv_state SOURCES unit/test_rdzv_state.c LIBS ea_rendezvous)
ea_add_criterion_test(test_rdzv_ring_chunks SOURCES unit/test_rdzv_ring_chunks.c LIBS ea_rendezvous)
ea_add_criterion_test(test_rdzv_plan SOURCES unit/test_rdzv_plan.c LIBS ea_rendezvous)
ea_add_criterion_test(test_rdzv_keys SOURCES unit/test_rdzv_keys.c LIBS ea_rendezvous)
ea_add_criterion_test(test_rdzv_session SOURCES unit/test_rdzv_session.c LIBS ea_rendezvous)
ea_add_criterion_test(test_rdzv_guard SOURCES unit/test_rdzv_guard.c LIBS ea_rendezvous)
# issue 41: failure domains: the node record's label, the ring placement, the coordinator's confirmers
ea_add_criterion_test(test_rdzv_domain SOURCES unit/test_rdzv_domain.c LIBS ea_rendezvous
                      SAFETY "confirm/*")
# issue 41: the successor walk's order from one chunk (scripts/mutants.d/walk.sh)
ea_add_criterion_test(test_rdzv_ringwalk SOURCES unit/test_rdzv_ringwalk.c LIBS ea_rendezvous
                      SAFETY "ringwalk/the_bound*")
# issue 30: a big fleet on one memory store, with a simulated clock and a slow event fan-out
ea_add_criterion_test(test_rdzv_bigfleet SOURCES unit/test_rdzv_bigfleet.c LIBS ea_rendezvous)
