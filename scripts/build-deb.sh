#!/usr/bin/env bash
# Builds the Debian package elastic-agent_<version>_<arch>.deb from an existing build:
#   ./scripts/build.sh build && ./scripts/build-deb.sh [BUILD_DIR [OUT_DIR]]
# BUILD_DIR defaults to build/, OUT_DIR to BUILD_DIR. Prints the package's path.
# Contents: the (stripped) binary, the systemd units, the lifecycle hook, a man page (docs/
# elastic-agent.1 when the repository has one, else generated from --help), an example env file.
# Depends comes from dpkg-shlibdeps, so it names exactly the libraries the binary links.
# Needs dpkg-dev and binutils (both part of build-essential).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=${1:-build}
out=${2:-$build}
bin=$build/elastic-agent
if [[ ! -x "$bin" ]]; then
  echo "build-deb: $bin not found; run ./scripts/build.sh $build first" >&2
  exit 1
fi
version=$("$bin" --version | awk '{print $2}')
arch=$(dpkg --print-architecture)
maintainer=${DEB_MAINTAINER:-elastic-agent maintainers <elastic-agent@localhost>}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pkg=$work/debian/elastic-agent # where dpkg-shlibdeps expects a package's tree
mkdir -p "$out"

mkdir -p "$pkg/DEBIAN" # also how dpkg-shlibdeps finds the package's root
install -D -m 0755 "$bin" "$pkg/usr/bin/elastic-agent"
strip --strip-unneeded "$pkg/usr/bin/elastic-agent"
install -D -m 0755 deploy/cloud-init/elastic-agent-lifecycle-hook \
  "$pkg/usr/sbin/elastic-agent-lifecycle-hook"
install -D -m 0644 deploy/systemd/elastic-agent@.service \
  "$pkg/lib/systemd/system/elastic-agent@.service"
install -D -m 0644 deploy/systemd/elastic-agent-serve.service \
  "$pkg/lib/systemd/system/elastic-agent-serve.service"
install -D -m 0644 deploy/systemd/elastic-agent-lifecycle-hook.service \
  "$pkg/lib/systemd/system/elastic-agent-lifecycle-hook.service"
install -d -m 0755 "$pkg/etc/elastic-agent"
doc=$pkg/usr/share/doc/elastic-agent
install -D -m 0644 deploy/debian/copyright "$doc/copyright"
install -D -m 0644 deploy/systemd/example.env "$doc/examples/example.env"
install -D -m 0644 deploy/systemd/serve.env "$doc/examples/serve.env"
install -D -m 0644 deploy/cloud-init/user-data.yaml "$doc/examples/cloud-init-user-data.yaml"
install -D -m 0755 examples/hello_worker.sh "$doc/examples/hello_worker.sh"
# the workers' helpers (issue 32): the Python package for the system Python, the C header
for f in python/elastic_agent/*.py; do
  install -D -m 0644 "$f" "$pkg/usr/lib/python3/dist-packages/elastic_agent/$(basename "$f")"
done
install -D -m 0644 include/elastic_agent_assign.h "$pkg/usr/include/elastic_agent_assign.h"
for f in examples/pytorch/train_elastic.py examples/pytorch/train_warm.py examples/c/warm_worker.c; do
  install -D -m 0644 "$f" "$doc/examples/warm/$(basename "$f")"
done

# man page
man=$pkg/usr/share/man/man1/elastic-agent.1
mkdir -p "$(dirname "$man")"
if [[ -f docs/elastic-agent.1 ]]; then
  cp docs/elastic-agent.1 "$man"
else
  "$src/scripts/gen-man.sh" "$bin" "$version" >"$man"
fi
gzip -9n "$man"
# bash completion, generated from the same option table
install -d -m 0755 "$pkg/usr/share/bash-completion/completions"
"$src/scripts/gen-completion.sh" "$bin" >"$pkg/usr/share/bash-completion/completions/elastic-agent"

install -m 0755 deploy/debian/postinst deploy/debian/prerm deploy/debian/postrm "$pkg/DEBIAN/"
printf 'Source: elastic-agent\n\nPackage: elastic-agent\nArchitecture: any\n' >"$work/debian/control"
depends=$(cd "$work" && dpkg-shlibdeps -O debian/elastic-agent/usr/bin/elastic-agent |
          sed -n 's/^shlibs:Depends=//p')
size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
cat >"$pkg/DEBIAN/control" <<CONTROL
Package: elastic-agent
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $size
Depends: $depends, adduser
Section: admin
Priority: optional
Description: elastic distributed training agent (torchrun replacement)
 One agent runs on every node of a training job. The agents agree on the job's
 members through etcd v3 (or a shared directory on one host), start the node's
 worker processes with torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR...)
 and restart them with new ranks when a node joins, leaves or dies, or a worker
 fails. Includes the systemd units elastic-agent-serve.service (the node
 daemon, elastic-agent serve) and elastic-agent@.service (one run).
CONTROL
(cd "$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z |
   xargs -0 md5sum >DEBIAN/md5sums)
deb=$out/elastic-agent_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
echo "$deb"
