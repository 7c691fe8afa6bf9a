#!/usr/bin/env bash
# bench/rdzv_sim_once.sh BIN ARGS...: one rdzv-sim run (BIN, e.g. build/rdzv-sim) on a fresh
# single-member etcd on free loopback ports (bench/lib/etcd.sh), its key=value lines on stdout;
# the simulator's stderr in $RDZV_SIM_ERR (default: dropped) — RDZV_SIM_VERBOSE=1 makes it
# every node's ring log and the coordinator's rounds, with times. Exit: rdzv-sim's.
set -u
bin=$1
shift
tmp=$(mktemp -d)
source "$(dirname "$0")/lib/etcd.sh"
trap 'etcd_stop; rm -rf "$tmp"' EXIT
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
etcd_start "$tmp" --quota-backend-bytes 8589934592 || { echo "etcd did not start" >&2; exit 1; }
"$bin" --endpoints "$endpoint" "$@" 2>"${RDZV_SIM_ERR:-/dev/null}"
