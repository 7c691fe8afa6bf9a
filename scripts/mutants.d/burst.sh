# shellcheck shell=bash
# issue 41 item 2: a burst of deaths leaves in one round at the cost of about one store round trip
# (agent/node/node_confirm.c, rendezvous/suspect.c, backends/etcd_grpc.c), each decided without
# real time: test_node_burst (the memory store, a fake clock, a fake ring transport),
# test_rdzv_suspect (the file store, no clock in the verdict) and the KV conformance suite on a
# real etcd (answers, not timings).
# The failed probes of one pass are revoked in one call, not one call each.
mutant --target test_node_burst --filter 'burst/one_pass*' rendezvous/suspect.c \
  's/        r = kv_lease_revoke_each(s->kv, leases, m, codes, err);/        for (size_t q = 0; q < m; q++) r = kv_lease_revoke_each(s->kv, leases + q, 1, codes + q, err);/' \
  '^test_node_burst_safety$'
# A burst's round waits a beat after its last case (a member seen silent a little later).
mutant --target test_node_burst --filter 'burst/a_member_seen*' agent/node/node_confirm.c \
  's/    bool settling = g->holding \&\& g->burst >= NODE_BURST_MIN \&\&/    bool settling = 0 \&\&/' \
  '^test_node_burst_safety$'
# The wait is as long as the burst took to arrive, a beat at most, after its last case; a burst
# seen at once does not wait; fewer than NODE_BURST_MIN cases are no burst.
mutant --target test_node_burst --filter 'burst/a_trickle*' agent/node/node_confirm.c \
  's/    int64_t settled = g->last_case_ms + quiet;/    int64_t settled = g->hold_from + cap;/' \
  '^test_node_burst_safety$'
mutant --target test_node_burst --filter 'burst/a_trickle*' agent/node/node_confirm.c \
  's/    if (quiet > beat)/    if (0)/' '^test_node_burst_safety$'
mutant --target test_node_burst --filter 'burst/a_burst_seen_at_once*' agent/node/node_confirm.c \
  's/    int64_t quiet = g->last_case_ms - g->first_case_ms;/    int64_t quiet = beat;/' \
  '^test_node_burst_safety$'
mutant --target test_node_burst --filter 'burst/two_deaths*' agent/node/node_confirm.c \
  's/g->burst >= NODE_BURST_MIN \&\&/g->burst >= 1 \&\&/' '^test_node_burst_safety$'
# The stale keys' one transaction is fenced on each key's revision.
mutant --target test_rdzv_suspect --filter 'suspect/a_stale_key_rewritten*' rendezvous/suspect.c \
  's/    if (kv_txn(s->kv, cmps, n, ops, n, NULL, NULL) != 0)/    if (kv_txn(s->kv, cmps, 0, ops, n, NULL, NULL) != 0)/' \
  '^test_rdzv_suspect$'
# etcd's revokes in flight together: each answered as its own (an unknown lease is KV_ENOLEASE).
mutant --target test_kv_conformance_etcd --filter 'kv_watch/many_leases*' backends/etcd_grpc.c \
  's/            ret_codes\[at + i\] = rc;/            ret_codes[at + i] = 0;/' '^test_kv_conformance_etcd$'
# etcd's renewals in flight together (rdzv-sim's sessions): a lease etcd answers with TTL 0
# (revoked, expired, unknown) is reported lost, never taken for renewed.
mutant --target test_kv_conformance_etcd --filter 'kv_watch/many_leases_are_renewed*' backends/etcd.c \
  's/        if (ret_codes\[i\] == 0 \&\& (!r || r->ttl <= 0)) {/        if (0) {/' \
  '^test_kv_conformance_etcd$'
# The ring counts the sockets it closes: rdzv-sim's ring host re-registers a ring's sockets only
# after one closed (a reused number is a new socket epoll does not know).
mutant --target test_liveness_ring --filter 'ring/a_killed_peer*' agent/liveness/ring.c \
  's/        r->closed++;/        (void)r;/' '^test_liveness_ring$'
