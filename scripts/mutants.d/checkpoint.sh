# The checkpoint store (issue 39, agent/checkpoint/): each safety line, proven by the unit tests
# of tests/unit/test_checkpoint.c (pure decisions and an in-process server: no timing).
T='^test_checkpoint$'
S=agent/checkpoint/ckpt_store.c
mutant --target test_checkpoint --filter 'ckpt_store/commit_verifies*' $S 's/    if (declared \&\& crc != crc_declared) {/    if (0) {/' "$T"
mutant --target test_checkpoint --filter 'ckpt_store/commit_verifies*' $S 's/    if (size != e->len) {/    if (0) {/' "$T"
mutant --target test_checkpoint --filter 'ckpt_store/memory_bound*' $S 's/    if (s->used + len - droppable(s, step) > s->limit)/    if (0)/' "$T"
mutant --target test_checkpoint --filter 'ckpt_store/newest_complete*' $S 's/s->e\[i\].step != s->complete \&\& s->e\[i\].committed)/s->e[i].committed)/' "$T"
mutant --target test_checkpoint --filter 'ckpt_store/bounds*' $S 's/    if (step < 0 || step > CKPT_MAX_STEP)/    if (0)/' "$T"
mutant --target test_checkpoint --filter 'ckpt_store/bounds*' $S 's/    if (shards < 1 || shards > CKPT_MAX_SHARDS)/    if (0)/' "$T"
mutant --target test_checkpoint --filter 'ckpt_store/bounds*' $S 's/    if (shard < 0 || shard >= shards)/    if (0)/' "$T"
mutant --target test_checkpoint --filter 'ckpt_store/bounds*' $S 's/        if (e->shards != shards)/        if (0)/' "$T"
mutant --target test_checkpoint --filter 'ckpt_store/a_complete_step*' $S 's/    if (step < s->complete)/    if (0)/' "$T"
P=agent/checkpoint/ckpt_proto.c
mutant --target test_checkpoint --filter 'ckpt_proto/malformed*' $P 's/    if (n == 0 || n > CKPT_MSG_MAX)/    if (n == 0)/' "$T"
mutant --target test_checkpoint --filter 'ckpt_proto/malformed*' $P 's/    if (pos < n)/    if (0)/' "$T"
C=agent/checkpoint/checkpoint.c
# the run-id check: another run's shard is never saved or served
mutant --target test_checkpoint --filter 'ckpt_server/bad_input*' $C 's/    if (q.op != CKPT_COMMIT \&\& strcmp(q.run, c->run) != 0) {/    if (0) {/' "$T"
# the member check: a peer of another uid is refused
mutant --target test_checkpoint --filter 'ckpt_server/a_peer_of_another_uid*' $C 's/ || cr.uid != c->cfg.uid) {/) {/' "$T"
# the seal: the bytes measured at commit are the bytes served
mutant --target test_checkpoint --filter 'ckpt_server/save_then_load*' $C 's/F_ADD_SEALS, F_SEAL_WRITE) < 0)/F_ADD_SEALS, 0) < 0)/' "$T"
D=agent/checkpoint/ckpt_disk.c
# --checkpoint-dir: a corrupt shard is never read back (an older whole step instead)
mutant --target test_checkpoint --filter 'ckpt_server/checkpoint_dir*' $D 's/    if (r == 0 \&\& ckpt_crc32(0, m, h->len) != h->crc)/    if (0)/' "$T"
# the writer re-checks a known checksum: bytes that changed in memory are never written
mutant --target test_checkpoint --filter 'ckpt_server/the_writer*' $D 's/    if (h->crc_known \&\& crc != h->crc) {/    if (0) {/' "$T"
# --checkpoint-dir: a file of another run is never read back
mutant --target test_checkpoint --filter 'ckpt_server/another_runs_file*' $D 's/    if (r == 0 \&\& (!hdr_unpack(hb, h) || strcmp(h->run, run) != 0 || h->step != step ||/    if (r == 0 \&\& (!hdr_unpack(hb, h) || h->step != step ||/' "$T"
# Replication (stage 4): tests/unit/test_ckpt_repl.c (pure wire decisions, and two stores in-process
# over loopback TCP with deadlines on events, not on timing)
R='^test_ckpt_repl$'
W=agent/checkpoint/ckpt_wire.c
# members only: the ring predecessor of this round, of this run, addressed to this node
mutant --target test_ckpt_repl --filter 'ckpt_wire/only_the_ring*' $W 's/    if (!v->prev || !v->prev\[0\] || strcmp(h->from, v->prev) != 0) {/    if (0) {/' "$R"
mutant --target test_ckpt_repl --filter 'ckpt_wire/only_the_ring*' $W 's/    if (strcmp(h->run, v->run) != 0) {/    if (0) {/' "$R"
mutant --target test_ckpt_repl --filter 'ckpt_wire/only_the_ring*' $W 's/    if (h->round < v->round) {/    if (0) {/' "$R"
mutant --target test_ckpt_repl --filter 'ckpt_wire/only_the_ring*' $W 's/    if (strcmp(h->to, v->me) != 0) {/    if (0) {/' "$R"
# sizes: names, header fields, a shard's length against the bound
mutant --target test_ckpt_repl --filter 'ckpt_wire/malformed*' $W 's/    if (n < 1 || n > CKPT_WIRE_NAME_MAX)/    if (n < 1)/' "$R"
mutant --target test_ckpt_repl --filter 'ckpt_wire/shard_headers*' $W 's/    if (s.len == 0 || s.len > max_len)/    if (s.len == 0)/' "$R"
mutant --target test_ckpt_repl --filter 'ckpt_wire/shard_headers*' $W 's/    if (s.shard < 0 || s.shard >= s.shards)/    if (0)/' "$R"
P2=agent/checkpoint/ckpt_repl.c
mutant --target test_ckpt_repl --filter 'ckpt_repl/sizes*' $P2 's/ckpt_shard_decode(in->buf, in->have, c->store.limit, /ckpt_shard_decode(in->buf, in->have, UINT64_MAX, /' "$R"
# the memory bound on replicas, refused with an answer and a note (never silently)
mutant --target test_ckpt_repl --filter 'ckpt_repl/sizes*' agent/checkpoint/ckpt_store.c 's/    if (s->used + len - droppable(s, step) > s->limit)/    if (0)/' "$R"
mutant --target test_ckpt_repl --filter 'ckpt_repl/sizes*' $P2 's/    in->why_st = rc == -ENOSPC ? CKPT_W_NOFIT : CKPT_W_BAD;/    in->why_st = rc == -ENOSPC ? CKPT_W_OK : CKPT_W_BAD;/' "$R"
mutant --target test_ckpt_repl --filter 'ckpt_repl/sizes*' $P2 's/    ckpt_note_add(c, rc == -ENOSPC ? CKPT_NOTE_NOFIT : CKPT_NOTE_BAD,/    ckpt_note_add(c, CKPT_NOTE_BAD,/' "$R"
# every shard's CRC-32 checked on receipt
mutant --target test_ckpt_repl --filter 'ckpt_repl/a_corrupt*' $P2 's/    int rc = ckpt_store_commit(&c->store, in->owner, in->id, size, true, crc, s->crc, &e);/    int rc = ckpt_store_commit(\&c->store, in->owner, in->id, size, false, crc, s->crc, \&e);/' "$R"
# a connection that never says its hello is closed (slots are few)
mutant --target test_ckpt_repl --filter 'ckpt_repl/a_connection_that_says*' $P2 's/        else if (r->in\[i\].st != IN_FREE \&\& r->in\[i\].deadline > 0 \&\& now > r->in\[i\].deadline) {/        else if (0) {/' "$R"
# the node record's ckpt_port: a port or the record does not decode
mutant --target test_rdzv_state --filter 'state/node_record_ckpt_port*' rendezvous/state.c 's/        if (r == 0 \&\& cp \&\& (cpv < 1 || cpv > 65535))/        if (0)/' '^test_rdzv_state$'
# --checkpoint-bandwidth: the sender keeps to its cap (on the step's clock: a fake one in the test)
mutant --target test_ckpt_repl --filter 'ckpt_repl/the_sender_keeps*' agent/checkpoint/ckpt_repl.c 's/            if (r->cfg.bytes_per_sec > 0 \&\& (double)n > r->tokens)/            if (0)/' '^test_ckpt_repl$'
# Room for a save or replica is made the oldest first, superseded entries before a shard's newest
# (a replica's only copy stays until the next one commits), only as much as needed.
mutant --target test_checkpoint --filter 'ckpt_store/a_shards_newest*' $S 's/                    (pass == 1 || superseded(s, i)) \&\&/                    (1) \&\&/' "$T"
mutant --target test_checkpoint --filter 'ckpt_store/a_shards_newest*' $S 's/                    (victim == SIZE_MAX || e->step < s->e\[victim\].step))/                    (victim == SIZE_MAX || e->step > s->e[victim].step))/' "$T"
mutant --target test_checkpoint --filter 'ckpt_store/room_for_a_big*' $S 's/        while (s->used + len > s->limit) {/        for (int once = 1; once-- > 0;) {/' "$T"
