#!/usr/bin/env bash
# The PyTorch DDP node kill (bench/pytorch_kill.py, elastic-agent only) at the default
# --lease-ttl 10 with the liveness ring on and with --liveness off, side by side (issue 31's
# "PyTorch DDP node kill -> training again": 12.3 s lease-only, target <= 4 s with the ring).
# REPS runs of each, alternating (on, off, off, on, ...: a load change hits both), each with a
# fresh etcd; per run: kill -> the world-3 round committed (the first survivor's "round N ...
# started" line), kill -> the first world-3 worker set up (its "start:" line: after import torch,
# init_process_group and the checkpoint), kill -> training again (a survivor's worker begins an
# epoch at world 3); then the medians, ranges and off/on ratios.
# pytorch_kill.py has no --liveness option: the "off" runs use a wrapper binary that adds it.
# Usage: bench/pytorch_kill_liveness.sh [REPS=3] [--keep DIR]   (BIN=path/to/elastic-agent)
set -euo pipefail
cd "$(dirname "$0")/.."
reps=3 keep=''
while [[ $# -gt 0 ]]; do
  case $1 in
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) [[ $1 =~ ^[0-9]+$ ]] || { echo "pytorch_kill_liveness: unknown option '$1'" >&2; exit 2; }
       reps=$1; shift ;;
  esac
done
bin=$(realpath "${BIN:-build/elastic-agent}")
[[ -x $bin ]] || { ./scripts/build.sh build && bin=$(realpath build/elastic-agent); }
tmp=$(mktemp -d)
trap 'if [[ -n $keep ]]; then mkdir -p "$keep" && cp -r "$tmp"/. "$keep"/; fi; rm -rf "$tmp"' EXIT
printf '#!/bin/sh\nexec %q --liveness off "$@"\n' "$bin" >"$tmp/ea-liveness-off"
chmod +x "$tmp/ea-liveness-off"
echo "pytorch_kill_liveness: $reps runs per mode, --lease-ttl 10, $(nproc) cores;" \
  "$bin ($(git rev-parse --short HEAD 2>/dev/null || echo ?)); load $(cut -d' ' -f1-3 /proc/loadavg)"

: >"$tmp/results"
for rep in $(seq "$reps"); do
  if ((rep % 2)); then order="on off"; else order="off on"; fi
  for mode in $order; do
    b=$bin
    [[ $mode == off ]] && b=$tmp/ea-liveness-off
    out=$tmp/$mode.$rep
    load=$(cut -d' ' -f1 /proc/loadavg)
    bench/pytorch_kill.sh --scenario elastic-agent --lease-ttl 10 --bin "$b" --out "$out" \
      >"$out.txt" 2>&1 || { echo "run $rep $mode: pytorch_kill failed:" >&2; tail -20 "$out.txt" >&2; continue; }
    python3 - "$out.txt" "$mode" "$rep" "$load" >>"$tmp/results" <<'EOF'
import re, sys
text, mode, rep, load = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3], sys.argv[4]
def summ(key):
    m = re.search(re.escape(key) + r"\s+([+-][0-9.]+) s", text)
    return float(m.group(1)) if m else None
commit = None
for m in re.finditer(r"^\s*([+-][0-9.]+)\s+n\d\s+.*INFO: round \d+ .*started.* of world 3", text, re.M):
    t = float(m.group(1))
    if t > 0:
        commit = t
        break
row = [summ("kill -> first survivor reaction"), commit, summ("kill -> world-3 workers started"),
       summ("kill -> world-3 training (epoch begin)")]
print(mode, rep, load, " ".join("nan" if v is None else f"{v:.3f}" for v in row))
EOF
    tail -1 "$tmp/results" | awk '{printf "run %s --liveness %-3s (load %s): kill -> reaction %s s, -> world-3 round %s s, -> world-3 worker set up %s s, -> training again %s s\n", $2, $1, $3, $4, $5, $6, $7}'
  done
done

python3 - "$tmp/results" <<'EOF'
import math, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
cols = ["reaction", "world-3 round committed", "world-3 worker set up", "training again"]
med = {}
print()
for mode in ("on", "off"):
    rs = [[float(x) for x in r[3:]] for r in rows if r[0] == mode]
    if not rs:
        print(f"--liveness {mode}: no successful run")
        continue
    for i, c in enumerate(cols):
        v = [r[i] for r in rs if not math.isnan(r[i])]
        if not v:
            continue
        med[(mode, c)] = statistics.median(v)
        print(f"--liveness {mode:3s} kill -> {c:25s} median {statistics.median(v):6.3f} s "
              f"(range {min(v):.3f}-{max(v):.3f}, n={len(v)})")
for c in cols[1:]:
    if ("on", c) in med and ("off", c) in med and med[("on", c)] > 0:
        print(f"off/on kill -> {c}: {med[('off', c)] / med[('on', c)]:.1f}x "
              f"({med[('off', c)] - med[('on', c)]:.2f} s saved)")
EOF
