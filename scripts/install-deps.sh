#!/usr/bin/env bash
# Installs the Debian packages elastic-agent needs. Idempotent: does nothing when everything is
# present; runs `apt-get update` once otherwise. `--test` adds what the test suite needs;
# `--list-test` only prints those test-only packages, one a line (tests/demo/check_demo.sh hides them).
set -euo pipefail

pkgs=(build-essential cmake pkg-config libgrpc-dev protobuf-c-compiler libprotobuf-c-dev
      libcurl4-openssl-dev libjansson-dev libmicrohttpd-dev libssl-dev procps)
n_runtime=${#pkgs[@]}
if [[ "${1:-}" == "--test" || "${1:-}" == "--list-test" ]]; then
  pkgs+=(libcriterion-dev etcd-server etcd-client openssh-server openssh-client iproute2 python3
        python3-torch python3-xgboost prometheus python3-yaml man-db time shellcheck systemd curl strace
        openssl stress-ng)
  # `kubectl kustomize` for the deploy checks: the machine image may ship its own kubectl
  # package, which conflicts with Debian's kubernetes-client; use whichever is there.
  command -v kubectl >/dev/null 2>&1 || pkgs+=(kubernetes-client)
  # node and npm for tests/deploy's schema validator (tests/deploy/validate: npm ci into a cache
  # dir at test time); the machine image may ship its own nodejs with npm in it
  command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
  # fuzzing (libFuzzer), static analysis, the valgrind pass (scripts/fuzz.sh, lint.sh)
  pkgs+=(clang libclang-rt-14-dev cppcheck valgrind)
fi
if [[ "${1:-}" == "--list-test" ]]; then
  printf '%s\n' "${pkgs[@]:n_runtime}"
  exit 0
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# etcd-server's package starts a system etcd on 2379 by default; tests start their own, so keep
# package scripts from starting services.
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
