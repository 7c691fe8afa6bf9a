#!/usr/bin/env bash
# What the README promises on a terminal, on a real pty (util-linux `script`):
#  1. the agent's "waiting for nodes" progress is ONE line redrawn in place ("\r\033[K" before
#     each redraw, no newline between them), counting down every second;
#  2. `status --watch` redraws the whole view in place ("\033[H\033[2J" before each view) when
#     the run changes (a node joins).
# Every wait is on the typescript's content with a deadline (tail -F), never a sleep.
# Mutations: agent/log/log.c log_progress() `in_place = false` -> case 1 fails;
#            agent/observe/status.c `if (sc->cfg->watch && sc->tty)` -> `if (0)` -> case 2 fails.
# Usage: test_tty.sh AGENT HELPERS_DIR
set -uo pipefail
agent=${1:?usage: test_tty.sh AGENT HELPERS_DIR} w=${2:?}/ea-testworker
command -v script >/dev/null || { echo "FAIL: util-linux 'script' is needed (bsdutils)"; exit 1; }
d=$(mktemp -d /tmp/ea-tty.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  [[ -n ${EA_TTY_KEEP:-} ]] || rm -rf "$d"
}
trap cleanup EXIT
fail=0
check() { # NAME COMMAND...: one result line; the command's status decides
  local name=$1; shift
  if "$@"; then echo "PASS  $name"; else echo "FAIL  $name"; fail=1; fi
}
# until FILE holds at least N occurrences of the (printf-format) bytes PAT, or SECS pass; read
# byte by byte: a line redrawn in place never ends with a newline
wait_count() {
  local file=$1 pat=$2 n=$3 secs=${4:-15}
  perl -e 'my ($pat, $n) = @ARGV; @ARGV = (); $/ = \1; my ($buf, $c) = ("", 0);
    while (defined(my $ch = <STDIN>)) {
      $buf = substr($buf . $ch, -length $pat);
      exit 0 if $buf eq $pat && ++$c >= $n;
    }
    exit 1' "$(printf "$pat")" "$n" < <(timeout "$secs" tail -F -n +1 "$file" 2>/dev/null)
}
count() {
  local file=$1 pat=$2 n=$3 secs=${4:-15}
  timeout "$secs" tail -F -n +1 "$file" 2>/dev/null |
    grep -a -o -F -m "$n" -- "$(printf "$pat")" | awk -v n="$n" 'NR >= n { found = 1; exit } END { exit !found }'
}
# on a pty: `script` runs "exec ARGS..." so that its child is the agent itself
on_pty() { # TYPESCRIPT ARGS...
  local ts=$1; shift
  script -q -f -e -c "exec $(printf '%q ' "$@")" "$ts" </dev/null >/dev/null 2>&1 &
  pids+=($!)
}
common=(--state-dir "$d/state" --run-id tty --settle 0.3 --stop-timeout 2)

# ---- 1. the progress line ----
on_pty "$d/progress.ts" "$agent" "${common[@]}" --node-id n0 --min 2 --max 2 --join-timeout 600 \
  -- "$w" wait-file "$d/go"
check "progress: redrawn at least 3 times within 5 s" \
  wait_count "$d/progress.ts" 'waiting for nodes: 1/2' 3 5
# every redraw returns to the start of the line and clears it first: "\r\033[K<time> ... waiting"
check "progress: each redraw in place" perl -0777 -ne 'my $all = () = /waiting for nodes/g;
  my $in_place = () = /\r\x1b\[K[^\r\n]*waiting for nodes/g; exit !($all && $in_place == $all)' \
  "$d/progress.ts"
check "progress: it counts down" grep -a -q -F 'giving up in 599 s' "$d/progress.ts"
check "progress: no newline between redraws" \
  bash -c '! grep -a -q "^waiting for nodes" "$0"' "$d/progress.ts"
"$agent" "${common[@]}" --node-id n1 --min 2 --max 2 -- "$w" wait-file "$d/go" \
  >"$d/n1.log" 2>&1 &
pids+=($!)
check "progress: the round starts" wait_count "$d/progress.ts" 'round 1 ' 1 15
# the last redraw is erased ("\r\033[K") before what follows is printed on that line
check "progress: erased when the round starts" perl -0777 -ne \
  'exit !/waiting for nodes: [^\r\n]* s\r\x1b\[K(?!waiting)[^\r\n]*round 1 /' "$d/progress.ts"

# ---- 2. status --watch ----
on_pty "$d/watch.ts" "$agent" status --state-dir "$d/state" --run-id tty --watch
check "watch: the first view is drawn in place" wait_count "$d/watch.ts" '\033[H\033[2J' 1 10
"$agent" "${common[@]}" --node-id n2 --min 2 --max 3 -- "$w" wait-file "$d/go" \
  >"$d/n2.log" 2>&1 &
pids+=($!)
check "watch: redrawn in place when a node joins" wait_count "$d/watch.ts" '\033[H\033[2J' 2 15
touch "$d/go"
if ((fail)); then
  echo "---- progress typescript:"; od -c "$d/progress.ts" | tail -20
  echo "---- watch typescript:"; tail -c 2000 "$d/watch.ts"
fi
exit "$fail"
