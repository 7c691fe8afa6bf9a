#!/usr/bin/env bash
# The bash completion and the man page cover the whole option table: every option of
# `elastic-agent --help` and `elastic-agent status --help` is completed (in the right command)
# and documented, choices complete to the values the help names, and the completion works when
# bash calls it. The files checked are the ones the build generated and `cmake --install` installs.
# Usage: test_completion_man.sh BINARY BUILD_DIR
set -euo pipefail
bin=$1
build=$2
comp=$build/elastic-agent.bash
man=$build/elastic-agent.1.gz
fail=0
check() { if eval "$2"; then echo "PASS $1"; else echo "FAIL $1"; fail=1; fi; }
[ -f "$comp" ] || { echo "FAIL no generated completion $comp"; exit 1; }
[ -f "$man" ] || { echo "FAIL no generated man page $man"; exit 1; }

agent_opts=$("$bin" --help | sed -n 's/^  \(--[a-z0-9-]*\).*/\1/p')
status_opts=$("$bin" status --help | sed -n 's/^  \(--[a-z0-9-]*\).*/\1/p')
check "--help lists options" "[ \$(wc -l <<<\"\$agent_opts\") -ge 30 ]"
check "status --help lists options" "[ \$(wc -l <<<\"\$status_opts\") -ge 8 ]"

# what bash proposes for the words "$@" (the last one being completed)
complete_words() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
           _elastic_agent; printf "%s\n" "${COMPREPLY[@]}"' _ "$comp" elastic-agent "$@"
}
all_agent=$(complete_words "")
all_status=$(complete_words status "")
missing=""
for o in $agent_opts; do grep -qx -- "$o" <<<"$all_agent" || missing+=" $o"; done
check "every agent option completes (missing:${missing:- none})" "[ -z '$missing' ]"
missing=""
for o in $status_opts; do grep -qx -- "$o" <<<"$all_status" || missing+=" $o"; done
check "every status option completes after 'status' (missing:${missing:- none})" "[ -z '$missing' ]"
check "status options only after 'status'" "! grep -qx -- --watch <<<\"\$all_agent\""
check "the status subcommand completes first" "grep -qx status <<<\"\$all_agent\""
check "prefix: --local-r" "[ \"\$(complete_words --local-r)\" = --local-ranks-filter ]"
check "choices of --log-level" "[ \"\$(complete_words --log-level '' | tr '\n' ' ')\" = 'debug info warn error ' ]"
check "choices of status --rdzv-backend" \
  "[ \"\$(complete_words status --rdzv-backend etcd | tr '\n' ' ')\" = 'etcd etcd-gateway ' ]"
check "no option proposed as a value" "[ -z \"\$(complete_words --nproc-per-node '')\" ]"
check "the worker command after --" "grep -qx echo <<<\"\$(complete_words --tee -- ech)\""

manpage=$(zcat "$man")
missing=""
for o in $agent_opts $status_opts; do
  grep -qF "\\fB${o//-/\\-}" <<<"$manpage" || missing+=" $o"
done
check "man page documents every option (missing:${missing:- none})" "[ -z '$missing' ]"
check "man page has the status command" "grep -q '^\\.SH STATUS COMMAND' <<<\"\$manpage\""
status_section=$(sed -n '/^\.SH STATUS COMMAND/,/^\.SH ENVIRONMENT/p' <<<"$manpage")
missing=""
for o in $status_opts; do
  grep -qF "\\fB${o//-/\\-}" <<<"$status_section" || missing+=" $o"
done
check "its section lists every status option (missing:${missing:- none})" "[ -z '$missing' ]"
check "its section names the status words" "grep -q restarting <<<\"\$status_section\""
if command -v man >/dev/null; then
  warnings=$(MANWIDTH=100 man --warnings -l "$man" 2>&1 >/dev/null || true)
  check "man renders without warnings${warnings:+: $warnings}" "[ -z \"\$warnings\" ]"
fi
if ((fail)); then echo "completion/man: FAILED"; exit 1; fi
echo "completion/man: all checks passed"
