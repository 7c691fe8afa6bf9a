# latest() from the coordinator's rounds/<r>/ckpt (issue 39: O(1) a node a round): each safety
# line, proven by tests/unit/test_ckpt_fetch.c (the value's codec and checks and the publish
# decision, pure; a store in-process whose steps run on a clock of the test's own) and
# tests/unit/test_rdzv_ckpt_keys.c (the coordinator's mirror: three sessions on the file backend).
F='^test_ckpt_fetch$'
S=agent/checkpoint/ckpt_summary.c
# the value is hostile input: bounded, our schema, a node id, the key's round, step and shards
mutant --target test_ckpt_fetch --filter 'ckpt_pub/hostile*' $S 's/    if (len > CKPT_PUB_BYTES)/    if (0)/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_pub/hostile*' $S 's/    else if (schema != PUB_SCHEMA)/    else if (0)/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_pub/hostile*' $S 's/    else if (!n\[0\] || strlen(n) >= CKPT_SUM_ID_MAX)/    else if (0)/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_pub/hostile*' $S 's/    else if (r != round)/    else if (0)/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_pub/hostile*' $S 's/    else if (step < -1 || step > CKPT_MAX_STEP)/    else if (step < -1)/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_pub/hostile*' $S 's/    else if (step < -1 || step > CKPT_MAX_STEP)/    else if (step > CKPT_MAX_STEP)/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_pub/hostile*' $S 's/    else if (step >= 0 ? shards < 1 || shards > CKPT_MAX_SHARDS : shards != 0)/    else if (0)/' "$F"
# written by the coordinator this node knows, or else a member of the round (unknown: not trusted)
mutant --target test_ckpt_fetch --filter 'ckpt_pub/only_the_coordinator*' $S 's/    else if (strcmp(n, holder) != 0 \&\& is_member(ctx, n) != 1)/    else if (0)/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_pub/only_the_coordinator*' $S 's/    else if (strcmp(n, holder) != 0 \&\& is_member(ctx, n) != 1)/    else if (strcmp(n, holder) != 0 \&\& is_member(ctx, n) == 0)/' "$F"
# the coordinator publishes when every other member's summary is in, or at the deadline
mutant --target test_ckpt_fetch --filter 'ckpt_pub/published_when*' $S 's/    return fresh >= others || now_ms - since_ms >= wait_ms;/    return now_ms - since_ms >= wait_ms;/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_pub/published_when*' $S 's/    return fresh >= others || now_ms - since_ms >= wait_ms;/    return fresh >= others;/' "$F"
# ... counting only the summaries published for the round, not a node's of the round before
mutant --target test_ckpt_fetch --filter 'ckpt_pub/published_when*' $S 's/        k += v\[i\].round >= round;/        k += v[i].round >= 0;/' "$F"
X=agent/checkpoint/ckpt_fetch.c
# latest() waits for the value; a value not to be trusted is not used; without one within 5 s
# (the coordinator's 3 s and a margin), this store alone
mutant --target test_ckpt_fetch --filter 'ckpt_fetch/latest_waits*' $X 's/        if (r == 0)$/        if (0)/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_fetch/an_untrusted*' $X 's/        } else if (r < 0) {/        } else if (0) {/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_fetch/latest_falls_back*' $X 's/        } else if (f->pub_since >= 0 \&\& f->now - f->pub_since >= PUB_WAIT_MS) {/        } else if (0) {/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_fetch/latest_falls_back*' $X 's/^#define PUB_WAIT_MS (VIEW_WAIT_MS + 2000)/#define PUB_WAIT_MS 0/' "$F"
# the coordinator's summaries: other members only, of the round's incarnation, on their node
# key's lease, of the round asked
K='^test_rdzv_ckpt_keys$'
CK=rendezvous/ckpt_keys.c
mutant --target test_rdzv_ckpt_keys --filter 'ckpt_keys/the_coordinator_reads*' $CK 's/        if (k < 0 || s->m.keys\[k\].lease != s->m.keys\[n\].lease)/        if (k < 0)/' "$K"
mutant --target test_rdzv_ckpt_keys --filter 'ckpt_keys/the_coordinator_reads*' $CK 's/        if (n < 0 || !s->m.dec\[n\] || s->m.keys\[n\].create_revision != m->slot)/        if (n < 0 || !s->m.dec[n])/' "$K"
mutant --target test_rdzv_ckpt_keys --filter 'ckpt_keys/the_coordinator_reads*' $CK 's/        if (strcmp(m->node_id, s->cfg.self.node_id) == 0)/        if (0)/' "$K"
mutant --target test_rdzv_ckpt_keys --filter 'ckpt_keys/the_coordinator_reads*' $CK 's/    if (!s->full || !s->have_state || s->state.round != round || !s->state.members)/    if (!s->full || !s->have_state || !s->state.members)/' "$K"
