#!/usr/bin/env bash
# Side-by-side benchmark: elastic-agent vs torchrun, same machine, same run, same trivial worker.
#
#   bench/run.sh [--quick] [--phases cold,events,steady,scale] [--configs ea-file,ea-etcd,...]
#                [--cold-n 2,4] [--scale-n 100,250] [--scale-lease-ttl SEC] [--tag NAME]
# (--tag names the outputs bench/plots/*-NAME.*; use one for partial runs so they do not
# overwrite the quick/full results)
#
# elastic-agent backends: file, etcd (gRPC), etcd-gateway (HTTP; left out with a note if it does
# not work in this build). torchrun (Debian python3-torch, through bench/torchrun_launcher.py,
# `--no_python`): c10d, and etcd-v2 on a local etcd started with --enable-v2. Measures
#   1. cold rendezvous: launch of N agents -> last worker started (N = 2..32; --quick 2, 4, 8)
#   2. one worker fails -> every node's replacement started (N = 4, 8; torchrun at its default
#      --monitor_interval 5 and at 0.1)
#   3. SIGKILL one node's agent and workers -> survivors restarted (torchrun: "not within 60 s",
#      --quick 20 s)
#   4. SIGTERM one agent -> survivors restarted
#   5. footprint: agent max RSS and CPU over 60 s of steady running (--quick 15 s)
#   6. store load from etcd's /metrics: per agent per rendezvous, per agent per minute at steady state
#   7. scale: 100/250/500 elastic-agent nodes on one etcd (--quick: 100), then N -> N-1
# Every etcd runs on free loopback ports with a temp data dir. Output: the markdown tables on
# stdout and in bench/plots/report-{quick,full}.md, CSVs and PNG plots in bench/plots/, progress
# on stderr. Everything started carries a per-run token in its environment; the trap kills what
# is left and the script checks with ps that nothing is.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

orig_args="$*"
quick=0
tag_opt=
args=()
while (($#)); do
  case $1 in
    --quick) quick=1; args+=(--quick) ;;
    --phases|--configs|--scale-n|--scale-lease-ttl|--cold-n) args+=("$1" "$2"); shift ;;
    --tag) tag_opt=$2; args+=("$1" "$2"); shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
tag=full; ((quick)) && tag=quick
[[ -n $tag_opt ]] && tag=$tag_opt

# --- what it needs -------------------------------------------------------------------------------
need_pkgs=()
command -v etcd >/dev/null || need_pkgs+=(etcd-server)
command -v gnuplot >/dev/null || need_pkgs+=(gnuplot-nox)
command -v curl >/dev/null || need_pkgs+=(curl)
command -v cc >/dev/null || need_pkgs+=(gcc)
/usr/bin/python3 -c 'import torch' 2>/dev/null || need_pkgs+=(python3-torch)
/usr/bin/python3 -c 'import etcd' 2>/dev/null || need_pkgs+=(python3-etcd)
if ((${#need_pkgs[@]})); then
  sudo=; [[ $(id -u) -ne 0 ]] && sudo=sudo
  echo "run.sh: installing ${need_pkgs[*]}" >&2
  $sudo apt-get update -qq
  # etcd-server's package would start a system etcd: keep package scripts from starting services
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
    $sudo chmod +x /usr/sbin/policy-rc.d
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
    $sudo rm -f /usr/sbin/policy-rc.d
  else
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
  fi
fi
bin=${BIN:-build/elastic-agent}
[[ -x $bin ]] || ./scripts/build.sh build

work=$(mktemp -d /tmp/ea-bench.XXXXXX)
BENCH_TOKEN="ea-bench-$$-$(date +%s%N)"
export BENCH_TOKEN
bench_pid=
leftovers() { # pids of processes (other than this shell) whose environment carries the token
  local p
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [[ $p == "$$" || $p == "$BASHPID" ]] && continue
    grep -qszx -- "BENCH_TOKEN=$BENCH_TOKEN" "/proc/$p/environ" && echo "$p"
  done
  return 0
}
# shellcheck disable=SC2317 # invoked by the trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $bench_pid ]] && kill -0 "$bench_pid" 2>/dev/null; then
    kill -TERM "$bench_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$bench_pid" 2>/dev/null || break; sleep 0.1; done
  fi
  local left
  for _ in 1 2 3 4 5; do
    left=$(leftovers)
    [[ -z $left ]] && break
    # shellcheck disable=SC2086
    kill -9 $left 2>/dev/null || true
    sleep 0.2
  done
  left=$(leftovers)
  if [[ -n $left ]]; then
    echo "run.sh: processes left behind: $left" >&2
    rc=1
  fi
  if [[ -n ${BENCH_KEEP:-} ]]; then echo "run.sh: kept $work" >&2; else rm -rf "$work"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cc -O2 -Wall -o "$work/worker" bench/lib/worker.c
machine="$(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), \
$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM, $(sed -n 's/^PRETTY_NAME="\(.*\)"/\1/p' /etc/os-release), \
load average $(cut -d' ' -f1-3 /proc/loadavg) at start; etcd $(etcd --version | awk 'NR==1 {print $3}'), \
torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null) on Python $(/usr/bin/python3 -c 'import sys; print(sys.version.split()[0])'), \
elastic-agent $("$bin" --version 2>&1 | head -1) ($(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null && git diff --cached --quiet 2>/dev/null || echo '+uncommitted'))"
mkdir -p bench/plots
limit=$((quick ? 420 : 1500)) # the bench bounds itself; this is the backstop
# (python in the background so the trap can run while it is going)
timeout --signal=TERM --kill-after=30 "$limit" /usr/bin/python3 bench/lib/bench.py "${args[@]}" \
  --agent "$root/$bin" --worker "$work/worker" --workdir "$work" --outdir bench/plots \
  --cmdline "bench/run.sh${orig_args:+ $orig_args}" --machine "$machine" &
bench_pid=$!
rc=0
wait "$bench_pid" || rc=$?
bench_pid=

./bench/lib/plots.sh "$tag" || echo "run.sh: plotting failed" >&2
left=$(leftovers)
[[ -z $left ]] || { echo "run.sh: processes still carrying the token: $left" >&2; }
echo "run.sh: processes left behind by the benchmark: $(echo "$left" | grep -c . || true)" >&2
exit "$rc"
