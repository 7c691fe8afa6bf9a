#!/usr/bin/env bash
# `cmake --install` into a scratch prefix and `cpack -G DEB` from the build directory: the files
# land where they should, the package's dependencies come from the linked libraries, and the
# packaged binary runs after `dpkg --unpack` into a scratch root.
# Usage: test_install.sh BUILD_DIR [modules|linked]
set -euo pipefail
build=$1
mode=${2:-modules} # modules: the etcd backends are ea-kv-*.so; linked: built into the binary
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if eval "$2"; then echo "PASS $1"; else echo "FAIL $1"; fail=1; fi; }

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
check "install: binary" "[ -x '$tmp/prefix/bin/elastic-agent' ]"
check "install: --version runs" "'$tmp/prefix/bin/elastic-agent' --version | grep -q '^elastic-agent '"
check "install: systemd unit" "[ -f '$tmp/prefix/lib/systemd/system/elastic-agent@.service' ]"
check "install: systemd unit (serve)" "[ -f '$tmp/prefix/lib/systemd/system/elastic-agent-serve.service' ]"
check "install: lifecycle hook" "[ -x '$tmp/prefix/sbin/elastic-agent-lifecycle-hook' ]"
check "install: guard binary" "[ -x '$tmp/prefix/libexec/elastic-agent/elastic-agent-guard' ]"
check "install: the Python package imports from the prefix's dist-packages" \
  "PYTHONPATH='$tmp/prefix/lib/python3/dist-packages' python3 -c 'import elastic_agent, sys; sys.exit(not elastic_agent.__file__.startswith(\"$tmp/prefix/\") or not callable(elastic_agent.wait_for_assignment))'"
check "install: the C header" "[ -f '$tmp/prefix/include/elastic_agent_assign.h' ]"
if [[ $mode == modules ]]; then
  check "install: etcd backend modules" "[ -f '$tmp/prefix/lib/elastic-agent/ea-kv-etcd.so' ] && [ -f '$tmp/prefix/lib/elastic-agent/ea-kv-etcd-gateway.so' ]"
  # the installed agent finds its modules (not the build tree's): a refused connection is exit 3
  # "unreachable"; a module that did not load would be exit 2
  for ep in 127.0.0.1:9 http://127.0.0.1:9; do
    check "install: backend module for $ep loads from the prefix" \
      "strace -f -e trace=openat -o '$tmp/trace' '$tmp/prefix/bin/elastic-agent' status --rdzv-endpoint $ep --run-id x 2>/dev/null; [ \$? = 3 ] && grep -q '$tmp/prefix/bin/../lib/elastic-agent/ea-kv-.*= [0-9]' '$tmp/trace'"
  done
else
  check "install: no backend modules in a linked build" "[ ! -e '$tmp/prefix/lib/elastic-agent' ]"
  for ep in 127.0.0.1:9 http://127.0.0.1:9; do
    check "install: linked backend for $ep" \
      "'$tmp/prefix/bin/elastic-agent' status --rdzv-endpoint $ep --run-id x 2>/dev/null; [ \$? = 3 ]"
  done
fi
check "install: man page" "zcat '$tmp/prefix/share/man/man1/elastic-agent.1.gz' | grep -c '^.SH OPTIONS' >/dev/null"
check "install: man page covers status" "zcat '$tmp/prefix/share/man/man1/elastic-agent.1.gz' | grep -c '^.SH STATUS COMMAND' >/dev/null"
check "install: bash completion" "bash -n '$tmp/prefix/share/bash-completion/completions/elastic-agent' && grep -q 'complete -F _elastic_agent elastic-agent' '$tmp/prefix/share/bash-completion/completions/elastic-agent'"

(cd "$tmp" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >/dev/null)
deb=$(ls "$tmp"/pkg/elastic-agent_*.deb)
check "cpack: one .deb" "[ -f '$deb' ]"
contents=$(dpkg-deb -c "$deb")
files=(usr/bin/elastic-agent usr/libexec/elastic-agent/elastic-agent-guard)
[[ $mode == modules ]] && files+=(usr/lib/elastic-agent/ea-kv-etcd.so usr/lib/elastic-agent/ea-kv-etcd-gateway.so)
for f in "${files[@]}" usr/lib/python3/dist-packages/elastic_agent/__init__.py \
         usr/lib/python3/dist-packages/elastic_agent/assign.py usr/include/elastic_agent_assign.h \
         systemd/system/elastic-agent@.service systemd/system/elastic-agent-serve.service \
         usr/share/man/man1/elastic-agent.1.gz usr/sbin/elastic-agent-lifecycle-hook \
         usr/share/bash-completion/completions/elastic-agent; do
  if grep -qF "$f" <<<"$contents"; then echo "PASS cpack: contains $f"
  else echo "FAIL cpack: contains $f"; fail=1; fi
done
depends=$(dpkg-deb -f "$deb" Depends)
check "cpack: Depends lists gRPC, curl, jansson, microhttpd" \
  "grep -q libgrpc <<<'$depends' && grep -q libcurl <<<'$depends' && grep -q libjansson <<<'$depends' && grep -q libmicrohttpd <<<'$depends'"
mkdir -p "$tmp/root/var/lib/dpkg/updates" "$tmp/root/var/lib/dpkg/info"
touch "$tmp/root/var/lib/dpkg/status"
dpkg --root="$tmp/root" --force-not-root --force-depends --unpack "$deb" >/dev/null 2>&1
check "dpkg --unpack: packaged binary runs" "'$tmp/root/usr/bin/elastic-agent' --version | grep -q '^elastic-agent '"
check "dpkg --unpack: the packaged Python package imports" \
  "PYTHONPATH='$tmp/root/usr/lib/python3/dist-packages' python3 -c 'import elastic_agent; elastic_agent.wait_for_assignment()'"
check "dpkg --unpack: packaged agent loads the etcd module" \
  "'$tmp/root/usr/bin/elastic-agent' status --rdzv-endpoint 127.0.0.1:9 --run-id x 2>/dev/null; [ \$? = 3 ]"
if ((fail)); then echo "install/package: FAILED"; exit 1; fi
echo "install/package: all checks passed"
