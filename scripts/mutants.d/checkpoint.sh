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
