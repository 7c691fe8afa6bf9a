# Progress-aware restarts (issue 40, agent/progress/): the counting and the threshold, decided by
# pg_next() on synthetic failure sequences (tests/unit/test_progress.c: no clock, no store), and
# the coordinator's stop, end to end on a real etcd (tests/e2e/test_e2e_progress.c).
# a restart without progress not counted
mutant --target test_progress --filter 'progress/different_failures*' \
  agent/progress/progress.c 's/^        out.no_progress = prev->progress.no_progress + 1;$/        out.no_progress = prev->progress.no_progress;/' \
  '^test_progress$'
# the same failure again not counted
mutant --target test_progress --filter 'progress/the_same_failure_at*' \
  agent/progress/progress.c 's/? prev->progress.repeat + 1 : 1;$/? prev->progress.repeat : 1;/' \
  '^test_progress$'
# the threshold one too late
mutant --target test_progress --filter 'progress/the_same_failure_at*' \
  agent/progress/progress.c 's/(out.repeat >= limit || out.no_progress >= limit)/(out.repeat > limit || out.no_progress >= limit)/' \
  '^test_progress$'
# the job-wide threshold one too late
mutant --target test_progress --filter 'progress/different_failures*' \
  agent/progress/progress.c 's/(out.repeat >= limit || out.no_progress >= limit)/(out.repeat >= limit || out.no_progress > limit)/' \
  '^test_progress$'
# progress not resetting the counts
mutant --target test_progress --filter 'progress/a_run_that_progresses*' \
  agent/progress/progress.c 's/^    if (!have_prev || unknown || step > best) {$/    if (!have_prev || unknown) {/' \
  '^test_progress$'
# failing at the same step taken for progress
mutant --target test_progress --filter 'progress/the_same_failure_at*' \
  agent/progress/progress.c 's/^    if (!have_prev || unknown || step > best) {$/    if (!have_prev || unknown || step >= best) {/' \
  '^test_progress$'
# no step ever known taken for no progress
mutant --target test_progress --filter 'progress/no_step_known*' \
  agent/progress/progress.c 's/^    bool unknown = step < 0 \&\& best < 0;/    bool unknown = false;/' \
  '^test_progress$'
# another exit code taken for the same failure
mutant --target test_progress --filter 'progress/the_same_failure_is*' \
  agent/progress/progress.c 's/^    return where \&\& a->exit_code == b->exit_code \&\& a->signal == b->signal;$/    return where \&\& a->signal == b->signal;/' \
  '^test_progress$'
# a record's progress not checked (best below step)
mutant --target test_progress --filter 'progress/the_record_carries*' \
  rendezvous/state.c 's/^              step < -1 || best < step || np < 0 || repeat < 1))$/              step < -1 || np < 0 || repeat < 1))/' \
  '^test_progress$'
# the plan restarting a failure whose record says stop
mutant --target test_progress --filter 'progress/the_state_names*' \
  rendezvous/plan.c 's/^    if (restarts > s->max_restarts || stop) {$/    if (restarts > s->max_restarts) {/' \
  '^test_progress$'
# the coordinator not reading the record's stop: --max-restarts spent instead
mutant --target test_e2e_progress --filter 'e2e_progress/the_same_failure*' \
  rendezvous/roundguard.c 's/^            stop = f->progress.stop;$/            stop = false;/' \
  '^test_e2e_progress$'
# the same two on the whole agent, fake clock and fake launcher (tests/unit/test_agent_decisions.c:
# no verdict depends on the machine's load): the record's stop not acted on ...
mutant --target test_agent_decisions --filter 'agent_decisions/the_same_failure_at_the_same*' \
  rendezvous/roundguard.c 's/^            stop = f->progress.stop;$/            stop = false;/' \
  '^test_agent_decisions$'
# ... and the previous failure's record not followed (every failure a first one)
mutant --target test_agent_decisions --filter 'agent_decisions/the_same_failure_at_the_same*' \
  agent/progress/progress_agent.c 's/^    bool have = prev \&\& previous_failure(a, prev) == 0;$/    bool have = false;/' \
  '^test_agent_decisions$'
# a state's last_failure after its own round followed
mutant --target test_progress --filter 'progress/the_state_names*' \
  rendezvous/state.c 's/^        last_failure < 0 || last_failure > round ||$/        last_failure < 0 ||/' \
  '^test_progress$'
# Straggler detection (agent/straggler/): the threshold, the window and the score, on synthetic
# timings (tests/unit/test_straggler.c: no clock).
# a stretch begins below the threshold
mutant --target test_straggler --filter 'straggler/the_window_must*' \
  agent/straggler/straggler.c 's/^    bool in = t->above_since >= 0 ? score >= floor : score >= threshold;$/    bool in = score >= floor;/' \
  '^test_straggler$'
# the window not waited for
mutant --target test_straggler --filter 'straggler/the_window_must*' \
  agent/straggler/straggler.c 's/^    if (t->reported || now - t->above_since < window_ms)$/    if (t->reported)/' \
  '^test_straggler$'
# reported again and again while it stays slow
mutant --target test_straggler --filter 'straggler/a_node_1_5x*' \
  agent/straggler/straggler.c 's/^    t->reported = true;$/    t->reported = false;/' \
  '^test_straggler$'
# the node's own time in the median it is compared with (two nodes: the slow one hidden)
mutant --target test_straggler --filter 'straggler/scores_are*' \
  agent/straggler/straggler.c 's/^            if (j != i \&\& t\[j\] > 0)$/            if (t[j] > 0)/' \
  '^test_straggler$'
