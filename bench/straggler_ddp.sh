#!/usr/bin/env bash
# Issue 40's straggler targets on real PyTorch DDP (gloo, CPU): a real etcd on free loopback
# ports, agents (build/elastic-agent, --nproc-per-node 1) running bench/straggler_ddp.py (an MLP
# on a fixed batch, one thread, timed with elastic_agent and beaten each step).
#
#   bench/straggler_ddp.sh detect [opts]  4 nodes, n2 slowed 1.5x from the start: seconds from
#                                         training start (first step) to the `straggler` event,
#                                         and the node named
#   bench/straggler_ddp.sh even [opts]    4 even nodes for --seconds (600): straggler reports
#   bench/straggler_ddp.sh evict [opts]   5 agents, --nnodes 4 (one spare waits),
#                                         --straggler-action evict, n2 slowed: n2 out, the spare
#                                         in, steps/s after the swap against the even phase's
# opts: --seconds S (even: 600)  --timing hook|docs (the worker's timing, bench/straggler_ddp.py)
#       --stress N (stress-ng --cpu N beside the run)  --slow F (1.5)  --quota-pct P (n2's CPU
#       cap in % of one CPU; default: calibrated, below)  --width W (256)  --batch B (64)
#       --out DIR  --keep
#
# The slow-down: n2's agent is started inside a cgroup v1 cpu controller group
# (/sys/fs/cgroup/cpu/ea-strag-PID, cpu.cfs_period_us 20000, cpu.cfs_quota_us from the cap), so
# its worker inherits it. The cap is calibrated first (detect, evict): 4 even nodes for 30 s;
# n2's worker's CPU seconds per step over its median compute time is its CPU rate while it
# computes; the cap is that over F. The slow-down reached is printed (n2's median compute time
# over the others', from the workers' logs). Needs root, etcd, Debian's python3-torch
# (/usr/bin/python3); stress-ng for --stress. Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode=${1:-}
[[ $mode == detect || $mode == even || $mode == evict ]] || { sed -n 2,26p "$0" >&2; exit 2; }
shift
seconds= timing=hook stress=0 slow=1.5 quota_pct= width=256 batch=64 out= keep=0
while (($#)); do
  case $1 in
    --seconds) seconds=$2; shift ;;
    --timing) timing=$2; shift ;;
    --stress) stress=$2; shift ;;
    --slow) slow=$2; shift ;;
    --quota-pct) quota_pct=$2; shift ;;
    --width) width=$2; shift ;;
    --batch) batch=$2; shift ;;
    --out) out=$2; shift ;;
    --keep) keep=1 ;;
    *) echo "straggler_ddp: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
bin=${BIN:-build/elastic-agent}
[[ -x $bin ]] || { echo "straggler_ddp: build $bin first (./scripts/build.sh build)" >&2; exit 2; }
/usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' ||
  { echo "straggler_ddp: needs python3-torch for /usr/bin/python3" >&2; exit 2; }
source bench/lib/etcd.sh
[[ -n $out ]] || out=$(mktemp -d /tmp/straggler_ddp.XXXXXX)
mkdir -p "$out"
cg=/sys/fs/cgroup/cpu/ea-strag-$$
agents=() stress_pid=
cleanup() {
  local p
  for p in "${agents[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${agents[@]}"; do wait "$p" 2>/dev/null || true; done
  [[ -n $stress_pid ]] && { kill -TERM "$stress_pid" 2>/dev/null || true; wait "$stress_pid" 2>/dev/null || true; }
  etcd_stop
  if [[ -d $cg ]]; then
    while read -r p; do echo "$p" >/sys/fs/cgroup/cpu/cgroup.procs 2>/dev/null || true; done <"$cg/cgroup.procs"
    rmdir "$cg" 2>/dev/null || true
  fi
  ((keep)) || [[ $out != /tmp/straggler_ddp.* ]] || rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

etcd_start "$out" || { echo "straggler_ddp: etcd did not start" >&2; exit 1; }
if ((stress > 0)); then
  stress-ng --cpu "$stress" --timeout 0 >/dev/null 2>&1 &
  stress_pid=$!
fi
now() { date +%s.%N; }
wait_for() { # SECONDS CMD...: poll every 0.5 s
  local until=$(($(date +%s) + $1))
  shift
  while (($(date +%s) < until)); do "$@" && return 0; sleep 0.5; done
  return 1
}

# start_agent DIR RUN NODE SLOWED EXTRA...: one agent (in the cgroup when SLOWED is 1)
start_agent() {
  local d=$1 run=$2 node=$3 slowed=$4
  shift 4
  local pre=()
  ((slowed)) && pre=(sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg")
  "${pre[@]}" "$bin" --rdzv-endpoint "$endpoint" --run-id "$run" --node-id "$node" \
    --nproc-per-node 1 --local-addr 127.0.0.1 --lease-ttl 10 --stop-timeout 5 \
    --events "$d/events.jsonl" "$@" \
    -- /usr/bin/python3 "$root/bench/straggler_ddp.py" --out "$d" --timing "$timing" \
    --width "$width" --batch "$batch" 2>"$d/$node.log" &
  agents+=($!)
}
stop_agents() {
  local p
  for p in "${agents[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${agents[@]}"; do wait "$p" 2>/dev/null || true; done
  agents=()
}
steps_of() { cat "$1"/steps."$2".* 2>/dev/null | wc -l; }
has_steps() { (($(steps_of "$1" "$2") >= $3)); }
has_step() { [[ -n $(first_step_time "$1") ]]; }
first_step_time() { cat "$1"/steps.* 2>/dev/null | awk 'NR==1 || $2 < m {m = $2} END {if (NR) printf "%.3f", m}'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }

# analyse DIR FROM TO: per node, steps/s (its log's steps in [FROM,TO)) and median compute time
analyse() {
  /usr/bin/python3 - "$@" <<'EOF'
import glob, os, statistics, sys
d, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
rows = {}
for f in glob.glob(os.path.join(d, "steps.*")):
    node = f.split("steps.", 1)[1].rsplit(".", 1)[0]
    for line in open(f):
        s, t, c, w = line.split()
        if t0 <= float(t) < t1:
            rows.setdefault(node, []).append(float(c))
for node in sorted(rows):
    c = rows[node]
    print("%s steps %d rate %.3f/s compute median %.4f s" % (node, len(c), len(c) / (t1 - t0),
          statistics.median(c)))
EOF
}
# scores DIR FROM TO: the scoring redone offline from the workers' logs (each node: the median of
# its last 16 s of compute times, every 5 s, over the median of the other nodes'): each node's
# highest score and its longest stretch at or above 1.3 (the agent samples once a second)
scores() {
  /usr/bin/python3 - "$@" <<'PY'
import glob, os, statistics, sys
d, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
rows = {}
for f in glob.glob(os.path.join(d, "steps.*")):
    node = f.split("steps.", 1)[1].rsplit(".", 1)[0]
    for line in open(f):
        s, t, c, w = line.split()
        if t0 <= float(t) < t1:
            rows.setdefault(node, []).append((float(t), float(c)))
best = {n: 0.0 for n in rows}
run = {n: 0.0 for n in rows}
longest = {n: 0.0 for n in rows}
t = t0 + 16
while t < t1:
    med = {}
    for n, r in rows.items():
        v = [c for (u, c) in r if t - 16 <= u < t]
        if v:
            med[n] = statistics.median(v)
    for n in med:
        o = [med[m] for m in med if m != n]
        if not o:
            continue
        sc = med[n] / statistics.median(o)
        best[n] = max(best[n], sc)
        run[n] = run[n] + 5 if sc >= 1.3 else 0
        longest[n] = max(longest[n], run[n])
    t += 5
for n in sorted(rows):
    print("%s highest score %.2f, longest stretch >= 1.3: %.0f s" % (n, best[n], longest[n]))
PY
}
# rate DIR FROM TO NODE: steps/s of NODE's worker in [FROM, TO)
rate() { analyse "$@" | awk -v n="$4" '$1 == n {print $5}' | sed 's,/s,,'; }
median_c() { analyse "$1" "$2" "$3" | awk -v n="$4" '$1 == n {print $8}'; }
others_c() { analyse "$1" "$2" "$3" | awk -v n="$4" '$1 != n {print $8}' | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# calibrate: 4 even nodes for 30 s of training; sets quota_pct (n2's cap) and even_rate
calibrate() {
  local d=$out/calibrate
  mkdir -p "$d"
  start_agent "$d" cal n0 0 --nnodes 4
  wait_for 30 grep -q "joined run" "$d/n0.log" || { echo "n0 did not join" >&2; tail -3 "$d/n0.log" >&2; exit 1; }
  for i in 1 2 3; do start_agent "$d" cal "n$i" 0 --nnodes 4; done
  wait_for 120 test -s "$d/pid.n2" || { echo "calibrate: no worker on n2" >&2; tail -5 "$d"/n*.log >&2; exit 1; }
  wait_for 60 has_steps "$d" n2 10 || { echo "calibrate: n2 made no 10 steps" >&2; exit 1; }
  local pid t0 t1 k0 k1 s0 s1 hz
  pid=$(cat "$d/pid.n2") hz=$(getconf CLK_TCK)
  sleep 5
  t0=$(now) k0=$(cpu_ticks "$pid") s0=$(steps_of "$d" n2)
  sleep 25
  t1=$(now) k1=$(cpu_ticks "$pid") s1=$(steps_of "$d" n2)
  stop_agents
  local c
  c=$(median_c "$d" "$t0" "$t1" n2)
  even_rate=$(rate "$d" "$t0" "$t1" n0)
  echo "calibrate: n2: $((s1 - s0)) steps, $(((k1 - k0) * 1000 / hz)) ms CPU, compute median $c s; steps/s (n0) $even_rate"
  analyse "$d" "$t0" "$t1" | sed 's/^/calibrate: /'
  if [[ -z $quota_pct ]]; then
    quota_pct=$(awk -v k=$((k1 - k0)) -v hz="$hz" -v n=$((s1 - s0)) -v c="$c" -v f="$slow" \
      'BEGIN {printf "%.1f", 100 * (k / hz / n) / c / f}')
    echo "calibrate: n2 CPU rate while computing ~$(awk -v q="$quota_pct" -v f="$slow" 'BEGIN {printf "%.1f", q * f}') % of one CPU: cap $quota_pct % (1/$slow)"
  fi
}
make_cgroup() {
  mkdir -p "$cg"
  echo 20000 >"$cg/cpu.cfs_period_us"
  awk -v q="$quota_pct" 'BEGIN {printf "%d\n", q * 200}' >"$cg/cpu.cfs_quota_us"
  echo "cgroup: $cg cpu.cfs_quota_us $(cat "$cg/cpu.cfs_quota_us") / cpu.cfs_period_us 20000 ($quota_pct % of one CPU)"
}
count_ev() { grep -c "\"event\":\"$2\"" "$1/events.jsonl" 2>/dev/null || true; }
ev_time() { # DIR EVENT: the first EVENT's time as unix seconds
  grep -m1 "\"event\":\"$2\"" "$1/events.jsonl" | /usr/bin/python3 -c '
import json, sys, datetime
t = json.loads(sys.stdin.readline())["time"]
print("%.3f" % datetime.datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp())'
}

echo "straggler_ddp $mode: out $out, timing $timing, width $width batch $batch, stress-ng --cpu $stress, load $(cut -d' ' -f1-3 /proc/loadavg)"
case $mode in
even)
  : "${seconds:=600}"
  d=$out/even
  mkdir -p "$d"
  start_agent "$d" even n0 0 --nnodes 4
  wait_for 30 grep -q "joined run" "$d/n0.log" || { echo "n0 did not join" >&2; tail -3 "$d/n0.log" >&2; exit 1; }
  for i in 1 2 3; do start_agent "$d" even "n$i" 0 --nnodes 4; done
  wait_for 120 has_step "$d" || { echo "even: no step" >&2; tail -5 "$d"/n*.log >&2; exit 1; }
  t0=$(first_step_time "$d")
  echo "even: training from $(date -d @"${t0%.*}" -u +%T); running $seconds s"
  sleep "$seconds"
  t1=$(now)
  reports=$(count_ev "$d" straggler)
  stop_agents
  analyse "$d" "$t0" "$t1" | sed 's/^/even: /'
  scores "$d" "$t0" "$t1" | sed 's/^/even: offline: /'
  echo "even: $seconds s of 4 even nodes: straggler reports $reports; load $(cut -d' ' -f1-3 /proc/loadavg)"
  grep -h "straggler" "$d"/n*.log | sed 's/^/even: /' || true
  ;;
detect)
  calibrate
  make_cgroup
  d=$out/detect
  mkdir -p "$d"
  : "${seconds:=120}"
  start_agent "$d" det n0 0 --nnodes 4
  wait_for 30 grep -q "joined run" "$d/n0.log" || { echo "n0 did not join" >&2; tail -3 "$d/n0.log" >&2; exit 1; }
  for i in 1 2 3; do start_agent "$d" det "n$i" $((i == 2)) --nnodes 4; done
  wait_for 120 has_step "$d" || { echo "detect: no step" >&2; tail -5 "$d"/n*.log >&2; exit 1; }
  t0=$(first_step_time "$d")
  if wait_for "$seconds" grep -q '"event":"straggler"' "$d/events.jsonl"; then
    te=$(ev_time "$d" straggler)
    named=$(grep -m1 '"event":"straggler"' "$d/events.jsonl" | sed 's/.*"straggler_node":"\([^"]*\)".*/\1/')
    echo "detect: straggler '$named' named $(awk -v a="$t0" -v b="$te" 'BEGIN {printf "%.1f", b - a}') s after the first step (goal: n2, <= 30 s)"
    grep -m1 '"event":"straggler"' "$d/events.jsonl" | sed 's/^/detect: /'
  else
    te=$(now)
    echo "detect: no straggler named within $seconds s of the first step"
  fi
  analyse "$d" "$t0" "$te" | sed 's/^/detect: /'
  echo "detect: slow-down reached: n2 $(median_c "$d" "$t0" "$te" n2) s against $(others_c "$d" "$t0" "$te" n2) s (the others' median)"
  sleep 10
  echo "detect: straggler reports $(count_ev "$d" straggler)"
  ;;
evict)
  calibrate
  make_cgroup
  d=$out/evict
  mkdir -p "$d"
  : "${seconds:=60}"
  ex=(--nnodes 4 --straggler-action evict --max-restarts 3)
  start_agent "$d" ev n0 0 "${ex[@]}"
  wait_for 30 grep -q "joined run" "$d/n0.log" || { echo "n0 did not join" >&2; tail -3 "$d/n0.log" >&2; exit 1; }
  for i in 1 2 3; do start_agent "$d" ev "n$i" $((i == 2)) "${ex[@]}"; done
  wait_for 120 has_step "$d" || { echo "evict: no step" >&2; tail -5 "$d"/n*.log >&2; exit 1; }
  t0=$(first_step_time "$d")
  start_agent "$d" ev n4 0 "${ex[@]}" # the spare: the round is full
  wait_for 180 grep -q '"event":"straggler_evict"' "$d/events.jsonl" || { echo "evict: no eviction within 180 s" >&2; tail -5 "$d"/n*.log >&2; exit 1; }
  te=$(ev_time "$d" straggler_evict)
  named=$(grep -m1 '"event":"straggler_evict"' "$d/events.jsonl" | sed 's/.*"straggler_node":"\([^"]*\)".*/\1/')
  echo "evict: '$named' evicted $(awk -v a="$t0" -v b="$te" 'BEGIN {printf "%.1f", b - a}') s after the first step"
  slow_rate=$(rate "$d" "$t0" "$te" n0)
  echo "evict: slow-down reached: n2 $(median_c "$d" "$t0" "$te" n2) s against $(others_c "$d" "$t0" "$te" n2) s (the others' median)"
  wait_for 120 test -s "$d/pid.n4" || { echo "evict: the spare n4 never ran a worker" >&2; tail -5 "$d"/n*.log >&2; exit 1; }
  wait_for 120 has_steps "$d" n4 1 || { echo "evict: n4 made no step" >&2; exit 1; }
  ts=$(awk 'NR == 1 {print $2}' "$d"/steps.n4.*)
  echo "evict: the spare n4's first step $(awk -v a="$te" -v b="$ts" 'BEGIN {printf "%.1f", b - a}') s after the eviction"
  sleep 10
  a0=$(now)
  sleep "$seconds"
  a1=$(now)
  after_rate=$(rate "$d" "$a0" "$a1" n0)
  echo "evict: steps/s (n0): even $even_rate (calibration), slowed $slow_rate (before the eviction), after the swap $after_rate ($seconds s from 10 s after n4's first step)"
  echo "evict: after/even $(awk -v a="$after_rate" -v e="$even_rate" 'BEGIN {printf "%.3f", a / e}') (goal >= 0.90)"
  analyse "$d" "$a0" "$a1" | sed 's/^/evict: after: /'
  grep -h '"event":"\(straggler\|straggler_evict\|evicted\|workers_started\)"' "$d/events.jsonl" |
    sed 's/^/evict: /' | cut -c1-220
  ;;
esac
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
