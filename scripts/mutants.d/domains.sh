# shellcheck shell=bash
# Issue 41 (docs/protocol.md, "Failure domains"; docs/security.md, "Failure domains"): the ring
# placement that keeps one domain's members apart, the cross-domain confirmers of a suspicion of
# the coordinator and their use, and the checks on the label (flag, node record, commit record).
# All decided by pure functions (test_rdzv_domain, test_config) except the commit's own choice
# (test_rdzv_session, a file store: its verdict waits on events, not on time).
# the placement: a domain's next member is not put beside the previous one
mutant --target test_rdzv_domain --filter 'placement/a_rack_of_8*' rendezvous/domain.c \
  's/            if (same_domain(g\[k\].dom, prev))$/            if (0)/' '^test_rdzv_domain$'
# ... and the chunks are laid out in that order at all
mutant --target test_rdzv_domain --filter 'placement/chunk_boundaries*' rendezvous/chunk.c \
  's/    if (chunk_place(m, n, k_max, idx, start) < 0) {/    if (0) {/' '^test_rdzv_domain$'
# ... with each chunk's first member away from the previous chunk's last
mutant --target test_rdzv_domain --filter 'placement/chunk_boundaries*' rendezvous/chunk.c \
  's/        if (rdzv_ring_front(dom, c, after, ord))/        if (0)/' '^test_rdzv_domain$'
mutant --target test_rdzv_domain --filter 'placement/chunk_boundaries*' rendezvous/chunk.c \
  's/        after = m\[idx\[from + c - 1\]\].domain;/        after = NULL;/' \
  '^test_rdzv_domain$'
# ... by moving a member that leaves no new clash behind
mutant --target test_rdzv_domain --filter 'placement/the_front_moves*' rendezvous/domain.c \
  's/            same_domain(dom\[order\[j - 1\]\], dom\[order\[j + 1\]\]))/            0)/' \
  '^test_rdzv_domain$'
# the confirmers: outside the coordinator's domain, and apart from each other
mutant --target test_rdzv_domain --filter 'confirm/the_coordinators_rack*' rendezvous/domain.c \
  's/        if (has_domain(m\[i\].domain) \&\& !same_domain(m\[i\].domain, cd) \&\&/        if (has_domain(m[i].domain) \&\&/' \
  '^test_rdzv_domain$'
mutant --target test_rdzv_domain --filter 'confirm/the_coordinators_rack*' rendezvous/domain.c \
  's/        if (!same_domain(x->domain, d0) \&\& (ret\[1\] < 0/        if ((ret[1] < 0/' \
  '^test_rdzv_domain$'
mutant --target test_rdzv_domain --filter 'confirm/the_coordinators_rack*' rendezvous/domain.c \
  's/    if (!has_domain(cd))$/    if (0)/' '^test_rdzv_domain$'
# who confirms: never the watcher itself, and only for the coordinator they were chosen for
mutant --target test_rdzv_domain --filter 'confirm/the_coordinators_rack*' rendezvous/domain.c \
  's/            if (c != by_rank \&\& c != coord_rank/            if (c != coord_rank/' \
  '^test_rdzv_domain$'
mutant --target test_rdzv_domain --filter 'confirm/without_domains*' rendezvous/domain.c \
  's/    if (s \&\& s->n_confirm > 0 \&\& s->confirm_coord == coord_rank)/    if (s \&\& s->n_confirm > 0)/' \
  '^test_rdzv_domain$'
# the coordinator commits them
mutant --target test_rdzv_session --filter 'session/commit_names_confirmers*' \
  rendezvous/session_coord.c 's/    confirmers_of(s, \&st, chunks);/    (void)confirmers_of;/' \
  '^test_rdzv_session$'
# the label: its length, a node record's value, the commit record's ranks, the flag
mutant --target test_rdzv_domain --filter 'domain/labels*' rendezvous/domain.c \
  's/        if (!ok || n + 1 >= RDZV_DOMAIN_MAX)/        if (!ok)/' '^test_rdzv_domain$'
mutant --target test_rdzv_domain --filter 'domain/node_record*' rendezvous/state.c \
  's/        if (r == 0 \&\& domain \&\& !rdzv_domain_ok(json_string_value(domain)))/        if (0)/' \
  '^test_rdzv_domain$'
mutant --target test_rdzv_domain --filter 'domain/commit_record*' rendezvous/state.c \
  's/        ok = r >= 0 \&\& r < s->group_world_size;/        ok = r >= 0;/' '^test_rdzv_domain$'
mutant --target test_rdzv_domain --filter 'domain/commit_record*' rendezvous/state.c \
  's/            ok = v\[k\] != v\[i\];/            ok = true;/' '^test_rdzv_domain$'
mutant --target test_config --filter 'config/failure_domain*' agent/cli/config_resolve.c \
  's/    if (c->failure_domain \&\& c->failure_domain\[0\] \&\& !rdzv_domain_ok(c->failure_domain))/    if (0)/' \
  '^test_config$'
