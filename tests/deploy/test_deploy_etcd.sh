#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# deploy/k8s's locked etcd, for real, on loopback: three etcd members started with the
# StatefulSet's own ETCD_* settings (TLS on client and peer ports, client and peer certificate
# auth, peers only with CN etcd-peer) and the certificates of deploy/k8s/certs/make-certs.sh
# (a CA made here), then deploy/k8s/base/etcd-auth.sh run as the etcd-auth Job runs it (twice:
# it is idempotent). Then:
#   - a client without a certificate, or with one of another CA, is refused; the peer port
#     refuses a client certificate that is not the peer's
#   - the submit user may queue a run (the pool's queue/ and next) and read, but not write a
#     run's state key (nor anything else); the daemon user may; neither outside the prefix
#   - `elastic-agent serve` with the DaemonSet's configuration (the ConfigMap's ELASTIC_*, its
#     client certificate and allowed-signers volumes) becomes healthy; `submit --wait` as the
#     submit user runs a run on it to success; `cancel` as the submit user is refused (it writes
#     the run's state), as the daemon user it closes the run
# Usage: test_deploy_etcd.sh SOURCE_DIR ELASTIC_AGENT_BINARY
set -uo pipefail

src=$(cd "${1:?usage: test_deploy_etcd.sh SOURCE_DIR ELASTIC_AGENT_BINARY}" && pwd)
bin=$(realpath "${2:?usage: test_deploy_etcd.sh SOURCE_DIR ELASTIC_AGENT_BINARY}")
here=$src/tests/deploy
tmp=$(mktemp -d)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

npass=0 nfail=0
pass() { npass=$((npass + 1)); echo "PASS  $*"; }
fail() { nfail=$((nfail + 1)); echo "FAIL  $*"; }
indent() { sed 's/^/      /'; }
# expect NAME WANT(0|1) COMMAND...: PASS when COMMAND succeeds (WANT 0) or fails (WANT 1)
expect() {
  local name=$1 want=$2 rc
  shift 2
  "$@" >"$tmp/out" 2>&1
  rc=$?
  if { ((want == 0)) && ((rc == 0)); } || { ((want != 0)) && ((rc != 0)); }; then
    pass "$name"
  else
    indent <"$tmp/out"
    fail "$name (exit $rc)"
  fi
}
# wait_for SECONDS COMMAND...: until COMMAND succeeds (polled every 0.1 s) or the deadline
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
for t in etcd etcdctl openssl kubectl curl python3; do
  command -v "$t" >/dev/null || { echo "test_deploy_etcd: $t is missing (scripts/install-deps.sh --test)"; exit 1; }
done

# ---- the certificates and the manifests' etcd settings ----------------------------------------
certs=$tmp/certs
"$src/deploy/k8s/certs/make-certs.sh" --out "$certs" 2>/dev/null || { echo "make-certs.sh failed"; exit 1; }
"$src/deploy/k8s/certs/make-certs.sh" --out "$tmp/foreign" 2>/dev/null || { echo "make-certs.sh failed"; exit 1; }
kubectl kustomize "$src/deploy/k8s/base" >"$tmp/base.yaml" 2>/dev/null || { echo "kustomize failed"; exit 1; }
python3 "$here/check_deploy.py" etcd-env "$tmp/base.yaml" --secrets "$certs/secrets.yaml" \
  --volumes-out "$tmp/etcd-volumes" --env-out "$tmp/etcd.env" || { echo "etcd-env failed"; exit 1; }
mapfile -d '' manifest_env <"$tmp/etcd.env"
scheme() { # VAR: the URL scheme the manifest gives VAR
  local kv
  for kv in "${manifest_env[@]}"; do
    [[ $kv == "$1="* ]] && { kv=${kv#*=}; echo "${kv%%://*}"; return; }
  done
}
cs=$(scheme ETCD_LISTEN_CLIENT_URLS) ps=$(scheme ETCD_LISTEN_PEER_URLS) ms=$(scheme ETCD_LISTEN_METRICS_URLS)
if [[ $cs == https && $ps == https ]]; then
  pass "the StatefulSet's etcd listens https on client and peer ports"
else
  fail "the StatefulSet's etcd listens https on client and peer ports ($cs, $ps)"
fi

# ---- three members on loopback -----------------------------------------------------------------
n=3
cluster="" endpoints="" agent_endpoints=""
for ((i = 0; i < n; i++)); do
  cport[i]=$(free_port) pport[i]=$(free_port) mport[i]=$(free_port)
  cluster+="${cluster:+,}m$i=$ps://127.0.0.1:${pport[i]}"
  endpoints+="${endpoints:+,}https://127.0.0.1:${cport[i]}"
  agent_endpoints+="${agent_endpoints:+,}127.0.0.1:${cport[i]}"
done
for ((i = 0; i < n; i++)); do
  env=()
  for kv in "${manifest_env[@]}"; do
    case ${kv%%=*} in
      ETCD_NAME | ETCD_DATA_DIR | ETCD_INITIAL_CLUSTER | ETCD_*_URLS) ;; # this host's
      *) env+=("$kv") ;;
    esac
  done
  env+=("ETCD_NAME=m$i" "ETCD_DATA_DIR=$tmp/data$i" "ETCD_INITIAL_CLUSTER=$cluster"
        "ETCD_LISTEN_CLIENT_URLS=$cs://127.0.0.1:${cport[i]}"
        "ETCD_ADVERTISE_CLIENT_URLS=$cs://127.0.0.1:${cport[i]}"
        "ETCD_LISTEN_PEER_URLS=$ps://127.0.0.1:${pport[i]}"
        "ETCD_INITIAL_ADVERTISE_PEER_URLS=$ps://127.0.0.1:${pport[i]}"
        "ETCD_LISTEN_METRICS_URLS=$ms://127.0.0.1:${mport[i]}")
  env -i PATH="$PATH" "${env[@]}" etcd >"$tmp/etcd$i.log" 2>&1 &
  pids+=($!)
done
healthy() { curl -sf -m 2 "http://127.0.0.1:$1/health" | grep -q '"health":"true"'; }
ok=1
for ((i = 0; i < n; i++)); do
  wait_for 60 healthy "${mport[i]}" || { ok=0; tail -5 "$tmp/etcd$i.log" | indent; }
done
if ((ok)); then
  pass "3 etcd members form a cluster over peer TLS with the manifest's settings"
else
  fail "3 etcd members form a cluster over peer TLS with the manifest's settings"
  echo "$npass passed, $nfail failed"
  exit 1
fi

export ETCDCTL_API=3
ctl() { # IDENTITY ARGS...: etcdctl with the client certificate IDENTITY (none: no certificate)
  local who=$1 dir=$certs
  shift
  case $who in
    none) etcdctl --endpoints="$endpoints" --cacert="$certs/ca.crt" --dial-timeout=3s \
            --command-timeout=5s "$@"; return ;;
    foreign) dir=$tmp/foreign who=elastic-agent-daemon ;;
  esac
  etcdctl --endpoints="$endpoints" --cacert="$certs/ca.crt" --cert="$dir/$who.crt" \
    --key="$dir/$who.key" --dial-timeout=3s --command-timeout=5s "$@"
}

# ---- etcd-auth.sh, as the etcd-auth Job runs it (the daemons' ConfigMap + the root certificate) --
auth() {
  env -i PATH="$PATH" ELASTIC_POOL=default ELASTIC_RDZV_ENDPOINT="$agent_endpoints" \
    ETCDCTL_CACERT="$certs/ca.crt" ETCDCTL_CERT="$certs/etcd-root.crt" ETCDCTL_KEY="$certs/etcd-root.key" \
    sh "$src/deploy/k8s/base/etcd-auth.sh"
}
expect "etcd-auth.sh (ELASTIC_RDZV_ENDPOINT, root's certificate) sets up the roles and enables auth" 0 auth
expect "etcd-auth.sh again: idempotent" 0 auth
expect "root may list the users (auth is on: the others may not)" 0 ctl etcd-root user list
expect "etcd's /health (the probes') still says healthy with auth on" 0 healthy "${mport[0]}"

# ---- who may connect ------------------------------------------------------------------------------
expect "a client without a certificate is refused" 1 ctl none get /elastic/x
expect "a client with a certificate of another CA is refused" 1 ctl foreign get /elastic/x
expect "the peer certificate (CN etcd-peer, no etcd user) may not read" 1 ctl etcd-peer get /elastic/x
expect "the server certificate (CN etcd-server, no etcd user) may not read" 1 ctl etcd-server get /elastic/x
peer_get() { # CERT: GET /version on member 0's peer port with that certificate: an HTTP answer
  local code
  code=$(curl --http1.1 -s -o /dev/null -w '%{http_code}' -m 5 --cacert "$certs/ca.crt" --cert "$certs/$1.crt" \
         --key "$certs/$1.key" "https://127.0.0.1:${pport[0]}/version")
  [[ $code =~ ^[1-5][0-9][0-9]$ ]] # 000: the TLS handshake was refused
}
expect "the peer port answers a member (CN etcd-peer)" 0 peer_get etcd-peer
expect "the peer port refuses the daemon's certificate (ETCD_PEER_CERT_ALLOWED_CN)" 1 peer_get elastic-agent-daemon

# ---- what each role may write --------------------------------------------------------------------
denied() { # IDENTITY ARGS...: refused with "permission denied"
  local who=$1
  shift
  ! ctl "$who" "$@" >"$tmp/denied" 2>&1 && grep -qi "permission denied" "$tmp/denied"
}
S=elastic-agent-submit D=elastic-agent-daemon
expect "submit may queue a run (~pools/default/queue/)" 0 ctl $S put /elastic/~pools/default/queue/r1 '{}'
expect "submit may move the pool's next key" 0 ctl $S put /elastic/~pools/default/next '{}'
expect "submit may read a run's state (--wait)" 0 ctl $S get /elastic/r1/state
expect "submit may not write a run's state key" 0 denied $S put /elastic/r1/state '{"status":"closed"}'
expect "submit may not write a run's node keys" 0 denied $S put /elastic/r1/nodes/n1 '{}'
expect "submit may not write a daemon's record" 0 denied $S put /elastic/~pools/default/daemons/n1 '{}'
expect "submit may not queue in another pool" 0 denied $S put /elastic/~pools/other/queue/r1 '{}'
expect "the daemon may write a run's state key" 0 ctl $D put /elastic/r1/state '{}'
expect "the daemon may write anywhere under the prefix" 0 ctl $D put /elastic/~pools/default/daemons/n1 '{}'
expect "the daemon may not write outside the prefix" 0 denied $D put /other/x 1
ctl $D del --prefix /elastic/ >/dev/null 2>&1

# ---- the daemon with the DaemonSet's configuration -------------------------------------------------
mkdir -p "$tmp/volumes"
if ! python3 "$here/check_deploy.py" k8s "$tmp/base.yaml" --name base --source "$src" \
    --help-file <("$bin" --help) --serve-help <("$bin" serve --help) --results "$src/bench/RESULTS.md" \
    --secrets "$certs/secrets.yaml" \
    --volumes-out "$tmp/volumes" --env-out "$tmp/daemon.env" >"$tmp/check.out" 2>&1; then
  grep FAIL "$tmp/check.out" | indent
  fail "the DaemonSet's configuration (check_deploy.py k8s)"
fi
mapfile -d '' daemon_env <"$tmp/daemon.env"
http=$(free_port)
# signed specs (issue 29): a key of the test's own in allowed_signers, as an admin adds theirs
ssh-keygen -q -t ed25519 -N '' -C test -f "$tmp/signer" </dev/null >/dev/null
echo "tester@example.com $(cut -d' ' -f1,2 "$tmp/signer.pub")" >>"$tmp/volumes/allowed-signers/allowed_signers"
sign=(--sign-with "$tmp/signer")
env -i PATH="$PATH" TMPDIR="$tmp" "${daemon_env[@]}" ELASTIC_RDZV_ENDPOINT="$agent_endpoints" \
  ELASTIC_HTTP="127.0.0.1:$http" ELASTIC_NODE_ID=node-a "$bin" serve >"$tmp/serve.log" 2>&1 &
serve_pid=$!
pids+=("$serve_pid")
healthz() { [[ $(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$http/healthz") == 200 ]]; }
if wait_for 30 healthz; then
  pass "serve with the DaemonSet's configuration (TLS as elastic-agent-daemon) is healthy"
else
  tail -5 "$tmp/serve.log" | indent
  fail "serve with the DaemonSet's configuration (TLS as elastic-agent-daemon) is healthy"
fi
as() { # IDENTITY COMMAND...: elastic-agent as that etcd user (the submit Job's settings)
  local who=$1
  shift
  env -i PATH="$PATH" ELASTIC_POOL=default ELASTIC_RDZV_ENDPOINT="$agent_endpoints" \
    ELASTIC_CACERT="$certs/ca.crt" ELASTIC_CERT="$certs/$who.crt" ELASTIC_KEY="$certs/$who.key" \
    timeout 60 "$bin" "$@"
}
expect "submit --wait as elastic-agent-submit: the daemon runs it to success" 0 \
  as $S submit --run-id ok1 --min 1 --max 1 --wait "${sign[@]}" -- sh -c "echo ran >'$tmp/ran'"
expect "the run's command ran on the daemon" 0 test -s "$tmp/ran"
# a run that waits for a second node (there is one daemon): cancel it
expect "submit a run that waits for 2 nodes" 0 \
  as $S submit --run-id wait2 --min 2 --max 2 --join-timeout 600 "${sign[@]}" -- true
expect "cancel as elastic-agent-submit is refused (it writes the run's state)" 1 as $S cancel wait2
expect "cancel as elastic-agent-daemon closes the run" 0 as $D cancel wait2
expect "status --pool as elastic-agent-submit (read only)" 0 as $S status --pool default
kill -TERM "$serve_pid" 2>/dev/null
if wait "$serve_pid"; then pass "serve exits 0 on SIGTERM"; else fail "serve exits 0 on SIGTERM"; fi

echo
echo "deploy_etcd: $npass passed, $nfail failed"
((nfail == 0))
