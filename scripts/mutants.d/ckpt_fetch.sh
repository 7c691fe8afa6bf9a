# Fetch a shard from any member (issue 39 item 3): each safety line, proven by the unit tests of
# tests/unit/test_ckpt_fetch.c (pure codecs and decisions; two stores and a fake holder in-process
# over loopback TCP, waiting on events with deadlines, never on timing).
F='^test_ckpt_fetch$'
W=agent/checkpoint/ckpt_wire.c
# members only: a node that is not a member of this round is refused; so are another run, another
# node, another round (the hello's checks, shared)
mutant --target test_ckpt_fetch --filter 'ckpt_fetch_wire/only_members*' $W 's/    if (member != 1) {/    if (0) {/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_fetch/a_non_member*' $W 's/    if (member != 1) {/    if (0) {/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_fetch_wire/only_members*' $W 's/    if (strcmp(h->run, v->run) != 0) {/    if (0) {/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_fetch_wire/only_members*' $W 's/    if (h->round < v->round) {/    if (0) {/' "$F"
# the request's bounds
mutant --target test_ckpt_fetch --filter 'ckpt_fetch_wire/malformed*' $W 's/    if (shard >= CKPT_MAX_SHARDS)/    if (0)/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_fetch_wire/malformed*' $W 's/    if (step < 0 || step > CKPT_MAX_STEP)$/    if (step < 0)/' "$F"
X=agent/checkpoint/ckpt_fetch.c
# every fetched shard's CRC-32 checked on receipt: a corrupt one is never stored nor loaded
mutant --target test_ckpt_fetch --filter 'ckpt_fetch/a_corrupt*' $X 's/    int rc = ckpt_store_commit(&c->store, o->owner, o->id, size, true, crc, s->crc, &e);/    int rc = ckpt_store_commit(\&c->store, o->owner, o->id, size, false, crc, s->crc, \&e);/' "$F"
# sizes: a header's length against the memory bound before anything is reserved; the shard asked for
mutant --target test_ckpt_fetch --filter 'ckpt_fetch/an_oversized*' $X 's/    int d = ckpt_shard_decode(o->buf, o->have, c->store.limit, &o->sh, &e);/    int d = ckpt_shard_decode(o->buf, o->have, UINT64_MAX, \&o->sh, \&e);/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_fetch/an_oversized*' $X 's/    if (o->sh.step != o->step || o->sh.shard != o->shard) {/    if (0) {/' "$F"
S=agent/checkpoint/ckpt_summary.c
# the summary key is hostile input: bounded, of this run, of the key's node, ranges within shards
mutant --target test_ckpt_fetch --filter 'ckpt_summary/hostile*' $S 's/    if (len > CKPT_SUM_BYTES)/    if (0)/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_summary/hostile*' $S 's/    else if (strcmp(r, run) != 0)/    else if (0)/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_summary/hostile*' $S 's/    else if (strcmp(n, node) != 0 || strlen(n) >= CKPT_SUM_ID_MAX)/    else if (0)/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_summary/hostile*' $S 's/            !int_in(json_array_get(p, 1), lo, shards - 1, &hi))/            !int_in(json_array_get(p, 1), lo, CKPT_MAX_SHARDS, \&hi))/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_summary/hostile*' $S 's/        json_array_size(r) > CKPT_SUM_RANGES)/        0)/' "$F"
# one checkpoint: a step named with two shard counts is never complete
mutant --target test_ckpt_fetch --filter 'ckpt_summary/the_newest*' $S 's/        if (t \&\& shards \&\& t->shards != shards)/        if (0)/' "$F"
# a step saved again at another world size supersedes its partial shards, never the newest
# complete step, never a shard being saved
St=agent/checkpoint/ckpt_store.c
mutant --target test_ckpt_fetch --filter 'ckpt_summary/a_step_saved_again*' $St 's/    if (step == s->complete)$/    if (0)/' "$F"
mutant --target test_ckpt_fetch --filter 'ckpt_summary/a_step_saved_again*' $St 's/        if (s->e\[i\].step == step \&\& s->e\[i\].shards != shards \&\& !s->e\[i\].committed)/        if (0)/' "$F"
# the member check of a fetch (rendezvous/ckpt_keys.c): the node's incarnation listed in its chunk
# of the committed round; another round cannot be told (tests/unit/test_rdzv_ckpt_keys.c: three
# sessions on the file backend)
K='^test_rdzv_ckpt_keys$'
CK=rendezvous/ckpt_keys.c
mutant --target test_rdzv_ckpt_keys --filter 'ckpt_keys/the_members*' $CK 's/        found |= strcmp(m\[i\].node_id, id) == 0 \&\& m\[i\].slot == slot;/        found |= 1;/' "$K"
mutant --target test_rdzv_ckpt_keys --filter 'ckpt_keys/the_members*' $CK 's/    if (!s->have_state || s->state.round != round)/    if (!s->have_state)/' "$K"
