#!/usr/bin/env bash
# Runs the bad-input table (table.txt): every case in a fresh directory, its `run` command bounded
# by a timeout, then compares the exit code and looks for the message (fixed string) in the
# command's output, then runs the case's `check` lines (which must succeed). Prints one result
# line per case and a summary; exits 1 if any case failed. Usage: run_table.sh TABLE [CASE-GLOB]
#
# Table format: cases separated by blank lines; '#' lines are comments; each case has
#   case: NAME            needs: etcd | etcd-tls | root (optional; else the case is skipped)
#   setup: SHELL ...      run: SHELL ...          (several lines of each are joined)
#   exit: CODE            message: TEXT           check: SHELL ...
# (every `message` line must appear in the output; every `check` must succeed)
# Variables for the shell: AGENT W (ea-testworker) T (the case's directory) RUN (its run id)
# FILE (file-backend options) FAST (short timings) ETCD (plain etcd endpoints) TLS (TLS options + endpoints of the
# auth-enabled etcd) SECRET (the limited user's password) and helpers agent, wait_log, etcdctl_*.
set -uo pipefail
table=${1:?usage: run_table.sh TABLE [CASE-GLOB]}
only=${2:-${EA_BAD_ONLY:-*}} # EA_BAD_ONLY: a case glob from the environment (scripts/mutate.sh)
: "${EA_AGENT_BIN:?}" "${EA_HELPERS_DIR:?}"
root=$(mktemp -d /tmp/ea-bad-input.XXXXXX)
fixture_pids=()
cleanup() {
  exec 6>&- 8>&- 2>/dev/null
  for p in "${fixture_pids[@]}"; do wait "$p" 2>/dev/null; done
  [[ -n ${EA_BAD_KEEP:-} ]] || rm -rf "$root"
}
trap cleanup EXIT

# ---- the real etcd fixtures (started at the first case that needs them) ----
have_etcd=""
start_fixture() { # NAME [--tls]: fds 6/7 (plain) or 8/9 (tls) talk to it
  local name=$1; shift
  [[ -n ${EA_BAD_ETCD:-} ]] && command -v etcd >/dev/null || return 1
  mkfifo "$root/$name.in" "$root/$name.out"
  EA_ETCD_TMPDIR=$root "$EA_BAD_ETCD" "$@" "$root/$name.env" <"$root/$name.in" \
    >"$root/$name.out" 2>"$root/$name.log" &
  fixture_pids+=($!)
  if [[ $name == etcd ]]; then exec 6>"$root/$name.in" 7<"$root/$name.out"; local rfd=7
  else exec 8>"$root/$name.in" 9<"$root/$name.out"; local rfd=9; fi
  local line=""
  read -r -t 60 line <&"$rfd"
  if [[ $line != ready ]]; then
    echo "fixture $name did not start:" >&2; cat "$root/$name.log" >&2
    return 1
  fi
  # shellcheck disable=SC1090
  source "$root/$name.env"
  return 0
}
need() {
  case $1 in
    etcd)
      if [[ -z $have_etcd ]]; then
        have_etcd=no
        start_fixture etcd && have_etcd=yes && export ETCD=$ETCD_ENDPOINTS
      fi
      [[ $have_etcd == yes ]] ;;
    etcd-tls)
      if [[ -z ${have_tls:-} ]]; then
        have_tls=no
        if start_fixture tls --tls; then
          export TLS_EP=$ETCD_ENDPOINTS TLS_CA=$ETCD_CACERT TLS_CERT=$ETCD_CERT TLS_KEY=$ETCD_KEY
          export TLS_METRICS=$ETCD_METRICS TLS_LOG=$ETCD_LOG
          export TLS="--rdzv-endpoint $TLS_EP --cacert $TLS_CA --cert $TLS_CERT --key $TLS_KEY"
          if setup_auth >"$root/auth.log" 2>&1; then have_tls=yes; else cat "$root/auth.log" >&2; fi
        fi
      fi
      [[ $have_tls == yes ]] ;;
    root) [[ $EUID -eq 0 ]] ;;
    *) return 0 ;;
  esac
}
# Auth on the TLS etcd: root, and `trainer` whose only role may read and write /elastic/sec*
# (the runs of the security cases) — nothing else.
# (not exported: every process would carry them; the case scripts read them from files)
SECRET="pw-$$-$RANDOM$RANDOM-unique"
ROOTPW="rootpw-$$-$RANDOM"
printf '%s' "$SECRET" >"$root/secret"
printf '%s' "$ROOTPW" >"$root/rootpw"
chmod 600 "$root/secret" "$root/rootpw"
setup_auth() {
  local c=(etcdctl --endpoints="$TLS_EP" --cacert="$TLS_CA" --cert="$TLS_CERT" --key="$TLS_KEY")
  "${c[@]}" user add --interactive=false "root:$ROOTPW" &&
  "${c[@]}" role add runner &&
  "${c[@]}" role grant-permission runner --prefix=true readwrite /elastic/sec &&
  "${c[@]}" user add --interactive=false "trainer:$SECRET" &&
  "${c[@]}" user grant-role trainer runner &&
  "${c[@]}" user add --interactive=false "idler:$SECRET" &&
  "${c[@]}" user grant-role idler runner &&
  "${c[@]}" auth enable
}

# ---- what every case's shell gets ----
export AGENT=$EA_AGENT_BIN W=$EA_HELPERS_DIR/ea-testworker KVPUT=${EA_BAD_KVPUT:-}
export FAST="--lease-ttl 1 --settle 0.2 --last-call 0.5 --join-timeout 10 --stop-timeout 2"
# agent ARGS...: the agent without the fixtures' control pipes (so they see EOF at the end);
# agent_exec ARGS... &: the same in the background, $! being the agent itself
agent() { "$AGENT" "$@" 6>&- 7<&- 8>&- 9<&-; }
agent_exec() { exec "$AGENT" "$@" 6>&- 7<&- 8>&- 9<&-; }
# wait_log FILE TEXT [SECS]: until FILE holds TEXT (tail -F follows it with inotify)
wait_log() {
  grep -q -F -- "$2" < <(timeout "${3:-30}" tail -F -n +1 "$1" 2>/dev/null 6>&- 7<&- 8>&- 9<&-)
}
etcdctl_plain() { etcdctl --endpoints="$ETCD" "$@"; }
etcdctl_root() {
  etcdctl --endpoints="$TLS_EP" --cacert="$TLS_CA" --cert="$TLS_CERT" --key="$TLS_KEY" \
    --user="root:$ROOTPW" "$@"
}
etcd_tls_restart() { # restart the TLS member (on its data: it may replay recent logins)
  local ans=""
  echo restart >&8 && read -r -t 60 ans <&9 && [[ $ans == ok ]]
}
# tls_handled CODE METHOD: how many METHOD calls the TLS etcd answered with CODE since it started
tls_handled() {
  curl -sf "$TLS_METRICS" | awk -v k="grpc_code=\"$1\",grpc_method=\"$2\"" \
    '/^grpc_server_handled_total/ && index($0, k) {n += $2} END {print n + 0}'
}
export -f agent agent_exec wait_log etcdctl_plain etcdctl_root etcd_tls_restart tls_handled

# ---- the table ----
declare -a names=() needs=() setups=() runs=() exits=() messages=() checks=()
add_case() {
  [[ -n ${c_name:-} ]] || return 0
  names+=("$c_name"); needs+=("${c_needs:-}"); setups+=("${c_setup:-}"); runs+=("${c_run:-}")
  exits+=("${c_exit:-}"); messages+=("${c_message:-}"); checks+=("${c_check:-}")
  c_name="" c_needs="" c_setup="" c_run="" c_exit="" c_message="" c_check=""
}
c_name=""
while IFS= read -r line || [[ -n $line ]]; do
  [[ $line =~ ^[[:space:]]*# ]] && continue
  if [[ -z ${line//[[:space:]]/} ]]; then add_case; continue; fi
  key=${line%%:*} val=${line#*:}
  val=${val# }
  case $key in
    case) add_case; c_name=$val ;;
    needs) c_needs=$val ;;
    setup) c_setup+="$val"$'\n' ;;
    run) c_run+="$val"$'\n' ;;
    exit) c_exit=$val ;;
    message) c_message+="$val"$'\n' ;;
    check) c_check+="$val"$'\n' ;;
    *) echo "table: unknown field '$key' in case '$c_name'" >&2; exit 2 ;;
  esac
done <"$table"
add_case

pass=0 fail=0 skip=0
printf '%-56s %-5s %-5s %-4s %s\n' CASE WANT GOT MSG RESULT
for i in "${!names[@]}"; do
  name=${names[$i]}
  # shellcheck disable=SC2053
  [[ $name == $only ]] || continue
  if ! need "${needs[$i]}"; then
    if [[ -n ${CI:-} && $CI != 0 && $CI != false ]]; then
      # CI installs etcd and runs as root (tests/helpers/ea_ci.h): a skip would hide the case
      printf '%-56s %-5s %-5s %-4s %s\n' "$name" "${exits[$i]}" - - \
        "FAIL (CI: needs ${needs[$i]})"
      fail=$((fail + 1))
    elif [[ ${needs[$i]} == etcd* ]] && command -v etcd >/dev/null; then
      # etcd is installed, so a fixture that did not start is a failure, never a silent skip
      printf '%-56s %-5s %-5s %-4s %s\n' "$name" "${exits[$i]}" - - \
        "FAIL (the ${needs[$i]} fixture did not start)"
      fail=$((fail + 1))
    else
      printf '%-56s %-5s %-5s %-4s %s\n' "$name" "${exits[$i]}" - - "SKIP (no ${needs[$i]})"
      skip=$((skip + 1))
    fi
    continue
  fi
  export T=$root/case$i
  mkdir -p "$T"
  export RUN=r$i FILE="--rdzv-backend file --state-dir $T/state --run-id r$i"
  start=$EPOCHREALTIME
  # shellcheck disable=SC2016 # the case script expands these, not this one
  {
    echo 'SECRET=$(<"'"$root"'/secret") ROOTPW=$(<"'"$root"'/rootpw")'
    echo 'set -e'
    echo "${setups[$i]}"
    echo 'set +e'
    printf '( %s ) >"$T/out" 2>&1 </dev/null\n' "${runs[$i]}"
    echo 'echo $? >"$T/rc"'
    # each check line alone decides: its exit status, tested here (under `set -e` a failing
    # `! cmd` or non-last `a && b` would not stop the script, and only the last line counted)
    while IFS= read -r c; do
      [[ -n $c ]] || continue
      printf 'if ! { %s
}; then echo "check failed: %s" >&2; exit 1; fi\n' "$c" "${c//[\"\$\`]/.}"
    done <<<"${checks[$i]}"
  } >"$T/case.sh"
  timeout -k 5 120 bash "$T/case.sh" >"$T/case.log" 2>&1 6>&- 7<&-
  case_rc=$?
  ms=$(( (${EPOCHREALTIME/./} - ${start/./}) / 1000 ))
  secs=$((ms / 1000)).$(((ms % 1000) / 100))
  got=$(cat "$T/rc" 2>/dev/null || echo "?")
  msg_ok=yes
  while IFS= read -r m; do
    [[ -n $m ]] && ! grep -q -F -- "$m" "$T/out" 2>/dev/null && msg_ok=no
  done <<<"${messages[$i]}"
  if [[ $got == "${exits[$i]}" && $msg_ok == yes && $case_rc -eq 0 ]]; then
    printf '%-56s %-5s %-5s %-4s %s\n' "$name" "${exits[$i]}" "$got" "$msg_ok" "PASS (${secs}s)"
    pass=$((pass + 1))
  else
    printf '%-56s %-5s %-5s %-4s %s\n' "$name" "${exits[$i]}" "$got" "$msg_ok" \
      "FAIL (${secs}s; setup/check status $case_rc)"
    echo "---- expected message(s): ${messages[$i]}"
    echo "---- output (tail):"; tail -n 15 "$T/out" 2>/dev/null
    echo "---- case script log (tail):"; tail -n 15 "$T/case.log"
    if grep -qs "ERROR: .*Sanitizer" "$T"/*.log "$T/out"; then # the whole report, with its stacks
      echo "---- sanitizer report(s):"
      grep -hs -A60 "ERROR: .*Sanitizer" "$T"/*.log "$T/out" | head -n 200
    fi
    fail=$((fail + 1))
  fi
done
echo "bad_input: $pass passed, $fail failed, $skip skipped"
((fail == 0))
