#!/usr/bin/env bash
# False evictions by the liveness ring under load (issue 31: "false evictions during 10 min of a
# steady run with every core saturated (stress-ng)", target 0). N agents (real processes, one
# trivial worker each, blocked in a read: a steady run) on one local etcd at --lease-ttl 10 with
# the ring on at its defaults (--liveness-interval 0.2, --liveness-misses 3); once round 1 runs,
# `stress-ng --cpu 0` (a hog on every core, same priority as the agents) for --minutes; then the
# workers are released, the run must succeed, and the agents' events (--events, one shared file)
# and metrics (--http, read before the release) are counted: suspicions, false alarms (the probe
# answered), evictions (the lease revoked: every one is false here, nobody dies), lease losses,
# rejoins, and rounds committed (1 = the run never moved). The 1-minute load average is sampled
# every 10 s. Exit 0 when there was no eviction, no lost lease and only round 1; 1 otherwise.
# Usage: bench/liveness_soak.sh [--minutes M=10] [--agents N=8] [--cpu K=0 (stress-ng --cpu)]
#                               [--keep DIR]   (BIN=path/to/elastic-agent; extra agent options in
#                               SOAK_AGENT_OPTS, e.g. "--liveness off" for the lease-only baseline)
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=10 n=8 cpu=0 keep=
while [[ $# -gt 0 ]]; do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --agents) n=$2; shift 2 ;;
    --cpu) cpu=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "liveness_soak: unknown option '$1' (--help)" >&2; exit 2 ;;
  esac
done
[[ $minutes =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "liveness_soak: --minutes: not a number: '$minutes'" >&2; exit 2; }
if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 3 || n > 64)); then echo "liveness_soak: --agents must be 3..64" >&2; exit 2; fi
[[ $cpu =~ ^[0-9]+$ ]] || { echo "liveness_soak: --cpu: not a number: '$cpu'" >&2; exit 2; }
bin=${BIN:-build/elastic-agent}
[[ -x $bin ]] || ./scripts/build.sh build
for tool in etcd curl stress-ng python3; do
  command -v "$tool" >/dev/null || { echo "liveness_soak: needs $tool (scripts/install-deps.sh --test)" >&2; exit 2; }
done
tmp=$(mktemp -d)
etcd_pid='' stress_pid='' sampler_pid=''
agents=()
cleanup() {
  [[ -n $stress_pid ]] && kill "$stress_pid" 2>/dev/null
  [[ -n $sampler_pid ]] && kill "$sampler_pid" 2>/dev/null
  for p in "${agents[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  if [[ -n $etcd_pid ]]; then kill -9 "$etcd_pid" 2>/dev/null; wait "$etcd_pid" 2>/dev/null || true; fi
  if [[ -n $keep ]]; then mkdir -p "$keep" && cp -r "$tmp"/. "$keep"/ && echo "logs: $keep"; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
# shellcheck source=bench/lib/etcd.sh
source bench/lib/etcd.sh
endpoint=''
etcd_start "$tmp" || { echo "liveness_soak: etcd did not start" >&2; tail "$tmp/etcd.log" >&2; exit 1; }
wait_for() { # CMD...: poll (50 ms) until CMD succeeds, at most 60 s
  for _ in $(seq 1200); do "$@" && return 0; sleep 0.05; done
  return 1
}
started() { [[ $(find "$tmp/t" -name 'w.*' | wc -l) -ge $n ]]; }

echo "liveness_soak: etcd $(etcd --version | head -1 | awk '{print $3}') on $endpoint; $n agents x 1" \
  "worker, --lease-ttl 10, ring defaults ${SOAK_AGENT_OPTS:+(+ $SOAK_AGENT_OPTS)};" \
  "stress-ng --cpu $cpu for $minutes min; $(nproc) cores; $bin ($(git rev-parse --short HEAD 2>/dev/null || echo ?))"
mkdir -p "$tmp/t"
mkfifo "$tmp/go"
worker="touch $tmp/t/w.\$ELASTIC_NODE_ID.\$ELASTIC_ROUND; exec cat $tmp/go > /dev/null"
ports=()
for i in $(seq 0 $((n - 1))); do
  ports+=("$(pick_port)")
  # shellcheck disable=SC2086 # SOAK_AGENT_OPTS is a list of options
  "$bin" --rdzv-endpoint "$endpoint" --run-id soak --node-id "n$i" --min "$n" --max "$n" \
    --settle 1 --stop-timeout 2 --lease-ttl 10 --local-addr 127.0.0.1 --events "$tmp/events.jsonl" \
    --http "127.0.0.1:${ports[$i]}" ${SOAK_AGENT_OPTS:-} -- sh -c "$worker" 2>"$tmp/n$i.log" &
  agents+=($!)
done
wait_for started || { echo "liveness_soak: round 1 did not start" >&2; tail "$tmp"/n*.log >&2; exit 1; }
echo "liveness_soak: round 1 runs on $n agents; load before the stress: $(cut -d' ' -f1-3 /proc/loadavg)"

t_start=$(date +%s)
# stress-ng's --timeout takes whole units (and "0.3m" means no timeout at all): seconds
stress-ng --cpu "$cpu" --timeout "$(awk -v m="$minutes" 'BEGIN {s = int(m * 60); print (s < 1 ? 1 : s)}')s" --quiet &
stress_pid=$!
(while :; do sleep 10; echo "$(($(date +%s) - t_start)) $(cut -d' ' -f1 /proc/loadavg)"; done) >"$tmp/load" &
sampler_pid=$!
# a progress line every minute: the suspicions and rounds so far
while kill -0 "$stress_pid" 2>/dev/null; do
  for _ in $(seq 60); do kill -0 "$stress_pid" 2>/dev/null || break; sleep 1; done
  printf 'liveness_soak: +%4d s load %s; so far: %d suspect, %d evicted, %d round_committed events (one per agent and round)\n' \
    $(($(date +%s) - t_start)) "$(cut -d' ' -f1 /proc/loadavg)" \
    "$(grep -c '"event":"suspect"' "$tmp/events.jsonl" || true)" \
    "$(grep -c '"event":"evicted"' "$tmp/events.jsonl" || true)" \
    "$(grep -c '"event":"round_committed"' "$tmp/events.jsonl" || true)"
done
wait "$stress_pid" || true
stress_pid=
kill "$sampler_pid" 2>/dev/null; wait "$sampler_pid" 2>/dev/null || true; sampler_pid=
t_soak=$(($(date +%s) - t_start))

# the metrics of every agent, still in the soak's process (counters are per process)
: >"$tmp/metrics"
for i in $(seq 0 $((n - 1))); do
  curl -sf "http://127.0.0.1:${ports[$i]}/metrics" >>"$tmp/metrics" || echo "liveness_soak: n$i: no /metrics" >&2
done
exec 3<>"$tmp/go"; exec 3>&- # release the workers: every `cat` sees EOF, the run succeeds
rcs=()
for p in "${agents[@]}"; do
  if wait "$p"; then rcs+=(0); else rcs+=($?); fi
done
agents=()

python3 - "$tmp" "$n" "$t_soak" "${rcs[*]}" <<'EOF'
import json, statistics, sys, re
tmp, n, t_soak, rcs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split()
ev = []
for line in open(f"{tmp}/events.jsonl"):
    try:
        ev.append(json.loads(line))
    except ValueError:
        pass
def count(name):
    return sum(1 for e in ev if e.get("event") == name)
rounds = sorted({e.get("round") for e in ev if e.get("event") == "round_committed"})
metrics = {}
for line in open(f"{tmp}/metrics"):
    m = re.match(r"elastic_agent_(liveness_\w+|rounds_started_total|rejoins_total|lease_renew_failures_total)(\{[^}]*\})? (\S+)", line)
    if m:
        metrics[m.group(1)] = metrics.get(m.group(1), 0) + float(m.group(3))
loads = [float(l.split()[1]) for l in open(f"{tmp}/load") if len(l.split()) == 2]
print(f"\nliveness_soak: {t_soak} s of stress on {n} agents")
if loads:
    print(f"  1-min load average (every 10 s, n={len(loads)}): median {statistics.median(loads):.2f}, "
          f"min {min(loads):.2f}, max {max(loads):.2f}")
print(f"  events: suspect {count('suspect')}, suspect_cleared (false alarms) {count('suspect_cleared')}, "
      f"evicted {count('evicted')}, lease_lost {count('lease_lost')}, rejoined {count('rejoined')}, "
      f"node_lost {count('node_lost')}, worker_exited {count('worker_exited')}")
print(f"  rounds committed: {len(rounds)} ({rounds})")
print("  metrics summed over the agents (before the release): " +
      ", ".join(f"{k} {v:g}" for k, v in sorted(metrics.items())))
for e in ev:
    if e.get("event") in ("suspect", "suspect_cleared", "evicted", "lease_lost", "rejoined", "node_lost"):
        print("   ", json.dumps(e))
print(f"  agents' exit codes: {' '.join(rcs)}")
false_ev = count("evicted") + count("lease_lost")
ok = false_ev == 0 and len(rounds) <= 1 and all(rc == "0" for rc in rcs)
print(f"  FALSE EVICTIONS: {count('evicted')} (lease losses {count('lease_lost')}); "
      f"{'PASS' if ok else 'FAIL'} (target: 0 evictions, 1 round, every agent exit 0)")
sys.exit(0 if ok else 1)
EOF
