#!/usr/bin/env bash
# Bytes on the wire per node per round (issue 30): etcd in one network namespace, rdzv-sim's
# nodes in another, joined by a veth pair, so that everything the nodes receive from the store —
# gRPC, HTTP/2 and TCP framing, keepalive replies, ACKs — crosses the sim side's interface;
# rdzv-sim reads that interface's rx_bytes around each kill round (and over 5 s of a steady
# round) and etcd's own etcd_network_client_grpc_sent_bytes_total for comparison. Realistic
# names (`<hostname>-<pid>`, EC2 hostnames), unrelated keys written between joins (--noise), the
# liveness ring on (its links stay on the sim side's loopback: not store traffic).
# Needs root (ip netns). Usage: bench/wire_bytes.sh [N] (default 1000); env TTL (10), PROCS (8),
#        NOISE (3), BUILD (build), EXTRA (more rdzv-sim flags)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000} ttl=${TTL:-10} procs=${PROCS:-8} noise=${NOISE:-3} build=${BUILD:-build}
id=$$ ne=eawE$$ ns=eawS$$ ve=weE$$ vs=weS$$
tmp=$(mktemp -d)
etcd_pid=
cleanup() {
  [[ -n $etcd_pid ]] && { kill -9 "$etcd_pid" 2>/dev/null || true; wait "$etcd_pid" 2>/dev/null || true; }
  ip netns del "$ne" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$ne"
ip netns add "$ns"
ip link add "$ve" type veth peer name "$vs"
ip link set "$ve" netns "$ne"
ip link set "$vs" netns "$ns"
ip -n "$ne" addr add 10.213.$((id % 250)).1/24 dev "$ve"
ip -n "$ns" addr add 10.213.$((id % 250)).2/24 dev "$vs"
for x in "$ne:$ve" "$ns:$vs"; do
  ip -n "${x%%:*}" link set lo up
  ip -n "${x%%:*}" link set "${x##*:}" up
done
ip netns exec "$ns" sysctl -qw net.ipv4.ip_local_port_range="10000 65000"
eaddr=10.213.$((id % 250)).1
ip netns exec "$ne" etcd --name wire --data-dir "$tmp/etcd.data" \
  --listen-client-urls "http://$eaddr:2379" --advertise-client-urls "http://$eaddr:2379" \
  --listen-peer-urls "http://127.0.0.1:2380" --initial-advertise-peer-urls "http://127.0.0.1:2380" \
  --initial-cluster "wire=http://127.0.0.1:2380" --listen-metrics-urls "http://$eaddr:2381" \
  --quota-backend-bytes 8589934592 --logger zap --log-outputs stderr >"$tmp/etcd.log" 2>&1 &
etcd_pid=$!
for _ in $(seq 200); do
  ip netns exec "$ns" curl -sf "http://$eaddr:2381/health" 2>/dev/null | grep -q '"health":"true"' && break
  sleep 0.05
done
echo "# $(date -u +%F) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); N=$n TTL=$ttl procs=$procs noise=0..$noise keys a join; commit $(git rev-parse --short HEAD)"
# shellcheck disable=SC2086
ip netns exec "$ns" bash -c "ulimit -n 65536 2>/dev/null; exec $build/rdzv-sim --endpoints $eaddr:2379 \
  --nodes $n --procs $procs --ttl $ttl --timeout 600 --ring --names real --noise $noise \
  --rx-iface $vs --metrics-url http://$eaddr:2381/metrics --kill-one ${EXTRA:-}" 2>"$tmp/sim.err" |
  tee "$tmp/out" | grep -E 'wire|grpc|bytes_per_node|to_all_ready|ring_|lease|^nodes|cpu' || true
grep -v '^$' "$tmp/sim.err" | sort | uniq -c | sort -rn | head -5 >&2
