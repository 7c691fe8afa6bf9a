#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The etcd certificates of deploy/k8s without cert-manager: a CA and the certificates that
# deploy/k8s/cert-manager would issue (same Secret names, common names, DNS names and usages),
# made with openssl, written as Kubernetes Secrets (type kubernetes.io/tls: tls.crt, tls.key,
# ca.crt) by `kubectl create secret --dry-run=client` (no cluster needed to make them):
#
#   deploy/k8s/certs/make-certs.sh --out ./etcd-certs
#   kubectl create namespace elastic-agent    # or let `kubectl apply -k deploy/k8s/base` make it
#   kubectl apply -f ./etcd-certs/secrets.yaml
#   kubectl apply -k deploy/k8s/base
#
#   Secret                     CN                    for
#   etcd-server-tls            etcd-server           etcd's client port (2379)
#   etcd-peer-tls              etcd-peer             between etcd members (2380)
#   elastic-agent-daemon-tls   elastic-agent-daemon  the daemons (etcd user elastic-agent-daemon)
#   elastic-agent-submit-tls   elastic-agent-submit  submit pods (etcd user elastic-agent-submit)
#   etcd-root-tls              root                  the etcd-auth Job only (etcd's root user)
#
# The CA's private key stays in --out (ca.key), never in the cluster: keep it offline. Run the
# script again with the same --out to renew the certificates under the same CA (a new CA only
# when ca.key is absent). Options:
#   --out DIR           where the keys, certificates and secrets.yaml go (created; mode 0700)
#   --namespace NS      the namespace of the deployment (default elastic-agent)
#   --members N         etcd members, named etcd-0 .. etcd-<N-1> (default 3)
#   --days N            validity of the certificates (default 365; the CA: 3650)
set -euo pipefail

out="" ns=elastic-agent members=3 days=365
while (($#)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    --namespace) ns=$2; shift 2 ;;
    --members) members=$2; shift 2 ;;
    --days) days=$2; shift 2 ;;
    -h | --help) sed -n '3,30p' "$0"; exit 0 ;;
    *) echo "make-certs: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -z $out ]]; then
  echo "make-certs: --out DIR is required (see --help)" >&2
  exit 2
fi
if ! [[ $members =~ ^[1-9][0-9]?$ && $days =~ ^[1-9][0-9]*$ && $ns =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]]; then
  echo "make-certs: bad --members, --days or --namespace" >&2
  exit 2
fi
for tool in openssl kubectl; do
  command -v "$tool" >/dev/null || { echo "make-certs: $tool is needed" >&2; exit 2; }
done

umask 077
mkdir -p "$out"
chmod 0700 "$out"
cd "$out"

# the names a client or a member dials: each member by its short name (etcd-0.etcd: the
# daemons' ELASTIC_RDZV_ENDPOINT; gRPC does not match a wildcard over a single label) and by
# the longer forms, the client Service, and the loopback (kubectl port-forward)
sans="DNS:localhost,IP:127.0.0.1"
for ((i = 0; i < members; i++)); do
  sans+=",DNS:etcd-$i.etcd"
done
for d in "$ns" "$ns.svc" "$ns.svc.cluster.local"; do
  sans+=",DNS:*.etcd.$d"
done
sans+=",DNS:etcd-client"
for d in "$ns" "$ns.svc" "$ns.svc.cluster.local"; do
  sans+=",DNS:etcd-client.$d"
done

newkey() { # FILE: an ECDSA P-256 key
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
}

if [[ ! -s ca.key || ! -s ca.crt ]]; then
  newkey ca.key
  openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/CN=elastic-agent etcd CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out ca.crt 2>/dev/null
  echo "make-certs: new CA $out/ca.crt (its key $out/ca.key: keep it offline)" >&2
else
  echo "make-certs: reusing the CA in $out" >&2
fi

leaf() { # NAME CN EXTENDED-KEY-USAGE [SANS]
  local name=$1 cn=$2 eku=$3 san=${4:-}
  newkey "$name.key"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature"
    echo "extendedKeyUsage=$eku"
    echo "subjectKeyIdentifier=hash"
    echo "authorityKeyIdentifier=keyid"
    [[ -n $san ]] && echo "subjectAltName=$san"
  } >"$name.ext"
  openssl req -new -key "$name.key" -subj "/CN=$cn" -out "$name.csr" 2>/dev/null
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -sha256 -days "$days" \
    -set_serial "0x$(openssl rand -hex 16)" -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
  openssl verify -CAfile ca.crt "$name.crt" >/dev/null
}

# server: "client auth" too, for etcd's own gRPC gateway, which dials etcd with this certificate
leaf etcd-server etcd-server serverAuth,clientAuth "$sans"
leaf etcd-peer etcd-peer serverAuth,clientAuth "$sans"
leaf elastic-agent-daemon elastic-agent-daemon clientAuth
leaf elastic-agent-submit elastic-agent-submit clientAuth
leaf etcd-root root clientAuth

: >secrets.yaml
for name in etcd-server etcd-peer elastic-agent-daemon elastic-agent-submit etcd-root; do
  echo "---" >>secrets.yaml
  kubectl create secret generic "$name-tls" --namespace "$ns" --type kubernetes.io/tls \
    --from-file=tls.crt="$name.crt" --from-file=tls.key="$name.key" --from-file=ca.crt=ca.crt \
    --dry-run=client -o yaml >>secrets.yaml
done
echo "make-certs: wrote $out/secrets.yaml: kubectl apply -f $out/secrets.yaml" >&2
