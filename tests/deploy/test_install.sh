#!/usr/bin/env bash
# `cmake --install` into a scratch prefix and `cpack -G DEB` from the build directory: the files
# land where they should, the package's dependencies come from the linked libraries, and the
# packaged binary runs after `dpkg --unpack` into a scratch root.
# Usage: test_install.sh BUILD_DIR
set -euo pipefail
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if eval "$2"; then echo "PASS $1"; else echo "FAIL $1"; fail=1; fi; }

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
check "install: binary" "[ -x '$tmp/prefix/bin/elastic-agent' ]"
check "install: --version runs" "'$tmp/prefix/bin/elastic-agent' --version | grep -q '^elastic-agent '"
check "install: systemd unit" "[ -f '$tmp/prefix/lib/systemd/system/elastic-agent@.service' ]"
check "install: lifecycle hook" "[ -x '$tmp/prefix/sbin/elastic-agent-lifecycle-hook' ]"
check "install: man page" "zcat '$tmp/prefix/share/man/man1/elastic-agent.1.gz' | grep -q '^.SH OPTIONS'"

(cd "$tmp" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" >/dev/null)
deb=$(ls "$tmp"/pkg/elastic-agent_*.deb)
check "cpack: one .deb" "[ -f '$deb' ]"
contents=$(dpkg-deb -c "$deb")
for f in usr/bin/elastic-agent systemd/system/elastic-agent@.service \
         usr/share/man/man1/elastic-agent.1.gz usr/sbin/elastic-agent-lifecycle-hook; do
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
if ((fail)); then echo "install/package: FAILED"; exit 1; fi
echo "install/package: all checks passed"
