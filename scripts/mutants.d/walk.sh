# shellcheck shell=bash
# issue 41 item 2: the liveness ring's successor walk (agent/node/node_walk.c, rendezvous/ringwalk.c),
# each decided by a unit test without real time: test_rdzv_ringwalk (a pure function) and
# test_node_walk (the memory store, a fake clock and a fake ring transport).
# The bound: a walk goes at most RDZV_WALK_MAX (a rack) past the successor.
mutant --target test_rdzv_ringwalk --filter 'ringwalk/the_bound*' rendezvous/ringwalk.c \
  's/        if (k >= max)/        if (0) \/* mutant: no bound *\//' '^test_rdzv_ringwalk_safety$'
# The stop at the first live member: nobody after it is reported.
mutant --target test_node_walk --filter 'walk/the_walk_stops_at_the_first_live*' agent/node/node_walk.c \
  's/        if (e->state == W_ALIVE || e->state == W_STOP) {/        if (e->state == W_STOP) { \/* mutant *\//' \
  '^test_node_walk_safety$'
# A probe that could not leave this node is no evidence: the walk stops there, unreported.
mutant --target test_node_walk --filter 'walk/a_probe_that_could_not*' agent/node/node_walk.c \
  's/        e->state = x->local ? W_STOP : x->alive ? W_ALIVE : W_DEAD;/        e->state = x->alive ? W_ALIVE : W_DEAD; \/* mutant *\//' \
  '^test_node_walk_safety$'
# The round check: a walk of a round that has ended reports nothing.
mutant --target test_node_walk --filter 'walk/a_walk_of_the_previous_round*' agent/node/node_walk.c \
  's/    if (w->round == round)$/    if (1) \/* mutant: any round *\//' '^test_node_walk_safety$'
# The cost of a false alarm: the first member alone is probed until it is known dead (one probe,
# not RDZV_WALK_MAX, when the neighbour's link broke for another reason).
mutant --target test_node_walk --filter 'walk/a_run_of_three*' agent/node/node_walk.c \
  's/ first == W_GONE ? w->n : 1;/ first == W_GONE ? w->n : w->n; \/* mutant *\//' \
  '^test_node_walk_safety$'
