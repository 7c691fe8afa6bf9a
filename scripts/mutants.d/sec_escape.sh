# shellcheck shell=bash
# Issue 38 item 2: a store writer's or a peer's control characters never reach a terminal raw.
# The escaper itself (common/ea_escape.c): C0 controls, bytes that are not UTF-8, C1 controls in
# UTF-8, and ea_fprintf's escape of its string arguments.
mutant --target test_escape --filter 'escape/every_control*' common/ea_escape.c \
  's/} else if (c < 0x20 || c == 0x7f) {/} else if (c == 0x7f) {/' '^test_escape$'
mutant --target test_escape --filter 'escape/every_control*' common/ea_escape.c \
  's/(u = ea_utf8_len(p, left)) == 0/(u = 1) == 0/' '^test_escape$'
mutant --target test_escape --filter 'escape/every_control*' common/ea_escape.c \
  's/} else if (u == 2 /} else if (0 \&\& u == 2 /' '^test_escape$'
mutant --target test_escape --target test_status --filter '@(escape/fprintf_escapes*|status/control*)' \
  common/ea_escape.c 's/    size_t n = escape_n(esc, need, s, len, 0);/    size_t n = len; memcpy(esc, s, len);/' \
  '^(test_escape|test_status)$'
# One escape call per command: status (a member's line, the master address, a held-out node),
# status --agent (the node line), status --pool (a skipped queue key; and such a key that is not
# UTF-8 is listed, not dropped), submit (its warning about a skipped spec), cancel (its error).
mutant --target test_status --filter 'status/control*' agent/observe/status.c \
  '/ea_fprintf(out, "  %-5d  /s/ea_fprintf/fprintf/' '^test_status$'
mutant --target test_status --filter 'status/control*' agent/observe/status.c \
  '/ea_fprintf(out, "master        /s/ea_fprintf/fprintf/' '^test_status$'
mutant --target test_status --filter 'status/control*' agent/observe/health_view.c \
  '/ea_fprintf(out, "  %s (since %s)/s/ea_fprintf/fprintf/' '^test_status$'
mutant --target test_status_node --filter 'status_node/a_peers_control*' agent/observe/status_node.c \
  '/this node: %s (its agent at/s/ea_fprintf/fprintf/' '^test_status_node$'
mutant --target test_daemon_escape --filter 'daemon_escape/status_pool' agent/daemon/pool_status.c \
  '/skipped spec .%s.: %s/s/ea_fprintf/fprintf/' '^test_daemon_escape$'
mutant --target test_daemon_escape --filter 'daemon_escape/status_pool' agent/daemon/pool_status.c \
  's/    return json_pack("{s:s, s:s}", "key", k, "error", w);/    return NULL;/' '^test_daemon_escape$'
mutant --target test_daemon_escape --filter 'daemon_escape/submit' agent/daemon/submit.c \
  '/skipping run spec .%s./s/ea_fprintf/fprintf/' '^test_daemon_escape$'
mutant --target test_daemon_escape --filter 'daemon_escape/cancel' agent/daemon/submit.c \
  '/elastic-agent cancel: %s/s/ea_fprintf/fprintf/' '^test_daemon_escape$'
