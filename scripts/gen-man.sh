#!/usr/bin/env bash
# Writes the elastic-agent(1) man page, generated from the binary's --help (the option table), to
# stdout. Used by the CMake install rules and by scripts/build-deb.sh.
# Usage: scripts/gen-man.sh BINARY VERSION
set -euo pipefail
bin=$1
version=$2
date=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(git -C "$(dirname "$0")/.." log -1 --format=%ct 2>/dev/null || date +%s)}" +%Y-%m-%d)
"$bin" --help | awk -v version="$version" -v date="$date" '
  function roff(s) { gsub(/\\/, "\\e", s); gsub(/-/, "\\-", s); sub(/^[.'\'']/, "\\\\\\&&", s); return s }
  BEGIN {
    printf ".TH ELASTIC-AGENT 1 \"%s\" \"elastic-agent %s\" \"User Commands\"\n", date, version
    print ".SH NAME"
    print "elastic\\-agent \\- run distributed training workers elastically on every node"
    print ".SH SYNOPSIS"
    print ".B elastic\\-agent"
    print "[\\fIOPTIONS\\fR] [\\fB\\-\\-\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR...]"
    section = "head"
  }
  /^Usage:/ { next }
  /^Options/ { print ".SH OPTIONS"; print roff($0); section = "opts"; next }
  /^Exit status:/ { print ".SH EXIT STATUS"; section = "exit" }
  section == "head" && NF { if (!described++) print ".SH DESCRIPTION"; print roff($0); next }
  section == "opts" && /^  --/ {
    line = substr($0, 3)
    split(line, parts, /  +/)
    print ".TP"
    print "\\fB" roff(parts[1]) "\\fR"
    print roff(substr(line, length(parts[1]) + 1 + match(substr(line, length(parts[1]) + 1), /[^ ]/) - 1))
    next
  }
  section == "exit" && NF { print roff($0) }
  END {
    print ".SH ENVIRONMENT"
    print "Every option is also read from ELASTIC_\\fINAME\\fR (upper case, \\- becomes _), e.g."
    print "ELASTIC_RUN_ID; torchrun'"'"'s PET_* variables are read too. The command line wins."
    print ".SH FILES"
    print ".TP"
    print "/etc/elastic\\-agent/\\fIINSTANCE\\fR.env"
    print "options of the systemd service elastic\\-agent@\\fIINSTANCE\\fR.service"
    print ".SH SEE ALSO"
    print "elastic\\-agent\\-lifecycle\\-hook (/usr/sbin), /usr/share/doc/elastic\\-agent/examples"
  }'
