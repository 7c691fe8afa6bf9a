#!/usr/bin/env bash
# Writes the elastic-agent(1) man page, generated from the binary's --help and `status --help`
# (the one option table), to stdout. Used by the CMake install rules and by scripts/build-deb.sh.
# Usage: scripts/gen-man.sh BINARY VERSION
set -euo pipefail
bin=$1
version=$2
date=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(git -C "$(dirname "$0")/.." log -1 --format=%ct 2>/dev/null || date +%s)}" +%Y-%m-%d)

# One command's --help as man sections. cmd "agent": DESCRIPTION, OPTIONS, EXIT STATUS; cmd
# "status": one STATUS COMMAND section with its description, options (.TP), status words and
# exit status as subsections.
help2man() {
  awk -v cmd="$1" '
    function roff(s) { gsub(/\\/, "\\e", s); gsub(/-/, "\\-", s); sub(/^[.'\'']/, "\\\\\\&&", s); return s }
    BEGIN { section = "head"; if (cmd == "status") print ".SH STATUS COMMAND" }
    /^Usage:/ { next }
    /^ +elastic-agent / && section == "head" { next }
    /^Options/ {
      if (cmd == "status") print ".SS Options of status"; else print ".SH OPTIONS"
      print roff($0); section = "opts"; next
    }
    /^Status:/ { print ".SS Status words"; section = "text" }
    /^Exit status:/ {
      if (cmd == "status") print ".SS Exit status of status"; else print ".SH EXIT STATUS"
      section = "text"
    }
    section == "head" && NF {
      if (!described++) {
        if (cmd == "status") {
          print ".B elastic\\-agent status"
          print "[\\fIOPTIONS\\fR]"
          print ".PP"
        } else {
          print ".SH DESCRIPTION"
        }
      }
      print roff($0); next
    }
    section == "opts" && /^  --/ {
      line = substr($0, 3)
      split(line, parts, /  +/)
      print ".TP"
      print "\\fB" roff(parts[1]) "\\fR"
      print roff(substr(line, length(parts[1]) + 1 + match(substr(line, length(parts[1]) + 1), /[^ ]/) - 1))
      next
    }
    section == "text" && NF { print roff($0) }
    section == "text" && !NF { print ".PP" }'
}

agent_help=$("$bin" --help)
status_help=$("$bin" status --help)
cat <<EOF
.TH ELASTIC-AGENT 1 "$date" "elastic-agent $version" "User Commands"
.SH NAME
elastic\\-agent \\- run distributed training workers elastically on every node
.SH SYNOPSIS
.B elastic\\-agent
[\\fIOPTIONS\\fR] [\\fB\\-\\-\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR...]
.br
.B elastic\\-agent status
[\\fIOPTIONS\\fR]
.br
.B elastic\\-agent serve
| \\fBsubmit\\fR | \\fBcancel\\fR | \\fBstatus \\-\\-pool\\fR ...
EOF
help2man agent <<<"$agent_help"
help2man status <<<"$status_help"
# the pool commands (docs/daemon.md): each one's --help, verbatim
for c in serve submit cancel "status --pool NAME"; do
  title=$(tr '[:lower:]' '[:upper:]' <<<"${c% NAME}")
  echo ".SH ${title//-/\\-} COMMAND"
  echo ".nf"
  # shellcheck disable=SC2086
  "$bin" $c --help | sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\([.']\)/\\\\\&\1/"
  echo ".fi"
done
cat <<'EOF'
.SH ENVIRONMENT
Every option is also read from ELASTIC_\fINAME\fR (upper case, \- becomes _), e.g.
ELASTIC_RUN_ID; torchrun's PET_* variables are read too. The command line wins.
.SH FILES
.TP
/etc/elastic\-agent/\fIINSTANCE\fR.env
options of the systemd service elastic\-agent@\fIINSTANCE\fR.service
.TP
/usr/share/bash\-completion/completions/elastic\-agent
bash completion, generated from the same option table
.SH SEE ALSO
elastic\-agent\-lifecycle\-hook (/usr/sbin), /usr/share/doc/elastic\-agent/examples
EOF
