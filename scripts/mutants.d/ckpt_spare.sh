# The spare memfd (issue 39's save stall, docs/checkpoint.md "The spare"): each safety line,
# proven by tests/unit/test_ckpt_spare.c (the store's decisions, pure; the server in-process with
# the loop's passes made by hand: no clock, no timing).
T='^test_ckpt_spare$'
S=agent/checkpoint/ckpt_store.c
# counted in --checkpoint-memory: made only when it fits beside what is held (never dropping a step)
mutant --target test_ckpt_spare --filter 'ckpt_spare_store/the_spare_counts*' $S 's/    if (s->used + len > s->limit) \/\* beside/    if (0) \/* beside/' "$T"
# counted in the bound of a save or a replica, and the first thing dropped for room
mutant --target test_ckpt_spare --filter 'ckpt_spare_store/the_spare_counts*' $S 's/    if (s->used + spare + len > s->limit)$/    if (0)/' "$T"
# handed out once: the store forgets the memfd it handed over, and its length
mutant --target test_ckpt_spare --filter 'ckpt_spare_store/the_spare_is_handed*' $S 's/^        s->spare_fd = -1;$/        ;/' "$T"
mutant --target test_ckpt_spare --filter 'ckpt_spare_store/the_spare_is_handed*' $S 's/^        s->spare_len = 0;$/        ;/' "$T"
mutant --target test_ckpt_spare --filter 'ckpt_spare/a_save_after*' $S 's/^        s->spare_len = 0;$/        ;/' "$T"
# only to a worker's save (never a replica or a fetch), only one that fits in it
mutant --target test_ckpt_spare --filter 'ckpt_spare_store/the_spare_is_handed*' $S 's/    bool take = ret_spare \&\& s->spare_fd >= 0 \&\& len <= s->spare_len;/    bool take = s->spare_fd >= 0 \&\& len <= s->spare_len;/' "$T"
mutant --target test_ckpt_spare --filter 'ckpt_spare/a_save_larger*' $S 's/    bool take = ret_spare \&\& s->spare_fd >= 0 \&\& len <= s->spare_len;/    bool take = ret_spare \&\& s->spare_fd >= 0;/' "$T"
C=agent/checkpoint/checkpoint.c
# the loop is held for one bounded piece a pass, not the whole spare's allocation
mutant --target test_ckpt_spare --filter 'ckpt_spare/a_save_after*' $C 's/    n = n < CKPT_SPARE_PIECE ? n : CKPT_SPARE_PIECE;/    (void)0;/' "$T"
# A dropped memfd is closed after the reply (its pages freed outside the worker's stall).
mutant --target test_ckpt_spare --filter 'ckpt_spare_store/dropped_memfds*' agent/checkpoint/ckpt_store.c \
  's/    if (s->n_reap < CKPT_REAP_MAX)/    if (0)/' '^test_ckpt_spare$'
