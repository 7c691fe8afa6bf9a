# shellcheck shell=bash
# etcd_start DIR: one etcd member on free loopback ports with its data in DIR/etcd.data and its log
# in DIR/etcd.log. Sets etcd_pid, endpoint (127.0.0.1:PORT), mport (metrics port); returns 1 when
# it did not come up. etcd_stop kills it. Extra etcd flags may be given after DIR.
port_free() { [[ -z $(ss -Htan "sport = :$1" 2>/dev/null) ]]; }
pick_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    port_free "$p" && { echo "$p"; return; }
  done
}
etcd_start() {
  local dir=$1 cport pport attempt
  shift
  etcd_pid=
  for attempt in 1 2 3 4 5; do
    cport=$(pick_port) pport=$(pick_port) mport=$(pick_port)
    [[ $cport != "$pport" && $pport != "$mport" && $cport != "$mport" ]] || continue
    rm -rf "$dir/etcd.data"
    etcd --name bench --data-dir "$dir/etcd.data" \
      --listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport" \
      --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
      --initial-cluster "bench=http://127.0.0.1:$pport" --listen-metrics-urls "http://127.0.0.1:$mport" \
      --logger zap --log-outputs stderr "$@" >"$dir/etcd.log" 2>&1 &
    etcd_pid=$!
    for _ in $(seq 200); do # up to 10 s for /health
      curl -sf "http://127.0.0.1:$mport/health" 2>/dev/null | grep -q '"health":"true"' && break 2
      kill -0 "$etcd_pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -9 "$etcd_pid" 2>/dev/null; wait "$etcd_pid" 2>/dev/null || true; etcd_pid=
  done
  [[ -n $etcd_pid ]] || return 1
  endpoint=127.0.0.1:$cport
}
etcd_stop() {
  if [[ -n ${etcd_pid:-} ]]; then
    kill -9 "$etcd_pid" 2>/dev/null || true
    wait "$etcd_pid" 2>/dev/null || true
  fi
  etcd_pid=
}
